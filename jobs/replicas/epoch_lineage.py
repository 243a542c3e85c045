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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.store.io import collected_rows

from .grouped import Groups, changes, codes, stack, values
from .replica_logs import REPLICA_KEY, live_segment_runs

EPOCH_KEY = ["topic", "partition", "leader_epoch"]
# log_events lines that name the leader of an epoch (parsers/broker_log.py fills leader and leader_epoch)
LEADERSHIP_LOG_EVENTS = ("leader_change", "unclean_election", "become_leader", "become_follower", "isr_change")


class LeaderEpoch(NamedTuple):
    """A leader and the leader epoch it leads (as Kafka's ``EpochEntry`` pairs an epoch with its
    start offset): a partition's current leadership, as the metadata log last names it."""

    leader: int
    epoch: int


def _at_least_0(v: int | None) -> bool:
    return v is not None and v >= 0


def _one_leader(rows: list, evidence: str) -> list[dict]:
    """Per epoch, the leader the rows agree on; epochs whose rows name different leaders are left out."""
    by: dict[tuple, set] = {}
    for r in rows:
        if r["topic"] is not None and r["partition"] is not None and _at_least_0(r["leader"]) and _at_least_0(r["leader_epoch"]):
            by.setdefault((r["topic"], r["partition"], r["leader_epoch"]), set()).add(r["leader"])
    return [{"topic": t, "partition": p, "leader_epoch": e, "leader": next(iter(leaders)), "leader_evidence": evidence}
            for (t, p, e), leaders in by.items() if len(leaders) == 1]


def leadership_events(meta_events: DataFrame, log_events: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The rows ``logged_leaders`` reads: metadata events of named topics, and the raw log lines
    that name a leader (``LEADERSHIP_LOG_EVENTS``, topic names not yet filled in). Per event, never
    per record: collected, they are decided on the driver."""
    meta = meta_events.where(F.col("topic").isNotNull()).select("topic", "topic_id", "partition", "meta_offset", "leader", "leader_epoch")
    logs = log_events.where(F.col("event").isin(*LEADERSHIP_LOG_EVENTS)).select("topic", "topic_id", "partition", "leader_epoch", "leader")
    return meta, logs


def topic_names(meta: list) -> dict[str, set]:
    """Per topic id, the names the collected metadata rows give it (one, but for a damaged log)."""
    names: dict[str, set] = {}
    for r in meta:
        if r["topic_id"] is not None and r["topic"] is not None:
            names.setdefault(r["topic_id"], set()).add(r["topic"])
    return names


def logged_leaders(meta: list, logs: list, names: dict[str, set] | None = None) -> list[dict]:
    """(topic, partition, leader_epoch, leader, leader_evidence) from the metadata log, else from the
    broker and controller logs, of the collected ``leadership_events``. A log line naming only its
    topic id is named from the metadata log (``names``: ``topic_names(meta)`` unless given), as
    ``jobs.history.timeline.named_log_events`` does.

    Why on the driver: per epoch from rows per event, and in Spark these were five aggregates and
    three joins (~8 Spark jobs whatever the rows)."""
    # a topic deleted and created again restarts its epochs: only its latest topic id counts
    latest: dict[str, tuple] = {}
    names = topic_names(meta) if names is None else names
    for r in meta:
        if r["meta_offset"] is not None and (r["topic"] not in latest or r["meta_offset"] > latest[r["topic"]][0]):
            latest[r["topic"]] = (r["meta_offset"], r["topic_id"])
    by_meta = _one_leader([r for r in meta if r["topic_id"] is not None and latest.get(r["topic"], (0, None))[1] == r["topic_id"]],
                          "metadata_log")
    named = []
    for r in logs:
        for topic in [r["topic"]] if r["topic"] is not None else sorted(names.get(r["topic_id"], [None]), key=str):
            named.append({"topic": topic, "partition": r["partition"], "leader_epoch": r["leader_epoch"], "leader": r["leader"]})
    known = {(r["topic"], r["partition"], r["leader_epoch"]) for r in by_meta}
    return by_meta + [r for r in _one_leader(named, "broker_log") if (r["topic"], r["partition"], r["leader_epoch"]) not in known]


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


def _evidence(start: int | None, log_start: int) -> int | None:
    """A start offset that says where the epoch began on this replica (not one moved up to a trimmed log start)."""
    return start if start is not None and (start > log_start or log_start == 0) else None


def decide_leaders(lin: list[dict]) -> list[dict]:
    """``lin`` (one dict per epoch and replica, with ``_log_start``), each with ``likely_leader``
    and ``leader_evidence`` set by steps 2 and 3 of the module doc. Rows of one epoch are decided
    together (a null key groups with the other nulls, as Spark's window did)."""
    by_epoch: dict[tuple, list[dict]] = {}
    for r in lin:
        r["_cp"], r["_bs"] = _evidence(r["checkpoint_start_offset"], r["_log_start"]), _evidence(r["batch_start_offset"], r["_log_start"])
        by_epoch.setdefault(tuple(r[c] for c in EPOCH_KEY), []).append(r)
    for rows in by_epoch.values():
        cp_min = min((r["_cp"] for r in rows if r["_cp"] is not None), default=None)
        start = cp_min if cp_min is not None else min((r["_bs"] for r in rows if r["_bs"] is not None), default=None)
        earliest = [cp_min is not None and r["_cp"] == cp_min for r in rows]
        # tied on the checkpoint (or none names the epoch), and holding the epoch's first batch at its start
        at_start = [(cp_min is None or e) and start is not None and r["_bs"] == start for r, e in zip(rows, earliest, strict=True)]
        by_cp = max((r["broker"] for r, e in zip(rows, earliest, strict=True) if e and r["broker"] is not None), default=None) \
            if sum(earliest) == 1 else None
        by_batch = max((r["broker"] for r, a in zip(rows, at_start, strict=True) if a and r["broker"] is not None), default=None) \
            if sum(at_start) == 1 else None
        leader = by_cp if by_cp is not None else by_batch
        evidence = "leader_epoch_checkpoint" if by_cp is not None else "first_batch" if by_batch is not None else None
        for r in rows:
            r["likely_leader"], r["leader_evidence"] = leader, evidence
    return lin


# the input tables' columns ``local_epoch_starts`` reads
LOCAL_INPUTS = {
    "batch_runs": [*REPLICA_KEY, "log_dir", "dir_state", "file_kind", "partition_leader_epoch", "first_offset", "last_offset",
                   "record_count", "first_timestamp", "last_timestamp", "path", "position"],
    "leader_epochs": [*REPLICA_KEY, "dir_state", "epoch", "start_offset"],
}
STARTS = [*REPLICA_KEY, "leader_epoch", "_apart", "checkpoint_start_offset", "batch_start_offset", "batch_end_offset",
          "batch_records", "first_timestamp", "last_timestamp", "runs_overlap"]


def running_overlap(runs: pa.Table) -> np.ndarray:
    """Per row of ``runs`` (``batch_runs`` columns), whether it starts at or below the highest last
    offset of a run before it in its replica, in (first offset, path, position) order (a segment
    overlap, an offset regression, a batch written twice): only in such a replica can batches of
    two runs interleave in offset order, so only there must offset_ranges join its batches. One
    running maximum per replica, in numpy."""
    n = runs.num_rows
    if n == 0:
        return np.zeros(0, dtype=bool)
    # (a run's offsets, path and position are never null: where nulls sort does not matter)
    order = pc.sort_indices(runs, sort_keys=[(c, "ascending") for c in (*REPLICA_KEY, "first_offset", "path", "position")]).to_numpy()
    ordered = runs.take(order)
    opens = changes([codes(ordered.column(c)) for c in REPLICA_KEY], n)
    last, ok = values(runs.column("last_offset").take(order))
    first, first_ok = values(runs.column("first_offset").take(order))
    # One cumulative maximum for every replica at once: each last offset becomes its rank (1..m-1,
    # 0 for null), lifted by its group's number times m, so that a group's values all lie above
    # the previous groups'. The maximum of the rows before a row is then its own group's only when
    # it is at least the group's base + 1.
    uniq, rank = np.unique(last[ok], return_inverse=True)
    r = np.zeros(n, dtype=np.int64)
    r[ok] = rank + 1
    m = np.int64(len(uniq) + 1)
    base = (np.cumsum(opens) - 1).astype(np.int64) * m
    acc = np.maximum.accumulate(base + r)
    prev = np.concatenate([[-1], acc[:-1]])
    mine = prev >= base + 1
    seen = uniq[np.where(mine, prev - base - 1, 0)] if len(uniq) else np.zeros(n, dtype=np.int64)
    out = np.zeros(n, dtype=bool)
    out[order] = first_ok & mine & (first <= seen)
    return out


def local_epoch_starts(t: dict[str, pa.Table]) -> list[Row]:
    """Per replica and leader epoch: where its batches and its leader-epoch-checkpoint start the
    epoch (Rows in ``STARTS`` order, sorted as ``collected`` sorts them), from the input tables'
    ``LOCAL_INPUTS`` columns (Arrow tables), on the driver.

    Both kinds' rows (the runs of ``batch_runs``, the checkpoint entries) are stacked and grouped
    once; a row with a null in its key stays with its own kind (``_apart``), as it stayed
    unmatched in the full outer join this once was. Each row also says whether two of its
    replica's runs share an offset (``runs_overlap``: ``running_overlap``); the runs without an
    epoch count there only, in rows of their own (``_apart`` "overlap_only", which
    ``starts_only`` drops). Why on the driver: its rows are per run and checkpoint entry (a few
    per segment), and as a Spark query it cost planning and scheduling whatever their number
    (see ``replica_logs.local_build``)."""
    runs = live_segment_runs(t["batch_runs"])
    epoch = runs.column("partition_leader_epoch")
    with_epoch = pc.fill_null(pc.greater_equal(epoch, 0), False)
    runs = pa.table({**{c: runs.column(c) for c in REPLICA_KEY}, "leader_epoch": epoch,
                     **{c: runs.column(c) for c in ("first_offset", "last_offset", "record_count", "first_timestamp", "last_timestamp")},
                     "_kind": pc.if_else(with_epoch, "batches", "overlap_only"),
                     "_overlap": pa.array(running_overlap(runs))})
    le = t["leader_epochs"]
    le = le.filter(pc.fill_null(pc.equal(le.column("dir_state"), "live"), False))
    le = pa.table({**{c: le.column(c) for c in REPLICA_KEY}, "leader_epoch": le.column("epoch"), "_cp_start": le.column("start_offset"),
                   "_kind": pa.array(["checkpoint"] * le.num_rows, pa.string()),
                   "_overlap": pa.array(np.zeros(le.num_rows, dtype=bool))})
    rows = stack([runs, le])
    whole = None
    for c in (*REPLICA_KEY, "leader_epoch"):
        v = pc.is_valid(rows.column(c))
        whole = v if whole is None else pc.and_(whole, v)
    kind = rows.column("_kind")
    apart = pc.if_else(pc.equal(kind, "overlap_only"), kind, pc.if_else(whole, pa.scalar(None, pa.string()), kind))
    rows = rows.append_column("_apart", apart)
    g = Groups(rows, [*REPLICA_KEY, "leader_epoch", "_apart"])
    col = rows.column
    out = pa.table({
        **dict(zip([*REPLICA_KEY, "leader_epoch", "_apart"], g.keys(rows, [*REPLICA_KEY, "leader_epoch", "_apart"]), strict=True)),
        "checkpoint_start_offset": g.min(col("_cp_start")),
        "batch_start_offset": g.min(col("first_offset")),
        "batch_end_offset": g.max(col("last_offset")),
        "batch_records": g.sum(col("record_count")),
        "first_timestamp": g.min(col("first_timestamp")),
        "last_timestamp": g.max(col("last_timestamp")),
        "runs_overlap": g.any(col("_overlap")),
    })
    return collected_rows([Row(**r) for r in out.select(STARTS).to_pylist()])


def starts_only(rows: list) -> list:
    """The rows of ``local_epoch_starts`` that are epoch starts (not a replica's runs
    without an epoch, there only for ``runs_overlap``)."""
    return [r for r in rows if r["_apart"] != "overlap_only"]


def overlapping(rows: list) -> list[dict]:
    """The replicas (``REPLICA_KEY`` dicts) whose runs overlap, from ``local_epoch_starts`` rows."""
    return [dict(zip(REPLICA_KEY, k, strict=True)) for k in sorted({tuple(r[c] for c in REPLICA_KEY) for r in rows if r["runs_overlap"]},
                                                                  key=repr)]


# the table's Spark schema, as Spark wrote it when it computed the table (batch_records: coalesced, never null)
SCHEMA = T.StructType([T.StructField(c, t, c != "batch_records") for c, t in (
    ("topic", T.StringType()), ("partition", T.IntegerType()), ("leader_epoch", T.IntegerType()), ("broker", T.IntegerType()),
    ("checkpoint_start_offset", T.LongType()), ("batch_start_offset", T.LongType()), ("batch_end_offset", T.LongType()),
    ("batch_records", T.LongType()), ("first_timestamp", T.LongType()), ("last_timestamp", T.LongType()),
    ("likely_leader", T.IntegerType()), ("leader_evidence", T.StringType()))])
COLUMNS = ["topic", "partition", "leader_epoch", "broker", "checkpoint_start_offset", "batch_start_offset", "batch_end_offset",
           "batch_records", "first_timestamp", "last_timestamp", "likely_leader", "leader_evidence"]


def build(starts: list, replicas: list, logged: list = ()) -> list[tuple]:
    """The lineage table's rows (tuples in ``COLUMNS`` order), decided on the driver from collected
    rows: ``starts`` (``local_epoch_starts``: one per replica and epoch), ``replicas`` (replica_logs: each
    replica's log start) and ``logged`` (``logged_leaders``: one per epoch, the leaders the metadata
    log and broker logs name, which win over the files).

    Why on the driver: the lineage is per replica and epoch (thousands of rows for thousands of
    partitions, never per batch), and deciding it in Spark took a join to the log starts, five
    window aggregates and a join to the logged leaders, ~14 Spark jobs of planning whatever the
    rows. A replica's key matches its replica_logs rows as a join would (a null never matches;
    a replica in two log dirs gives a row for each)."""
    log_starts: dict[tuple, list[int]] = {}
    for r in replicas:
        log_starts.setdefault(tuple(r[c] for c in REPLICA_KEY), []).append(r["log_start_offset"] or 0)
    lin = []
    for s in starts:
        key = tuple(s[c] for c in REPLICA_KEY)
        for log_start in log_starts.get(key, [0]) if None not in key else [0]:
            lin.append({**s.asDict(), "_log_start": log_start} if hasattr(s, "asDict") else {**s, "_log_start": log_start})
    named = {tuple(r[c] for c in EPOCH_KEY): (r["leader"], r["leader_evidence"]) for r in logged}
    out = []
    for r in decide_leaders(lin):
        leader, evidence = named.get(tuple(r[c] for c in EPOCH_KEY), (None, None))
        r["likely_leader"] = r["likely_leader"] if leader is None else leader
        r["leader_evidence"] = r["leader_evidence"] if evidence is None else evidence
        r["batch_records"] = r["batch_records"] or 0
        out.append(tuple(r[c] for c in COLUMNS))
    return out
