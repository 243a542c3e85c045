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

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._index import INFO_SCHEMA, as_uint8, info_table, layout, padding_entries
from .common import Parsed, Problem, problems_table
from .names import base_offset_from_name

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
    if base_offset is None:
        base_offset = base_offset_from_name(os.path.basename(path))
    base = 0 if base_offset is None else base_offset
    raw = as_uint8(data)
    lay = layout(raw, ENTRY_SIZE)
    entries = np.frombuffer(raw[: lay.n_real * ENTRY_SIZE].tobytes(), dtype=ENTRY_DTYPE)
    timestamp = entries["timestamp"].astype(np.int64)
    relative = entries["relative_offset"].astype(np.int32)
    n = lay.n_real
    table = pa.table(
        {
            "path": pa.array([path] * n, pa.string()),
            "slot": pa.array(np.arange(n, dtype=np.int32)),
            "timestamp": pa.array(timestamp),
            "offset": pa.array(relative.astype(np.int64) + base),
            "relative_offset": pa.array(relative),
            "is_padding": pa.array((timestamp == 0) & (relative == 0)),
        },
        schema=SCHEMA,
    )
    problems = sanity_check(table, base, raw.size)
    return Parsed(
        table,
        problems_table(path, problems),
        extra={"index_info": info_table(path, base_offset, raw.size, lay)},
    )


def sanity_check(table: pa.Table, base_offset: int, length: int) -> list[Problem]:
    """``TimeIndex.sanityCheck`` over every entry instead of only the last one."""
    problems: list[Problem] = []
    torn = length % ENTRY_SIZE
    if torn:
        problems.append(
            Problem(
                length - torn,
                PROBLEM_KIND,
                f"{length} bytes, not a multiple of {ENTRY_SIZE}: the last {torn} bytes are a"
                " partial entry (Kafka's sanityCheck: not positive or not a multiple of 12)",
            )
        )
    if table.num_rows == 0:
        return problems
    slot = table["slot"].to_numpy()
    timestamp = table["timestamp"].to_numpy()
    offset = table["offset"].to_numpy()
    hole = table["is_padding"].to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(hole):
        problems.append(
            Problem(
                int(slot[i]) * ENTRY_SIZE,
                PROBLEM_KIND,
                f"entry {slot[i]} is all zeros but real entries follow it: a zeroed hole in the"
                " time index",
            )
        )
    real = np.flatnonzero(~hole)
    for i in real[offset[real] < base_offset]:
        problems.append(
            Problem(
                int(slot[i]) * ENTRY_SIZE,
                PROBLEM_KIND,
                f"entry {slot[i]} has offset {offset[i]}, below the base offset {base_offset}",
            )
        )
    if real.size >= 2:
        prev, cur = real[:-1], real[1:]
        ts_down = timestamp[cur] < timestamp[prev]
        off_down = offset[cur] < offset[prev]
        first_ts = timestamp[real[0]]
        for k in np.flatnonzero(ts_down | off_down):
            a, b = prev[k], cur[k]
            what = []
            if ts_down[k]:
                what.append(f"timestamp {timestamp[b]} is less than {timestamp[a]}")
            if off_down[k]:
                what.append(f"offset {offset[b]} is less than {offset[a]}")
            kafka = (
                "; Kafka's sanityCheck fails too (last timestamp below the first)"
                if b == real[-1] and timestamp[b] < first_ts
                else " (Kafka's sanityCheck compares only the last entry with the first)"
            )
            problems.append(
                Problem(
                    int(slot[b]) * ENTRY_SIZE,
                    PROBLEM_KIND,
                    f"entry {slot[b]} goes backwards from entry {slot[a]}: {' and '.join(what)}{kafka}",
                )
            )
    problems.sort(key=lambda p: p.position)
    return problems


def verify_against_batches(index: pa.Table, batches: pa.Table, path: str) -> pa.Table:
    """Every real time-index offset must fall inside a batch (base_offset..last_offset).

    ``batches`` needs ``base_offset, last_offset`` of the same segment. Inside any batch is
    enough, because versions differ on whether the base or last offset is stored. Returns a
    problems table for ``path`` (the time index); vectorised with ``searchsorted``.
    """
    entries = index.filter(pc.invert(index["is_padding"])) if "is_padding" in index.column_names else index
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

