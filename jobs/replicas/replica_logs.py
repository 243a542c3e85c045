"""One row per replica (topic, partition, broker): what its log and checkpoints say.

This is Kafka's own view of a log at start-up (``LogLoader``), rebuilt from the files:
- log start offset = max(log-start-offset-checkpoint entry, first segment's base offset);
- LEO = end of the last valid batch, or the active segment's base offset when it is empty
  (a freshly rolled segment, or a log truncated to its start);
- HW, recovery point, log start and cleaner offsets as last checkpointed, which may be stale
  after a crash (Kafka flushes them periodically, not on every write).
Only live partition directories count: ``-delete``/``-future``/``-stray`` dirs are not the replica.
The KRaft metadata log is a Raft log, not a replicated partition: it is left to the timeline job.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

METADATA_TOPIC = "__cluster_metadata"
# Topics Kafka always compacts: holes in their offsets are the cleaner's doing.
COMPACTED_INTERNAL = ("__consumer_offsets", "__transaction_state")

REPLICA_KEY = ["topic", "partition", "broker"]


def live_segment_batches(batches: DataFrame) -> DataFrame:
    """Batches that belong to a replica's log (live dir, segment files, not the metadata log);
    the same filter keeps the ``batch_runs`` of those batches."""
    return batches.where(
        (F.col("dir_state") == "live") & (F.col("file_kind") == "segment") & (F.col("topic") != METADATA_TOPIC)
        & F.col("topic").isNotNull()
    )


DIGEST_PARTS = [f"digest_{i}" for i in range(4)]


def segment_files(files: DataFrame) -> DataFrame:
    base = F.regexp_extract(F.col("path"), r"(\d{20})\.log$", 1)
    return (
        files.where((F.col("kind") == "segment") & (F.col("dir_state") == "live") & (F.col("topic") != METADATA_TOPIC))
        .where(base != "")
        .withColumn("segment_base_offset", base.cast("long"))
    )


# checkpoint file kind (``checkpoints.file_kind``) -> the replica_logs column of its offset
CHECKPOINT_COLUMNS = {"replication_offset": "hw_checkpoint", "recovery_point": "recovery_point",
                      "log_start": "log_start_checkpoint", "cleaner": "cleaner_offset"}


MAX_MARKER_LITERALS = 256  # log dirs with a clean-shutdown marker named in one expression; past it, joined


def with_clean_shutdown(r: DataFrame, markers: DataFrame, held: list | None = None) -> DataFrame:
    """``r`` with ``_marker``: whether its (broker, log_dir) holds a ``.kafka_cleanshutdown``
    marker. The markers are one per log dir, so they are collected (a scan; ``held``: their
    (broker, log_dir) rows, read by the caller without Spark) and named in the expression, where
    grouping and joining them were two Spark stages of their own; past ``MAX_MARKER_LITERALS`` log
    dirs they are joined."""
    if held is None:
        held = markers.select("broker", "log_dir").collect()
    dirs = sorted({(m["broker"], m["log_dir"]) for m in held}, key=repr)
    dirs = [d for d in dirs if None not in d]  # (a join never matches a null)
    if len(dirs) > MAX_MARKER_LITERALS:
        return r.join(markers.groupBy("broker", "log_dir").agg(F.lit(True).alias("_marker")), ["broker", "log_dir"], "left")
    marked = F.lit(False)
    for broker, log_dir in dirs:
        marked = marked | ((F.col("broker") == broker) & (F.col("log_dir") == log_dir))
    return r.withColumn("_marker", marked)


def build(t: dict[str, DataFrame], markers: list | None = None) -> DataFrame:
    """``t`` maps table names to DataFrames of the ingested tables; ``markers``: the
    clean_shutdown rows' (broker, log_dir), when the caller has them (else collected here).

    Why one aggregate: each file kind says something per replica (its batches, segment files,
    checkpoint entries, leader epochs, partition.metadata, problems, index padding). Aggregated
    each on its own and joined, they were eight aggregates and seven joins, each a shuffle or a
    broadcast and a Spark job of its own (docs/design.md measures both); here every kind's rows are stacked (one row shape, a column set per kind) and grouped
    once by replica, and only the clean-shutdown marker (one per log dir) is joined. A replica is
    one whose log dir has batches or segment files of it. The other kinds' rows count only with a
    whole key, as they did in a join (which never matches a null). But for the leader epochs and
    the topic id: a list or a struct has no place in a hash aggregate's buffer, so grouped with
    the rest every row went through Spark's interpreted object aggregate; those two kinds' few rows are grouped apart
    and joined. The batches come as their ``batch_runs`` (a few rows a segment, summed at ingest):
    a replica's row costs its segments, not its millions of batches. ``batch_digest`` sums the
    runs' digests: replicas with equal digests hold the same readable batches, so the
    comparison leaves their partition alone (``compare.differing_partitions``)."""
    key = [*REPLICA_KEY, "log_dir"]
    b = live_segment_batches(t["batch_runs"]).select(
        *key, F.lit(True).alias("_batch"), "batches", "first_offset", "last_offset", "last_base_offset", "records", "control_records",
        "bytes", "partition_leader_epoch", "min_magic", "max_magic", "record_holes", "readable", *DIGEST_PARTS)
    segs = segment_files(t["files"]).select(*key, F.lit(True).alias("_segment"), "segment_base_offset")
    cp = t["checkpoints"].where(F.col("file_kind").isin(*CHECKPOINT_COLUMNS)).select(
        *key, F.col("file_kind").alias("_checkpoint"), F.col("offset").alias("_checkpoint_offset"))
    le = t["leader_epochs"].where(F.col("dir_state") == "live").select(
        *key, F.struct(F.col("line"), F.col("epoch"), F.col("start_offset")).alias("_epoch"))
    # (a struct, so that the first partition.metadata row counts even when its topic id is null)
    pm = t["partition_metadata"].where(F.col("dir_state") == "live").select(*key, F.struct(F.col("topic_uuid").alias("id")).alias("_pm"))
    probs = t["problems"].where(F.col("topic").isNotNull()).select(*key, F.lit(True).alias("_problem"))
    others = [cp, probs]
    if "index_files" in t:
        others.append(t["index_files"].where(F.col("dir_state") == "live").select(
            *key, F.coalesce(F.col("padding_entries"), F.lit(0)).cast("long").alias("_padding")))
    whole_key = F.lit(True)
    for c in key:
        whole_key = whole_key & F.col(c).isNotNull()
    rows = b.unionByName(segs, allowMissingColumns=True)
    for kind in others:
        rows = rows.unionByName(kind.where(whole_key), allowMissingColumns=True)
    if "_padding" not in rows.columns:
        rows = rows.withColumn("_padding", F.lit(None).cast("long"))

    r = rows.groupBy(*key).agg(
        F.count("_segment").alias("segments"),
        F.min("segment_base_offset").alias("first_segment_offset"),
        F.max("segment_base_offset").alias("active_segment_offset"),
        F.sum("batches").alias("_batches"),
        F.min("first_offset").alias("first_offset"),
        (F.max("last_offset") + 1).alias("batch_leo"),
        F.sum("records").cast("long").alias("records"),
        F.sum("control_records").cast("long").alias("control_records"),
        F.sum("bytes").cast("long").alias("bytes"),
        F.min_by("partition_leader_epoch", "first_offset").alias("batch_first_epoch"),
        F.max_by("partition_leader_epoch", "last_base_offset").alias("batch_last_epoch"),
        F.max("partition_leader_epoch").alias("batch_max_epoch"),
        F.max("record_holes").alias("record_holes"),
        F.min("min_magic").alias("min_magic"),
        F.max("max_magic").alias("max_magic"),
        *[F.max(F.when(F.col("_checkpoint") == kind, F.col("_checkpoint_offset"))).alias(name)
          for kind, name in CHECKPOINT_COLUMNS.items()],
        F.count("_problem").alias("problems"),
        F.sum("_padding").alias("index_padding_entries"),
        *[F.sum(c).alias(c) for c in DIGEST_PARTS], F.sum("readable").alias("_readable"),
    ).where((F.col("segments") > 0) | (F.coalesce(F.col("_batches"), F.lit(0)) > 0))
    entries = F.sort_array(F.collect_list("_epoch"))
    lists = le.where(whole_key).unionByName(pm.where(whole_key), allowMissingColumns=True).groupBy(*key).agg(
        F.when(F.size(entries) > 0, F.transform(entries, lambda x: F.struct(x["epoch"].alias("epoch"),
                                                                          x["start_offset"].alias("start_offset"))))
        .alias("epoch_entries"),
        F.first("_pm", ignorenulls=True)["id"].alias("topic_id"),
    )
    # (both sides are hashed by replica already: a merge join needs no shuffle, where Spark chose to
    # broadcast the lists, a Spark job of its own)
    r = r.join(lists.hint("merge"), key, "left")
    r = r.withColumn("dir_state", F.lit("live")).withColumn("first_epoch", F.col("epoch_entries")[0]["epoch"]).withColumn(
        "last_epoch", F.element_at("epoch_entries", -1)["epoch"])
    r = with_clean_shutdown(r, t["clean_shutdown"], markers)

    leo = F.greatest(F.coalesce("batch_leo", F.lit(0)), F.coalesce("active_segment_offset", F.lit(0)))
    return r.select(
        "topic", "partition", "broker", "log_dir", "dir_state", "topic_id",
        F.coalesce("segments", F.lit(0)).cast("long").alias("segments"),
        "first_segment_offset",
        "log_start_checkpoint",
        F.greatest(F.coalesce("log_start_checkpoint", F.lit(0)), F.coalesce("first_segment_offset", F.lit(0))).alias(
            "log_start_offset"
        ),
        "first_offset",
        leo.alias("leo"),
        "hw_checkpoint", "recovery_point", "cleaner_offset",
        "epoch_entries", "first_epoch", "last_epoch",
        "batch_first_epoch", "batch_last_epoch", "batch_max_epoch",
        F.coalesce("records", F.lit(0)).alias("records"),
        F.coalesce("control_records", F.lit(0)).alias("control_records"),
        F.coalesce("bytes", F.lit(0)).alias("bytes"),
        F.coalesce("_marker", F.lit(False)).alias("clean_shutdown"),
        (
            F.col("cleaner_offset").isNotNull()
            | F.col("topic").isin(*COMPACTED_INTERNAL)
            | F.coalesce("record_holes", F.lit(False))
        ).alias("compacted"),
        "min_magic", "max_magic",
        F.coalesce("problems", F.lit(0)).alias("problems"),
        F.coalesce("index_padding_entries", F.lit(0)).cast("long").alias("index_padding_entries"),
        F.when(F.col("_readable") > 0, F.sha2(F.concat_ws(":", *[F.col(c).cast("string") for c in ("_readable", *DIGEST_PARTS)]), 256)).alias("batch_digest"),
    )
