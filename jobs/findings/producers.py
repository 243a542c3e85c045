"""Idempotent producers' sequence numbers written twice on one replica."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.replicas.replica_logs import live_segment_batches

from .model import Evidence, Finding

if TYPE_CHECKING:
    from .case import Case

FINDING_KINDS = {"duplicate_sequence": "warning"}


def duplicate_sequence_findings(batches: DataFrame) -> list[Finding]:
    """Same producer id, epoch and base sequence at two offsets of one replica: a retry that the
    broker did not de-duplicate (its producer state was lost, e.g. across a leader change)."""
    b = live_segment_batches(batches).where(
        (F.col("producer_id") >= 0) & (F.col("base_sequence") >= 0) & (~F.col("is_control"))
    )
    g = b.groupBy("topic", "partition", "broker", "producer_id", "producer_epoch", "base_sequence").agg(
        F.count("*").alias("n"), F.min("base_offset").alias("first"), F.max("base_offset").alias("second"),
        F.min_by("path", "base_offset").alias("path"), F.min_by("position", "base_offset").alias("position"),
        F.max("last_sequence").alias("last_sequence"), F.sum("record_count").alias("records"),
    ).where(F.col("n") > 1)
    agg = g.groupBy("topic", "partition", "broker", "producer_id", "producer_epoch").agg(
        F.min("first").alias("first"), F.max("second").alias("second"), F.count("*").alias("batches"),
        F.min("base_sequence").alias("min_seq"), F.max("last_sequence").alias("max_seq"),
        F.min_by("path", "first").alias("path"), F.min_by("position", "first").alias("position"),
        F.sum("records").alias("records"),
    )
    out = []
    for r in agg.collect():
        out.append(Finding(
            kind="duplicate_sequence", severity=FINDING_KINDS["duplicate_sequence"], topic=r["topic"], partition=r["partition"], brokers=[r["broker"]],
            first_offset=r["first"], last_offset=r["second"], records=r["records"],
            producers=[{"producer_id": r["producer_id"], "producer_epoch": r["producer_epoch"],
                        "first_sequence": r["min_seq"], "last_sequence": r["max_seq"]}],
            evidence=[Evidence(r["broker"], r["path"], r["position"], f"{r['batches']} sequence numbers written twice")],
            explanation=f"Producer {r['producer_id']} (epoch {r['producer_epoch']}) has the same sequence numbers at two "
                        "offsets: a retried batch was appended twice, so consumers see duplicates.",
        ))
    return out


def find(case: Case) -> list[Finding]:
    return duplicate_sequence_findings(case.tables["batches"])
