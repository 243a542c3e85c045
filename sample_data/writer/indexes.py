"""Segment index files: ``OffsetIndex``, ``TimeIndex`` and ``TransactionIndex``.

    OffsetIndex (.index)        => [RelativeOffset:int32 Position:int32]            8 bytes/entry
    TimeIndex (.timeindex)      => [Timestamp:int64 RelativeOffset:int32]           12 bytes/entry
    TransactionIndex (.txnindex)=> [Version:int16=0 ProducerId:int64 FirstOffset:int64
                                    LastOffset:int64 LastStableOffset:int64]        34 bytes/entry
    RelativeOffset = absolute offset - the segment's base offset.

An active segment's offset and time indexes are memory-mapped files preallocated to
``segment.index.bytes`` (rounded down to a whole entry, ``AbstractIndex``) and trimmed to their
entries only when the segment is rolled or closed; a killed broker leaves them zero-padded.
``preallocate_to`` reproduces that padding; ``log.write_partition`` writes it sparse.
"""

from __future__ import annotations

import struct

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")
TXN_ENTRY = struct.Struct(">hqqqq")
OFFSET_ENTRY_SIZE = OFFSET_ENTRY.size  # 8
TIME_ENTRY_SIZE = TIME_ENTRY.size  # 12
TXN_ENTRY_SIZE = TXN_ENTRY.size  # 34
ABORTED_TXN_VERSION = 0  # AbortedTxn.CURRENT_VERSION


def preallocated_size(max_index_bytes: int, entry_size: int) -> int:
    """AbstractIndex: the mmap length is segment.index.bytes rounded down to a whole entry."""
    return max_index_bytes - max_index_bytes % entry_size


def _relative(base_offset: int, offset: int) -> int:
    rel = offset - base_offset
    if not 0 <= rel <= 0x7FFFFFFF:
        raise ValueError(f"offset {offset} cannot be stored relative to base offset {base_offset}")
    return rel


def _pad(data: bytes, preallocate_to: int, entry_size: int) -> bytes:
    size = preallocated_size(preallocate_to, entry_size)
    return data + bytes(size - len(data)) if size > len(data) else data


def offset_index_bytes(base_offset: int, entries: list[tuple[int, int]], preallocate_to: int = 0) -> bytes:
    """Entries are (absolute offset, byte position in the .log)."""
    data = b"".join(OFFSET_ENTRY.pack(_relative(base_offset, o), p) for o, p in entries)
    return _pad(data, preallocate_to, OFFSET_ENTRY_SIZE)


def time_index_bytes(base_offset: int, entries: list[tuple[int, int]], preallocate_to: int = 0) -> bytes:
    """Entries are (timestamp ms, absolute offset)."""
    data = b"".join(TIME_ENTRY.pack(t, _relative(base_offset, o)) for t, o in entries)
    return _pad(data, preallocate_to, TIME_ENTRY_SIZE)


def txn_index_bytes(entries: list[tuple[int, int, int, int]]) -> bytes:
    """Entries are (producer_id, first_offset, last_offset, last_stable_offset) of aborted transactions."""
    return b"".join(TXN_ENTRY.pack(ABORTED_TXN_VERSION, *e) for e in entries)
