"""Where two replicas differ batch by batch: the comparison of a deep partition in spans, one row
per pair of batches instead of one per record.

Why: when replicas fork, the batches after the fork usually cover the same offsets on both sides
(the new leader's producers wrote batches as big as the old ones) and hold other records at every
offset, or one side holds batches the other lacks altogether (a follower behind). Told record by
record (``compare.scoped_record_diffs``) every later step — the divergent ranges, the committed
ranges lost — carried one row per record through Spark's interpreted aggregates and windows: a
100 MB partition whose last tenth diverged cost more than reading the whole log. Here the records
of the unshared batches are aligned once, narrow (offset, a 64-bit hash of their content, size,
timestamp), and every pair of batches whose offsets all differ — both hold the batch's offsets,
complete (as many records as offsets), with other content at each, or one side lacks them all —
becomes one *span*: (pair, status, first_offset, last_offset) with each side's batch and the
sums of its records. Only the later steps' few span rows go on.

A span says what the record rows of its offsets say, exactly (the hash only decides "differs":
equal content has equal hashes, and two contents whose hashes collide count as the same, which
leaves the batch to the record comparison). A partition where any difference is not a whole
batch (batches cut at other offsets, a batch held twice, partly equal records, compaction holes)
has ``leftover`` offsets, and the caller compares it record by record as before.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .compare import PAIR, range_side_aggs
from .offset_ranges import islands

# what a span's side carries of its batch (``BATCH_COLS`` less the file-level ones), and of its records
SIDE_BATCH = ["path", "position", "partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence", "is_transactional",
              "is_control", "aborted", "crc"]
# per side, what each record brings to the alignment
ALIGNED = ["h", "base_offset", "last_offset", "record_count", "size", "timestamp_ms"]


def content_hash() -> Column:
    """64 bits of what ``compare.record_details``' ``content`` compares (key and value hashes, control
    type): equal content, equal hash; so different hashes are different content."""
    return F.xxhash64(F.coalesce("key_sha256", F.lit("-")), F.coalesce("value_sha256", F.lit("-")), F.coalesce("control_type", F.lit("")))


def aligned_offsets(records: DataFrame, some: DataFrame) -> DataFrame:
    """Per (pair, offset) where the records of ``some``'s batches (``compare.unshared_batches``) may
    differ: how many records each side holds there (``na``, ``nb``) and, per side, one record's
    ``ALIGNED`` facts (``h_a``, ``base_offset_a``, …), with the ``status`` the record comparison
    gives a single record a side (``irregular`` where a side holds two: left to it). One shuffle
    of narrow rows, by partition: every later step (per pair and offset, per pair of batches, per
    partition, the spans' runs) groups within it without another; the sides are the same as
    ``scoped_record_diffs``' (each record goes to every live replica lacking its batch)."""
    recs = records.select(
        "topic", "partition", "broker", "path", F.col("batch_position").alias("position"), "offset", "timestamp_ms",
        (F.greatest(F.col("key_size"), F.lit(0)) + F.greatest(F.col("value_size"), F.lit(0))).alias("size"), content_hash().alias("h"),
    )
    b = some.select("topic", "partition", "broker", "path", "position", "base_offset", "last_offset", "record_count", "brokers", "_holders")
    j = b.join(recs, ["topic", "partition", "broker", "path", "position"])
    lacking = F.expr("filter(brokers, (y, i) -> y != broker AND shiftright(_holders, i) & 1 = 0)")
    x = j.withColumn("_other", F.explode(lacking)).select(
        "topic", "partition", F.least("broker", "_other").alias("broker_a"), F.greatest("broker", "_other").alias("broker_b"),
        (F.col("broker") < F.col("_other")).alias("_is_a"), "offset", *ALIGNED).repartition("topic", "partition")
    is_a = F.col("_is_a")
    per = x.groupBy(*PAIR, "offset").agg(
        F.sum(is_a.cast("int")).alias("na"), F.sum((~is_a).cast("int")).alias("nb"),
        *[F.max(F.when(is_a if s == "a" else ~is_a, F.col(c))).alias(f"{c}_{s}") for s in "ab" for c in ALIGNED])
    status = (F.when((F.col("na") > 1) | (F.col("nb") > 1), "irregular").when(F.col("na") == 0, "only_b").when(F.col("nb") == 0, "only_a")
              .when(F.col("h_a") != F.col("h_b"), "divergent"))
    return per.withColumn("status", status).where(F.col("status").isNotNull())


def batch_pairs(aligned: DataFrame) -> DataFrame:
    """``aligned_offsets`` per pair, status and the two sides' batches, with ``whole``: the rows
    are every offset of those batches (complete ones: as many records as offsets), the same on
    both sides: one span says them all."""
    g = aligned.groupBy(*PAIR, "status", "base_offset_a", "last_offset_a", "base_offset_b", "last_offset_b").agg(
        F.count("*").alias("n"), F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
        F.max("record_count_a").alias("record_count_a"), F.max("record_count_b").alias("record_count_b"),
        F.sum(F.greatest("size_a", "size_b")).alias("max_size"),
        *[agg(F.col(f"{c}_{s}")).alias(f"{name}_{s}") for s in "ab"
          for agg, c, name in ((F.sum, "size", "size"), (F.min, "timestamp_ms", "first_ts"), (F.max, "timestamp_ms", "last_ts"))])

    def complete(s: str) -> Column:
        base, last = F.col(f"base_offset_{s}"), F.col(f"last_offset_{s}")
        return ((F.col("first_offset") == base) & (F.col("last_offset") == last) & (F.col("n") == last - base + 1)
                & (F.col(f"record_count_{s}") == F.col("n")))

    st = F.col("status")
    whole = ((st != "irregular") & ((st == "only_b") | complete("a")) & ((st == "only_a") | complete("b")))
    return g.withColumn("whole", F.coalesce(whole, F.lit(False)))


def leftover(pairs: DataFrame) -> DataFrame:
    """Per partition, the differing offsets no whole span says (rows of ``batch_pairs``): where it is
    not 0 the partition is compared record by record."""
    return pairs.groupBy("topic", "partition").agg(F.sum(F.when(~F.col("whole"), F.col("n")).otherwise(0)).alias("leftover"))


def spans(pairs: DataFrame, some: DataFrame) -> DataFrame:
    """The whole ``batch_pairs`` as spans: PAIR, status, first_offset, last_offset and per side
    (null where it lacks the offsets) its batch (``SIDE_BATCH``, ``partition_leader_epoch`` as
    ``epoch``) with ``records``, ``size`` (key and value bytes), ``first_ts``/``last_ts`` of its
    records; and ``max_size``, the sum over its offsets of the larger side's record size. The
    batch is the one of its broker at those bounds that the other side lacks."""
    batch = F.struct(*[F.col(c).alias("epoch" if c == "partition_leader_epoch" else c) for c in SIDE_BATCH])
    held = some.select("topic", "partition", "broker", "base_offset", "last_offset", "brokers", "_holders", batch.alias("_batch"))
    w = pairs.where(F.col("whole")).drop("whole")
    keys = [c for c in w.columns if c not in ("base_offset_a", "last_offset_a", "base_offset_b", "last_offset_b")]
    # each span's sides as rows, joined with their batches at once (one broadcast: a left join only
    # builds its right side), then put back together within the partitioning the pairs came in
    # (no shuffle)
    side = F.explode(F.array(*[F.when(F.col(f"base_offset_{s}").isNotNull(), F.struct(
        F.lit(s).alias("_side"), F.col(f"broker_{s}").alias("broker"), F.col(f"broker_{o}").alias("_other")))
        for s, o in (("a", "b"), ("b", "a"))]))
    sides = w.select(*keys, side.alias("_s")).where(F.col("_s").isNotNull()).select(*keys, "_s.*")
    j = sides.join(held, [sides["topic"] == held["topic"], sides["partition"] == held["partition"], sides["broker"] == held["broker"],
                          sides["first_offset"] == held["base_offset"], sides["last_offset"] == held["last_offset"]], "left")
    # (the batch the other side lacks: as a value, not a filter, which would make the join an inner one Spark may build either side of)
    lacked = F.expr("shiftright(_holders, cast(array_position(brokers, _other) - 1 as int)) & 1") == 0
    out = j.select(*[sides[c] for c in keys], "_side", F.when(lacked, F.col("_batch")).alias("_batch")).groupBy(*keys).agg(
        *[F.first(F.when(F.col("_side") == s, F.col("_batch")), ignorenulls=True).alias(f"_batch_{s}") for s in "ab"])
    cols = []
    for s in "ab":
        b = F.col(f"_batch_{s}")
        cols.append(F.when(b.isNotNull(), F.struct(
            *[b[c].alias(c) for c in ["path", "position", "epoch", *SIDE_BATCH[3:]]],
            F.col("n").alias("records"), F.col(f"size_{s}").alias("size"), F.col(f"first_ts_{s}").alias("first_ts"),
            F.col(f"last_ts_{s}").alias("last_ts"))).alias(s))
    return out.select(*PAIR, "status", "first_offset", "last_offset", *cols, "max_size")


def span_ranges(sp: DataFrame) -> DataFrame:
    """``compare.diff_ranges`` of spans (the same rows it gives of their records): contiguous runs
    of one status per pair, a span standing for its offsets."""
    d = islands(sp, [*PAIR, "status"], start="first_offset", end="last_offset", name="_grp")
    return d.groupBy(*PAIR, "status", "_grp").agg(
        F.min("first_offset").alias("first_offset"), F.max("last_offset").alias("last_offset"),
        F.sum(F.col("last_offset") - F.col("first_offset") + 1).alias("offsets"),
        *[agg for side in "ab" for agg in range_side_aggs(side, "first_offset", "first_ts", "last_ts", records="records")],
    ).drop("_grp")


def overlapping(df: DataFrame, keys: list[str]) -> Column:
    """Rows of ``df`` (first_offset, last_offset) that share an offset with an earlier one of their
    ``keys``: a running maximum over a frame that only grows (one pass)."""
    w = Window.partitionBy(*keys).orderBy("first_offset", "last_offset").rowsBetween(Window.unboundedPreceding, -1)
    return F.coalesce(F.max("last_offset").over(w) >= F.col("first_offset"), F.lit(False))
