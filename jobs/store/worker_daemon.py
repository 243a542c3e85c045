"""The Python daemon of our Spark executors: pyspark's own (``pyspark.daemon``), started with the
parsers, pyarrow, numba and the compiled kernels already loaded, so every worker it forks has them.

Why: Spark starts one daemon per executor and forks a worker per task slot from it. With
pyspark's daemon each worker imported pyspark's worker, pyarrow, numba and our parse task after
the fork and loaded the numba kernels from their disk cache on its first batch: ~1 s of CPU a
worker, paid again by every worker (two at once on two cores, competing with the JVM), and each
kept its own copy of the same pages (~200 MiB PSS a parse worker). Loaded once here, the forks
start warm and share those pages copy-on-write.

Why it is safe to fork after these imports: pyspark imports the worker module only after the fork
because a thread running at ``fork()`` does not exist in the child while its locks may be held.
Two of the imports start a thread: numpy's OpenBLAS pool (we use no BLAS: one thread) and pyarrow's
jemalloc purging thread (``background_thread:false``); both are set off below before anything is
imported, and ``preload`` checks that the daemon is still single-threaded. Anything unexpected
(a thread appeared, an import failed) is said on stderr and the daemon goes on as pyspark's would.

Used for sessions this process starts (``spark.python.daemon.module``, local or ``spark://``; the
module must be importable by the executors' Python, as our task functions already must be); a
Spark Connect server keeps its own daemon. Nothing may be written to stdout here: the daemon
tells the JVM its port on stdout.
"""

from __future__ import annotations

import os
import sys

# One v2 record batch (offset 0, key b"k", value b"v", timestamp 0), as sample_data's writer
# encodes it: parsed once so numba loads the scan, CRC, decode and hash kernels a parse runs.
WARM_BATCH = bytes.fromhex(
    "00000000000000000000003a0000000002fe917cab00000000000000000000000000000000000000000000"
    "ffffffffffffffffffffffffffff0000000110000000026b027600"
)


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # no /proc: nothing to check
        return 1


def preload() -> None:
    """Import and warm what parse tasks and pandas UDFs use; never raises."""
    if "background_thread" not in os.environ.get("JE_ARROW_MALLOC_CONF", ""):
        conf = os.environ.get("JE_ARROW_MALLOC_CONF", "")
        os.environ["JE_ARROW_MALLOC_CONF"] = f"{conf},background_thread:false" if conf else "background_thread:false"
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        import numpy as np
        import pyspark.worker  # noqa: F401  (what each worker imports first after the fork)

        import jobs.ingest.pipeline  # noqa: F401  (the parse task's closure is pickled by reference to it)
        import jobs.ingest.task_writer  # noqa: F401
        import jobs.ingest.tasks  # noqa: F401
        from parsers import segment

        for _ in segment.iter_parse(np.frombuffer(WARM_BATCH, np.uint8), "warm.log", records=True):
            pass
    except Exception as exc:  # a worker imports what it needs itself: only slower
        print(f"kafka-forensics worker daemon: preload failed ({type(exc).__name__}: {exc})", file=sys.stderr)
    if (n := _threads()) > 1:
        print(f"kafka-forensics worker daemon: {n} threads before forking workers", file=sys.stderr)


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
