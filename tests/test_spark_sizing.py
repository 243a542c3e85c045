"""Spark sized to the work (jobs.session.conf.sized_confs): a kilobyte collection must not start the
JVM and plan its queries as for a terabyte one, and the heap follows the input."""

from __future__ import annotations

import time

from jobs.ingest.discover import input_bytes
from jobs.session.conf import SMALL_INPUT, TINY_INPUT, sized_confs


def test_small_input_runs_light(monkeypatch):
    monkeypatch.delenv("KF_DRIVER_MEMORY", raising=False)
    c = sized_confs(400_000, cores=2)
    assert c["spark.driver.memory"] == "512m"
    assert sized_confs(TINY_INPUT, cores=2)["spark.driver.memory"] == "1g"
    assert c["spark.sql.shuffle.partitions"] == "2"
    assert c["spark.sql.codegen.wholeStage"] == "false"
    assert "TieredStopAtLevel=1" in c["spark.driver.extraJavaOptions"]


def test_big_input_keeps_codegen_and_grows_the_heap(monkeypatch):
    monkeypatch.delenv("KF_DRIVER_MEMORY", raising=False)
    ten_gb = sized_confs(10 << 30, cores=2)
    assert ten_gb["spark.driver.memory"] == "4g"
    assert "spark.sql.codegen.wholeStage" not in ten_gb
    # the jobs read runs, replicas and ranges at any depth: the JVM stays light at every size
    assert "TieredStopAtLevel=1" in ten_gb["spark.driver.extraJavaOptions"]
    assert "spark.driver.extraJavaOptions" not in sized_confs(None, cores=2)
    assert int(ten_gb["spark.sql.shuffle.partitions"]) >= 8
    assert sized_confs(SMALL_INPUT, cores=2)["spark.driver.memory"] == "2g"
    assert sized_confs(1 << 40, cores=2)["spark.driver.memory"] == "8g"


def test_driver_memory_env_wins(monkeypatch):
    monkeypatch.setenv("KF_DRIVER_MEMORY", "3g")
    assert sized_confs(1000, cores=2)["spark.driver.memory"] == "3g"
    assert sized_confs(None, cores=2)["spark.driver.memory"] == "3g"


def test_input_bytes_counts_regular_files_only(tmp_path):
    (tmp_path / "b1" / "t-0").mkdir(parents=True)
    (tmp_path / "b1" / "t-0" / "00000000000000000000.log").write_bytes(b"x" * 1000)
    (tmp_path / "b1" / "meta.properties").write_bytes(b"y" * 24)
    (tmp_path / "b1" / "link.log").symlink_to("/etc/passwd")
    arc = tmp_path / "b2.tar"
    arc.write_bytes(b"z" * 500)
    assert input_bytes([tmp_path / "b1", arc]) == 1024 + 500


def test_the_analysis_driver_does_not_load_the_numba_kernels():
    """The driver reads the parsers' schemas, never parses a segment: importing what analyze imports
    must not load numba (~100 MB of RSS in the driver); the first parse still loads the kernels."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import analyzer.cli, analyzer.analyze, analyzer.report, jobs.store.tables, jobs.findings.run, jobs.ingest.run\n"
        "print('numba' in sys.modules)\n"
        "from parsers import segment\n"
        "from sample_data.writer.records import BatchSpec, Record, encode_batches\n"
        "got = segment.parse(encode_batches([BatchSpec(0, (Record(b'k', b'v', 1),))]), '0.log', records=True)\n"
        "print('numba' in sys.modules, got.table.num_rows, got.extra['records'].num_rows)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["False", "True 1 1"], out


def test_the_session_forgets_finished_queries(spark):
    """Spark's status store keeps every finished query's plan graph and metrics (1,000 by default),
    UI or not: over the demo's dozen analyses in one session they filled the heap. The session
    keeps a few."""
    for i in range(60):
        spark.range(i + 1).selectExpr("id * 2 AS x").agg({"x": "sum"}).collect()
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    store = spark._jsparkSession.sharedState().statusStore()
    deadline = time.monotonic() + 10  # the store trims on a thread of its own, after the listener
    while store.executionsCount() > 20 and time.monotonic() < deadline:
        time.sleep(0.1)
    kept = store.executionsCount()
    assert kept <= 20, kept


def test_column_expressions_make_no_call_site_round_trips(spark):
    """pyspark's DataFrame debugging sets and clears a JVM call site around every Column call (four
    py4j round trips and a Python stack walk each): ~5,000 of an analysis's ~21,000 round trips.
    The session turns it off, so building a Column expression leaves the JVM's origin untouched."""
    from pyspark.errors import utils as errors_utils
    from pyspark.sql import functions as F

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    errors_utils._enable_debugging_cache = None  # (read again from the session, as a fresh process does)
    calls = []
    real = errors_utils._capture_call_site
    try:
        errors_utils._capture_call_site = lambda *a: calls.append(a) or real(*a)
        F.col("a") + F.lit(1)
    finally:
        errors_utils._capture_call_site = real
    assert calls == []


def test_a_small_session_never_stops_for_metaspace(spark):
    """The JVM of a small collection starts with room for the metadata of Spark's classes (~60 MB
    when an analysis has run), so loading them triggers no full GC ("Metadata GC Threshold"): the
    option must reach the running JVM, not only the confs."""
    jvm = spark.sparkContext._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    assert int(bean.getVMOption("MetaspaceSize").getValue()) >= 128 << 20
    used = sum(int(pool.getUsage().getUsed()) for pool in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
               if pool.getName() == "Metaspace")
    assert 0 < used < int(bean.getVMOption("MetaspaceSize").getValue())
