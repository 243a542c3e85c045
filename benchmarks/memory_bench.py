"""Peak memory on a ~1 GB single segment: the record-level parser alone, then a whole ``analyze``.

Run:  python benchmarks/memory_bench.py              (~1 GiB segment; ingest+jobs take several minutes)
      python benchmarks/memory_bench.py --mib 64     (a quick smoke run)
      python benchmarks/memory_bench.py --command ingest   (ingest only, no forensic jobs)
      python benchmarks/memory_bench.py --fixture ../shared/fixtures/real-cluster/clean-failover
            (issue 17: a small collection as it is, analyzed with the heap the CLI sizes for it)
      python benchmarks/memory_bench.py --collection-gib 10 --driver-memory 1g
            (issue 20: a 3-broker collection of ~10 GiB analyzed with a 1 GB driver heap; needs
             ~10 GiB of free disk under $TMPDIR, and takes tens of minutes on 2 cores)
      python benchmarks/memory_bench.py --collection-gib 10 --heaps default 1g
            (issue 35: the same collection with the default heap, then 1 GB, and each run's phases)

Why: issue 9 asks that parsing streams, so that a 1 GB segment parses with peak RSS < 1 GB, and that
the figure is measured, not asserted. Data: one broker, one partition, one segment made by the
writer's bulk generator (``sample_data/writer/bulk.py``: 100 records of ~170 bytes per batch,
uncompressed, idempotent producer), in a temp dir removed at the end.

(a) Parser: a fresh child process streams ``segment.iter_parse(records=True)`` over a read-only
    mmap, as an ingest task does, and drops each piece. Printed: the child's VmHWM (whole process:
    imports, numba JIT and all), and the peaks of RssAnon (the parser's own allocations) and of
    RssFile (mmap'd segment pages, which count in RSS as they are touched; the kernel can drop them
    at any time, they are not a leak). VmHWM of the child itself, not ``ru_maxrss`` of children:
    a child started by vfork+exec inherits the parent's high-water mark there, so after generating
    the segment in this process it would report the generator's peak.
(b) ``kafka-forensics <command> BROKER --out DIR`` in its own session, sampled every 0.25 s: every
    process of the session (the CLI's Python driver, the Spark JVM, pyspark's worker daemon and its
    forked workers) by its /proc status. Printed: the highest VmHWM of each role, the peak of the
    workers' summed RSS, and the peak of the whole tree's summed RSS and summed PSS. PSS is what the
    machine had to hold at once: summed RSS counts a page shared by several processes once per
    process, and a child the JVM or a daemon has just forked (Hadoop forks ``chmod`` and ``ls``
    for every file it writes) shows its parent's whole RSS until it execs. The JVM's heap is capped by ``KF_DRIVER_MEMORY`` (default 4g); its RSS follows what
    it touched, not the cap.
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
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MiB = 1 << 20
RECORD_BYTES = 172  # ~ bytes per record on disk with the generator's defaults (value 145, key 12, batch of 100)


def _status(pid: int | str = "self") -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                    out[k] = int(v.split()[0]) * 1024
    except (OSError, ValueError):
        pass
    return out


def parse_child(path: str) -> None:
    """Runs in a fresh process: stream the segment at record level, print one JSON line."""
    sys.path.insert(0, str(REPO))
    from parsers import segment
    from parsers.common import FileBytes

    peak_anon = peak_file = records = batches = problems = 0
    t0 = time.perf_counter()
    with FileBytes(path) as fb:
        for piece in segment.iter_parse(fb.data, path, records=True):
            records += piece.extra["records"].num_rows
            batches += piece.table.num_rows
            problems += piece.problems.num_rows
            st = _status()
            peak_anon = max(peak_anon, st.get("RssAnon", 0))
            peak_file = max(peak_file, st.get("RssFile", 0) + st.get("RssShmem", 0))
            del piece
    print(json.dumps({"records": records, "batches": batches, "problems": problems, "seconds": time.perf_counter() - t0,
                      "hwm": _status().get("VmHWM", 0), "peak_anon": peak_anon, "peak_file": peak_file}), flush=True)


def _pss(pid: int) -> int:
    """Proportional set size (bytes) of ``pid``: its share of every page it maps (0 once gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _role(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if "java" in cmd.split(" ", 1)[0]:
        return "jvm"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
        return "python workers"
    return "driver python"


def _session(sid: int) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                if int(stat[stat.rindex(")") + 2:].split()[3]) == sid:
                    pids.append(int(d.name))
            except (OSError, ValueError):
                continue
    return pids


def run_cli(command: str, brokers: list[Path], out: Path, driver_memory: str | None = None) -> dict:
    """Run the CLI in its own session and sample its process tree until it ends."""
    args = [sys.executable, "-m", "analyzer.cli", command, *map(str, brokers), "--out", str(out)]
    env = {**os.environ, "KF_DRIVER_MEMORY": driver_memory} if driver_memory else None
    if command == "analyze":
        args += ["--format", "json"]
    else:
        args += ["--quiet"]
    t0 = time.monotonic()
    said = tempfile.TemporaryFile(mode="w+")  # a pipe read only at the end could fill and stall the CLI
    proc = subprocess.Popen(args, cwd=out.parent, stdout=subprocess.DEVNULL, stderr=said, text=True,
                            start_new_session=True, env=env)
    hwm: dict[str, int] = {}
    peak_workers = peak_total = peak_pss = 0
    while proc.poll() is None:
        by_role: dict[str, int] = {}
        pss = 0
        for pid in _session(proc.pid):
            st, role = _status(pid), _role(pid)
            hwm[role] = max(hwm.get(role, 0), st.get("VmHWM", 0))
            by_role[role] = by_role.get(role, 0) + st.get("VmRSS", 0)
            pss += _pss(pid)
        peak_workers = max(peak_workers, by_role.get("python workers", 0))
        peak_total = max(peak_total, sum(by_role.values()))
        peak_pss = max(peak_pss, pss)
        time.sleep(0.25)
    said.seek(0)
    err = said.read()
    said.close()
    return {"code": proc.returncode, "seconds": time.monotonic() - t0, "hwm": hwm, "peak_workers_sum": peak_workers,
            "peak_total_sum": peak_total, "peak_total_pss": peak_pss, "stderr_tail": err[-1500:], "oom": "OutOfMemoryError" in err}


def report_cli(title: str, r: dict) -> None:
    print(f"{title}: exit {r['code']} in {r['seconds']:.0f} s" + ("  -- OutOfMemoryError in its output" if r["oom"] else ""))
    for role in ("driver python", "jvm", "python workers"):
        print(f"    peak RSS of one {role:15s} {r['hwm'].get(role, 0) / MiB:8.0f} MiB")
    print(f"    peak of the python workers' summed RSS {r['peak_workers_sum'] / MiB:6.0f} MiB")
    print(f"    peak of the whole tree's summed RSS    {r['peak_total_sum'] / MiB:6.0f} MiB")
    print(f"    peak of the whole tree's summed PSS    {r['peak_total_pss'] / MiB:6.0f} MiB  (shared pages counted once)")
    if r["code"] not in (0, 1):
        print(r["stderr_tail"])
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


def collection(args: argparse.Namespace, tmp: Path, bulk) -> None:
    """Issue 20's big input with a small heap: three replicas of eight partitions, ~``collection_gib``
    GiB over all brokers, analyzed whole. Spark must spill rather than hold it (the driver heap is the
    executors' heap in local mode), so the figures to read are the exit code, the absence of an
    OutOfMemoryError, the wall time and the tree's peak RSS."""
    brokers, partitions = 3, 8
    records = int(args.collection_gib * (1 << 30) / (brokers * partitions * RECORD_BYTES))
    t0 = time.monotonic()
    res = bulk.generate(tmp / "in", brokers=brokers, partitions=partitions, records=records, seed=9)
    size = sum(f.stat().st_size for b in res.brokers for f in b.rglob("*") if f.is_file())
    print(f"collection: {brokers} brokers x {partitions} partitions, {records} records per partition, "
          f"{size / (1 << 30):.1f} GiB on disk, generated in {time.monotonic() - t0:.0f} s")
    for heap in args.heaps or [args.driver_memory]:  # (one collection, analyzed once per heap)
        heap = None if heap in (None, "default") else heap
        print(f"driver memory: {heap or 'default'}; load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        shutil.rmtree(tmp / "out", ignore_errors=True)
        r = run_cli(args.command, res.brokers, tmp / "out", heap)
        report_cli(f"kafka-forensics {args.command} of the whole collection", r)
        print(f"    throughput, whole process: {size / MiB / r['seconds']:.0f} MiB/s")
        run = tmp / "out" / "run.json"
        if run.exists():  # the phases (issue 35: the jobs phase must not cost more than the ingest)
            s = json.loads(run.read_text()).get("seconds", {})
            ingest = s.get("discover", 0) + s.get("parse", 0) + s.get("write", 0)
            print(f"    phases: ingest {ingest:.1f} s, jobs {s.get('jobs', 0):.1f} s (jobs/ingest {s.get('jobs', 0) / max(ingest, 1e-9):.2f}; "
                  "target <= 1)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=1024, help="segment size in MiB (default 1024)")
    ap.add_argument("--command", choices=("analyze", "ingest"), default="analyze")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (printed)")
    ap.add_argument("--collection-gib", type=float, default=None,
                    help="instead of one segment: a 3-broker, 8-partition collection of about this many GiB in all")
    ap.add_argument("--driver-memory", default=None, help="KF_DRIVER_MEMORY for the CLI run (e.g. 1g)")
    ap.add_argument("--heaps", nargs="+", default=None, metavar="HEAP",
                    help="with --collection-gib: analyze the one collection once per KF_DRIVER_MEMORY (e.g. default 1g)")
    ap.add_argument("--fixture", type=Path, nargs="+", default=None,
                    help="instead of generated data: analyze these input folders as they are")
    args = ap.parse_args()

    sys.path.insert(0, str(REPO))
    from sample_data.writer import bulk

    tmp = Path(tempfile.mkdtemp(prefix="kf-memory-bench-"))
    try:
        if args.fixture:
            from jobs.ingest.discover import input_bytes

            size = input_bytes(args.fixture)
            print(f"input: {', '.join(map(str, args.fixture))} ({size / 1e6:.1f} MB); driver memory: "
                  f"{args.driver_memory or 'as the CLI sizes it'}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
            report_cli(f"kafka-forensics {args.command}", run_cli(args.command, [p.resolve() for p in args.fixture], tmp / "out",
                                                                  args.driver_memory))
            return
        if args.collection_gib:
            collection(args, tmp, bulk)
            return
        t0 = time.monotonic()
        records = args.mib * MiB // RECORD_BYTES
        res = bulk.generate(tmp / "in", brokers=1, partitions=1, records=records, segment_bytes=(1 << 31) - 1, seed=9)
        broker = res.brokers[0]
        segs = sorted(broker.rglob("*.log"))
        assert len(segs) == 1, f"want one segment, got {len(segs)}"
        seg = segs[0]
        size = seg.stat().st_size
        print(f"segment: {seg.name}, {size / MiB:.0f} MiB, {records} records, generated in {time.monotonic() - t0:.0f} s")
        print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

        child = subprocess.run([sys.executable, __file__, "--parse-child", str(seg)], capture_output=True, text=True)
        if child.returncode != 0:
            print("parse child failed:", child.stderr[-2000:])
        else:
            r = json.loads(child.stdout.strip().splitlines()[-1])
            print(f"(a) parser, record level, one process: {r['records']} records, {r['batches']} batches, "
                  f"{r['problems']} problems in {r['seconds']:.1f} s")
            print(f"    peak RSS (VmHWM, whole process)   {r['hwm'] / MiB:8.0f} MiB")
            print(f"    peak RssAnon (parser's own memory) {r['peak_anon'] / MiB:7.0f} MiB")
            print(f"    peak RssFile (mmap'd segment pages) {r['peak_file'] / MiB:6.0f} MiB")

        out = tmp / "out"
        r = run_cli(args.command, [broker], out, args.driver_memory)
        report_cli(f"(b) kafka-forensics {args.command}", r)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--parse-child":
        parse_child(sys.argv[2])
    else:
        main()
