"""A segment's offset index (``NNNNNNNNNNNNNNNNNNNN.index``): ``OffsetIndex``.

    OffsetIndex => Entry*                 (no header; the base offset is in the file name)
      Entry     => RelativeOffset:int32 Position:int32          (big-endian, 8 bytes)
        RelativeOffset => offset - base offset
        Position       => byte position in the .log of the batch that STARTS there

Each entry maps an offset to where to start reading the segment. Kafka writes the LAST
offset of an append with the position where that append STARTS (``LogSegment.append(
largestOffset, …)`` -> ``offsetIndex.append(largestOffset, physicalPosition)``), once more
than ``index.interval.bytes`` were appended since the previous entry; a segment's first batch
is never indexed. An append is usually one batch, so the entry is (batch's last offset,
batch's start): golden MANIFEST surprise 1. An append of several v0/v1 messages gives the
last offset of a later batch (the golden legacy index has (14 -> 567), 567 holding offset 12).

Checks, as ``index_mismatch`` problems (``position`` = byte offset in the .index):
  * mirrored from ``OffsetIndex.sanityCheck``: the length is a multiple of 8 ("found 29 bytes
    which is neither positive nor a multiple of 8"); the last offset is >= the base offset;
  * stricter than Kafka (which checks nothing else and reads these files happily): every
    offset >= the base offset, offsets and positions strictly increasing (``OffsetIndex.append``
    refuses anything else, so the writer never produces it), no zeroed hole before real entries;
  * against the segment (``verify_against_batches``): every entry points at a batch start, its
    offset is at or after that batch's base offset and inside some batch, and no position is
    past the end of the segment (Kafka's sanityCheck passes such a file; ``kafka-dump-log``
    dies on it).

Zero padding left by a crashed broker is not a problem (see _index.py); the count is in
``Parsed.extra["index_info"]`` (``padding_entries``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ._index import INFO_SCHEMA, padding_entries, parse_index, real_entries, sanity_problems
from .common import Parsed, Problem, problems_at, problems_table

ENTRY_DTYPE = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
ENTRY_SIZE = ENTRY_DTYPE.itemsize  # 8, OffsetIndex.ENTRY_SIZE
PROBLEM_KIND = "index_mismatch"

SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("slot", pa.int32()),  # entry number n; its bytes start at n * 8
        pa.field("offset", pa.int64()),  # absolute: base offset + relative offset
        pa.field("relative_offset", pa.int32()),
        pa.field("position", pa.int64()),  # byte position in the segment (.log)
        pa.field("is_padding", pa.bool_()),  # an all-zero slot in a hole before real entries
    ]
)

__all__ = [
    "ENTRY_SIZE",
    "INFO_SCHEMA",
    "SCHEMA",
    "padding_entries",
    "parse",
    "sanity_check",
    "verify_against_batches",
]


def parse(data: bytes | memoryview, path: str, base_offset: int | None = None) -> Parsed:
    """Decode an offset index; never raises.

    ``base_offset`` defaults to the one in the file name (0 when the name has none, as for a
    renamed copy; pass it explicitly then).
    """
    return parse_index(data, path, base_offset, ENTRY_DTYPE, SCHEMA, sanity_check)


def sanity_check(table: pa.Table, base_offset: int, length: int) -> list[Problem]:
    """``OffsetIndex.sanityCheck`` plus the monotonicity Kafka's append enforces.

    Vectorised over all entries; Python only touches the offending ones.
    """
    problems = sanity_problems(
        table,
        base_offset,
        length,
        entry_size=ENTRY_SIZE,
        kind=PROBLEM_KIND,
        torn_note="(Kafka's sanityCheck: neither positive nor a multiple of 8)",
        hole_note="index (kafka-dump-log stops reading here)",
        below_note=" (Kafka's sanityCheck tests only the last entry)",
        increasing=[("offset", True), ("position", True)],
        backwards_note=lambda b, real: " (OffsetIndex.append never writes this; Kafka's sanityCheck does not look)",
    )
    slot = table["slot"].to_numpy()
    position = table["position"].to_numpy()
    real = ~table["is_padding"].to_numpy(zero_copy_only=False)
    problems += problems_at(
        np.flatnonzero(real & (position < 0)),
        lambda i: int(slot[i]) * ENTRY_SIZE,
        PROBLEM_KIND,
        lambda i: f"entry {slot[i]} has negative position {position[i]}",
    )
    problems.sort(key=lambda p: p.position)
    return problems


def verify_against_batches(
    index: pa.Table, batches: pa.Table, path: str, segment_size: int | None = None
) -> pa.Table:
    """Check every real index entry against the batches of the same segment.

    ``batches`` needs ``position, base_offset, last_offset`` (the segment parser's batch
    table). An entry (offset O, position P) is sound when
      * a batch starts at P (a lookup starts reading there),
      * that batch's base offset is <= O (O is at or after P, so the scan finds it), and
      * O lies inside some batch of the segment (base..last).
    Kafka normally stores the last offset of the batch at P (MANIFEST surprise 1), but one
    ``LogSegment.append`` of several batches (v0/v1 messages, as in the golden legacy
    segment, or an append that brings several batches at once) stores the append's largest
    offset with the position of its first batch: ``kafka-dump-log --verify-index-only`` calls
    that a "Mismatch" although Kafka wrote it, so we accept it. ``segment_size`` (the .log
    length) lets positions beyond the file be named as such. Returns a problems table for
    ``path`` (the index), ``index_mismatch`` at each entry's byte position in the index.
    Vectorised with ``searchsorted``.
    """
    entries = real_entries(index)
    if entries.num_rows == 0:
        return problems_table(path, [])
    slot = entries["slot"].to_numpy()
    offset = entries["offset"].to_numpy()
    position = entries["position"].to_numpy()
    order = np.argsort(batches["position"].to_numpy(zero_copy_only=False), kind="stable")
    b_pos = batches["position"].to_numpy(zero_copy_only=False)[order]
    b_base = batches["base_offset"].to_numpy(zero_copy_only=False)[order]
    b_last = batches["last_offset"].to_numpy(zero_copy_only=False)[order]

    at = np.searchsorted(b_pos, position)
    found = at < b_pos.size
    found[found] = b_pos[at[found]] == position[found]
    # the batch (by base offset) that holds each offset, if any
    by_base = np.argsort(b_base, kind="stable")
    s_base, s_last = b_base[by_base], b_last[by_base]
    holder = np.searchsorted(s_base, offset, side="right") - 1
    held = holder >= 0
    held[held] = offset[held] <= s_last[holder[held]]
    inside = np.zeros(slot.size, dtype=bool)
    inside[found] = (b_base[at[found]] <= offset[found]) & held[found]

    problems: list[Problem] = []
    for i in np.flatnonzero(~found):
        if segment_size is not None and position[i] >= segment_size:
            detail = (
                f"entry {slot[i]} (offset {offset[i]}) points at position {position[i]}, past the"
                f" end of the segment ({segment_size} bytes)"
            )
        elif b_pos.size and position[i] > b_pos[-1]:
            detail = (
                f"entry {slot[i]} (offset {offset[i]}) points at position {position[i]}, beyond"
                f" the last batch (which starts at {b_pos[-1]})"
            )
        else:
            detail = f"entry {slot[i]} (offset {offset[i]}) points at position {position[i]}, where no batch starts"
        problems.append(Problem(int(slot[i]) * ENTRY_SIZE, PROBLEM_KIND, detail))
    for i in np.flatnonzero(found & ~inside):
        j = at[i]
        if offset[i] < b_base[j]:
            why = f"below the base offset {b_base[j]} of the batch there (offsets {b_base[j]}-{b_last[j]})"
        else:
            why = "which no batch of the segment holds"
        problems.append(
            Problem(
                int(slot[i]) * ENTRY_SIZE,
                PROBLEM_KIND,
                f"entry {slot[i]} offset {offset[i]} at position {position[i]} is {why}",
            )
        )
    problems.sort(key=lambda p: p.position)
    return problems_table(path, problems)
