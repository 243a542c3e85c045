"""``__remote_log_metadata`` records: where tiered storage (KIP-405) put each remote segment.

    key   = null (TopicBasedRemoteLogMetadataManager writes none)
    value = frameVersion:uvarint=1 apiKey:uvarint version:uvarint message   (RemoteLogMetadataSerde,
            framed by AbstractApiMessageSerde like a KRaft metadata record)
    apiKey 0 RemoteLogSegmentMetadataRecord v0 => RemoteLogSegmentId {TopicIdPartition {Name, Id,
             Partition}, Id} StartOffset EndOffset BrokerId MaxTimestampMs EventTimestampMs
             SegmentLeaderEpochs [LeaderEpoch, Offset] SegmentSizeInBytes CustomMetadata RemoteLogSegmentState
    apiKey 1 RemoteLogSegmentMetadataUpdateRecord v0 => RemoteLogSegmentId BrokerId EventTimestampMs
             CustomMetadata RemoteLogSegmentState
    apiKey 2 RemotePartitionDeleteMetadataRecord v0 => TopicIdPartition BrokerId EventTimestampMs
             RemotePartitionDeleteState
    (``storage/src/main/resources/message/*.json``; every one is flexible and has only version 0
    up to Kafka 4.0)

Why: with tiered storage a partition's log start can lie far below its first local segment; the
records between are in remote storage, and this topic is the only account of which ranges were
copied (COPY_SEGMENT_FINISHED) and which deleted. Without it they look lost.

Choices:
  * One row per record (an event log, as Kafka replays it); a segment's state is its latest row.
    ``broker`` is the files' broker, so the record's BrokerId is ``event_broker``.
  * ``topic``/``partition`` are the tiered partition's (the row's own), not ``__remote_log_metadata``'s.
  * ``state_name`` follows RemoteLogSegmentState (records 0, 1) or RemotePartitionDeleteState (2).
  * ``custom_metadata`` is kept as its size only (it is the remote storage plugin's opaque bytes).
  * An unknown apiKey or version, or damaged bytes, keeps raw hex and its reason in ``error``;
    damage adds an ``invalid_record`` problem (an unknown version alone does not: a newer Kafka).
"""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa

from .common import Problem
from .consumer_offsets import b64_size, decode_keyed_records, raw_hex
from .kafka_messages import F, Message
from .metadata_records import _short, _type_name, decode_framed

SEGMENT_STATES = ("COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED", "DELETE_SEGMENT_FINISHED")
PARTITION_DELETE_STATES = ("DELETE_PARTITION_MARKED", "DELETE_PARTITION_STARTED", "DELETE_PARTITION_FINISHED")
COPY_SEGMENT_FINISHED = SEGMENT_STATES[1]
SEGMENT_RECORD = "REMOTE_LOG_SEGMENT_METADATA_RECORD"  # MetadataRecordType name of apiKey 0

_TOPIC_ID_PARTITION = [F("Name", "string"), F("Id", "uuid"), F("Partition", "int32")]
_SEGMENT_ID = F("RemoteLogSegmentId", "RemoteLogSegmentIdEntry", fields=[
    F("TopicIdPartition", "TopicIdPartitionEntry", fields=_TOPIC_ID_PARTITION), F("Id", "uuid")])


def _m(name: str, fields: list[F]) -> Message:
    return Message(name, flexible="0+", valid="0", fields=fields)


RECORDS: dict[int, Message] = {
    0: _m("RemoteLogSegmentMetadataRecord", [
        _SEGMENT_ID, F("StartOffset", "int64"), F("EndOffset", "int64"), F("BrokerId", "int32"),
        F("MaxTimestampMs", "int64"), F("EventTimestampMs", "int64"),
        F("SegmentLeaderEpochs", "[]", fields=[F("LeaderEpoch", "int32"), F("Offset", "int64")]),
        F("SegmentSizeInBytes", "int32"), F("CustomMetadata", "bytes", nullable="0+", default=None),
        F("RemoteLogSegmentState", "int8")]),
    1: _m("RemoteLogSegmentMetadataUpdateRecord", [
        _SEGMENT_ID, F("BrokerId", "int32"), F("EventTimestampMs", "int64"),
        F("CustomMetadata", "bytes", nullable="0+", default=None), F("RemoteLogSegmentState", "int8")]),
    2: _m("RemotePartitionDeleteMetadataRecord", [
        F("TopicIdPartition", "TopicIdPartitionEntry", fields=_TOPIC_ID_PARTITION),
        F("BrokerId", "int32"), F("EventTimestampMs", "int64"), F("RemotePartitionDeleteState", "int8")]),
}  # fmt: skip
TYPE_NAMES: dict[int, str] = {k: _type_name(m.name) for k, m in RECORDS.items()}
MAX_VERSIONS: dict[int, int] = {k: 0 for k in RECORDS}

REMOTE_SEGMENTS_SCHEMA = pa.schema(
    [
        pa.field("batch_position", pa.int64()),
        pa.field("offset", pa.int64()),  # of the record in __remote_log_metadata
        pa.field("timestamp", pa.int64()),  # ms, the record's
        pa.field("record_type", pa.string()),  # REMOTE_LOG_SEGMENT_METADATA_RECORD, ..._UPDATE_RECORD, REMOTE_PARTITION_DELETE_METADATA_RECORD
        pa.field("api_key", pa.int16()),
        pa.field("version", pa.int16()),
        pa.field("topic", pa.string()),  # the tiered partition's
        pa.field("topic_id", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("segment_id", pa.string()),  # null for a partition delete
        pa.field("start_offset", pa.int64()),  # segment metadata only
        pa.field("end_offset", pa.int64()),  # inclusive
        pa.field("event_broker", pa.int32()),
        pa.field("event_timestamp_ms", pa.int64()),
        pa.field("max_timestamp_ms", pa.int64()),
        pa.field("segment_leader_epochs", pa.list_(pa.struct([pa.field("leader_epoch", pa.int32()), pa.field("offset", pa.int64())]))),
        pa.field("segment_size_bytes", pa.int32()),
        pa.field("custom_metadata_size", pa.int32()),  # null when null
        pa.field("state", pa.int8()),
        pa.field("state_name", pa.string()),
        pa.field("error", pa.string()),
        pa.field("raw_hex", pa.string()),
    ]
)


def _fill(row: dict, api_key: int, data: dict) -> None:
    """Copy a decoded record's fields into ``row`` under REMOTE_SEGMENTS_SCHEMA's names."""
    if api_key == 2:
        tp = data["topicIdPartition"]
        state, names = data["remotePartitionDeleteState"], PARTITION_DELETE_STATES
    else:
        tp = data["remoteLogSegmentId"]["topicIdPartition"]
        row["segment_id"] = data["remoteLogSegmentId"]["id"]
        state, names = data["remoteLogSegmentState"], SEGMENT_STATES
        custom = data["customMetadata"]
        row["custom_metadata_size"] = None if custom is None else b64_size(custom)
    row["topic"], row["topic_id"], row["partition"] = tp["name"], tp["id"], tp["partition"]
    row["event_broker"], row["event_timestamp_ms"], row["state"] = data["brokerId"], data["eventTimestampMs"], state
    row["state_name"] = names[state] if 0 <= state < len(names) else None
    if api_key == 0:
        row["start_offset"], row["end_offset"] = data["startOffset"], data["endOffset"]
        row["max_timestamp_ms"], row["segment_size_bytes"] = data["maxTimestampMs"], data["segmentSizeInBytes"]
        row["segment_leader_epochs"] = [{"leader_epoch": e["leaderEpoch"], "offset": e["offset"]} for e in data["segmentLeaderEpochs"]]


def sanity_check_segment(row: dict) -> str | None:
    """The checks of RemoteLogSegmentMetadata's constructor, which Kafka's serde runs on every
    RemoteLogSegmentMetadataRecord it reads: a record failing them cannot be loaded."""
    start, end = row["start_offset"], row["end_offset"]
    if start < 0:
        return f"start offset {start} is negative"
    if end < start:
        return f"end offset {end} is below start offset {start}"
    if not row["segment_leader_epochs"]:
        return "segmentLeaderEpochs is empty"
    return None


def decode_record(key: bytes | None, value: bytes | None) -> tuple[dict, str | None]:
    """One record -> (row fields, damage detail or None). Never raises."""
    name, api_key, version, data, error = decode_framed(value, RECORDS, TYPE_NAMES, MAX_VERSIONS)
    # a frame's apiKey/version are unsigned varints: one past a short is damage, kept null (not cast)
    row: dict = {"record_type": name, "api_key": _short(api_key) if api_key >= 0 else None, "version": _short(version) if version >= 0 else None}
    if data is None:
        row["error"], row["raw_hex"] = error, raw_hex(key, value)
        newer = api_key in RECORDS and MAX_VERSIONS[api_key] < version <= 0x7FFF
        return row, None if newer else error
    _fill(row, api_key, data)
    if row["state_name"] is None:
        # RemoteLogSegmentState.forId / RemotePartitionDeleteState.forId return null: Kafka's
        # transform then fails on it
        row["error"] = f"unknown state {row['state']}"
    elif api_key == 0:
        row["error"] = sanity_check_segment(row)
    if row.get("error"):
        row["raw_hex"] = raw_hex(key, value)
        return row, row["error"]
    return row, None


def decode_records(records: pa.Table) -> tuple[pa.Table, list[Problem]]:
    """Decode a ``__remote_log_metadata`` segment's records into REMOTE_SEGMENTS_SCHEMA rows."""
    return decode_keyed_records(records, decode_record, REMOTE_SEGMENTS_SCHEMA, "__remote_log_metadata")


def latest_segments(rows) -> dict[tuple[str, int], list[dict]]:
    """Per tiered partition, each remote segment's bounds and latest state: its events replayed in
    ``__remote_log_metadata`` order, as RemoteLogMetadataCache does (every event of a segment is
    in one metadata partition, so offsets order them; the copies several collected replicas hold
    collapse). ``rows``: remote_segments rows (dicts or Spark Rows). Partition deletes, damaged rows
    and updates of a segment whose metadata record is missing (no bounds) are left out."""
    usable = [r for r in rows if isinstance(r["segment_id"], str) and not isinstance(r["error"], str)]
    segments: dict[str, dict] = {}
    for r in sorted(usable, key=lambda r: r["offset"]):
        seg = segments.setdefault(r["segment_id"], {"topic": r["topic"], "partition": r["partition"], "segment_id": r["segment_id"]})
        if r["record_type"] == SEGMENT_RECORD:
            seg["start_offset"], seg["end_offset"] = int(r["start_offset"]), int(r["end_offset"])
        seg.update(state=r["state_name"], broker=r["broker"], path=r["path"], position=r["batch_position"])
    out: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for seg in segments.values():
        if "start_offset" in seg:
            out[(seg["topic"], int(seg["partition"]))].append(seg)
    return dict(out)
