"""One way to get a SparkSession, so the CLI, tests and benchmarks run Spark the same way.

Why a helper: Spark's defaults are wrong for a forensic tool run on a laptop. 200 shuffle
partitions turn a few thousand rows into hundreds of tiny tasks; INFO logs and the console
progress bar drown our own stderr; ``spark-warehouse/``, ``metastore_db/`` and ``derby.log``
would land in the user's current directory. And the persistent catalog (Hive + Derby) must live
inside the output DIR, so it is only switched on when ``catalog_dir`` is given.

Ctrl-C: pyspark's own SIGINT handler cancels the jobs with a py4j call made inside the
interrupted one and prints its tracebacks, and the JVM (which ignores SIGINT) keeps writing into
the staging dir while Python removes it. Commands wrap their run in ``interruptible()`` instead,
which the CLI's own process also asks to take SIGTERM and SIGHUP (``STOP_SIGNALS``: ``timeout``,
systemd, Kubernetes, a batch scheduler or a closed terminal stop a run that way).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.errors import InputError
from jobs.processes import pid_alive

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
        # partitioned tables (records, batches: by topic) list their partition folders at query
        # time, so registering them needs no MSCK REPAIR and no files at their final place yet
        "spark.sql.hive.manageFilesourcePartitions": "false",
        # a metastore that cannot start (a full disk) fails at once instead of retrying for 20 s
        "spark.hadoop.hive.hmshandler.retry.attempts": "1",
        "spark.driver.extraJavaOptions": java_opts,
    }


SMALL_INPUT = 256 << 20  # below this, Spark's fixed costs (JIT, codegen, tasks) dwarf the data
# Below this, a 512 MiB heap holds every job's data (the heap is most of the tree's RSS; measured
# in docs/design.md).
TINY_INPUT = 4 << 20


def sized_confs(input_bytes: int | None, cores: int, remote: bool = False) -> dict[str, str]:
    """Spark confs sized to the work, so a kilobyte collection does not pay for a terabyte one.

    Why: on a small collection nearly all of an analysis is Spark's fixed cost per query, not data:
    Janino compiling whole-stage code for each of dozens of plans, C2 compiling Spark itself, a
    task per shuffle partition. Below ``SMALL_INPUT`` whole-stage codegen is off and shuffles use one
    partition per core; at every known size the JVM stays on its quick C1 compiler with the serial
    collector (``DRIVER_JVM_OPTIONS``); the heap follows the input (512 MiB below
    ``TINY_INPUT``, 1 GiB for other small collections, 2 GiB plus 1 per 4 GiB of input up to 8 GiB),
    so a small run stays light: the serial collector lets the heap grow to its cap before it collects,
    so the cap, not the data, sets the JVM's RSS (measured: docs/design.md).
    ``None`` (unknown size: tests, the catalog) keeps the big-data defaults. ``KF_DRIVER_MEMORY`` still wins.
    """
    small = input_bytes is not None and input_bytes < SMALL_INPUT
    if input_bytes is None:
        gib = 4
    else:
        gib = 1 if small else min(8, 2 + input_bytes // (4 << 30))
    heap = "512m" if input_bytes is not None and input_bytes < TINY_INPUT else f"{gib}g"
    confs = {
        # (over Spark Connect the server's driver has its own heap: KF_DRIVER_MEMORY is not read)
        "spark.driver.memory": heap if remote else driver_memory(heap),
        "spark.sql.shuffle.partitions": str(max(1, cores) if small else max(8, 4 * cores)),
    }
    if small:
        # (``spark.sql.codegen.factoryMode=NO_CODEGEN`` would save more, but it is a testing
        # conf and Spark's catalog cannot decode its Table objects without codegen)
        confs["spark.sql.codegen.wholeStage"] = "false"
    if input_bytes is not None:
        confs["spark.driver.extraJavaOptions"] = DRIVER_JVM_OPTIONS
    return confs


# The driver JVM's flags at every known size. Why at every size, not only for small inputs: the
# jobs read one row per run of batches, per replica, per range or per finding (the records only
# where replicas differ), so at any depth the JVM runs many small queries and little data, and
# C2's compiler threads and G1's concurrent ones only took the cores from them (docs/design.md;
# the ingest's heavy work is in the Python workers). C1 alone reserves only 48 MB of code cache: Spark with the
# Hive catalog fills it, and then the JVM disables its compiler and interprets everything from
# there on. Metaspace grows to ~60 MB as Spark's classes load; from its first 21 MB on, each step
# up was a full GC that stops every thread.
DRIVER_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m -XX:MetaspaceSize=256m"


# an INPUT on an object store (``s3://…``), as ``jobs.ingest.stores`` tells them
STORE_URL = re.compile(r"^([a-z][a-z0-9+.-]*)://", re.I)

MEMORY_ENV = "KF_DRIVER_MEMORY"
DEBUGGING = "spark.python.sql.dataFrameDebugging.enabled"  # (see get_session)
MIN_DRIVER_MEMORY = 512 << 20  # Spark refuses a heap whose usable size is under 450 MiB (1.5 x its 300 MiB reserve)
_SIZE = re.compile(r"(\d+)([kmgt]?)", re.I)  # what the JVM's -Xmx takes


class DriverMemoryError(InputError, ValueError):
    """``KF_DRIVER_MEMORY`` is not a heap size Spark can start with: one line naming it, exit 2."""


def driver_memory(default: str) -> str:
    """The driver heap: ``KF_DRIVER_MEMORY`` (a JVM size, ``4g``, ``1536m``) or ``default``.

    Checked here, so that a bad value is one line naming the variable rather than Spark's
    INVALID_DRIVER_MEMORY stack trace from inside the JVM start (or a JVM that does not start)."""
    value = os.environ.get(MEMORY_ENV, "").strip()
    if not value:
        return default
    match = _SIZE.fullmatch(value)
    if match is None:
        raise DriverMemoryError(f"{MEMORY_ENV}={value}: not a size (e.g. 4g, 1536m)")
    size = int(match.group(1)) * 1024 ** "_kmgt".index((match.group(2) or "_").lower())
    if size < MIN_DRIVER_MEMORY:
        raise DriverMemoryError(f"{MEMORY_ENV}={value} is below the 512m Spark needs to start (it keeps 300 MiB of any heap for itself)")
    return value


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

    from . import class_sharing

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    confs = sized_confs(input_bytes, _cores(master), remote=is_remote_url(master))
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
    _quiet_java_logs()
    pending = final = None
    if SparkContext._gateway is None:  # (a JVM already running keeps the options it started with)
        cds, pending, final = class_sharing.java_options(SPARK_CONF, SPARK_CONF / "log4j2.properties")
        if cds:
            key = "spark.driver.extraJavaOptions"
            settings[key] = f"{settings.get(key, '')} {cds}".strip()
    on_sigint = signal.getsignal(signal.SIGINT)
    _launch_gateway(settings)
    builder = SparkSession.builder.config(map=settings)
    spark = builder.getOrCreate()
    if pending is not None:
        class_sharing.finish_at_exit(pending, final)
    if callable(on_sigint) and on_sigint is not signal.default_int_handler and signal.getsignal(signal.SIGINT) is not on_sigint:
        # a caller's own Ctrl-C handling (``interruptible``) stays: pyspark's handler cancels the
        # jobs through a py4j call made inside the interrupted one, which logs two tracebacks
        signal.signal(signal.SIGINT, on_sigint)
    spark.sparkContext.setLogLevel(os.environ.get(LOG_LEVEL_ENV, "ERROR"))
    if catalog_dir is not None:
        # in case the JVM was already running, Derby still reads these at first use
        system = spark.sparkContext._jvm.java.lang.System
        system.setProperty("derby.system.home", str(catalog_dir))
        system.setProperty("derby.stream.error.file", str(catalog_dir / "derby.log"))
    return spark


SPARK_CONF = Path(__file__).with_name("spark_conf")  # our log4j2.properties: Spark's errors only
REMOTE_SCHEME = "sc://"
CONNECT_PORT = 15002  # Spark Connect's default port (SparkConnectClient's DEFAULT_PORT)


class RemoteUnreachable(InputError, ValueError):
    """No Spark Connect server answers at the ``--remote`` URL: the CLI says so in one line, exit 2."""


def is_remote_url(master: str) -> bool:
    """Whether ``master`` names a Spark Connect server (``--remote sc://HOST:PORT``) rather than a master."""
    return master.startswith(REMOTE_SCHEME)


def is_remote(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session: no SparkContext, no py4j JVM in this process,
    so no RDDs, accumulators or ``_jdf``; jobs ask this before using any of them."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


@contextlib.contextmanager
def job_group(spark: SparkSession, group: str, description: str) -> Iterator[None]:
    """The jobs started in this block belong to ``group`` (``executors_of`` reads them back);
    the thread's job group is cleared after. Nothing over Spark Connect (no SparkContext)."""
    if is_remote(spark):
        yield
        return
    sc = spark.sparkContext
    sc.setJobGroup(group, description, False)
    try:
        yield
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            sc.setLocalProperty(key, None)


def executors_of(spark: SparkSession, group: str, timeout_ms: int = 10_000) -> list[dict] | None:
    """Which executors ran the tasks of ``group``'s jobs: ``{"executor", "host", "tasks"}`` each,
    from Spark's status store (kept with the UI off; ``spark.ui.retainedTasks`` tasks a stage).
    Why: run.json says where the parsing ran, and that a cluster's workers all took part. The
    store is Spark's internal API, read through py4j: None over Spark Connect or should it move."""
    if is_remote(spark):
        return None
    try:
        sc = spark.sparkContext
        jsc = sc._jsc.sc()
        jsc.listenerBus().waitUntilEmpty(timeout_ms)  # (the store is fed by the listener bus, after the job)
        tracker, store = sc.statusTracker(), jsc.statusStore()
        counts: dict[tuple[str, str], int] = {}
        for job in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info is not None else ():
                attempt = tracker.getStageInfo(stage)
                tasks = store.taskList(stage, attempt.currentAttemptId if attempt is not None else 0, 1 << 20).iterator()
                while tasks.hasNext():
                    task = tasks.next()
                    if task.status() == "SUCCESS":
                        key = (task.executorId(), task.host())
                        counts[key] = counts.get(key, 0) + 1
    except Exception:  # an internal API: a run.json without it, never a failed run
        return None
    return [{"executor": e, "host": h, "tasks": n} for (e, h), n in sorted(counts.items())]


def remote_endpoint(url: str) -> tuple[str, int]:
    """(host, port) of ``sc://HOST[:PORT][/;params]``, as pyspark's ChannelBuilder reads it."""
    netloc = url[len(REMOTE_SCHEME):].split("/", 1)[0].split(";", 1)[0]
    host, _, port = netloc.rpartition(":") if netloc.rsplit(":", 1)[-1].isdigit() else (netloc, "", "")
    return host.strip("[]") or "localhost", int(port) if port else CONNECT_PORT


def remote_session(url: str, settings: dict[str, str], timeout: float = 10) -> SparkSession:
    """A Spark Connect session on ``url`` with those of ``settings`` a client may set.

    Why only some: over Connect the server owns the JVM, so its master, memory, JVM options, UI,
    scratch, Python workers and catalog were fixed by its own ``--conf``s when it started (setting
    such a static conf is an error); what a session may change (``RuntimeConfig.isModifiable``: the
    time zone, shuffle partitions, Arrow batch size, codegen, Parquet codec...) is set as locally.
    The port is tried first: pyspark's client retries an unreachable server for minutes."""
    import socket

    from pyspark.sql import SparkSession

    host, port = remote_endpoint(url)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise RemoteUnreachable(f"{url}: no Spark Connect server answers at {host}:{port} ({exc.strerror or exc})") from None
    spark = SparkSession.builder.remote(url).getOrCreate()
    for key, value in settings.items():
        if (key.startswith("spark.sql.") or key == DEBUGGING) and spark.conf.isModifiable(key):
            spark.conf.set(key, value)
    return spark


def parallelism(spark: SparkSession) -> int:
    """Spark's default parallelism: SparkContext's locally; over Connect (no SparkContext) the
    server's master says it for ``local[N]``, and a cluster's is guessed as ``_cores`` does."""
    if is_remote(spark):
        return _cores(spark.conf.get("spark.master", "local[*]") or "local[*]")
    return spark.sparkContext.defaultParallelism


def input_bytes(inputs: list[Path]) -> int:
    """Bytes of every regular file under ``inputs`` (archives as stored), before anything is read:
    what ``sized_confs`` sizes Spark by. Links are not followed, as discovery does not. An input
    on an object store (a URL) counts nothing here: its listing is discovery's."""
    total = 0
    for top in inputs:
        if isinstance(top, str) and STORE_URL.match(top):  # (``jobs.ingest.stores.is_url``: the store below ingest)
            continue
        for root, _dirs, names in os.walk(top):
            for name in names:
                try:
                    st = os.lstat(os.path.join(root, name))
                except OSError:
                    continue
                total += st.st_size if st.st_mode & 0o170000 == 0o100000 else 0
        if os.path.isfile(top):
            total += os.path.getsize(top)
    return total


def _cores(master: str) -> int:
    """The cores a ``local[N]``/``local[*]`` master uses (a cluster's: this machine's, a guess)."""
    if master.startswith("local[") and master[6:-1].isdigit():
        return int(master[6:-1])
    return os.cpu_count() or 1


class OutOfMemory(InputError, ValueError):
    """Spark ran out of heap: one line naming the heap and how to give it more (the CLI exits 2:
    what the run needed was not there, as for a full disk), never a JVM stack trace."""


# what the JVM says, through py4j, when the heap is too small for a job. TaskResultLost: a task's
# result too big to return directly goes through the block manager's memory store, which drops it
# when the heap is short (seen at 512 MiB, in place of the OutOfMemoryError of another run)
_OUT_OF_MEMORY = ("java.lang.OutOfMemoryError", "Not enough memory to build and broadcast", "TaskResultLost")


def out_of_memory(exc: BaseException, local: bool = True) -> bool:
    """Whether ``exc`` (a py4j error carrying the JVM's text) says the heap ran out. TaskResultLost
    counts only on a ``local`` master: on a cluster a result is also lost when an executor dies,
    and the driver's heap is not to blame."""
    from .outdir import error_text

    said = error_text(exc)
    return said is not None and any(s in said for s in _OUT_OF_MEMORY if local or s != "TaskResultLost")


def gc_frozen(fn):
    """``fn`` (a Spark task's Python function of one argument: a ``mapInArrow`` function, or an
    ``applyInPandas`` one of a group alone, not ``(key, group)``) with what its worker holds frozen
    out of garbage collection when the task starts (``gc.freeze``).

    Why: a reused Python worker runs a full ``gc.collect()`` after every task (``pyspark.daemon``)
    over every object it holds, numba's, pyarrow's and pandas' included (a third of the task that
    parses a 64 MiB segment: docs/design.md). What lives when a task starts
    was there before it (that collect has just run), so it is frozen; the collect then only looks
    at what the task made. Once a task: pyspark calls a grouped function once per group, and a
    freeze between groups would make the last group's reference cycles immortal (~10 KB a topic
    of the metadata replay). The wrapper is unpickled afresh for every task, so its flag is the
    task's. (A frozen object that later ends in a cycle is not freed: pyspark's own objects of the
    task, a few hundred bytes.)"""
    import functools

    frozen: list[bool] = []

    @functools.wraps(fn)
    def run(data):  # (one named argument, as pyspark checks: the batches, or the group)
        if not frozen:
            import gc

            gc.freeze()
            frozen.append(True)
        return fn(data)

    return run


@contextlib.contextmanager
def side_by_side(threads: int, name: str) -> Iterator[ThreadPoolExecutor]:
    """A pool of ``threads`` threads for Spark queries that do not need each other's results: on a
    small collection a query is mostly Spark planning it on one JVM thread, and a second query
    uses the other core. Leaving the block waits for what runs there, except on Ctrl-C
    (``Interrupted``, ``KeyboardInterrupt``): the caller then stops the session (the JVM, or the
    Spark Connect session), which ends those queries, instead of waiting for each to finish."""
    pool = ThreadPoolExecutor(threads, thread_name_prefix=name)
    try:
        yield pool
    except BaseException as exc:
        pool.shutdown(wait=isinstance(exc, Exception), cancel_futures=True)
        raise
    pool.shutdown(wait=True)


class Interrupted(BaseException):
    """Ctrl-C, or another stop signal, during a command that runs Spark. A BaseException like
    KeyboardInterrupt, so no ``except Exception`` swallows it, but not one: py4j logs every
    KeyboardInterrupt it sees inside a call with a traceback. ``signum``: the signal (a command
    exits 128 + it, as a shell reports a process that signal ended)."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signum)
        self.signum = signum


# Ctrl-C, then what ``timeout``, systemd, Kubernetes and batch schedulers send (SIGTERM), and a
# closed terminal (SIGHUP): each gets what Ctrl-C gets
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _descendants() -> list[int]:
    """Every process below this one: the JVM (or spark-submit still starting one) and, below the
    JVM, pyspark's daemon and its Python workers, which since ingest writes from the tasks hold
    open Parquet files in the staging dir."""
    parent: dict[int, int] = {}
    for d in Path("/proc").glob("[0-9]*"):
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        parent[int(d.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
    found, frontier = [], [os.getpid()]
    while frontier:
        kids = [pid for pid, ppid in parent.items() if ppid in frontier]
        found += kids
        frontier = kids
    return found


def stop_jvm(timeout: float = 30) -> None:
    """Kill the JVM this process started and every process under it, and wait until they are
    gone, so nothing writes another byte (a cancelled task still finishing its Parquet file into
    the staging dir) once this returns; then remove its scratch. SIGKILL: the JVM says nothing
    while dying, and its shutdown hooks have nothing left to save. pyspark's Python workers are
    killed too rather than left to notice their JVM is gone: they write table files themselves."""
    import time

    context = getattr(sys.modules.get("pyspark"), "SparkContext", None)
    proc = getattr(getattr(context, "_gateway", None), "proc", None)
    server = getattr(getattr(context, "_active_spark_context", None), "_accumulatorServer", None)
    if server is not None:  # its connection from the JVM ends with an EOFError that socketserver prints
        server.handle_error = lambda request, client_address: None
    pids = set(_descendants()) | ({proc.pid} if proc is not None and proc.poll() is None else set())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if proc is not None and proc.pid in pids:
        proc.wait(timeout)
    for pid in pids:  # our children are reaped here; the JVM's are reaped by init once it is gone
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_alive(pid) for pid in pids):
        time.sleep(0.02)
    shutil.rmtree(_scratch_path(), ignore_errors=True)


@contextlib.contextmanager
def interruptible(signals: tuple[int, ...] = (signal.SIGINT,)) -> Iterator[None]:
    """Inside the block, Ctrl-C (each of ``signals``) stops the JVM first and then raises
    ``Interrupted``, so the staging dir is removed after the last write into it, and the command
    can say one line instead of py4j's tracebacks. (The JVM ignores SIGINT itself: pyspark starts
    it that way; a SIGTERM sent to the whole process group, as ``timeout`` sends it, starts its
    shutdown, which the SIGKILL cuts short.)

    Only Python-level handlers, in this process: the JVM and, below it, pyspark's daemon and its
    workers are started by exec, which resets a caught signal to its default, so they keep their
    own handling. A signal ignored when the block starts (``nohup``'s SIGHUP, a background job's
    SIGINT) stays ignored. Handlers are set from the main thread only (Python's rule)."""

    caught: list[int] = []
    handled = [s for s in signals if signal.getsignal(s) != signal.SIG_IGN]

    def handler(signum, frame):
        caught.append(signum)
        for s in handled:  # a second signal must not cut the cleanup short
            signal.signal(s, signal.SIG_IGN)
        logging.disable(logging.CRITICAL)  # py4j logs each call the dead JVM breaks, with a traceback
        stop_jvm()
        raise Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in handled}
    try:
        yield
    except Exception:
        # unwinding from the handler, pyspark's own context managers call the dead JVM once more
        # (``SCCallSiteSync.__exit__`` around a collect): their ConnectionRefusedError replaces
        # ``Interrupted``, but it is the same signal
        if caught:
            raise Interrupted(caught[0]) from None
        raise
    finally:
        for s, before in previous.items():
            signal.signal(s, signal.SIG_DFL if before is None else before)  # (None: set outside Python)


SCRATCH_PREFIX = "kf-spark-"


def scratch_dir() -> Path:
    """This process's Spark scratch (``spark.local.dir``: block manager files, pyspark's temp dir,
    added files), ``$TMPDIR/kf-spark-<pid>``. Spark deletes its scratch in a JVM shutdown hook, which
    a SIGKILLed run never reaches (an unattended kill left ``/tmp/spark-*`` and ``blockmgr-*`` behind,
    shuffle files and all); with one named folder per process, each start removes those of dead
    processes, as ``jobs.store.outdir.recover`` does for staging dirs. (``SPARK_LOCAL_DIRS`` still wins.)"""
    base = _scratch_path().parent
    for old in base.glob(f"{SCRATCH_PREFIX}*"):
        try:
            pid = int(old.name[len(SCRATCH_PREFIX):])
        except ValueError:
            continue
        if pid != os.getpid() and not pid_alive(pid):
            shutil.rmtree(old, ignore_errors=True)
    mine = _scratch_path()
    mine.mkdir(parents=True, exist_ok=True)
    return mine


def _scratch_path() -> Path:
    return Path(os.environ.get("TMPDIR", "/tmp")) / f"{SCRATCH_PREFIX}{os.getpid()}"


LOG_LEVEL_ENV = "KF_SPARK_LOG_LEVEL"  # set (``--verbose`` sets WARN): Spark logs as Spark itself would

# What the JVM and Spark print on stderr while starting, before any log4j config or setLogLevel
# can act (the JVM's own warning about the vector module Spark loads, the shell's log-level hint):
# noise to a user of the CLI, who gets it back with ``--verbose``.
STARTUP_NOISE = (
    "WARNING: Using incubator modules",
    "Setting default log level to",
    "To adjust logging level use sc.setLogLevel",
    "NativeCodeLoader",
    "Using Spark's default log4j profile",
    "Your hostname, ",
    "Set SPARK_LOCAL_IP if you need to bind",
)


def verbose() -> bool:
    """Whether Spark's own logs were asked for (``--verbose``, or KF_SPARK_LOG_LEVEL by hand)."""
    return LOG_LEVEL_ENV in os.environ


def startup_noise(line: str) -> bool:
    return any(marker in line for marker in STARTUP_NOISE)


def _forward_stderr(pipe) -> None:
    """Copy the JVM's stderr (and its Python workers') to ours line by line, without the start-up
    noise; errors and worker tracebacks still come through. Written to fd 2, as the JVM did, with
    control characters escaped: an error may quote a path or name from the evidence.
    (``jobs.terminal`` is a standard-library leaf beside ``jobs.errors``: the CLI and the report use it too.)"""
    from jobs.terminal import escape

    for raw in iter(pipe.readline, b""):
        line = raw.decode("utf-8", "replace")
        if not startup_noise(line):
            with contextlib.suppress(OSError):
                os.write(2, escape(line, keep="\n\t").encode("utf-8"))  # (Java's stack frames start with a tab)


def _launch_gateway(options: dict[str, str]) -> None:
    """Start the JVM as pyspark would (same spark-submit, same confs), but with its stderr piped
    through ``_forward_stderr``: the lines it prints before log4j is configured cannot be
    silenced any other way. A JVM already running, or ``verbose()``, is left as pyspark does it."""
    import subprocess
    import threading

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or verbose():
        return
    conf = SparkConf(loadDefaults=False).setAll(list(options.items()))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=_forward_stderr, args=(gateway.proc.stderr,), name="kf-jvm-stderr", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


def _quiet_java_logs() -> None:
    """Spark prints a few WARN lines while starting (native hadoop, hostname loopback...) before
    setLogLevel can act; point log4j2 at a config that only lets errors through."""
    if "SPARK_CONF_DIR" in os.environ or verbose():
        return
    if (SPARK_CONF / "log4j2.properties").is_file():
        os.environ["SPARK_CONF_DIR"] = str(SPARK_CONF)
