"""The record types of ``__consumer_offsets`` as Kafka 4.1.1's group coordinator defines them.

Kafka 4 writes every coordinator record as ``key = int16 record type + key message (version 0)``
and ``value = int16 version + value message`` (``CoordinatorRecordSerde``,
``MessageUtil.toCoordinatorTypePrefixedBytes``); the record type is the ``apiKey`` of the
``coordinator-key``/``coordinator-value`` pair in
``group-coordinator/src/main/resources/common/message/*.json``, and the generated
``CoordinatorRecordType`` maps it to its classes. Before Kafka 4 the same int16 was called the key
version (0 and 1: an offset commit, 2: group metadata), so 0-2 read as they always did.

    type  record (value versions)                                      group
    0, 1  (Legacy)OffsetCommitKey/Value (0-4; v4 has tagged TopicId)   any
    2     GroupMetadataKey/Value (0-4)                                 classic
    3-8   ConsumerGroup{Metadata, PartitionMetadata, MemberMetadata,
          TargetAssignmentMetadata, TargetAssignmentMember,
          CurrentMemberAssignment} (0)                                 consumer (KIP-848)
    10-15 ShareGroup{MemberMetadata, Metadata, TargetAssignmentMetadata,
          TargetAssignmentMember, CurrentMemberAssignment,
          StatePartitionMetadata} (0)                                  share (KIP-932)
    16    ConsumerGroupRegularExpression (0)                           consumer (KIP-848)
    17-23 StreamsGroup{Metadata, -, MemberMetadata, TargetAssignmentMetadata,
          TargetAssignmentMember, CurrentMemberAssignment, Topology} (0) streams (KIP-1071)

Types 9 (ShareGroupPartitionMetadata, Kafka 4.0's early-access share groups) and 18
(StreamsGroupPartitionMetadata, never released) are gone from 4.1.1: its loader skips them as an
unknown record type ("a left over from an aborted upgrade"), and so do we. The specs are
translations of Kafka's JSON (names, order, versions, nullability, tags, defaults), read by
``kafka_messages``; a key is read at version 0 whatever its type (keys have one version).
"""

from __future__ import annotations

from dataclasses import dataclass

from .kafka_messages import F, Message


@dataclass(frozen=True)
class RecordType:
    """One coordinator record type: its name (``record_type`` column), group kind, key and value specs."""

    name: str
    group_type: str | None  # classic | consumer | share | streams; None: an offset commit (any group)
    key: Message
    value: Message


def _key(name: str, *fields: F) -> Message:
    return Message(name, valid="0", fields=list(fields))


def _value(name: str, fields: list[F]) -> Message:
    # every Kafka 4 group record value has one version, flexible from 0
    return Message(name, flexible="0+", valid="0", fields=fields)


_GROUP_ID = F("GroupId", "string")
_MEMBER_ID = F("MemberId", "string")
_TOPIC_PARTITIONS = [F("TopicId", "uuid"), F("Partitions", "[]int32")]
_TASK_IDS = [F("SubtopologyId", "string"), F("Partitions", "[]int32")]


def _group_key(name: str) -> Message:
    return _key(name, _GROUP_ID)


def _member_key(name: str) -> Message:
    return _key(name, _GROUP_ID, _MEMBER_ID)


OFFSET_COMMIT_KEY = _key("OffsetCommitKey", F("group", "string"), F("topic", "string"), F("partition", "int32"))
GROUP_METADATA_KEY = _key("GroupMetadataKey", F("group", "string"))
OFFSET_COMMIT_VALUE = Message(
    "OffsetCommitValue",
    flexible="4+",
    valid="0-4",
    fields=[
        F("offset", "int64"),
        F("leaderEpoch", "int32", versions="3+", default=-1),
        F("metadata", "string"),
        F("commitTimestamp", "int64"),
        F("expireTimestamp", "int64", versions="1", default=-1),
        F("topicId", "uuid", versions="4+", tagged="4+", tag=0),
    ],
)
GROUP_METADATA_VALUE = Message(
    "GroupMetadataValue",
    flexible="4+",
    valid="0-4",
    fields=[
        F("protocolType", "string"),
        F("generation", "int32"),
        F("protocol", "string", nullable="0+"),
        F("leader", "string", nullable="0+"),
        F("currentStateTimestamp", "int64", versions="2+", default=-1),
        F(
            "members",
            "[]",
            fields=[
                F("memberId", "string"),
                F("groupInstanceId", "string", versions="3+", nullable="3+", default=None),
                F("clientId", "string"),
                F("clientHost", "string"),
                F("rebalanceTimeout", "int32", versions="1+", default=-1),
                F("sessionTimeout", "int32"),
                F("subscription", "bytes"),
                F("assignment", "bytes"),
            ],
        ),
    ],
)

# Its JSON "default": null is no default to Kafka's generator: the default is an empty struct, so
# Kafka writes the tag for a null value (a consumer-protocol member: marker 0) and its JSON prints
# "classicMemberMetadata": null, while an absent tag reads as the empty struct and prints nothing.
_CLASSIC_MEMBER_METADATA = F(
    "ClassicMemberMetadata", "struct", nullable="0+", tagged="0+", tag=0,
    fields=[
        F("SessionTimeoutMs", "int32"),
        F("SupportedProtocols", "[]", fields=[F("Name", "string"), F("Metadata", "bytes")]),
    ],
)  # fmt: skip
_TOPIC_INFO = [
    F("Name", "string"),
    F("Partitions", "int32"),
    F("ReplicationFactor", "int16"),
    F("TopicConfigs", "[]", fields=[F("key", "string"), F("value", "string")]),
]
_CURRENT_ASSIGNMENT = [F("MemberEpoch", "int32"), F("PreviousMemberEpoch", "int32"), F("State", "int8")]

RECORD_TYPES: dict[int, RecordType] = {
    0: RecordType("offset_commit", None, OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    1: RecordType("offset_commit", None, OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    2: RecordType("group_metadata", "classic", GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
    3: RecordType("consumer_group_metadata", "consumer", _group_key("ConsumerGroupMetadataKey"), _value(
        "ConsumerGroupMetadataValue", [
            F("Epoch", "int32"),
            F("MetadataHash", "int64", tagged="0+", tag=0, default=0),  # 4.1, KIP-1101
        ])),
    4: RecordType("consumer_group_partition_metadata", "consumer", _group_key("ConsumerGroupPartitionMetadataKey"), _value(
        "ConsumerGroupPartitionMetadataValue", [
            F("Topics", "[]", fields=[
                F("TopicId", "uuid"),
                F("TopicName", "string"),
                F("NumPartitions", "int32"),
                F("PartitionMetadata", "[]", fields=[F("Partition", "int32"), F("Racks", "[]string")]),
            ]),
        ])),
    5: RecordType("consumer_group_member_metadata", "consumer", _member_key("ConsumerGroupMemberMetadataKey"), _value(
        "ConsumerGroupMemberMetadataValue", [
            F("InstanceId", "string", nullable="0+"),
            F("RackId", "string", nullable="0+"),
            F("ClientId", "string"),
            F("ClientHost", "string"),
            F("SubscribedTopicNames", "[]string"),
            F("SubscribedTopicRegex", "string", nullable="0+"),
            F("RebalanceTimeoutMs", "int32", default=-1),
            F("ServerAssignor", "string", nullable="0+"),
            _CLASSIC_MEMBER_METADATA,
        ])),
    6: RecordType("consumer_group_target_assignment_metadata", "consumer", _group_key("ConsumerGroupTargetAssignmentMetadataKey"),
                  _value("ConsumerGroupTargetAssignmentMetadataValue", [F("AssignmentEpoch", "int32")])),
    7: RecordType("consumer_group_target_assignment_member", "consumer", _member_key("ConsumerGroupTargetAssignmentMemberKey"),
                  _value("ConsumerGroupTargetAssignmentMemberValue", [F("TopicPartitions", "[]", fields=_TOPIC_PARTITIONS)])),
    8: RecordType("consumer_group_current_member_assignment", "consumer", _member_key("ConsumerGroupCurrentMemberAssignmentKey"), _value(
        "ConsumerGroupCurrentMemberAssignmentValue", [
            *_CURRENT_ASSIGNMENT,
            F("AssignedPartitions", "[]", fields=_TOPIC_PARTITIONS),
            F("PartitionsPendingRevocation", "[]", fields=_TOPIC_PARTITIONS),
        ])),
    10: RecordType("share_group_member_metadata", "share", _member_key("ShareGroupMemberMetadataKey"), _value(
        "ShareGroupMemberMetadataValue", [
            F("RackId", "string", nullable="0+"),
            F("ClientId", "string"),
            F("ClientHost", "string"),
            F("SubscribedTopicNames", "[]string"),
        ])),
    11: RecordType("share_group_metadata", "share", _group_key("ShareGroupMetadataKey"),
                   _value("ShareGroupMetadataValue", [F("Epoch", "int32"), F("MetadataHash", "int64")])),
    12: RecordType("share_group_target_assignment_metadata", "share", _group_key("ShareGroupTargetAssignmentMetadataKey"),
                   _value("ShareGroupTargetAssignmentMetadataValue", [F("AssignmentEpoch", "int32")])),
    13: RecordType("share_group_target_assignment_member", "share", _member_key("ShareGroupTargetAssignmentMemberKey"),
                   _value("ShareGroupTargetAssignmentMemberValue", [F("TopicPartitions", "[]", fields=_TOPIC_PARTITIONS)])),
    14: RecordType("share_group_current_member_assignment", "share", _member_key("ShareGroupCurrentMemberAssignmentKey"), _value(
        "ShareGroupCurrentMemberAssignmentValue", [
            *_CURRENT_ASSIGNMENT,
            F("AssignedPartitions", "[]", fields=_TOPIC_PARTITIONS),
        ])),
    15: RecordType("share_group_state_partition_metadata", "share", _group_key("ShareGroupStatePartitionMetadataKey"), _value(
        "ShareGroupStatePartitionMetadataValue", [
            F("InitializingTopics", "[]", fields=[F("TopicId", "uuid"), F("TopicName", "string"), F("Partitions", "[]int32")]),
            F("InitializedTopics", "[]", fields=[F("TopicId", "uuid"), F("TopicName", "string"), F("Partitions", "[]int32")]),
            F("DeletingTopics", "[]", fields=[F("TopicId", "uuid"), F("TopicName", "string")]),
        ])),
    16: RecordType("consumer_group_regular_expression", "consumer",
                   _key("ConsumerGroupRegularExpressionKey", _GROUP_ID, F("RegularExpression", "string")), _value(
        "ConsumerGroupRegularExpressionValue", [F("Topics", "[]string"), F("Version", "int64"), F("Timestamp", "int64")])),
    17: RecordType("streams_group_metadata", "streams", _group_key("StreamsGroupMetadataKey"),
                   _value("StreamsGroupMetadataValue", [F("Epoch", "int32"), F("MetadataHash", "int64")])),
    19: RecordType("streams_group_member_metadata", "streams", _member_key("StreamsGroupMemberMetadataKey"), _value(
        "StreamsGroupMemberMetadataValue", [
            F("InstanceId", "string", nullable="0+"),
            F("RackId", "string", nullable="0+"),
            F("ClientId", "string"),
            F("ClientHost", "string"),
            F("RebalanceTimeoutMs", "int32", default=-1),
            F("TopologyEpoch", "int32"),
            F("ProcessId", "string"),
            F("UserEndpoint", "struct", nullable="0+", default=None, fields=[F("Host", "string"), F("Port", "uint16")]),
            F("ClientTags", "[]", fields=[F("Key", "string"), F("Value", "string")]),
        ])),
    20: RecordType("streams_group_target_assignment_metadata", "streams", _group_key("StreamsGroupTargetAssignmentMetadataKey"),
                   _value("StreamsGroupTargetAssignmentMetadataValue", [F("AssignmentEpoch", "int32")])),
    21: RecordType("streams_group_target_assignment_member", "streams", _member_key("StreamsGroupTargetAssignmentMemberKey"), _value(
        "StreamsGroupTargetAssignmentMemberValue", [
            F("ActiveTasks", "[]", fields=_TASK_IDS),
            F("StandbyTasks", "[]", fields=_TASK_IDS),
            F("WarmupTasks", "[]", fields=_TASK_IDS),
        ])),
    22: RecordType("streams_group_current_member_assignment", "streams", _member_key("StreamsGroupCurrentMemberAssignmentKey"), _value(
        "StreamsGroupCurrentMemberAssignmentValue", [
            *_CURRENT_ASSIGNMENT,
            *(F(name, "[]", fields=_TASK_IDS) for name in (
                "ActiveTasks", "StandbyTasks", "WarmupTasks",
                "ActiveTasksPendingRevocation", "StandbyTasksPendingRevocation", "WarmupTasksPendingRevocation")),
        ])),
    23: RecordType("streams_group_topology", "streams", _group_key("StreamsGroupTopologyKey"), _value(
        "StreamsGroupTopologyValue", [
            F("Epoch", "int32"),
            F("Subtopologies", "[]", fields=[
                F("SubtopologyId", "string"),
                F("SourceTopics", "[]string"),
                F("SourceTopicRegex", "[]string"),
                F("StateChangelogTopics", "[]", fields=_TOPIC_INFO),
                F("RepartitionSinkTopics", "[]string"),
                F("RepartitionSourceTopics", "[]", fields=_TOPIC_INFO),
                F("CopartitionGroups", "[]", fields=[
                    F("SourceTopics", "[]int16"),
                    F("SourceTopicRegex", "[]int16"),
                    F("RepartitionSourceTopics", "[]int16"),
                ]),
            ]),
        ])),
}  # fmt: skip

# the epoch each record type carries, promoted to the ``epoch`` column
EPOCH_FIELD = {
    3: "epoch", 11: "epoch", 17: "epoch", 23: "epoch",  # group epoch; the topology's epoch
    6: "assignmentEpoch", 12: "assignmentEpoch", 20: "assignmentEpoch",
    8: "memberEpoch", 14: "memberEpoch", 22: "memberEpoch",
}  # fmt: skip
