"""Per partition, each leader epoch with its start offset on every replica, from two sources.

The leader-epoch-checkpoint is what the broker believed (``LeaderEpochFileCache``: it gets an
entry when a leader is elected or a follower fetches the first batch of a new epoch, and loses
entries on truncation). The batches' ``partition_leader_epoch`` is what the leader stamped. They
can disagree (an epoch with no records is only in the checkpoint; a crashed broker's checkpoint
can miss the last epoch), and both are evidence, so both are kept side by side.

``likely_leader``: the leader of an epoch wrote its batches first, so any replica holding them holds
the leader's copy; the broker whose checkpoint names the epoch and whose stamped data starts it is
our best guess, and the KRaft metadata log (timeline job) is the authority when collected.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .replica_logs import REPLICA_KEY, live_segment_batches


def build(t: dict[str, DataFrame]) -> DataFrame:
    b = live_segment_batches(t["batches"]).where(F.col("partition_leader_epoch").isNotNull() & (F.col("partition_leader_epoch") >= 0))
    from_batches = b.groupBy(*REPLICA_KEY, F.col("partition_leader_epoch").alias("leader_epoch")).agg(
        F.min("base_offset").alias("batch_start_offset"),
        F.max("last_offset").alias("batch_end_offset"),
        F.sum("record_count").cast("long").alias("batch_records"),
        F.min("max_timestamp").alias("first_timestamp"),
        F.max("max_timestamp").alias("last_timestamp"),
    )
    le = t["leader_epochs"].where(F.col("dir_state") == "live")
    from_checkpoint = le.groupBy(*REPLICA_KEY, F.col("epoch").alias("leader_epoch")).agg(
        F.min("start_offset").alias("checkpoint_start_offset")
    )
    lin = from_checkpoint.join(from_batches, [*REPLICA_KEY, "leader_epoch"], "full_outer")
    # The most likely leader of an epoch: among replicas holding its data, the one whose own
    # checkpoint lists the epoch at the start its data shows; ties go to the longest copy.
    w = Window.partitionBy("topic", "partition", "leader_epoch").orderBy(
        F.col("batch_records").isNull(),
        (F.col("checkpoint_start_offset") == F.col("batch_start_offset")).desc_nulls_last(),
        F.col("batch_end_offset").desc_nulls_last(),
        F.col("broker"),
    )
    lin = lin.withColumn("likely_leader", F.first("broker").over(w))
    lin = lin.withColumn(
        "likely_leader", F.when(F.max("batch_records").over(Window.partitionBy("topic", "partition", "leader_epoch")).isNotNull(),
                                F.col("likely_leader"))
    )
    return lin.select(
        "topic", "partition", "leader_epoch", "broker", "checkpoint_start_offset", "batch_start_offset", "batch_end_offset",
        F.coalesce("batch_records", F.lit(0)).alias("batch_records"), "first_timestamp", "last_timestamp", "likely_leader",
    )
