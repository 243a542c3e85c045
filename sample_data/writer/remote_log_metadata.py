"""``__remote_log_metadata`` record values as TopicBasedRemoteLogMetadataManager writes them (KIP-405).

    value => frameVersion:uvarint=1 apiKey:uvarint version:uvarint message   (AbstractApiMessageSerde)
    key   => null
    RemoteLogSegmentMetadataRecord (apiKey 0, v0, flexible) =>
        RemoteLogSegmentId {TopicIdPartition {Name string, Id uuid, Partition int32}, Id uuid}
        StartOffset int64 EndOffset int64 BrokerId int32 MaxTimestampMs int64 EventTimestampMs int64
        SegmentLeaderEpochs [LeaderEpoch int32, Offset int64] SegmentSizeInBytes int32
        CustomMetadata nullable bytes RemoteLogSegmentState int8
    RemoteLogSegmentMetadataUpdateRecord (apiKey 1, v0, flexible) =>
        RemoteLogSegmentId BrokerId int32 EventTimestampMs int64 CustomMetadata nullable bytes
        RemoteLogSegmentState int8
    RemotePartitionDeleteMetadataRecord (apiKey 2, v0, flexible) =>
        TopicIdPartition BrokerId int32 EventTimestampMs int64 RemotePartitionDeleteState int8

Flexible versions: strings, bytes and arrays are compact (uvarint length + 1, 0 = null) and every
struct ends with a tagged-field count (0 here). Written from Kafka's
``storage/src/main/resources/message/*.json`` so tests can build every record and let Kafka's
``RemoteLogMetadataSerde`` judge our reader.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

FRAME_VERSION = 1
SEGMENT_API_KEY, SEGMENT_UPDATE_API_KEY, PARTITION_DELETE_API_KEY = 0, 1, 2
# RemoteLogSegmentState / RemotePartitionDeleteState ids
COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED = 0, 1, 2, 3
DELETE_PARTITION_MARKED, DELETE_PARTITION_STARTED, DELETE_PARTITION_FINISHED = 0, 1, 2
NO_TAGGED_FIELDS = b"\x00"

_I8, _I32, _I64 = struct.Struct(">b"), struct.Struct(">i"), struct.Struct(">q")


def uvarint(n: int) -> bytes:
    """ByteUtils.writeUnsignedVarint."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def compact_bytes(b: bytes | None) -> bytes:
    return uvarint(0) if b is None else uvarint(len(b) + 1) + b


@dataclass(frozen=True)
class TopicIdPartition:
    topic: str
    topic_id: bytes  # 16 bytes
    partition: int

    def encode(self) -> bytes:
        return compact_bytes(self.topic.encode()) + self.topic_id + _I32.pack(self.partition) + NO_TAGGED_FIELDS


def _segment_id(tp: TopicIdPartition, segment_id: bytes) -> bytes:
    return tp.encode() + segment_id + NO_TAGGED_FIELDS


def frame(api_key: int, message: bytes, version: int = 0) -> bytes:
    return uvarint(FRAME_VERSION) + uvarint(api_key) + uvarint(version) + message


def segment_metadata(
    tp: TopicIdPartition,
    segment_id: bytes,
    start_offset: int,
    end_offset: int,
    *,
    broker: int,
    event_ms: int,
    max_timestamp_ms: int,
    leader_epochs: list[tuple[int, int]],
    size: int,
    state: int = COPY_SEGMENT_STARTED,
    custom: bytes | None = None,
) -> bytes:
    """A framed RemoteLogSegmentMetadataRecord (what RLMM writes when a copy starts)."""
    epochs = uvarint(len(leader_epochs) + 1) + b"".join(_I32.pack(e) + _I64.pack(o) + NO_TAGGED_FIELDS for e, o in leader_epochs)
    body = (
        _segment_id(tp, segment_id)
        + _I64.pack(start_offset)
        + _I64.pack(end_offset)
        + _I32.pack(broker)
        + _I64.pack(max_timestamp_ms)
        + _I64.pack(event_ms)
        + epochs
        + _I32.pack(size)
        + compact_bytes(custom)
        + _I8.pack(state)
        + NO_TAGGED_FIELDS
    )
    return frame(SEGMENT_API_KEY, body)


def segment_update(tp: TopicIdPartition, segment_id: bytes, state: int, *, broker: int, event_ms: int, custom: bytes | None = None) -> bytes:
    """A framed RemoteLogSegmentMetadataUpdateRecord (a segment's later state)."""
    body = _segment_id(tp, segment_id) + _I32.pack(broker) + _I64.pack(event_ms) + compact_bytes(custom) + _I8.pack(state) + NO_TAGGED_FIELDS
    return frame(SEGMENT_UPDATE_API_KEY, body)


def partition_delete(tp: TopicIdPartition, state: int, *, broker: int, event_ms: int) -> bytes:
    """A framed RemotePartitionDeleteMetadataRecord."""
    return frame(PARTITION_DELETE_API_KEY, tp.encode() + _I32.pack(broker) + _I64.pack(event_ms) + _I8.pack(state) + NO_TAGGED_FIELDS)


def copied_segment(tp: TopicIdPartition, segment_id: bytes, start: int, end: int, *, broker: int, event_ms: int, epoch: int = 0) -> list[bytes]:
    """The two records of one finished copy: the metadata at COPY_SEGMENT_STARTED, then the
    update to COPY_SEGMENT_FINISHED (RemoteLogManager.copyLogSegment)."""
    return [
        segment_metadata(tp, segment_id, start, end, broker=broker, event_ms=event_ms, max_timestamp_ms=event_ms,
                         leader_epochs=[(epoch, start)], size=1024 * (end - start + 1)),
        segment_update(tp, segment_id, COPY_SEGMENT_FINISHED, broker=broker, event_ms=event_ms + 1),
    ]  # fmt: skip


def every_kind(t0: int) -> list[bytes]:
    """One value of every record type and state Kafka defines: null and present custom metadata,
    one and several leader epochs, a non-ASCII topic, extreme broker ids and timestamps. Kafka's
    serde judges these in tests/test_remote_log_metadata.py; the fuzzer mutates them."""
    orders = TopicIdPartition("orders", bytes(range(16)), 3)
    unicode = TopicIdPartition("zählung.ü", bytes(range(100, 116)), 0)
    seg_a, seg_b = bytes(range(1, 17)), bytes(range(31, 47))
    return [
        *copied_segment(orders, seg_a, 0, 299, broker=1, event_ms=t0),
        segment_metadata(orders, seg_b, 300, 499, broker=2, event_ms=t0 + 5, max_timestamp_ms=t0 + 4,
                         leader_epochs=[(0, 300), (2, 350), (7, 480)], size=1 << 30, custom=b"\x00plugin\xff"),
        segment_update(orders, seg_b, COPY_SEGMENT_FINISHED, broker=2, event_ms=t0 + 6, custom=b"x" * 200),
        segment_update(orders, seg_a, DELETE_SEGMENT_STARTED, broker=2, event_ms=t0 + 7),
        segment_update(orders, seg_a, DELETE_SEGMENT_FINISHED, broker=2, event_ms=t0 + 8),
        segment_metadata(unicode, seg_a, 10, 10, broker=2_000_000_000, event_ms=-1, max_timestamp_ms=-1,
                         leader_epochs=[(0, 10)], size=0),
        *(partition_delete(unicode, s, broker=3, event_ms=t0 + 9 + s) for s in range(3)),
    ]  # fmt: skip
