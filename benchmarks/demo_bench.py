"""The README's first command, ``kafka-forensics demo``, timed whole: wall seconds and the peak RSS
of its whole process tree (driver Python, the Spark JVM, its Python workers).

Run:  python benchmarks/demo_bench.py                    (every scenario)
      python benchmarks/demo_bench.py --scenario unclean-election [--scenario …]

Why: the demo is what a new user waits for first; issue 17's target is all scenarios in <= 3 min on
2 cores. The command runs as a child process, exactly as the README starts it, into a temp DIR;
its closing table (scenario, verdict, matches ground truth) is printed with the figures. The tree's
RSS is summed from /proc every 0.2 s (``ingest_bench._tree_rss``). Nothing is asserted; on a shared
machine the figures vary with the load (printed with them).
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", action="append", default=[], help="only this scenario (repeatable)")
    args = ap.parse_args()
    exe = Path(sys.executable).with_name("kafka-forensics")
    tmp = Path(tempfile.mkdtemp(prefix="kf-demo-bench-"))
    cmd = [str(exe), "demo", "--out", str(tmp / "demo"), *[a for s in args.scenario for a in ("--scenario", s)]]
    load = os.getloadavg()[0]
    try:
        with open(tmp / "stdout", "w") as out, open(tmp / "stderr", "w") as err:
            t0 = time.monotonic()
            proc = subprocess.Popen(cmd, cwd=tmp, stdout=out, stderr=err)
            peak = peak_pss = 0
            stop = threading.Event()

            def sample() -> None:
                nonlocal peak, peak_pss
                while not stop.wait(0.2):
                    peak = max(peak, _tree_rss(proc.pid))
                    peak_pss = max(peak_pss, _tree_rss(proc.pid, "Pss"))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            code = proc.wait()
            wall = time.monotonic() - t0
            stop.set()
            sampler.join()
        text = (tmp / "stdout").read_text()
        at = text.rfind("scenarios match")
        table = text[text.rfind("\n", 0, at) + 1:] if at >= 0 else text[-3000:]  # from the closing table's own line
        print(" ".join(cmd[1:]).replace(str(tmp), "TMP"))
        print(table.rstrip() or "(no output)")
        for line in text.splitlines():  # why a scenario failed, if one did (the table only says that it did)
            if "analyze failed" in line and ":" in line.split("analyze failed", 1)[1]:
                print(line.strip())
        print(f"\nexit {code}; wall {wall:.0f} s ({wall / 60:.1f} min); peak RSS of the whole tree {peak / (1 << 20):.0f} MiB summed, "
              f"{peak_pss / (1 << 20):.0f} MiB PSS (shared pages once; a just-forked child counts its parent's pages in RSS)")
        print(f"load average at start {load:.1f}, at end {os.getloadavg()[0]:.1f}, on {os.cpu_count()} cores "
              "(target: every scenario in <= 3 min on 2 cores)")
        if code not in (0, 1):
            print((tmp / "stderr").read_text()[-2000:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
