"""How a run's work spreads: Spark's parallelism, queries side by side on the driver, and which
executors ran a group of jobs (for run.json).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from .conf import cores
from .connect import is_remote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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


def parallelism(spark: SparkSession) -> int:
    """Spark's default parallelism: SparkContext's locally; over Connect (no SparkContext) the
    server's master says it for ``local[N]``, and a cluster's is guessed as ``conf.cores`` does."""
    if is_remote(spark):
        return cores(spark.conf.get("spark.master", "local[*]") or "local[*]")
    return spark.sparkContext.defaultParallelism


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
