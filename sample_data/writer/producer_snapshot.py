"""Producer-state snapshots (``NNNNNNNNNNNNNNNNNNNN.snapshot``): ``ProducerStateManager.writeSnapshot``.

    ProducerSnapshot => Version:int16=1 Crc:uint32 ProducerEntries:[ProducerEntry]
      Crc            => CRC-32C of every byte after the Crc field
      ProducerEntry  => ProducerId:int64 Epoch:int16 LastSequence:int32 LastOffset:int64
                        OffsetDelta:int32 Timestamp:int64 CoordinatorEpoch:int32
                        CurrentTxnFirstOffset:int64 (-1 = no open transaction)

Kafka writes its ``HashMap<Long, ProducerStateEntry>`` in that map's iteration order;
``java_hashmap_order`` reproduces it, so a snapshot built from the same producers is the same
bytes as the broker's.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

import crc32c

PRODUCER_SNAPSHOT_VERSION = 1
NO_TXN_FIRST_OFFSET = -1
NO_COORDINATOR_EPOCH = -1  # RecordBatch.NO_PARTITION_LEADER_EPOCH, ProducerStateEntry's default
HEADER = struct.Struct(">hI")  # version, crc
COUNT = struct.Struct(">i")
ENTRY = struct.Struct(">qhiqiqiq")
CRC_START = HEADER.size  # 6
HASHMAP_INITIAL_CAPACITY = 16
HASHMAP_LOAD_FACTOR = 0.75


@dataclass(frozen=True)
class ProducerEntry:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    current_txn_first_offset: int = NO_TXN_FIRST_OFFSET


def producer_snapshot_bytes(entries: list[ProducerEntry]) -> bytes:
    body = COUNT.pack(len(entries)) + b"".join(
        ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        for e in entries
    )
    return HEADER.pack(PRODUCER_SNAPSHOT_VERSION, crc32c.crc32c(body)) + body


def _java_long_hash(v: int) -> int:
    """Long.hashCode spread by HashMap.hash: (int)(v ^ v>>>32), then h ^ h>>>16 (unsigned 32 bits)."""
    u = v & 0xFFFFFFFFFFFFFFFF
    h = (u ^ (u >> 32)) & 0xFFFFFFFF
    return h ^ (h >> 16)


def java_hashmap_order(keys: Iterable[int]) -> list[int]:
    """Iteration order of a java.util.HashMap<Long, ...> after inserting ``keys`` in this order
    (no removals): by bucket index in the final table, then insertion order within a bucket
    (resizes split buckets but keep that relative order)."""
    keys = list(dict.fromkeys(keys))
    capacity = HASHMAP_INITIAL_CAPACITY
    while len(keys) > capacity * HASHMAP_LOAD_FACTOR:
        capacity *= 2
    order = {k: i for i, k in enumerate(keys)}
    return sorted(keys, key=lambda k: (_java_long_hash(k) & (capacity - 1), order[k]))
