"""How an ``analyze`` grows with the depth of a partition: one partition, more and more batches.

Run:  python benchmarks/depth_bench.py                       (25 / 100 / 400 MB a replica, with and without producer ids,
                                                               and the 100 MB case with its last 10 % diverging)
      python benchmarks/depth_bench.py --sizes 25 100        (any list, MB a replica)
      python benchmarks/depth_bench.py --wide                (3 brokers x 8 partitions x 100 MB, healthy: 2.4 GB)
      python benchmarks/depth_bench.py --data DIR            (keep the generated collections there, reused on later runs)

Why: issue 35. Real partitions are deep (a 1 GiB segment of small batches is ~900,000 batches, and
a partition holds many segments), and a step whose cost grows faster than its batches never
finishes there, however fast it is on a wide or small collection. Data: the writer's bulk
generator (``sample_data/writer/bulk.py``), one partition replicated on 3 brokers, byte-identical
replicas, clean shutdown, batches of 10 records of ~100 B (~1.2 KiB, uncompressed), as a plain
producer writes them (``--no-pid``) or an idempotent one (``--pid``). Diverging: the same, but
the last 10 % of the batches on broker 3 hold other records at the same offsets (same leader
epoch): the comparison must cost the differing tenth, not the whole log.

Every run is a fresh child process (``kafka-forensics analyze``, as a user runs it). Printed per
collection: the bytes, the wall time of the whole process, its ingest and jobs phases (run.json),
the peak summed PSS of the process tree, and growth against the first row of its series:
time ratio over work ratio (1.0 = linear, the target is <= 1.25 from 25 to 400 MB). Nothing is
asserted; on a shared machine the figures vary with the load (printed with them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from memory_bench import MiB, run_cli  # noqa: E402

RECORDS_PER_BATCH = 10
VALUE_SIZE = 100
BATCH_BYTES = 1271  # one batch of 10 such records on disk, as the generator writes it


def records_for(mb: float) -> int:
    return int(mb * 1e6 / BATCH_BYTES) * RECORDS_PER_BATCH


def healthy(root: Path, mb: float, pid: bool, partitions: int = 1) -> list[Path]:
    """``partitions`` partitions of ``mb`` MB each, on 3 brokers, byte-identical replicas."""
    from sample_data.writer.bulk import generate

    g = generate(root, brokers=3, partitions=partitions, records=records_for(mb), records_per_batch=RECORDS_PER_BATCH,
                 value_size=VALUE_SIZE, idempotent=pid, seed=7)
    return list(g.brokers)


def diverging(root: Path, mb: float, pid: bool, tail: float = 0.1) -> list[Path]:
    """One partition of ``mb`` MB on 3 brokers whose last ``tail`` of batches differ on broker 3:
    the log is written as two segments (the head, then the tail from its offset on), and broker 3's
    tail segment is written from other records (another seed) at the same offsets and epoch."""
    from sample_data.writer.bulk import make_templates, write_bulk_partition
    from sample_data.writer.log import LogConfig, write_broker_files
    from sample_data.writer.records import NO_PRODUCER_ID

    n = records_for(mb) // RECORDS_PER_BATCH
    head = n - int(n * tail)
    config = LogConfig(segment_bytes=1 << 30, index_interval_bytes=4096)
    pid_args = {"producer_id": 1000} if pid else {"producer_id": NO_PRODUCER_ID}
    brokers = []
    for b in (1, 2, 3):
        d = root / f"broker-{b}"
        part = d / "bench-0"
        seed = 7 if b < 3 else 8
        write_bulk_partition(part, make_templates("none", RECORDS_PER_BATCH, VALUE_SIZE, 12, 8, 7), head, config, seed=7,
                             **pid_args)
        t = root / f"tail-{b}"
        write_bulk_partition(t, make_templates("none", RECORDS_PER_BATCH, VALUE_SIZE, 12, 8, seed), n - head, config, seed=seed,
                             base_offset=head * RECORDS_PER_BATCH, t0=1_735_689_600_000 + head,
                             **pid_args, **({"producer_epoch": 1} if pid else {}))
        for f in t.iterdir():
            if f.suffix in (".log", ".index", ".timeindex", ".snapshot"):
                f.rename(part / f.name)
        shutil.rmtree(t)
        leo = {("bench", 0): n * RECORDS_PER_BATCH}
        write_broker_files(d, b, "QmVuY2hDbHVzdGVySWQwMA", directory_id=None, hw=leo, recovery_points=leo,
                           log_starts={("bench", 0): 0}, clean_shutdown=True)
        brokers.append(d)
    return brokers


def measure(brokers: list[Path], out: Path, driver_memory: str | None = None) -> dict:
    size = sum(f.stat().st_size for b in brokers for f in b.rglob("*") if f.is_file())
    if out.exists():
        shutil.rmtree(out)
    r = run_cli("analyze", brokers, out, driver_memory=driver_memory)
    run = json.loads((out / "run.json").read_text()) if (out / "run.json").exists() else {}
    doc = json.loads((out / "findings.json").read_text()) if (out / "findings.json").exists() else {}
    s = run.get("seconds", {})
    ingest = s.get("discover", 0) + s.get("parse", 0) + s.get("write", 0)
    return {"bytes": size, "wall": r["seconds"], "code": r["code"], "ingest": ingest, "jobs": s.get("jobs", 0),
            "pss": r["peak_total_pss"], "rss": r["peak_total_sum"], "summary": doc.get("summary", {}),
            "stderr": r["stderr_tail"]}


def table(title: str, rows: list[tuple[str, dict]]) -> None:
    print(f"\n{title}")
    print(f"{'collection':34}{'MB':>8}{'whole s':>9}{'ingest s':>10}{'jobs s':>8}{'jobs/ingest':>12}{'PSS MiB':>9}"
          f"{'growth':>8}{'jobs growth':>12}  findings")
    first = rows[0][1] if rows else None
    for name, m in rows:
        work = m["bytes"] / first["bytes"]
        growth = (m["wall"] / first["wall"]) / work if first["wall"] else 0
        jg = (m["jobs"] / first["jobs"]) / work if first["jobs"] else 0
        s = m["summary"]
        print(f"{name:34}{m['bytes'] / 1e6:8.0f}{m['wall']:9.1f}{m['ingest']:10.1f}{m['jobs']:8.1f}"
              f"{m['jobs'] / m['ingest'] if m['ingest'] else 0:12.2f}{m['pss'] / MiB:9.0f}{growth:8.2f}{jg:12.2f}  "
              f"exit {m['code']}: {s.get('errors', '?')} errors, {s.get('warnings', '?')} warnings")
        if m["code"] not in (0, 1):
            print(m["stderr"])


def per_core_against_kafka(rows: list[tuple[str, dict]], collection: Path, tmp: Path) -> None:
    """The whole ``analyze`` against kafka-dump-log --deep-iteration, in MB/s a core (the issue's
    target: >= 5x). Kafka reads broker 1's segments (a third of the bytes) pinned to one core, its
    JVM start (a run on a 10 KiB segment) subtracted from its CPU-seconds; ours is the whole
    process, start included, its wall time over the machine's cores (it uses them all)."""
    from dump_bench import kafka_dump_log, write_segment
    from ingest_small_bench import kafka_cpu

    script = kafka_dump_log(tmp)
    if script is None:
        print("kafka-dump-log: not available (java or ../shared/tools missing)")
        return
    tiny = tmp / "tiny" / "00000000000000000000.log"
    tiny.parent.mkdir(exist_ok=True)
    write_segment(tiny, 0.01, 10, 95)
    segments = sorted((collection / "broker-1").rglob("*.log"))
    size = sum(f.stat().st_size for f in segments)
    whole = kafka_cpu(script, ",".join(map(str, segments)))
    start = kafka_cpu(script, tiny)
    theirs = size / 1e6 / (whole - start)
    cores = os.cpu_count() or 1
    print(f"kafka-dump-log --deep-iteration: {size / 1e6:.0f} MB in {whole:.1f} CPU-s ({start:.1f} of them its JVM start): "
          f"{theirs:.1f} MB/s a core")
    for name, m in rows:
        ours = m["bytes"] / 1e6 / (m["wall"] * cores)
        print(f"  {name}: analyze {ours:.1f} MB/s a core (whole process, {cores} cores) = {ours / theirs:.2f}x kafka-dump-log "
              f"(target >= 5x); ingest phase alone {m['bytes'] / 1e6 / (m['ingest'] * cores) / theirs:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[25, 100, 400], help="MB a replica (default 25 100 400)")
    ap.add_argument("--pid", dest="pids", action="store_const", const=[True], help="only an idempotent producer's batches")
    ap.add_argument("--no-pid", dest="pids", action="store_const", const=[False], help="only a plain producer's batches")
    ap.add_argument("--no-diverging", action="store_true", help="skip the diverging 100 MB case")
    ap.add_argument("--wide", action="store_true", help="instead: 3 brokers x 8 partitions x 100 MB, healthy")
    ap.add_argument("--driver-memory", default=None, help="KF_DRIVER_MEMORY for the runs (e.g. 1g)")
    ap.add_argument("--data", type=Path, default=None, help="keep the collections here (reused when present)")
    args = ap.parse_args()
    pids = args.pids or [False, True]

    tmp = Path(tempfile.mkdtemp(prefix="kf-depth-bench-"))
    data = args.data or tmp / "data"

    def made(name: str, make) -> list[Path]:
        root = data / name
        if not (root / "broker-3").is_dir():
            if root.exists():
                shutil.rmtree(root)
            root.mkdir(parents=True)
            make(root)
        return sorted(root.glob("broker-*"))

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    try:
        if args.wide:
            rows = []
            for pid in pids:
                name = f"8x100MB-{'pid' if pid else 'nopid'}"
                brokers = made(name, lambda r, pid=pid: healthy(r, 100, pid, partitions=8))
                rows.append((name, measure(brokers, tmp / "out", args.driver_memory)))
                print(f"  {name}: done", file=sys.stderr, flush=True)
            table("3 brokers x 8 partitions x 100 MB, healthy", rows)
            per_core_against_kafka(rows, data / rows[0][0], tmp)
            return
        for pid in pids:
            rows = []
            for mb in args.sizes:
                name = f"{mb:g}MB-{'pid' if pid else 'nopid'}"
                brokers = made(name, lambda r, mb=mb, pid=pid: healthy(r, mb, pid))
                rows.append((name, measure(brokers, tmp / "out", args.driver_memory)))
                print(f"  {name}: done", file=sys.stderr, flush=True)
            if not args.no_diverging:
                name = f"100MB-{'pid' if pid else 'nopid'}-diverging-10%"
                brokers = made(name, lambda r, pid=pid: diverging(r, 100, pid))
                rows.append((name, measure(brokers, tmp / "out", args.driver_memory)))
            table(f"one partition, 3 replicas, {'idempotent producer' if pid else 'plain producer'} "
                  "(growth: time ratio / work ratio against the first row)", rows)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
