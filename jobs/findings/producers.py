"""Idempotent producers' sequence numbers written twice on one replica."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.ingest.producer_epoch_sums import sequence_hash_slices
from jobs.replicas.grouped import Groups, values
from jobs.replicas.replica_logs import live_segment_batches, live_segment_runs
from jobs.store.io import arrow_table, collected_rows, local_frame

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


# the producer_epoch_sums columns ``local_producer_epochs`` reads
SUM_COLUMNS = [*PRODUCER_EPOCH, "dir_state", "file_kind", "data_batches", "min_base_sequence", "max_end_sequence", "min_sequence_span",
               "base_sequence_sum", "end_sequence_sum", "base_sequence_hash_0", "base_sequence_hash_1", "end_sequence_hash_0",
               "end_sequence_hash_1", "last_marker_offset", "last_txn_data_offset"]


def local_producer_epochs(sums: pa.Table) -> list[Row]:
    """``producer_epochs``' rows (``suspect``, ``last_marker``, ``last_txn_data``), computed on the
    driver from ingest's ``producer_epoch_sums`` (``SUM_COLUMNS``: a row per piece of a segment
    and producer epoch, whatever the depth) instead of every batch: the same chain check on the
    per-piece partial sums added up, with our own hash of a sequence
    (``producer_epoch_sums.sequence_hash_slices``) where Spark's ``xxhash64`` was: only sums of
    hashes are compared, so the answer does not depend on which hash. Sorted as ``collected`` sorts."""
    s = live_segment_runs(sums)
    g = Groups(s, PRODUCER_EPOCH)
    if not len(g):
        return []

    def total(name: str) -> np.ndarray:
        v, ok = values(g.sum(s.column(name)))
        return np.where(ok, v, 0)

    n = total("data_batches")
    lo, lo_ok = values(g.min(s.column("min_base_sequence")))
    hi, hi_ok = values(g.max(s.column("max_end_sequence")))
    min_len, len_ok = values(g.min(s.column("min_sequence_span")))
    (lo0, lo1), (hi0, hi1) = sequence_hash_slices(lo), sequence_hash_slices(hi)
    with np.errstate(over="ignore"):
        chained = (len_ok & (min_len > 0) & lo_ok & hi_ok
                   & (total("base_sequence_sum") + hi == total("end_sequence_sum") + lo)
                   & (total("base_sequence_hash_0") + hi0 == total("end_sequence_hash_0") + lo0)
                   & (total("base_sequence_hash_1") + hi1 == total("end_sequence_hash_1") + lo1))
    table = pa.table({**dict(zip(PRODUCER_EPOCH, g.keys(s, PRODUCER_EPOCH), strict=True)), "suspect": pa.array((n > 1) & ~chained),
                      "last_marker": g.max(s.column("last_marker_offset")), "last_txn_data": g.max(s.column("last_txn_data_offset"))})
    return collected_rows([Row(**r) for r in table.to_pylist()])


def _producer_epochs(case: Case) -> list[Row]:
    """``local_producer_epochs`` of the case's ``producer_epoch_sums``, only the rows that ask
    for a look (``suspect``) or are transactional (data or markers; a transactions v2 marker
    carries the data's epoch + 1): read by pyarrow, no Spark job, for producers and transactions
    both. (One Spark aggregate over every producer's batches was most of a deep partition's jobs
    phase: issue 35.)"""
    rows = local_producer_epochs(arrow_table(case.out, "producer_epoch_sums", SUM_COLUMNS))
    return [r for r in rows if r["suspect"] or r["last_txn_data"] is not None or r["last_marker"] is not None]


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
