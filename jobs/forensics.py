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

from . import compare, detect_cross, detect_replica, epoch_lineage, offset_ranges, replica_logs
from .findings import FINDINGS_SCHEMA, Finding, finalize, to_rows
from .ingest import read_table, write_table
from .ledger import ledger_lost_offsets, read_ledger

log = logging.getLogger(__name__)

INPUT_TABLES = ["brokers", "files", "batches", "records", "checkpoints", "leader_epochs", "partition_metadata",
                "clean_shutdown", "problems", "index_files", "producer_states"]
JOB_TABLES = ["replica_logs", "epoch_lineage", "offset_ranges", "findings"]


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

    write_table(epoch_lineage.build(t), out, "epoch_lineage")
    lineage = read_table(spark, out, "epoch_lineage").collect()

    write_table(offset_ranges.build(t, rl_df), out, "offset_ranges")
    holes = (
        read_table(spark, out, "offset_ranges").where((F.col("kind") == "hole") & (F.col("reason") == "unexplained")).collect()
    )

    batches = compare.with_txn_outcome(t["batches"], t["records"]).cache()
    diffs = compare.record_diffs(batches, t["records"], rl_df).cache()
    ranges = compare.diff_ranges(diffs, rl_df).collect()

    surv = detect_cross.survivors(rl)
    findings: list[Finding] = []
    findings += detect_replica.problem_findings(t["problems"])
    findings += detect_replica.unclean_shutdown_findings(rl, t["files"], t["brokers"])
    findings += detect_replica.checkpoint_findings(rl)
    findings += detect_replica.gap_findings(holes)
    findings += detect_replica.segment_overlap_findings(t["batches"])
    findings += detect_replica.duplicate_sequence_findings(t["batches"])
    findings += detect_replica.hanging_transaction_findings(t["batches"], t["producer_states"])
    findings += detect_cross.divergence_findings(ranges)

    loss_ranges: list = []
    if surv:
        lost = detect_cross.committed_loss(detect_cross.hw_lost_offsets(diffs, surv), rl_df)
        if ledger is not None:
            sv = spark.createDataFrame(
                [(k[0], k[1], s["broker"], s["log_start_offset"], bool(s["compacted"])) for k, s in surv.items()],
                "topic string, partition int, survivor int, s_log_start long, s_compacted boolean",
            )
            led = ledger_lost_offsets(read_ledger(spark, ledger), t["records"], batches, sv)
            lost = lost.select(*led.columns).unionByName(led)
        loss_ranges = detect_cross.loss_ranges(lost)
    findings += detect_cross.loss_findings(loss_ranges)
    findings += detect_cross.truncation_findings(rl, surv, loss_ranges)
    # unclean_leader_election is not inferred from segments alone: a new epoch starting below
    # another replica's committed data looks the same after an unclean election and after a
    # KAFKA-1211 truncation to a stale HW by a leader elected cleanly from the ISR. The KRaft
    # metadata log (PartitionChangeRecord, leaderRecoveryState) tells them apart.
    findings += detect_cross.epoch_conflict_findings(lineage, rl)
    findings += detect_cross.topic_id_findings(rl)
    findings += detect_cross.cluster_id_findings(t["brokers"].collect())

    findings = finalize(findings)
    write_table(spark.createDataFrame(to_rows(findings), FINDINGS_SCHEMA).coalesce(1), out, "findings")
    diffs.unpersist()
    batches.unpersist()
    rl_df.unpersist()
    return findings
