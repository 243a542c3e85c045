"""What one Spark task does on an executor: open its files, hash and parse them, and hand back
Arrow tables. No Spark import here: it runs inside ``mapInArrow`` workers and in plain tests.

Why one pass over the files for all tables: a segment yields batches, records and problems in the
same pass, an index yields entries and an ``index_files`` row. Running one job per output table
would parse every segment twice (batches, records) and read every file once more to hash it; here
each file is opened, hashed and parsed exactly once, and ``run_task`` streams (table, rows) pieces
that the task writes itself (``task_writer.py``). Reading is here; the pieces' shaping into each
table's schema is ``shaping.py``'s.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.ingest import stores
from jobs.ingest.batch_runs import runs_of
from jobs.ingest.focus import Focus
from jobs.ingest.producer_epoch_sums import sums_of
from jobs.ingest.shaping import Piece, bug_detail, files_row, files_table, problem_raw, records_final, shaped
from jobs.store.tables import EXTRA_TABLE, INTERNAL_TOPIC_TABLE, KIND_TABLE
from parsers import consumer_offsets, metadata_records, remote_log_metadata, share_group_state, transaction_state
from parsers.common import problems_table
from parsers.files import KINDS, SEGMENT_KINDS, module_for, small_parser
from parsers.names import base_offset_from_name
from parsers.segment import Span

# table -> decoder of an internal topic's records (``decode_records``). (Imported with the task:
# jobs.store.tables has already imported them, so they cost a worker's start nothing more.)
_DECODERS = {
    "metadata_records": metadata_records.decode_records,
    "consumer_offsets": consumer_offsets.decode_records,
    "transactions": transaction_state.decode_records,
    "share_group_state": share_group_state.decode_records,
    "remote_segments": remote_log_metadata.decode_records,
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
    try:
        table, problems = _DECODERS[name](records)
    except Exception as exc:  # a decoder bug: name the file, keep the segment's other tables
        if failed is not None:
            failed.append(exc)
        yield Piece("problems", problem_raw([(0, "parser_error", bug_detail(exc, name))]), f)
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
        sums = sums_of(batches)
        if sums.num_rows:
            yield Piece("producer_epoch_sums", sums, f, extra)
    if records is not None and records.num_rows:
        yield Piece("records", records_raw(records, batches), f, finish=records_final)


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
        problems.append((0, "parser_error", bug_detail(exc)))
    if problems:
        yield Piece("problems", problem_raw(problems), f)
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
