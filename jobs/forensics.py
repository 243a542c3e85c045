"""Run every forensic job over an ingested DIR: job tables back into DIR, findings out.

Order matters only through data: replica_logs feeds the others; the record-level comparison is
cached because both divergence and loss read it. What reaches the driver is per replica, per
range or per finding (thousands of rows for thousands of partitions), never per record.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import (
    compare,
    detect_cross,
    detect_history,
    detect_replica,
    epoch_lineage,
    metadata,
    offset_ranges,
    replica_logs,
    timeline,
)
from .findings import FINDINGS_SCHEMA, Finding, finalize, to_rows
from .ingest import read_table, write_table
from .ledger import ledger_lost_offsets, lost_ledger_rows, read_ledger, record_view

log = logging.getLogger(__name__)

INPUT_TABLES = ["brokers", "files", "batches", "records", "checkpoints", "leader_epochs", "partition_metadata",
                "clean_shutdown", "problems", "index_files", "index_entries", "producer_states", "metadata_records", "consumer_offsets",
                "transactions", "log_events"]
JOB_TABLES = ["replica_logs", "epoch_lineage", "offset_ranges", "metadata_events", "broker_events", "timeline", "findings"]


def load(spark: SparkSession, out: Path) -> dict[str, DataFrame]:
    return {name: read_table(spark, out, name) for name in INPUT_TABLES}


def run(spark: SparkSession, out: Path, ledger: Path | None = None) -> list[Finding]:
    """Compute the job tables and findings of the ingested tables under ``out``; write the job
    tables there and return the findings (the caller writes findings.json)."""
    t = load(spark, out)

    rl_df = replica_logs.build(t)
    write_table(rl_df, out, "replica_logs")
    rl_df = read_table(spark, out, "replica_logs").cache()
    rl = rl_df.collect()

    # who led each epoch: the metadata log and broker logs first, then the files (epoch_lineage)
    me, le = _leadership(spark, out, t)
    logged = epoch_lineage.logged_leaders(me, le).cache()
    current = epoch_lineage.current_leaders(logged.collect())
    write_table(epoch_lineage.build(t, rl_df, logged), out, "epoch_lineage")
    logged.unpersist()
    lineage = read_table(spark, out, "epoch_lineage").collect()

    write_table(offset_ranges.build(t, rl_df), out, "offset_ranges")
    holes = (
        read_table(spark, out, "offset_ranges").where((F.col("kind") == "hole") & (F.col("reason") == "unexplained")).collect()
    )

    batches = compare.with_txn_outcome(t["batches"], t["records"]).cache()
    diffs = compare.record_diffs(batches, t["records"], rl_df).cache()
    ranges = compare.diff_ranges(diffs, rl_df).collect()

    surv = detect_cross.survivors(rl, lineage, current)
    findings: list[Finding] = []
    findings += detect_replica.problem_findings(t["problems"])
    findings += detect_replica.unclean_shutdown_findings(rl, t["files"], t["brokers"])
    findings += detect_replica.checkpoint_findings(rl)
    findings += detect_replica.gap_findings(holes)
    findings += detect_replica.segment_overlap_findings(t["batches"])
    findings += detect_replica.index_past_eof_findings(t["index_entries"], t["files"])
    findings += detect_replica.duplicate_sequence_findings(t["batches"])
    findings += detect_replica.hanging_transaction_findings(t["batches"], t["producer_states"])
    findings += detect_cross.divergence_findings(ranges)

    hist = _history(spark, out, t, rl_df, me, le)

    loss_ranges: list = []
    lost_acks: list = []
    if surv:
        sv = detect_cross.survivor_frame(spark, surv)
        lost = detect_cross.committed_loss(detect_cross.hw_lost_offsets(diffs, sv), rl_df)
        if ledger is not None:
            led = ledger_lost_offsets(read_ledger(spark, ledger), t["records"], batches, sv)
            lost_acks = _lost_acks(lost_ledger_rows(read_ledger(spark, ledger), record_view(t["records"], batches), sv))
            lost = lost.select(*led.columns).unionByName(led)
        loss_ranges = detect_cross.loss_ranges(lost)
    loss = detect_cross.loss_findings(loss_ranges, surv)
    findings += loss
    findings += detect_cross.truncation_findings(rl, surv, loss_ranges)
    # unclean_leader_election is not inferred from segments alone: a new epoch starting below
    # another replica's committed data looks the same after an unclean election and after a
    # KAFKA-1211 truncation to a stale HW by a leader elected cleanly from the ISR. The KRaft
    # metadata log (PartitionChangeRecord, leaderRecoveryState) tells them apart.
    findings += detect_history.unclean_election_findings(hist["elections"], hist["log_unclean"], lineage)
    findings += detect_history.logged_truncation_findings(hist["log_rows"])
    if lost_acks and hist["events"]:
        findings += detect_history.ledger_truncation_findings(lost_acks, hist["events"], rl, loss)
    findings += detect_history.consumer_loss_findings(hist["commits"], [r for r in rl if (r["topic"], r["partition"]) in hist["complete"]], loss)
    findings += detect_history.transaction_state_findings(hist["txns"], hist["collected_ms"])
    findings += detect_cross.epoch_conflict_findings(lineage, rl)
    findings += detect_cross.topic_id_findings(rl)
    findings += detect_cross.cluster_id_findings(t["brokers"].collect())

    findings = finalize(findings)
    write_table(spark.createDataFrame(to_rows(findings), FINDINGS_SCHEMA).coalesce(1), out, "findings")
    diffs.unpersist()
    batches.unpersist()
    rl_df.unpersist()
    return findings


def _leadership(spark: SparkSession, out: Path, t: dict[str, DataFrame]) -> tuple[DataFrame, DataFrame]:
    """The metadata_events job table (written) and the broker-log events with topic names: who
    led when, which the lineage and the surviving log are decided by before the files."""
    write_table(metadata.metadata_events(t["metadata_records"]), out, "metadata_events")
    me = read_table(spark, out, "metadata_events")
    return me, timeline.named_log_events(t["log_events"], timeline.topic_names(me))


def _history(spark: SparkSession, out: Path, t: dict[str, DataFrame], rl_df: DataFrame, me: DataFrame, le: DataFrame) -> dict:
    """The broker-log, timeline and internal-topic job tables, and the few rows the history
    detections need (events, not records). ``me``, ``le``: from ``_leadership``."""
    write_table(metadata.broker_events(t["metadata_records"]), out, "broker_events")
    be = read_table(spark, out, "broker_events")
    lineage = read_table(spark, out, "epoch_lineage")
    tl = timeline.build(me, be, lineage, le, t["consumer_offsets"], rl_df.select("topic", "partition", "broker"))
    write_table(tl.orderBy("topic", "partition", F.col("time").asc_nulls_last(), "seq").coalesce(1), out, "timeline")

    log_cols = ["topic", "partition", F.coalesce("node", "broker").alias("node"), "time", "line_no", "path", "event", "offset",
                "hw", "leader", "leader_epoch", "text"]
    lines = le.where((F.col("event") == "unclean_election") | (F.col("topic").isNotNull() & F.col("partition").isNotNull()
                     & (F.col("hw").isNotNull() | (F.col("event") == "truncation")))).select(*log_cols).collect()
    log_unclean = [r for r in lines if r["event"] == "unclean_election"]
    log_rows = [r for r in lines if r["event"] != "unclean_election" and r["topic"] is not None and r["partition"] is not None]
    events = me.where(F.col("event").isin("partition_created", "leader_change", "isr_change", "snapshot_state")).collect()
    elections = [e for e in events if e["election"] == "unclean"]
    latest = me.where(F.col("replicas").isNotNull()).groupBy("topic", "partition").agg(F.max_by("replicas", "meta_offset").alias("replicas"))
    have = rl_df.where(F.col("dir_state") == "live").groupBy("topic", "partition").agg(F.collect_set("broker").alias("have"))
    complete = {(r["topic"], r["partition"]) for r in latest.join(have, ["topic", "partition"]).where(
        F.size(F.array_except("replicas", "have")) == 0).collect()}
    # the latest record per key, tombstones included: a commit deleted with its topic (or expired)
    # is no evidence of anything
    co = t["consumer_offsets"].where(F.col("record_type") == "offset_commit")
    commits = co.groupBy("group", "topic", "partition").agg(
        F.max_by(F.struct("committed_offset", "broker", "path", "batch_position", "tombstone"), "offset").alias("c")).select(
        "group", "topic", "partition", "c.*").where(~F.col("tombstone")).collect()
    tx = t["transactions"].where(F.col("transactional_id").isNotNull())
    txns = tx.groupBy("transactional_id").agg(F.max_by(F.struct(*[c for c in tx.columns if c != "transactional_id"]), "offset").alias("x")).select(
        "transactional_id", "x.*").where(~F.col("tombstone")).collect()
    # "now" by the coordinator's own clock (its last write), not producers' CreateTime
    collected = None
    if txns:
        coord = tx.agg(F.max("last_update_ms"), F.max("timestamp")).first()
        collected = max((v for v in coord if v is not None), default=None)
    return {"elections": elections, "log_unclean": log_unclean, "log_rows": log_rows, "events": events,
            "commits": commits, "complete": complete, "txns": txns, "collected_ms": collected}


def _lost_acks(lost: DataFrame) -> list:
    """Lost ledger records per (topic, partition, acks, survivor status): offset span and
    acknowledgement times (a few rows)."""
    lost = lost.where(F.col("ack_time").isNotNull())
    return lost.groupBy("topic", "partition", F.coalesce("acks", F.lit("?")).alias("acks")).agg(
        F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
        F.min("ack_time").alias("first_ack"), F.max("ack_time").alias("last_ack"),
    ).collect()
