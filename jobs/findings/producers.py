"""Idempotent producers' sequence numbers written twice on one replica."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.replicas.replica_logs import live_segment_batches
from jobs.store.io import local_frame

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


PRODUCER_EPOCH = ["topic", "partition", "broker", "producer_id", "producer_epoch"]
_MASK31 = 0x7FFFFFFF


def _slices(col) -> list:
    """Two 31-bit slices of a 64-bit hash of ``col`` (a long): summed over fewer than 2^32
    batches they cannot overflow a long (Spark's ANSI mode fails a query on that)."""
    h = F.xxhash64(col)
    return [h.bitwiseAND(F.lit(_MASK31)), F.shiftright(h, 31).bitwiseAND(F.lit(_MASK31))]


def producer_epochs(batches: DataFrame) -> DataFrame:
    """One row per replica, producer id and epoch that ``duplicate_sequence_findings`` or
    ``transactions.pending_transactions`` must look at batch by batch, from one hash aggregate
    over the batches of producers (a few groups per producer epoch, whatever the depth):

    ``suspect``: its sequences may repeat. The leader appends a producer epoch's batches only in
    sequence (``ProducerStateManager``: each base sequence is the last one + 1), so in a log with
    no duplicate the intervals [base_sequence, last_sequence] chain from the lowest to the highest:
    every base sequence but the lowest is some batch's last sequence + 1, and the highest last
    sequence + 1 is no batch's base. That chain is checked on sums (of the values, and of two
    31-bit slices of their hashes): the multisets {bases, highest + 1} and {lasts + 1, lowest}
    are equal only when the batches chain (the intervals are edges going strictly up, so equal
    in- and out-degrees leave one path, each base taken once). A repeated base sequence breaks
    it, and so does what only looks odd (a gap left by compaction or retention, a sequence
    wrapping past Int.MaxValue): those are compared batch by batch as before, and so are all of
    a depth's batches only where something is odd.

    ``last_marker`` and ``last_txn_data``: the base offsets of the epoch's last COMMIT/ABORT
    marker and last transactional data batch; data after the producer id's last marker, of any
    epoch, is pending (``transactions.pending_producers`` compares them per producer id)."""
    b = live_segment_batches(batches).where(F.col("producer_id") >= 0)
    data = ~F.col("is_control") & (F.col("base_sequence") >= 0)
    base, end = F.col("base_sequence").cast("long"), F.col("last_sequence").cast("long") + 1
    g = b.groupBy(*PRODUCER_EPOCH).agg(
        F.count(F.when(data, 1)).alias("n"),
        F.min(F.when(data, base)).alias("lo"), F.max(F.when(data, end)).alias("hi"),
        F.min(F.when(data, end - base)).alias("min_len"),
        F.sum(F.when(data, base)).alias("bases"), F.sum(F.when(data, end)).alias("ends"),
        *[F.sum(F.when(data, x)).alias(f"base_{i}") for i, x in enumerate(_slices(base))],
        *[F.sum(F.when(data, x)).alias(f"end_{i}") for i, x in enumerate(_slices(end))],
        F.max(F.when(F.col("is_control"), F.col("base_offset"))).alias("last_marker"),
        F.max(F.when(F.col("is_transactional") & ~F.col("is_control"), F.col("base_offset"))).alias("last_txn_data"),
    )
    lo, hi = _slices(F.col("lo")), _slices(F.col("hi"))
    chained = (F.col("min_len") > 0) & (F.col("bases") + F.col("hi") == F.col("ends") + F.col("lo"))
    for i in range(2):
        chained = chained & (F.col(f"base_{i}") + hi[i] == F.col(f"end_{i}") + lo[i])
    return g.select(*PRODUCER_EPOCH, ((F.col("n") > 1) & ~chained).alias("suspect"), "last_marker", "last_txn_data")


def _producer_epochs(case: Case) -> list[Row]:
    """``producer_epochs`` of the case's batches, only the rows that ask for a look (``suspect``)
    or are transactional (data or markers; a transactions v2 marker carries the data's epoch + 1):
    one Spark query for producers and transactions both."""
    return producer_epochs(case.tables["batches"]).where(
        F.col("suspect") | F.col("last_txn_data").isNotNull() | F.col("last_marker").isNotNull()).collect()


def suspects(case: Case) -> list[Row]:
    """The rows of ``producer_epochs`` that ask for a look, once per case."""
    return case.shared(_producer_epochs)


def of_keys(batches: DataFrame, spark, keys: list[tuple], columns: list[str]) -> DataFrame:
    """``batches`` of the (``columns``) keys listed: a join with the few keys the driver holds."""
    fields = {f.name: f for f in batches.schema.fields}
    wanted = local_frame(spark, keys, T.StructType([fields[c] for c in columns])).alias("k")
    on = [batches[c].eqNullSafe(F.col(f"k.{c}")) for c in columns]
    return batches.join(F.broadcast(wanted), on, "left_semi")


def find(case: Case) -> list[Finding]:
    keys = list(dict.fromkeys(tuple(r[c] for c in PRODUCER_EPOCH) for r in suspects(case) if r["suspect"]))
    if not keys:
        return []
    return duplicate_sequence_findings(of_keys(case.tables["batches"], case.spark, keys, PRODUCER_EPOCH))
