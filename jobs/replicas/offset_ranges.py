"""Contiguous offset ranges of each replica, and the holes between them with their reason.

A range breaks where the next batch does not start at the previous one's last offset + 1, or where
the leader epoch changes (so each range reads "epoch e held offsets a..b"). Transaction markers
are batches too, so they never make holes; a hole is offsets no batch covers. Its reason:
``compaction`` (the log is compacted: the cleaner drops whole batches), ``log_start`` (below the
log start offset: retention or deleteRecords), or ``unexplained`` (what ``offset_gap`` /
``segment_gap`` report). The gaps-and-islands work is window functions, so it scales with the data.
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


def build(t: dict[str, DataFrame], replica_logs: DataFrame) -> DataFrame:
    b = live_segment_batches(t["batches"]).select(
        *REPLICA_KEY, "path", "position", "base_offset", "last_offset", "record_count", "size", "is_control",
        F.coalesce("partition_leader_epoch", F.lit(-1)).alias("leader_epoch"),
    )
    b = islands(b, REPLICA_KEY, start="base_offset", end="last_offset", order=["base_offset", "position"], same=["leader_epoch"],
                name="_grp")
    data = b.groupBy(*REPLICA_KEY, "_grp").agg(
        F.min("base_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        F.first("leader_epoch").alias("leader_epoch"),
        F.sum(F.when(~F.col("is_control"), F.col("record_count")).otherwise(0)).cast("long").alias("records"),
        F.sum("size").cast("long").alias("bytes"),
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
