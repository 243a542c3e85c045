"""One way to get a SparkSession, so the CLI, tests and benchmarks run Spark the same way.

Why a helper: Spark's defaults are wrong for a forensic tool run on a laptop. 200 shuffle
partitions turn a few thousand rows into hundreds of tiny tasks; INFO logs and the console
progress bar drown our own stderr; ``spark-warehouse/``, ``metastore_db/`` and ``derby.log``
would land in the user's current directory. And the persistent catalog (Hive + Derby) must live
inside the output DIR, so it is only switched on when ``catalog_dir`` is given.

Ctrl-C: pyspark's own SIGINT handler cancels the jobs with a py4j call made inside the
interrupted one and prints its tracebacks; a caller's own handler (``signals.interruptible``) is
put back once the session has started.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.errors import InputError, error_text

from . import class_sharing
from .conf import DEBUGGING, catalog_confs, cores, sized_confs
from .connect import is_remote_url, remote_session
from .log_noise import LOG_LEVEL_ENV, SPARK_CONF, quiet_java_logs, start_jvm_quietly
from .scratch import scratch_dir

if TYPE_CHECKING:  # imported when a session is asked for
    from pyspark.sql import SparkSession


def get_session(master: str = "local[*]", catalog_dir: Path | None = None, app: str = "kafka-forensics",
                shuffle_partitions: int = 8, input_bytes: int | None = None) -> SparkSession:
    """A quiet SparkSession on ``master``; with ``catalog_dir``, Hive support + a Derby metastore there.
    A ``sc://HOST:PORT`` master is a Spark Connect server (``remote_session``; no catalog_dir then).

    The executors' Python must be the driver's (same venv, same parsers), so it is pinned.
    A session already running in this process is returned as is (Spark allows one per JVM):
    callers that need the catalog start a fresh process or stop the session first.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    confs = sized_confs(input_bytes, cores(master), remote=is_remote_url(master))
    if shuffle_partitions != 8 or input_bytes is None:
        confs["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    settings = {
        "spark.master": master,
        "spark.app.name": app,
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.sources.partitionOverwriteMode": "static",
        # partitioned writes (records/batches by topic) keep a writer per topic open instead of
        # sorting every task's rows by topic first
        "spark.sql.maxConcurrentOutputFileWriters": "64",
        "spark.sql.parquet.compression.codec": "snappy",  # fastest to write; tables are scratch-sized
        # a parsed file comes back as one row per piece; keep Arrow batches modest
        "spark.sql.execution.arrow.maxRecordsPerBatch": "2048",
        # one python worker per core, reused across tasks (numba JIT caches warm once)
        "spark.python.worker.reuse": "true",
        # The status store keeps every finished query's plan graph and metrics, job and stage for
        # the UI even with the UI off (1,000 queries by default, each DAG graph forever): an
        # analysis runs ~130 queries, and the demo's one session runs a dozen analyses: kept, they
        # filled the heap (docs/design.md). Nothing reads them after the query: keep only a few.
        "spark.sql.ui.retainedExecutions": "20",
        "spark.ui.retainedJobs": "100",
        "spark.ui.retainedStages": "100",
        "spark.ui.retainedTasks": "1000",
        "spark.ui.dagGraph.retainedRootRDDs": "100",
        # pyspark's DataFrame debugging wraps every Column call in ~4 py4j round trips (the active
        # session, a conf read, the call site set and cleared) and a Python stack walk: an
        # analysis builds ~1,200 Column expressions, so ~5,000 of its ~21,000 round trips were
        # this. The call site only names the Python line in an analysis error's message.
        DEBUGGING: "false",
    }
    if is_remote_url(master):
        return remote_session(master, settings | confs)
    scratch = scratch_dir()
    settings["spark.local.dir"] = str(scratch)
    if catalog_dir is not None:
        catalog_dir = Path(catalog_dir).resolve()
        catalog_dir.mkdir(parents=True, exist_ok=True)
        for key, value in catalog_confs(catalog_dir).items():  # (spark.sql.catalogImplementation=hive among them)
            if key == "spark.driver.extraJavaOptions" and key in confs:
                value = f"{confs.pop(key)} {value}"
            settings[key] = value
    else:
        # no catalog: keep Spark's default warehouse out of the user's cwd
        settings["spark.sql.warehouse.dir"] = str(scratch / "warehouse")
    settings |= confs
    quiet_java_logs()
    pending = final = None
    if SparkContext._gateway is None:  # (a JVM already running keeps the options it started with)
        cds, pending, final = class_sharing.java_options(SPARK_CONF, SPARK_CONF / "log4j2.properties")
        if cds:
            key = "spark.driver.extraJavaOptions"
            settings[key] = f"{settings.get(key, '')} {cds}".strip()
    on_sigint = signal.getsignal(signal.SIGINT)
    start_jvm_quietly(settings)
    builder = SparkSession.builder.config(map=settings)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:
        refused = refused_setting(exc)
        if refused is None:
            raise
        raise InputError(f"Spark could not start: {refused} (Spark's own settings: SPARK_CONF_DIR's spark-defaults.conf, "
                         "or SPARK_HOME's conf/)") from None
    if pending is not None:
        class_sharing.finish_at_exit(pending, final)
    if callable(on_sigint) and on_sigint is not signal.default_int_handler and signal.getsignal(signal.SIGINT) is not on_sigint:
        # a caller's own Ctrl-C handling (``interruptible``) stays: pyspark's handler cancels the
        # jobs through a py4j call made inside the interrupted one, which logs two tracebacks
        signal.signal(signal.SIGINT, on_sigint)
    spark.sparkContext.setLogLevel(os.environ.get(LOG_LEVEL_ENV, "ERROR"))
    quiet_when_the_jvm_ends(spark.sparkContext)
    if catalog_dir is not None:
        # in case the JVM was already running, Derby still reads these at first use
        system = spark.sparkContext._jvm.java.lang.System
        system.setProperty("derby.system.home", str(catalog_dir))
        system.setProperty("derby.stream.error.file", str(catalog_dir / "derby.log"))
    return spark


# Spark's words for a setting it cannot use, in the first line of the error its SparkContext
# raised: a user's spark-defaults.conf (a size where a count goes, an unknown enum value)
_REFUSED = re.compile(r"^: \S*(?:IllegalArgumentException|SparkException): (.*(?:INVALID_CONF_VALUE|config|conf\b).*)$", re.M)


def refused_setting(exc: BaseException) -> str | None:
    """What Spark said of a setting it refused while its context started, or None for any other
    error: that is the user's configuration to mend, not our internal error (exit 2, one line)."""
    match = _REFUSED.search(error_text(exc) or "")
    return match.group(1).strip() if match else None


def quiet_when_the_jvm_ends(context) -> None:
    """pyspark's accumulator server (a thread of ours the JVM reports to) prints a Python traceback
    when its connection ends mid-message: the JVM died (out of heap, killed). What ended the run
    is said once, in one line (``jobs.session.memory``, the CLI's internal error); a connection
    the JVM dropped is left unsaid, any other error of the server as pyspark prints it."""
    server = getattr(context, "_accumulatorServer", None)
    if server is None or getattr(server, "_kf_quiet", False):
        return
    said = server.handle_error

    def handle_error(request, client_address) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (EOFError, ConnectionError)):
            said(request, client_address)

    server.handle_error, server._kf_quiet = handle_error, True
