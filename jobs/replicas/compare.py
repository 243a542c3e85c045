"""Cross-replica comparison: which offsets two replicas of a partition hold differently.

A follower appends the leader's batches as they are, so two healthy replicas hold batches with
the same (base offset, last offset, CRC) — the CRC covers attributes onwards, not the base offset
or the partition leader epoch, which is why it is comparable across replicas. Batches that match
that way are identical. Only the rest (different boundaries after a truncation and re-fetch,
independent compaction, real divergence) fall back to record hashes, compared by offset.
Everything stays in Spark: nothing record-level is collected. Only the partitions whose
replicas' batch digests differ (``differing_partitions``) are compared at all, within them only
above the offset up to which every replica holds the same batches (``agreed_prefixes``, told by
the replicas' runs), and there only the records of the batches some replica lacks: two 100 MB
replicas differing in their last tenth cost a tenth of their records, and identical batches are
never joined record by record.

Output rows are per (pair of replicas, offset) where the two differ:
``divergent`` (both hold the offset with different content), ``only_a`` / ``only_b`` (one lacks it).
``a`` is always the smaller broker id.
"""

from __future__ import annotations

import operator
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .offset_ranges import islands
from .replica_logs import live_segment_batches

PAIR = ["topic", "partition", "broker_a", "broker_b"]
# what makes two replicas' batches the same batch (a follower appends the leader's unchanged)
BATCH_KEY = ["topic", "partition", "base_offset", "last_offset", "crc"]
BATCH_COLS = ["path", "position", "partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence", "is_transactional",
              "is_control", "aborted"]
# Per differing partition, what the comparison reads of it (``comparison_scope``): its batches from
# ``from_offset`` on (below it every live replica holds the same batches) and its live replicas
SCOPE_SCHEMA = T.StructType([T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
                             T.StructField("from_offset", T.LongType()), T.StructField("brokers", T.ArrayType(T.IntegerType()))])
# what two replicas' runs of batches must sum to alike, to hold the same readable batches
RUN_SUMS = ["readable", "digest_0", "digest_1", "digest_2", "digest_3"]


def live_records(records: DataFrame) -> DataFrame:
    """Records of live log dirs (not ``-delete``/``-future``/``-stray``), the only ones that count."""
    return records.where(F.col("dir_state") == "live") if "dir_state" in records.columns else records


def record_details() -> Column:
    """One record as the comparison and the loss jobs carry it, from a records row joined with its
    batch (``position`` = the batch's). ``content`` is what two replicas must agree on: the key
    and value hashes and the control type (offsets and epochs may legitimately differ)."""
    size = F.greatest(F.col("key_size"), F.lit(0)) + F.greatest(F.col("value_size"), F.lit(0))
    return F.struct(
        F.col("path"), F.col("position"), F.col("partition_leader_epoch").alias("epoch"), "producer_id", "producer_epoch",
        "base_sequence", "is_transactional", "is_control", "aborted", "control_type", "timestamp_ms",
        F.concat_ws("/", F.coalesce("key_sha256", F.lit("-")), F.coalesce("value_sha256", F.lit("-")),
                    F.coalesce("control_type", F.lit(""))).alias("content"),
        "key_sha256", "value_sha256", size.alias("size"),
    )


def with_txn_outcome(batches: DataFrame, records: DataFrame) -> DataFrame:
    """Add ``aborted``: transactional data whose producer's next marker on this replica is an abort.

    Aborted data stays in the log (consumers skip it by the .txnindex), so losing it is benign.
    Only transactional batches can be aborted (``aborted_batches``); the rest get ``false``
    without being sorted."""
    b = live_segment_batches(batches)
    txn = F.coalesce(F.col("is_transactional"), F.lit(False))
    return b.where(~txn).withColumn("aborted", F.lit(False)).unionByName(_txn_outcome(b.where(txn), records))


def aborted_batches(batches: DataFrame, records: DataFrame) -> DataFrame:
    """(broker, path, position) of every live transactional data batch whose producer's next
    marker on its replica is an abort (``with_txn_outcome``'s rule), for a join onto other rows."""
    b = live_segment_batches(batches).where(F.coalesce(F.col("is_transactional"), F.lit(False)))
    return _txn_outcome(b, records).where(F.col("aborted")).select("broker", "path", "position")


def _txn_outcome(txn: DataFrame, records: DataFrame) -> DataFrame:
    """``txn`` (transactional batches: data and markers) with ``aborted``. Only their markers end
    them, so only they take part in the window. The next marker after a batch is the last marker
    before it in descending offset order: a running ``last`` over a frame that only grows (Spark's
    unbounded-preceding frame, one pass). Asked forward, as "the first marker in the rest of the
    partition", Spark re-aggregates the whole rest for every row: quadratic in the batches of one
    producer on one replica (a 100 MB partition of a plain producer never finished)."""
    markers = records.where(F.col("control_type").isin("commit", "abort")).select(
        "broker", "path", F.col("batch_position").alias("position"), "control_type"
    )
    t = txn.join(markers, ["broker", "path", "position"], "left")
    w = (Window.partitionBy("topic", "partition", "broker", "producer_id").orderBy(F.col("base_offset").desc())
         .rowsBetween(Window.unboundedPreceding, -1))
    nxt = F.last(F.when(F.col("is_control"), F.col("control_type")), ignorenulls=True).over(w)
    return t.withColumn("aborted", ~F.col("is_control") & (F.coalesce(nxt, F.lit("")) == "abort")).drop("control_type")


def differing_partitions(replicas: list) -> list[tuple[str, int]]:
    """The partitions whose live replicas do not all hold the same readable batches, by their
    ``batch_digest`` (``replica_logs``): only these can differ record by record, so only these
    are compared. ``replicas``: replica_logs rows."""
    digests: dict[tuple[str, int], set] = {}
    for r in replicas:
        if r["dir_state"] == "live":
            digests.setdefault((r["topic"], r["partition"]), set()).add(r["batch_digest"])
    return sorted(k for k, d in digests.items() if len(d) > 1)


def agreed_prefixes(runs: list, replicas: list) -> dict[tuple[str, int], int]:
    """Per partition of ``runs``, the last offset up to which every live replica holds the same
    readable batches (-1: none known to agree): the comparison reads nothing below it.

    Why: replicas that diverged, or a follower that lags, still share most of their log, and a
    batch every replica holds is never anyone's unmatched batch; told batch by batch, finding those
    was a window over every batch of the partition, so a 10 % diverged tail cost the whole log.
    Runs (``batch_runs``: a few rows a segment, each summing its batches' digests) tell it per
    run end: an offset ``e`` splits a replica's log cleanly where no run of it spans ``e``, and
    two replicas whose run sums up to such an ``e`` are equal hold the same batches up to it (the
    multiset hash ``replica_logs.batch_digest`` is built from, so as sure as the digest that
    chose the partition). ``runs``: live segment ``batch_runs`` rows (topic, partition, broker,
    first_offset, last_offset, ``RUN_SUMS``); ``replicas``: replica_logs rows (its live ones count,
    a replica without runs agrees with none that has some)."""
    brokers: dict[tuple[str, int], set] = {}
    for r in replicas:
        if r["dir_state"] == "live":
            brokers.setdefault((r["topic"], r["partition"]), set()).add(r["broker"])
    by_replica: dict[tuple[str, int], dict[int, list]] = {}
    for r in runs:
        by_replica.setdefault((r["topic"], r["partition"]), {}).setdefault(r["broker"], []).append(
            (r["first_offset"], r["last_offset"], tuple(r[c] or 0 for c in RUN_SUMS)))
    out = {}
    for key, held in by_replica.items():
        cuts = {b: _cuts(held.get(b, [])) for b in brokers.get(key, set()) | set(held)}
        candidates = sorted({e for c in cuts.values() for e, _, _ in c}, reverse=True)
        out[key] = next((e for e in candidates if _agree([_sums_at(c, e) for c in cuts.values()])), -1)
    return out


def _agree(sums: list) -> bool:
    return None not in sums and len(set(sums)) == 1


def _cuts(runs: list) -> list[tuple[int, int, tuple]]:
    """A replica's clean cuts: (from, to, sums): every offset in [from, to] splits its runs (none
    spans it), and the runs below sum to ``sums``."""
    runs = sorted(runs, key=lambda r: (r[0], r[1]))
    total, top, out = (0,) * len(RUN_SUMS), -1, []
    for i, (first, last, sums) in enumerate(runs):
        if first > top:
            out.append((top, first - 1, total))
        top = max(top, last)
        total = tuple(map(operator.add, total, sums))
        if i == len(runs) - 1:
            out.append((top, 1 << 62, total))
    return out or [(-1, 1 << 62, total)]


def _sums_at(cuts: list[tuple[int, int, tuple]], offset: int) -> tuple | None:
    """The run sums up to ``offset`` (None: a run spans it, no cut there)."""
    return next((sums for lo, hi, sums in cuts if lo <= offset <= hi), None)


def comparison_scope(prefixes: dict[tuple[str, int], int], replicas: list) -> list[tuple]:
    """``SCOPE_SCHEMA`` rows: each partition of ``prefixes`` (``agreed_prefixes``) with the first
    offset left to compare and its live replicas' broker ids, sorted."""
    brokers: dict[tuple[str, int], set] = {}
    for r in replicas:
        if r["dir_state"] == "live":
            brokers.setdefault((r["topic"], r["partition"]), set()).add(r["broker"])
    return [(t, p, prefix + 1, sorted(brokers.get((t, p), ()))) for (t, p), prefix in sorted(prefixes.items())]


def in_scope(df: DataFrame, scope: DataFrame | None, rows: list[tuple], offset: str) -> DataFrame:
    """The rows of ``df`` in the scope's partitions at or above their ``from_offset`` (``offset``:
    the column compared), with ``brokers``, their live replicas. Without ``scope`` (a frame of
    ``rows``), as literal predicates and values: Parquet's row-group statistics use them, so that
    a partition whose replicas differ in their last tenth reads a tenth of its rows, and no job
    broadcasts the scope (each broadcast is a Spark job of its own, even of rows the driver
    holds). With it (many partitions: one predicate each is too many to plan), by a join."""
    df = df.where(F.col("topic").isin(*sorted({r[0] for r in rows})))
    if scope is not None:
        return df.join(F.broadcast(scope), ["topic", "partition"]).where(F.col(offset) >= F.col("from_offset")).drop("from_offset")
    if not rows:
        return df.where(F.lit(False)).withColumn("brokers", F.array().cast("array<int>"))

    def at(t: str, p: int) -> Column:
        return (F.col("topic") == t) & (F.col("partition") == p)

    brokers = reduce(lambda c, r: c.when(at(r[0], r[1]), F.array(*[F.lit(b) for b in r[3]]).cast("array<int>")),
                     rows[1:], F.when(at(rows[0][0], rows[0][1]), F.array(*[F.lit(b) for b in rows[0][3]]).cast("array<int>")))
    return df.where(reduce(operator.or_, [at(t, p) & (F.col(offset) >= start) for t, p, start, _ in rows])).withColumn("brokers", brokers)


def in_partitions(df: DataFrame, partitions: list[tuple[str, int]]) -> DataFrame:
    """The rows of ``df`` in ``partitions`` (a few), by literal predicates (no broadcast job)."""
    topics = sorted({t for t, _ in partitions})
    if not partitions:
        return df.where(F.lit(False))
    return df.where(F.col("topic").isin(*topics)).where(
        reduce(operator.or_, [(F.col("topic") == t) & (F.col("partition") == p) for t, p in partitions]))


def unshared_batches(batches: DataFrame, aborted: DataFrame | None = None) -> DataFrame:
    """``not_everywhere`` for the batches of a scope (``in_scope``, with ``brokers``): the readable batches some
    live replica lacks, each with ``brokers`` (its partition's live replicas) and ``_holders``,
    the bit mask of those holding it (bit i: ``brokers[i]``; a long: 63 replicas of a partition,
    far above any replication factor).

    The mask says which replicas lack the batch, so each record of it meets, in one explode, the
    replicas it is to be compared with (``scoped_record_diffs``), where the replica pairs were
    joined with the batches once per pair and side. The replica counts and pairs come with the
    scope, from the driver's rows: no job reads replica_logs for them."""
    key = BATCH_KEY
    cols = BATCH_COLS if aborted is None else [c for c in BATCH_COLS if c != "aborted"]
    b = batches.where(F.coalesce(F.col("crc_valid"), F.lit(True))).select(
        "topic", "partition", "broker", "base_offset", "last_offset", "crc", "record_count", "brokers", *cols
    )
    bit = F.expr("if(array_position(brokers, broker) > 0, shiftleft(1L, cast(array_position(brokers, broker) - 1 as int)), 0L)")
    # distinct holders by a window, as not_everywhere (a replica holding a batch twice is one holder)
    by_holder = Window.partitionBy(*key).orderBy("broker")
    first_of_holder = F.coalesce(F.lag("broker").over(by_holder) != F.col("broker"), F.lit(True))
    held = b.withColumn("_bit", F.when(first_of_holder, bit).otherwise(F.lit(0).cast("long"))).withColumn(
        "_holders", F.sum("_bit").over(Window.partitionBy(*key)))
    everyone = F.expr("shiftleft(1L, size(brokers)) - 1")
    some = held.where(F.col("_holders") != everyone).drop("_bit")
    if aborted is not None:
        some = some.join(aborted.withColumn("aborted", F.lit(True)), ["broker", "path", "position"], "left").withColumn(
            "aborted", F.coalesce(F.col("aborted"), F.lit(False)))
    return some


def scoped_record_diffs(records: DataFrame, some: DataFrame) -> DataFrame:
    """``record_diffs`` from ``unshared_batches``: per (pair, offset) where two replicas differ.

    Each record of an unshared batch goes, once per live replica lacking its batch, to the pair
    of the two as side ``a`` (its broker the smaller) or ``b``; the sides are joined by offset as
    ``record_diffs`` joins them, so the rows (duplicates of a batch held twice included) are the
    same. Its cost is the records of the unshared batches, once per replica lacking them."""
    recs = records.select(
        "topic", "partition", "broker", F.col("path"), F.col("batch_position").alias("position"),
        "offset", "timestamp_ms", "key_size", "value_size", "key_sha256", "value_sha256", "control_type",
    )
    j = some.join(recs, ["topic", "partition", "broker", "path", "position"])
    lacking = F.expr("filter(brokers, (y, i) -> y != broker AND shiftright(_holders, i) & 1 = 0)")
    x = j.withColumn("_other", F.explode(lacking)).select(
        "topic", "partition", F.least("broker", "_other").alias("broker_a"), F.greatest("broker", "_other").alias("broker_b"),
        (F.col("broker") < F.col("_other")).alias("_is_a"), "offset", record_details().alias("_rec"))
    # both sides of each (pair, offset) in one shuffle, then their product as the full outer join
    # makes it (a side lacking the offset is one null; a batch held twice, two rows)
    sides = x.groupBy(*PAIR, "offset").agg(
        F.collect_list(F.when(F.col("_is_a"), F.col("_rec"))).alias("_a"), F.collect_list(F.when(~F.col("_is_a"), F.col("_rec"))).alias("_b"))
    j = sides.select(*PAIR, "offset", F.explode_outer("_a").alias("a"), "_b").select(*PAIR, "offset", "a", F.explode_outer("_b").alias("b"))
    return _statused(j)


def _statused(j: DataFrame) -> DataFrame:
    status = (
        F.when(F.col("a").isNull(), "only_b")
        .when(F.col("b").isNull(), "only_a")
        .when(F.col("a.content") != F.col("b.content"), "divergent")
    )
    return j.withColumn("status", status).where(F.col("status").isNotNull())


def within(df: DataFrame, partitions: DataFrame, topics: list[str]) -> DataFrame:
    """The rows of ``df`` in ``partitions`` (a small frame of topic, partition; ``topics``: its
    topics, which prune the topic folders of a partitioned table before any file is read)."""
    return df.where(F.col("topic").isin(*topics)).join(F.broadcast(partitions), ["topic", "partition"], "left_semi")


def range_side_aggs(side: str, order: str, first_ts: str = "timestamp_ms", last_ts: str = "timestamp_ms",
                    records: str | None = None) -> list[Column]:
    """What a divergent range says of side ``side`` (a struct column), over its rows: records,
    bytes, epochs, the first row's file and position (by ``order``), timestamps (``first_ts``,
    ``last_ts``: the side's fields), producers, sequences and control records. A row is a record
    (``records`` None), or stands for the side's field ``records`` of them (a span)."""
    s = F.col(side)
    count = F.count(s["content"]) if records is None else F.coalesce(F.sum(s[records]), F.lit(0))
    weight = F.lit(1) if records is None else s[records]
    return [
        count.alias(f"records_{side}"),
        F.sum(s["size"]).cast("long").alias(f"bytes_{side}"),
        F.collect_set(s["epoch"]).alias(f"epochs_{side}"),
        F.min_by(s["path"], order).alias(f"path_{side}"),
        F.min_by(s["position"], order).alias(f"position_{side}"),
        F.min(s[first_ts]).alias(f"first_ts_{side}"),
        F.max(s[last_ts]).alias(f"last_ts_{side}"),
        F.collect_set(F.when(s["producer_id"] >= 0, F.struct(
            s["producer_id"].alias("producer_id"), s["producer_epoch"].cast("int").alias("producer_epoch"),
        ))).alias(f"producer_keys_{side}"),
        F.min(F.when(s["producer_id"] >= 0, s["base_sequence"])).alias(f"min_seq_{side}"),
        F.max(F.when(s["producer_id"] >= 0, s["base_sequence"])).alias(f"max_seq_{side}"),
        F.sum(F.when(s["is_control"], weight).otherwise(0)).alias(f"control_{side}"),
    ]


def diff_ranges(diffs: DataFrame) -> DataFrame:
    """Contiguous runs of one status per pair, with counts, bytes, epochs, producers and evidence
    (what ``divergence`` reports of a range; loss reads the diffs themselves)."""
    d = islands(diffs, [*PAIR, "status"], name="_grp")
    return d.groupBy(*PAIR, "status", "_grp").agg(
        F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"), F.count("*").alias("offsets"),
        *range_side_aggs("a", "offset"), *range_side_aggs("b", "offset"),
    ).drop("_grp")
