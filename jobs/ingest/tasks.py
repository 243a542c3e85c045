"""What one Spark task does on an executor: open its files, hash and parse them, and hand back
Arrow tables. No Spark import here: it runs inside ``mapInArrow`` workers and in plain tests.

Why one pass over the files for all tables: a segment yields batches, records and problems in the
same pass, an index yields entries and an ``index_files`` row. Running one job per output table
would parse every segment twice (batches, records) and read every file once more to hash it; here
each file is opened, hashed and parsed exactly once, and ``run_task`` streams (table, rows) pieces
that the task writes itself (``task_writer.py``).
"""

from __future__ import annotations

import hashlib
import time
import traceback
from collections.abc import Iterable, Iterator
from functools import cache

import pyarrow as pa
import pyarrow.compute as pc

from jobs.ingest.focus import Focus
from jobs.store.tables import COMMON, EXTRA_TABLE, INTERNAL_TOPIC_TABLE, KIND_TABLE, TS, schema_of
from parsers.common import FileBytes, FileWindow, problems_table
from parsers.files import KINDS, SEGMENT_KINDS, module_for, small_parser
from parsers.names import base_offset_from_name
from parsers.segment import Span

# kind -> decoder of the records of an internal topic (module with ``decode_records``)
_DECODERS = {
    "metadata_records": "parsers.metadata_records",
    "consumer_offsets": "parsers.consumer_offsets",
    "transactions": "parsers.transaction_state",
    "remote_segments": "parsers.remote_log_metadata",
}


def internal_table(f: dict) -> str | None:
    """The decoded table a segment-format file feeds, if it is an internal topic's (KRaft
    snapshots and ``bootstrap.checkpoint`` are metadata records wherever they sit)."""
    if f["kind"] in ("kraft_snapshot", "bootstrap_checkpoint"):
        return "metadata_records"
    if f["kind"] == "segment":
        return INTERNAL_TOPIC_TABLE.get(f.get("topic") or "")
    return None


def decode_internal(name: str, records: pa.Table, f: dict, failed: list | None = None) -> Iterator[tuple[str, pa.Table]]:
    """Rows of an internal topic's decoded table, plus its problems. The decoders never raise on
    bad bytes; a bug in one still must not lose the segment's other tables, so it is caught (and
    its exception appended to ``failed``)."""
    import importlib

    try:
        table, problems = importlib.import_module(_DECODERS[name]).decode_records(records)
    except Exception as exc:  # a decoder bug: name the file, keep the segment's other tables
        if failed is not None:
            failed.append(exc)
        where = traceback.extract_tb(exc.__traceback__)[-1]
        yield "problems", problem_rows(f, [(0, "parser_error", f"{name}: {type(exc).__name__}: {exc} (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})")])
        return
    extra = {}
    if name == "metadata_records":
        extra = {"file_kind": f["kind"],
                 "snapshot_end_offset": base_offset_from_name(f["path"]) if f["kind"] == "kraft_snapshot" else None}
    if table.num_rows:
        yield name, conform(table, name, f, **extra)
    if problems:
        yield "problems", conform(problems_table(f["path"], problems), "problems", f)

HASH_BLOCK = 32 << 20
ROW_GROUP_ROWS = 65536  # pieces of one table are merged up to this many rows (one Parquet row group)
_MAX_TS_MS = 253_402_300_799_999  # 9999-12-31: beyond this a Spark timestamp overflows


# tables whose topic/partition are the row's own (a checkpoint entry, a consumer commit, a
# metadata record, a log line), not those of the directory holding the file
OWN_COLUMNS: dict[str, set[str]] = {
    "checkpoints": {"topic", "partition", "dir_state"},
    "consumer_offsets": {"topic", "partition"},
    "remote_segments": {"topic", "partition"},
    "metadata_records": {"topic", "partition"},
    "log_events": {"topic", "partition"},
}


_scalars_of: tuple = (None, {})  # the last file's (values, {column: pa.scalar}): its pieces come in a row


def _common(n: int, f: dict, names: Iterable[str] = ("broker", "log_dir", "topic", "partition", "dir_state", "path")) -> dict:
    """The file's own columns, one value repeated on every row (``pa.repeat``: a Python list of
    ``n`` copies cost ~170 ns a row per column, a seventh of a segment's whole ingest)."""
    global _scalars_of
    values = tuple(f[c.name] for c in COMMON)
    known, scalars = _scalars_of  # (one tuple, swapped whole: threads never see half of one)
    if known != values:
        scalars = {c.name: pa.scalar(v, c.type) for c, v in zip(COMMON, values)}
        _scalars_of = (values, scalars)
    return {c.name: pa.repeat(scalars[c.name], n) for c in COMMON if c.name in names}


_COMMON_NAMES = frozenset(c.name for c in COMMON)


@cache
def _layout(name: str, payloads: bool) -> tuple[pa.Schema, frozenset[str]]:
    """Table ``name``'s schema and which of its columns are the file's own (``COMMON`` less the
    entry's ``OWN_COLUMNS``). Worked out once: ``conform`` runs several times for every small file
    (~100 µs a call when it rebuilt both, most of a small file's ingest at 15,000 partitions)."""
    schema = schema_of(name, payloads)
    return schema, frozenset(c.name for c in schema if c.name in _COMMON_NAMES - OWN_COLUMNS.get(name, set()))


def conform(table: pa.Table, name: str, f: dict, payloads: bool = False, **extra) -> pa.Table:
    """A parser table as ingest table ``name``: common columns in front, ``path`` relative to the
    input root, columns in the schema's order (missing ones null)."""
    schema, common = _layout(name, payloads)
    n = table.num_rows
    cols = _common(n, f, common)
    for key, value in extra.items():
        cols[key] = pa.repeat(pa.scalar(value, schema.field(key).type), n)
    present = set(table.column_names)
    arrays = []
    for field in schema:
        if field.name in cols:
            arrays.append(cols[field.name])
        elif field.name in present:
            column = table.column(field.name)
            arrays.append(column if column.type == field.type else column.cast(field.type))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def records_table(records: pa.Table, batches: pa.Table, f: dict, payloads: bool) -> pa.Table:
    """Records with Spark's Kafka-source names; batch-level facts joined by ``batch_position``."""
    idx = pc.index_in(records.column("batch_position"), value_set=batches.column("position"))
    tt = batches.column("timestamp_type").take(idx)
    ms = records.column("timestamp")
    valid = pc.and_(pc.greater_equal(ms, 0), pc.less_equal(ms, _MAX_TS_MS))
    ts = pc.if_else(valid, pc.multiply(ms, 1000), pa.scalar(None, pa.int64())).cast(pa.int64()).cast(TS)
    table = records.drop_columns(["timestamp"]).append_column("timestamp", ts)
    table = table.append_column("timestampType", pc.if_else(pc.equal(tt, "create"), 0, pc.if_else(pc.equal(tt, "log_append"), 1, None)).cast(pa.int32()))
    table = table.append_column("timestamp_ms", ms)
    for src, dst in (("partition_leader_epoch", "leader_epoch"), ("producer_id", "producer_id"), ("is_transactional", "is_transactional")):
        table = table.append_column(dst, batches.column(src).take(idx))
    return conform(table, "records", f, payloads)


class _Hasher:
    """SHA-256 of a file's bytes, kept just behind the parser's cursor so each byte is read once."""

    def __init__(self, data):
        self.view = memoryview(data) if len(data) else memoryview(b"")
        self.sha = hashlib.sha256()
        self.done = 0

    def advance(self, block: int = HASH_BLOCK) -> None:
        end = min(len(self.view), self.done + block)
        if end > self.done:
            self.sha.update(self.view[self.done:end])
            self.done = end

    def hexdigest(self) -> str:
        while self.done < len(self.view):
            self.advance()
        digest = self.sha.hexdigest()
        self.view.release()
        return digest


def parse_file(f: dict, payloads: bool = False, as_rows: bool = False, spans: list[dict] | None = None) -> Iterator[tuple[str, pa.Table]]:
    """(table name, Arrow table) pieces for one file, ending with its ``files`` row: a one-row
    table, or with ``as_rows`` the ``files_row`` dict (``run_task`` makes one table of a task's).
    Never raises: an unreadable or unparseable file becomes a ``problems`` row naming it.

    A segment split into spans (``f["span_start"]`` not null, see ``pipeline.split_segment``)
    is read from ``span_start`` up to the first batch at or past ``span_stop``; where that reading
    ended is appended to ``spans`` (``SPAN_FIELDS``) for the driver's check. Only the first span
    yields the ``files`` row, with the hash of the whole file."""
    kind = f["kind"]
    sha = None
    problems: list[tuple[int, str, str]] = []
    span_start = f.get("span_start")
    try:
        if span_start is None:
            reader = FileBytes(f["abs_path"], listed_size=f["size"])
        else:
            reader = FileWindow(f["abs_path"], f["size"], span_start, f["span_stop"])
        with reader as fb:
            hasher = _Hasher(fb.data) if span_start is None else None
            if kind in SEGMENT_KINDS:
                base = base_offset_from_name(f["path"])
                internal = internal_table(f)
                span = Span()
                failed: list[Exception] = []
                window = {} if span_start is None else {"start": span_start, "stop": f["span_stop"], "span": span, "ensure": fb.ensure}
                # an internal topic's payloads are read to decode them; they leave only if asked
                pieces = module_for(kind).iter_parse(fb.data, f["path"], records=True, payloads=payloads or internal is not None, **window)
                for piece in pieces:
                    if hasher is not None:
                        hasher.advance(HASH_BLOCK)
                    yield "batches", conform(piece.table, "batches", f, segment_base_offset=base, file_kind=kind)
                    recs = piece.extra.get("records")
                    if recs is not None and recs.num_rows:
                        yield "records", records_table(recs, piece.table, f, payloads)
                        if internal is not None:
                            yield from decode_internal(internal, recs, f, failed)
                    if piece.problems.num_rows:
                        yield "problems", conform(piece.problems, "problems", f)
                # a decoder that failed on a piece failed on the pieces of this span, which a whole
                # reading cuts elsewhere: no span row, and the driver reads the file again whole
                if span_start is not None and spans is not None and not failed:
                    spans.append({"path": f["path"], "span_start": span_start, "span_next": span.next, "span_code": span.stop,
                                  "first_base": span.first_base, "last_offset": span.last_offset})
            elif kind in KINDS:
                piece = small_parser(kind)(fb.data, f["path"])
                name = KIND_TABLE[kind]
                table, extra = piece.table, {}
                if kind == "broker_log":  # the line's subject broker, apart from the node that wrote the file
                    table = table.rename_columns(["subject_broker" if c == "broker" else c for c in table.column_names])
                    extra = {"log_kind": module_for(kind).is_broker_log(f["path"].rsplit("/", 1)[-1])}
                yield name, conform(table, name, f, **extra)
                for key, table in piece.extra.items():
                    extra_name = EXTRA_TABLE.get(key)
                    if extra_name == "index_files":
                        yield extra_name, conform(table, extra_name, f, index_kind=kind)
                if piece.problems.num_rows:
                    yield "problems", conform(piece.problems, "problems", f)
            if hasher is not None:
                sha = hasher.hexdigest()
            elif span_start == 0:
                sha = fb.sha256(HASH_BLOCK)
    except OSError as exc:
        problems.append((0, "unreadable_file", unreadable_detail(exc)))
    except Exception as exc:  # a parser bug must not stop the run: name the file, keep going
        where = traceback.extract_tb(exc.__traceback__)[-1]
        problems.append((0, "parser_error", f"{type(exc).__name__}: {exc} (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})"))
    if problems:
        yield "problems", problem_rows(f, problems)
    if span_start:  # a later span of a split segment: the first span gives the file's row
        return
    row = files_row(f, sha)
    yield "files", row if as_rows else files_table([row])


def unreadable_detail(exc: OSError) -> str:
    """Why a listed file could not be read. Gone since discovery is said as such: in a live
    broker's log dir retention deletes segments (renamed ``.deleted``, then removed) all the time."""
    if isinstance(exc, FileNotFoundError):
        return f"{type(exc).__name__}: removed since it was listed (deleted by a live broker's retention or roll?)"
    return f"{type(exc).__name__}: {exc.strerror or exc}"


def problem_rows(f: dict, rows: list[tuple[int, str, str]]) -> pa.Table:
    t = pa.table({"position": pa.array([r[0] for r in rows], pa.int64()), "kind": [r[1] for r in rows], "detail": [r[2] for r in rows]})
    return conform(t, "problems", f)


def files_row(f: dict, sha: str | None) -> dict:
    """The ``files`` row of one file, as Python values (``files`` table's schema; mtime in µs)."""
    _, common = _layout("files", False)
    row = {name: f[name] for name in common}
    row.update(kind=f["kind"], size=f["size"], sha256=sha, mtime=f["mtime_ms"] * 1000, archive=f["archive"])
    return row


def files_table(rows: list[dict]) -> pa.Table:
    """``files_row`` rows as a ``files`` table."""
    return pa.Table.from_pylist(rows, schema=_layout("files", False)[0])


def run_task(files: list[dict], payloads: bool = False, timing: dict | None = None,
             focus: Focus | None = None, spans: list[dict] | None = None) -> Iterator[tuple[str, pa.Table]]:
    """(table name, rows) pieces for one task's files; small pieces of one table are merged so
    the files hold few, larger row groups. ``timing["parse"]`` accumulates the seconds spent
    reading, hashing and parsing (not writing), for the benchmark. ``focus``: rows naming a
    partition outside it (a checkpoint entry, a metadata record...) are dropped. ``spans``: where
    the reading of each span of a split segment ended (``parse_file``)."""
    if timing is None:
        timing = {}
    timing.setdefault("parse", 0.0)
    pending: dict[str, list[pa.Table]] = {}
    pending_rows: dict[str, int] = {}

    file_rows: list[dict] = []  # the files table's rows, made into a table once (~60 µs a file apart)

    def flush(name: str) -> tuple[str, pa.Table]:
        tables = pending.pop(name)
        pending_rows.pop(name)
        return name, pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    def files_rows() -> Iterator[tuple[str, pa.Table]]:
        table = files_table(file_rows)
        file_rows.clear()
        if focus is not None:
            table = focus.rows(table)
        if table.num_rows:
            yield "files", table

    for f in files:
        pieces = parse_file(f, payloads, as_rows=True, spans=spans)
        while True:
            t = time.perf_counter()
            item = next(pieces, None)
            timing["parse"] += time.perf_counter() - t
            if item is None:
                break
            name, table = item
            if name == "files":
                file_rows.append(table)
                if len(file_rows) >= ROW_GROUP_ROWS:
                    yield from files_rows()
                continue
            if focus is not None:
                table = focus.rows(table)
            if table.num_rows == 0:
                continue
            pending.setdefault(name, []).append(table)
            pending_rows[name] = pending_rows.get(name, 0) + table.num_rows
            if pending_rows[name] >= ROW_GROUP_ROWS or table.get_total_buffer_size() > (8 << 20):  # (nbytes: ~30 µs a call)
                yield flush(name)
    for name in list(pending):
        yield flush(name)
    if file_rows:
        yield from files_rows()
