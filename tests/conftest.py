"""Shared test fixtures: where ../shared lives, and helpers to read Kafka's expected output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

# pytest-xdist's workers run with COLUMNS=80 and LINES=24 exported. The text report follows $COLUMNS,
# as a CLI should; the tests read it as a pipe without COLUMNS gets it (100 columns), in a worker too.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(__import__("os").environ.get("KF_SHARED", REPO.parent / "shared"))
GOLDEN = SHARED / "fixtures" / "golden"
FOUND = SHARED / "fixtures" / "found"
REAL = SHARED / "fixtures" / "real-cluster"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="session")
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"../shared not found at {SHARED}: the fixtures are required")
    return SHARED


TOOLS_TGZ = SHARED / "tools" / "kafka_2.13-3.6.2.tgz"


@pytest.fixture(scope="session")
def dump_log(tmp_path_factory):
    """Kafka 3.6.2's kafka-dump-log (from ../shared/tools), the judge of any bytes we write:
    ``dump_log(path) -> (returncode, stdout)`` with --deep-iteration."""
    if shutil.which("java") is None:
        pytest.fail("Java 17 is required for the kafka-dump-log oracle")
    root = tmp_path_factory.mktemp("kafka")
    with tarfile.open(TOOLS_TGZ) as tf:
        tf.extractall(root, filter="data")
    script = next(root.rglob("bin/kafka-dump-log.sh"))

    def run(path):
        out = subprocess.run([str(script), "--deep-iteration", "--files", str(path)], capture_output=True, text=True, timeout=120)
        return out.returncode, out.stdout

    run.script = script
    return run


TOOLS_TGZ_41 = SHARED / "tools" / "kafka_2.13-4.1.1.tgz"


@pytest.fixture(scope="session")
def kafka41_bin(tmp_path_factory) -> Path:
    """Kafka 4.1.1's ``bin/`` (from ../shared/tools), extracted once per session: the judge of
    what only Kafka 4 writes (its group, share and transaction coordinators' records)."""
    if shutil.which("java") is None:
        pytest.fail("Java 17 is required for the Kafka 4.1.1 oracle")
    root = tmp_path_factory.mktemp("kafka41")
    with tarfile.open(TOOLS_TGZ_41) as tf:
        tf.extractall(root, filter="data")
    return next(root.rglob("bin/kafka-dump-log.sh")).parent


_DUMP_MANY = """
public class DumpMany {
    public static void main(String[] args) {
        for (String f : args) {
            try {
                kafka.tools.DumpLogSegments.main(new String[] {"--deep-iteration", "--files", f});
            } catch (Throwable t) {
                System.out.println("KF-EXCEPTION " + t);
            }
            System.out.flush();
        }
    }
}
"""


@pytest.fixture(scope="session")
def dump_logs(dump_log, tmp_path_factory):
    """kafka-dump-log --deep-iteration over many files in one JVM: ``dump_logs(paths) ->
    ({path: its dump text}, {path: the exception that ended its dump})``. The tool gives up at the
    first exception, so a small driver calls its main once per file and catches what it throws."""
    libs = dump_log.script.parent.parent / "libs"
    src = tmp_path_factory.mktemp("dumpmany") / "DumpMany.java"
    src.write_text(_DUMP_MANY, encoding="utf-8")

    def run(paths):
        args = ["java", "-Xmx512m", "-cp", f"{libs}/*", str(src), *map(str, paths)]
        out = subprocess.run(args, capture_output=True, text=True, timeout=900)
        if out.returncode != 0:
            raise RuntimeError(f"kafka-dump-log driver failed: {out.stderr[-2000:]}")
        texts: dict[str, str] = {}
        errors: dict[str, str] = {}
        for sec in out.stdout.split("Dumping ")[1:]:
            name = sec.split("\n", 1)[0].strip()
            texts[name] = "Dumping " + sec
            exc = [ln for ln in sec.splitlines() if ln.startswith("KF-EXCEPTION ")]
            if exc:
                errors[name] = exc[-1][len("KF-EXCEPTION ") :]
        return texts, errors

    return run


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of a test run (Spark takes ~10 s to start): local[2], sized as for a
    small collection (what the tests feed it: no whole-stage codegen, quick JIT, 2 shuffle partitions;
    the 1 GiB heap of a small collection, not a tiny one's 512 MiB: it runs every test's dataset),
    no catalog (catalog tests run the CLI in subprocesses, see jobs/store/catalog.py)."""
    from jobs.session.conf import TINY_INPUT
    from jobs.session.start import get_session

    session = get_session("local[2]", shuffle_partitions=2, app="kafka-forensics-tests", input_bytes=TINY_INPUT)
    yield session
    session.stop()


# xdist's loadfile hands out whole files in queue order, and the file handed out last runs alone to
# its end while the other workers idle. Its own queue puts the files with the most tests first, which
# put the few long tests that start servers, clusters and whole analyses (one to six tests a file)
# last. The files known to take longest go first here, longest first, then the rest (see
# pytest_collection_modifyitems; pyproject's --no-loadscope-reorder keeps the order made here).
# Seconds: a file's wall time in one worker on a quiet 2-core machine, estimated (CI rehearsals' slowest
# tests, single-file runs); only the order matters, so a rough figure does.
HEAVY_FILES = {
    "test_atomic_outputs.py": 540,  # ~16 analyze runs, each SIGKILLed or stopped at a point or run whole
    "test_forensics_scenarios.py": 300,  # every demo scenario analyzed
    "test_dump_trust.py": 200,  # kafka-dump-log JVMs
    "test_spark_connect.py": 180,  # a Spark Connect server, two analyses
    "test_catalog.py": 150,  # ingest, spark-sql, sql twice, pyspark: five JVMs one after the other
    "test_full_disk.py": 120,  # analyze runs on full and read-only filesystems, a heap outgrown
    "test_standalone_cluster.py": 110,  # a master, two workers, moto's S3 server
    "test_cli_errors.py": 100,
    "test_cli_native.py": 100,
    "test_serve.py": 90,  # analyze, the Thrift server, beeline
    "test_cli_analyze.py": 90,
    "test_terminal.py": 90,
    "test_batch_runs.py": 90,
    "test_trust_inputs.py": 80,
    "test_collect.py": 80,
    "test_scenarios.py": 70,
    "test_live_input.py": 60,
    "test_salvage.py": 60,
    "test_object_stores.py": 60,
    "test_hostile_inputs.py": 50,
    "test_damaged_broker.py": 50,
    "test_evidence_integrity.py": 40,  # one analysis (a single test: xdist queued it last)
    "test_class_sharing.py": 40,
    "test_job_transforms.py": 40,
    "test_forensics_real.py": 40,
    "test_metadata_lifecycle.py": 40,
    "test_segment_real.py": 40,
    "test_fuzz_differential.py": 20,  # (a single test)
    "test_replica_logs.py": 10,  # (a single test)
}


JVM_FIXTURES = {"spark", "dump_log", "dump_logs", "kafka41_bin"}


def pytest_collection_modifyitems(config, items):
    """The heavy files first, longest first; then the other files that start a JVM (a Spark session
    or kafka-dump-log: seconds each), then the rest, each group as xdist orders it (most tests first)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # (one process: the order does not change the run's length)
    tests_in: dict[str, int] = {}
    jvm: set[str] = set()
    for item in items:
        tests_in[item.path.name] = tests_in.get(item.path.name, 0) + 1
        if JVM_FIXTURES & set(getattr(item, "fixturenames", ())):
            jvm.add(item.path.name)
    items.sort(key=lambda item: (-HEAVY_FILES.get(item.path.name, 0), item.path.name not in jvm, -tests_in[item.path.name]))
