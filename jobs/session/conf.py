"""The Spark confs a run starts with: sized to its input, the persistent catalog's, the driver's heap.

Why here and not in ``start``: the confs are plain values (docs/scale.md and its test read them,
``serve`` starts the Thrift server with the catalog's), computed without pyspark.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from jobs.errors import InputError


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


def cores(master: str) -> int:
    """The cores a ``local[N]``/``local[*]`` master uses (a cluster's: this machine's, a guess)."""
    if master.startswith("local[") and master[6:-1].isdigit():
        return int(master[6:-1])
    return os.cpu_count() or 1
