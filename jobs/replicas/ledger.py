"""``--ledger``: acknowledged records the surviving log no longer holds with their content.

A ledger is JSON Lines of what producers were told was written: ``topic, partition, offset`` and
optionally ``key_sha256``/``value_sha256`` (or a plain ``key``, hashed here as UTF-8) and
``timestamp``. Without hashes only presence is checked. Benign, never lost: offsets below the
surviving log's start (retention, deleteRecords), missing offsets of a compacted log, and records
inside aborted transactions.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .compare import live_records, record_details
from .survivors import lost_on_every_candidate

LEDGER_SCHEMA = T.StructType([
    T.StructField("topic", T.StringType()),
    T.StructField("partition", T.IntegerType()),
    T.StructField("offset", T.LongType()),
    T.StructField("timestamp", T.LongType()),
    T.StructField("key", T.StringType()),
    T.StructField("key_sha256", T.StringType()),
    T.StructField("value_sha256", T.StringType()),
    T.StructField("acks", T.StringType()),  # the producer's acks setting (0, 1, all / -1), if the ledger says
    T.StructField("ack_ts", T.StringType()),  # when it was acknowledged (ISO 8601), if the ledger says
])


def read_ledger(spark: SparkSession, path: Path) -> DataFrame:
    """Read the ledger; lines that are not JSON objects with topic/partition/offset are dropped
    (counted by the caller), never fatal."""
    df = spark.read.schema(LEDGER_SCHEMA).json(str(path))
    df = df.where(F.col("topic").isNotNull() & F.col("partition").isNotNull() & F.col("offset").isNotNull())
    return df.withColumn(
        "key_sha256", F.coalesce(F.lower("key_sha256"), F.when(F.col("key").isNotNull(), F.sha2(F.col("key"), 256)))
    ).withColumn("value_sha256", F.lower("value_sha256")).withColumn("ack_time", F.to_timestamp("ack_ts")).drop("key", "ack_ts")


def record_view(records: DataFrame, batches: DataFrame) -> DataFrame:
    b = batches.select("broker", "path", "position", "partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence",
                       "is_transactional", "is_control", "aborted")
    r = live_records(records).select("topic", "partition", "broker", "path", F.col("batch_position").alias("position"), "offset", "timestamp_ms",
                 "key_size", "value_size", "key_sha256", "value_sha256", "control_type")
    return r.join(b, ["broker", "path", "position"])


def lost_ledger_rows(ledger: DataFrame, rv: DataFrame, survivors: DataFrame) -> DataFrame:
    """The ledger's rows (all its columns, plus survivor and status) whose record the surviving
    log lacks or holds with other content. ``rv``: ``record_view(records, batches)``;
    ``survivors``: ``survivors.survivors_frame`` (an undetermined surviving log: a row is lost
    when every candidate lacks it, one row per candidate)."""
    s = survivors.select("topic", "partition", "survivor", "s_log_start", "s_compacted", "s_candidates")
    led = ledger.join(s, ["topic", "partition"]).where(F.col("offset") >= F.col("s_log_start"))
    srec = rv.select("topic", "partition", F.col("broker").alias("survivor"), "offset",
                     F.col("key_sha256").alias("s_key"), F.col("value_sha256").alias("s_value"), F.lit(True).alias("s_present"))
    j = led.join(srec, ["topic", "partition", "survivor", "offset"], "left").withColumn(
        "s_present", F.coalesce("s_present", F.lit(False))
    )
    # A record with null key and value still has a row: its hashes are null but the join found it,
    # so presence is tested on the survivor id the join carried, not on the hashes.
    held_by_survivor = F.col("s_present")
    matches = F.coalesce(F.col("s_value") == F.col("value_sha256"), F.lit(True)) & F.coalesce(
        F.col("s_key") == F.col("key_sha256"), F.lit(True)
    )
    lost = j.where(~(held_by_survivor & matches)).where(~(~held_by_survivor & F.col("s_compacted")))
    lost = lost_on_every_candidate(lost)
    return lost.withColumn("status", F.when(held_by_survivor, "divergent").otherwise("missing"))


def ledger_lost_offsets(ledger: DataFrame, records: DataFrame, batches: DataFrame, survivors: DataFrame) -> DataFrame:
    """Rows (topic, partition, offset, survivor, status, holder, rec, holder_hw, source) like
    ``jobs.findings.loss.hw_lost_offsets``, one per lost ledger offset and replica still holding it."""
    rv = record_view(records, batches)
    lost = lost_ledger_rows(ledger, rv, survivors)
    others = rv.select(
        "topic", "partition", F.col("broker").alias("holder"), "offset", F.col("key_sha256").alias("h_key"),
        F.col("value_sha256").alias("h_value"),
        record_details().alias("rec"),
    )
    h = lost.join(others, ["topic", "partition", "offset"], "left").where(
        F.col("holder").isNull() | (F.col("holder") != F.col("survivor"))
    )
    content_ok = F.coalesce(F.col("h_value") == F.col("value_sha256"), F.lit(True)) & F.coalesce(
        F.col("h_key") == F.col("key_sha256"), F.lit(True)
    )
    h = h.withColumn("holder", F.when(content_ok, F.col("holder"))).withColumn("rec", F.when(content_ok, F.col("rec")))
    # Aborted transactional data is skipped by consumers: losing it loses nothing.
    aborted = h.groupBy("topic", "partition", "offset").agg(F.max(F.coalesce("rec.aborted", F.lit(False))).alias("_ab"))
    h = h.join(aborted, ["topic", "partition", "offset"]).where(~F.col("_ab")).drop("_ab")
    h = h.dropDuplicates(["topic", "partition", "offset", "holder"])
    return h.select(
        "topic", "partition", "offset", "survivor", "status", "holder", "rec",
        F.lit(None).cast("long").alias("holder_hw"), F.lit("ledger").alias("source"),
    )


def lost_acks(lost: DataFrame) -> list:
    """Lost ledger records per (topic, partition, acks, survivor status): offset span and
    acknowledgement times (a few rows)."""
    lost = lost.where(F.col("ack_time").isNotNull())
    return lost.groupBy("topic", "partition", F.coalesce("acks", F.lit("?")).alias("acks")).agg(
        F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
        F.min("ack_time").alias("first_ack"), F.max("ack_time").alias("last_ack"),
    ).collect()
