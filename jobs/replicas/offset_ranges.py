"""Contiguous offset ranges of each replica, and the holes between them with their reason.

A range breaks where the next batch does not start at the previous one's last offset + 1, or where
the leader epoch changes (so each range reads "epoch e held offsets a..b"). Transaction markers
are batches too, so they never make holes; a hole is offsets no batch covers. Its reason:
``compaction`` (the log is compacted: the cleaner drops whole batches), ``log_start`` (below the
log start offset: retention or deleteRecords), or ``unexplained`` (what ``offset_gap`` /
``segment_gap`` report). The gaps-and-islands work is window functions, so it scales with the data;
it joins the runs of batches ingest summed (``batch_runs``), so it costs segments, not batches,
except on a replica whose runs overlap (there batches of two runs interleave, and it joins batches).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .replica_logs import REPLICA_KEY, live_segment_batches


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


def overlapping_replicas(runs: DataFrame) -> DataFrame:
    """Replicas (``REPLICA_KEY``) where two runs of batches share an offset (a segment overlap,
    an offset regression, a batch written twice). Only there can batches of different runs
    interleave in offset order, so only there must the ranges be joined batch by batch. A running
    maximum over a frame that only grows: one pass per replica."""
    w = Window.partitionBy(*REPLICA_KEY).orderBy("first_offset", "path", "position")
    seen = F.max("last_offset").over(w.rowsBetween(Window.unboundedPreceding, -1))
    return runs.withColumn("_seen", seen).where(F.col("first_offset") <= F.col("_seen")).select(*REPLICA_KEY).distinct()


def build(t: dict[str, DataFrame], replica_logs: DataFrame, overlapping: list | None = None) -> DataFrame:
    """The offset_ranges table. Data ranges are joined from ``batch_runs`` (a few rows a segment);
    the batches themselves are read only for ``overlapping`` replicas (``overlapping_replicas``
    rows, collected by the caller; None: worked out here), where runs interleave."""
    runs = live_segment_batches(t["batch_runs"]).select(
        *REPLICA_KEY, "path", "position", F.col("first_offset").alias("base_offset"), "end_offset", "last_offset",
        "records", "bytes", F.coalesce("partition_leader_epoch", F.lit(-1)).alias("leader_epoch"),
    )
    if overlapping is None:
        overlapping = overlapping_replicas(runs.withColumnRenamed("base_offset", "first_offset")).collect()
    cols = ["base_offset", "last_offset", "records", "bytes", "leader_epoch", "path", "position"]
    r = islands(runs, REPLICA_KEY, start="base_offset", end="end_offset", order=["base_offset", "path", "position"],
                same=["leader_epoch"], name="_grp").select(*REPLICA_KEY, "_grp", *cols)
    if overlapping:
        over = F.lit(False)
        for o in overlapping:
            over = over | ((F.col("topic") == o["topic"]) & (F.col("partition") == o["partition"]) & (F.col("broker") == o["broker"]))
        b = live_segment_batches(t["batches"]).where(over).select(
            *REPLICA_KEY, "path", "position", "base_offset", "last_offset",
            F.when(~F.col("is_control"), F.col("record_count")).otherwise(0).cast("long").alias("records"),
            F.col("size").alias("bytes"), F.coalesce("partition_leader_epoch", F.lit(-1)).alias("leader_epoch"),
        )
        b = islands(b, REPLICA_KEY, start="base_offset", end="last_offset", order=["base_offset", "position"], same=["leader_epoch"],
                    name="_grp").select(*REPLICA_KEY, "_grp", *cols)
        r = r.where(~over).unionByName(b)
    data = r.groupBy(*REPLICA_KEY, "_grp").agg(
        F.min("base_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        F.first("leader_epoch").alias("leader_epoch"),
        F.sum("records").cast("long").alias("records"),
        F.sum("bytes").cast("long").alias("bytes"),
        F.min_by("path", "base_offset").alias("path"),
        F.min_by("position", "base_offset").alias("position"),
    )
    data = data.withColumn("kind", F.lit("data")).withColumn("reason", F.lit(None).cast("string"))

    # Holes: between consecutive data ranges whose offsets are not adjacent.
    w2 = Window.partitionBy(*REPLICA_KEY).orderBy("first_offset")
    nxt = data.withColumn("_next_first", F.lead("first_offset").over(w2)).withColumn(
        "_next_path", F.lead("path").over(w2)
    ).withColumn("_next_position", F.lead("position").over(w2))
    holes = nxt.where(F.col("_next_first") > F.col("last_offset") + 1).select(
        *REPLICA_KEY,
        (F.col("last_offset") + 1).alias("first_offset"),
        (F.col("_next_first") - 1).alias("last_offset"),
        F.lit(None).cast("int").alias("leader_epoch"),
        F.lit(0).cast("long").alias("records"),
        F.lit(0).cast("long").alias("bytes"),
        F.col("_next_path").alias("path"),
        F.col("_next_position").alias("position"),
        F.col("path").alias("_prev_path"),
    )
    rl = replica_logs.select(*REPLICA_KEY, "compacted", "log_start_offset")
    holes = holes.join(rl, REPLICA_KEY, "left").withColumn(
        "reason",
        F.when(F.col("last_offset") < F.col("log_start_offset"), "log_start")
        .when(F.col("compacted"), "compaction")
        .otherwise("unexplained"),
    ).withColumn("kind", F.lit("hole")).withColumn("at_segment_boundary", F.col("path") != F.col("_prev_path"))
    data = data.withColumn("at_segment_boundary", F.lit(None).cast("boolean"))
    cols = [*REPLICA_KEY, "first_offset", "last_offset", "leader_epoch", "kind", "reason", "at_segment_boundary", "records",
            "bytes", "path", "position"]
    return data.select(*cols).unionByName(holes.select(*cols))
