"""``__consumer_offsets`` records: who committed which offset, and what each group looked like.

Every record of the group coordinator's topic is ``key = int16 version + message`` and
``value = int16 version + message`` (``MessageUtil.toVersionPrefixedBytes``); the *key* version says
what the record is, the value version how that kind evolved:

    key 0, 1  OffsetCommitKey (group, topic, partition)          -> OffsetCommitValue v0-v4
    key 2     GroupMetadataKey (group)                           -> GroupMetadataValue v0-v4
    key 3-8   KIP-848 consumer-group records (GroupId [, MemberId])
    key 9-15  KIP-932 share-group records (as of Kafka trunk, October 2024)
    value null                                                   -> tombstone (offset deleted / group gone)

Field layouts come from Kafka's message definitions (``group-coordinator/.../common/message/``);
``GroupMetadataManager.readMessageKey``/``readOffsetMessageValue``/``readGroupMessageValue`` give the
version dispatch. v4 of both values is the first flexible version (compact strings, tagged fields),
which Kafka reads but did not write before 4.0. Why this table exists: the offsets a group last
committed, and when, are evidence of what a consumer had processed before an incident; the group
records show who was in the group (member, client id, host) and at which generation.

Choices, each so that a value means what Kafka means by it:
  * ``committed_leader_epoch``, ``expire_timestamp``, ``current_state_timestamp`` are null where Kafka
    reads "none": the field is absent from that value version, or holds Kafka's -1 sentinel
    (``readOffsetMessageValue`` maps -1 to ``Optional.empty``/``None``, ``readGroupMessageValue``
    likewise).
  * Member subscription and assignment bytes are kept as sizes only (``member_details``): they may
    name topics a client was not meant to see, and their layout belongs to the client's protocol.
  * KIP-848/KIP-932 records (keys 3-15): the key is decoded (group, member id), the value is kept
    raw (its version and hex); ``record_type`` names the kind.
  * Unknown key or value versions (a newer Kafka) are not damage: ``error`` says so and ``raw_hex``
    keeps the bytes, with no problem row. Bytes that cannot be read at their stated version are
    damage: ``error``, ``raw_hex`` and an ``invalid_record`` problem at the record's position.
  * Bytes after a complete message are ignored by Kafka's reader; we decode the message and say so
    in ``error`` (no problem row: Kafka would load the record).
"""

from __future__ import annotations

import pyarrow as pa

from .common import Problem
from .kafka_messages import F, Message, MessageError, decode

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
        pa.field("error", pa.string()),
        pa.field("raw_hex", pa.string()),
    ]
)

# ---------------------------------------------------------------- message specs (Kafka's JSON, in Python)

OFFSET_COMMIT_KEY = Message(
    "OffsetCommitKey",
    valid="0-1",
    fields=[F("group", "string"), F("topic", "string"), F("partition", "int32")],
)
GROUP_METADATA_KEY = Message("GroupMetadataKey", valid="2", fields=[F("group", "string")])
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


def _group_key(version: int, member: bool) -> Message:
    fields = [F("GroupId", "string")] + ([F("MemberId", "string")] if member else [])
    return Message(f"key{version}", valid=str(version), fields=fields)


# key version -> (record_type, key spec); keys 3+ follow the group coordinator's record types
_KIP_KEYS = {
    3: ("consumer_group_metadata", False),
    4: ("consumer_group_partition_metadata", False),
    5: ("consumer_group_member_metadata", True),
    6: ("consumer_group_target_assignment_metadata", False),
    7: ("consumer_group_target_assignment_member", True),
    8: ("consumer_group_current_member_assignment", True),
    9: ("share_group_partition_metadata", False),
    10: ("share_group_member_metadata", True),
    11: ("share_group_metadata", False),
    12: ("share_group_target_assignment_metadata", False),
    13: ("share_group_target_assignment_member", True),
    14: ("share_group_current_member_assignment", True),
    15: ("share_group_state_partition_metadata", False),
}
KEYS: dict[int, tuple[str, Message]] = {
    0: ("offset_commit", OFFSET_COMMIT_KEY),
    1: ("offset_commit", OFFSET_COMMIT_KEY),
    2: ("group_metadata", GROUP_METADATA_KEY),
    **{v: (name, _group_key(v, member)) for v, (name, member) in _KIP_KEYS.items()},
}
VALUES: dict[str, Message] = {"offset_commit": OFFSET_COMMIT_VALUE, "group_metadata": GROUP_METADATA_VALUE}


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


def _decode_value(row: dict, record_type: str, value: bytes) -> str | None:
    """Fill ``row`` from an OffsetCommitValue or GroupMetadataValue; returns a trailing-bytes note."""
    version = row["value_version"]
    data, end = decode(VALUES[record_type], value, version, pos=2)
    if record_type == "offset_commit":
        row["committed_offset"] = data["offset"]
        row["committed_leader_epoch"] = none_if(data.get("leaderEpoch"))
        row["metadata"] = data["metadata"]
        row["commit_timestamp"] = data["commitTimestamp"]
        row["expire_timestamp"] = none_if(data.get("expireTimestamp"))
    else:
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
    if end < len(value):
        return f"{len(value) - end} bytes after {VALUES[record_type].name} v{version} (Kafka ignores them)"
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
    known = KEYS.get(kv) if kv is not None else None
    if kv is None:
        row["error"] = f"key of {len(key)} bytes has no version"
        row["raw_hex"] = raw_hex(key, value)
        return row, row["error"]
    if value is not None:
        row["value_version"] = version_prefix(value)
    if known is None:
        row["error"] = f"unknown key version {kv}"
        row["raw_hex"] = raw_hex(key, value)
        return row, None
    record_type, key_spec = known
    row["record_type"] = record_type
    try:
        k, kend = decode(key_spec, key, kv, pos=2)
    except MessageError as e:
        row["error"] = f"{key_spec.name} v{kv}: {e}"
        row["raw_hex"] = raw_hex(key, value)
        return row, row["error"]
    row["group"] = k.get("group", k.get("groupId"))
    row["member_id"] = k.get("memberId")
    row["topic"] = k.get("topic")
    row["partition"] = k.get("partition")
    notes = [f"{len(key) - kend} bytes after the key (Kafka ignores them)"] if kend < len(key) else []
    if value is not None:
        vv = row["value_version"]
        spec = VALUES.get(record_type)
        if vv is None:
            row["error"] = f"value of {len(value)} bytes has no version"
            row["raw_hex"] = raw_hex(key, value)
            return row, row["error"]
        if spec is None:
            row["raw_hex"] = raw_hex(None, value)  # value layout not decoded (KIP-848/932 records)
        elif not spec.supports(vv):
            row["error"] = f"unknown {spec.name} version {vv}"
            row["raw_hex"] = raw_hex(key, value)
            return row, None
        else:
            try:
                note = _decode_value(row, record_type, value)
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
