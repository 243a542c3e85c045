"""The few rows the history detections read (events, not records), from the history job tables.

Business rules live here, not in the runner: which log lines count (unclean elections and the new
leader's RECOVERING line, tied to the epoch it starts; lines with a partition and a HW or a truncation), which partitions have every assigned replica collected,
the latest consumer commit per key and the latest transaction state per transactional id.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.store.io import collected


def collect(me: DataFrame, le: DataFrame, rl_df: DataFrame, consumer_offsets: DataFrame, transactions: DataFrame) -> dict:
    """``me``: metadata_events; ``le``: named log events; ``rl_df``: replica_logs. Returns collected
    rows: elections, log_unclean, log_rows, events, commits, complete, txns, collected_ms."""
    log_cols = ["topic", "partition", F.coalesce("node", "broker").alias("node"), "time", "line_no", "path", "event", "offset",
                "hw", "leader", "leader_epoch", "leader_recovery_state", "text"]
    lines = collected(le.where((F.col("event") == "unclean_election") | (F.col("topic").isNotNull() & F.col("partition").isNotNull()
                               & (F.col("hw").isNotNull() | (F.col("event") == "truncation")))).select(*log_cols))
    log_unclean = [r for r in lines if r["event"] == "unclean_election"] + collected(recovering_leaders(le).select(*log_cols))
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
    txns = tx.groupBy("transactional_id").agg(F.max_by(F.struct(*[c for c in tx.columns if c != "transactional_id"]), "offset").alias("x")).select(
        "transactional_id", "x.*").where(~F.col("tombstone")).collect()
    # "now" by the coordinator's own clock (its last write), not producers' CreateTime
    collected_ms = None
    if txns:
        coord = tx.agg(F.max("last_update_ms"), F.max("timestamp")).first()
        collected_ms = max((v for v in coord if v is not None), default=None)
    return {"elections": elections, "log_unclean": log_unclean, "log_rows": log_rows, "events": events,
            "commits": commits, "complete": complete, "txns": txns, "collected_ms": collected_ms}


RECOVERING_TO_EPOCH_S = 60  # the new leader's RECOVERING line and its "starts at leader epoch" line come together


def recovering_leaders(le: DataFrame) -> DataFrame:
    """The new leader's ``The topic partition T-P was marked as RECOVERING`` lines (``leader_recovery``),
    each with the leader epoch it was elected for: ``Partition.makeLeader`` logs it just before the
    epoch it starts (``Leader T-P ... starts at leader epoch E``, or ``Skipped the become-leader state
    change ... leaderEpoch=E``), the next become_leader line of the same file and partition, within a
    minute. The line itself names no epoch; one with no such line keeps it null."""
    rec = le.where(F.col("event") == "leader_recovery").select(
        "topic", "partition", "node", "broker", "time", "line_no", "path", "event", "offset", "hw", "leader", "leader_recovery_state",
        "text").alias("r")
    became = le.where((F.col("event") == "become_leader") & F.col("leader_epoch").isNotNull()).select(
        "path", "topic", "partition", F.col("line_no").alias("_line"), F.col("time").alias("_time"), F.col("leader_epoch").alias("_epoch")).alias("b")
    on = ((F.col("r.path") == F.col("b.path")) & (F.col("r.topic") == F.col("b.topic")) & (F.col("r.partition") == F.col("b.partition"))
          & (F.col("b._line") > F.col("r.line_no"))
          & (F.col("b._time").isNull() | F.col("r.time").isNull()
             | (F.col("b._time") <= F.col("r.time") + F.expr(f"INTERVAL {RECOVERING_TO_EPOCH_S} SECONDS"))))
    j = rec.join(became, on, "left")
    cols = [F.col(f"r.{c}").alias(c) for c in rec.columns]
    return j.groupBy(*cols).agg(F.min_by("b._epoch", "b._line").alias("leader_epoch"))
