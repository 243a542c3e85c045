"""``__cluster_metadata`` record values as KRaft's controller writes them (MetadataRecordSerde).

    value => frameVersion:uvarint=1 apiKey:uvarint version:uvarint message   (AbstractApiMessageSerde)
    key   => null
    TopicRecord (apiKey 2, v0)           => Name compact_string TopicId uuid
    PartitionRecord (apiKey 3, v0)       => PartitionId int32 TopicId uuid Replicas [int32] Isr [int32]
                                            RemovingReplicas [int32] AddingReplicas [int32] Leader int32
                                            LeaderEpoch int32 PartitionEpoch int32
                                            <tag 0: LeaderRecoveryState int8, written when not 0>
    PartitionChangeRecord (apiKey 5, v0) => PartitionId int32 TopicId uuid
                                            <tag 0 Isr, 1 Leader, 2 Replicas, 3 RemovingReplicas,
                                             4 AddingReplicas, 5 LeaderRecoveryState: each written
                                             only when not its default (null, -2, null, null, null, -1)>
    RemoveTopicRecord (apiKey 9, v0)     => TopicId uuid

Every metadata record is flexible from version 0: arrays and strings are compact (uvarint length
+ 1) and every struct ends with its tagged fields (uvarint count, then uvarint tag, uvarint size,
bytes, in tag order). Written from Kafka's ``metadata/src/main/resources/common/metadata/*.json``
so tests can lay out a topic's whole life (creation, reassignment, added partitions, deletion,
re-creation) and let Kafka's ``kafka-dump-log --cluster-metadata-decoder`` judge the bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from .remote_log_metadata import FRAME_VERSION, uvarint

TOPIC_RECORD, PARTITION_RECORD, PARTITION_CHANGE_RECORD, REMOVE_TOPIC_RECORD = 2, 3, 5, 9
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.Leader's default: the leader is unchanged
NO_LEADER = -1
RECOVERED, RECOVERING = 0, 1  # LeaderRecoveryState
NO_RECOVERY_STATE_CHANGE = -1

_I8, _I32 = struct.Struct(">b"), struct.Struct(">i")


def _frame(api_key: int, message: bytes, version: int = 0) -> bytes:
    return uvarint(FRAME_VERSION) + uvarint(api_key) + uvarint(version) + message


def _compact_ints(values: Sequence[int] | None) -> bytes:
    """A (nullable) compact int32 array: uvarint length + 1 (0 = null), then the ints."""
    if values is None:
        return uvarint(0)
    return uvarint(len(values) + 1) + b"".join(_I32.pack(v) for v in values)


def _tagged(fields: list[tuple[int, bytes]]) -> bytes:
    """The tagged-field section: count, then (tag, size, bytes) in tag order."""
    out = uvarint(len(fields))
    for tag, value in sorted(fields):
        out += uvarint(tag) + uvarint(len(value)) + value
    return out


def _uuid(topic_id: bytes) -> bytes:
    if len(topic_id) != 16:
        raise ValueError(f"a topic id is 16 bytes, not {len(topic_id)}")
    return topic_id


def topic_record(name: str, topic_id: bytes) -> bytes:
    """A framed TopicRecord: the topic's name bound to its id (CreateTopics, first record)."""
    raw = name.encode()
    return _frame(TOPIC_RECORD, uvarint(len(raw) + 1) + raw + _uuid(topic_id) + _tagged([]))


def partition_record(topic_id: bytes, partition: int, replicas: Sequence[int], isr: Sequence[int], leader: int, *,
                     leader_epoch: int = 0, partition_epoch: int = 0, removing: Sequence[int] = (), adding: Sequence[int] = (),
                     leader_recovery_state: int = RECOVERED) -> bytes:
    """A framed PartitionRecord v0: a partition's whole state (CreateTopics, CreatePartitions)."""
    body = (_I32.pack(partition) + _uuid(topic_id) + _compact_ints(replicas) + _compact_ints(isr) + _compact_ints(removing)
            + _compact_ints(adding) + _I32.pack(leader) + _I32.pack(leader_epoch) + _I32.pack(partition_epoch))
    tags = [(0, _I8.pack(leader_recovery_state))] if leader_recovery_state != RECOVERED else []
    return _frame(PARTITION_RECORD, body + _tagged(tags))


def partition_change_record(topic_id: bytes, partition: int, *, isr: Sequence[int] | None = None, leader: int = NO_LEADER_CHANGE,
                            replicas: Sequence[int] | None = None, removing: Sequence[int] | None = None,
                            adding: Sequence[int] | None = None, leader_recovery_state: int = NO_RECOVERY_STATE_CHANGE) -> bytes:
    """A framed PartitionChangeRecord v0: only what changed, every field tagged (PartitionChangeBuilder)."""
    tags = []
    if isr is not None:
        tags.append((0, _compact_ints(isr)))
    if leader != NO_LEADER_CHANGE:
        tags.append((1, _I32.pack(leader)))
    if replicas is not None:
        tags.append((2, _compact_ints(replicas)))
    if removing is not None:
        tags.append((3, _compact_ints(removing)))
    if adding is not None:
        tags.append((4, _compact_ints(adding)))
    if leader_recovery_state != NO_RECOVERY_STATE_CHANGE:
        tags.append((5, _I8.pack(leader_recovery_state)))
    return _frame(PARTITION_CHANGE_RECORD, _I32.pack(partition) + _uuid(topic_id) + _tagged(tags))


def remove_topic_record(topic_id: bytes) -> bytes:
    """A framed RemoveTopicRecord: the whole of a topic deletion in the metadata log (DeleteTopics)."""
    return _frame(REMOVE_TOPIC_RECORD, _uuid(topic_id) + _tagged([]))
