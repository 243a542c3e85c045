"""The few rows the history detections read (events, not records), from the history job tables.

Business rules live here, not in the runner: which log lines count (unclean elections, and lines
with a partition and a HW or a truncation), which partitions have every assigned replica collected,
the latest consumer commit per key and the latest transaction state per transactional id (with
every producer id its records name).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.store.io import collected


def collect(me: DataFrame, le: DataFrame, rl_df: DataFrame, consumer_offsets: DataFrame, transactions: DataFrame) -> dict:
    """``me``: metadata_events; ``le``: named log events; ``rl_df``: replica_logs. Returns collected
    rows: elections, log_unclean, log_rows, events, commits, complete, txns, collected_ms."""
    log_cols = ["topic", "partition", F.coalesce("node", "broker").alias("node"), "time", "line_no", "path", "event", "offset",
                "hw", "leader", "leader_epoch", "text"]
    lines = collected(le.where((F.col("event") == "unclean_election") | (F.col("topic").isNotNull() & F.col("partition").isNotNull()
                               & (F.col("hw").isNotNull() | (F.col("event") == "truncation")))).select(*log_cols))
    log_unclean = [r for r in lines if r["event"] == "unclean_election"]
    log_rows = [r for r in lines if r["event"] != "unclean_election" and r["topic"] is not None and r["partition"] is not None]
    events = collected(me.where(F.col("event").isin("partition_created", "leader_change", "isr_change", "snapshot_state")))
    elections = [e for e in events if e["election"] == "unclean"]
    latest = me.where(F.col("replicas").isNotNull()).groupBy("topic", "partition").agg(F.max_by("replicas", "meta_offset").alias("replicas"))
    have = rl_df.where(F.col("dir_state") == "live").groupBy("topic", "partition").agg(F.collect_set("broker").alias("have"))
    complete = {(r["topic"], r["partition"]) for r in latest.join(have, ["topic", "partition"]).where(
        F.size(F.array_except("replicas", "have")) == 0).collect()}
    # the latest record per key, tombstones included: a commit deleted with its topic (or expired)
    # is no evidence of anything
    co = consumer_offsets.where(F.col("record_type") == "offset_commit")
    commits = co.groupBy("group", "topic", "partition").agg(
        F.max_by(F.struct("committed_offset", "broker", "path", "batch_position", "tombstone"), "offset").alias("c")).select(
        "group", "topic", "partition", "c.*").where(~F.col("tombstone")).collect()
    tx = transactions.where(F.col("transactional_id").isNotNull())
    # with every producer id the transactional id's records still name: a transactions v2 producer
    # moves to a new id at an exhausted epoch, and its old id's open data is still that id's
    txns = tx.groupBy("transactional_id").agg(
        F.max_by(F.struct(*[c for c in tx.columns if c != "transactional_id"]), "offset").alias("x"),
        F.collect_set("producer_id").alias("producer_ids")).select(
        "transactional_id", "x.*", "producer_ids").where(~F.col("tombstone")).collect()
    # "now" by the coordinator's own clock (its last write), not producers' CreateTime
    collected_ms = None
    if txns:
        coord = tx.agg(F.max("last_update_ms"), F.max("timestamp")).first()
        collected_ms = max((v for v in coord if v is not None), default=None)
    return {"elections": elections, "log_unclean": log_unclean, "log_rows": log_rows, "events": events,
            "commits": commits, "complete": complete, "txns": txns, "collected_ms": collected_ms}
