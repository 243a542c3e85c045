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
    """Batches that belong to a replica's log (live dir, segment files, not the metadata log)."""
    return batches.where(
        (F.col("dir_state") == "live") & (F.col("file_kind") == "segment") & (F.col("topic") != METADATA_TOPIC)
        & F.col("topic").isNotNull()
    )


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


def checkpointed(checkpoints: DataFrame) -> DataFrame:
    """Each replica's offset in each checkpoint file of its log dir, one column per kind (null where
    that file names no entry for it): one pass over the table, where a pass and a join per kind
    cost four scans and four broadcasts, each a Spark job of its own on a small collection."""
    return checkpoints.where(F.col("file_kind").isin(*CHECKPOINT_COLUMNS)).groupBy("broker", "log_dir", "topic", "partition").agg(
        *[F.max(F.when(F.col("file_kind") == kind, F.col("offset"))).alias(name) for kind, name in CHECKPOINT_COLUMNS.items()]
    )


def build(t: dict[str, DataFrame]) -> DataFrame:
    """``t`` maps table names to DataFrames of the ingested tables."""
    b = live_segment_batches(t["batches"])
    per_batch = b.groupBy(*REPLICA_KEY, "log_dir").agg(
        F.min("base_offset").alias("first_offset"),
        (F.max("last_offset") + 1).alias("batch_leo"),
        F.sum(F.when(~F.col("is_control"), F.col("record_count")).otherwise(0)).cast("long").alias("records"),
        F.sum(F.when(F.col("is_control"), F.col("record_count")).otherwise(0)).cast("long").alias("control_records"),
        F.sum("size").cast("long").alias("bytes"),
        F.min_by("partition_leader_epoch", "base_offset").alias("batch_first_epoch"),
        F.max_by("partition_leader_epoch", "base_offset").alias("batch_last_epoch"),
        F.max("partition_leader_epoch").alias("batch_max_epoch"),
        F.max(F.when(F.col("magic") == 2, F.col("last_offset") - F.col("base_offset") + 1 > F.col("record_count"))).alias(
            "record_holes"
        ),
        F.min("magic").alias("min_magic"),
        F.max("magic").alias("max_magic"),
    )
    segs = segment_files(t["files"]).groupBy(*REPLICA_KEY, "log_dir", "dir_state").agg(
        F.count("*").alias("segments"),
        F.min("segment_base_offset").alias("first_segment_offset"),
        F.max("segment_base_offset").alias("active_segment_offset"),
    )

    cp = t["checkpoints"]
    le = t["leader_epochs"].where(F.col("dir_state") == "live")
    epochs = le.groupBy(*REPLICA_KEY, "log_dir").agg(
        F.sort_array(F.collect_list(F.struct(F.col("line"), F.col("epoch"), F.col("start_offset")))).alias("_e")
    ).select(
        *REPLICA_KEY, "log_dir",
        F.transform("_e", lambda x: F.struct(x["epoch"].alias("epoch"), x["start_offset"].alias("start_offset"))).alias(
            "epoch_entries"
        ),
    ).withColumn("first_epoch", F.col("epoch_entries")[0]["epoch"]).withColumn(
        "last_epoch", F.element_at("epoch_entries", -1)["epoch"]
    )
    pm = t["partition_metadata"].where(F.col("dir_state") == "live").groupBy(*REPLICA_KEY, "log_dir").agg(
        F.first("topic_uuid").alias("topic_id")
    )
    marker = t["clean_shutdown"].groupBy("broker", "log_dir").agg(F.lit(True).alias("_marker"))
    probs = t["problems"].where(F.col("topic").isNotNull()).groupBy(*REPLICA_KEY, "log_dir").agg(
        F.count("*").alias("problems")
    )
    index_pad = (
        t["index_files"].where(F.col("dir_state") == "live").groupBy(*REPLICA_KEY, "log_dir")
        .agg(F.sum(F.coalesce(F.col("padding_entries"), F.lit(0))).alias("index_padding_entries"))
        if "index_files" in t else None
    )

    r = segs.join(per_batch, [*REPLICA_KEY, "log_dir"], "full_outer")
    r = r.withColumn("dir_state", F.coalesce("dir_state", F.lit("live")))
    r = r.join(checkpointed(cp), ["broker", "log_dir", "topic", "partition"], "left")
    r = r.join(epochs, [*REPLICA_KEY, "log_dir"], "left").join(pm, [*REPLICA_KEY, "log_dir"], "left")
    r = r.join(marker, ["broker", "log_dir"], "left").join(probs, [*REPLICA_KEY, "log_dir"], "left")
    if index_pad is not None:
        r = r.join(index_pad, [*REPLICA_KEY, "log_dir"], "left")
    else:
        r = r.withColumn("index_padding_entries", F.lit(0).cast("long"))

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
    )
