"""End-to-end ingest benchmark: generated segments across 3 brokers → Parquet tables, on Spark.

Run:  python benchmarks/ingest_bench.py            (≥ 1 GB: 3 brokers × 4 partitions, a few minutes)
      python benchmarks/ingest_bench.py --quick    (~60 MB: a smoke test)

Data: ``sample_data.writer.bulk`` (3 brokers, each a full replica; 64 MiB segments, 100 records of
~160 bytes per batch, uncompressed), generated once into a temp dir. Each ingest runs in a fresh
child process (its own JVM, as the CLI would), with ``local[1]`` then ``local[2]``, and prints:
- wall time of the child (Spark start + ingest, no catalog) and MB/s of input;
- the speed-up local[1] → local[2] (target ≥ 1.8× on 2 idle cores);
- the share of time outside parsing: 1 − (seconds the tasks spent reading, hashing and parsing,
  summed over tasks) / (cores × wall). That is Spark start, scheduling and the Parquet writes;
  with Spark start also shown on its own, and the same figures for the ingest alone (wall minus
  Spark start: what a long-lived session or a cluster pays);
- peak RSS of the whole process tree (driver Python + JVM + Python workers), sampled every 0.2 s.
Nothing is asserted; on a shared machine the figures vary with the load (printed with them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child(master: str, src: Path, out: Path) -> None:
    """One ingest in this process; prints a JSON line of timings."""
    sys.path.insert(0, str(REPO))
    from jobs.ingest.pipeline import ingest
    from jobs.store.spark import get_session

    t0 = time.monotonic()
    spark = get_session(master)
    spark.range(1).count()
    t_session = time.monotonic() - t0
    res = ingest(spark, [src], out, progress=False)
    wall = time.monotonic() - t0
    print(json.dumps({"master": master, "session": t_session, "wall": wall, "bytes": res.bytes, "files": res.files,
                      "tasks": res.tasks, "rows": res.rows, "seconds": res.seconds}))
    spark.stop()


def _tree_rss(pid: int, field: str = "VmRSS") -> int:
    """RSS (bytes) of ``pid`` and all its descendants, from /proc; ``field="Pss"``: their summed
    proportional set size instead (shared pages counted once, from smaps_rollup)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                continue
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            with open(f"/proc/{p}/status" if field == "VmRSS" else f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith(f"{field}:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def run_child(master: str, src: Path, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.Popen([sys.executable, __file__, "--child", master, str(src), str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak = 0
    stop = threading.Event()

    def sample():
        nonlocal peak
        while not stop.wait(0.2):
            peak = max(peak, _tree_rss(proc.pid))

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    stdout, _ = proc.communicate()
    stop.set()
    t.join()
    if proc.returncode != 0:
        raise SystemExit(f"child {master} failed ({proc.returncode})")
    result = json.loads(stdout.strip().splitlines()[-1])
    result["peak_rss"] = peak
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="~60 MB instead of ≥ 1 GB")
    ap.add_argument("--child", nargs=3, metavar=("MASTER", "SRC", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--keep", type=Path, help="generate into (and keep) this folder")
    ap.add_argument("--records", type=int, help="records per partition (default 520000, ~1.25 GB; --quick 30000)")
    args = ap.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), Path(args.child[2]))
        return
    sys.path.insert(0, str(REPO))
    from sample_data.writer.bulk import generate

    tmp = Path(tempfile.mkdtemp(prefix="kf-ingest-bench-"))
    src = args.keep or tmp / "data"
    records = args.records or (30_000 if args.quick else 520_000)  # per partition; 4 partitions, 3 brokers
    try:
        if not (src / "broker-3").is_dir():
            g = generate(src, brokers=3, partitions=4, records=records, segment_bytes=64 << 20, value_size=145)
            print(f"generated {g.bytes / 1e6:.0f} MB in {g.seconds:.1f} s: 3 brokers x 4 partitions x {records} records", file=sys.stderr)
        results = {m: run_child(m, src, tmp / f"out-{m[6]}") for m in ("local[1]", "local[2]")}
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'master':<9} {'MB':>7} {'files':>6} {'tasks':>5} {'wall s':>7} {'MB/s':>7} {'spark start s':>13} "
          f"{'parse s (tasks)':>15} {'outside parsing':>15} {'ingest s':>8} {'ingest MB/s':>11} {'outside (ingest)':>16} {'peak RSS MB':>11}")
    for m, r in results.items():
        cores = int(m[6])
        outside = 1 - r["seconds"]["task_parse"] / (cores * r["wall"])
        ingest_s = r["wall"] - r["session"]
        outside_ingest = 1 - r["seconds"]["task_parse"] / (cores * ingest_s)
        print(f"{m:<9} {r['bytes'] / 1e6:>7.0f} {r['files']:>6} {r['tasks']:>5} {r['wall']:>7.1f} {r['bytes'] / 1e6 / r['wall']:>7.1f} "
              f"{r['session']:>13.1f} {r['seconds']['task_parse']:>15.1f} {outside:>15.0%} {ingest_s:>8.1f} "
              f"{r['bytes'] / 1e6 / ingest_s:>11.1f} {outside_ingest:>16.0%} {r['peak_rss'] / 1e6:>11.0f}")
    one, two = results["local[1]"], results["local[2]"]
    print(f"speed-up local[1] -> local[2]: {one['wall'] / two['wall']:.2f}x wall, "
          f"{(one['wall'] - one['session']) / (two['wall'] - two['session']):.2f}x excluding Spark start (target >= 1.8x)")
    print(f"rows: {two['rows']}; stage seconds (local[2]): " + ", ".join(f"{k} {v:.1f}" for k, v in two["seconds"].items()))


if __name__ == "__main__":
    main()
