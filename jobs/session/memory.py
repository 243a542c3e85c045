"""Memory: the driver's heap running out (one line, never a JVM stack trace) and the Python
workers' garbage collector kept off what a task did not make.
"""

from __future__ import annotations

from jobs.errors import InputError, error_text


class OutOfMemory(InputError, ValueError):
    """Spark ran out of heap: one line naming the heap and how to give it more (the CLI exits 2:
    what the run needed was not there, as for a full disk), never a JVM stack trace."""


# what the JVM says, through py4j, when the heap is too small for a job. TaskResultLost: a task's
# result too big to return directly goes through the block manager's memory store, which drops it
# when the heap is short (seen at 512 MiB, in place of the OutOfMemoryError of another run)
OUT_OF_HEAP = "java.lang.OutOfMemoryError"
_OUT_OF_MEMORY = (OUT_OF_HEAP, "Not enough memory to build and broadcast", "TaskResultLost")


# Spark's exit code for a JVM that ended on an OutOfMemoryError (``SparkExitCode.OOM``): its
# uncaught-exception handler exits with it when the error reached no caller (a broadcast or a
# query stage's thread), so py4j can no longer ask the JVM what happened
SPARK_EXIT_OOM = 52
JVM_EXIT_WAIT = 10.0  # seconds a JVM that stopped answering is given to end, to read its exit code
JVM_ENDING_WAIT = 3.0  # and one that still answered (its text not saying why): a JVM alive then is not ending


def out_of_memory(exc: BaseException, local: bool = True) -> bool:
    """Whether ``exc`` (a py4j error carrying the JVM's text) says the heap ran out, or, when the
    JVM no longer answers, whether it ended with Spark's out-of-memory exit code. TaskResultLost
    counts only on a ``local`` master: on a cluster a result is also lost when an executor dies,
    and the driver's heap is not to blame."""
    said = error_text(exc)
    if said is None:
        return isinstance(exc, Exception) and jvm_exit_code() == SPARK_EXIT_OOM
    if any(s in said for s in _OUT_OF_MEMORY if local or s != "TaskResultLost"):
        return True
    # a task's OutOfMemoryError also ends the JVM (Spark's handler exits it with 52) while the job
    # it aborted still answers the caller, with a text that may not name the error yet: a JVM error
    # (or a call that met the JVM gone) whose JVM ends at once on Spark's out-of-memory code is one
    from_jvm = type(exc).__module__.startswith(("py4j", "pyspark")) or isinstance(exc, ConnectionError)
    return local and from_jvm and jvm_exit_code(JVM_ENDING_WAIT) == SPARK_EXIT_OOM


def jvm_exit_code(wait: float = JVM_EXIT_WAIT) -> int | None:
    """The exit code of this process's own Spark JVM (the py4j gateway it started), once it has
    ended; None while it runs, or when there is none of ours (Spark Connect, a JVM not started here)."""
    import subprocess

    from .signals import jvm_process

    proc = jvm_process()
    if proc is None:
        return None
    try:
        return proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        return None


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
