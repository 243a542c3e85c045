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
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.ingest import stores
from jobs.ingest.batch_runs import runs_of
from jobs.ingest.focus import Focus
from jobs.store.tables import COMMON, EXTRA_TABLE, INTERNAL_TOPIC_TABLE, KIND_TABLE, TS, schema_of
from parsers.common import problems_table
from parsers.files import KINDS, SEGMENT_KINDS, module_for, small_parser
from parsers.names import base_offset_from_name
from parsers.segment import Span

# kind -> decoder of the records of an internal topic (module with ``decode_records``)
_DECODERS = {
    "metadata_records": "parsers.metadata_records",
    "consumer_offsets": "parsers.consumer_offsets",
    "transactions": "parsers.transaction_state",
    "share_group_state": "parsers.share_group_state",
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


def decode_internal(name: str, records: pa.Table, f: dict, failed: list | None = None) -> Iterator[Piece]:
    """Rows of an internal topic's decoded table, plus its problems (``Piece``s). The decoders
    never raise on bad bytes; a bug in one still must not lose the segment's other tables, so it
    is caught (and its exception appended to ``failed``)."""
    import importlib

    try:
        table, problems = importlib.import_module(_DECODERS[name]).decode_records(records)
    except Exception as exc:  # a decoder bug: name the file, keep the segment's other tables
        if failed is not None:
            failed.append(exc)
        yield Piece("problems", _problem_raw([(0, "parser_error", _bug(exc, name))]), f)
        return
    extra = {}
    if name == "metadata_records":
        extra = {"file_kind": f["kind"],
                 "snapshot_end_offset": base_offset_from_name(f["path"]) if f["kind"] == "kraft_snapshot" else None}
    if table.num_rows:
        yield Piece(name, table, f, extra)
    if problems:
        yield Piece("problems", problems_table(f["path"], problems), f)

HASH_BLOCK = 32 << 20
ROW_GROUP_ROWS = 65536  # pieces of one table are merged up to this many rows (one Parquet row group)
PIECE_BYTES = 8 << 20  # ... or until a piece of this many bytes comes
_MAX_TS_MS = 253_402_300_799_999  # 9999-12-31: beyond this a Spark timestamp overflows


# tables whose topic/partition are the row's own (a checkpoint entry, a consumer commit, a
# metadata record, a log line), not those of the directory holding the file
OWN_COLUMNS: dict[str, set[str]] = {
    "checkpoints": {"topic", "partition", "dir_state"},
    "consumer_offsets": {"topic", "partition"},
    "share_group_state": {"topic", "partition"},
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
    entry's ``OWN_COLUMNS``). Worked out once: ``conform`` runs for every run of pieces, and for
    every piece of a file read alone (~100 µs a call when it rebuilt both)."""
    schema = schema_of(name, payloads)
    return schema, frozenset(c.name for c in schema if c.name in _COMMON_NAMES - OWN_COLUMNS.get(name, set()))


class Piece(NamedTuple):
    """Rows of one file for table ``name`` as its parser made them (``raw``), not yet in the
    table's schema: ``conform_run`` adds the file's own columns (from ``f``) and the per-file
    ``extra`` values, after ``finish`` (a whole-column step of the table's own, e.g. the records'
    timestamps). Why deferred: shaping a small file's pieces one by one cost ~100 µs each (a
    dozen Arrow calls a piece, four pieces a partition), more than reading them; a task shapes
    its pieces of one table in one go, one concatenation and one ``take`` a column."""

    name: str
    raw: pa.Table
    f: dict
    extra: Mapping[str, Any] = MappingProxyType({})
    finish: Callable[[pa.Table], pa.Table] | None = None


def conform(table: pa.Table, name: str, f: dict, payloads: bool = False, **extra) -> pa.Table:
    """A parser table as ingest table ``name``: common columns in front, ``path`` relative to the
    input root, columns in the schema's order (missing ones null)."""
    schema, common = _layout(name, payloads)
    n = table.num_rows
    cols = _common(n, f, common)
    for key, value in extra.items():
        cols[key] = pa.repeat(pa.scalar(value, schema.field(key).type), n)
    return _assemble(table, schema, cols)


def conform_run(pieces: list[Piece], payloads: bool = False) -> pa.Table:
    """Pieces of one table with the same raw schema and ``extra`` keys, in file order, as one
    table in that table's schema (``Piece``): each file's own values are made an array of one
    value a piece and spread over its rows by a ``take``."""
    first = pieces[0]
    if len(pieces) == 1:
        raw = first.raw if first.finish is None else first.finish(first.raw)
        return conform(raw, first.name, first.f, payloads, **first.extra)
    schema, common = _layout(first.name, payloads)
    raw = pa.concat_tables([p.raw for p in pieces]).combine_chunks()
    if first.finish is not None:
        raw = first.finish(raw)
    counts = np.fromiter((p.raw.num_rows for p in pieces), np.int64, len(pieces))
    which = pa.array(np.repeat(np.arange(len(pieces), dtype=np.int32), counts))
    cols = {c.name: pa.array([p.f[c.name] for p in pieces], c.type).take(which) for c in COMMON if c.name in common}
    for key in first.extra:
        cols[key] = pa.array([p.extra[key] for p in pieces], schema.field(key).type).take(which)
    return _assemble(raw, schema, cols)


def conform_all(pieces: list[Piece], payloads: bool = False) -> pa.Table:
    """Pieces of one table in file order, as one table of its schema: ``conform_run`` over each
    run of consecutive pieces that share a raw schema, ``extra`` keys and ``finish`` (the pieces
    of one table are mostly one run; row order is kept)."""
    runs: list[list[Piece]] = []
    for p in pieces:
        last = runs[-1][-1] if runs else None
        if (last is not None and p.finish is last.finish and p.extra.keys() == last.extra.keys()
                and p.raw.schema.equals(last.raw.schema)):
            runs[-1].append(p)
        else:
            runs.append([p])
    tables = [conform_run(run, payloads) for run in runs]
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


def shaped(pieces: list[Piece], payloads: bool = False) -> list[tuple[str, pa.Table]]:
    """``conform_all`` of one table's pieces, as (name, rows); should shaping fail (a value
    that does not fit its column: a bug, as a parser's own is), each piece is shaped alone and
    one that still fails becomes a ``parser_error`` row naming its file, as in ``file_pieces``:
    the task's other rows are kept."""
    try:
        return [(pieces[0].name, conform_all(pieces, payloads))]
    except Exception:
        out = []
        for p in pieces:
            try:
                out.append((p.name, conform_run([p], payloads)))
            except Exception as exc:
                out.append(("problems", problem_rows(p.f, [(0, "parser_error", _bug(exc, f"{p.name} rows"))])))
        return out


def _bug(exc: Exception, what: str = "") -> str:
    """A parser_error row's text: what failed, the exception, and where it was raised."""
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{what}{': ' if what else ''}{type(exc).__name__}: {exc} (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})"


def _assemble(table: pa.Table, schema: pa.Schema, cols: dict[str, pa.Array]) -> pa.Table:
    """``schema``'s columns: from ``cols``, else ``table``'s (cast where its type differs), else nulls."""
    n = table.num_rows
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


def records_raw(records: pa.Table, batches: pa.Table) -> pa.Table:
    """A segment piece's records with their batch's facts, joined by ``batch_position`` (still
    with the stored ms timestamp: ``records_final`` makes the timestamp columns, for a whole
    run of pieces at once). Batch positions rise within a piece and a batch's records are side by
    side, so the join is a binary search for the first record of each batch, spread over its
    records (a search a record cost ~25 ns); the hash join (``index_in``: a position's first
    batch) is kept for a piece where they do not, or where a record's batch is missing."""
    bpos = batches.column("position").to_numpy()
    rpos = records.column("batch_position").to_numpy()
    n = rpos.size
    starts = np.flatnonzero(np.concatenate(([True], rpos[1:] != rpos[:-1]))) if n else np.zeros(0, np.int64)
    heads = rpos[starts]
    idx = np.searchsorted(bpos, heads)
    if n and (idx.max() >= bpos.size or (bpos[idx] != heads).any() or (bpos[1:] <= bpos[:-1]).any()):
        which = pc.index_in(records.column("batch_position"), value_set=batches.column("position"))
    else:
        which = pa.array(np.repeat(idx, np.diff(np.append(starts, n))))
    # the batch's Kafka-source timestampType (0 create, 1 log append), made once a batch, not a record
    tt = batches.column("timestamp_type")
    tt_id = pc.if_else(pc.equal(tt, "create"), 0, pc.if_else(pc.equal(tt, "log_append"), 1, None)).cast(pa.int32())
    records = records.append_column("_timestamp_type", tt_id.take(which))
    for src, dst in (("partition_leader_epoch", "leader_epoch"), ("producer_id", "producer_id"), ("is_transactional", "is_transactional")):
        records = records.append_column(dst, batches.column(src).take(which))
    return records


def segment_pieces(batches: pa.Table, records: pa.Table | None, f: dict, base: int | None) -> Iterator[Piece]:
    """The ``batches`` and ``records`` pieces of one piece a segment parser read (``base``: the
    segment's base offset, from its name), as a segment read alone or with others gives them."""
    extra = {"segment_base_offset": base, "file_kind": f["kind"]}
    yield Piece("batches", batches, f, extra)
    if batches.num_rows:
        yield Piece("batch_runs", runs_of(batches), f, extra)
    if records is not None and records.num_rows:
        yield Piece("records", records_raw(records, batches), f, finish=records_final)


def records_final(table: pa.Table) -> pa.Table:
    """``records_raw`` rows with Spark's Kafka-source timestamp columns: ``timestamp`` (null
    where the stored value is -1 or past what Spark holds), ``timestampType`` (0 create, 1 log
    append: ``records_raw`` took it from the batch) and the stored ``timestamp_ms``."""
    ms = table.column("timestamp")
    tt = table.column("_timestamp_type")
    valid = pc.and_(pc.greater_equal(ms, 0), pc.less_equal(ms, _MAX_TS_MS))
    ts = pc.if_else(valid, pc.multiply(ms, 1000), pa.scalar(None, pa.int64())).cast(pa.int64()).cast(TS)
    table = table.drop_columns(["timestamp", "_timestamp_type"]).append_column("timestamp", ts)
    table = table.append_column("timestampType", tt)
    return table.append_column("timestamp_ms", ms)


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


def parse_file(f: dict, payloads: bool = False, spans: list[dict] | None = None) -> Iterator[tuple[str, pa.Table]]:
    """(table name, Arrow table) pieces for one file, each in its table's schema, ending with
    its one-row ``files`` table (but for a later span of a split segment): ``file_pieces``, each
    piece shaped alone. Never raises."""
    for item in file_pieces(f, payloads, spans):
        if isinstance(item, dict):
            yield "files", files_table([item])
        else:
            yield from shaped([item], payloads)


def file_pieces(f: dict, payloads: bool = False, spans: list[dict] | None = None) -> Iterator[Piece | dict]:
    """One file's ``Piece``s, ending with its ``files`` row (the ``files_row`` dict; ``run_task``
    makes one table of a task's). Never raises: an unreadable or unparseable file becomes a
    ``problems`` row naming it.

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
            reader = stores.listed_bytes(f["abs_path"], f["size"])
        else:
            reader = stores.listed_window(f["abs_path"], f["size"], span_start, f["span_stop"])
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
                    recs = piece.extra.get("records")
                    kept = recs if recs is None or payloads or internal is None else recs.drop_columns(["key", "value"])
                    yield from segment_pieces(piece.table, kept, f, base)
                    if recs is not None and recs.num_rows and internal is not None:
                        yield from decode_internal(internal, recs, f, failed)
                    if piece.problems.num_rows:
                        yield Piece("problems", piece.problems, f)
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
                yield Piece(name, table, f, extra)
                for key, table in piece.extra.items():
                    extra_name = EXTRA_TABLE.get(key)
                    if extra_name == "index_files":
                        yield Piece(extra_name, table, f, {"index_kind": kind})
                if piece.problems.num_rows:
                    yield Piece("problems", piece.problems, f)
            if hasher is not None:
                sha = hasher.hexdigest()
            elif span_start == 0:
                sha = fb.sha256(HASH_BLOCK)
    except stores.StoreError:
        raise  # the store refused or failed (credentials, throttling): the run stops, naming the URL
    except OSError as exc:
        problems.append((0, "unreadable_file", unreadable_detail(exc)))
    except Exception as exc:  # a parser bug must not stop the run: name the file, keep going
        problems.append((0, "parser_error", _bug(exc)))
    if problems:
        yield Piece("problems", _problem_raw(problems), f)
    if span_start:  # a later span of a split segment: the first span gives the file's row
        return
    yield files_row(f, sha)


SMALL_SEGMENT = 1 << 20  # segments up to this size are read in groups (``small_segment_pieces``)
GROUP_BYTES = 16 << 20  # ... of at most this many bytes


def groupable(f: dict) -> bool:
    """Whether ``f`` can be read with other small segments in one pass: a whole data segment
    (not a span of a split one, not an internal topic's, whose records are decoded further)."""
    return (f["kind"] == "segment" and f.get("span_start") is None and f["size"] <= SMALL_SEGMENT
            and internal_table(f) is None)


def small_segment_pieces(files: list[dict], payloads: bool = False) -> list[list[Piece | dict] | None]:
    """For each of ``files`` (``groupable`` ones), the items ``file_pieces`` yields for it, the
    sound ones parsed together (``segment.parse_many``: a small segment's reading is mostly fixed
    costs); None for a file that cannot be read or that ``parse_many`` leaves to a reading of its
    own (damage, an old message format): ``file_pieces`` reads it like any other file."""
    from parsers import segment

    datas: list[bytes | None] = []
    for f in files:
        try:
            with stores.listed_bytes(f["abs_path"], f["size"]) as fb:
                datas.append(fb.data)
        except Exception:  # (file_pieces says why, in a problems row)
            datas.append(None)
    readable = [i for i, d in enumerate(datas) if d is not None]
    try:
        parsed = segment.parse_many([datas[i] for i in readable], [files[i]["path"] for i in readable], records=True, payloads=payloads)
    except Exception:  # a parser bug: each file alone, where file_pieces names it
        parsed = [None] * len(readable)
    results: list[list[Piece | dict] | None] = [None] * len(files)
    for i, piece in zip(readable, parsed):
        if piece is None:
            continue
        f = files[i]
        try:
            items: list[Piece | dict] = [*segment_pieces(piece.table, piece.extra["records"], f, base_offset_from_name(f["path"]))]
            if piece.problems.num_rows:
                items.append(Piece("problems", piece.problems, f))
            items.append(files_row(f, hashlib.sha256(datas[i]).hexdigest()))
        except Exception:  # a bug: file_pieces reads it again and names it
            continue
        results[i] = items
    return results


def unreadable_detail(exc: OSError) -> str:
    """Why a listed file could not be read. Gone since discovery is said as such: in a live
    broker's log dir retention deletes segments (renamed ``.deleted``, then removed) all the time."""
    if isinstance(exc, FileNotFoundError):
        return f"{type(exc).__name__}: removed since it was listed (deleted by a live broker's retention or roll?)"
    return f"{type(exc).__name__}: {exc.strerror or exc}"


def problem_rows(f: dict, rows: list[tuple[int, str, str]]) -> pa.Table:
    """``problems`` rows of file ``f`` from (position, kind, detail)."""
    return conform(_problem_raw(rows), "problems", f)


def _problem_raw(rows: list[tuple[int, str, str]]) -> pa.Table:
    return pa.table({"position": pa.array([r[0] for r in rows], pa.int64()), "kind": [r[1] for r in rows], "detail": [r[2] for r in rows]})


def files_row(f: dict, sha: str | None) -> dict:
    """The ``files`` row of one file, as Python values (``files`` table's schema; mtime in µs)."""
    _, common = _layout("files", False)
    row = {name: f[name] for name in common}
    row.update(kind=f["kind"], size=f["size"], sha256=sha, mtime=f["mtime_ms"] * 1000, archive=f["archive"])
    return row


def files_table(rows: list[dict]) -> pa.Table:
    """``files_row`` rows as a ``files`` table."""
    return pa.Table.from_pylist(rows, schema=_layout("files", False)[0])


def _read_ahead(files: list[dict], k: int, payloads: bool) -> dict[int, list[Piece | dict] | None]:
    """The items of file ``k`` and of the ``groupable`` files after it (up to ``GROUP_BYTES``),
    read together (``small_segment_pieces``), by file number. Why ahead: a task's files come
    partition by partition (segment, indexes, checkpoints...), so small segments are never side
    by side; each is still yielded in its place, and every table keeps the files' order."""
    group, size = [], 0
    for j in range(k, len(files)):
        f = files[j]
        if groupable(f):
            if group and size + f["size"] > GROUP_BYTES:
                break
            group.append(j)
            size += f["size"]
    if len(group) == 1:
        return {}
    return dict(zip(group, small_segment_pieces([files[j] for j in group], payloads)))


def run_task(files: list[dict], payloads: bool = False, timing: dict | None = None,
             focus: Focus | None = None, spans: list[dict] | None = None) -> Iterator[tuple[str, pa.Table]]:
    """(table name, rows) pieces for one task's files; the pieces of one table are gathered and
    shaped together (``conform_all``) up to a row group's worth, so the files hold few, larger row
    groups. ``timing["parse"]`` accumulates the seconds spent reading, hashing, parsing and
    shaping (not writing), for the benchmark. ``focus``: rows naming a partition outside it (a
    checkpoint entry, a metadata record...) are dropped. ``spans``: where the reading of each
    span of a split segment ended (``file_pieces``)."""
    if timing is None:
        timing = {}
    timing.setdefault("parse", 0.0)
    pending: dict[str, list[Piece]] = {}
    pending_rows: dict[str, int] = {}

    file_rows: list[dict] = []  # the files table's rows, made into a table once (~60 µs a file apart)

    def flush(name: str) -> Iterator[tuple[str, pa.Table]]:
        t = time.perf_counter()
        tables = shaped(pending.pop(name), payloads)
        pending_rows.pop(name)
        if focus is not None:
            tables = [(n, focus.rows(table)) for n, table in tables]
        timing["parse"] += time.perf_counter() - t
        for n, table in tables:
            if table.num_rows:
                yield n, table

    def files_rows() -> Iterator[tuple[str, pa.Table]]:
        table = files_table(file_rows)
        file_rows.clear()
        if focus is not None:
            table = focus.rows(table)
        if table.num_rows:
            yield "files", table

    ahead: dict[int, list[Piece | dict] | None] = {}  # file number -> its items, read with other small segments
    for k, f in enumerate(files):
        if groupable(f) and k not in ahead:
            t = time.perf_counter()
            ahead.update(_read_ahead(files, k, payloads))
            timing["parse"] += time.perf_counter() - t
        items = ahead.pop(k, None)
        pieces = iter(items) if items is not None else file_pieces(f, payloads, spans)
        while True:
            t = time.perf_counter()
            item = next(pieces, None)
            timing["parse"] += time.perf_counter() - t
            if item is None:
                break
            if isinstance(item, dict):
                file_rows.append(item)
                if len(file_rows) >= ROW_GROUP_ROWS:
                    yield from files_rows()
                continue
            rows = item.raw.num_rows
            if rows == 0:
                continue
            pending.setdefault(item.name, []).append(item)
            pending_rows[item.name] = pending_rows.get(item.name, 0) + rows
            # (a piece of a group read together is a slice of the group's table: its buffers'
            # size is the group's, its nbytes its own, which costs ~30 µs a call to count)
            if pending_rows[item.name] >= ROW_GROUP_ROWS or (item.raw.get_total_buffer_size() > PIECE_BYTES and item.raw.nbytes > PIECE_BYTES):
                yield from flush(item.name)
    for name in list(pending):
        yield from flush(name)
    if file_rows:
        yield from files_rows()
