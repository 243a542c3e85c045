"""One way to get a SparkSession, so the CLI, tests and benchmarks run Spark the same way.

Why a helper: Spark's defaults are wrong for a forensic tool run on a laptop. 200 shuffle
partitions turn a few thousand rows into hundreds of tiny tasks; INFO logs and the console
progress bar drown our own stderr; ``spark-warehouse/``, ``metastore_db/`` and ``derby.log``
would land in the user's current directory. And the persistent catalog (Hive + Derby) must live
inside the output DIR, so it is only switched on when ``catalog_dir`` is given.

Ctrl-C: pyspark's own SIGINT handler cancels the jobs with a py4j call made inside the
interrupted one and prints its tracebacks, and the JVM (which ignores SIGINT) keeps writing into
the staging dir while Python removes it. Commands wrap their run in ``interruptible()`` instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a session is asked for: ``interruptible`` must not pay for pyspark
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def catalog_confs(catalog_dir: Path) -> dict[str, str]:
    """The Spark confs that open the persistent catalog in ``catalog_dir`` (also written into
    ``catalog_dir/spark-sql.conf`` for ``spark-sql --properties-file``)."""
    catalog_dir = Path(catalog_dir).resolve()
    derby_log = catalog_dir / "derby.log"
    java_opts = f"-Dderby.system.home={catalog_dir} -Dderby.stream.error.file={derby_log}"
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(catalog_dir / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:{catalog_dir / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": java_opts,
    }


def get_session(master: str = "local[*]", catalog_dir: Path | None = None, app: str = "kafka-forensics",
                shuffle_partitions: int = 8) -> SparkSession:
    """A quiet SparkSession on ``master``; with ``catalog_dir``, Hive support + a Derby metastore there.

    The executors' Python must be the driver's (same venv, same parsers), so it is pinned.
    A session already running in this process is returned as is (Spark allows one per JVM):
    callers that need the catalog start a fresh process or stop the session first.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        # local mode runs the executors in the driver JVM: Spark's 1g default makes the Parquet
        # writers of big tables spend their time in GC (set before the JVM starts)
        .config("spark.driver.memory", os.environ.get("KF_DRIVER_MEMORY", "4g"))
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.sources.partitionOverwriteMode", "static")
        # partitioned writes (records/batches by topic) keep a writer per topic open instead of
        # sorting every task's rows by topic first
        .config("spark.sql.maxConcurrentOutputFileWriters", "64")
        .config("spark.sql.parquet.compression.codec", "snappy")  # fastest to write; tables are scratch-sized
        # a parsed file comes back as one row per piece; keep Arrow batches modest
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2048")
        # one python worker per core, reused across tasks (numba JIT caches warm once)
        .config("spark.python.worker.reuse", "true")
    )
    scratch = scratch_dir()
    builder = builder.config("spark.local.dir", str(scratch))
    if catalog_dir is not None:
        catalog_dir = Path(catalog_dir).resolve()
        catalog_dir.mkdir(parents=True, exist_ok=True)
        for key, value in catalog_confs(catalog_dir).items():
            builder = builder.config(key, value)
        builder = builder.enableHiveSupport()
    else:
        # no catalog: keep Spark's default warehouse out of the user's cwd
        builder = builder.config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
    _quiet_java_logs()
    on_sigint = signal.getsignal(signal.SIGINT)
    spark = builder.getOrCreate()
    if callable(on_sigint) and on_sigint is not signal.default_int_handler and signal.getsignal(signal.SIGINT) is not on_sigint:
        # a caller's own Ctrl-C handling (``interruptible``) stays: pyspark's handler cancels the
        # jobs through a py4j call made inside the interrupted one, which logs two tracebacks
        signal.signal(signal.SIGINT, on_sigint)
    spark.sparkContext.setLogLevel(os.environ.get("KF_SPARK_LOG_LEVEL", "ERROR"))
    if catalog_dir is not None:
        # in case the JVM was already running, Derby still reads these at first use
        system = spark.sparkContext._jvm.java.lang.System
        system.setProperty("derby.system.home", str(catalog_dir))
        system.setProperty("derby.stream.error.file", str(catalog_dir / "derby.log"))
    return spark


class Interrupted(BaseException):
    """Ctrl-C during a command that runs Spark. A BaseException like KeyboardInterrupt, so no
    ``except Exception`` swallows it, but not one: py4j logs every KeyboardInterrupt it sees
    inside a call with a traceback."""


def _children() -> list[int]:
    """Processes this one started (the JVM, or spark-submit while it is still starting one)."""
    me = str(os.getpid())
    found = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2:].split()[1] == me:
            found.append(int(d.name))
    return found


def stop_jvm(timeout: float = 30) -> None:
    """Kill the JVM this process started and wait for it, so nothing it runs writes another byte
    (a cancelled task still finishing its Parquet file into the staging dir) once this returns;
    then remove its scratch. SIGKILL: the JVM says nothing while dying, and its shutdown hooks
    have nothing left to save. pyspark's daemon and workers exit when their JVM does."""
    context = getattr(sys.modules.get("pyspark"), "SparkContext", None)
    proc = getattr(getattr(context, "_gateway", None), "proc", None)
    server = getattr(getattr(context, "_active_spark_context", None), "_accumulatorServer", None)
    if server is not None:  # its connection from the JVM ends with an EOFError that socketserver prints
        server.handle_error = lambda request, client_address: None
    pids = set(_children()) | ({proc.pid} if proc is not None and proc.poll() is None else set())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:
        if proc is not None and pid == proc.pid:
            proc.wait(timeout)
        else:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    shutil.rmtree(_scratch_path(), ignore_errors=True)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Inside the block, Ctrl-C stops the JVM first and then raises ``Interrupted``, so the
    staging dir is removed after the last write into it, and the command can say one line
    instead of py4j's tracebacks. (The JVM ignores SIGINT itself: pyspark starts it that way.)"""

    def handler(signum, frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
        logging.disable(logging.CRITICAL)  # py4j logs each call the dead JVM breaks, with a traceback
        stop_jvm()
        raise Interrupted()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


SCRATCH_PREFIX = "kf-spark-"


def scratch_dir() -> Path:
    """This process's Spark scratch (``spark.local.dir``: block manager files, pyspark's temp dir,
    added files), ``$TMPDIR/kf-spark-<pid>``. Spark deletes its scratch in a JVM shutdown hook, which
    a SIGKILLed run never reaches (an unattended kill left ``/tmp/spark-*`` and ``blockmgr-*`` behind,
    shuffle files and all); with one named folder per process, each start removes those of dead
    processes, as ``jobs.outdir.recover`` does for staging dirs. (``SPARK_LOCAL_DIRS`` still wins.)"""
    from .outdir import _pid_alive

    base = _scratch_path().parent
    for old in base.glob(f"{SCRATCH_PREFIX}*"):
        try:
            pid = int(old.name[len(SCRATCH_PREFIX):])
        except ValueError:
            continue
        if pid != os.getpid() and not _pid_alive(pid):
            shutil.rmtree(old, ignore_errors=True)
    mine = _scratch_path()
    mine.mkdir(parents=True, exist_ok=True)
    return mine


def _scratch_path() -> Path:
    return Path(os.environ.get("TMPDIR", "/tmp")) / f"{SCRATCH_PREFIX}{os.getpid()}"


def _quiet_java_logs() -> None:
    """Spark prints a few WARN lines while starting (native hadoop, hostname loopback...) before
    setLogLevel can act; point log4j2 at a config that only lets errors through."""
    if "SPARK_CONF_DIR" in os.environ:
        return
    conf_dir = Path(__file__).with_name("spark_conf")
    if (conf_dir / "log4j2.properties").is_file():
        os.environ["SPARK_CONF_DIR"] = str(conf_dir)
