"""Record batches as Kafka writes them: ``DefaultRecordBatch`` (v2) and ``LegacyRecord`` (v0/v1).

    RecordBatch (v2) => BaseOffset:int64 BatchLength:int32 PartitionLeaderEpoch:int32 Magic:int8=2
                        Crc:uint32 Attributes:int16 LastOffsetDelta:int32 BaseTimestamp:int64
                        MaxTimestamp:int64 ProducerId:int64 ProducerEpoch:int16 BaseSequence:int32
                        Records:[Record]   (count:int32, then the records, maybe compressed)
      Crc        => CRC-32C of Attributes .. end of batch
      Attributes => bits 0-2 codec, 3 timestampType (1 = LOG_APPEND_TIME), 4 isTransactional, 5 isControl
    Record       => Length:varint Attributes:int8=0 TimestampDelta:varlong OffsetDelta:varint
                    KeyLength:varint Key ValueLength:varint Value Headers:[varint count]
                    Header => KeyLength:varint Key(utf8) ValueLength:varint Value   (-1 = null)
    Control record (EndTransactionMarker) => key Version:int16=0 Type:int16 (0 abort, 1 commit),
                    value Version:int16=0 CoordinatorEpoch:int32

    LegacyRecord (v0/v1) => Offset:int64 MessageSize:int32 Crc:uint32 Magic:int8 Attributes:int8
                    [Timestamp:int64 (v1)] Key:bytes(int32 length) Value:bytes(int32 length)
      Crc        => CRC-32 (IEEE) of Magic .. end
      compressed => one wrapper message whose value holds the inner messages; the wrapper's
                    offset is the LAST inner offset; inner offsets are absolute (v0) or 0..n-1 (v1)

Why the spec is this explicit (base/max timestamp, last offset delta): it must be able to say
everything a real batch says, including what the log cleaner leaves behind (an empty batch that
still spans offsets, with base timestamp -1) and compaction holes (explicit ``offset_delta``),
so that re-encoding a decoded batch gives back the same bytes, CRC included.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from functools import cached_property

import crc32c

from .compression import codec_id, compress

MAGIC_V0, MAGIC_V1, MAGIC_V2 = 0, 1, 2
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1
INT_MAX = (1 << 31) - 1
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
TIMESTAMP_TYPES = ("create", "log_append")
CONTROL_TYPES = {"abort": 0, "commit": 1}  # ControlRecordType
CONTROL_RECORD_VERSION = 0
END_TXN_MARKER_VERSION = 0

# DefaultRecordBatch header, split where the CRC starts covering it
BATCH_HEAD = struct.Struct(">qiibI")  # base_offset batch_length partition_leader_epoch magic crc
BATCH_TAIL = struct.Struct(
    ">hiqqqhii"
)  # attributes last_offset_delta base_timestamp max_timestamp producer_id producer_epoch base_sequence records_count
LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes batch_length does not count
RECORD_BATCH_OVERHEAD = BATCH_HEAD.size + BATCH_TAIL.size  # 61
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = BATCH_HEAD.size  # 21: the CRC covers from here to the end

LEGACY_HEAD = struct.Struct(">qiIbb")  # offset message_size crc magic attributes
LEGACY_CRC_START = 16  # magic: CRC-32 covers from here on
_INT16_PAIR = struct.Struct(">hh")
_INT16_INT32 = struct.Struct(">hi")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


def varint(n: int) -> bytes:
    """Zig-zag LEB128, as ``ByteUtils.writeVarint``/``writeVarlong``."""
    z = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _sized(b: bytes | None) -> bytes:
    return varint(-1) if b is None else varint(len(b)) + b


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None
    timestamp: int  # ms; for LOG_APPEND_TIME batches the producer's time, which the record still stores
    headers: tuple[tuple[str, bytes | None], ...] = ()
    offset_delta: int | None = None  # None = position in the batch; set explicitly to leave compaction holes


def control_record(control: str, coordinator_epoch: int, timestamp: int, marker_version: int = END_TXN_MARKER_VERSION,
                   marker_tail: bytes = b"") -> Record:
    """The single record of a transaction marker batch (``EndTransactionMarker``). Kafka up to 4.4
    writes value version 0 only; ``marker_version``/``marker_tail``: a later version's value, which
    ``EndTransactionMarker.deserializeValue`` reads as its highest known version (the coordinator
    epoch, the rest ignored)."""
    key = _INT16_PAIR.pack(CONTROL_RECORD_VERSION, CONTROL_TYPES[control])
    value = _INT16_INT32.pack(marker_version, coordinator_epoch) + marker_tail
    return Record(key, value, timestamp)


@dataclass(frozen=True)
class BatchSpec:
    base_offset: int
    records: tuple[Record, ...]
    partition_leader_epoch: int = 0
    codec: str = "none"  # none|gzip|snappy|lz4|zstd
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    is_transactional: bool = False
    control: str | None = None  # None, "commit" or "abort": a marker batch with one control record
    coordinator_epoch: int = 0
    marker_version: int = END_TXN_MARKER_VERSION  # a control batch's EndTransactionMarker value version ...
    marker_tail: bytes = b""  # ... and the bytes a later version adds (see control_record)
    timestamp_type: str = "create"  # create|log_append
    log_append_time: int | None = None
    # Overrides for batches no producer writes but the broker leaves behind (the cleaner's empty
    # batch: no records, base timestamp -1, still spanning its offsets). None = derived.
    last_offset_delta: int | None = None
    base_timestamp: int | None = None
    max_timestamp: int | None = None  # also the marker's timestamp when a control batch has no records
    # The records section exactly as stored (already compressed), to reproduce another writer's
    # compressed bytes; None = encode ``records`` and compress them with ``codec``.
    stored_payload: bytes | None = None
    # MAGIC_V2: a DefaultRecordBatch. MAGIC_V0/V1: the message set a pre-0.11 producer and broker
    # wrote (``encode_legacy_message_set``): no leader epoch, producer id, sequence, transaction,
    # control record or header; one message per record, or one wrapper message when compressed.
    magic: int = MAGIC_V2

    def __post_init__(self) -> None:
        codec_id(self.codec)
        if self.magic != MAGIC_V2:
            self._check_legacy()
        if self.timestamp_type not in TIMESTAMP_TYPES:
            raise ValueError(f"timestamp_type must be one of {TIMESTAMP_TYPES}, not {self.timestamp_type!r}")
        if self.control is not None and self.control not in CONTROL_TYPES:
            raise ValueError(f"control must be None, 'commit' or 'abort', not {self.control!r}")
        if self.timestamp_type == "log_append" and self.log_append_time is None and self.max_timestamp is None:
            raise ValueError("a log_append batch needs log_append_time")
        if self.control is not None and not self.records and self.max_timestamp is None:
            raise ValueError("a control batch without records needs max_timestamp (the marker's timestamp)")

    def _check_legacy(self) -> None:
        """Refuse what a v0/v1 message set cannot hold, rather than silently drop it."""
        if self.magic not in (MAGIC_V0, MAGIC_V1):
            raise ValueError(f"magic must be 0, 1 or 2, not {self.magic}")
        v2_only = {
            "a partition leader epoch": self.partition_leader_epoch != NO_PARTITION_LEADER_EPOCH,
            "a producer id": self.producer_id != NO_PRODUCER_ID or self.producer_epoch != NO_PRODUCER_EPOCH,
            "a sequence": self.base_sequence != NO_SEQUENCE,
            "a transaction or control record": self.is_transactional or self.control is not None,
            "headers or offset gaps": any(r.headers or r.offset_delta is not None for r in self.records),
            "a stored v2 payload or header overrides": self.stored_payload is not None
            or self.last_offset_delta is not None
            or self.base_timestamp is not None
            or self.max_timestamp is not None,
            "records": not self.records,
        }
        bad = [what for what, present in v2_only.items() if present]
        if bad:
            raise ValueError(f"a magic {self.magic} message set cannot hold {', '.join(bad)}")

    @property
    def offset_of_max_timestamp(self) -> int:
        """The offset the time index names for this batch (LogSegment's shallowOffsetOfMaxTimestamp):
        the batch's last offset, but an uncompressed v0/v1 message set's messages are each a batch
        of their own, so there it is the message holding the max timestamp."""
        if self.magic == MAGIC_V2 or self.codec != "none":
            return self.last_offset
        stamps = [r.timestamp for r in self.records]
        return self.base_offset + stamps.index(max(stamps))

    @cached_property
    def wire_records(self) -> tuple[Record, ...]:
        """The records as stored: for a control batch, the one marker record."""
        if self.control is None:
            return self.records
        ts = self.records[0].timestamp if self.records else self.max_timestamp
        return (control_record(self.control, self.coordinator_epoch, ts, self.marker_version, self.marker_tail),)

    @cached_property
    def offset_deltas(self) -> tuple[int, ...]:
        return tuple(i if r.offset_delta is None else r.offset_delta for i, r in enumerate(self.wire_records))

    @property
    def record_count(self) -> int:
        return len(self.wire_records)

    @property
    def computed_last_offset_delta(self) -> int:
        if self.last_offset_delta is not None:
            return self.last_offset_delta
        return max(self.offset_deltas) if self.offset_deltas else 0

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.computed_last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def computed_base_timestamp(self) -> int:
        """MemoryRecordsBuilder: the first record's timestamp (-1 when there is none)."""
        if self.base_timestamp is not None:
            return self.base_timestamp
        return self.wire_records[0].timestamp if self.wire_records else NO_TIMESTAMP

    @property
    def computed_max_timestamp(self) -> int:
        """The header's maxTimestamp: the log append time, else the largest record timestamp."""
        if self.max_timestamp is not None:
            return self.max_timestamp
        if self.timestamp_type == "log_append":
            return self.log_append_time
        return max((r.timestamp for r in self.wire_records), default=NO_TIMESTAMP)

    @property
    def is_control(self) -> bool:
        return self.control is not None

    @property
    def attributes(self) -> int:
        attrs = codec_id(self.codec)
        if self.timestamp_type == "log_append":
            attrs |= TIMESTAMP_TYPE_MASK
        if self.is_transactional or self.is_control:
            attrs |= TRANSACTIONAL_MASK
        if self.is_control:
            attrs |= CONTROL_MASK
        return attrs

    @property
    def last_sequence(self) -> int:
        """DefaultRecordBatch.lastSequence: base + last offset delta, wrapping past Integer.MAX_VALUE."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.computed_last_offset_delta)


def increment_sequence(sequence: int, increment: int) -> int:
    if sequence > INT_MAX - increment:
        return increment - (INT_MAX - sequence) - 1
    return sequence + increment


def encode_record(record: Record, offset_delta: int, base_timestamp: int) -> bytes:
    body = [b"\x00", varint(record.timestamp - base_timestamp), varint(offset_delta), _sized(record.key), _sized(record.value)]
    body.append(varint(len(record.headers)))
    for hkey, hvalue in record.headers:
        body += (_sized(hkey.encode("utf-8")), _sized(hvalue))
    raw = b"".join(body)
    return varint(len(raw)) + raw


def encode_records(spec: BatchSpec) -> bytes:
    """The uncompressed records section (without the count, which sits in the header)."""
    base_ts = spec.computed_base_timestamp
    return b"".join(encode_record(r, d, base_ts) for r, d in zip(spec.wire_records, spec.offset_deltas))


def assemble_batch(spec: BatchSpec, payload: bytes) -> bytes:
    """Header + ``payload`` (records as stored), CRC-32C computed over attributes .. end."""
    tail = BATCH_TAIL.pack(
        spec.attributes,
        spec.computed_last_offset_delta,
        spec.computed_base_timestamp,
        spec.computed_max_timestamp,
        spec.producer_id,
        spec.producer_epoch,
        spec.base_sequence,
        spec.record_count,
    )
    crc = crc32c.crc32c(payload, crc32c.crc32c(tail))
    batch_length = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload)
    return BATCH_HEAD.pack(spec.base_offset, batch_length, spec.partition_leader_epoch, MAGIC_V2, crc) + tail + payload


def encode_batch(spec: BatchSpec) -> bytes:
    """One v2 ``DefaultRecordBatch``, exactly as ``MemoryRecordsBuilder`` lays it out (a v0/v1
    spec: its legacy message set)."""
    if spec.magic != MAGIC_V2:
        return encode_legacy_message_set(
            spec.base_offset, spec.records, spec.magic, spec.codec, spec.timestamp_type, spec.log_append_time
        )
    if spec.stored_payload is not None:
        return assemble_batch(spec, spec.stored_payload)
    return assemble_batch(spec, compress(spec.codec, encode_records(spec)))


def encode_batches(specs) -> bytes:
    return b"".join(encode_batch(s) for s in specs)


# ---------------------------------------------------------------- legacy (v0/v1) message sets


def _legacy_message(
    offset: int, magic: int, attributes: int, timestamp: int | None, key: bytes | None, value: bytes | None
) -> bytes:
    body = bytes((magic, attributes))
    if magic == MAGIC_V1:
        body += _INT64.pack(NO_TIMESTAMP if timestamp is None else timestamp)
    for b in (key, value):
        body += _INT32.pack(-1) if b is None else _INT32.pack(len(b)) + b
    crc = zlib.crc32(body)
    return _INT64.pack(offset) + _INT32.pack(len(body) + 4) + struct.pack(">I", crc) + body


def encode_legacy_message_set(
    base_offset: int,
    records: tuple[Record, ...] | list[Record],
    magic: int = MAGIC_V1,
    codec: str = "none",
    timestamp_type: str = "create",
    log_append_time: int | None = None,
) -> bytes:
    """v0/v1 messages for consecutive offsets from ``base_offset`` (headers are not representable).

    Uncompressed: one message per record. Compressed: one wrapper message holding them all, as
    ``MemoryRecordsBuilder`` writes it (v0 inner offsets absolute, v1 relative; the wrapper takes
    the last offset and, for v1, the max timestamp or the log append time). zstd is refused, as
    Kafka refuses it ("ZStandard compression is not supported for magic 0/1").
    """
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    if codec == "zstd":
        raise ValueError(f"ZStandard compression is not supported for magic {magic}")
    log_append = magic == MAGIC_V1 and timestamp_type == "log_append"
    ts_attr = TIMESTAMP_TYPE_MASK if log_append else 0
    if log_append and log_append_time is None:
        raise ValueError("a log_append message set needs log_append_time")

    def ts(r: Record) -> int | None:
        return None if magic == MAGIC_V0 else (log_append_time if log_append else r.timestamp)

    if codec == "none":
        return b"".join(_legacy_message(base_offset + i, magic, ts_attr, ts(r), r.key, r.value) for i, r in enumerate(records))
    inner = b"".join(
        _legacy_message(
            base_offset + i if magic == MAGIC_V0 else i, magic, 0, None if magic == MAGIC_V0 else r.timestamp, r.key, r.value
        )
        for i, r in enumerate(records)
    )
    wrapper_ts = None if magic == MAGIC_V0 else (log_append_time if log_append else max(r.timestamp for r in records))
    value = compress(codec, inner, legacy_lz4=magic == MAGIC_V0)
    return _legacy_message(base_offset + len(records) - 1, magic, codec_id(codec) | ts_attr, wrapper_ts, None, value)
