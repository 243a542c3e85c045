"""A partition's producer-state snapshot (``NNNNNNNNNNNNNNNNNNNN.snapshot``): ``ProducerStateManager``.

    ProducerSnapshot => Version:int16 Crc:uint32 ProducerEntries:[ProducerEntry]   (big-endian)
      Version        => 1 (PRODUCER_SNAPSHOT_VERSION; the only version Kafka 0.11 .. 4.x wrote)
      Crc            => CRC-32C of every byte after the Crc field (offset 6 to the end)
      [ProducerEntry]=> Count:int32 (-1 = null) then Count entries of 46 bytes:
        ProducerId:int64 Epoch:int16 LastSequence:int32 LastOffset:int64 OffsetDelta:int32
        Timestamp:int64 CoordinatorEpoch:int32 CurrentTxnFirstOffset:int64
    The file name is the offset the snapshot was taken at (the log end offset then).

Why it matters: on restart the broker loads the latest snapshot instead of re-reading the
whole log to rebuild idempotence and transaction state, so a snapshot holds each producer's
last sequence (duplicate detection) and any open transaction (``current_txn_first_offset``).

Mirrors ``ProducerStateManager.readSnapshot``: schema read (a short file or a bad array count
is "Snapshot failed schema validation"), then the version, then the CRC ("Snapshot is corrupt
(CRC is no longer valid). Stored crc: … Computed crc: …"). Kafka deletes such a snapshot and
falls back to an older one or to the log; we report ``producer_snapshot_corrupt`` (a kind
added to the contract's vocabulary: no existing kind names producer state) and still decode
every entry whose bytes are present, as evidence. Stricter: bytes after the last entry
(which Kafka's schema reader ignores, as long as the CRC covers them) are reported too.

A 0-byte snapshot is not a problem: the broker was killed right after creating it at a roll
(it writes the file, then its content), and Kafka ignores such a file the same way it ignores
any unreadable snapshot. It yields 0 entries.

Columns follow Kafka's ``ProducerStateEntry``: ``last_offset`` is ``lastDataOffset``,
``timestamp`` is ``lastTimestamp``, ``first_sequence`` is derived as Kafka does
(``lastSeq - offsetDelta``, wrapping at Integer.MAX_VALUE), and ``current_txn_first_offset``
is null when no transaction is open (stored as -1). When the stored last offset is negative
(a producer known only from a marker) Kafka keeps no batch metadata: the sequences read -1.
"""

from __future__ import annotations

import os
import struct

import crc32c
import numpy as np
import pyarrow as pa

from .common import Parsed, Problem, empty_table, problems_table
from .names import base_offset_from_name

HEADER = struct.Struct(">hIi")  # version, crc, producer entry count
VERSION_OFFSET = 0
CRC_OFFSET = VERSION_OFFSET + 2
PRODUCER_ENTRIES_OFFSET = CRC_OFFSET + 4  # the CRC covers everything from here on
COUNT_OFFSET = PRODUCER_ENTRIES_OFFSET
ENTRIES_OFFSET = COUNT_OFFSET + 4
PRODUCER_SNAPSHOT_VERSION = 1
NO_SEQUENCE = -1  # RecordBatch.NO_SEQUENCE
INT_MAX = (1 << 31) - 1
PROBLEM_KIND = "producer_snapshot_corrupt"

ENTRY_DTYPE = np.dtype(
    [
        ("producer_id", ">i8"),
        ("producer_epoch", ">i2"),
        ("last_sequence", ">i4"),
        ("last_offset", ">i8"),
        ("offset_delta", ">i4"),
        ("timestamp", ">i8"),
        ("coordinator_epoch", ">i4"),
        ("current_txn_first_offset", ">i8"),
    ]
)
ENTRY_SIZE = ENTRY_DTYPE.itemsize  # 46

SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("snapshot_offset", pa.int64()),  # from the file name
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int16()),
        pa.field("last_sequence", pa.int32()),
        pa.field("first_sequence", pa.int32()),
        pa.field("last_offset", pa.int64()),  # lastDataOffset
        pa.field("offset_delta", pa.int32()),  # lastOffsetDelta
        pa.field("timestamp", pa.int64()),  # lastTimestamp (ms)
        pa.field("coordinator_epoch", pa.int32()),
        pa.field("current_txn_first_offset", pa.int64()),  # null: no open transaction
    ]
)


def parse(data: bytes | memoryview, path: str) -> Parsed:
    """Decode a producer snapshot; never raises."""
    raw = bytes(data)
    snapshot_offset = base_offset_from_name(os.path.basename(path))
    problems: list[Problem] = []
    if not raw:
        return Parsed(empty_table(SCHEMA), problems_table(path, problems))
    if len(raw) < HEADER.size:
        field = "version" if len(raw) < CRC_OFFSET else ("crc" if len(raw) < COUNT_OFFSET else "producer_entries")
        problems.append(
            Problem(
                0,
                PROBLEM_KIND,
                f"Snapshot failed schema validation: Error reading field '{field}':"
                f" only {len(raw)} bytes, the header needs {HEADER.size}",
            )
        )
        return Parsed(empty_table(SCHEMA), problems_table(path, problems))

    version, stored_crc, count = HEADER.unpack_from(raw, 0)
    available = (len(raw) - ENTRIES_OFFSET) // ENTRY_SIZE
    if count < 0:
        problems.append(
            Problem(
                COUNT_OFFSET,
                PROBLEM_KIND,
                f"Snapshot failed schema validation: producer entry count {count} is negative"
                + (" (a null array: Kafka then fails with a NullPointerException)" if count == -1 else ""),
            )
        )
        n = 0
    elif count > available:
        problems.append(
            Problem(
                ENTRIES_OFFSET + available * ENTRY_SIZE,
                PROBLEM_KIND,
                f"Snapshot failed schema validation: {count} producer entries announced,"
                f" {len(raw) - ENTRIES_OFFSET} bytes hold only {available} whole entries"
                f" ({ENTRY_SIZE} bytes each): truncated",
            )
        )
        n = available
    else:
        n = count
        end = ENTRIES_OFFSET + n * ENTRY_SIZE
        if end < len(raw):
            problems.append(
                Problem(
                    end,
                    PROBLEM_KIND,
                    f"{len(raw) - end} bytes after the last of {n} producer entries (Kafka's reader"
                    " ignores them if the CRC covers them)",
                )
            )
    if version != PRODUCER_SNAPSHOT_VERSION:
        problems.append(
            Problem(VERSION_OFFSET, PROBLEM_KIND, f"Snapshot contained an unknown file version {version}")
        )
    computed_crc = crc32c.crc32c(raw[PRODUCER_ENTRIES_OFFSET:])
    if computed_crc != stored_crc:
        problems.append(
            Problem(
                CRC_OFFSET,
                PROBLEM_KIND,
                f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored_crc}"
                f" (0x{stored_crc:08x}). Computed crc: {computed_crc} (0x{computed_crc:08x})",
            )
        )

    table = entries_table(raw[ENTRIES_OFFSET : ENTRIES_OFFSET + n * ENTRY_SIZE], path, snapshot_offset)
    problems.sort(key=lambda p: p.position)
    return Parsed(table, problems_table(path, problems))


def entries_table(buf: bytes, path: str, snapshot_offset: int | None) -> pa.Table:
    """Vectorised decode of the 46-byte producer entries."""
    e = np.frombuffer(buf, dtype=ENTRY_DTYPE)
    n = e.size
    last_offset = e["last_offset"].astype(np.int64)
    has_batch = last_offset >= 0  # readSnapshot: batch metadata only when offset >= 0
    last_seq = e["last_sequence"].astype(np.int64)
    delta = e["offset_delta"].astype(np.int64)
    # DefaultRecordBatch.decrementSequence(lastSeq, offsetDelta)
    first_seq = np.where(last_seq < delta, INT_MAX - (delta - last_seq) + 1, last_seq - delta)
    first_seq = np.where(has_batch, first_seq, NO_SEQUENCE)
    txn_first = e["current_txn_first_offset"].astype(np.int64)
    return pa.Table.from_arrays(
        [
            pa.array([path] * n, pa.string()),
            pa.array([snapshot_offset] * n, pa.int64()),
            pa.array(e["producer_id"].astype(np.int64)),
            pa.array(e["producer_epoch"].astype(np.int16)),
            pa.array(np.where(has_batch, last_seq, NO_SEQUENCE).astype(np.int32)),
            pa.array(first_seq.astype(np.int32, casting="unsafe")),
            pa.array(last_offset),
            pa.array(delta.astype(np.int32)),
            pa.array(e["timestamp"].astype(np.int64)),
            pa.array(e["coordinator_epoch"].astype(np.int32)),
            pa.array(txn_first, mask=txn_first < 0),
        ],
        schema=SCHEMA,  # (in its order: path, snapshot_offset, producer_id, ... current_txn_first_offset)
    )
