"""End-to-end ingest benchmark: generated segments across 3 brokers → Parquet tables, on Spark.

Run:  python benchmarks/ingest_bench.py            (≥ 1 GB: 3 brokers × 4 partitions, a few minutes)
      python benchmarks/ingest_bench.py --quick    (~60 MB: a smoke test)
      python benchmarks/ingest_bench.py --records-per-batch 10 --records 300000   (~1.2 KiB batches, ~650 MB)
      python benchmarks/ingest_bench.py --one-segment   (one ~600 MB segment: whole, and in spans on local[2])

Data: ``sample_data.writer.bulk`` (3 brokers, each a full replica; 64 MiB segments, 100 records of
~160 bytes per batch, uncompressed; ``--records-per-batch``), generated once into a temp dir. The
generator tiles a few record sets, so keys and values repeat: Parquet files are smaller than real
data's would be (the digest columns are written plain either way). Each ingest runs in a fresh
child process (its own JVM, as the CLI would), with ``local[1]`` then ``local[2]``, and prints:
- wall time of the child (Spark start + ingest, no catalog) and MB/s of input;
- the speed-up local[1] → local[2] (target ≥ 1.8× on 2 idle cores);
- the share of time outside parsing: 1 − (seconds the tasks spent reading, hashing and parsing,
  summed over tasks) / (cores × wall). That is Spark start, scheduling and the Parquet writes;
  with Spark start also shown on its own, and the same figures for the ingest alone (wall minus
  Spark start: what a long-lived session or a cluster pays);
- peak RSS of the whole process tree (driver Python + JVM + Python workers), sampled every 0.2 s;
- where each nanosecond per record goes: one parse task's code (no Spark) on the first segments,
  in this process, its time split by what the profiler saw (reading, file hash, batch scan and
  decode, record hashes, hex, Arrow glue, Parquet writes);
- the machine's own ceiling for two cores: the same task code in one plain process, then in two
  at once (no Spark, no JVM). ``local[2]`` cannot scale better than that;
- kafka-dump-log --deep-iteration over one broker's segments (a third of the bytes), pinned to one
  core, and on an empty segment (its JVM start): the steady-state MB/s per core of Kafka's reader
  against ours (``ingest MB/s`` of local[1]: wall minus our Spark start). Skipped with --no-kafka
  or without Java and ../shared/tools.
With ``--schedule DIR`` (an existing collection, nothing generated): the tasks ``ingest`` plans for
``local[1]`` and ``local[2]`` (spans as ``balanced_span_bytes`` picks them, and as a core's share
did before), each run here and timed in CPU-seconds, and a Python worker's start (a fresh
process's imports and numba kernels, as a worker's first task pays them): the speed-up
``local[2]`` can reach with those tasks handed to two workers largest first. That is the ratio
in CPU terms, for when the machine's load makes wall times meaningless.
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


def child(master: str, src: Path, out: Path, span_bytes: int | None = None) -> None:
    """One ingest in this process; prints a JSON line of timings."""
    sys.path.insert(0, str(REPO))
    from jobs.ingest.pipeline import ingest
    from jobs.session.start import get_session

    t0 = time.monotonic()
    size = sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
    spark = get_session(master, input_bytes=size)  # (sized as ``kafka-forensics ingest`` sizes it)
    spark.range(1).count()
    t_session = time.monotonic() - t0
    res = ingest(spark, [src], out, progress=False, span_bytes=span_bytes)
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


def run_child(master: str, src: Path, out: Path, span_bytes: int | None = None) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    spans = ["--span-bytes", str(span_bytes)] if span_bytes else []
    proc = subprocess.Popen([sys.executable, __file__, "--child", master, str(src), str(out), *spans],
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


# what the profiler's functions are, for the per-record split (first match wins; else "Arrow glue")
STEPS = [
    ("Parquet write", ("write_table", "close", "ParquetWriter")),
    ("record SHA-256", ("sha256",)),
    ("hex of digests", ("hexlify",)),
    ("file SHA-256", ("'update' of '_hashlib",)),
    ("read (pread)", ("pread", "readinto")),
    ("CRC-32C", ("crc32c",)),
    ("scan + decode kernels", ("scan", "read_headers", "decode_v2", "_decode", "crc_update")),
]


def step_of(func: tuple) -> str:
    name = f"{func[0]}:{func[2]}"
    return next((step for step, keys in STEPS if any(k in name for k in keys)), "Arrow glue, Python")


def segment_tasks(src: Path, work: Path, n: int) -> list[dict]:
    """The first ``n`` parse tasks of one segment each of ``src``, largest first (every file
    alone: a group of 1 byte; ``--quick``'s segments are too small to be tasks of their own)."""
    from jobs.ingest import discover as disc
    from jobs.ingest.pipeline import plan_tasks

    found = disc.discover_inputs([src], work)
    return [t for t in plan_tasks(found.files, 1) if t["files"][0]["kind"] == "segment"][:n]


def per_record(src: Path, segments: int = 4) -> tuple[int, dict[str, float]]:
    """(records, seconds per step) of one parse task's code over the first ``segments`` segments,
    in this process (kernels warmed on one segment first), as ``cProfile`` splits it."""
    import cProfile
    import pstats

    from jobs.ingest.task_writer import write_task
    from jobs.ingest.tasks import run_task
    from parsers.common import keep_freed_memory

    work = Path(tempfile.mkdtemp(prefix="kf-ingest-steps-"))
    try:
        tasks = segment_tasks(src, work, segments + 1)
        keep_freed_memory()  # (as a Spark worker's parse task does)
        write_task(str(work / "warm"), 0, 0, run_task(tasks[0]["files"]))
        prof = cProfile.Profile()
        prof.enable()
        counts = [write_task(str(work / "t"), i, 0, run_task(t["files"])) for i, t in enumerate(tasks[1:])]
        prof.disable()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    records = sum(r["rows"] for c in counts for r in c.to_pylist() if r["table"] == "records")
    steps: dict[str, float] = {}
    for func, (_, _, tottime, _, _) in pstats.Stats(prof).stats.items():
        step = step_of(func)
        steps[step] = steps.get(step, 0.0) + tottime
    return records, steps


def ceiling(src: Path) -> tuple[float, float]:
    """MB/s of the task code in one plain process, and summed over two at once (no Spark)."""
    def run(n: int) -> float:
        procs = [subprocess.Popen([sys.executable, __file__, "--plain", str(src), str(i), str(n)], stdout=subprocess.PIPE, text=True)
                 for i in range(n)]
        return sum(float(p.communicate()[0].split()[-1]) for p in procs)
    return run(1), run(2)


def plain(src: Path, index: int, of: int) -> None:
    """Child of ``ceiling``: every ``of``-th segment task from ``index``, timed after a warm-up; prints MB/s."""
    from jobs.ingest.task_writer import write_task
    from jobs.ingest.tasks import run_task
    from parsers.common import keep_freed_memory

    work = Path(tempfile.mkdtemp(prefix="kf-ingest-plain-"))
    try:
        tasks = segment_tasks(src, work, 8)
        keep_freed_memory()  # (as a Spark worker's parse task does)
        write_task(str(work / "warm"), 0, 0, run_task(tasks[-1]["files"]))
        mine = tasks[index::of] if of > 1 else tasks[:4]
        t0 = time.perf_counter()
        for i, t in enumerate(mine):
            write_task(str(work / "t"), i, 0, run_task(t["files"]))
        print(sum(t["bytes"] for t in mine) / 1e6 / (time.perf_counter() - t0))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def kafka_reader(src: Path) -> tuple[int, float, float] | None:
    """(bytes, seconds, seconds on an empty segment) of kafka-dump-log --deep-iteration over
    broker 1's segments, pinned to one core, stdout to /dev/null."""
    sys.path.insert(0, str(Path(__file__).parent))
    from dump_bench import PIN, kafka_dump_log

    work = Path(tempfile.mkdtemp(prefix="kf-ingest-kafka-"))
    try:
        tool = kafka_dump_log(work)
        if tool is None:
            return None
        segments = sorted((src / "broker-1").rglob("*.log"))
        empty = work / "00000000000000000000.log"
        empty.touch()

        def run(files: list[Path]) -> float:
            t0 = time.perf_counter()
            subprocess.run([*PIN, str(tool), "--deep-iteration", "--files", ",".join(map(str, files))],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            return time.perf_counter() - t0

        return sum(f.stat().st_size for f in segments), run(segments), run([empty])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="~60 MB instead of ≥ 1 GB")
    ap.add_argument("--child", nargs=3, metavar=("MASTER", "SRC", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--plain", nargs=3, metavar=("SRC", "INDEX", "OF"), help=argparse.SUPPRESS)
    ap.add_argument("--no-kafka", action="store_true", help="do not run kafka-dump-log")
    ap.add_argument("--records-per-batch", type=int, default=100,
                    help="records per batch (default 100: ~16 KiB batches; 10: ~1.2 KiB, Kafka's worst case per byte)")
    ap.add_argument("--keep", type=Path, help="generate into (and keep) this folder")
    ap.add_argument("--records", type=int, help="records per partition (default 520000, ~1.25 GB; --quick 30000)")
    ap.add_argument("--one-segment", action="store_true",
                    help="one broker, one partition, one segment (~600 MB; --quick ~50 MB): local[2] reading it whole "
                         "and in spans cut at its index's batch positions")
    ap.add_argument("--span-bytes", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--schedule", type=Path, metavar="DIR", help="per-task and per-worker CPU of DIR's tasks on 1 and 2 cores")
    ap.add_argument("--worker-start", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker_start or args.schedule:
        sys.path.insert(0, str(REPO))
    if args.worker_start:
        worker_start(args.worker_start)
        return
    if args.schedule:
        schedule(args.schedule)
        return
    if args.child:
        child(args.child[0], Path(args.child[1]), Path(args.child[2]), args.span_bytes)
        return
    if args.one_segment:
        one_segment(args)
        return
    sys.path.insert(0, str(REPO))
    if args.plain:
        plain(Path(args.plain[0]), int(args.plain[1]), int(args.plain[2]))
        return
    from sample_data.writer.bulk import generate

    tmp = Path(tempfile.mkdtemp(prefix="kf-ingest-bench-"))
    src = args.keep or tmp / "data"
    records = args.records or (30_000 if args.quick else 520_000)  # per partition; 4 partitions, 3 brokers
    try:
        if not (src / "broker-3").is_dir():
            g = generate(src, brokers=3, partitions=4, records=records, segment_bytes=64 << 20, value_size=145,
                         records_per_batch=args.records_per_batch)
            print(f"generated {g.bytes / 1e6:.0f} MB in {g.seconds:.1f} s: 3 brokers x 4 partitions x {records} records, "
                  f"{args.records_per_batch} a batch", file=sys.stderr)
        results = {m: run_child(m, src, tmp / f"out-{m[6]}") for m in ("local[1]", "local[2]")}
        records, steps = per_record(src)
        one_proc, two_procs = ceiling(src)
        kafka = None if args.no_kafka else kafka_reader(src)
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
    total = sum(steps.values())
    print(f"one parse task's code, no Spark, {records} records: {total * 1e9 / records:.0f} ns a record "
          f"({records / total / 1e6:.2f} M records/s, one core):")
    for step, sec in sorted(steps.items(), key=lambda kv: -kv[1]):
        print(f"  {step:<24} {sec * 1e9 / records:>6.0f} ns  {sec / total:>4.0%}")
    print(f"two cores, no Spark: one process {one_proc:.0f} MB/s, two at once {two_procs:.0f} MB/s summed "
          f"({two_procs / one_proc:.2f}x: the most local[2] can gain here)")
    if kafka is not None:
        size, secs, empty = kafka
        theirs = size / 1e6 / (secs - empty)
        ours_mb = one["bytes"] / 1e6 / (one["wall"] - one["session"])
        print(f"kafka-dump-log --deep-iteration, one core: {size / 1e6:.0f} MB in {secs:.1f} s, JVM start {empty:.1f} s: "
              f"{theirs:.1f} MB/s steady; ours (local[1] minus Spark start) {ours_mb:.1f} MB/s: {ours_mb / theirs:.1f}x "
              f"(target >= 10x); whole process, ours local[1] {one['wall']:.1f} s for {one['bytes'] / 1e6:.0f} MB against "
              f"Kafka's {secs * one['bytes'] / size:.1f} s at its rate")


def worker_start(src: Path) -> None:
    """Child of ``schedule``: a fresh process imports what a Python worker's parse function imports
    and runs ``src``'s smallest task of one segment (its first, cold: pandas through pyarrow's
    first list, numba's kernels from their cache); prints its CPU-s and that task's number."""
    import resource

    from jobs.ingest import discover as disc
    from jobs.ingest.pipeline import plan_tasks, read_task, task_results  # noqa: F401 (as the parse function)
    from jobs.ingest.task_writer import write_task
    from jobs.ingest.tasks import run_task
    from parsers.common import keep_freed_memory

    work = Path(tempfile.mkdtemp(prefix="kf-ingest-start-"))
    try:
        tasks = plan_tasks(disc.discover_inputs([src], work / "disc").files, 1)
        task = min((t for t in tasks if t["files"][0]["kind"] == "segment"), key=lambda t: t["bytes"])
        keep_freed_memory()
        write_task(str(work / "t"), 0, 0, run_task(task["files"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r = resource.getrusage(resource.RUSAGE_SELF)
    print(r.ru_utime + r.ru_stime, json.dumps(task["files"][0]["path"]))


def schedule(src: Path) -> None:
    """Per-task CPU of ``src``'s tasks as ingest plans them on one and two cores, and the speed-up
    two workers reach with them (each worker first paying its start), before and after the
    balanced spans."""
    import resource

    from jobs.ingest import discover as disc
    from jobs.ingest import pipeline as P
    from jobs.ingest.task_writer import write_task
    from jobs.ingest.tasks import run_task
    from parsers.common import keep_freed_memory

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    work = Path(tempfile.mkdtemp(prefix="kf-ingest-schedule-"))
    try:
        files = disc.discover_inputs([src], work / "disc").files
        total = sum(f.size for f in files)
        plans = {}
        for label, cores in (("local[1]", 1), ("local[2], a core's share", 2), ("local[2], balanced", 2)):
            gb, gf = P.group_bytes_for(total, cores), P.group_files_for(len(files), cores)
            span = None if cores == 1 else P.span_bytes_for(total, cores)
            if label.endswith("balanced"):
                span = P.balanced_span_bytes(P.plan_tasks(files, gb, None, gf), cores)
            plans[label] = (cores, P.plan_tasks(files, gb, span, gf))
        cold = [subprocess.run([sys.executable, __file__, "--worker-start", str(src)], stdout=subprocess.PIPE, text=True,
                               check=True, env={**os.environ, "PYTHONPATH": str(REPO)}).stdout.split(maxsplit=1) for _ in range(3)]
        path = json.loads(cold[0][1])
        keep_freed_memory()
        whole = next(t for t in P.plan_tasks(files, 1) if t["files"][0]["path"] == path)
        write_task(str(work / "warm"), 0, 0, run_task(whole["files"]))  # (this process's own start)
        c = cpu()
        write_task(str(work / "warm"), 1, 0, run_task(whole["files"]))
        start = min(float(x[0]) for x in cold) - (cpu() - c)
        ends = {}
        print(f"load average {os.getloadavg()[0]:.1f}; a Python worker's start (imports, kernels): {start:.2f} CPU-s")
        for label, (cores, tasks) in plans.items():
            costs = []
            for t in tasks:
                c = cpu()
                write_task(str(work / f"t{cores}"), t["task"], 0, run_task(t["files"], spans=[]))
                costs.append(cpu() - c)
            ends[label] = _busiest(costs, cores, start)
            print(f"{label:<26} {len(tasks):>3} tasks, {sum(costs):6.2f} CPU-s of tasks ({min(costs):.2f}-{max(costs):.2f} each), "
                  f"busiest worker {ends[label]:.2f} CPU-s")
        for label in list(plans)[1:]:
            print(f"speed-up local[1] -> {label}: {ends['local[1]'] / ends[label]:.2f}x (CPU-s of the busiest worker; "
                  "Spark's own start and the driver left out)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _busiest(costs: list[float], workers: int, start: float) -> float:
    """CPU-s of the busiest of ``workers`` workers, each paying ``start`` first, taking ``costs`` in order."""
    loads = [start] * workers
    for c in costs:
        loads[loads.index(min(loads))] += c
    return max(loads)


def one_segment(args) -> None:
    """One big segment: a task of its own held one core while the other sat idle. Read in spans
    (one task each, cut where its offset index points) both cores work on it."""
    sys.path.insert(0, str(REPO))
    from sample_data.writer.bulk import generate

    tmp = Path(tempfile.mkdtemp(prefix="kf-ingest-bench-"))
    src = args.keep or tmp / "data"
    records = args.records or (300_000 if args.quick else 3_400_000)
    try:
        if not (src / "broker-1").is_dir():
            g = generate(src, brokers=1, partitions=1, records=records, segment_bytes=1 << 30, value_size=145,
                         records_per_batch=args.records_per_batch)
            print(f"generated one segment of {g.bytes / 1e6:.0f} MB in {g.seconds:.1f} s", file=sys.stderr)
        runs = {"local[1], whole": run_child("local[1]", src, tmp / "out-1", 1 << 50),
                "local[2], whole": run_child("local[2]", src, tmp / "out-2w", 1 << 50),
                "local[2], spans": run_child("local[2]", src, tmp / "out-2s")}
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'run':<16} {'MB':>6} {'tasks':>5} {'wall s':>7} {'spark start s':>13} {'ingest s':>8} {'ingest MB/s':>11} {'peak RSS MB':>11}")
    for name, r in runs.items():
        ingest_s = r["wall"] - r["session"]
        print(f"{name:<16} {r['bytes'] / 1e6:>6.0f} {r['tasks']:>5} {r['wall']:>7.1f} {r['session']:>13.1f} {ingest_s:>8.1f} "
              f"{r['bytes'] / 1e6 / ingest_s:>11.1f} {r['peak_rss'] / 1e6:>11.0f}")
    one = runs["local[1], whole"]
    for name in ("local[2], whole", "local[2], spans"):
        r = runs[name]
        print(f"speed-up local[1] -> {name}: {one['wall'] / r['wall']:.2f}x wall, "
              f"{(one['wall'] - one['session']) / (r['wall'] - r['session']):.2f}x excluding Spark start")


if __name__ == "__main__":
    main()
