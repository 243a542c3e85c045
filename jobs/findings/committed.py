"""Committed offsets the surviving log lacks, in ranges: the views ``loss`` (acked_data_loss) and
``truncation`` (truncation_below_hw) both read, computed once per case.

Committed is what a replica checkpointed below its high watermark (``hw_lost_offsets``) or what the
producer ledger acknowledged (``jobs.replicas.ledger``); lost is what every surviving-log candidate
lacks or holds with other content (``jobs.replicas.survivors``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from jobs.replicas.batch_diffs import overlapping
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


def literal_hws(hws: dict[tuple[str, int, int], list]) -> Column:
    """Per row's (topic, partition, holder), the HW checkpoints of its replica_logs rows (``hws``)
    as a literal array: exploded, what a join with replica_logs gives those rows (none: the row
    goes), without a job that reads and broadcasts the table."""
    out = None
    for (t, p, b), values in sorted(hws.items()):
        at = (F.col("topic") == t) & (F.col("partition") == p) & (F.col("holder") == b)
        values = F.array(*[F.lit(v).cast("long") for v in values])
        out = F.when(at, values) if out is None else out.when(at, values)
    empty = F.array().cast("array<long>")
    return empty if out is None else out.otherwise(empty)


def span_lost(spans: DataFrame, survivors_df: DataFrame, replica_logs: DataFrame,
              hws: dict[tuple[str, int, int], list] | None = None) -> DataFrame:
    """``hw_lost_offsets`` and ``committed_loss`` of spans (``jobs.replicas.batch_diffs.spans``):
    one row per span, surviving-log candidate and holder, kept where all its offsets are lost (at
    or above the candidate's log start, below the holder's HW), or ``_cut`` where only some are
    (a bound falls inside the span: its records are needed). ``_pair``: the span's two batches'
    CRCs and its ``max_size``. ``hws``: the holders' HW checkpoints per (topic, partition, broker),
    as ``replica_logs`` holds them (``literal_hws``), instead of a join with it."""
    d = spans.join(survivors_df, ["topic", "partition"])
    parts = []
    for holder, survivor in (("a", "b"), ("b", "a")):
        sel = d.where(F.col(f"broker_{survivor}") == F.col("survivor")).where(F.col(holder).isNotNull()).where(
            (F.col("status") == "divergent") | ((F.col("status") == f"only_{holder}") & ~F.col("s_compacted"))
        ).where(~F.col(f"{holder}.is_control") & ~F.coalesce(F.col(f"{holder}.aborted"), F.lit(False)))
        parts.append(sel.select("topic", "partition", "first_offset", "last_offset", "survivor", "s_candidates", "s_log_start", "status",
                                F.col(f"broker_{holder}").alias("holder"), F.col(holder).alias("rec"), F.struct(
                                    F.least("a.crc", "b.crc").alias("lo"), F.greatest("a.crc", "b.crc").alias("hi"), "max_size").alias("_pair")))
    lost = parts[0].unionByName(parts[1])
    if hws is not None:
        lost = lost.withColumn("holder_hw", F.explode(literal_hws(hws)))
    else:
        hw = replica_logs.select("topic", "partition", F.col("broker").alias("holder"), F.col("hw_checkpoint").alias("holder_hw"))
        lost = lost.join(hw, ["topic", "partition", "holder"])
    lo, hi, start, top = F.col("first_offset"), F.col("last_offset"), F.col("s_log_start"), F.col("holder_hw")
    cut = F.coalesce(((lo < start) & (hi >= start)) | ((lo < top) & (hi >= top)), F.lit(False))
    return lost.withColumn("_cut", cut).where((lo >= start) & (hi < top) | F.col("_cut"))


def span_loss_groups(lost: DataFrame) -> DataFrame:
    """``span_lost`` rows per span bounds (every holder and candidate of those offsets), as
    ``lost_on_every_candidate`` and ``loss_ranges`` take them per offset: ``_lost`` where lost on every
    candidate, with ``_inexact`` where a span does not stand for its offsets: cut by a bound,
    overlapping other bounds, or held in more than two versions (the bytes lost per offset are
    the larger holder's record: of two versions, the sum a span of the two says, ``max_size``).
    A range's other facts are its smallest holder's record's (where ``loss_ranges`` takes the
    first row's of each offset, in practice the smallest holder's)."""
    rec = F.col("rec")
    g = lost.groupBy("topic", "partition", "first_offset", "last_offset").agg(
        F.size(F.collect_set("survivor")).alias("_on"), F.max("s_candidates").alias("_candidates"),
        F.sort_array(F.collect_set("holder")).alias("holders"),
        F.min(rec["crc"]).alias("_lo"), F.max(rec["crc"]).alias("_hi"), F.max(rec["size"]).alias("_one"),
        F.collect_set("_pair").alias("_pairs"),
        F.min_by(rec, "holder").alias("_first"),
        F.max(F.col("status") == "divergent").alias("overwritten"),
        F.max("holder_hw").alias("holder_hw"),
        F.max("_cut").alias("_cut"),
        F.size(F.collect_set(rec["crc"])).alias("_versions"),
    ).withColumn("_lost", F.col("_on") == F.col("_candidates"))
    two = F.expr("array_max(transform(filter(_pairs, p -> p.lo = _lo AND p.hi = _hi), p -> p.max_size))")
    first = F.col("_first")
    g = g.withColumn("size", F.when(F.col("_versions") == 1, F.col("_one")).when(F.col("_versions") == 2, two)).select(
        *[c for c in g.columns if c != "_first"], "size", first["epoch"].alias("epoch"), first["producer_id"].alias("producer_id"),
        first["producer_epoch"].alias("producer_epoch"), first["base_sequence"].alias("seq"), first["first_ts"].alias("first_ts"),
        first["last_ts"].alias("last_ts"), first["path"].alias("path"), first["position"].alias("position"))
    # (spans lost on some candidate only lose nothing, whatever their records: they only count where they overlap)
    inexact = F.col("_lost") & F.coalesce(F.col("_cut") | (F.col("_versions") > 2) | F.col("size").isNull(), F.lit(True))
    return g.withColumn("_inexact", inexact | overlapping(g, ["topic", "partition"])).drop(
        "_on", "_candidates", "_lo", "_hi", "_one", "_pairs", "_cut", "_versions")


def span_loss_ranges(groups: DataFrame) -> DataFrame:
    """``loss_ranges`` of ``span_loss_groups``: the same rows its offsets give (those ``_lost``), in
    the partitions where no range is ``_inexact`` (the spans not lost are ranges too, to say so)."""
    g = islands(groups, ["topic", "partition", "_lost"], start="first_offset", end="last_offset").groupBy(
            "topic", "partition", "_lost", "_island").agg(
        F.min("first_offset").alias("first_offset"), F.max("last_offset").alias("last_offset"),
        F.sum(F.col("last_offset") - F.col("first_offset") + 1).alias("records"),
        *_range_columns("first_offset", "first_ts", "last_ts"),
        F.array(F.lit("hw")).alias("sources"),
        F.max("_inexact").alias("_inexact"),
    )
    return g


def _range_columns(order: str, first_ts: str, last_ts: str) -> list[Column]:
    """What a lost range says beyond its offsets, over its rows (offsets, or the spans of batches
    whose offsets all differ): the same columns, in the same order, either way. ``order``: the
    column whose lowest row names the range's file and position."""
    producer = F.col("producer_id") >= 0
    return [
        F.sum("size").cast("long").alias("bytes"),
        F.array_distinct(F.flatten(F.collect_list("holders"))).alias("holders"),
        F.collect_set("epoch").alias("epochs"),
        F.collect_set(F.when(producer, F.struct("producer_id", F.col("producer_epoch").cast("int").alias("producer_epoch")))).alias("pkeys"),
        F.min(F.when(producer, F.col("seq"))).alias("min_seq"),
        F.max(F.when(producer, F.col("seq"))).alias("max_seq"),
        F.min(first_ts).alias("first_ts"), F.max(last_ts).alias("last_ts"),
        F.min_by("path", order).alias("path"), F.min_by("position", order).alias("position"),
        F.max("overwritten").alias("overwritten"), F.max("holder_hw").alias("holder_hw"),
    ]


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
        *_range_columns("offset", "ts", "ts"),
        F.collect_set("source").alias("sources"),
    )
    return g.collect()


def _span_ranges(case: Case) -> tuple[list[Row], list[tuple[str, int]]]:
    """The lost committed ranges of the partitions compared in spans (``Case.span_partitions``),
    and those of them where a span does not stand for its offsets (left to the records): one
    query, each range saying whether a span of it is ``_inexact``."""
    from .case import MAX_RECORD_WINDOWS

    parts = set(case.span_partitions)
    hws: dict[tuple[str, int, int], list] = {}
    for r in case.replicas:
        if (r["topic"], r["partition"]) in parts:
            hws.setdefault((r["topic"], r["partition"], r["broker"]), []).append(r["hw_checkpoint"])
    lost = span_lost(case.spans, case.survivors_df, case.replica_logs, hws if len(parts) <= MAX_RECORD_WINDOWS else None)
    rows = span_loss_ranges(span_loss_groups(lost)).collect()
    inexact = sorted({(r["topic"], r["partition"]) for r in rows if r["_inexact"]})
    return [Row(**{k: v for k, v in r.asDict().items() if k not in ("_inexact", "_lost")}) for r in rows
            if r["_lost"] and (r["topic"], r["partition"]) not in set(inexact)], inexact


def _committed_ranges(case: Case) -> list[Row]:
    if not case.survivors:
        return []
    if case.ledger is None and case.local_comparison is not None:  # (None where the replicas agree)
        return case.local_comparison[1]
    parts, spans = [], []
    # (replicas that agree batch for batch lose nothing to each other: no record-level diffs to read)
    if not case.replicas_agree:
        fallback = []
        if case.span_partitions:
            spans, fallback = _span_ranges(case)
        diffs = case.diffs if not fallback else case.record_diffs([*case.record_partitions, *fallback])
        if case.record_partitions or fallback:
            parts.append(committed_loss(hw_lost_offsets(diffs, case.survivors_df), case.replica_logs))
    if case.ledger_records is not None:
        parts.append(ledger_lost_offsets(case.ledger_records, case.tables["records"], case.batches, case.survivors_df))
    if not parts:
        return spans
    lost = parts[0] if len(parts) == 1 else parts[0].select(*parts[1].columns).unionByName(parts[1])
    return loss_ranges(lost) + spans


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
