"""How an ``analyze`` grows with the work: more partitions, and more bytes.

Run:  python benchmarks/scale_bench.py                         (3 brokers × 500 / 5,000 / 15,000 partitions)
      python benchmarks/scale_bench.py --partitions 500 5000   (any list)
      python benchmarks/scale_bench.py --bytes                 (1× / 2× / 4× the bytes over 3 × 8 partitions)

Why: issue 17 asks that time grow no faster than the work. Many partitions is the common shape
of a real cluster (thousands of small partitions, each with its segment, indexes, checkpoints
entries and leader-epoch-checkpoint), and it costs per partition replica, not per byte: discovery,
one task row per file, the per-replica job tables, the report's lanes. Every run is a fresh child
process (``kafka-forensics analyze``, as a user runs it) over a collection made by the writer's
bulk generator (``sample_data/writer/bulk.py``: in-sync replicas, clean shutdowns, so a correct
analysis finds nothing). Printed per size: the input (partition replicas, files, bytes), the wall
time and its phases (run.json), the report's size, the whole process tree's peak summed RSS and
PSS (``memory_bench.run_cli``), and the growth against the first row: time ratio over work ratio
(1.0 = linear; below 1, the fixed costs are being amortized). Nothing is asserted; on a shared
machine the figures vary with the load (printed with them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from memory_bench import MiB, run_cli  # noqa: E402


def collection(root: Path, partitions: int, records: int):
    from sample_data.writer.bulk import generate

    return generate(root, brokers=3, partitions=partitions, records=records, records_per_batch=20, seed=5)


def measure(brokers: list[Path], out: Path) -> dict:
    files = sum(1 for b in brokers for f in b.rglob("*") if f.is_file())
    size = sum(f.stat().st_size for b in brokers for f in b.rglob("*") if f.is_file())
    r = run_cli("analyze", brokers, out)
    run = json.loads((out / "run.json").read_text()) if (out / "run.json").exists() else {}
    findings = json.loads((out / "findings.json").read_text())["findings"] if (out / "findings.json").exists() else []
    report = out / "report.html"
    return {"files": files, "bytes": size, "wall": r["seconds"], "code": r["code"], "seconds": run.get("seconds", {}),
            "findings": len(findings), "report": report.stat().st_size if report.exists() else 0,
            "rss": r["peak_total_sum"], "pss": r["peak_total_pss"], "stderr": r["stderr_tail"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, nargs="+", default=[500, 5000, 15000])
    ap.add_argument("--records", type=int, default=40, help="records per partition for --partitions (default 40)")
    ap.add_argument("--bytes", action="store_true", help="instead: 3 brokers × 8 partitions at 1×/2×/4× the records")
    ap.add_argument("--base-records", type=int, default=400_000, help="records per partition of the 1× row of --bytes")
    args = ap.parse_args()

    sizes = [(8, args.base_records * k) for k in (1, 2, 4)] if args.bytes else [(p, args.records) for p in args.partitions]
    rows = []
    for partitions, records in sizes:
        tmp = Path(tempfile.mkdtemp(prefix="kf-scale-bench-"))
        try:
            t0 = time.monotonic()
            g = collection(tmp / "in", partitions, records)
            made = time.monotonic() - t0
            m = measure(list(g.brokers), tmp / "out")
            m |= {"partitions": partitions, "records": records, "made": made}
            rows.append(m)
            print(f"  {partitions} partitions x {records} records: exit {m['code']} in {m['wall']:.0f} s "
                  f"(generated in {made:.0f} s)", file=sys.stderr)
            if m["code"] not in (0, 1):
                print(m["stderr"], file=sys.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'replicas':>8} {'files':>7} {'MB':>7} {'wall s':>7} {'ingest s':>8} {'jobs s':>7} {'findings':>8} "
          f"{'report MB':>9} {'RSS MiB':>8} {'PSS MiB':>8} {'work x':>7} {'time x':>7} {'time/work':>9}")
    base = rows[0] if rows else None
    for m in rows:
        work = (m["bytes"] / base["bytes"]) if args.bytes else (m["partitions"] / base["partitions"])
        tx = m["wall"] / base["wall"]
        s = m["seconds"]
        print(f"{3 * m['partitions']:>8} {m['files']:>7} {m['bytes'] / 1e6:>7.1f} {m['wall']:>7.1f} {s.get('parse', 0):>8.1f} "
              f"{s.get('jobs', 0):>7.1f} {m['findings']:>8} {m['report'] / 1e6:>9.2f} {m['rss'] / MiB:>8.0f} "
              f"{m['pss'] / MiB:>8.0f} {work:>7.1f} {tx:>7.2f} {tx / work:>9.2f}")
    if len(rows) > 1 and not args.bytes:
        extra = rows[-1]["wall"] - rows[0]["wall"]
        replicas = 3 * (rows[-1]["partitions"] - rows[0]["partitions"])
        print(f"the extra {replicas} partition replicas cost {extra:.0f} s ({extra / replicas * 1000:.1f} ms each)")


if __name__ == "__main__":
    main()
