"""Batch and message header layouts, from one place: NumPy structured dtypes with Kafka's field
names (snake_case), every offset and size derived from them (as kafka-python derives its own
with ``struct.calcsize``), and ``H``, the columns of the header matrix ``_kernels.read_headers``
fills.

A leaf module: the kernels are compiled against these constants and the format modules
(``default_records``, ``legacy_records``, ``segment``) read them too, so it imports neither.

    Log entry (every format) => Offset Int64, Size Int32 (bytes after this field)
    DefaultRecordBatch (v2)  => see ``DEFAULT_RECORD_BATCH``; CRC-32C from attributes to the end
    LegacyRecord (v0/v1)     => see ``LEGACY_RECORD_V0`` / ``_V1``; CRC-32 from magic to the end;
                                then Key (Int32 length + bytes), Value (Int32 length + bytes)
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

LOG_ENTRY = np.dtype([("offset", ">i8"), ("size", ">i4")])

# DefaultRecordBatch (Kafka >= 0.11), RECORD_BATCH_OVERHEAD = 61 bytes before the records
DEFAULT_RECORD_BATCH = np.dtype([
    ("base_offset", ">i8"), ("batch_length", ">i4"), ("partition_leader_epoch", ">i4"), ("magic", "i1"), ("crc", ">u4"),
    ("attributes", ">i2"), ("last_offset_delta", ">i4"), ("base_timestamp", ">i8"), ("max_timestamp", ">i8"),
    ("producer_id", ">i8"), ("producer_epoch", ">i2"), ("base_sequence", ">i4"), ("records_count", ">i4"),
])

# LegacyRecord up to the key length (LegacyRecord.RECORD_OVERHEAD_V0/V1 add the value length)
LEGACY_RECORD_V0 = np.dtype([("offset", ">i8"), ("size", ">i4"), ("crc", ">u4"), ("magic", "i1"), ("attributes", "i1"),
                             ("key_length", ">i4")])
LEGACY_RECORD_V1 = np.dtype([("offset", ">i8"), ("size", ">i4"), ("crc", ">u4"), ("magic", "i1"), ("attributes", "i1"),
                             ("timestamp", ">i8"), ("key_length", ">i4")])


def offset_of(layout: np.dtype, field: str) -> int:
    return layout.fields[field][1]


LOG_OVERHEAD = LOG_ENTRY.itemsize  # 12
OFFSET_OFFSET = offset_of(LOG_ENTRY, "offset")
SIZE_OFFSET = offset_of(LOG_ENTRY, "size")
MAGIC_OFFSET = offset_of(DEFAULT_RECORD_BATCH, "magic")  # 16 in every format: segment.py dispatches on it
assert MAGIC_OFFSET == offset_of(LEGACY_RECORD_V0, "magic") == offset_of(LEGACY_RECORD_V1, "magic")
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + 1  # FileLogInputStream

V2_HEADER_SIZE = DEFAULT_RECORD_BATCH.itemsize  # DefaultRecordBatch.RECORD_BATCH_OVERHEAD
V2_PARTITION_LEADER_EPOCH = offset_of(DEFAULT_RECORD_BATCH, "partition_leader_epoch")
V2_CRC = offset_of(DEFAULT_RECORD_BATCH, "crc")
V2_ATTRIBUTES = offset_of(DEFAULT_RECORD_BATCH, "attributes")  # the CRC-32C covers from here to the end
V2_LAST_OFFSET_DELTA = offset_of(DEFAULT_RECORD_BATCH, "last_offset_delta")
V2_BASE_TIMESTAMP = offset_of(DEFAULT_RECORD_BATCH, "base_timestamp")
V2_MAX_TIMESTAMP = offset_of(DEFAULT_RECORD_BATCH, "max_timestamp")
V2_PRODUCER_ID = offset_of(DEFAULT_RECORD_BATCH, "producer_id")
V2_PRODUCER_EPOCH = offset_of(DEFAULT_RECORD_BATCH, "producer_epoch")
V2_BASE_SEQUENCE = offset_of(DEFAULT_RECORD_BATCH, "base_sequence")
V2_RECORDS_COUNT = offset_of(DEFAULT_RECORD_BATCH, "records_count")

VALUE_LENGTH_SIZE = 4
LEGACY_CRC = offset_of(LEGACY_RECORD_V0, "crc")
LEGACY_ATTRIBUTES = offset_of(LEGACY_RECORD_V0, "attributes")
LEGACY_TIMESTAMP = offset_of(LEGACY_RECORD_V1, "timestamp")  # v1 only; v0 has the key length here
KEY_LENGTH_OFFSET = {0: offset_of(LEGACY_RECORD_V0, "key_length"), 1: offset_of(LEGACY_RECORD_V1, "key_length")}
RECORD_OVERHEAD_V0 = LEGACY_RECORD_V0.itemsize - LOG_OVERHEAD + VALUE_LENGTH_SIZE  # LegacyRecord.RECORD_OVERHEAD_V0 = 14
RECORD_OVERHEAD_V1 = LEGACY_RECORD_V1.itemsize - LOG_OVERHEAD + VALUE_LENGTH_SIZE  # 22


class H(IntEnum):
    """Columns of the int64 header matrix (one row per batch or message) ``read_headers`` fills."""

    BASE_OFFSET = 0  # v0/v1: the message's offset (a wrapper's: its last inner offset)
    PARTITION_LEADER_EPOCH = 1  # -1 before v2
    MAGIC = 2
    CRC = 3  # as stored (unsigned)
    ATTRIBUTES = 4
    LAST_OFFSET_DELTA = 5  # 0 before v2
    BASE_TIMESTAMP = 6  # v1: the message timestamp; v0: -1
    MAX_TIMESTAMP = 7
    PRODUCER_ID = 8
    PRODUCER_EPOCH = 9
    BASE_SEQUENCE = 10
    RECORDS_COUNT = 11  # 1 before v2
    COMPUTED_CRC = 12  # -1: not computed here (big batch: the caller uses the hardware CRC)
    KEY_LENGTH = 13  # v0/v1 only; -2 when it does not fit
    VALUE_POSITION = 14  # v2: where the records start
    VALUE_LENGTH = 15  # v2: the records' bytes; v0/v1: -2 does not fit, -3 trailing bytes


HEADER_COLUMNS = len(H)


class R(IntEnum):
    """Columns of the int64 record matrix (one row per v2 record) ``_kernels.decode_v2`` fills."""

    BATCH = 0  # the batch's index among those decoded together
    OFFSET = 1  # base offset + offset delta
    TIMESTAMP = 2  # base timestamp + delta, or the batch's max timestamp under LOG_APPEND_TIME
    POSITION = 3  # where the record starts (its length varint)
    KEY_POSITION = 4
    KEY_LENGTH = 5  # -1: null key
    VALUE_POSITION = 6
    VALUE_LENGTH = 7  # -1: null value
    HEADERS = 8  # the record's header count
    HEADERS_POSITION = 9  # where its headers' bytes start
    HEADERS_LENGTH = 10


RECORD_COLUMNS = len(R)


# The batch hop's stop codes (``_kernels.scan``): here so the driver can read a span's stop
# (``segment.Span``) without loading the kernels.
STOP_END = 0  # reached the end exactly at a batch boundary
STOP_SHORT = 1  # fewer than HEADER_SIZE_UP_TO_MAGIC + 1 bytes left: Kafka stops silently
STOP_BAD_SIZE = 2  # size < RECORD_OVERHEAD_V0: Kafka throws CorruptRecordException
STOP_PAST_EOF = 3  # batch runs past the end: Kafka stops silently (a torn tail)
STOP_LIMIT = 4  # the caller's chunk limit was reached; more batches follow

# The v2 record decoder's per-batch error codes (``_kernels.decode_v2`` reports them,
# ``default_records`` words them): here so that wording them does not load the kernels.
ERR_NONE = 0
ERR_VARINT = 1  # varint longer than Kafka allows
ERR_BOUNDS = 2  # a length runs past the end of the batch
ERR_RECORD_SIZE = 3  # record length disagrees with the fields read
ERR_NEGATIVE = 4  # negative length where Kafka forbids it
ERR_COUNT = 5  # fewer records than the header's count, or bytes left over
ERR_TOO_MANY = 6  # output capacity exhausted (count larger than the bytes can hold)
