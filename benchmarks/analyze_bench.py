"""A whole ``analyze`` against a bare Spark start, same machine, one run after the other.

Run:  python benchmarks/analyze_bench.py                      (the real-cluster clean-failover, 0.4 MB)
      python benchmarks/analyze_bench.py INPUT... [--repeat 2]

Why: what a user waits for is the whole command (Spark start, ingest, jobs, catalog, report), and
on a small collection nearly all of it is fixed cost. The yardstick is the cheapest thing Spark can
do, started the same way: a child process that opens a session and counts one row. Issue 17's
target is analyze ≤ 2× that bare start; a one-shot ``sql`` query on the analyzed DIR is timed too
(its catalog was built by analyze: it should cost a Spark start and little else). Each figure is a fresh child process, as the CLI runs; the
peak RSS is of the child's whole process tree (driver Python, JVM, Python workers), sampled every
0.2 s (``ingest_bench._tree_rss``). The analysis's own phase seconds come from its run.json.
Nothing is asserted; on a shared machine the figures vary with the load (printed with them).

``--warm N``: the same analysis N times more in one child process and one session (as the demo
runs its scenarios), each timed, without the catalog (which a shared session cannot have). What
the first run costs beyond the later ones is mostly the JVM's cold start (Spark's classes loaded
and run in the interpreter before they are compiled; later runs find them compiled), plus the
Python workers' start (they are reused: imports, numba's kernels loaded once). What a warm run
still costs is the analysis's own floor on this machine: its queries planned and run.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest_bench import _tree_rss  # noqa: E402

BARE = ("from jobs.session.start import get_session; s = get_session('local[*]', input_bytes=1); "
        "s.range(1).count(); s.stop()")


def timed(cmd: list[str]) -> tuple[float, int, int]:
    """Wall seconds, peak RSS of the process tree and exit code of ``cmd``."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak, stop = 0, threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.2):
            peak = max(peak, _tree_rss(proc.pid))

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    code = proc.wait()
    stop.set()
    t.join()
    return time.monotonic() - t0, peak, code


WARM = """
import sys, time
from pathlib import Path
from analyzer.analyze import run_analyze
from jobs.ingest.discover import input_bytes
from jobs.session.start import get_session
inputs, out, n = [Path(p) for p in sys.argv[3:]], Path(sys.argv[1]), int(sys.argv[2])
t0 = time.monotonic()
spark = get_session("local[*]", input_bytes=input_bytes(inputs))
spark.range(1).count()
print(f"start {time.monotonic() - t0:.2f}", flush=True)
for i in range(n + 1):
    t0 = time.monotonic()
    run_analyze(inputs, out / str(i), fmt="json", stream=open("/dev/null", "w"), progress=False, spark=spark, register_catalog=False)
    spark.catalog.clearCache()
    print(f"run {i + 1} {time.monotonic() - t0:.2f}", flush=True)
"""


def warm_runs(inputs: list[Path], out: Path, n: int) -> list[float]:
    """Seconds of each of ``n`` + 1 analyses of ``inputs`` in one child process and session."""
    proc = subprocess.run([sys.executable, "-c", WARM, str(out), str(n), *map(str, inputs)], cwd=REPO,
                          capture_output=True, text=True)
    if proc.returncode != 0:  # (the script exits 0 whatever the findings; an exception exits 1)
        raise SystemExit(f"warm runs failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return [float(line.split()[-1]) for line in proc.stdout.splitlines() if line.startswith(("start", "run"))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="*", type=Path, default=[REPO.parent / "shared/fixtures/real-cluster/clean-failover"])
    ap.add_argument("--repeat", type=int, default=1, help="pairs of (bare start, analyze) to run")
    ap.add_argument("--warm", type=int, default=0, metavar="N", help="then N more analyses in one warm session")
    args = ap.parse_args()
    exe = Path(sys.executable).with_name("kafka-forensics")
    tmp = Path(tempfile.mkdtemp(prefix="kf-analyze-bench-"))
    print(f"{'run':>3} {'bare start s':>12} {'bare RSS MB':>11} {'analyze s':>9} {'analyze RSS MB':>14} {'ratio':>6} "
          f"{'sql query s':>11} {'ratio':>6}  phases (run.json)")
    try:
        for i in range(args.repeat):
            bare_s, bare_rss, _ = timed([sys.executable, "-c", BARE])
            out = tmp / f"out-{i}"
            shutil.rmtree(out, ignore_errors=True)
            an_s, an_rss, code = timed([str(exe), "analyze", *map(str, args.inputs), "--out", str(out), "--format", "json"])
            if code not in (0, 1):
                raise SystemExit(f"analyze failed (exit {code})")
            sql_s, _, _ = timed([str(exe), "sql", str(out), "select count(*) from records", "--format", "json"])
            seconds = json.loads((out / "run.json").read_text())["seconds"]
            phases = ", ".join(f"{k} {v:.1f}" for k, v in seconds.items() if k in ("discover", "parse", "write", "jobs", "total"))
            print(f"{i + 1:>3} {bare_s:>12.1f} {bare_rss / 1e6:>11.0f} {an_s:>9.1f} {an_rss / 1e6:>14.0f} {an_s / bare_s:>6.2f} "
                  f"{sql_s:>11.1f} {sql_s / bare_s:>6.2f}  {phases}")
        if args.warm:
            start, *runs = warm_runs(args.inputs, tmp / "warm", args.warm)
            print(f"one session: start + one count {start:.1f} s; the analysis "
                  + ", ".join(f"{s:.1f}" for s in runs) + " s (first cold, then warm; no catalog)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (target: ratio <= 2)")


if __name__ == "__main__":
    main()
