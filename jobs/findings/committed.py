"""Committed offsets the surviving log lacks, in ranges: the views ``loss`` (acked_data_loss) and
``truncation`` (truncation_below_hw) both read, computed once per case.

Committed is what a replica checkpointed below its high watermark (``hw_lost_offsets``) or what the
producer ledger acknowledged (``jobs.replicas.ledger``); lost is what every surviving-log candidate
lacks or holds with other content (``jobs.replicas.survivors``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from jobs.replicas.ledger import ledger_lost_offsets, lost_acks, lost_ledger_rows, record_view
from jobs.replicas.offset_ranges import islands
from jobs.replicas.survivors import lost_on_every_candidate

if TYPE_CHECKING:
    from .case import Case


def hw_lost_offsets(diffs: DataFrame, survivors_df: DataFrame) -> DataFrame:
    """Offsets some replica checkpointed as committed (below its HW) that the surviving log lacks
    or holds with other content, with the holder's record details (record level, stays in Spark).
    ``survivors_df``: ``jobs.replicas.survivors.survivors_frame``: one row per candidate it is lost on
    (``committed_loss`` keeps what every candidate lacks)."""
    d = diffs.join(survivors_df, ["topic", "partition"])
    parts = []
    for holder, survivor in (("a", "b"), ("b", "a")):
        # the surviving log is side `survivor`; the holder is side `holder`
        sel = d.where(F.col(f"broker_{survivor}") == F.col("survivor")).where(F.col(holder).isNotNull())
        sel = sel.where(
            (F.col("status") == "divergent") | ((F.col("status") == f"only_{holder}") & ~F.col("s_compacted"))
        ).where(F.col("offset") >= F.col("s_log_start")).where(
            ~F.col(f"{holder}.is_control") & ~F.coalesce(F.col(f"{holder}.aborted"), F.lit(False))
        )
        parts.append(sel.select(
            "topic", "partition", "offset", "survivor", "s_candidates", "status",
            F.col(f"broker_{holder}").alias("holder"), F.col(holder).alias("rec"), F.lit("hw").alias("source"),
        ))
    return parts[0].unionByName(parts[1])


def committed_loss(lost: DataFrame, replica_logs: DataFrame) -> DataFrame:
    """Keep offsets below the holder's own HW checkpoint (those were committed) that every
    surviving-log candidate lacks."""
    hw = replica_logs.select("topic", "partition", F.col("broker").alias("holder"), F.col("hw_checkpoint").alias("holder_hw"))
    return lost_on_every_candidate(lost.join(hw, ["topic", "partition", "holder"]).where(F.col("offset") < F.col("holder_hw")))


def loss_ranges(lost: DataFrame) -> list[Row]:
    """Group lost offsets (one row per offset and holder) into ranges per partition."""
    per_offset = lost.groupBy("topic", "partition", "offset").agg(
        F.sort_array(F.collect_set("holder")).alias("holders"),
        F.max("rec.size").alias("size"),
        F.first("rec.epoch").alias("epoch"),
        F.first("rec.producer_id").alias("producer_id"),
        F.first("rec.producer_epoch").alias("producer_epoch"),
        F.first("rec.base_sequence").alias("seq"),
        F.first("rec.timestamp_ms").alias("ts"),
        F.first("rec.path").alias("path"),
        F.first("rec.position").alias("position"),
        F.max(F.col("status") == "divergent").alias("overwritten"),
        F.max("holder_hw").alias("holder_hw"),
        F.max("source").alias("source"),
    )
    g = islands(per_offset, ["topic", "partition"]).groupBy("topic", "partition", "_island").agg(
        F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"), F.count("*").alias("records"),
        F.sum("size").cast("long").alias("bytes"),
        F.array_distinct(F.flatten(F.collect_list("holders"))).alias("holders"),
        F.collect_set("epoch").alias("epochs"),
        F.collect_set(F.when(F.col("producer_id") >= 0, F.struct("producer_id", F.col("producer_epoch").cast("int").alias("producer_epoch")))).alias("pkeys"),
        F.min(F.when(F.col("producer_id") >= 0, F.col("seq"))).alias("min_seq"),
        F.max(F.when(F.col("producer_id") >= 0, F.col("seq"))).alias("max_seq"),
        F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"),
        F.min_by("path", "offset").alias("path"), F.min_by("position", "offset").alias("position"),
        F.max("overwritten").alias("overwritten"), F.max("holder_hw").alias("holder_hw"),
        F.collect_set("source").alias("sources"),
    )
    return g.collect()


def _committed_ranges(case: Case) -> list[Row]:
    if not case.survivors:
        return []
    # (replicas that agree batch for batch lose nothing to each other: no record-level diffs to read)
    parts = [] if case.replicas_agree else [committed_loss(hw_lost_offsets(case.diffs, case.survivors_df), case.replica_logs)]
    if case.ledger_records is not None:
        parts.append(ledger_lost_offsets(case.ledger_records, case.tables["records"], case.batches, case.survivors_df))
    if not parts:
        return []
    lost = parts[0] if len(parts) == 1 else parts[0].select(*parts[1].columns).unionByName(parts[1])
    return loss_ranges(lost)


def committed_ranges(case: Case) -> list[Row]:
    """Lost committed offsets in ranges (``loss_ranges`` rows: HW evidence, and the ledger's when
    given), once per case: loss and truncation both read them."""
    return case.shared(_committed_ranges)


def _lost_acks(case: Case) -> list[Row]:
    if not case.survivors or case.ledger_records is None:
        return []
    records = record_view(case.tables["records"], case.batches)
    return lost_acks(lost_ledger_rows(case.ledger_records, records, case.survivors_df))


def ledger_acks(case: Case) -> list[Row]:
    """Lost ledger records per partition and acks setting, with their acknowledgement times (a few rows)."""
    return case.shared(_lost_acks)
