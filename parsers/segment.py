"""Segment (``.log``) files: the only dispatcher on the magic byte, as FileLogInputStream is.

    LogEntry => Offset:int64 Size:int32 (then magic at byte 16 of every entry)
      magic >= 2  -> DefaultRecordBatch (default_records.py)
      magic 0 / 1 -> LegacyRecord message, possibly a compressed wrapper (legacy_records.py)

Mirrors ``FileLogInputStream.nextBatch`` (the hop and where it stops), ``DefaultRecordBatch`` /
``LegacyRecord.ensureValid`` (CRCs, minimum sizes) and ``LogSegment.recover`` (which truncates at
the first invalid batch). Where Kafka silently stops (torn tail, batch length past EOF) or
silently accepts (unknown magic) we still say so, as a problem row with its byte position.

Two depths: batch level reads headers and CRCs without decompressing v2 payloads; record level
(``records=True``) decodes every record. Payload bytes are only kept when ``payloads=True``:
records may hold personal data, so by default only their sizes and SHA-256 leave this module.
Work is chunked (``chunk_bytes``) so a 1 GB segment streams through bounded memory.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c
import numpy as np
import pyarrow as pa

from . import default_records, legacy_records
from .codecs import CODEC_LZ4, CODEC_MASK, CODEC_ZSTD, codec_name
from .common import Parsed, Problem, empty_table, lazy_module, problems_table
from .headers import (
    DEFAULT_RECORD_BATCH,
    HEADER_COLUMNS,
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY_ATTRIBUTES,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_OVERHEAD_V0,
    SIZE_OFFSET,
    V2_ATTRIBUTES,
    V2_HEADER_SIZE,
    H,
)

K = lazy_module("parsers._kernels")  # numba: loaded by the first parse, not by a schema lookup

BIG_CRC = 512  # batches larger than this use the hardware CRC-32C library instead of the JIT loop
CHUNK_BYTES = 32 << 20
MAX_BATCHES_PER_CHUNK = 1 << 20

BATCH_SCHEMA = pa.schema(
    [
        pa.field("position", pa.int64()),
        pa.field("size", pa.int64()),
        pa.field("magic", pa.int8()),
        pa.field("base_offset", pa.int64()),
        pa.field("last_offset", pa.int64()),
        pa.field("record_count", pa.int32()),
        pa.field("codec", pa.string()),
        pa.field("crc", pa.int64()),  # unsigned 32-bit as stored
        pa.field("crc_valid", pa.bool_()),
        pa.field("partition_leader_epoch", pa.int32()),  # null for v0/v1
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int16()),
        pa.field("base_sequence", pa.int32()),
        pa.field("last_sequence", pa.int32()),
        pa.field("is_transactional", pa.bool_()),
        pa.field("is_control", pa.bool_()),
        pa.field("timestamp_type", pa.string()),  # create | log_append | null (v0: no timestamps)
        pa.field("base_timestamp", pa.int64()),
        pa.field("max_timestamp", pa.int64()),
        pa.field("attributes", pa.int16()),
    ]
)

RECORD_SCHEMA = pa.schema(
    [
        pa.field("batch_position", pa.int64()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.int64()),
        pa.field("key_size", pa.int32()),
        pa.field("value_size", pa.int32()),
        pa.field("key_sha256", pa.string()),
        pa.field("value_sha256", pa.string()),
        pa.field("headers", pa.int32()),
        pa.field("control_type", pa.string()),
        pa.field("coordinator_epoch", pa.int32()),
        pa.field("position", pa.int64()),  # byte position in the file; null inside compressed batches
    ]
)
PAYLOAD_FIELDS = [pa.field("key", pa.binary()), pa.field("value", pa.binary())]
# a record's headers as stored (``[Varint key length, key, Varint value length, value]`` after the
# count; ``default_records.record_headers`` decodes them): asked for by ``salvage``, which replays them
HEADER_BYTES_FIELD = pa.field("header_bytes", pa.binary())


def record_schema(payloads: bool = False, headers: bool = False) -> pa.Schema:
    return pa.schema(list(RECORD_SCHEMA) + (PAYLOAD_FIELDS if payloads else []) + ([HEADER_BYTES_FIELD] if headers else []))


def parse(data, path: str, records: bool = False, payloads: bool = False) -> Parsed:
    """Parse a whole segment into one batches table (+ records in ``extra['records']``)."""
    parts = list(iter_parse(data, path, records=records, payloads=payloads))
    batches = pa.concat_tables([p.table for p in parts]) if parts else empty_table(BATCH_SCHEMA)
    problems = pa.concat_tables([p.problems for p in parts]) if parts else problems_table(path, [])
    extra = {}
    if records:
        recs = [p.extra["records"] for p in parts if "records" in p.extra]
        extra["records"] = pa.concat_tables(recs) if recs else empty_table(record_schema(payloads))
    return Parsed(batches, problems, extra)


@dataclass
class Span:
    """Where reading a span of a segment ended (``iter_parse(span=...)``): what the driver needs to
    check that spans of one file read at batch boundaries chain into the whole file's reading.

    ``next``: the position after the span's last batch; ``stop``: the scan's stop code there
    (``STOP_LIMIT``: the span ended and more batches follow); ``first_base`` / ``last_offset``:
    of its first and last batch (None without batches), for the offset check across spans."""

    next: int = 0
    stop: int = -1
    first_base: int | None = None
    last_offset: int | None = None


def iter_parse(
    data, path: str, records: bool = False, payloads: bool = False, chunk_bytes: int = CHUNK_BYTES, headers: bool = False,
    start: int = 0, stop: int | None = None, span: Span | None = None, ensure=None,
) -> Iterator[Parsed]:
    """Yield Parsed pieces, one per ~chunk_bytes of segment, in file order. ``headers``: records
    also carry their header bytes (``HEADER_BYTES_FIELD``).

    ``start`` / ``stop``: read only the batches that start in ``[start, stop)``, from a batch
    boundary at ``start`` (one task's part of a big segment); ``span`` is then filled with where
    the reading ended. ``ensure(position)``: called before bytes up to ``position`` are read, for
    a buffer filled as it goes (``FileWindow.ensure``)."""
    buf = np.frombuffer(data, dtype=np.uint8) if len(data) else np.zeros(0, np.uint8)
    end = buf.shape[0]
    last = end if stop is None else min(stop, end)
    pos = start
    prev_last = None
    cap = MAX_BATCHES_PER_CHUNK
    out_pos = np.empty(cap, np.int64)
    out_size = np.empty(cap, np.int64)
    span = span if span is not None else Span()
    while True:
        limit = min(last, pos + max(chunk_bytes, 1))
        if ensure is not None:
            ensure(limit + V2_HEADER_SIZE)  # the headers the hop reads
        n, nxt, code = K.scan(buf, pos, end, limit, cap, out_pos, out_size)
        positions = out_pos[:n].copy()
        sizes = out_size[:n].copy()
        if ensure is not None:
            ensure(nxt if code == K.STOP_LIMIT else end)  # the batches' bytes; past a stop, what _stop_problem reads
        problems: list[Problem] = []
        batches, recs, prev_last = _decode_chunk(buf, positions, sizes, records, payloads, problems, prev_last, headers)
        if code != K.STOP_LIMIT:
            _stop_problem(buf, nxt, end, code, problems)
        if n and span.first_base is None:
            span.first_base = int(batches.column("base_offset")[0].as_py())
        span.next, span.stop, span.last_offset = int(nxt), int(code), prev_last
        piece = Parsed(batches, problems_table(path, problems))
        if records:
            piece.extra["records"] = recs
        yield piece
        pos = nxt
        if code != K.STOP_LIMIT or pos >= last:
            return


WINDOW_SLACK = (1 << 20) + LOG_OVERHEAD  # a window's bytes past its chunk: a batch of Kafka's default max.message.bytes


def iter_parse_stream(stream, path: str, records: bool = False, payloads: bool = False, chunk_bytes: int = CHUNK_BYTES,
                      headers: bool = False) -> Iterator[Parsed]:
    """``iter_parse`` of a whole file read through a ``common.FileStream``: the same pieces, rows
    and problems, in the memory of one window: a chunk and its last batch (a damaged length that
    still fits in the file makes that batch the rest of the file, as ``iter_parse`` reads it too).

    Each window starts at a batch boundary ``base`` and holds a chunk and ``WINDOW_SLACK`` more.
    The batches that start in its chunk are hopped as ``iter_parse`` hops them, at positions in
    the window (the file's less ``base``, added back before a piece leaves). Where the window's end,
    not the file's, stops the hop inside the chunk, the window grows to the batch it cut (one that
    would run past the file's end stops the reading there, as it does ``iter_parse``'s, and is not
    read); past the chunk, the next window starts at that batch. Why the reading stopped before the
    file's end is told from the bytes there, at the file's own positions: a batch header, and the
    rest of the file a window at a time for whether it is all zeros (``_stop_facts``)."""
    size = stream.size
    base, prev_last = 0, None
    cap = MAX_BATCHES_PER_CHUNK
    out_pos = np.empty(cap, np.int64)
    out_size = np.empty(cap, np.int64)
    chunk = max(chunk_bytes, 1)
    want = chunk + WINDOW_SLACK
    while True:
        buf = stream.window(base, want)
        end = buf.shape[0]
        n, nxt, code = K.scan(buf, 0, end, chunk, cap, out_pos, out_size)
        if base + end < size and code in (K.STOP_END, K.STOP_SHORT, K.STOP_PAST_EOF):  # the window's end, not the file's
            if nxt >= chunk and base + nxt < size - HEADER_SIZE_UP_TO_MAGIC:
                code = K.STOP_LIMIT  # (as the whole file's hop stops there: the next chunk starts at that batch)
            elif code != K.STOP_PAST_EOF or nxt >= chunk:  # a header cut short, or the file's last bytes: a window past them
                want = max(want, int(nxt) + V2_HEADER_SIZE)
                continue
            else:
                claimed = LOG_OVERHEAD + _length_at(buf, nxt)
                if nxt + claimed <= size - base:  # a batch of the file: a window that holds it whole
                    want = int(nxt) + claimed
                    continue
                # (past the file's end too: the reading stops here, as on the whole file)
        positions = out_pos[:n].copy()
        sizes = out_size[:n].copy()
        problems: list[Problem] = []
        batches, recs, prev_last = _decode_chunk(buf, positions, sizes, records, payloads, problems, prev_last, headers)
        if base:
            batches, recs, problems = _moved(batches, recs, problems, base)
        if code not in (K.STOP_LIMIT, K.STOP_END):
            _say_stop(*_stop_facts(stream, base + int(nxt), code, chunk + WINDOW_SLACK), base + int(nxt), size, code, problems)
        piece = Parsed(batches, problems_table(path, problems))
        if records:
            piece.extra["records"] = recs
        yield piece
        base += int(nxt)
        if code != K.STOP_LIMIT or base >= size:
            return
        want = chunk + WINDOW_SLACK


def _stop_facts(stream, pos: int, stop: int, step: int) -> tuple[bool, int | None, str | None]:
    """What ``_say_stop`` needs of a file read through ``stream`` that stops at ``pos``: whether
    its bytes from there are all zeros (read ``step`` bytes at a time), the batch length at ``pos``,
    and why its first bytes are no batch at all (only where it stops at 0)."""
    size = stream.size
    zeros, at = True, pos
    while zeros and at < size:
        zeros = not stream.window(at, step).any()
        at += step
    length = _length_at(stream.window(pos, LOG_OVERHEAD), 0) if size - pos >= LOG_OVERHEAD else None
    foreign = None
    if pos == 0 and stop in (K.STOP_BAD_SIZE, K.STOP_PAST_EOF):
        foreign = _impossible_first_header(stream.window(0, V2_HEADER_SIZE).copy(), size)
    return zeros, length, foreign


def _moved(batches: pa.Table, recs: pa.Table | None, problems: list[Problem], by: int):
    """A piece read at positions ``by`` bytes before the file's own, at the file's positions."""
    batches = batches.set_column(0, "position", pa.compute.add(batches.column(0), by))
    if recs is not None:
        recs = recs.set_column(0, "batch_position", pa.compute.add(recs.column(0), by))
        at = recs.schema.get_field_index("position")
        recs = recs.set_column(at, "position", pa.compute.add(recs.column(at), by))
    return batches, recs, [Problem(pr.position + by, pr.kind, pr.detail) for pr in problems]


def parse_many(datas: list, paths: list[str], records: bool = False, payloads: bool = False) -> list[Parsed | None]:
    """Several whole segments parsed in one vectorised pass: for each, the ``Parsed`` that
    ``iter_parse`` yields for it as its only piece, or None where the file must be read alone
    (``iter_parse``): reading stops before its end (a torn tail, a bad size...), it holds a
    message set older than v2, or more batches than one chunk.

    Why: a cluster of thousands of partitions is mostly small segments (a few batches each), and
    reading one costs the same dozens of numpy and Arrow calls as reading a big one (~0.4 ms).
    Here the files' bytes are laid end to end and hopped file by file (a batch never crosses a
    file's end), then decoded, checked and hashed as one chunk; positions are each file's own."""
    lens = np.fromiter((len(d) for d in datas), np.int64, len(datas))
    off = np.zeros(len(datas) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    buf = np.frombuffer(b"".join(datas), np.uint8) if off[-1] else np.zeros(0, np.uint8)
    cap = MAX_BATCHES_PER_CHUNK
    out_pos = np.empty(min(cap, int(off[-1]) // (LOG_OVERHEAD + RECORD_OVERHEAD_V0) + 1), np.int64)
    out_size = np.empty(out_pos.shape[0], np.int64)
    kept, pos_parts, size_parts = [], [], []
    for i in range(len(datas)):
        start, end = int(off[i]), int(off[i + 1])
        if end - start > CHUNK_BYTES:  # (iter_parse reads it in several pieces)
            continue
        n, _, code = K.scan(buf, start, end, end, out_pos.shape[0], out_pos, out_size)
        if code != K.STOP_END or (n and (buf[out_pos[:n] + MAGIC_OFFSET] < 2).any()):
            continue
        kept.append(i)
        pos_parts.append(out_pos[:n].copy())
        size_parts.append(out_size[:n].copy())
    results: list[Parsed | None] = [None] * len(datas)
    if not kept:
        return results
    counts = np.fromiter((p.shape[0] for p in pos_parts), np.int64, len(kept))
    bounds = np.zeros(len(kept) + 1, np.int64)
    np.cumsum(counts, out=bounds[1:])
    positions, sizes = np.concatenate(pos_parts), np.concatenate(size_parts)
    first = np.zeros(positions.shape[0], bool)
    first[bounds[:-1][counts > 0]] = True
    problems: list[Problem] = []
    batches, recs, _ = _decode_chunk(buf, positions, sizes, records, payloads, problems, None, first_of_file=first)
    kept_off = off[kept]
    # each batch's, record's and problem's file, and the positions made that file's own
    batch_file = np.repeat(np.arange(len(kept)), counts)
    batches = batches.set_column(0, "position", pa.array(positions - kept_off[batch_file]))
    if recs is not None:
        rpos = recs.column("batch_position").to_numpy()
        rec_file = np.searchsorted(kept_off, rpos, side="right") - 1
        shift = pa.array(kept_off[rec_file])
        recs = recs.set_column(0, "batch_position", pa.array(rpos - kept_off[rec_file]))
        at = recs.schema.get_field_index("position")
        recs = recs.set_column(at, "position", pa.compute.subtract(recs.column("position"), shift))
        rec_bounds = np.searchsorted(rec_file, np.arange(len(kept) + 1), side="left")
    mine: dict[int, list[Problem]] = {}
    for pr in problems:  # (in position order, so in each file's order)
        j = int(np.searchsorted(kept_off, pr.position, side="right")) - 1
        mine.setdefault(j, []).append(Problem(pr.position - int(kept_off[j]), pr.kind, pr.detail))
    for j, i in enumerate(kept):
        piece = Parsed(batches.slice(bounds[j], counts[j]), problems_table(paths[i], mine.get(j, [])))
        if recs is not None:
            piece.extra["records"] = recs.slice(rec_bounds[j], rec_bounds[j + 1] - rec_bounds[j])
        results[i] = piece
    return results


def _stop_problem(buf: np.ndarray, pos: int, end: int, stop: int, problems: list[Problem]) -> None:
    """Say why reading stopped before the end of the file, the way Kafka would have stopped."""
    if stop == K.STOP_END:
        return
    zeros = not buf[pos:end].any()
    length = _length_at(buf, pos) if end - pos >= LOG_OVERHEAD else None
    foreign = _impossible_first_header(buf, end) if pos == 0 and stop in (K.STOP_BAD_SIZE, K.STOP_PAST_EOF) else None
    _say_stop(zeros, length, foreign, pos, end, stop, problems)


def _length_at(buf: np.ndarray, pos: int) -> int:
    """The length field of the log entry at ``pos`` (big-endian int32, as ``FileLogInputStream`` reads it)."""
    return int(np.frombuffer(buf[pos + SIZE_OFFSET : pos + SIZE_OFFSET + 4].tobytes(), ">i4")[0])


def _say_stop(zeros: bool, size: int | None, foreign: str | None, pos: int, end: int, stop: int, problems: list[Problem]) -> None:
    """The problem of a reading that stopped at ``pos`` of a file of ``end`` bytes, from what the
    bytes there say: ``zeros`` (all of them from ``pos`` on), ``size`` (the batch length at ``pos``,
    None within 12 bytes of the end), ``foreign`` (``_impossible_first_header``, at 0 only)."""
    rest = end - pos
    if zeros:
        problems.append(
            Problem(pos, "zero_filled_tail", f"{rest} zero bytes from position {pos} to the end of the file ({end})")
        )
        return
    if foreign is not None and stop == K.STOP_PAST_EOF:
        problems.append(
            Problem(
                pos,
                "invalid_batch",
                f"the file does not look like a Kafka segment: {foreign}, and read as a batch its length {size} "
                f"would run {pos + LOG_OVERHEAD + size - end} bytes past the end of the file ({end}); "
                f"not a torn write. Kafka stops reading here and recovery truncates all {rest} bytes",
            )
        )
    elif stop == K.STOP_SHORT:
        problems.append(
            Problem(pos, "torn_tail", f"{rest} bytes at the end of the file are too short for a batch header; Kafka ignores them")
        )
    elif stop == K.STOP_BAD_SIZE:
        problems.append(
            Problem(
                pos,
                "invalid_batch",
                f"Found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0}); "
                f"Kafka's reader throws here and recovery truncates the remaining {rest} bytes"
                + (f" (the file does not look like a Kafka segment: {foreign})" if foreign else ""),
            )
        )
    elif stop == K.STOP_PAST_EOF:
        over = pos + LOG_OVERHEAD + size - end
        problems.append(
            Problem(
                pos,
                "torn_tail",
                f"batch length {size} runs {over} bytes past the end of the file ({end}); "
                f"Kafka stops reading here and recovery truncates the remaining {rest} bytes",
            )
        )


def _impossible_first_header(buf: np.ndarray, end: int) -> str | None:
    """Why the bytes at position 0 cannot start any batch Kafka writes, or None when they could.

    Only asked where reading stops on the very first batch: a crash can tear a segment's first
    batch (a plausible header whose length runs past the end: ``torn_tail``), but a header no
    writer produces (unknown magic; a v2 header with a negative lastOffsetDelta or record count
    or an unknown codec; a v0/v1 attribute byte with bits Kafka never sets) means the file is
    not a segment at all.
    """
    magic = int(buf[MAGIC_OFFSET].view(np.int8))
    if magic not in (0, 1, 2):
        return f"the magic byte at position {MAGIC_OFFSET} is {magic}, not 0, 1 or 2"
    if magic == 2 and end >= V2_HEADER_SIZE:
        head = np.frombuffer(buf[:V2_HEADER_SIZE].tobytes(), DEFAULT_RECORD_BATCH)[0]
        attributes, last_offset_delta, count = head["attributes"], head["last_offset_delta"], int(head["records_count"])
        if last_offset_delta < 0 or count < 0 or (attributes & CODEC_MASK) > CODEC_ZSTD:  # zstd: the newest codec
            return (
                f"its v2 header is impossible (lastOffsetDelta {int(last_offset_delta)}, record count {count}, "
                f"codec id {int(attributes) & CODEC_MASK})"
            )
    if magic < 2 and end > LEGACY_ATTRIBUTES:
        attributes = int(buf[LEGACY_ATTRIBUTES])
        allowed = CODEC_MASK | (legacy_records.TIMESTAMP_TYPE_MASK if magic == 1 else 0)
        if attributes & ~allowed or (attributes & CODEC_MASK) > CODEC_LZ4:  # v0/v1 know no zstd
            return f"its v{magic} message attributes 0x{attributes:02x} set bits no Kafka writer sets"
    return None


def _decode_chunk(buf, positions, sizes, records, payloads, problems, prev_last, headers=False, first_of_file=None):
    """The batches (and records) at ``positions`` of ``buf``. ``first_of_file``: where ``buf``
    holds several files (``parse_many``), the batches that start one, which follow no batch."""
    n = positions.shape[0]
    h = np.zeros((n, HEADER_COLUMNS), np.int64)
    K.read_headers(buf, positions, sizes, BIG_CRC, K.CRC32C_TABLE, K.CRC32_TABLE, h)
    magic = h[:, H.MAGIC]
    is_v2 = magic >= 2
    big = np.nonzero(h[:, H.COMPUTED_CRC] < 0)[0]
    v2_big = big[is_v2[big] & (sizes[big] >= V2_HEADER_SIZE)]
    crcs = K.crc32c_ranges(buf, positions[v2_big] + V2_ATTRIBUTES, sizes[v2_big] - V2_ATTRIBUTES)
    if crcs is not None:  # one compiled loop (``_kernels.crc32c_ranges``); the rest, if any, below
        h[v2_big, H.COMPUTED_CRC] = crcs
        big = big[~is_v2[big]]
    for i in big:  # legacy messages, and every big batch where the compiled loop is not there
        p, s = int(positions[i]), int(sizes[i])
        if is_v2[i]:
            if s >= V2_HEADER_SIZE:
                h[i, H.COMPUTED_CRC] = crc32c.crc32c(buf[p + V2_ATTRIBUTES : p + s])
        else:
            h[i, H.COMPUTED_CRC] = zlib.crc32(buf[p + MAGIC_OFFSET : p + s])

    v2 = default_records.batch_columns(h, positions, sizes, problems)
    if is_v2.all():  # the common case: no legacy messages in this chunk, nothing to merge
        cols, legacy_pieces = v2, []
    else:
        legacy = legacy_records.batch_columns(buf, h, positions, sizes, problems, want_records=records)
        cols = {name: np.where(is_v2, v2[name], legacy[name]) for name in v2}
        legacy_pieces = legacy["records"]
    # per-batch problems that do not depend on the format
    crc_bad = (h[:, H.COMPUTED_CRC] != h[:, H.CRC]) & (h[:, H.COMPUTED_CRC] >= 0)
    for i in np.nonzero(crc_bad)[0]:
        problems.append(
            Problem(
                int(positions[i]),
                "crc_mismatch",
                f"stored crc 0x{int(h[i, H.CRC]):08x}, computed 0x{int(h[i, H.COMPUTED_CRC]):08x} "
                f"({'CRC-32C' if is_v2[i] else 'CRC-32'}); LogSegment.recover truncates the segment from here",
            )
        )
    base = cols["base_offset"]
    last = cols["last_offset"]
    if n:
        prev = np.concatenate([[prev_last if prev_last is not None else np.iinfo(np.int64).min], last[:-1]])
        if first_of_file is not None:
            prev[first_of_file] = np.iinfo(np.int64).min
        for i in np.nonzero(base <= prev)[0]:
            problems.append(
                Problem(
                    int(positions[i]),
                    "offset_regression",
                    f"batch base offset {int(base[i])} is not above the previous batch's last offset {int(prev[i])}",
                )
            )
        prev_last = int(last[-1])
    table = _batch_table(positions, sizes, h, cols)

    recs = None
    if records:
        pieces = default_records.records(buf, h, positions, sizes, is_v2, cols, problems) + legacy_pieces
        pieces = [p for p in pieces if len(p["batch_index"])]
        recs = _records_table(pieces, positions, payloads, headers)
    problems.sort(key=lambda pr: pr.position)
    return table, recs, prev_last


_CODEC_NAMES = pa.array([codec_name(i) for i in range(CODEC_MASK + 1)])
_TS_NAMES = pa.array(["create", "log_append", None], pa.string())


def _batch_table(positions, sizes, h, cols) -> pa.Table:
    magic = h[:, H.MAGIC]
    is_v2 = magic >= 2
    codec_id = cols["codec_id"]
    codec = _CODEC_NAMES.take(pa.array(codec_id & CODEC_MASK))
    ts_type = cols["timestamp_type_id"]  # 0 create, 1 log_append, -1 none (v0)
    ts_arr = _TS_NAMES.take(pa.array(np.where(ts_type < 0, 2, ts_type)))
    return pa.table(
        {
            "position": positions,
            "size": sizes,
            "magic": magic.astype(np.int8),
            "base_offset": cols["base_offset"],
            "last_offset": cols["last_offset"],
            "record_count": pa.array(cols["record_count"].astype(np.int32)),
            "codec": codec,
            "crc": h[:, H.CRC],
            "crc_valid": h[:, H.COMPUTED_CRC] == h[:, H.CRC],
            "partition_leader_epoch": pa.array(h[:, H.PARTITION_LEADER_EPOCH].astype(np.int32), mask=~is_v2),
            "producer_id": cols["producer_id"],
            "producer_epoch": cols["producer_epoch"].astype(np.int16),
            "base_sequence": cols["base_sequence"].astype(np.int32),
            "last_sequence": cols["last_sequence"].astype(np.int32),
            "is_transactional": cols["is_transactional"],
            "is_control": cols["is_control"],
            "timestamp_type": ts_arr,
            "base_timestamp": cols["base_timestamp"],
            "max_timestamp": cols["max_timestamp"],
            "attributes": cols["attributes"].astype(np.int16),
        },
        schema=BATCH_SCHEMA,
    )


def hex_digests(digests: np.ndarray, valid: np.ndarray) -> pa.Array:
    """(n, 32) SHA-256 digests -> Arrow strings of 64 hex chars, null where not valid; no Python loop."""
    n = digests.shape[0]
    offsets = np.arange(0, (n + 1) * 64, 64, dtype=np.int32)
    chars = np.empty(n * 32, np.uint16)  # (binascii.hexlify's bytes, at a fifth of its cost)
    K.hex_rows(np.ascontiguousarray(digests), chars)
    arr = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(chars)])
    if (~valid).any():
        arr = pa.compute.if_else(pa.array(valid), arr, pa.scalar(None, pa.string()))
    return arr


def gather_binary(src: np.ndarray, pos: np.ndarray, length: np.ndarray) -> pa.Array:
    """Arrow binary array of src[pos[i]:pos[i]+length[i]] (null where length < 0), vectorised."""
    valid = length >= 0
    ln = np.where(valid, length, 0).astype(np.int64)
    offsets = np.zeros(ln.shape[0] + 1, np.int64)
    np.cumsum(ln, out=offsets[1:])
    total = int(offsets[-1])
    if total:
        idx = np.repeat(pos.astype(np.int64) - offsets[:-1], ln) + np.arange(total, dtype=np.int64)
        data = src[idx].tobytes()
    else:
        data = b""
    validity = pa.array(valid).buffers()[1] if (~valid).any() else None
    return pa.Array.from_buffers(pa.large_binary(), ln.shape[0], [validity, pa.py_buffer(offsets), pa.py_buffer(data)]).cast(
        pa.binary()
    )


def _records_table(pieces, positions, payloads, headers=False) -> pa.Table:
    """Stitch record pieces (file bytes, decompressed bytes) back into file order, hash them."""
    cols = []
    for pc_ in pieces:
        src = pc_["buf"]
        n = len(pc_["batch_index"])
        kd = np.empty((n, 32), np.uint8)  # (a null key's or value's row is left as is: hex_digests makes it null)
        vd = np.empty((n, 32), np.uint8)
        K.sha256_many(src, pc_["key_pos"], pc_["key_len"], kd)
        K.sha256_many(src, pc_["value_pos"], pc_["value_len"], vd)
        t = {
            "batch_position": positions[pc_["batch_index"]],
            "offset": pc_["offset"],
            "timestamp": pc_["timestamp"],
            "key_size": pa.array(pc_["key_len"].astype(np.int32)),
            "value_size": pa.array(pc_["value_len"].astype(np.int32)),
            "key_sha256": hex_digests(kd, pc_["key_len"] >= 0),
            "value_sha256": hex_digests(vd, pc_["value_len"] >= 0),
            "headers": pa.array(pc_["headers"].astype(np.int32)),
            "control_type": pc_["control_type"],
            "coordinator_epoch": pc_["coordinator_epoch"],
            "position": pc_["position"],
        }
        if payloads:
            t["key"] = gather_binary(src, pc_["key_pos"], pc_["key_len"])
            t["value"] = gather_binary(src, pc_["value_pos"], pc_["value_len"])
        if headers:
            t["header_bytes"] = gather_binary(src, pc_["header_pos"], pc_["header_len"])
        cols.append((pc_["batch_index"], pa.table(t, schema=record_schema(payloads, headers))))
    if not cols:
        return empty_table(record_schema(payloads, headers))
    keys = np.concatenate([c[0] for c in cols])
    table = pa.concat_tables([c[1] for c in cols])
    if keys.size < 2 or (np.diff(keys) >= 0).all():
        return table
    return table.take(pa.array(np.argsort(keys, kind="stable")))
