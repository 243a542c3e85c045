"""The jobs phase of ``analyze``, stage by stage: cold JVM against warm, and Spark's cost per query.

Run:  python benchmarks/jobs_bench.py                      (the real-cluster crash-only, 0.4 MB)
      python benchmarks/jobs_bench.py INPUT... [--repeat 3]

Why: on a small collection the jobs phase takes ~20 s whatever the data size, and neither JVM
flags, codegen, shuffle partitions nor AQE move it (issue 17's note). This prints what does: each
stage's seconds and Spark job count, first in a cold JVM and then repeated in the same session
(JIT and class loading paid), next to what Spark itself needs for a one-row count, one shuffle,
and two aggregates joined, in that warm session. Stage seconds divided by those floors say how
many Spark round trips a stage is; folding detectors into fewer passes is what lowers it.
Everything runs in one process with a session sized as the CLI sizes it (no catalog: the catalog
thread is its own ~3 s, timed by analyze_bench). Nothing is asserted; figures vary with the load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu() -> float:
    """CPU-seconds of this process and every descendant (the JVM, the Python workers), living and
    waited for, from /proc (0 where there is none): on a shared machine, what a stage cost, where
    its wall time also counts whatever else ran."""
    children: dict[int, list[tuple[int, list[str]]]] = {}
    total = 0
    for pid in (p for p in os.listdir("/proc") if p.isdigit()) if os.path.isdir("/proc") else ():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(pid) == os.getpid():
            total += sum(int(x) for x in fields[11:15])
        children.setdefault(int(fields[1]), []).append((int(pid), fields))
    todo = [os.getpid()]
    while todo:
        for pid, fields in children.get(todo.pop(), []):
            total += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
            todo.append(pid)
    return total / TICK


class StageClock:
    """A ``stage`` callback for ``jobs.findings.run.run``: per stage, seconds, Spark jobs, the
    Spark stages they ran (a skipped stage, its shuffle already written, not counted) and the
    CPU-seconds of the process tree."""

    def __init__(self, spark) -> None:
        self.spark, self.rows = spark, []
        self._name, self._t, self._jobs, self._cpu = None, 0.0, 0, 0.0
        self._lock = threading.Lock()  # (the timeline's thread and the detectors' call it at once)

    def _job_count(self) -> int:
        ids = self.spark.sparkContext.statusTracker().getJobIdsForGroup(None)
        return max(ids) + 1 if ids else 0

    def _stages(self, first: int, end: int) -> int:
        tracker, seen = self.spark.sparkContext.statusTracker(), set()
        for job in range(first, end):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info is not None else ():
                got = tracker.getStageInfo(stage)
                if got is not None and got.numCompletedTasks + got.numActiveTasks > 0:
                    seen.add(stage)
        return len(seen)

    def __call__(self, name: str | None) -> None:
        with self._lock:
            now, jobs, cpu = time.monotonic(), self._job_count(), tree_cpu()
            if self._name is not None:
                self.rows.append((self._name, now - self._t, jobs - self._jobs, self._stages(self._jobs, jobs), cpu - self._cpu))
            self._name, self._t, self._jobs, self._cpu = name, now, jobs, cpu


def floors(spark, repeat: int = 5) -> dict[str, float]:
    """Median seconds of the cheapest queries, in a warm session."""
    from pyspark.sql import functions as F

    df = spark.range(1000)
    queries = {
        "one-row count": lambda: spark.range(1).count(),
        "one shuffle (group by)": lambda: df.groupBy((F.col("id") % 3).alias("k")).count().collect(),
        "two aggregates joined": lambda: df.groupBy((F.col("id") % 3).alias("k")).count()
        .join(df.groupBy((F.col("id") % 5).alias("k")).count(), "k").collect(),
    }
    out = {}
    for name, q in queries.items():
        q()
        times = []
        for _ in range(repeat):
            t = time.monotonic()
            q()
            times.append(time.monotonic() - t)
        out[name] = statistics.median(times)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="*", type=Path, default=[REPO.parent / "shared/fixtures/real-cluster/crash-only"])
    ap.add_argument("--repeat", type=int, default=3, help="passes of the jobs phase in one session (the first is cold)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a runtime Spark SQL conf set after the start, for A/B runs (repeatable)")
    args = ap.parse_args()
    if any("=" not in kv for kv in args.conf):
        ap.error("--conf takes KEY=VALUE")

    from jobs.findings import run as forensics
    from jobs.ingest.discover import input_bytes
    from jobs.ingest.run import staged_run
    from jobs.session.start import get_session

    size = input_bytes(args.inputs)
    t0, cpu0 = time.monotonic(), tree_cpu()
    spark = get_session("local[*]", input_bytes=size)
    spark.range(1).count()
    start, start_cpu = time.monotonic() - t0, tree_cpu() - cpu0
    for kv in args.conf:
        spark.conf.set(*kv.split("=", 1))
    passes = []
    with tempfile.TemporaryDirectory(prefix="kf-jobs-bench-") as tmp:
        t, cpu = time.monotonic(), tree_cpu()
        with staged_run(args.inputs, Path(tmp) / "out", progress=False, spark=spark, register=False) as staged:
            ingest, ingest_cpu = time.monotonic() - t, tree_cpu() - cpu
            for _ in range(args.repeat):
                clock = StageClock(spark)
                forensics.run(spark, staged.tmp, stage=clock)
                clock(None)
                passes.append(clock.rows)
    warm = floors(spark)

    print(f"input: {', '.join(map(str, args.inputs))} ({size / 1e6:.1f} MB); load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    print(f"Spark start + one count (in process): {start:.1f} s, {start_cpu:.1f} CPU-s; ingest: {ingest:.1f} s, {ingest_cpu:.1f} CPU-s; "
          f"confs set: {args.conf or 'none'}")
    header = "".join(f"{'pass ' + str(i + 1) + (' (cold)' if i == 0 else ''):>44}" for i in range(len(passes)))
    print(f"\n{'stage':34}{header}")
    # detectors and some job tables run two at a time: a stage's seconds and jobs run from its
    # start to the next stage's start, whichever thread began that one, and the order of stages
    # may differ between passes (rows are matched by name)
    by_name = [{name: row for name, *row in p} for p in passes]
    for name, *_ in passes[0]:
        cells = "".join("{:8.2f} s {:4d} jobs {:4d} stages {:6.2f} CPU-s".format(*b.get(name, (0.0, 0, 0, 0.0))) for b in by_name)
        print(f"{name:34}{cells}")
    totals = "".join(f"{sum(r[1] for r in p):8.2f} s {sum(r[2] for r in p):4d} jobs {sum(r[3] for r in p):4d} stages "
                     f"{sum(r[4] for r in p):6.2f} CPU-s" for p in passes)
    print(f"{'total':34}{totals}")
    print("\nwarm session, median of 5:")
    for name, sec in warm.items():
        print(f"  {name:28} {sec * 1000:6.0f} ms")
    last = passes[-1]
    jobs = sum(r[2] for r in last)
    if jobs:
        print(f"\nlast pass: {sum(r[1] for r in last) / jobs * 1000:.0f} ms per Spark job over {jobs} jobs")
    spark.stop()


if __name__ == "__main__":
    main()
