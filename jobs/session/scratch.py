"""The Spark scratch of this process, and the scratch of dead runs removed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from jobs.processes import pid_alive

SCRATCH_PREFIX = "kf-spark-"


def scratch_dir() -> Path:
    """This process's Spark scratch (``spark.local.dir``: block manager files, pyspark's temp dir,
    added files), ``$TMPDIR/kf-spark-<pid>``. Spark deletes its scratch in a JVM shutdown hook, which
    a SIGKILLed run never reaches (an unattended kill left ``/tmp/spark-*`` and ``blockmgr-*`` behind,
    shuffle files and all); with one named folder per process, each start removes those of dead
    processes, as ``jobs.store.outdir.recover`` does for staging dirs. (``SPARK_LOCAL_DIRS`` still wins.)"""
    base = scratch_path().parent
    for old in base.glob(f"{SCRATCH_PREFIX}*"):
        try:
            pid = int(old.name[len(SCRATCH_PREFIX):])
        except ValueError:
            continue
        if pid != os.getpid() and not pid_alive(pid):
            shutil.rmtree(old, ignore_errors=True)
    mine = scratch_path()
    mine.mkdir(parents=True, exist_ok=True)
    return mine


def scratch_path() -> Path:
    return Path(os.environ.get("TMPDIR", "/tmp")) / f"{SCRATCH_PREFIX}{os.getpid()}"
