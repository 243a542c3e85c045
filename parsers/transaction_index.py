"""A segment's aborted-transaction index (``NNNNNNNNNNNNNNNNNNNN.txnindex``): ``TransactionIndex``.

    TransactionIndex => AbortedTxn*       (no header, no preallocation; base offset in the name)
      AbortedTxn     => Version:int16 ProducerId:int64 FirstOffset:int64 LastOffset:int64
                        LastStableOffset:int64                     (big-endian, 34 bytes)
        Version          => 0 (AbortedTxn.CURRENT_VERSION)
        FirstOffset      => first offset of the aborted transaction
        LastOffset       => offset of its ABORT marker
        LastStableOffset => the partition's LSO when the marker was written

Consumers in read_committed mode use it to skip aborted data; ``LogSegment.updateTxnIndex``
appends one entry per ABORT marker, in marker order.

What Kafka misses (golden MANIFEST surprise 6): ``TransactionIndex`` iterates while at least
34 bytes remain, so a torn last entry is silently ignored and a file shorter than 34 bytes
reads as "no aborted transactions", with no error, and read_committed consumers then see the
aborted data as committed. We return every complete entry and report the torn bytes.

Checks, as ``txnindex_mismatch`` problems (``position`` = byte offset in the .txnindex):
  * mirrored: version <= 0 ("Unexpected aborted transaction version"); last offset >= the
    segment's base offset (``TransactionIndex.sanityCheck``);
  * stricter: the length is a multiple of 34; version exactly 0; last offset >= first offset;
    last offsets strictly increasing (``TransactionIndex.append`` refuses anything else).
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from .common import Parsed, Problem, problems_at, problems_table
from .names import base_offset_from_name

ENTRY_DTYPE = np.dtype(
    [
        ("version", ">i2"),
        ("producer_id", ">i8"),
        ("first_offset", ">i8"),
        ("last_offset", ">i8"),
        ("last_stable_offset", ">i8"),
    ]
)
ENTRY_SIZE = ENTRY_DTYPE.itemsize  # 34, AbortedTxn.TOTAL_SIZE
CURRENT_VERSION = 0  # AbortedTxn.CURRENT_VERSION
PROBLEM_KIND = "txnindex_mismatch"

SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("slot", pa.int32()),  # entry number n; its bytes start at n * 34
        pa.field("version", pa.int16()),
        pa.field("producer_id", pa.int64()),
        pa.field("first_offset", pa.int64()),
        pa.field("last_offset", pa.int64()),
        pa.field("last_stable_offset", pa.int64()),
    ]
)


def parse(data: bytes | memoryview, path: str, base_offset: int | None = None) -> Parsed:
    """Decode a transaction index; never raises. ``base_offset`` defaults to the file name's."""
    if base_offset is None:
        base_offset = base_offset_from_name(os.path.basename(path))
    size = len(data)
    n = size // ENTRY_SIZE
    entries = np.frombuffer(bytes(data[: n * ENTRY_SIZE]), dtype=ENTRY_DTYPE)
    table = pa.table(
        {
            "path": pa.array([path] * n, pa.string()),
            "slot": pa.array(np.arange(n, dtype=np.int32)),
            "version": pa.array(entries["version"].astype(np.int16)),
            "producer_id": pa.array(entries["producer_id"].astype(np.int64)),
            "first_offset": pa.array(entries["first_offset"].astype(np.int64)),
            "last_offset": pa.array(entries["last_offset"].astype(np.int64)),
            "last_stable_offset": pa.array(entries["last_stable_offset"].astype(np.int64)),
        },
        schema=SCHEMA,
    )
    problems = sanity_check(table, 0 if base_offset is None else base_offset, size)
    return Parsed(table, problems_table(path, problems))


def sanity_check(table: pa.Table, base_offset: int, length: int) -> list[Problem]:
    """``TransactionIndex.sanityCheck`` and the append-time rules, over every entry."""
    problems: list[Problem] = []
    torn = length % ENTRY_SIZE
    if torn:
        whole = length // ENTRY_SIZE
        problems.append(
            Problem(
                length - torn,
                PROBLEM_KIND,
                f"{length} bytes, not a multiple of {ENTRY_SIZE}: the last {torn} bytes are a"
                f" partial aborted transaction, which Kafka silently ignores"
                + (" (so it reads this index as empty)" if whole == 0 else ""),
            )
        )
    if table.num_rows == 0:
        return problems
    slot = table["slot"].to_numpy()
    version = table["version"].to_numpy()
    pid = table["producer_id"].to_numpy()
    first = table["first_offset"].to_numpy()
    last = table["last_offset"].to_numpy()

    def txn(i: int) -> str:
        return f"aborted txn {slot[i]} (producerId {pid[i]}, firstOffset {first[i]}, lastOffset {last[i]})"

    def at(i: int) -> int:
        return int(slot[i]) * ENTRY_SIZE

    problems += problems_at(
        np.flatnonzero(version != CURRENT_VERSION),
        at,
        PROBLEM_KIND,
        lambda i: f"Unexpected aborted transaction version {version[i]}, current version is"
        f" {CURRENT_VERSION}: {txn(i)}",
    )
    problems += problems_at(
        np.flatnonzero(last < base_offset),
        at,
        PROBLEM_KIND,
        lambda i: f"Last offset of {txn(i)} is less than start offset {base_offset}",
    )
    problems += problems_at(np.flatnonzero(last < first), at, PROBLEM_KIND, lambda i: f"{txn(i)} ends before it starts")
    if last.size >= 2:
        problems += problems_at(
            np.flatnonzero(last[1:] <= last[:-1]) + 1,
            at,
            PROBLEM_KIND,
            lambda i: f"The last offset of appended transactions must increase sequentially, but"
            f" {last[i]} is not greater than the previous last offset {last[i - 1]}: {txn(i)}",
        )
    problems.sort(key=lambda p: p.position)
    return problems
