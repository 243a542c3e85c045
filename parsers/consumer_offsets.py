"""``__consumer_offsets`` records: who committed which offset, and what each group looked like.

Every record of the group coordinator's topic is ``key = int16 type + key message`` and
``value = int16 version + value message`` (``CoordinatorRecordSerde``); the key's int16 (the "key
version" before Kafka 4, the record type since) says what the record is, the value version how
that kind evolved. ``group_coordinator_records`` lists every type Kafka 4.1.1 defines:

    type 0, 1  OffsetCommitKey (group, topic, partition)     -> OffsetCommitValue v0-v4
    type 2     GroupMetadataKey (group)                      -> GroupMetadataValue v0-v4 (classic groups)
    type 3-8, 16   KIP-848 consumer-group records (GroupId [, MemberId | RegularExpression])
    type 10-15     KIP-932 share-group records (GroupId [, MemberId])
    type 17, 19-23 KIP-1071 streams-group records (GroupId [, MemberId])
    value null                                               -> tombstone (offset deleted / group gone)

Field layouts come from Kafka's message definitions (``group-coordinator/.../common/message/``).
v4 of OffsetCommitValue and GroupMetadataValue is their first flexible version (compact strings,
tagged fields): Kafka 4 writes offset commits at v4 (v1 when the commit carries an expiry), with
the committed topic's id in tagged field 0. Every KIP-848/932/1071 value has one version, 0,
flexible. Why this table exists: the offsets a group last committed, and when, are evidence of
what a consumer had processed before an incident, whichever protocol the group speaks (a KIP-848
consumer group commits with the same OffsetCommit records as a classic one); the group records
show who was in the group (member, client id, host) and at which generation or epoch.

Choices, each so that a value means what Kafka means by it:
  * ``committed_leader_epoch``, ``expire_timestamp``, ``current_state_timestamp`` are null where Kafka
    reads "none": the field is absent from that value version, or holds Kafka's -1 sentinel
    (``readOffsetMessageValue`` maps -1 to ``Optional.empty``/``None``, ``readGroupMessageValue``
    likewise).
  * Member subscription and assignment bytes are kept as sizes only (``member_details``): they may
    name topics a client was not meant to see, and their layout belongs to the client's protocol.
    The same for a KIP-848 member that still speaks the classic protocol (``ClassicMemberMetadata``:
    its protocols' metadata is ``metadataSize`` in ``data_json``).
  * KIP-848/932/1071 records: the key gives ``group`` and ``member_id``, the value its ``epoch``
    (group, assignment, member or topology epoch), a member's client id/host/instance id in
    ``member_details``, and all of it in ``data_json``, Kafka's JSON of the value (what
    ``kafka-dump-log --offsets-decoder`` prints as its ``data``); ``group_type`` names the protocol.
  * Unknown record types (Kafka 4.1's loader skips them: 4.0's early-access share-group partition
    metadata, type 9, or a newer Kafka's) and unknown value versions (its loader fails; a newer
    Kafka) are not damage: ``error`` says so and ``raw_hex`` keeps the bytes, with no problem row.
    Bytes that cannot be read at their stated version are damage: ``error``, ``raw_hex`` and an
    ``invalid_record`` problem at the record's position.
  * Bytes after a complete message are ignored by Kafka's reader; we decode the message and say so
    in ``error`` (no problem row: Kafka would load the record).
"""

from __future__ import annotations

import pyarrow as pa

from .common import Problem
from .group_coordinator_records import EPOCH_FIELD, RECORD_TYPES
from .kafka_messages import MessageError, decode, to_json

RAW_HEX_CAP = 256  # bytes of key and of value kept in raw_hex
INVALID_RECORD = "invalid_record"

MEMBER_TYPE = pa.struct(
    [
        pa.field("member_id", pa.string()),
        pa.field("group_instance_id", pa.string()),
        pa.field("client_id", pa.string()),
        pa.field("client_host", pa.string()),
        pa.field("rebalance_timeout_ms", pa.int32()),
        pa.field("session_timeout_ms", pa.int32()),
        pa.field("subscription_size", pa.int32()),
        pa.field("assignment_size", pa.int32()),
    ]
)

CONSUMER_OFFSETS_SCHEMA = pa.schema(
    [
        pa.field("batch_position", pa.int64()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.int64()),  # ms, the record's
        pa.field("record_type", pa.string()),
        pa.field("key_version", pa.int16()),
        pa.field("value_version", pa.int16()),  # null for a tombstone
        pa.field("tombstone", pa.bool_()),
        pa.field("group", pa.string()),
        pa.field("member_id", pa.string()),  # KIP-848/932 member keys only
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("committed_offset", pa.int64()),
        pa.field("committed_leader_epoch", pa.int32()),
        pa.field("commit_timestamp", pa.int64()),  # ms
        pa.field("expire_timestamp", pa.int64()),  # ms, value v1 only
        pa.field("metadata", pa.string()),  # the commit's metadata string
        pa.field("protocol_type", pa.string()),
        pa.field("generation", pa.int32()),
        pa.field("protocol", pa.string()),
        pa.field("leader", pa.string()),
        pa.field("current_state_timestamp", pa.int64()),  # ms, value v2+
        pa.field("members", pa.int32()),
        pa.field("member_details", pa.list_(MEMBER_TYPE)),
        pa.field("group_type", pa.string()),  # classic | consumer | share | streams; null for an offset commit
        pa.field("topic_id", pa.string()),  # the committed topic's id (OffsetCommitValue v4, Kafka 4)
        pa.field("epoch", pa.int32()),  # KIP-848/932/1071: group, assignment, member or topology epoch
        pa.field("regular_expression", pa.string()),  # ConsumerGroupRegularExpression's key
        pa.field("data_json", pa.string()),  # KIP-848/932/1071 values as Kafka's JSON (kafka-dump-log's "data")
        pa.field("error", pa.string()),
        pa.field("raw_hex", pa.string()),
    ]
)

# ---------------------------------------------------------------- helpers shared with transaction_state.py


def raw_hex(key: bytes | None, value: bytes | None) -> str:
    """Key hex, ``|``, value hex (``null`` for a null side), each capped at RAW_HEX_CAP bytes (``…`` = cut)."""

    def side(b: bytes | None) -> str:
        if b is None:
            return "null"
        return b[:RAW_HEX_CAP].hex() + ("…" if len(b) > RAW_HEX_CAP else "")

    return f"{side(key)}|{side(value)}"


def version_prefix(b: bytes) -> int | None:
    """The int16 version in front of a key or value; None when fewer than 2 bytes."""
    return int.from_bytes(b[:2], "big", signed=True) if len(b) >= 2 else None


def b64_size(s: str) -> int:
    """Byte length of a base64 string (kafka_messages returns ``bytes`` fields that way)."""
    return len(s) * 3 // 4 - s[-2:].count("=") if s else 0


def none_if(value, sentinel=-1):
    """Kafka's "none": the field is absent from the version, or holds the -1 sentinel."""
    return None if value is None or value == sentinel else value


def record_position(records: pa.Table) -> list[int]:
    """Each record's byte position (its batch's inside compressed batches, where records have none)."""
    pos = records.column("position").to_pylist() if "position" in records.column_names else None
    batch = records.column("batch_position").to_pylist()
    return [p if p is not None else b for p, b in zip(pos or batch, batch, strict=True)]


# ---------------------------------------------------------------- decoding


def _offset_commit(row: dict, data: dict) -> None:
    row["committed_offset"] = data["offset"]
    row["committed_leader_epoch"] = none_if(data.get("leaderEpoch"))
    row["metadata"] = data["metadata"]
    row["commit_timestamp"] = data["commitTimestamp"]
    row["expire_timestamp"] = none_if(data.get("expireTimestamp"))
    if data.get("topicId") is not None:  # written only when not the zero uuid (v4, Kafka 4)
        row["topic_id"] = data["topicId"]


def _group_metadata(row: dict, data: dict) -> None:
    row["protocol_type"] = data["protocolType"]
    row["generation"] = data["generation"]
    row["protocol"] = data["protocol"]
    row["leader"] = data["leader"]
    row["current_state_timestamp"] = none_if(data.get("currentStateTimestamp"))
    members = data["members"]
    row["members"] = len(members)
    row["member_details"] = [
        {
            "member_id": m["memberId"],
            "group_instance_id": m.get("groupInstanceId"),
            "client_id": m["clientId"],
            "client_host": m["clientHost"],
            "rebalance_timeout_ms": m.get("rebalanceTimeout"),
            "session_timeout_ms": m["sessionTimeout"],
            "subscription_size": b64_size(m["subscription"]),
            "assignment_size": b64_size(m["assignment"]),
        }
        for m in members
    ]


def _group_record(row: dict, record_type: int, data: dict) -> None:
    """A KIP-848/932/1071 value: its epoch and member columns, and the whole value as Kafka's JSON.
    A classic member's protocol metadata (its subscription, ``ClassicMemberMetadata``) is kept as
    a size, as GroupMetadataValue's subscriptions are."""
    field = EPOCH_FIELD.get(record_type)
    if field is not None:
        row["epoch"] = data[field]
    if "clientId" in data:  # a member's metadata
        classic = data.get("classicMemberMetadata")
        if classic is not None:
            for p in classic["supportedProtocols"]:
                p["metadataSize"] = b64_size(p.pop("metadata"))
        row["member_details"] = [{
            "member_id": row["member_id"],
            "group_instance_id": data.get("instanceId"),
            "client_id": data["clientId"],
            "client_host": data["clientHost"],
            "rebalance_timeout_ms": data.get("rebalanceTimeoutMs"),
            "session_timeout_ms": classic["sessionTimeoutMs"] if classic is not None else None,
        }]  # fmt: skip
    row["data_json"] = to_json(data)


def _decode_value(row: dict, record_type: int, spec, value: bytes) -> str | None:
    """Fill ``row`` from the record's value; returns a trailing-bytes note."""
    version = row["value_version"]
    data, end = decode(spec, value, version, pos=2)
    if record_type in (0, 1):
        _offset_commit(row, data)
    elif record_type == 2:
        _group_metadata(row, data)
    else:
        _group_record(row, record_type, data)
    if end < len(value):
        return f"{len(value) - end} bytes after {spec.name} v{version} (Kafka ignores them)"
    return None


def decode_record(key: bytes | None, value: bytes | None) -> tuple[dict, str | None]:
    """One record's key and value -> (row fields, damage detail or None). Never raises."""
    row: dict = {"tombstone": value is None, "record_type": "unknown"}
    if key is None:
        row["error"] = "record has no key"
        row["raw_hex"] = raw_hex(key, value)
        return row, row["error"]
    kv = version_prefix(key)
    row["key_version"] = kv
    if kv is None:
        row["error"] = f"key of {len(key)} bytes has no version"
        row["raw_hex"] = raw_hex(key, value)
        return row, row["error"]
    if value is not None:
        row["value_version"] = version_prefix(value)
    known = RECORD_TYPES.get(kv)
    if known is None:  # Kafka 4.1's loader skips an unknown record type
        row["error"] = f"unknown record type (key version) {kv}"
        row["raw_hex"] = raw_hex(key, value)
        return row, None
    row["record_type"] = known.name
    row["group_type"] = known.group_type
    try:
        k, kend = decode(known.key, key, 0, pos=2)  # a key has one version (0), whatever its type
    except MessageError as e:
        row["error"] = f"{known.key.name}: {e}"
        row["raw_hex"] = raw_hex(key, value)
        return row, row["error"]
    row["group"] = k.get("group", k.get("groupId"))
    row["member_id"] = k.get("memberId")
    row["topic"] = k.get("topic")
    row["partition"] = k.get("partition")
    row["regular_expression"] = k.get("regularExpression")
    notes = [f"{len(key) - kend} bytes after the key (Kafka ignores them)"] if kend < len(key) else []
    if value is not None:
        vv = row["value_version"]
        spec = known.value
        if vv is None:
            row["error"] = f"value of {len(value)} bytes has no version"
            row["raw_hex"] = raw_hex(key, value)
            return row, row["error"]
        if not spec.supports(vv):
            row["error"] = f"unknown {spec.name} version {vv}"
            row["raw_hex"] = raw_hex(key, value)
            return row, None
        try:
            note = _decode_value(row, kv, spec, value)
        except MessageError as e:
            row["error"] = f"{spec.name} v{vv}: {e}"
            row["raw_hex"] = raw_hex(key, value)
            return row, row["error"]
        if note:
            notes.append(note)
    if notes:
        row["error"] = "; ".join(notes)
    return row, None


def decode_records(records: pa.Table) -> tuple[pa.Table, list[Problem]]:
    """Decode a ``__consumer_offsets`` segment's records (``segment.parse(..., records=True,
    payloads=True).extra["records"]``) into CONSUMER_OFFSETS_SCHEMA rows, skipping control records.

    Never raises on bad bytes: a record that cannot be read keeps its raw hex and adds an
    ``invalid_record`` problem at its byte position."""
    return decode_keyed_records(records, decode_record, CONSUMER_OFFSETS_SCHEMA, "__consumer_offsets")


def decode_keyed_records(records: pa.Table, decode_one, schema: pa.Schema, topic: str) -> tuple[pa.Table, list[Problem]]:
    """The record loop both coordinator topics share: ``decode_one(key, value) -> (row, damage)``
    per data record (control records skipped), the record's place added to its row, and one
    ``invalid_record`` problem per damaged record at its byte position."""
    keys = records.column("key").to_pylist()
    values = records.column("value").to_pylist()
    control = records.column("control_type").to_pylist()
    offsets = records.column("offset").to_pylist()
    batches = records.column("batch_position").to_pylist()
    stamps = records.column("timestamp").to_pylist()
    positions = record_position(records)
    rows: list[dict] = []
    problems: list[Problem] = []
    for i, (key, value) in enumerate(zip(keys, values, strict=True)):
        if control[i] is not None:
            continue
        row, damage = decode_one(key, value)
        row["batch_position"], row["offset"], row["timestamp"] = batches[i], offsets[i], stamps[i]
        rows.append(row)
        if damage:
            problems.append(Problem(positions[i], INVALID_RECORD, f"{topic} record at offset {offsets[i]}: {damage}"))
    return pa.Table.from_pylist(rows, schema=schema), problems
