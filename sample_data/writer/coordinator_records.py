"""Group and share coordinator records as Kafka 4.1.1 writes them to ``__consumer_offsets`` and
``__share_group_state``.

    key   => int16 record type + key message at version 0     (MessageUtil.toCoordinatorTypePrefixedBytes)
    value => int16 version + value message, or null (a tombstone)  (MessageUtil.toVersionPrefixedBytes)

``encode`` is the generated ``*Data.write`` for any spec of ``parsers.group_coordinator_records``
/ ``parsers.share_group_state`` (Kafka's JSON definitions in Python): fixed-width big-endian ints,
int16-length strings and int32-length arrays in non-flexible versions, compact (uvarint length + 1)
ones and a tagged-field section per struct in flexible versions, a tagged field written only when
it is not its default, a nullable non-tagged struct behind an int8 marker, a tagged nullable
struct behind a uvarint marker. The helpers below lay out what the coordinators write for one
event (a member joining a KIP-848, share or streams group; an offset commit; a share-partition's
snapshot and updates), after ``GroupCoordinatorRecordHelpers`` and ``ShareCoordinatorRecordHelpers``.
Kafka 4.1.1's ``kafka-dump-log --offsets-decoder`` / ``--share-group-state-decoder`` judge the
bytes in tests/test_group_records.py.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from parsers.group_coordinator_records import RECORD_TYPES
from parsers.kafka_messages import _UNSET, F, Message, parse_versions
from parsers.share_group_state import RECORD_TYPES as SHARE_RECORD_TYPES

from .records import Record
from .remote_log_metadata import uvarint

_FIXED = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H", "uint32": ">I", "float64": ">d"}
ZERO_UUID = bytes(16)

# ---------------------------------------------------------------- record types (apiKey of the coordinator-key/value pair)
OFFSET_COMMIT, GROUP_METADATA = 1, 2
CONSUMER_GROUP_METADATA, CONSUMER_GROUP_PARTITION_METADATA, CONSUMER_GROUP_MEMBER_METADATA = 3, 4, 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 6, 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
SHARE_GROUP_MEMBER_METADATA, SHARE_GROUP_METADATA, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 10, 11, 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, SHARE_GROUP_STATE_PARTITION_METADATA = 13, 14, 15
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
STREAMS_GROUP_METADATA, STREAMS_GROUP_MEMBER_METADATA, STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 17, 19, 20
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, STREAMS_GROUP_TOPOLOGY = 21, 22, 23
SHARE_SNAPSHOT, SHARE_UPDATE = 0, 1
STABLE = 0  # MemberState.STABLE
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4  # a share state batch's DeliveryState


def _in(v: int, versions: str | None) -> bool:
    lo, hi = parse_versions(versions)
    return lo <= v <= hi


def _uuid(v: str | bytes) -> bytes:
    if isinstance(v, bytes):
        if len(v) != 16:
            raise ValueError(f"a uuid is 16 bytes, not {len(v)}")
        return v
    raw = base64.urlsafe_b64decode(v + "=" * (-len(v) % 4))
    return _uuid(raw)


def _length(n: int | None, flexible: bool, short: bool) -> bytes:
    """A length prefix; None is null (-1, or 0 when compact)."""
    if flexible:
        return uvarint(0 if n is None else n + 1)
    return struct.pack(">h" if short else ">i", -1 if n is None else n)


def _value(t: str, v: Any, flexible: bool, f: F, version: int, msg_flex: str) -> bytes:
    if t in _FIXED:
        return struct.pack(_FIXED[t], v)
    if t == "bool":
        return b"\x01" if v else b"\x00"
    if t == "uuid":
        return _uuid(v)
    if t == "string":
        if v is None:
            return _length(None, flexible, True)
        raw = v.encode()
        return _length(len(raw), flexible, True) + raw
    if t == "bytes":
        return _length(None if v is None else len(v), flexible, False) + (v or b"")
    if t.startswith("[]"):
        if v is None:
            return _length(None, flexible, False)
        elem = t[2:]
        if f.fields is not None:
            body = b"".join(_struct(f.fields, item, version, msg_flex) for item in v)
        else:
            body = b"".join(_value(elem, item, flexible, f, version, msg_flex) for item in v)
        return _length(len(v), flexible, False) + body
    raise ValueError(f"field {f.name}: cannot encode type {t!r}")


def _default(f: F) -> Any:
    """Kafka's default of a field absent from ``data``: its declared one, else its type's."""
    if f.default is not _UNSET:
        return f.default
    if f.type.startswith("[]"):
        return []
    return ZERO_UUID if f.type == "uuid" else "" if f.type == "string" else b"" if f.type == "bytes" else 0


def _struct(fields: Sequence[F], data: Mapping[str, Any], version: int, msg_flex: str) -> bytes:
    """One struct at ``version``: its inline fields, then (flexible versions) its tagged ones."""
    flexible = _in(version, msg_flex)
    out = bytearray()
    tagged: list[tuple[int, bytes]] = []
    for f in fields:
        if not _in(version, f.versions):
            continue
        v = data.get(f.key, _default(f))
        is_tagged = _in(version, f.tagged)
        nullable = _in(version, f.nullable)
        if f.fields is not None and not f.type.startswith("[]"):  # a struct field
            if is_tagged:  # written when given: null (marker 0) or a struct (marker 1), as Kafka writes a non-default one
                if f.key not in data:
                    continue
                if v is None:
                    tagged.append((f.tag, uvarint(0)))
                else:
                    tagged.append((f.tag, (uvarint(1) if nullable else b"") + _struct(f.fields, v, version, msg_flex)))
            elif nullable:
                out += b"\xff" if v is None else b"\x01" + _struct(f.fields, v, version, msg_flex)
            else:
                out += _struct(f.fields, v, version, msg_flex)
            continue
        if is_tagged:
            if v == _default(f) or (f.type == "uuid" and _uuid(v) == ZERO_UUID):
                continue
            tagged.append((f.tag, _value(f.type, v, True, f, version, msg_flex)))
        else:
            out += _value(f.type, v, flexible, f, version, msg_flex)
    if flexible:
        out += uvarint(len(tagged))
        for tag, raw in sorted(tagged):
            out += uvarint(tag) + uvarint(len(raw)) + raw
    elif tagged:
        raise ValueError("tagged fields in a non-flexible version")
    return bytes(out)


def encode(spec: Message, data: Mapping[str, Any], version: int) -> bytes:
    """``spec`` at ``version`` from ``data`` (Kafka's JSON names; bytes as bytes, uuids as
    base64url strings or 16 bytes; absent fields take their defaults)."""
    if not spec.supports(version):
        raise ValueError(f"{spec.name} has no version {version}")
    return _struct(spec.fields, data, version, spec.flexible)


def coordinator_record(record_type: int, key: Mapping[str, Any], value: Mapping[str, Any] | None, *, version: int = 0,
                       ts: int, share_state: bool = False) -> Record:
    """One ``__consumer_offsets`` (or, with ``share_state``, ``__share_group_state``) record;
    ``value`` None is a tombstone."""
    if share_state:
        _, key_spec, value_spec = SHARE_RECORD_TYPES[record_type]
    else:
        rt = RECORD_TYPES[record_type]
        key_spec, value_spec = rt.key, rt.value
    k = struct.pack(">h", record_type) + encode(key_spec, key, 0)
    v = None if value is None else struct.pack(">h", version) + encode(value_spec, value, version)
    return Record(k, v, ts)


# ---------------------------------------------------------------- what the coordinators write


def offset_commit(group: str, topic: str, partition: int, offset: int, *, ts: int, leader_epoch: int = -1,
                  topic_id: str | bytes | None = None, metadata: str = "", expire_ms: int | None = None,
                  version: int | None = None) -> Record:
    """An offset commit as Kafka 4.1 writes it (``newOffsetCommitRecord``): OffsetCommitValue v4 with
    the topic id tagged, or v1 when the commit carries an expiry (OffsetCommit v1 requests)."""
    if version is None:
        version = 1 if expire_ms is not None else 4
    value = {"offset": offset, "leaderEpoch": leader_epoch, "metadata": metadata, "commitTimestamp": ts,
             "expireTimestamp": -1 if expire_ms is None else expire_ms}
    if topic_id is not None:
        value["topicId"] = topic_id
    return coordinator_record(OFFSET_COMMIT, {"group": group, "topic": topic, "partition": partition}, value, version=version, ts=ts)


def offset_tombstone(group: str, topic: str, partition: int, *, ts: int) -> Record:
    """An offset deleted (expired, or its topic deleted): the key with a null value."""
    return coordinator_record(OFFSET_COMMIT, {"group": group, "topic": topic, "partition": partition}, None, ts=ts)


def _topic_partitions(assignment: Mapping[str, Sequence[int]]) -> list[dict]:
    return [{"topicId": tid, "partitions": list(parts)} for tid, parts in assignment.items()]


def consumer_group_join(group: str, member_id: str, *, epoch: int, assignment: Mapping[str, Sequence[int]], topics: Sequence[str],
                        ts: int, client_id: str = "consumer-1", client_host: str = "/10.0.0.1", metadata_hash: int = 0) -> list[Record]:
    """A KIP-848 member joining (``consumerGroupHeartbeat``): its metadata, the group epoch bump,
    its target assignment and the assignment epoch, then its current assignment at that epoch.
    ``assignment``: topic id -> partitions."""
    key, mkey = {"groupId": group}, {"groupId": group, "memberId": member_id}
    return [
        coordinator_record(CONSUMER_GROUP_MEMBER_METADATA, mkey, {
            "instanceId": None, "rackId": None, "clientId": client_id, "clientHost": client_host,
            "subscribedTopicNames": list(topics), "subscribedTopicRegex": None, "rebalanceTimeoutMs": 300_000,
            "serverAssignor": "uniform", "classicMemberMetadata": None}, ts=ts),  # null, written (Kafka 4.1.1 does)
        coordinator_record(CONSUMER_GROUP_METADATA, key, {"epoch": epoch, "metadataHash": metadata_hash}, ts=ts),
        coordinator_record(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, mkey, {"topicPartitions": _topic_partitions(assignment)}, ts=ts),
        coordinator_record(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, key, {"assignmentEpoch": epoch}, ts=ts),
        coordinator_record(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, mkey, {
            "memberEpoch": epoch, "previousMemberEpoch": epoch - 1, "state": STABLE,
            "assignedPartitions": _topic_partitions(assignment), "partitionsPendingRevocation": []}, ts=ts),
    ]  # fmt: skip


def share_group_join(group: str, member_id: str, *, epoch: int, assignment: Mapping[str, Sequence[int]], topic_names: Mapping[str, str],
                     ts: int, client_id: str = "share-consumer-1", client_host: str = "/10.0.0.2", metadata_hash: int = 0) -> list[Record]:
    """A KIP-932 member joining (``shareGroupHeartbeat``): its metadata, the group epoch, the
    share-partitions whose state the group initialized, its target and current assignment.
    ``assignment``: topic id -> partitions; ``topic_names``: topic id -> name."""
    key, mkey = {"groupId": group}, {"groupId": group, "memberId": member_id}
    initialized = [{"topicId": tid, "topicName": topic_names[tid], "partitions": list(parts)} for tid, parts in assignment.items()]
    return [
        coordinator_record(SHARE_GROUP_MEMBER_METADATA, mkey, {
            "rackId": None, "clientId": client_id, "clientHost": client_host,
            "subscribedTopicNames": sorted(topic_names[t] for t in assignment)}, ts=ts),
        coordinator_record(SHARE_GROUP_METADATA, key, {"epoch": epoch, "metadataHash": metadata_hash}, ts=ts),
        coordinator_record(SHARE_GROUP_STATE_PARTITION_METADATA, key, {
            "initializingTopics": [], "initializedTopics": initialized, "deletingTopics": []}, ts=ts),
        coordinator_record(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, mkey, {"topicPartitions": _topic_partitions(assignment)}, ts=ts),
        coordinator_record(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, key, {"assignmentEpoch": epoch}, ts=ts),
        coordinator_record(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, mkey, {
            "memberEpoch": epoch, "previousMemberEpoch": epoch - 1, "state": STABLE,
            "assignedPartitions": _topic_partitions(assignment)}, ts=ts),
    ]  # fmt: skip


def streams_group_join(group: str, member_id: str, *, epoch: int, source_topics: Sequence[str], partitions: Sequence[int],
                       ts: int, process_id: str = "process-1", client_host: str = "/10.0.0.3") -> list[Record]:
    """A KIP-1071 member joining (``streamsGroupHeartbeat``): the topology, its metadata, the group
    epoch, its target and current assignment (every partition of subtopology "0" active here)."""
    key, mkey = {"groupId": group}, {"groupId": group, "memberId": member_id}
    tasks = [{"subtopologyId": "0", "partitions": list(partitions)}]
    return [
        coordinator_record(STREAMS_GROUP_TOPOLOGY, key, {"epoch": 0, "subtopologies": [{
            "subtopologyId": "0", "sourceTopics": list(source_topics), "sourceTopicRegex": [],
            "stateChangelogTopics": [{"name": f"{group}-store-changelog", "partitions": 0, "replicationFactor": 0,
                                      "topicConfigs": [{"key": "cleanup.policy", "value": "compact"}]}],
            "repartitionSinkTopics": [], "repartitionSourceTopics": [], "copartitionGroups": []}]}, ts=ts),
        coordinator_record(STREAMS_GROUP_MEMBER_METADATA, mkey, {
            "instanceId": None, "rackId": None, "clientId": f"{group}-{process_id}-StreamThread-1-consumer",
            "clientHost": client_host, "rebalanceTimeoutMs": 300_000, "topologyEpoch": 0, "processId": process_id,
            "userEndpoint": {"host": "streams-1.example", "port": 8080}, "clientTags": [{"key": "zone", "value": "a"}]}, ts=ts),
        coordinator_record(STREAMS_GROUP_METADATA, key, {"epoch": epoch, "metadataHash": 0x5EED}, ts=ts),
        coordinator_record(STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, mkey, {
            "activeTasks": tasks, "standbyTasks": [], "warmupTasks": []}, ts=ts),
        coordinator_record(STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, key, {"assignmentEpoch": epoch}, ts=ts),
        coordinator_record(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, mkey, {
            "memberEpoch": epoch, "previousMemberEpoch": epoch - 1, "state": STABLE, "activeTasks": tasks,
            "standbyTasks": [], "warmupTasks": [], "activeTasksPendingRevocation": [],
            "standbyTasksPendingRevocation": [], "warmupTasksPendingRevocation": []}, ts=ts),
    ]  # fmt: skip


def _batches(batches: Sequence[tuple[int, int, int, int]]) -> list[dict]:
    return [{"firstOffset": a, "lastOffset": b, "deliveryState": s, "deliveryCount": c} for a, b, s, c in batches]


def share_snapshot(group: str, topic_id: str | bytes, partition: int, *, start_offset: int, ts: int, snapshot_epoch: int = 0,
                   state_epoch: int = 0, leader_epoch: int = 0, batches: Sequence[tuple[int, int, int, int]] = (),
                   create_ts: int | None = None) -> Record:
    """A ShareSnapshot (``newShareSnapshotRecord``): a share-partition's whole state.
    ``batches``: (first offset, last offset, delivery state, delivery count)."""
    key = {"groupId": group, "topicId": topic_id, "partition": partition}
    value = {"snapshotEpoch": snapshot_epoch, "stateEpoch": state_epoch, "leaderEpoch": leader_epoch, "startOffset": start_offset,
             "createTimestamp": ts if create_ts is None else create_ts, "writeTimestamp": ts, "stateBatches": _batches(batches)}
    return coordinator_record(SHARE_SNAPSHOT, key, value, ts=ts, share_state=True)


def share_update(group: str, topic_id: str | bytes, partition: int, *, start_offset: int, ts: int, snapshot_epoch: int = 0,
                 leader_epoch: int = 0, batches: Sequence[tuple[int, int, int, int]] = ()) -> Record:
    """A ShareUpdate (``newShareUpdateRecord``): what one WriteShareGroupState changed, merged into
    the last snapshot on replay; ``start_offset`` -1 leaves the start offset as it was."""
    key = {"groupId": group, "topicId": topic_id, "partition": partition}
    value = {"snapshotEpoch": snapshot_epoch, "leaderEpoch": leader_epoch, "startOffset": start_offset, "stateBatches": _batches(batches)}
    return coordinator_record(SHARE_UPDATE, key, value, ts=ts, share_state=True)


def share_state_tombstone(group: str, topic_id: str | bytes, partition: int, *, ts: int) -> Record:
    """The share-partition's state deleted (``newShareStateTombstoneRecord``: always a ShareSnapshot key)."""
    return coordinator_record(SHARE_SNAPSHOT, {"groupId": group, "topicId": topic_id, "partition": partition}, None, ts=ts, share_state=True)


def every_offsets_kind(t0: int) -> list[Record]:
    """One record of every ``__consumer_offsets`` record type Kafka 4.1.1 defines (with the value
    versions of offset commits and classic groups it reads), tombstones, and the corners of each
    spec: null and present nullable fields, a classic member inside a KIP-848 group, a tagged
    MetadataHash, a consumer-group regular expression, a streams topology. Kafka 4.1.1's
    kafka-dump-log judges them in tests/test_group_records.py; the fuzzer mutates them."""
    tid_a, tid_b = bytes(range(1, 17)), bytes(range(201, 217))
    tid_a_s = base64.urlsafe_b64encode(tid_a).decode().rstrip("=")
    out = [
        coordinator_record(0, {"group": "g-0.8", "topic": "orders", "partition": 2}, {  # Kafka 0.8.2's key and value
            "offset": 5, "metadata": "", "commitTimestamp": t0}, version=0, ts=t0),
        offset_commit("g-classic", "orders", 0, 1200, ts=t0, leader_epoch=3, metadata="m", version=3),
        offset_commit("g-classic", "orders", 1, 77, ts=t0, expire_ms=t0 + 86_400_000),
        offset_commit("g-848", "orders", 0, 1234, ts=t0 + 1, leader_epoch=4, topic_id=tid_a),
        offset_commit("g-848", "orders", 1, 99, ts=t0 + 1, leader_epoch=4),  # v4 without a topic id
        offset_tombstone("g-848", "orders", 1, ts=t0 + 2),
        coordinator_record(GROUP_METADATA, {"group": "g-classic"}, {
            "protocolType": "consumer", "generation": 7, "protocol": "range", "leader": "m-1", "currentStateTimestamp": t0,
            "members": [{"memberId": "m-1", "groupInstanceId": None, "clientId": "c-1", "clientHost": "/10.0.0.9",
                         "rebalanceTimeout": 300_000, "sessionTimeout": 45_000, "subscription": b"\x00\x01sub",
                         "assignment": b"\x00\x01asg"}]}, version=4, ts=t0),
        *consumer_group_join("g-848", "m-848", epoch=3, assignment={tid_a: [0, 1]}, topics=["orders"], ts=t0 + 3,
                             metadata_hash=-123456789),
        coordinator_record(CONSUMER_GROUP_PARTITION_METADATA, {"groupId": "g-848"}, {"topics": [
            {"topicId": tid_a, "topicName": "orders", "numPartitions": 2,
             "partitionMetadata": [{"partition": 0, "racks": ["r1", "r2"]}, {"partition": 1, "racks": []}]}]}, ts=t0 + 4),
        coordinator_record(CONSUMER_GROUP_MEMBER_METADATA, {"groupId": "g-848", "memberId": "m-classic"}, {
            "instanceId": "static-1", "rackId": "r1", "clientId": "old-client", "clientHost": "/10.0.0.8",
            "subscribedTopicNames": ["orders", "zählung"], "subscribedTopicRegex": "ord.*", "rebalanceTimeoutMs": -1,
            "serverAssignor": None, "classicMemberMetadata": {"sessionTimeoutMs": 10_000, "supportedProtocols": [
                {"name": "range", "metadata": b"\x00\x03range-subscription"}, {"name": "cooperative-sticky", "metadata": b""}]}},
            ts=t0 + 5),
        coordinator_record(CONSUMER_GROUP_REGULAR_EXPRESSION, {"groupId": "g-848", "regularExpression": "ord.*"},
                           {"topics": ["orders"], "version": 42, "timestamp": t0}, ts=t0 + 6),
        coordinator_record(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, {"groupId": "g-848", "memberId": "m-848"}, {
            "memberEpoch": 4, "previousMemberEpoch": 3, "state": 1, "assignedPartitions": [{"topicId": tid_a, "partitions": [0]}],
            "partitionsPendingRevocation": [{"topicId": tid_a_s, "partitions": [1]}]}, ts=t0 + 7),
        *share_group_join("g-share", "m-share", epoch=2, assignment={tid_b: [0, 1, 2]}, topic_names={tid_b: "events"}, ts=t0 + 8,
                          metadata_hash=987654321),
        coordinator_record(SHARE_GROUP_STATE_PARTITION_METADATA, {"groupId": "g-share"}, {
            "initializingTopics": [{"topicId": tid_a, "topicName": "orders", "partitions": [3]}],
            "initializedTopics": [{"topicId": tid_b, "topicName": "events", "partitions": [0, 1, 2]}],
            "deletingTopics": [{"topicId": bytes(range(50, 66)), "topicName": "gone"}]}, ts=t0 + 9),
        *streams_group_join("g-streams", "m-streams", epoch=5, source_topics=["orders"], partitions=[0, 1], ts=t0 + 10),
        coordinator_record(STREAMS_GROUP_MEMBER_METADATA, {"groupId": "g-streams", "memberId": "m-2"}, {
            "instanceId": "i-2", "rackId": "r2", "clientId": "c", "clientHost": "/h", "rebalanceTimeoutMs": 1000,
            "topologyEpoch": 1, "processId": "p-2", "userEndpoint": None, "clientTags": []}, ts=t0 + 11),
        coordinator_record(STREAMS_GROUP_TOPOLOGY, {"groupId": "g-streams"}, {"epoch": 1, "subtopologies": [{
            "subtopologyId": "1", "sourceTopics": [], "sourceTopicRegex": ["in-.*"], "stateChangelogTopics": [],
            "repartitionSinkTopics": ["g-streams-rep"], "repartitionSourceTopics": [
                {"name": "g-streams-rep", "partitions": 4, "replicationFactor": 3, "topicConfigs": []}],
            "copartitionGroups": [{"sourceTopics": [0], "sourceTopicRegex": [0], "repartitionSourceTopics": [0, 1]}]}]}, ts=t0 + 12),
        coordinator_record(CONSUMER_GROUP_METADATA, {"groupId": "g-848"}, None, ts=t0 + 13),  # the group deleted
        coordinator_record(SHARE_GROUP_METADATA, {"groupId": "g-share"}, None, ts=t0 + 14),
    ]  # fmt: skip
    return out


def every_share_state_kind(t0: int) -> list[Record]:
    """ShareSnapshot and ShareUpdate records of every shape: the initializing snapshot (start offset
    -1), snapshots with state batches of each delivery state, an update that moves the start
    offset and one that does not (-1), and a tombstone."""
    tid = bytes(range(201, 217))
    return [
        share_snapshot("g-share", tid, 0, start_offset=-1, ts=t0),
        share_snapshot("g-share", tid, 0, start_offset=0, ts=t0 + 1, snapshot_epoch=1, state_epoch=1, leader_epoch=2),
        share_update("g-share", tid, 0, start_offset=-1, ts=t0 + 2, snapshot_epoch=1, leader_epoch=2,
                     batches=[(0, 9, ACKNOWLEDGED, 1), (10, 19, AVAILABLE, 2)]),
        share_update("g-share", tid, 0, start_offset=20, ts=t0 + 3, snapshot_epoch=1, leader_epoch=2),
        share_snapshot("g-share", tid, 1, start_offset=500, ts=t0 + 4, snapshot_epoch=7, state_epoch=3, leader_epoch=5,
                       batches=[(500, 509, ARCHIVED, 5), (510, 520, ACKNOWLEDGED, 1), (521, 521, AVAILABLE, 0)], create_ts=t0),
        share_state_tombstone("g-share", tid, 2, ts=t0 + 5),
        share_snapshot("zählgruppe", base64.urlsafe_b64encode(tid).decode().rstrip("="), 2_000_000, start_offset=2**40,
                       ts=t0 + 6, snapshot_epoch=2**31 - 1, state_epoch=-1, leader_epoch=-1),
    ]  # fmt: skip
