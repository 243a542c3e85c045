"""A segment's time index (``NNNNNNNNNNNNNNNNNNNN.timeindex``): ``TimeIndex``.

    TimeIndex => Entry*                   (no header; the base offset is in the file name)
      Entry   => Timestamp:int64 RelativeOffset:int32          (big-endian, 12 bytes)
        Timestamp      => the largest timestamp appended so far (ms)
        RelativeOffset => offset - base offset of a record batch carrying that timestamp

Used to find the first offset at or after a time (ListOffsets by timestamp, time-based
retention). ``TimeIndex.maybeAppend`` only appends a strictly larger timestamp and refuses
a smaller offset, so a healthy file is increasing in both. Which offset is stored is not
fixed across versions: the batch's last offset in Kafka 4.0 and in ``LogSegment.recover``,
its base offset for multi-record batches in Kafka 3.1 data (golden MANIFEST surprise 2).

Checks, as ``timeindex_mismatch`` problems (``position`` = byte offset in the .timeindex):
  * mirrored from ``TimeIndex.sanityCheck``: length a multiple of 12; last timestamp not
    below the first; last offset not below the base offset;
  * stricter than Kafka: no timestamp below the previous one and no offset below the
    previous one anywhere (Kafka compares only last with first), every offset >= base,
    no zeroed hole before real entries;
  * against the segment (``verify_against_batches``): every offset lies inside some batch.

Zero padding (entries of timestamp 0 and relative offset 0 at the end of a preallocated file
left by a crash) is benign and not a problem, although Kafka's own sanityCheck fails on it
("last timestamp is 0 which is less than the first timestamp"): a real broker never reads
such a file, it rebuilds the indexes of segments above the recovery point. The padding count
is in ``Parsed.extra["index_info"]``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ._index import INFO_SCHEMA, padding_entries, parse_index, real_entries, sanity_problems
from .common import Parsed, Problem, problems_table

ENTRY_DTYPE = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
ENTRY_SIZE = ENTRY_DTYPE.itemsize  # 12, TimeIndex.ENTRY_SIZE
PROBLEM_KIND = "timeindex_mismatch"

SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("slot", pa.int32()),  # entry number n; its bytes start at n * 12
        pa.field("timestamp", pa.int64()),  # ms since the epoch
        pa.field("offset", pa.int64()),  # absolute: base offset + relative offset
        pa.field("relative_offset", pa.int32()),
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
    """Decode a time index; never raises. ``base_offset`` defaults to the file name's."""
    return parse_index(data, path, base_offset, ENTRY_DTYPE, SCHEMA, sanity_check)


def sanity_check(table: pa.Table, base_offset: int, length: int) -> list[Problem]:
    """``TimeIndex.sanityCheck`` over every entry instead of only the last one."""
    timestamp = table["timestamp"].to_numpy()

    def kafka(b: int, real: np.ndarray) -> str:
        if b == real[-1] and timestamp[b] < timestamp[real[0]]:
            return "; Kafka's sanityCheck fails too (last timestamp below the first)"
        return " (Kafka's sanityCheck compares only the last entry with the first)"

    return sanity_problems(
        table,
        base_offset,
        length,
        entry_size=ENTRY_SIZE,
        kind=PROBLEM_KIND,
        torn_note="(Kafka's sanityCheck: not positive or not a multiple of 12)",
        hole_note="time index",
        below_note="",
        increasing=[("timestamp", False), ("offset", False)],
        backwards_note=kafka,
    )


def verify_against_batches(index: pa.Table, batches: pa.Table, path: str) -> pa.Table:
    """Every real time-index offset must fall inside a batch (base_offset..last_offset).

    ``batches`` needs ``base_offset, last_offset`` of the same segment. Inside any batch is
    enough, because versions differ on whether the base or last offset is stored. Returns a
    problems table for ``path`` (the time index); vectorised with ``searchsorted``.
    """
    entries = real_entries(index)
    if entries.num_rows == 0:
        return problems_table(path, [])
    slot = entries["slot"].to_numpy()
    offset = entries["offset"].to_numpy()
    timestamp = entries["timestamp"].to_numpy()
    b_base = batches["base_offset"].to_numpy(zero_copy_only=False)
    order = np.argsort(b_base, kind="stable")
    b_base = b_base[order]
    b_last = batches["last_offset"].to_numpy(zero_copy_only=False)[order]
    at = np.searchsorted(b_base, offset, side="right") - 1
    ok = at >= 0
    ok[ok] = offset[ok] <= b_last[at[ok]]
    problems = []
    for i in np.flatnonzero(~ok):
        if b_base.size == 0:
            where = "the segment has no batches"
        elif offset[i] > b_last.max():
            where = f"beyond the segment's last offset {int(b_last.max())}"
        elif offset[i] < b_base[0]:
            where = f"below the segment's first offset {int(b_base[0])}"
        else:
            where = "in a gap between batches"
        problems.append(
            Problem(
                int(slot[i]) * ENTRY_SIZE,
                PROBLEM_KIND,
                f"entry {slot[i]} (timestamp {timestamp[i]}) has offset {offset[i]},"
                f" which no batch holds: {where}",
            )
        )
    return problems_table(path, problems)

