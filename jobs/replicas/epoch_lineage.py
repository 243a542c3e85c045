"""Per partition, each leader epoch with its start offset on every replica, from two sources.

The leader-epoch-checkpoint is what the broker believed (``LeaderEpochFileCache``: it gets an
entry when a leader is elected or a follower fetches the first batch of a new epoch, and loses
entries on truncation). The batches' ``partition_leader_epoch`` is what the leader stamped. They
can disagree (an epoch with no records is only in the checkpoint; a crashed broker's checkpoint
can miss the last epoch), and both are evidence, so both are kept side by side.

``likely_leader`` is the leader of each epoch decided from the strongest evidence collected, named
in ``leader_evidence``; where the evidence does not single one broker out it is null (undetermined),
never a guess by broker id:

1. ``metadata_log``: the KRaft metadata log names the leader of every epoch (``PartitionRecord`` /
   ``PartitionChangeRecord``); ``broker_log``: else the controller's or the brokers' own log lines
   that name the leader of that epoch (controller leader changes, ``Leader … starts at leader
   epoch``, ``Current leader is …``), when they agree.
2. ``leader_epoch_checkpoint``: the one replica whose checkpoint starts the epoch earliest. The
   leader assigns the epoch at its log end when elected; a follower assigns it when it appends the
   first batch of the epoch it fetched, which is never earlier (and later when it kept records of
   the old epoch: KAFKA-1211).
3. ``first_batch``: among the replicas tied in 2 (all of them when no checkpoint names the epoch),
   the one holding the epoch's first batch at that start offset.

A start at or below a trimmed log's start is no evidence: ``truncateFromStart`` moves the first
epoch's start to the new log start offset on each replica separately.
"""

from __future__ import annotations

from typing import NamedTuple

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .replica_logs import REPLICA_KEY, live_segment_batches

EPOCH_KEY = ["topic", "partition", "leader_epoch"]
# log_events lines that name the leader of an epoch (parsers/broker_log.py fills leader and leader_epoch)
LEADERSHIP_LOG_EVENTS = ("leader_change", "unclean_election", "become_leader", "become_follower", "isr_change")


class LeaderEpoch(NamedTuple):
    """A leader and the leader epoch it leads (as Kafka's ``EpochEntry`` pairs an epoch with its
    start offset): a partition's current leadership, as the metadata log last names it."""

    leader: int
    epoch: int


def _one_leader(df: DataFrame, evidence: str) -> DataFrame:
    """Per epoch, the leader the rows agree on; epochs whose rows name different leaders are left out."""
    df = df.where(F.col("topic").isNotNull() & F.col("partition").isNotNull() & (F.col("leader") >= 0) & (F.col("leader_epoch") >= 0))
    return df.groupBy(*EPOCH_KEY).agg(F.min("leader").alias("_lo"), F.max("leader").alias("_hi")).where(
        F.col("_lo") == F.col("_hi")).select(*EPOCH_KEY, F.col("_lo").alias("leader"), F.lit(evidence).alias("leader_evidence"))


def logged_leaders(meta_events: DataFrame, log_events: DataFrame) -> DataFrame:
    """(topic, partition, leader_epoch, leader, leader_evidence) from the metadata log, else from the
    broker and controller logs (``log_events`` with topic names filled from topic ids)."""
    # a topic deleted and created again restarts its epochs: only its latest topic id counts
    latest = meta_events.where(F.col("topic").isNotNull()).groupBy("topic").agg(F.max_by("topic_id", "meta_offset").alias("topic_id"))
    meta = _one_leader(meta_events.join(latest, ["topic", "topic_id"]).select(*EPOCH_KEY, "leader"), "metadata_log")
    logs = _one_leader(log_events.where(F.col("event").isin(*LEADERSHIP_LOG_EVENTS)).select(*EPOCH_KEY, "leader"), "broker_log")
    return meta.unionByName(logs.join(meta.select(*EPOCH_KEY), EPOCH_KEY, "left_anti"))


def current_leaders(logged: list) -> dict[tuple[str, int], LeaderEpoch]:
    """Per partition, the leader of the latest epoch the metadata log gives a leader (``logged``:
    ``logged_leaders`` rows): the log every replica follows (a partition offline since then comes
    back to it)."""
    out: dict[tuple[str, int], LeaderEpoch] = {}
    for r in logged:
        key = (r["topic"], r["partition"])
        if r["leader_evidence"] == "metadata_log" and (key not in out or r["leader_epoch"] > out[key].epoch):
            out[key] = LeaderEpoch(r["leader"], r["leader_epoch"])
    return out


def _evidence(start: str) -> F.Column:
    """A start offset that says where the epoch began on this replica (not one moved up to a trimmed log start)."""
    return F.when((F.col(start) > F.col("_log_start")) | (F.col("_log_start") == 0), F.col(start))


def decide_leaders(lin: DataFrame) -> DataFrame:
    """``lin`` (one row per epoch and replica, with ``_log_start``) plus ``likely_leader`` and
    ``leader_evidence`` by steps 2 and 3 of the module doc."""
    ep = Window.partitionBy(*EPOCH_KEY)
    lin = lin.withColumn("_cp", _evidence("checkpoint_start_offset")).withColumn("_bs", _evidence("batch_start_offset"))
    lin = lin.withColumn("_cp_min", F.min("_cp").over(ep))
    lin = lin.withColumn("_start", F.coalesce(F.col("_cp_min"), F.min("_bs").over(ep)))
    earliest = F.coalesce(F.col("_cp") == F.col("_cp_min"), F.lit(False))
    tied = F.col("_cp_min").isNull() | earliest
    lin = lin.withColumn("_earliest", earliest).withColumn("_at_start", tied & F.coalesce(F.col("_bs") == F.col("_start"), F.lit(False)))
    lin = lin.withColumn("_n_earliest", F.sum(F.col("_earliest").cast("int")).over(ep)).withColumn(
        "_n_at_start", F.sum(F.col("_at_start").cast("int")).over(ep))
    by_checkpoint = F.max(F.when(F.col("_earliest") & (F.col("_n_earliest") == 1), F.col("broker"))).over(ep)
    by_batch = F.max(F.when(F.col("_at_start") & (F.col("_n_at_start") == 1), F.col("broker"))).over(ep)
    lin = lin.withColumn("_by_cp", by_checkpoint).withColumn("_by_batch", by_batch)
    return lin.withColumn("likely_leader", F.coalesce("_by_cp", "_by_batch")).withColumn(
        "leader_evidence", F.when(F.col("_by_cp").isNotNull(), F.lit("leader_epoch_checkpoint"))
        .when(F.col("_by_batch").isNotNull(), F.lit("first_batch")))


def build(t: dict[str, DataFrame], replica_logs: DataFrame, logged: DataFrame | None = None) -> DataFrame:
    """The lineage table. ``replica_logs`` gives each replica's log start; ``logged``
    (``logged_leaders``) the leaders the metadata log and broker logs name, which win over the files."""
    runs = live_segment_batches(t["batch_runs"]).where(F.col("partition_leader_epoch").isNotNull() & (F.col("partition_leader_epoch") >= 0))
    from_batches = runs.groupBy(*REPLICA_KEY, F.col("partition_leader_epoch").alias("leader_epoch")).agg(
        F.min("first_offset").alias("batch_start_offset"),
        F.max("last_offset").alias("batch_end_offset"),
        F.sum("record_count").cast("long").alias("batch_records"),
        F.min("first_timestamp").alias("first_timestamp"),
        F.max("last_timestamp").alias("last_timestamp"),
    )
    le = t["leader_epochs"].where(F.col("dir_state") == "live")
    from_checkpoint = le.groupBy(*REPLICA_KEY, F.col("epoch").alias("leader_epoch")).agg(
        F.min("start_offset").alias("checkpoint_start_offset")
    )
    lin = from_checkpoint.join(from_batches, [*REPLICA_KEY, "leader_epoch"], "full_outer")
    starts = replica_logs.select(*REPLICA_KEY, F.coalesce("log_start_offset", F.lit(0)).alias("_log_start"))
    lin = decide_leaders(lin.join(starts, REPLICA_KEY, "left").fillna(0, ["_log_start"]))
    if logged is not None:
        lin = lin.join(logged.select(*EPOCH_KEY, F.col("leader").alias("_logged"), F.col("leader_evidence").alias("_logged_ev")),
                       EPOCH_KEY, "left")
        lin = lin.withColumn("likely_leader", F.coalesce("_logged", "likely_leader")).withColumn(
            "leader_evidence", F.coalesce("_logged_ev", "leader_evidence"))
    return lin.select(
        "topic", "partition", "leader_epoch", "broker", "checkpoint_start_offset", "batch_start_offset", "batch_end_offset",
        F.coalesce("batch_records", F.lit(0)).alias("batch_records"), "first_timestamp", "last_timestamp",
        F.col("likely_leader").cast("int").alias("likely_leader"), "leader_evidence",
    )
