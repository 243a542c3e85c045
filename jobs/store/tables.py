"""The schemas of the tables ``ingest`` writes, derived from the parsers' own schemas, and of the
job tables ``analyze`` writes beside them.

Why derived: a column added to a parser shows up in its table (and in docs/tables.md, which
``python -m jobs.store.tables_doc`` generates from this module) without a second list to keep in step.
Every table parsed from a file gets the common columns in front (docs/design.md): ``broker``,
``log_dir``, ``topic``, ``partition`` (of the partition directory holding the file), ``dir_state``
and ``path`` (relative to the input root). ``checkpoints`` is the exception: its file is
broker-level and its ``topic``/``partition`` are the entry's.
"""

from __future__ import annotations

import pyarrow as pa

from parsers import (
    broker_log,
    clean_shutdown,
    consumer_offsets,
    leader_epoch_checkpoint,
    meta_properties,
    metadata_records,
    offset_checkpoint,
    offset_index,
    partition_metadata,
    producer_snapshot,
    remote_log_metadata,
    segment,
    share_group_state,
    time_index,
    transaction_index,
    transaction_state,
)
from parsers._index import INFO_SCHEMA
from parsers.common import PROBLEM_SCHEMA

TS = pa.timestamp("us", tz="UTC")  # Spark's TimestampType as Arrow carries it

COMMON = [
    pa.field("broker", pa.int32()),
    pa.field("log_dir", pa.string()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("dir_state", pa.string()),
    pa.field("path", pa.string()),
]


def _with_common(schema: pa.Schema, extra: list[pa.Field] = ()) -> pa.Schema:
    """COMMON in front; a parser column of the same name as a common one (a consumer commit's or a
    log line's own topic/partition) takes its place and must have its type."""
    own = [f for f in schema if f.name not in {c.name for c in COMMON}]
    return pa.schema(COMMON + own + list(extra))


def records_schema(payloads: bool = False) -> pa.Schema:
    """Spark's Kafka-source names (topic, partition, offset, timestamp, timestampType, key, value)
    plus broker and what the segment parser knows about each record."""
    own = [f for f in segment.RECORD_SCHEMA if f.name not in ("offset", "timestamp")]
    fields = COMMON + [
        pa.field("offset", pa.int64()),
        pa.field("timestamp", TS),  # null when the stored value is -1 (NO_TIMESTAMP) or out of range
        pa.field("timestampType", pa.int32()),  # 0 CreateTime, 1 LogAppendTime, null for v0
        pa.field("timestamp_ms", pa.int64()),  # as stored
        pa.field("leader_epoch", pa.int32()),  # the batch's partition_leader_epoch (null for v0/v1)
        pa.field("producer_id", pa.int64()),
        pa.field("is_transactional", pa.bool_()),
    ] + own
    if payloads:
        fields += list(segment.PAYLOAD_FIELDS)
    return pa.schema(fields)


CHECKPOINTS = pa.schema([COMMON[0], COMMON[1], COMMON[5]] + [f for f in offset_checkpoint.SCHEMA if f.name != "path"])

# Runs of contiguous batches of one leader epoch, summed by the task that parsed them
# (``jobs.ingest.batch_runs``): what the per-replica jobs read instead of every batch.
BATCH_RUN_SCHEMA = pa.schema([
    pa.field("first_offset", pa.int64()),  # the first batch's base offset
    pa.field("last_offset", pa.int64()),  # the highest last offset
    pa.field("end_offset", pa.int64()),  # the last batch's last offset (where the next run must start, + 1)
    pa.field("last_base_offset", pa.int64()),  # the last batch's base offset
    pa.field("partition_leader_epoch", pa.int32()),  # null for v0/v1
    pa.field("position", pa.int64()),  # the first batch's
    pa.field("batches", pa.int64()),
    pa.field("records", pa.int64()),  # data records (record_count of non-control batches)
    pa.field("control_records", pa.int64()),
    pa.field("record_count", pa.int64()),  # all records, control ones too
    pa.field("bytes", pa.int64()),
    pa.field("first_timestamp", pa.int64()),  # min of the batches' max_timestamp
    pa.field("last_timestamp", pa.int64()),  # max of the batches' max_timestamp
    pa.field("min_magic", pa.int8()),
    pa.field("max_magic", pa.int8()),
    pa.field("record_holes", pa.bool_()),  # a v2 batch with fewer records than offsets (compaction); null: no v2 batch
    pa.field("readable", pa.int64()),  # batches whose CRC is valid (or not checked)
    *[pa.field(f"digest_{i}", pa.int64()) for i in range(4)],  # sums of batch_runs.digest_parts over the readable batches
])
# Per piece of a segment and producer epoch, sums of its batches' sequence numbers, summed by the
# task that parsed them (``jobs.ingest.producer_epoch_sums``): what the producers and transactions
# detectors read instead of every batch of every producer.
PRODUCER_EPOCH_SUM_SCHEMA = pa.schema([
    pa.field("producer_id", pa.int64()),  # >= 0 (batches without a producer id have no row)
    pa.field("producer_epoch", pa.int16()),
    pa.field("data_batches", pa.int64()),  # non-control batches with a base sequence >= 0
    pa.field("min_base_sequence", pa.int64()),  # of the data batches (null: none)
    pa.field("max_end_sequence", pa.int64()),  # highest last sequence + 1
    pa.field("min_sequence_span", pa.int64()),  # lowest last sequence + 1 - base sequence
    pa.field("base_sequence_sum", pa.int64()),
    pa.field("end_sequence_sum", pa.int64()),  # sum of last sequence + 1
    *[pa.field(f"base_sequence_hash_{i}", pa.int64()) for i in range(2)],  # sums of producer_epoch_sums.sequence_hash_slices
    *[pa.field(f"end_sequence_hash_{i}", pa.int64()) for i in range(2)],
    pa.field("last_marker_offset", pa.int64()),  # base offset of the last control batch (COMMIT/ABORT)
    pa.field("last_txn_data_offset", pa.int64()),  # base offset of the last transactional data batch
])
SCHEMAS: dict[str, pa.Schema] = {
    "files": pa.schema(COMMON + [
        pa.field("kind", pa.string()),  # parsers.names.detect_kind; null: not a Kafka file name
        pa.field("size", pa.int64()),
        pa.field("sha256", pa.string()),  # computed while the file is parsed; null if unreadable
        pa.field("mtime", TS),
        pa.field("archive", pa.string()),  # the archive it came from, if any
    ]),
    "batches": _with_common(segment.BATCH_SCHEMA, [
        pa.field("segment_base_offset", pa.int64()),  # from the file name
        pa.field("file_kind", pa.string()),  # segment | kraft_snapshot | bootstrap_checkpoint
    ]),
    "batch_runs": _with_common(BATCH_RUN_SCHEMA, [
        pa.field("segment_base_offset", pa.int64()),
        pa.field("file_kind", pa.string()),
    ]),
    "producer_epoch_sums": _with_common(PRODUCER_EPOCH_SUM_SCHEMA, [
        pa.field("segment_base_offset", pa.int64()),
        pa.field("file_kind", pa.string()),
    ]),
    "records": records_schema(False),
    "index_entries": _with_common(offset_index.SCHEMA),
    "time_index_entries": _with_common(time_index.SCHEMA),
    "txn_index_entries": _with_common(transaction_index.SCHEMA),
    "index_files": _with_common(INFO_SCHEMA, [pa.field("index_kind", pa.string())]),
    "producer_states": _with_common(producer_snapshot.SCHEMA),
    "checkpoints": CHECKPOINTS,
    "leader_epochs": _with_common(leader_epoch_checkpoint.SCHEMA),
    "partition_metadata": _with_common(partition_metadata.SCHEMA),
    "meta_properties": _with_common(meta_properties.SCHEMA),
    "clean_shutdown": _with_common(clean_shutdown.SCHEMA),
    "problems": _with_common(PROBLEM_SCHEMA),
    # decoded internal topics: one row per record of __cluster_metadata (log and snapshots),
    # __consumer_offsets and __transaction_state, on every replica that holds it
    "metadata_records": _with_common(metadata_records.METADATA_RECORDS_SCHEMA, [
        pa.field("file_kind", pa.string()),  # segment | kraft_snapshot | bootstrap_checkpoint
        pa.field("snapshot_end_offset", pa.int64()),  # snapshots: the metadata offset they stand for
    ]),
    "consumer_offsets": _with_common(consumer_offsets.CONSUMER_OFFSETS_SCHEMA),
    "transactions": _with_common(transaction_state.TRANSACTIONS_SCHEMA),
    # __share_group_state (KIP-932 share groups): topic is null (the record names the topic by
    # id, topic_id); partition is the share-partition's
    "share_group_state": _with_common(share_group_state.SHARE_GROUP_STATE_SCHEMA),
    # __remote_log_metadata (tiered storage): one row per remote segment event; topic/partition
    # are the tiered partition's
    "remote_segments": _with_common(remote_log_metadata.REMOTE_SEGMENTS_SCHEMA),
    # interesting lines of server.log / controller.log / state-change.log (rotated, gzipped)
    # (the parser's ``broker``, the broker a controller line is about, is ``subject_broker`` here)
    "log_events": _with_common(pa.schema([f.with_name("subject_broker") if f.name == "broker" else f for f in broker_log.LOG_EVENTS_SCHEMA]),
                               [pa.field("log_kind", pa.string())]),
}

# the discovery table, built on the driver (a handful of rows)
BROKERS = pa.schema([
    pa.field("broker", pa.int32()),
    pa.field("cluster_id", pa.string()),
    pa.field("directory_ids", pa.list_(pa.string())),
    pa.field("log_dirs", pa.list_(pa.string())),
    pa.field("id_source", pa.string()),  # meta.properties | folder
    pa.field("roles", pa.string()),  # broker | controller (guessed from the files)
    pa.field("files", pa.int64()),
    pa.field("bytes", pa.int64()),
])

# parser output table (by kind) -> ingest table
KIND_TABLE: dict[str, str] = {
    "segment": "batches",
    "kraft_snapshot": "batches",
    "bootstrap_checkpoint": "batches",
    "offset_index": "index_entries",
    "time_index": "time_index_entries",
    "txn_index": "txn_index_entries",
    "producer_snapshot": "producer_states",
    "replication_offset": "checkpoints",
    "recovery_point": "checkpoints",
    "log_start": "checkpoints",
    "cleaner": "checkpoints",
    "leader_epoch": "leader_epochs",
    "partition_metadata": "partition_metadata",
    "meta_properties": "meta_properties",
    "clean_shutdown": "clean_shutdown",
    "broker_log": "log_events",
}
# segments of these topics are also decoded record by record into their own table
INTERNAL_TOPIC_TABLE: dict[str, str] = {
    "__cluster_metadata": "metadata_records",
    "__consumer_offsets": "consumer_offsets",
    "__transaction_state": "transactions",
    "__share_group_state": "share_group_state",
    "__remote_log_metadata": "remote_segments",
}
EXTRA_TABLE = {"records": "records", "index_info": "index_files"}

# ---- the job tables ``analyze`` writes beside them ---------------------------------------------
# findings and restart_preview are rows the driver computed, handed to Spark in these schemas
# (``jobs.store.io.local_frame``); a finding's fields are the contract's (findings.json). The
# others are what their Spark jobs write (jobs/replicas, jobs/history), declared here so
# docs/tables.md documents every table of an analyzed DIR; tests/test_cli_analyze.py checks each
# against the Parquet a real run writes.
INTS = pa.list_(pa.int32())

REPLICA_LOGS_SCHEMA = pa.schema([  # jobs.replicas.replica_logs: one row per replica
    ("topic", pa.string()), ("partition", pa.int32()), ("broker", pa.int32()), ("log_dir", pa.string()),
    ("dir_state", pa.string()), ("topic_id", pa.string()),
    ("segments", pa.int64()), ("first_segment_offset", pa.int64()),
    ("log_start_checkpoint", pa.int64()),  # the log-start-offset-checkpoint entry
    ("log_start_offset", pa.int64()),  # max(that entry, the first segment's base offset), as LogLoader
    ("first_offset", pa.int64()),  # of the first batch
    ("leo", pa.int64()),  # log end offset: the end of the last valid batch
    ("hw_checkpoint", pa.int64()), ("recovery_point", pa.int64()), ("cleaner_offset", pa.int64()),
    ("epoch_entries", pa.list_(pa.struct([("epoch", pa.int32()), ("start_offset", pa.int64())]))),  # leader-epoch-checkpoint
    ("first_epoch", pa.int32()), ("last_epoch", pa.int32()),  # of the leader-epoch-checkpoint
    ("batch_first_epoch", pa.int32()), ("batch_last_epoch", pa.int32()), ("batch_max_epoch", pa.int32()),  # of the batches
    ("records", pa.int64()), ("control_records", pa.int64()), ("bytes", pa.int64()),
    ("clean_shutdown", pa.bool_()), ("compacted", pa.bool_()), ("min_magic", pa.int8()), ("max_magic", pa.int8()),
    ("problems", pa.int64()), ("index_padding_entries", pa.int64()),
    ("batch_digest", pa.string()),  # of the readable batches: replicas holding the same batches have the same digest
])
EPOCH_LINEAGE_SCHEMA = pa.schema([  # jobs.replicas.epoch_lineage: per partition, epoch and replica
    ("topic", pa.string()), ("partition", pa.int32()), ("leader_epoch", pa.int32()), ("broker", pa.int32()),
    ("checkpoint_start_offset", pa.int64()),  # where the replica's leader-epoch-checkpoint starts the epoch
    ("batch_start_offset", pa.int64()), ("batch_end_offset", pa.int64()), ("batch_records", pa.int64()),  # its batches of the epoch
    ("first_timestamp", pa.int64()), ("last_timestamp", pa.int64()),
    ("likely_leader", pa.int32()),  # null when the evidence does not single one broker out
    ("leader_evidence", pa.string()),  # metadata_log | broker_log | leader_epoch_checkpoint | first_batch
])
OFFSET_RANGES_SCHEMA = pa.schema([  # jobs.replicas.offset_ranges: contiguous ranges and the holes between them
    ("topic", pa.string()), ("partition", pa.int32()), ("broker", pa.int32()),
    ("first_offset", pa.int64()), ("last_offset", pa.int64()), ("leader_epoch", pa.int32()),
    ("kind", pa.string()),  # data | hole
    ("reason", pa.string()),  # a hole's: compaction | log_start | unexplained
    ("at_segment_boundary", pa.bool_()), ("records", pa.int64()), ("bytes", pa.int64()),
    ("path", pa.string()), ("position", pa.int64()),
])
METADATA_EVENTS_SCHEMA = pa.schema([  # jobs.history.metadata.metadata_events: the KRaft metadata log, per partition
    ("topic", pa.string()), ("partition", pa.int32()), ("topic_id", pa.string()),
    ("meta_offset", pa.int64()),  # offset in __cluster_metadata (snapshots: their end offset - 1)
    ("time", TS),  # the record's append time on the controller
    ("event", pa.string()),  # partition_created | leader_change | leader_epoch_bump | isr_change | elr_change | leader_recovered | replicas_change | topic_removed | snapshot_state | partition_change
    ("leader", pa.int32()), ("leader_epoch", pa.int32()), ("partition_epoch", pa.int32()),
    ("isr", INTS),
    ("elr", INTS),  # eligible leader replicas (KIP-966; null in records older than version 2)
    ("last_known_elr", INTS),  # LastKnownElr: the last leader, kept while the partition is leaderless
    ("replicas", INTS),
    ("leader_recovery_state", pa.int32()),  # 0 RECOVERED, 1 RECOVERING
    ("prev_leader", pa.int32()), ("prev_leader_epoch", pa.int32()), ("prev_isr", INTS),
    ("election", pa.string()),  # clean | unclean | offline (leader -1) | null (no leader change)
    ("clean", pa.bool_()),  # the election's cleanliness; null without an election
    ("elected_from", pa.string()),  # isr | elr | reassignment | outside_isr | last_known_leader | null (unknown, or no election)
    ("source", pa.string()),  # log | snapshot
    ("nodes", INTS),  # the nodes whose metadata log (or snapshot) holds the record
    ("path", pa.string()), ("batch_position", pa.int64()), ("detail", pa.string()),
])
BROKER_EVENTS_SCHEMA = pa.schema([  # jobs.history.metadata.broker_events: the KRaft metadata log, per broker
    ("node", pa.int32()), ("meta_offset", pa.int64()), ("time", TS),
    ("event", pa.string()),  # registered | unregistered | fenced | unfenced | controlled_shutdown | controller_registered
    ("detail", pa.string()), ("source", pa.string()), ("nodes", INTS), ("path", pa.string()), ("batch_position", pa.int64()),
])
TIMELINE_SCHEMA = pa.schema([  # jobs.history.timeline.build: one incident timeline per partition
    ("topic", pa.string()), ("partition", pa.int32()), ("time", TS),
    ("source", pa.string()),  # metadata | broker_log | leader_epoch | consumer_offsets
    ("node", pa.int32()), ("event", pa.string()), ("leader", pa.int32()), ("leader_epoch", pa.int32()), ("offset", pa.int64()),
    ("isr", INTS), ("election", pa.string()),
    ("severity", pa.string()),  # null | info | warning | error
    ("detail", pa.string()), ("path", pa.string()), ("position", pa.int64()), ("seq", pa.int64()),
])

PRODUCER = pa.struct([
    pa.field("producer_id", pa.int64()),
    pa.field("producer_epoch", pa.int32()),
    pa.field("first_sequence", pa.int32()),
    pa.field("last_sequence", pa.int32()),
])
EVIDENCE = pa.struct([
    pa.field("broker", pa.int32()),
    pa.field("path", pa.string()),
    pa.field("position", pa.int64()),
    pa.field("detail", pa.string()),
])
FINDINGS_SCHEMA = pa.schema([
    pa.field("id", pa.string()),
    pa.field("kind", pa.string()),
    pa.field("severity", pa.string()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("brokers", pa.list_(pa.int32())),
    pa.field("first_offset", pa.int64()),
    pa.field("last_offset", pa.int64()),
    pa.field("records", pa.int64()),
    pa.field("bytes", pa.int64()),
    pa.field("leader_epochs", pa.list_(pa.int32())),
    pa.field("producers", pa.list_(PRODUCER)),
    pa.field("first_timestamp", pa.int64()),
    pa.field("last_timestamp", pa.int64()),
    pa.field("evidence", pa.list_(EVIDENCE)),
    pa.field("explanation", pa.string()),
    pa.field("salvage_brokers", pa.list_(pa.int32())),
    pa.field("surviving_broker", pa.int32()),
    pa.field("evidence_basis", pa.string()),
])
RESTART_PREVIEW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("broker", pa.int32()),
    ("leader", pa.int32()),  # the surviving log's broker, which the replica will follow
    ("leo", pa.int64()), ("truncate_to", pa.int64()), ("rule", pa.string()),
    ("epochs_asked", pa.list_(pa.int32())),  # the follower epochs sent in OffsetsForLeaderEpoch, in order
    ("records_destroyed", pa.int64()),
    ("held_elsewhere", pa.list_(pa.int32())),  # brokers holding every destroyed batch (same offsets and CRC)
    ("records_nowhere_else", pa.int64()),  # destroyed records no other replica holds
    ("finding_id", pa.string()),  # the loss or divergence finding whose range this truncation destroys
    ("sentence", pa.string()),
])
JOB_SCHEMAS: dict[str, pa.Schema] = {  # in the order analyze writes them
    "replica_logs": REPLICA_LOGS_SCHEMA,
    "metadata_events": METADATA_EVENTS_SCHEMA,
    "epoch_lineage": EPOCH_LINEAGE_SCHEMA,
    "offset_ranges": OFFSET_RANGES_SCHEMA,
    "broker_events": BROKER_EVENTS_SCHEMA,
    "timeline": TIMELINE_SCHEMA,
    "findings": FINDINGS_SCHEMA,
    "restart_preview": RESTART_PREVIEW_SCHEMA,
}

# Hive-style partition columns of the big tables (readers prune by topic)
PARTITION_BY: dict[str, list[str]] = {"batches": ["topic"], "records": ["topic"]}

ALL_TABLES = ["brokers", *SCHEMAS]


def schema_of(name: str, payloads: bool = False) -> pa.Schema:
    if name == "brokers":
        return BROKERS
    if name == "records":
        return records_schema(payloads)
    return SCHEMAS[name]
