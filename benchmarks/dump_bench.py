"""``kafka-forensics dump`` against Kafka's ``kafka-dump-log``, whole processes, one core each.

Run:  python benchmarks/dump_bench.py              (a ~200 MiB segment of ~1.2 KiB batches)
      python benchmarks/dump_bench.py --mb 20      (smaller, quicker)
      python benchmarks/dump_bench.py --no-kafka   (skip kafka-dump-log; no Java needed)

What is timed, and why this way: an operator runs one command per file and waits for the output,
so each figure is a whole process (interpreter or JVM start, imports, reading, formatting,
writing), pinned to one core with ``taskset -c 0``, stdout to /dev/null, as the best of
``--repeat`` (3) runs on a file already in the page cache. The segment is written by the writer's
bulk generator (``sample_data/writer/bulk.py``, judged by kafka-dump-log in its own tests):
v2 batches of ``--batch-records`` uncompressed records (12-byte keys, JSON values), ~1.2 KiB each.

Pairs (ours | Kafka 3.6.2's, from ../shared/tools):
  batch level      dump FILE [--json]            | kafka-dump-log --files FILE
  record level     dump FILE --records [--json]  | kafka-dump-log --deep-iteration --files FILE
  with payloads    dump FILE --records --payloads --json | ... --deep-iteration --print-data-log
Kafka's record lines carry offsets, timestamps, sizes and sequence numbers; ours also carry each
key's and value's SHA-256, so ours do more work per record. "x" is kafka-dump-log's time over ours.

Cold start: ``dump`` of a tiny checkpoint and of a tiny segment (numba kernels loaded from their
on-disk cache: the run is repeated with NUMBA_DEBUG_CACHE=1 to show whether they were loaded or
compiled), next to ``python -c pass``. Nothing is asserted: the script only prints.

"x steady" is the per-core ratio of the work itself: each side's CPU less its CPU for the same
command on a 10 KiB segment (the process start, imports, numba's kernels or the JVM's classes), as
issue 17 measures ingest. Each side's start costs 0.7-0.9 s of CPU (the cold-start table below), so
on a file of tens of MB the whole-process "x" is mostly the two starts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sample_data.writer import bulk  # noqa: E402

MiB = 1 << 20
SHARED = Path(os.environ.get("KF_SHARED", REPO.parent / "shared"))  # as tests/conftest.py
TOOLS_TGZ = SHARED / "tools" / "kafka_2.13-3.6.2.tgz"
PIN = ["taskset", "-c", "0"] if shutil.which("taskset") else []


def write_segment(path: Path, mb: float, records: int, value_bytes: int) -> bulk.SegmentStats:
    """~``mb`` MiB of v2 batches, ``records`` records each (8 record sets tiled)."""
    templates = bulk.make_templates("none", records, value_bytes, 12, 8, seed=1)
    return bulk.write_segment_file(path, templates, int(mb * MiB), producer_id=4242, partition_leader_epoch=7)


def kafka_dump_log(work: Path) -> Path | None:
    """bin/kafka-dump-log.sh of the Kafka 3.6.2 in ../shared/tools, unpacked once into ``work``."""
    if shutil.which("java") is None or not TOOLS_TGZ.exists():
        return None
    found = list(work.glob("kafka_*/bin/kafka-dump-log.sh"))
    if not found:
        with tarfile.open(TOOLS_TGZ) as tf:
            tf.extractall(work, filter="data")
        found = list(work.glob("kafka_*/bin/kafka-dump-log.sh"))
    return found[0] if found else None


def ours() -> list[str]:
    """This checkout's CLI, as the console script runs it (``main()`` of analyzer.cli)."""
    return [sys.executable, "-m", "analyzer.cli"]


def run_once(cmd: list[str], env: dict | None = None, stdout=subprocess.DEVNULL) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds (user + sys), exit code) of one whole process pinned to core 0.

    CPU time is what the figures use: the machine may be shared, and a process pinned to one
    core cannot use more than that core, so its CPU time is its cost per core (for the JVM too:
    its JIT and GC threads run on the same core and count).
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen([*PIN, *cmd], stdout=stdout, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode


def timed(cmd: list[str], repeat: int, env: dict | None = None) -> tuple[float, float, int]:
    """Best (CPU seconds, wall seconds) of ``repeat`` runs with stdout to /dev/null, and the exit code."""
    runs = [run_once(cmd, env) for _ in range(repeat)]
    return min(r[1] for r in runs), min(r[0] for r in runs), runs[-1][2]


def output_bytes(cmd: list[str], env: dict | None = None) -> int:
    """Bytes a command writes to stdout (one untimed run)."""
    with tempfile.TemporaryFile() as out:
        run_once(cmd, env, stdout=out)
        return out.tell()


def numba_cache_report(cmd: list[str], env: dict) -> str:
    """How many numba kernels a run loaded from the on-disk cache, and how many it compiled."""
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**env, "NUMBA_DEBUG_CACHE": "1"},
                         cwd=REPO, text=True, errors="replace").stdout  # numba logs to stdout
    loaded = out.count("[cache] data loaded from")
    saved = out.count("[cache] data saved to")
    return f"{loaded} kernels loaded from cache, {saved} compiled and saved"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=200, help="segment size in MiB (default 200)")
    ap.add_argument("--batch-records", type=int, default=10, help="records per batch (default 10: ~1.2 KiB batches)")
    ap.add_argument("--value-bytes", type=int, default=95, help="bytes per record value (default 95)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the best counts (default 3)")
    ap.add_argument("--no-kafka", action="store_true", help="do not run kafka-dump-log")
    ap.add_argument("--work", type=Path, help="keep the segment and the unpacked Kafka here (default: a temp dir)")
    args = ap.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="dump-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    try:
        seg = work / "00000000000000000000.log"
        stats = write_segment(seg, args.mb, args.batch_records, args.value_bytes)
        print(f"# segment: {stats.size / MiB:.0f} MiB, {stats.batches} batches of {stats.batch_size} bytes, "
              f"{stats.records} records; {'pinned to core 0' if PIN else 'NOT pinned (no taskset)'}; best of {args.repeat}",
              file=sys.stderr)
        script = None if args.no_kafka else kafka_dump_log(work)
        subprocess.run([*ours(), "dump", str(seg), "--kind", "segment"], stdout=subprocess.DEVNULL, env=env, cwd=REPO)  # warm
        rows = [
            ("batches, text", [], ["--files"]),
            ("batches, --json", ["--json"], None),
            ("records, text", ["--records"], ["--deep-iteration", "--files"]),
            ("records, --json", ["--records", "--json"], None),
            ("records + payloads, --json", ["--records", "--payloads", "--json"], ["--deep-iteration", "--print-data-log", "--files"]),
        ]
        tiny = work / "tiny"
        tiny.mkdir(exist_ok=True)
        small_seg = tiny / "00000000000000000000.log"
        write_segment(small_seg, 0.01, args.batch_records, args.value_bytes)
        print(f"{'dump of the segment (CPU s)':<30} {'ours':>7} {'out MB':>7} {'rows/s':>9} {'kafka':>7} {'x':>6} {'x steady':>8}"
              "   (wall: ours, kafka)")
        kafka = kafka_start = None
        for name, our_args, kafka_args in rows:
            cmd = [*ours(), "dump", str(seg), *our_args]
            size = output_bytes(cmd, env)
            cpu, wall, code = timed(cmd, args.repeat, env)
            n_rows = stats.batches + (stats.records if "--records" in our_args else 0)
            if kafka_args is not None and script is not None:  # a JSON row reuses the text row's
                kafka = timed([str(script), *kafka_args, str(seg)], args.repeat)
                kafka_start = timed([str(script), *kafka_args, str(small_seg)], args.repeat)[0]
            if kafka:
                start = timed([*ours(), "dump", str(small_seg), *our_args], args.repeat, env)[0]
                # (a file too small for its work to outweigh the noise of the starts gives no ratio)
                steady = f"{(kafka[0] - kafka_start) / (cpu - start):8.1f}" if cpu - start > 0.05 else f"{'-':>8}"
                ks = f"{kafka[0]:7.2f} {kafka[0] / cpu:6.1f} {steady}   ({wall:.2f}, {kafka[1]:.2f})"
            else:
                ks = f"{'-':>7} {'-':>6} {'-':>8}   ({wall:.2f})"
            print(f"{name:<30} {cpu:7.2f} {size / 1e6:7.0f} {n_rows / cpu:9.3g} {ks}{'' if code == 0 else f'  exit {code}'}")
        print("# x: kafka-dump-log's CPU over ours, whole processes; x steady: the same less each side's CPU for "
              "the same command on a 10 KiB segment (interpreter or JVM start, imports, first calls)")
        ckpt = tiny / "leader-epoch-checkpoint"
        ckpt.write_text("0\n2\n0 0\n3 49\n")
        print(f"\n{'cold start (whole process)':<44} {'CPU s':>6} {'wall s':>7}")
        cold = [
            ("python -c pass", [sys.executable, "-c", "pass"]),
            ("dump leader-epoch-checkpoint", [*ours(), "dump", str(ckpt)]),
            ("dump leader-epoch-checkpoint --json", [*ours(), "dump", str(ckpt), "--json"]),
            ("dump 10 KiB segment", [*ours(), "dump", str(small_seg)]),
            ("dump 10 KiB segment --records --json", [*ours(), "dump", str(small_seg), "--records", "--json"]),
        ]
        if script is not None:
            cold.append(("kafka-dump-log --files 10 KiB segment", [str(script), "--files", str(small_seg)]))
        for name, cmd in cold:
            cpu, wall, _ = timed(cmd, max(args.repeat, 5), env)
            print(f"{name:<44} {cpu:6.3f} {wall:7.3f}")
        print(f"\n# numba, dump of a 10 KiB segment --records: {numba_cache_report([*ours(), 'dump', str(small_seg), '--records'], env)}")
        print(f"# numba, dump of a checkpoint: {numba_cache_report([*ours(), 'dump', str(ckpt)], env)}")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
