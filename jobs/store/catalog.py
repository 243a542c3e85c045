"""The persistent Spark SQL catalog of an output DIR: a Derby-backed Hive metastore in
``DIR/catalog/`` that names every table of ``DIR/tables/``, so ``kafka-forensics sql``, ``spark-sql``
and pyspark all query them by name.

Why it is built while DIR is staged, from a background thread: booting a fresh metastore (Derby
plus DataNucleus creating its schema) and creating thirty tables takes a Spark start's worth of
seconds, which would otherwise follow the jobs. ``ingest``/``analyze`` open their one session with
the catalog in the staging dir (``DIR.tmp-<pid>/catalog``) and a ``Registrar`` thread boots it while
the inputs are parsed, registers the ingested tables while the jobs run and the job tables last,
each at the location it will have once DIR is swapped in (the metastore stores ABSOLUTE locations;
Derby itself stores no path, so its folder moves with the swap). Each table is declared with its
schema, and partitioned tables are read with ``manageFilesourcePartitions`` off (partitions are
the folders, listed at query time), so nothing needs the files at their final place.
``registered.json`` records which DIR and tables it was built for; ``open_catalog`` rebuilds the
metastore when that no longer matches (DIR moved or copied, tables added by a later job), as it
does for DIRs whose runs shared a session (tests, the demo). ``spark-sql.conf`` holds the confs
for ``spark-sql --properties-file``.

Derby lets one JVM boot a database at a time, so two ``sql`` runs on one DIR would fail on its lock
(a Java stack trace, exit 2). The process that opens DIR's catalog first claims it (an flock on
``DIR/.catalog.lock``, held until it exits; taken before its JVM even starts, so two runs started
together cannot both win); any other process, or one finding Derby's own lock held (``spark-sql``
run by hand), registers DIR's tables in a private catalog in its Spark scratch dir instead.

Over Spark Connect (``--remote sc://…``) none of this runs: the session's catalog is the server's
and no JVM of ours could boot Derby, so ``ingest``/``analyze`` leave ``DIR/catalog/`` to the first
local ``sql DIR`` (no marker: it is built then) and ``sql --remote`` uses ``register_views``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import queue
import re
import shutil
import threading
from pathlib import Path

from pyspark.sql import SparkSession

from jobs.errors import InputError
from jobs.session.conf import catalog_confs
from jobs.session.connect import is_remote_url
from jobs.session.scratch import scratch_dir
from jobs.session.start import get_session
from jobs.store.io import read_parquet
from jobs.store.outdir import pause_point

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


def create_table(spark: SparkSession, name: str, files: Path, location: Path, fresh: bool = False) -> None:
    """(Re)create table ``name`` at ``location``, declared with the schema of the Parquet files under
    ``files`` (the same folder, or its staged copy: ``jobs.store.io.read_parquet``) and their Hive partitions.
    ``fresh``: the metastore is new and holds no such table (no DROP: a metastore round trip)."""
    ddl = read_parquet(spark, files, name)._jdf.schema().toDDL()
    parts = _partition_columns(files)
    partitioned = f" PARTITIONED BY ({', '.join(f'`{c}`' for c in parts)})" if parts else ""
    if not fresh:
        spark.sql(f"DROP TABLE IF EXISTS `{name}`")
    spark.sql(f"CREATE TABLE `{name}` ({ddl}) USING parquet{partitioned} LOCATION '{_quote(location)}'")


def write_marker(cdir: Path, out: Path, names: list[str], home: Path) -> None:
    """Into catalog folder ``cdir``: ``spark-sql.conf`` (the confs that open it where it will live,
    ``home``) and ``registered.json``, written last, so a catalog without them is known to be
    incomplete and is rebuilt."""
    (cdir / CONF_FILE).write_text("".join(f"{k} {v}\n" for k, v in catalog_confs(home).items()))
    (cdir / MARKER).write_text(json.dumps({"out": str(Path(out).resolve()), "tables": names}, indent=1))


def register_tables(spark: SparkSession, out: Path, cdir: Path | None = None) -> list[str]:
    """(Re)create one external Parquet table per ``DIR/tables/<name>`` in ``spark``'s catalog, which
    must be the one in ``cdir`` (default DIR's: ``get_session(catalog_dir=catalog_dir(out))``)."""
    out = Path(out).resolve()
    names = table_names(out)
    for name in names:
        create_table(spark, name, out / "tables" / name, out / "tables" / name)
    cdir = Path(cdir) if cdir is not None else catalog_dir(out)
    write_marker(cdir, out, names, home=cdir)
    return names


class Registrar:
    """Builds DIR's catalog in the staging dir ``tmp`` from a background thread (see the module
    doc): ``start`` boots the metastore, ``add`` queues tables as they are written, ``finish``
    registers the rest and waits. ``spark`` must have been started with
    ``get_session(catalog_dir=catalog_dir(tmp))``; the tables are declared at ``out``'s locations."""

    def __init__(self, spark: SparkSession, tmp: Path, out: Path) -> None:
        self.spark, self.tmp, self.out = spark, Path(tmp), Path(out).resolve()
        self.done: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="kf-catalog", daemon=True)

    def start(self) -> Registrar:
        self._thread.start()
        return self

    def add(self, names: list[str]) -> None:
        for name in names:
            if name not in self.done and (self.tmp / "tables" / name).is_dir():
                self.done.append(name)
                self._queue.put(name)

    def finish(self) -> list[str]:
        """Register every table of the staging dir not registered yet, wait, write the marker."""
        self.add(table_names(self.tmp))
        self._queue.put(None)
        while self._thread.is_alive():
            self._thread.join(0.2)  # (a short wait, so Ctrl-C reaches the main thread at once)
        if self._error is not None:
            raise self._error
        pause_point("catalog-registering")  # test-only hook: a metastore with every table, no marker
        names = sorted(self.done)
        write_marker(catalog_dir(self.tmp), self.out, names, home=catalog_dir(self.out))
        return names

    def _run(self) -> None:
        try:
            self.spark.sql("SHOW DATABASES").collect()  # boots Derby and creates the metastore's schema
            # (the staging metastore is new, so a DROP before each CREATE is a round trip for nothing;
            # one question makes sure, in case the session was not started on it)
            fresh = not self.spark.sql("SHOW TABLES").collect()
            while (name := self._queue.get()) is not None:
                create_table(self.spark, name, self.tmp / "tables" / name, self.out / "tables" / name, fresh=fresh)
        except BaseException as exc:  # handed to the main thread by ``finish``
            self._error = exc


def _quote(path: Path) -> str:
    return str(path).replace("\\", "\\\\").replace("'", "\\'")


class CatalogError(InputError, ValueError):
    """DIR's tables cannot be opened: no tables/ folder (not an ingest output), or a table Spark
    cannot read. One line, exit 2."""


def _ingested(out: Path) -> Path:
    """DIR, absolute, after ``recover`` (an interrupted swap finished or undone); it must hold tables/."""
    from jobs.store.outdir import recover

    out = Path(out).absolute()
    recover(out)
    if not (out / "tables").is_dir():
        raise CatalogError(f"{out}: no tables/ folder (not an ingest output)")
    return out


def open_catalog(out: Path, master: str = "local[*]") -> SparkSession:
    """A session whose catalog names DIR's tables, rebuilding the metastore first if it is stale.
    Must be the first catalog use of this process's JVM (see the module doc). On a Spark Connect
    server (``sc://`` master) the tables are the session's temporary views instead."""
    out = _ingested(out)
    if is_remote_url(master):
        spark = get_session(master)
        register_views(spark, out)
        return spark
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


_DATA_QUERY = re.compile(r"\s*\(*\s*(select|with|from|table|values)\b", re.I)
# strings and comments, scanned left to right so that a quote in a comment or "--" in a string
# is read as what it is
_LITERALS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|--[^\n]*|/\*.*?\*/", re.S)
_WRITES = re.compile(r"\b(insert|merge|update|delete|create|drop|alter|truncate|cache|uncache|refresh|load|msck)\b", re.I)
_NAME = r"`[^`]+`|[\w.]+"
_CLAUSE_END = (r"(?=\b(?:where|group|order|having|limit|offset|join|inner|left|right|full|cross|natural|anti|semi|union|"
               r"intersect|except|minus|window|lateral|on|using|sort|cluster|distribute|qualify|pivot|unpivot|tablesample)\b|[();]|$)")
_FROM_LIST = re.compile(r"\bfrom\b(.*?)" + _CLAUSE_END, re.I | re.S)
_JOINED = re.compile(r"\b(?:join|table)\s*\(?\s*(" + _NAME + ")", re.I)
_CTE = re.compile(r"(?:\bwith(?:\s+recursive)?|,)\s*(" + _NAME + r")\s*(?:\([^)]*\))?\s+as\s*\(", re.I)
_SUBQUERY_WORDS = {"select", "with", "values", "from", "table", "lateral"}


def tables_of_query(query: str, names: list[str]) -> list[str] | None:
    """The DIR tables to name as views for a one-shot query, when its text says for certain
    that it only reads DIR's tables: a data query (SELECT, WITH, FROM, TABLE, VALUES), no write
    or DDL keyword, and every relation it reads (each item of a FROM list, each JOIN or TABLE
    operand) is one of ``names`` or a CTE of the query. Then every name of ``names`` that stands
    as a word anywhere in it is returned (a superset: a CTE may read the table it shadows, and a
    spare view costs nothing). ``None`` otherwise (SHOW, DESCRIBE, DDL, another catalog's table,
    a relation in a form this does not read): the query needs DIR's catalog."""
    if not _DATA_QUERY.match(query):
        return None
    text = _LITERALS.sub(" '' ", query)
    if _WRITES.search(text):
        return None
    known = {n.lower() for n in names}
    ctes = {m.strip("`").lower() for m in _CTE.findall(text)}
    relations = _JOINED.findall(text)
    for listed in _FROM_LIST.findall(text):
        for item in listed.split(","):
            first = re.match(r"\s*(" + _NAME + ")", item)
            if first:
                relations.append(first.group(1))
    for ref in relations:
        ref = ref.strip("`").lower()  # (``default.records`` is not a temporary view's name: catalog)
        if ref in _SUBQUERY_WORDS or ref in ctes:
            continue
        if ref not in known:
            return None
    words = {w.lower() for w in re.findall(r"[A-Za-z_][\w]*", text)} | {w.strip("`").lower() for w in re.findall(r"`[^`]+`", text)}
    return sorted(n for n in known if n in words)


def open_views(out: Path, tables: list[str], master: str = "local[*]") -> SparkSession:
    """A session without a metastore whose temporary views name ``tables`` of DIR.

    Why, for a one-shot query: booting Derby and Hive's client takes seconds for a query that
    only reads a few Parquet tables. Views of just the tables the query names leave DIR's catalog
    alone (no lock, no rebuild), so one-shot queries can also run side by side."""
    out = _ingested(out)
    spark = get_session(master)
    for name in tables:
        try:
            read_parquet(spark, out.resolve() / "tables" / name, name).createOrReplaceTempView(name)
        except Exception as exc:  # (AnalysisException: a table folder without Parquet files, unreadable...)
            raise CatalogError(f"{out}: table {name} cannot be read: {str(exc).strip().splitlines()[0]}") from None
    return spark


def register_views(spark: SparkSession, out: Path) -> list[str]:
    """Name DIR's tables as temporary views of ``spark``, read from their Parquet folders.

    For a Spark Connect session: its catalog is the server's, not DIR's Derby metastore (which a
    JVM of this process would have to boot), and views of one session leave nothing behind on a
    server that others share. DIR must be a path the server and its executors see."""
    from jobs.store.io import read_table

    names = table_names(out)
    for name in names:
        read_table(spark, Path(out).resolve(), name).createOrReplaceTempView(name)
    return names


def register(out: Path) -> None:
    """Build DIR's catalog in this process (a fresh JVM): for a DIR whose run shared a session
    that had no catalog of its own (tests, the demo)."""
    if not claim(out) or in_use(out):
        log.warning("%s: its catalog is open in another process; the next sql rebuilds it", out)
        return
    shutil.rmtree(catalog_dir(out), ignore_errors=True)
    session = open_catalog(out, "local[1]")
    session.stop()


if __name__ == "__main__":  # python -m jobs.store.catalog DIR: (re)build DIR's catalog in a fresh JVM
    import sys

    register(Path(sys.argv[1]))
