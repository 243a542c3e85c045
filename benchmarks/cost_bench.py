"""What an ``analyze`` costs per unit of work, phase by phase: CPU-seconds, shuffle, what the driver collects.

Run:  python benchmarks/cost_bench.py INPUT...               (any collection, as ``analyze`` takes it)
      python benchmarks/cost_bench.py --wide 2000            (generated: 3 brokers x 2,000 partitions x 40 records,
                                                               scale_bench's shape)
      python benchmarks/cost_bench.py --deep 100             (generated: one 100 MB partition on 3 brokers,
                                                               depth_bench's shape; ``--data DIR`` keeps it)

Why: issue 39 item 4 (docs/scale.md) turns per-core rates into what a terabyte costs on a cluster,
and the other benchmarks print wall time, which on a shared machine says more about the other
processes than about ours. This one prints what the run itself spent, in the units a cluster is
sized in: the CPU-seconds of the whole process tree (the CLI's Python driver, the Spark JVM,
pyspark's Python workers: utime + stime from /proc, every 0.25 s, each process's last reading kept
after it exits), split into the phases Spark's own event log dates (``spark.eventLog.enabled``,
passed through ``PYSPARK_SUBMIT_ARGS`` so nothing of the CLI changes and class sharing stays on):
Spark start and discovery; the parse job (the ingest's tasks); the jobs (every Spark job after
it); the tail (report, catalog, exit). Per phase, from the event log's task metrics: tasks, the
JVM task threads' CPU (``Executor CPU Time``; the Python workers' is not in it), shuffle bytes
written and read, bytes spilled, the largest task's peak execution memory, and the bytes the
tasks' results brought to the driver (``Result Size``: every ``collect``). Then the rates:
ingest MB/s per CPU-second, the jobs' CPU-seconds per GB and per 1,000 partition replicas,
shuffle bytes per GB of input, and what the driver held per partition replica (the Python
driver's peak RSS; the result bytes), report.html's size and DIR's tables' bytes per input byte.
A single run's rates include its fixed costs (Spark's planning, the workers' start): the rates
docs/scale.md uses are differences between two runs of different sizes. Each run is one fresh
child process (``kafka-forensics analyze``, as a user runs it); the load average is printed at
its start and end. Nothing is asserted.
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from memory_bench import MiB, _pss, _role, _session, _status  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
ROLES = ("driver python", "jvm", "python workers")
PHASES = ("start", "parse", "jobs", "tail")


def _cpu(pid: int) -> float | None:
    """utime + stime of ``pid`` in seconds (its own threads, not its children's)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class TreeSampler(threading.Thread):
    """Samples every process of the CLI's session: summed CPU seconds by role, with each process's
    last reading kept once it has exited (its CPU was spent), peak RSS by role and the peak of
    the tree's summed PSS."""

    def __init__(self, sid: int, every: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.sid, self.every = sid, every
        self.last: dict[int, tuple[str, float]] = {}
        self.samples: list[tuple[float, dict[str, float]]] = []  # (epoch seconds, CPU seconds by role)
        self.hwm: dict[str, int] = {}
        self.peak_pss = 0
        self.stop = threading.Event()

    def sample(self, with_pss: bool) -> None:
        pss = 0
        for pid in _session(self.sid):
            cpu = _cpu(pid)
            if cpu is None:
                continue
            role = _role(pid)  # (asked each time: the JVM is first spark-submit's shell, then execs java)
            if pid in self.last and role in ("gone", "driver python"):
                # a process exiting between two reads, or a zombie (no cmdline left), keeps the role
                # it had: only the plain default may still become the JVM
                role = self.last[pid][0]
            self.last[pid] = (role, cpu)
            self.hwm[role] = max(self.hwm.get(role, 0), _status(pid).get("VmHWM", 0))
            if with_pss:
                pss += _pss(pid)
        by_role = dict.fromkeys(ROLES, 0.0)
        for role, cpu in self.last.values():
            by_role[role] = by_role.get(role, 0.0) + cpu
        self.samples.append((time.time(), by_role))
        self.peak_pss = max(self.peak_pss, pss)

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            self.sample(with_pss=n % 4 == 0)
            n += 1
            self.stop.wait(self.every)

    def at(self, t: float) -> dict[str, float]:
        """CPU seconds by role at epoch time ``t`` (the last sample at or before it)."""
        best = dict.fromkeys(ROLES, 0.0)
        for when, by_role in self.samples:
            if when > t:
                break
            best = by_role
        return best


def _lines(paths: list[Path]):
    for p in paths:
        with open(p) as f:
            yield from f


def read_event_log(folder: Path) -> dict:
    """The jobs (group, stage ids, submission and completion times) and the tasks' metrics of the
    event log in ``folder``."""
    # (Spark 4 rolls its event log by default: a folder ``eventlog_v2_<app>`` of ``events_<n>_<app>`` files)
    logs = sorted((p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(("appstatus", "."))),
                  key=lambda p: (p.parent.name, int(p.name.split("_")[1]) if p.name.startswith("events_") else 0))
    if not logs:
        raise SystemExit(f"no event log in {folder}")
    jobs: dict[int, dict] = {}
    tasks: list[dict] = []
    for line in _lines(logs):
        if '"SparkListenerJob' not in line[:40] and '"SparkListenerTaskEnd"' not in line[:40]:
            continue
        e = json.loads(line)
        kind = e["Event"]
        if kind == "SparkListenerJobStart":
            jobs[e["Job ID"]] = {"start": e["Submission Time"] / 1000, "stages": e.get("Stage IDs", []),
                                 "group": (e.get("Properties") or {}).get("spark.jobGroup.id") or ""}
        elif kind == "SparkListenerJobEnd":
            jobs.setdefault(e["Job ID"], {"start": 0, "stages": [], "group": ""})["end"] = e["Completion Time"] / 1000
        elif kind == "SparkListenerTaskEnd":
            m = e.get("Task Metrics") or {}
            sr, sw = m.get("Shuffle Read Metrics") or {}, m.get("Shuffle Write Metrics") or {}
            tasks.append({
                "stage": e["Stage ID"],
                "cpu": (m.get("Executor CPU Time", 0) + m.get("Executor Deserialize CPU Time", 0)) / 1e9,
                "result": m.get("Result Size", 0),
                "shuffle_write": sw.get("Shuffle Bytes Written", 0),
                "shuffle_read": sr.get("Remote Bytes Read", 0) + sr.get("Local Bytes Read", 0),
                "spill": m.get("Disk Bytes Spilled", 0),
                "peak": m.get("Peak Execution Memory", 0),
                "input": (m.get("Input Metrics") or {}).get("Bytes Read", 0),
            })
    return {"jobs": jobs, "tasks": tasks}


def phases(log: dict, began: float, ended: float) -> tuple[dict[str, tuple[float, float]], dict[int, str]]:
    """Each phase's (from, to) epoch seconds, and each stage's phase: the parse job is the one of
    the ingest's job group; jobs before it are ``start``, every job after it ``jobs``."""
    jobs = log["jobs"]
    parse = [j for j in jobs.values() if j["group"].startswith("kafka-forensics-parse")]
    if not parse:
        raise SystemExit("no parse job in the event log")
    p0, p1 = min(j["start"] for j in parse), max(j.get("end", ended) for j in parse)
    last = max([j.get("end", ended) for j in jobs.values() if j["start"] > p1] or [p1])
    spans = {"start": (began, p0), "parse": (p0, p1), "jobs": (p1, last), "tail": (last, ended)}
    stage_phase = {}
    for j in jobs.values():
        phase = "parse" if j in parse else "start" if j["start"] < p0 else "jobs"
        for s in j["stages"]:
            stage_phase[s] = phase
    return spans, stage_phase


def generate(args: argparse.Namespace, data: Path) -> list[Path]:
    if args.wide:
        from sample_data.writer.bulk import generate as bulk

        root = data / f"wide-{args.wide}x{args.records}"
        if not (root / "broker-3").is_dir():
            shutil.rmtree(root, ignore_errors=True)
            bulk(root, brokers=3, partitions=args.wide, records=args.records, records_per_batch=20, seed=5)
        return sorted(root.glob("broker-*"))
    from depth_bench import healthy

    root = data / f"{args.deep:g}MB-nopid"
    if not (root / "broker-3").is_dir():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        healthy(root, args.deep, pid=False)
    return sorted(root.glob("broker-*"))


def analyze(inputs: list[Path], tmp: Path, driver_memory: str | None) -> dict:
    events = tmp / "events"
    events.mkdir()
    out = tmp / "out"
    submit = (f"--conf spark.eventLog.enabled=true --conf spark.eventLog.dir=file://{events} "
              "--conf spark.eventLog.compress=false pyspark-shell")
    env = {**os.environ, "PYSPARK_SUBMIT_ARGS": submit}
    if driver_memory:
        env["KF_DRIVER_MEMORY"] = driver_memory
    said = tempfile.TemporaryFile(mode="w+")
    began = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "analyzer.cli", "analyze", *map(str, inputs), "--out", str(out), "--format", "json"],
                            cwd=tmp, stdout=subprocess.DEVNULL, stderr=said, start_new_session=True, env=env)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    code = proc.wait()
    ended = time.time()
    sampler.stop.set()
    sampler.join()
    said.seek(0)
    err = said.read()[-2000:]
    if code not in (0, 1):
        raise SystemExit(f"analyze exited {code}:\n{err}")
    run = json.loads((out / "run.json").read_text())
    import pyarrow.dataset as ds

    rl = ds.dataset(out / "tables" / "replica_logs").to_table(columns=["topic", "partition", "broker"])
    replicas = rl.num_rows
    partitions = len(set(zip(rl.column("topic").to_pylist(), rl.column("partition").to_pylist())))
    log = read_event_log(events)
    spans, stage_phase = phases(log, began, ended)
    rows = {}
    for name in PHASES:
        a, b = spans[name]
        c0, c1 = sampler.at(a), sampler.at(b)
        mine = [t for t in log["tasks"] if stage_phase.get(t["stage"]) == name]
        rows[name] = {"wall": b - a, "cpu": {r: c1.get(r, 0) - c0.get(r, 0) for r in ROLES}, "tasks": len(mine),
                      **{k: sum(t[k] for t in mine) for k in ("result", "shuffle_write", "shuffle_read", "spill", "input")},
                      "task_cpu": sum(t["cpu"] for t in mine), "peak": max((t["peak"] for t in mine), default=0),
                      "jobs": sum(1 for j in log["jobs"].values() if any(stage_phase.get(s) == name for s in j["stages"]))}
    end = sampler.samples[-1][1] if sampler.samples else dict.fromkeys(ROLES, 0.0)
    html = out / "report.html"
    tables = {p.name: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) for p in (out / "tables").iterdir() if p.is_dir()}
    return {"code": code, "wall": ended - began, "run": run, "rows": rows, "cpu_total": end, "hwm": sampler.hwm,
            "pss": sampler.peak_pss, "replicas": replicas, "partitions": partitions,
            "report": html.stat().st_size if html.exists() else 0, "tables": tables}


def report(inputs: list[Path], r: dict, load0: float) -> None:
    run = r["run"]
    size = run["input"]["bytes"]
    gb = size / 1e9
    from jobs.session.conf import sized_confs

    heap = sized_confs(size, os.cpu_count() or 1)["spark.driver.memory"]  # (KF_DRIVER_MEMORY wins there)
    print(f"input: {', '.join(map(str, inputs))}")
    print(f"  {size / 1e6:.0f} MB, {run['input']['files']} files, {r['partitions']} partitions, {r['replicas']} partition replicas; "
          f"exit {r['code']}, {run.get('findings', {}).get('errors', '?')} errors, {run.get('findings', {}).get('warnings', '?')} warnings")
    print(f"  load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} cores; "
          f"driver heap {heap}")
    s = run.get("seconds", {})
    print("  run.json seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in s.items()))
    print(f"\n  {'phase':<7}{'wall s':>8}{'CPU s':>8}{'driver py':>10}{'JVM':>8}{'workers':>8}{'jobs':>6}{'tasks':>7}{'task CPU s':>11}"
          f"{'shuffle w MB':>13}{'shuffle r MB':>13}{'spill MB':>9}{'result MB':>10}{'peak task MB':>13}")
    for name, row in r["rows"].items():
        c = row["cpu"]
        print(f"  {name:<7}{row['wall']:8.1f}{sum(c.values()):8.1f}{c['driver python']:10.1f}{c['jvm']:8.1f}{c['python workers']:8.1f}"
              f"{row['jobs']:6d}{row['tasks']:7d}{row['task_cpu']:11.1f}{row['shuffle_write'] / 1e6:13.1f}{row['shuffle_read'] / 1e6:13.1f}"
              f"{row['spill'] / 1e6:9.1f}{row['result'] / 1e6:10.2f}{row['peak'] / MiB:13.1f}")
    total = sum(r["cpu_total"].values())
    print(f"  {'whole':<7}{r['wall']:8.1f}{total:8.1f}  (process tree, every process of the CLI's session)")
    parse, jobs = r["rows"]["parse"], r["rows"]["jobs"]
    parse_cpu, jobs_cpu = sum(parse["cpu"].values()), sum(jobs["cpu"].values())
    print("\n  rates:")
    print(f"    ingest (parse job): {parse_cpu / gb:.1f} CPU-s per GB of input -> {size / 1e6 / parse_cpu:.1f} MB/s per CPU-second "
          f"(Python workers alone {size / 1e6 / max(parse['cpu']['python workers'], 1e-9):.1f})")
    print(f"    jobs: {jobs_cpu:.1f} CPU-s = {jobs_cpu / gb:.1f} per GB of input, {jobs_cpu / r['replicas'] * 1000:.1f} per 1,000 partition "
          f"replicas; of it, in tasks (JVM task threads) {jobs['task_cpu']:.1f} s, {jobs['tasks']} tasks in {jobs['jobs']} Spark jobs")
    shuffle = sum(row["shuffle_write"] for row in r["rows"].values())
    print(f"    shuffle written: {shuffle / 1e6:.1f} MB in all = {shuffle / gb / 1e6:.2f} MB per GB of input; "
          f"spilled {sum(row['spill'] for row in r['rows'].values()) / 1e6:.1f} MB")
    result = jobs["result"]
    print(f"    results to the driver (jobs phase): {result / 1e6:.2f} MB = {result / r['replicas']:.0f} bytes per partition replica "
          f"(parse job: {parse['result'] / 1e6:.2f} MB)")
    hwm = r["hwm"]
    print(f"    peak RSS: driver python {hwm.get('driver python', 0) / MiB:.0f} MiB, JVM {hwm.get('jvm', 0) / MiB:.0f} MiB, "
          f"one python worker {hwm.get('python workers', 0) / MiB:.0f} MiB; whole tree PSS {r['pss'] / MiB:.0f} MiB; "
          f"report.html {r['report'] / 1e6:.2f} MB")
    tables = r["tables"]
    big = sorted(tables.items(), key=lambda kv: -kv[1])[:4]
    print(f"    DIR's tables: {sum(tables.values()) / 1e6:.1f} MB = {sum(tables.values()) / size:.2f} bytes per input byte "
          f"({', '.join(f'{k} {v / 1e6:.1f}' for k, v in big)} MB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="*", type=Path, help="a collection to analyze (as analyze takes it)")
    ap.add_argument("--wide", type=int, default=None, metavar="N", help="generate 3 brokers x N partitions (scale_bench's shape)")
    ap.add_argument("--records", type=int, default=40, help="records per partition with --wide (default 40)")
    ap.add_argument("--deep", type=float, default=None, metavar="MB", help="generate one partition of MB on 3 brokers (depth_bench's)")
    ap.add_argument("--data", type=Path, default=None, help="keep generated collections here (reused when present)")
    ap.add_argument("--driver-memory", default=None, help="KF_DRIVER_MEMORY for the run (e.g. 1g)")
    args = ap.parse_args()
    if bool(args.inputs) + bool(args.wide) + bool(args.deep) != 1:
        ap.error("give INPUT..., --wide N or --deep MB (one of them)")
    tmp = Path(tempfile.mkdtemp(prefix="kf-cost-bench-"))
    try:
        inputs = [p.resolve() for p in args.inputs] or generate(args, args.data or tmp / "data")
        load0 = os.getloadavg()[0]
        report(inputs, analyze(inputs, tmp, args.driver_memory), load0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
