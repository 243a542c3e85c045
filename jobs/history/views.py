"""The few rows the history detections read (events, not records), from the history job tables.

Business rules live here, not in the runner: which log lines count (unclean elections and the new
leader's RECOVERING line, tied to the epoch it starts; lines with a partition and a HW or a
truncation), which partitions have every assigned replica collected, the latest consumer commit per
key and the latest transaction state per transactional id (with every producer id its records name).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from jobs.store.io import collected, row_key

SHARE_KEY = ["group", "topic_id", "partition"]
ACKNOWLEDGED, ARCHIVED = 2, 4  # a share state batch's DeliveryState: both count as done (isRecordStateAcknowledged)


def share_records_since_reset(share_state: DataFrame) -> DataFrame:
    """The ``__share_group_state`` records the share coordinator's replay still depends on, per
    (group, topic_id, partition): from its latest ShareSnapshot or tombstone on (a snapshot is the
    whole state, ``ShareCoordinatorShard.replay``), one copy per offset (replicas of the topic hold
    the same records; the lowest broker's is kept as evidence). A few rows per share-partition."""
    ss = share_state.where(F.col("group").isNotNull() & F.col("topic_id").isNotNull() & F.col("partition").isNotNull()
                           & F.col("record_type").isin("share_snapshot", "share_update"))
    resets = ss.where(F.col("record_type") == "share_snapshot").groupBy(*SHARE_KEY).agg(F.max("offset").alias("reset_at"))
    since = ss.join(resets, SHARE_KEY, "left").where(F.col("offset") >= F.coalesce("reset_at", F.lit(-1)))
    cols = ["record_type", "tombstone", "start_offset", "state_batches", "broker", "path", "batch_position"]
    return since.groupBy(*SHARE_KEY, "offset").agg(F.min_by(F.struct(*cols), "broker").alias("r")).select(*SHARE_KEY, "offset", "r.*")


def replay_share_state(rows: list) -> dict | None:
    """One share-partition's records (``share_records_since_reset``, in offset order) replayed as
    Kafka does: the snapshot's start offset and state batches, each later ShareUpdate moving the
    start offset unless it says -1 (null) and its batches overriding the offsets they cover
    (``PersisterStateBatchCombiner``). Then, as ``SharePartition`` does when it loads that state
    (``maybeUpdateCachedStateAndOffsets``), the start moves over the acknowledged or archived
    batches that follow it without a gap: ``acknowledged_to`` is the first offset not known done,
    the group's progress. None when the state was deleted or never started (start offset -1)."""
    start, batches, last = None, [], None
    for r in rows:
        if r["tombstone"]:
            start, batches, last = None, [], None
            continue
        if r["record_type"] == "share_snapshot":
            start, batches = r["start_offset"], list(r["state_batches"] or [])
        else:
            start = r["start_offset"] if r["start_offset"] is not None else start
            batches += list(r["state_batches"] or [])
        last = r
    if start is None or last is None:
        return None
    done = start
    while True:  # the latest batch covering ``done`` decides it (later records override earlier ones)
        cover = [b for b in batches if b["first_offset"] <= done <= b["last_offset"]]
        if not cover or cover[-1]["delivery_state"] not in (ACKNOWLEDGED, ARCHIVED):
            break
        b = cover[-1]
        later = [x["first_offset"] for x in batches[batches.index(b) + 1:] if done < x["first_offset"] <= b["last_offset"]]
        done = min([b["last_offset"] + 1, *later])
    return {"start_offset": start, "acknowledged_to": done, "broker": last["broker"], "path": last["path"],
            "batch_position": last["batch_position"]}


def share_starts(share_state: DataFrame) -> list[dict]:
    """Each share-partition's progress (``replay_share_state``), one dict per (group, topic_id,
    partition) whose state holds a start offset."""
    by: dict[tuple, list] = {}
    for r in collected(share_records_since_reset(share_state)):
        by.setdefault((r["group"], r["topic_id"], r["partition"]), []).append(r)
    out = []
    for key, rows in sorted(by.items()):
        got = replay_share_state(sorted(rows, key=lambda r: r["offset"]))
        if got is not None:
            out.append(dict(zip(SHARE_KEY, key)) | got)
    return out


@dataclass(frozen=True)
class History:
    """The collected rows of the cluster's history the detectors read (``collect``): a few per
    election, partition, group or transaction, never per record."""

    # log_events lines (topic resolved where possible) of unclean_election, and the new leader's
    # leader_recovery line with the epoch it starts (``recovering_rows``)
    log_unclean: list[Row] = field(default_factory=list)
    # log_events lines with a partition and a HW, or a truncation (``truncation_below_hw`` replays them)
    log_rows: list[Row] = field(default_factory=list)
    # metadata_events rows of partition_created, leader_change, isr_change and snapshot_state
    events: list[Row] = field(default_factory=list)
    # the latest offset commit per (group, topic, partition), tombstones left out
    commits: list[Row] = field(default_factory=list)
    # each share-partition's progress (``share_starts``)
    share_starts: list[dict] = field(default_factory=list)
    # (topic, partition) of the partitions with every assigned replica collected
    complete: set[tuple[str, int]] = field(default_factory=set)
    # the latest __transaction_state record per transactional id, with ``producer_ids`` (every id its records name)
    txns: list[Row] = field(default_factory=list)
    # "now" by the transaction coordinator's clock (its last write), in ms; None without transactions
    collected_ms: int | None = None


LOG_COLUMNS = ["topic", "partition", "node", "time", "line_no", "path", "event", "offset", "hw", "leader", "leader_epoch",
               "leader_recovery_state", "text"]
HISTORY_EVENTS = ("partition_created", "leader_change", "isr_change", "snapshot_state")


def is_history_line(r) -> bool:
    """A log line ``History`` keeps: an unclean election, or a line with a partition and a HW or a truncation."""
    return r["event"] == "unclean_election" or (r["topic"] is not None and r["partition"] is not None
                                                and (r["hw"] is not None or r["event"] == "truncation"))


def collect(metadata_events: DataFrame, log_events: DataFrame, replicas: list[Row], consumer_offsets: DataFrame,
            transactions: DataFrame, share_state: DataFrame | None = None) -> History:
    """The ``History`` of a case. ``log_events``: log_events with topic names resolved
    (``timeline.named_log_events``); ``replicas``: the replica_logs rows, collected.

    The lines and the metadata events it reads come in one query each (a few rows per election,
    partition change or HW line), and the rest is decided on the driver from them: which
    RECOVERING line starts which epoch (``recovering_rows``), each partition's latest assigned
    replicas. Each of those was a Spark join or aggregate of its own, ~0.1 s whatever its rows."""
    node = F.coalesce("node", "broker").alias("node")
    wanted = ((F.col("event") == "unclean_election")
              | (F.col("topic").isNotNull() & F.col("partition").isNotNull() & (F.col("hw").isNotNull() | (F.col("event") == "truncation")))
              | (F.col("event") == "leader_recovery") | ((F.col("event") == "become_leader") & F.col("leader_epoch").isNotNull()))
    read = collected(log_events.where(wanted).select(*[node if c == "node" else c for c in LOG_COLUMNS],
                                                      F.col("node").alias("_node"), F.col("broker").alias("_broker")))
    lines = [Row(**{c: r[c] for c in LOG_COLUMNS}) for r in read if is_history_line(r)]
    log_unclean = [r for r in lines if r["event"] == "unclean_election"] + recovering_rows(read)
    log_rows = [r for r in lines if r["event"] != "unclean_election" and r["topic"] is not None and r["partition"] is not None]
    meta = collected(metadata_events.where(F.col("event").isin(*HISTORY_EVENTS) | F.col("replicas").isNotNull()))
    events = [r for r in meta if r["event"] in HISTORY_EVENTS]
    complete = complete_partitions(meta, replicas)
    # the latest record per key, tombstones included: a commit deleted with its topic (or expired)
    # is no evidence of anything
    offset_commits = consumer_offsets.where(F.col("record_type") == "offset_commit")
    commits = offset_commits.groupBy("group", "topic", "partition").agg(
        F.max_by(F.struct("committed_offset", "broker", "path", "batch_position", "tombstone"), "offset").alias("c")).select(
        "group", "topic", "partition", "c.*").where(~F.col("tombstone")).collect()
    transactional = transactions.where(F.col("transactional_id").isNotNull())
    # with every producer id the transactional id's records still name: a transactions v2 producer
    # moves to a new id at an exhausted epoch, and its old id's open data is still that id's
    txns = transactional.groupBy("transactional_id").agg(
        F.max_by(F.struct(*[c for c in transactional.columns if c != "transactional_id"]), "offset").alias("x"),
        F.collect_set("producer_id").alias("producer_ids")).select(
        "transactional_id", "x.*", "producer_ids").where(~F.col("tombstone")).collect()
    # "now" by the coordinator's own clock (its last write), not producers' CreateTime
    collected_ms = None
    if txns:
        coord = transactional.agg(F.max("last_update_ms"), F.max("timestamp")).first()
        collected_ms = max((v for v in coord if v is not None), default=None)
    starts = share_starts(share_state) if share_state is not None else []
    return History(log_unclean=log_unclean, log_rows=log_rows, events=events, commits=commits, share_starts=starts,
                   complete=complete, txns=txns, collected_ms=collected_ms)


def complete_partitions(meta: list[Row], replicas: list[Row]) -> set[tuple[str, int]]:
    """(topic, partition) of the partitions whose latest assigned replicas (the metadata_events
    rows ``meta`` that name them: the one of the highest metadata offset) all have a live replica
    collected (``replicas``: replica_logs rows)."""
    latest: dict[tuple, tuple] = {}
    for r in meta:
        if r["replicas"] is None or r["meta_offset"] is None:
            continue
        k = (r["topic"], r["partition"])
        if k not in latest or r["meta_offset"] > latest[k][0]:
            latest[k] = (r["meta_offset"], r["replicas"])
    have: dict[tuple, set] = {}
    for r in replicas:
        if r["dir_state"] == "live" and r["broker"] is not None:
            have.setdefault((r["topic"], r["partition"]), set()).add(r["broker"])
    return {k for k, (_, assigned) in latest.items() if k in have and not set(assigned) - have[k]}


RECOVERING_TO_EPOCH_S = 60  # the new leader's RECOVERING line and its "starts at leader epoch" line come together


def recovering_rows(read: list) -> list[Row]:
    """The new leader's ``The topic partition T-P was marked as RECOVERING`` lines (``leader_recovery``),
    each with the leader epoch it was elected for: ``Partition.makeLeader`` logs it just before the
    epoch it starts (``Leader T-P ... starts at leader epoch E``, or ``Skipped the become-leader state
    change ... leaderEpoch=E``), the next become_leader line of the same file and partition, within a
    minute. The line itself names no epoch; one with no such line keeps it null. ``read``: the
    log lines (``LOG_COLUMNS``, with the line's own ``_node`` and ``_broker``), the leader_recovery
    and become_leader ones among them; rows of ``LOG_COLUMNS``, sorted as ``collected`` sorts."""
    became: dict[tuple, list] = {}
    for b in read:
        if b["event"] == "become_leader" and b["leader_epoch"] is not None and None not in (b["path"], b["topic"], b["partition"]):
            became.setdefault((b["path"], b["topic"], b["partition"]), []).append(b)
    within = timedelta(seconds=RECOVERING_TO_EPOCH_S)
    out = {}
    for r in read:
        if r["event"] != "leader_recovery":
            continue
        key = tuple(r[c] for c in LOG_COLUMNS if c not in ("node", "leader_epoch")) + (r["_node"], r["_broker"])
        if key in out:
            continue
        nexts = [b for b in became.get((r["path"], r["topic"], r["partition"]), [])
                 if r["line_no"] is not None and b["line_no"] is not None and b["line_no"] > r["line_no"]
                 and (b["time"] is None or r["time"] is None or b["time"] <= r["time"] + within)]
        epoch = min(nexts, key=lambda b: b["line_no"])["leader_epoch"] if nexts else None
        out[key] = Row(**{c: epoch if c == "leader_epoch" else r[c] for c in LOG_COLUMNS})
    return sorted(out.values(), key=row_key)
