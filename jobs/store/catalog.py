"""The persistent Spark SQL catalog of an output DIR: a Derby-backed Hive metastore in
``DIR/catalog/`` that names every table of ``DIR/tables/``, so ``kafka-forensics sql``, ``spark-sql``
and pyspark all query them by name.

Why it is a separate step, after the swap: the metastore stores ABSOLUTE table locations, and a
JVM pins its Derby database at the first catalog use. So ingest/analyze never touch the catalog
(they build in ``DIR.tmp-<pid>``); once DIR is in place, ``register`` creates a fresh metastore
pointing at ``DIR/tables/*``. ``registered.json`` records which DIR and tables it was built for;
``open_catalog`` rebuilds the metastore when that no longer matches (DIR moved or copied, a run
killed before registering, tables added by a later job). ``spark-sql.conf`` holds the confs for
``spark-sql --properties-file``.

Derby lets one JVM boot a database at a time, so two ``sql`` runs on one DIR would fail on its lock
(a Java stack trace, exit 2). The process that opens DIR's catalog first claims it (an flock on
``DIR/.catalog.lock``, held until it exits; taken before its JVM even starts, so two runs started
together cannot both win); any other process, or one finding Derby's own lock held (``spark-sql``
run by hand), registers DIR's tables in a private catalog in its Spark scratch dir instead.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
from pathlib import Path

from pyspark.sql import SparkSession

from jobs.store.outdir import pause_point
from jobs.store.spark import catalog_confs, get_session, scratch_dir

log = logging.getLogger(__name__)

MARKER = "registered.json"
CONF_FILE = "spark-sql.conf"
LOCK_FILE = ".catalog.lock"
_claimed: dict[str, int] = {}  # DIR -> fd of the lock this process holds until it exits


def catalog_dir(out: Path) -> Path:
    return Path(out).absolute() / "catalog"


def table_names(out: Path) -> list[str]:
    tables = Path(out) / "tables"
    return sorted(p.name for p in tables.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))) if tables.is_dir() else []


def needs_registration(out: Path) -> bool:
    """True when the catalog is missing or was built for another place or another set of tables."""
    marker = catalog_dir(out) / MARKER
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError):
        return True
    return info.get("out") != str(Path(out).resolve()) or info.get("tables") != table_names(out)


def _partition_columns(path: Path) -> list[str]:
    """Hive-style partition columns of a table folder (``topic=…/``), outermost first."""
    cols: list[str] = []
    while True:
        sub = next((p for p in sorted(path.iterdir()) if p.is_dir() and "=" in p.name), None) if path.is_dir() else None
        if sub is None:
            return cols
        cols.append(sub.name.split("=", 1)[0])
        path = sub


def in_use(out: Path) -> bool:
    """Whether another process has DIR's Derby metastore booted: Derby holds an OS lock (fcntl, via
    Java's FileChannel.tryLock) on ``metastore_db/dbex.lck`` while a JVM has the database open."""
    try:
        fd = os.open(catalog_dir(out) / "metastore_db" / "dbex.lck", os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def claim(out: Path) -> bool:
    """Take DIR's catalog for this process (flock on ``DIR/.catalog.lock``, released when the process
    ends, however it ends); False when another live process holds it."""
    key = str(Path(out).resolve())
    if key in _claimed:
        return True
    try:
        fd = os.open(Path(key) / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return True  # a read-only DIR: no lock to take; Derby's own lock (in_use) still tells
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _claimed[key] = fd
    return True


def register_tables(spark: SparkSession, out: Path, cdir: Path | None = None) -> list[str]:
    """(Re)create one external Parquet table per ``DIR/tables/<name>`` in ``spark``'s catalog, which
    must be the one in ``cdir`` (default DIR's: ``get_session(catalog_dir=catalog_dir(out))``)."""
    out = Path(out).resolve()
    names = table_names(out)
    for name in names:
        location = out / "tables" / name
        spark.sql(f"DROP TABLE IF EXISTS `{name}`")
        spark.sql(f"CREATE TABLE `{name}` USING parquet LOCATION '{_quote(location)}'")
        if _partition_columns(location):
            spark.sql(f"MSCK REPAIR TABLE `{name}`")
        pause_point("catalog-registering")  # test-only hook: a metastore with some tables
    cdir = Path(cdir) if cdir is not None else catalog_dir(out)
    confs = catalog_confs(cdir)
    (cdir / CONF_FILE).write_text("".join(f"{k} {v}\n" for k, v in confs.items()))
    (cdir / MARKER).write_text(json.dumps({"out": str(out), "tables": names}, indent=1))
    return names


def _quote(path: Path) -> str:
    return str(path).replace("\\", "\\\\").replace("'", "\\'")


def open_catalog(out: Path, master: str = "local[*]") -> SparkSession:
    """A session whose catalog names DIR's tables, rebuilding the metastore first if it is stale.
    Must be the first catalog use of this process's JVM (see the module doc)."""
    from jobs.store.outdir import recover

    out = Path(out).absolute()
    recover(out)
    if not (out / "tables").is_dir():
        raise FileNotFoundError(f"{out}: no tables/ folder (not an ingest output)")
    if not claim(out) or in_use(out):
        private = scratch_dir() / "catalog"
        log.info("%s: its catalog is open in another process; using a private copy", out)
        shutil.rmtree(private, ignore_errors=True)
        spark = get_session(master, catalog_dir=private)
        register_tables(spark, out, private)
        return spark
    stale = needs_registration(out)
    if stale:
        shutil.rmtree(catalog_dir(out), ignore_errors=True)
    spark = get_session(master, catalog_dir=catalog_dir(out))
    if stale:
        register_tables(spark, out)
    return spark


def register(out: Path, spark: SparkSession | None = None) -> None:
    """Build DIR's catalog after the swap. A running session without the catalog (the one that
    ingested) is stopped first: the next one in this JVM starts with Hive support on DIR."""
    if spark is not None:
        spark.stop()
    if not claim(out) or in_use(out):
        log.warning("%s: its catalog is open in another process; the next sql rebuilds it", out)
        return
    shutil.rmtree(catalog_dir(out), ignore_errors=True)
    session = open_catalog(out, "local[1]")
    session.stop()


if __name__ == "__main__":  # python -m jobs.store.catalog DIR: (re)build DIR's catalog in a fresh JVM
    import sys

    register(Path(sys.argv[1]))
