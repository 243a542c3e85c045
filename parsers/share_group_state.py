"""``__share_group_state`` records: how far each share group has consumed each share-partition (KIP-932).

A share group's progress is not an offset commit: the share coordinator keeps, per (group, topic
id, partition), the share-partition start offset (SPSO: every record below it is acknowledged or
archived) and state batches of in-flight records above it, in its own compacted topic:

    key   = int16 type + key message (version 0)                (CoordinatorRecordSerde)
      type 0 ShareSnapshotKey, 1 ShareUpdateKey: GroupId string, TopicId uuid, Partition int32
    value = int16 version (0) + flexible value message, or null (a tombstone, written as a ShareSnapshotKey)
      ShareSnapshotValue: SnapshotEpoch int32, StateEpoch int32, LeaderEpoch int32, StartOffset int64,
                          CreateTimestamp int64, WriteTimestamp int64,
                          StateBatches [FirstOffset int64, LastOffset int64, DeliveryState int8, DeliveryCount int16]
      ShareUpdateValue:   SnapshotEpoch int32, LeaderEpoch int32, StartOffset int64, StateBatches [...]

(``share-coordinator/src/main/resources/common/message/Share{Snapshot,Update}{Key,Value}.json``,
Kafka 4.1.1.) Replay (``ShareCoordinatorShard.replay``): a snapshot is the whole state, an update
is merged into the last snapshot, a StartOffset of -1 in an update leaves the start offset as it
was, a tombstone forgets the share-partition. DeliveryState: 0 Available, 2 Acknowledged, 4 Archived.

Choices, as in ``consumer_offsets``: ``topic`` is null (the record names its topic by id, in
``topic_id``; the findings resolve the name from partition.metadata and the metadata log) and
``partition`` is the share-partition's; ``start_offset`` is null where Kafka's is -1 (an update
that does not move it, or a snapshot of a share-partition not initialized yet); ``state_epoch``,
``create_timestamp``, ``write_timestamp`` are null on updates (the update has none). Unknown record
types (the loader ignores them) and value versions keep raw hex with no problem row; unreadable
bytes keep raw hex and add an ``invalid_record`` problem.
"""

from __future__ import annotations

import pyarrow as pa

from .common import Problem
from .consumer_offsets import decode_keyed_records, none_if, raw_hex, version_prefix
from .kafka_messages import F, Message, MessageError, decode

STATE_BATCH_TYPE = pa.struct([
    pa.field("first_offset", pa.int64()),
    pa.field("last_offset", pa.int64()),
    pa.field("delivery_state", pa.int8()),  # 0 Available, 2 Acknowledged, 4 Archived
    pa.field("delivery_count", pa.int16()),
])  # fmt: skip

SHARE_GROUP_STATE_SCHEMA = pa.schema(
    [
        pa.field("batch_position", pa.int64()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.int64()),  # ms, the record's
        pa.field("record_type", pa.string()),  # share_snapshot | share_update | unknown
        pa.field("key_version", pa.int16()),  # the record type: 0 ShareSnapshot, 1 ShareUpdate
        pa.field("value_version", pa.int16()),  # null for a tombstone
        pa.field("tombstone", pa.bool_()),
        pa.field("group", pa.string()),
        pa.field("topic", pa.string()),  # null: the record names the topic by id
        pa.field("topic_id", pa.string()),
        pa.field("partition", pa.int32()),  # the share-partition's
        pa.field("snapshot_epoch", pa.int32()),
        pa.field("state_epoch", pa.int32()),  # snapshots only
        pa.field("leader_epoch", pa.int32()),
        pa.field("start_offset", pa.int64()),  # the share-partition start offset; null where Kafka's is -1
        pa.field("create_timestamp", pa.int64()),  # ms, snapshots only
        pa.field("write_timestamp", pa.int64()),  # ms, snapshots only
        pa.field("state_batches", pa.list_(STATE_BATCH_TYPE)),
        pa.field("error", pa.string()),
        pa.field("raw_hex", pa.string()),
    ]
)

_KEY_FIELDS = [F("GroupId", "string"), F("TopicId", "uuid"), F("Partition", "int32")]
_STATE_BATCH = F("StateBatches", "[]", fields=[
    F("FirstOffset", "int64"), F("LastOffset", "int64"), F("DeliveryState", "int8"), F("DeliveryCount", "int16"),
])  # fmt: skip
RECORD_TYPES: dict[int, tuple[str, Message, Message]] = {
    0: ("share_snapshot", Message("ShareSnapshotKey", valid="0", fields=_KEY_FIELDS), Message(
        "ShareSnapshotValue", flexible="0+", valid="0", fields=[
            F("SnapshotEpoch", "int32"), F("StateEpoch", "int32"), F("LeaderEpoch", "int32"), F("StartOffset", "int64"),
            F("CreateTimestamp", "int64"), F("WriteTimestamp", "int64"), _STATE_BATCH])),
    1: ("share_update", Message("ShareUpdateKey", valid="0", fields=_KEY_FIELDS), Message(
        "ShareUpdateValue", flexible="0+", valid="0", fields=[
            F("SnapshotEpoch", "int32"), F("LeaderEpoch", "int32"), F("StartOffset", "int64"), _STATE_BATCH])),
}  # fmt: skip


def _fill(row: dict, data: dict) -> None:
    row["snapshot_epoch"] = data["snapshotEpoch"]
    row["state_epoch"] = data.get("stateEpoch")
    row["leader_epoch"] = data["leaderEpoch"]
    row["start_offset"] = none_if(data["startOffset"])
    row["create_timestamp"] = data.get("createTimestamp")
    row["write_timestamp"] = data.get("writeTimestamp")
    row["state_batches"] = [
        {"first_offset": b["firstOffset"], "last_offset": b["lastOffset"], "delivery_state": b["deliveryState"],
         "delivery_count": b["deliveryCount"]}
        for b in data["stateBatches"]
    ]  # fmt: skip


def decode_record(key: bytes | None, value: bytes | None) -> tuple[dict, str | None]:
    """One record's key and value -> (row fields, damage detail or None). Never raises."""
    row: dict = {"tombstone": value is None, "record_type": "unknown"}
    if key is None or (kv := version_prefix(key)) is None:
        row["error"] = "record has no key" if key is None else f"key of {len(key)} bytes has no type"
        row["raw_hex"] = raw_hex(key, value)
        return row, row["error"]
    row["key_version"] = kv
    if value is not None:
        row["value_version"] = version_prefix(value)
    known = RECORD_TYPES.get(kv)
    if known is None:
        row["error"] = f"unknown record type {kv}"
        row["raw_hex"] = raw_hex(key, value)
        return row, None
    row["record_type"], key_spec, value_spec = known
    notes = []
    try:
        k, end = decode(key_spec, key, 0, pos=2)
        row.update(group=k["groupId"], topic_id=k["topicId"], partition=k["partition"])
        if end < len(key):
            notes.append(f"{len(key) - end} bytes after the key (Kafka ignores them)")
        if value is not None:
            vv = row["value_version"]
            if vv is None:
                raise MessageError(f"value of {len(value)} bytes has no version", 0)
            if not value_spec.supports(vv):
                row["error"] = f"unknown {value_spec.name} version {vv}"
                row["raw_hex"] = raw_hex(key, value)
                return row, None
            data, end = decode(value_spec, value, vv, pos=2)
            _fill(row, data)
            if end < len(value):
                notes.append(f"{len(value) - end} bytes after {value_spec.name} v{vv} (Kafka ignores them)")
    except MessageError as e:
        row["error"] = f"{known[0]}: {e}"
        row["raw_hex"] = raw_hex(key, value)
        return row, row["error"]
    if notes:
        row["error"] = "; ".join(notes)
    return row, None


def decode_records(records: pa.Table) -> tuple[pa.Table, list[Problem]]:
    """Decode a ``__share_group_state`` segment's records into SHARE_GROUP_STATE_SCHEMA rows
    (control records skipped); never raises on bad bytes (an ``invalid_record`` problem instead)."""
    return decode_keyed_records(records, decode_record, SHARE_GROUP_STATE_SCHEMA, "__share_group_state")
