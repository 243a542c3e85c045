"""Contiguous offset ranges of each replica, and the holes between them with their reason.

A range breaks where the next batch does not start at the previous one's last offset + 1, or where
the leader epoch changes (so each range reads "epoch e held offsets a..b"). Transaction markers
are batches too, so they never make holes; a hole is offsets no batch covers. Its reason:
``compaction`` (the log is compacted: the cleaner drops whole batches), ``log_start`` (below the
log start offset: retention or deleteRecords), or ``unexplained`` (what ``offset_gap`` /
``segment_gap`` report). The gaps-and-islands work is window functions, so it scales with the data;
it joins the runs of batches ingest summed (``batch_runs``), so it costs segments, not batches,
on the driver (``local_build``), except where a replica's runs overlap (there batches of two runs
interleave, and ``build`` joins that replica's batches in Spark).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .grouped import changes, codes, values
from .replica_logs import REPLICA_KEY, live_segment_batches, live_segment_runs


def islands(df: DataFrame, keys: list[str], start: str = "offset", end: str = "offset", order: list[str] | None = None,
            same: tuple | list = (), name: str = "_island") -> DataFrame:
    """Number the runs of consecutive offsets within ``keys`` (gaps and islands) in column ``name``:
    a row opens a new run when it does not continue the previous one (``start`` is not the
    previous ``end`` + 1) or one of the ``same`` columns changes. Window functions only, so it
    scales with the data; rows of one run share the number, to group by."""
    w = Window.partitionBy(*keys).orderBy(*(order or [start]))
    prev_end = F.lag(end).over(w)
    brk = prev_end.isNull() | (F.col(start) != prev_end + 1)
    for c in same:
        brk = brk | (F.col(c) != F.lag(c).over(w))
    return df.withColumn(name, F.sum(brk.cast("int")).over(w.rowsBetween(Window.unboundedPreceding, 0)))


def build(t: dict[str, DataFrame], replica_logs: DataFrame, overlapping: list) -> DataFrame:
    """The offset_ranges table in Spark, for a collection where some replicas' runs overlap
    (``overlapping``: their ``REPLICA_KEY`` rows, ``epoch_lineage.running_overlap``): there
    batches of two runs interleave in offset order, so those replicas' ranges are joined from
    their batches (``batches``: a pass over a deep partition's every batch, in Spark), the others'
    from ``batch_runs``. Everywhere else ``local_build`` computes the same table on the driver.

    Why one stream: the runs (or batches), and each replica's replica_logs row (its log start and
    whether it is compacted, which name a hole's reason), are hashed by replica once, and the
    islands, the ranges, the holes after them and their reasons are windows and an aggregate over
    that one shuffle; each range row then yields itself and the hole after it."""
    runs = live_segment_batches(t["batch_runs"]).select(
        *REPLICA_KEY, "path", "position", F.col("first_offset").alias("base_offset"), "end_offset", "last_offset",
        "records", "bytes", F.coalesce("partition_leader_epoch", F.lit(-1)).alias("leader_epoch"),
    )
    cols = ["base_offset", "end_offset", "last_offset", "records", "bytes", "leader_epoch", "path", "position"]
    r = runs.select(*REPLICA_KEY, *cols)
    if overlapping:
        over = F.lit(False)
        for o in overlapping:
            over = over | ((F.col("topic") == o["topic"]) & (F.col("partition") == o["partition"]) & (F.col("broker") == o["broker"]))
        # (their batches end at their last offset, and are ordered by position alone: ``_path`` is null)
        b = live_segment_batches(t["batches"]).where(over).select(
            *REPLICA_KEY, "path", "position", "base_offset", F.col("last_offset").alias("end_offset"), "last_offset",
            F.when(~F.col("is_control"), F.col("record_count")).otherwise(0).cast("long").alias("records"),
            F.col("size").alias("bytes"), F.coalesce("partition_leader_epoch", F.lit(-1)).alias("leader_epoch"),
        ).withColumn("_batch", F.lit(True))
        r = r.where(~over).unionByName(b, allowMissingColumns=True)
    else:
        r = r.withColumn("_batch", F.lit(None).cast("boolean"))
    whole = F.lit(True)
    for c in REPLICA_KEY:
        whole = whole & F.col(c).isNotNull()
    # each replica's log start and compaction, as the rows of its replica_logs (a null key matches none)
    rl = replica_logs.where(whole).select(*REPLICA_KEY, F.col("log_start_offset").alias("_log_start"), F.col("compacted").alias("_compacted"),
                                          F.lit(True).alias("_rl"))
    r = r.withColumn("_path", F.when(F.col("_batch").isNull(), F.col("path")))
    stream = r.unionByName(rl, allowMissingColumns=True)
    replica = Window.partitionBy(*REPLICA_KEY)
    stream = stream.withColumn("_log_start", F.max("_log_start").over(replica)).withColumn("_compacted", F.max("_compacted").over(replica))
    ranges = islands(stream, REPLICA_KEY, start="base_offset", end="end_offset", order=["base_offset", "_path", "position"],
                     same=["leader_epoch"], name="_grp").where(F.col("_rl").isNull())
    data = ranges.groupBy(*REPLICA_KEY, "_grp").agg(
        F.min("base_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        F.first("leader_epoch").alias("leader_epoch"),
        F.sum("records").cast("long").alias("records"),
        F.sum("bytes").cast("long").alias("bytes"),
        F.min_by("path", "base_offset").alias("path"),
        F.min_by("position", "base_offset").alias("position"),
        F.max("_log_start").alias("_log_start"),
        F.max("_compacted").alias("_compacted"),
    )

    # Holes: between consecutive data ranges whose offsets are not adjacent.
    w2 = Window.partitionBy(*REPLICA_KEY).orderBy("first_offset")
    nxt = data.withColumn("_next_first", F.lead("first_offset").over(w2)).withColumn(
        "_next_path", F.lead("path").over(w2)).withColumn("_next_position", F.lead("position").over(w2))
    first, last = F.col("last_offset") + 1, F.col("_next_first") - 1
    kept = [F.col(c).alias(c) for c in REPLICA_KEY]
    range_row = F.struct(*kept, F.col("first_offset"), F.col("last_offset"), F.col("leader_epoch"), F.lit("data").alias("kind"),
                         F.lit(None).cast("string").alias("reason"), F.lit(None).cast("boolean").alias("at_segment_boundary"),
                         F.col("records"), F.col("bytes"), F.col("path"), F.col("position"))
    hole_row = F.when(F.col("_next_first") > F.col("last_offset") + 1, F.struct(
        *kept, first.alias("first_offset"), last.alias("last_offset"), F.lit(None).cast("int").alias("leader_epoch"),
        F.lit("hole").alias("kind"),
        F.when(last < F.col("_log_start"), "log_start").when(F.col("_compacted"), "compaction").otherwise("unexplained").alias("reason"),
        (F.col("_next_path") != F.col("path")).alias("at_segment_boundary"),
        F.lit(0).cast("long").alias("records"), F.lit(0).cast("long").alias("bytes"), F.col("_next_path").alias("path"),
        F.col("_next_position").alias("position")))
    return nxt.select(F.inline(F.filter(F.array(range_row, hole_row), lambda x: x.isNotNull())))


# The table's Spark schema, as Spark writes it (``build``): every column nullable.
SCHEMA = T.StructType([T.StructField(n, t, True) for n, t in (
    ("topic", T.StringType()), ("partition", T.IntegerType()), ("broker", T.IntegerType()), ("first_offset", T.LongType()),
    ("last_offset", T.LongType()), ("leader_epoch", T.IntegerType()), ("kind", T.StringType()), ("reason", T.StringType()),
    ("at_segment_boundary", T.BooleanType()), ("records", T.LongType()), ("bytes", T.LongType()), ("path", T.StringType()),
    ("position", T.LongType()))])
# the batch_runs columns ``local_build`` reads
LOCAL_INPUT = [*REPLICA_KEY, "log_dir", "dir_state", "file_kind", "path", "position", "first_offset", "end_offset", "last_offset",
               "records", "bytes", "partition_leader_epoch"]


def local_build(runs: pa.Table, replica_logs: pa.Table) -> pa.Table:
    """``build``'s table (``SCHEMA``, as Arrow) on the driver, from ``batch_runs`` (its
    ``LOCAL_INPUT`` columns) and the replica_logs table (``replica_logs.local_build``), for
    collections where no replica's runs overlap (``epoch_lineage.running_overlap``: there batches
    of two runs interleave, and ``build`` joins the batches in Spark).

    Why: the runs are a few rows per segment, and ``build``'s Spark query (windows over them and
    the replica_logs rows, an aggregate, a second window) cost ~1 s of planning and scheduling
    whatever their number. The same rules in numpy: runs sorted by replica and (offset, path,
    position) make islands where one does not continue the previous one in the same epoch; each
    island is a data range, and a gap to the next is a hole, its reason from the replica's log
    start and compaction."""
    runs = live_segment_runs(runs)
    n = runs.num_rows
    # (a run's offsets, path and position are never null: where nulls sort does not matter)
    order = pc.sort_indices(runs, sort_keys=[(c, "ascending") for c in (*REPLICA_KEY, "first_offset", "path", "position")])
    r = runs.take(order)
    opens = changes([codes(r.column(c)) for c in REPLICA_KEY], n)
    base, base_ok = values(r.column("first_offset"))
    end, end_ok = values(r.column("end_offset"))
    epoch = values(r.column("partition_leader_epoch"), -1)[0].astype(np.int32)
    brk = opens.copy()
    brk[1:] |= ~end_ok[:-1] | (base[1:] != end[:-1] + 1) | (epoch[1:] != epoch[:-1])
    starts = np.flatnonzero(brk)
    last, last_ok = values(r.column("last_offset"), np.iinfo(np.int64).min)

    def total(name: str) -> pa.Array:
        v, ok = values(r.column(name))
        return pa.array(np.add.reduceat(np.where(ok, v, 0), starts) if n else np.zeros(0, dtype=np.int64),
                        mask=(np.add.reduceat(ok.astype(np.int64), starts) == 0) if n else np.zeros(0, dtype=bool))

    first_rows = pa.array(starts, pa.int64())
    island_last = np.maximum.reduceat(np.where(last_ok, last, np.iinfo(np.int64).min), starts) if n else np.zeros(0, dtype=np.int64)
    last_mask = (np.add.reduceat(last_ok.astype(np.int64), starts) == 0) if n else np.zeros(0, dtype=bool)
    key = {c: r.column(c).take(first_rows) for c in REPLICA_KEY}
    path, position = r.column("path").take(first_rows), r.column("position").take(first_rows)
    first = base[starts]
    k = len(starts)
    # the next island of the same replica
    same_next = np.zeros(k, dtype=bool)
    same_next[:-1] = ~opens[starts[1:]] if k else same_next[:-1]
    nxt = np.minimum(np.arange(k) + 1, max(k - 1, 0))
    next_first = np.where(same_next, first[nxt] if k else first, 0)
    hole = same_next & ~last_mask & (next_first > island_last + 1)
    # each replica's log start and compaction, from its replica_logs rows (a null key matches none)
    bounds = _replica_bounds(replica_logs)
    keys = list(zip(*(key[c].to_pylist() for c in REPLICA_KEY), strict=True)) if k else []
    log_start = [bounds.get(kk, (None, None))[0] for kk in keys]
    compacted = [bounds.get(kk, (None, None))[1] for kk in keys]
    h = np.flatnonzero(hole)
    hole_first, hole_last = island_last[h] + 1, next_first[h] - 1
    reason = []
    for i, hl in zip(h, hole_last, strict=True):
        ls, cm = log_start[i], compacted[i]
        reason.append("log_start" if ls is not None and hl < ls else "compaction" if cm else "unexplained")
    nh = pa.array(nxt[h], pa.int64())
    hi = pa.array(h, pa.int64())
    data_rows = pa.table({
        **key, "first_offset": pa.array(first, pa.int64()), "last_offset": pa.array(island_last, mask=last_mask),
        "leader_epoch": pa.array(epoch[starts], pa.int32()), "kind": pa.array(["data"] * k, pa.string()),
        "reason": pa.nulls(k, pa.string()), "at_segment_boundary": pa.nulls(k, pa.bool_()),
        "records": total("records"), "bytes": total("bytes"), "path": path, "position": position})
    hole_rows = pa.table({
        **{c: key[c].take(hi) for c in REPLICA_KEY}, "first_offset": pa.array(hole_first, pa.int64()),
        "last_offset": pa.array(hole_last, pa.int64()), "leader_epoch": pa.nulls(len(h), pa.int32()),
        "kind": pa.array(["hole"] * len(h), pa.string()), "reason": pa.array(reason, pa.string()),
        "at_segment_boundary": pc.not_equal(path.take(nh), path.take(hi)),
        "records": pa.array(np.zeros(len(h), dtype=np.int64)), "bytes": pa.array(np.zeros(len(h), dtype=np.int64)),
        "path": path.take(nh), "position": position.take(nh)})
    return pa.concat_tables([data_rows, hole_rows.cast(data_rows.schema)])


def _replica_bounds(replica_logs: pa.Table) -> dict[tuple, tuple]:
    """Per replica (``REPLICA_KEY``, whole), (the highest log start offset, whether compacted) of
    its replica_logs rows (one per log dir holding it), as ``build``'s window over them takes them."""
    out: dict[tuple, tuple] = {}
    for row in replica_logs.select([*REPLICA_KEY, "log_start_offset", "compacted"]).to_pylist():
        kk = tuple(row[c] for c in REPLICA_KEY)
        if None in kk:
            continue
        ls, cm = out.get(kk, (None, None))
        v, c = row["log_start_offset"], row["compacted"]
        out[kk] = (v if ls is None else ls if v is None else max(ls, v), c if cm is None else cm if c is None else cm or c)
    return out
