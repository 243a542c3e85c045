"""The KRaft metadata log's replicas compared: what each node's copy of ``__cluster_metadata-0``
holds that the quorum's leader does not, and whether it had been committed.

Every KRaft node (voter or observer: controllers and brokers) keeps a replica of the one Raft
log. Where two copies part, the Raft rules decide what is normal:

- **The leader's log wins.** The copy whose last epoch and end offset are highest (Raft's own
  order, ``OffsetAndEpoch.compareTo``, the one voters grant votes by) holds every committed record:
  a leader must commit a record of its own epoch before it exposes any earlier one
  (``LeaderState.maybeUpdateHighWatermark``), so whoever later wins an election holds them all.
  The leader of the newest epoch (its ``LeaderChangeMessage``) breaks a tie.
- **A diverged tail is normal.** A node that led or followed an epoch that ended before its last
  records were replicated to a majority holds them alone; when it next fetches, the leader answers
  with a diverging epoch (``ReplicatedLog.validateOffsetAndEpoch``) and it truncates
  (``ReplicatedLog.truncateToEndOffset``), repeatedly, until its log is a prefix of the leader's.
  ``fetch_truncation`` replays exactly that on the files: everything from the offset it returns
  was never committed, unless something proves otherwise.
- **A committed record is never truncated** (``KafkaMetadataLog.truncateTo`` refuses to go below
  the high watermark). Two things on disk prove a record committed: a snapshot (a node snapshots
  only below its high watermark, ``KafkaMetadataLog.createNewSnapshot``; ``NNNN-EEEE.checkpoint``
  names the end offset and epoch), and a batch of epoch E held identically by a majority of E's
  voters (the ``LeaderChangeMessage`` that opens E lists them): stored on a majority in its own
  epoch, no later leader can lack it. A committed record in a tail the leader's log does not hold
  is metadata the quorum lost: the leader of a later epoch was elected without it (a voter that
  lost its disk and voted with an empty log, KIP-853's case).
- Same offset, same epoch, different bytes cannot happen in Raft (one leader per epoch writes
  once; followers copy its bytes): no fetch would repair it, and it is reported as well.

The high watermark itself is not on disk: ``quorum-state`` holds only the election (leader, epoch,
vote, and in version 0 the static voters; its ``appliedOffset`` is always 0), so commitment is
read from the snapshots and the majorities above.

The driver works on summaries: each node's runs of batches (``batch_runs``: a few rows a segment,
with their digests), its snapshot ids (file names) and the few control records. Runs equal to one
of the leader copy's hold the same batches; the others' batches (a lagging or diverged end) are
compared with the leader's in one Spark query (``unmatched_runs``), and only what the leader does
not hold leaves it, summed per holder set and epoch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .replica_logs import DIGEST_PARTS, METADATA_TOPIC
from .restart_preview import UNDEFINED_EPOCH_OFFSET, end_offset_for

VALID, DIVERGING, SNAPSHOT = "valid", "diverging", "snapshot"  # ValidOffsetAndEpoch.Kind
MAX_FETCHES = 1000  # a follower converges in one fetch per epoch it holds; this only bounds damaged input


@dataclass(frozen=True, order=True)
class OffsetAndEpoch:
    """Kafka's ``OffsetAndEpoch`` (ordered by offset, then epoch): a snapshot id, a log position."""

    offset: int
    epoch: int


@dataclass(frozen=True)
class RaftLogCopy:
    """One node's replica of ``__cluster_metadata-0`` as its files show it: the epochs its batches
    carry (epoch, start offset), where its batches start and end, its snapshots' ids, a segment path."""

    node: int
    epochs: tuple[tuple[int, int], ...]
    start_offset: int
    end_offset: int
    snapshots: tuple[OffsetAndEpoch, ...] = ()
    path: str | None = None
    runs: tuple[tuple, ...] = ()  # (first offset, last offset, epoch, batches, *digests) of its batch_runs

    def truncated(self, offset: int) -> RaftLogCopy:
        """``ReplicatedLog.truncateTo``: the records from ``offset`` on gone (and the epochs starting there)."""
        epochs = tuple((e, s) for e, s in self.epochs if s < offset)
        return RaftLogCopy(self.node, epochs, min(self.start_offset, offset), min(self.end_offset, offset), self.snapshots, self.path)

    @property
    def last_fetched_epoch(self) -> int:
        """``KafkaMetadataLog.lastFetchedEpoch``: the latest epoch, else the latest snapshot's (an empty log), else 0."""
        if self.epochs:
            return self.epochs[-1][0]
        return self.snapshots[-1].epoch if self.snapshots else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """``KafkaMetadataLog.endOffsetForEpoch``: ``LeaderEpochFileCache.endOffsetFor``, the oldest
        snapshot's id when the answer is the log start, the log end when the cache cannot answer."""
        found_epoch, found = end_offset_for(list(self.epochs), self.end_offset, epoch)
        if found == UNDEFINED_EPOCH_OFFSET:
            return OffsetAndEpoch(self.end_offset, self.last_fetched_epoch)
        if self.snapshots and found == self.snapshots[0].offset and found_epoch == epoch:
            return self.snapshots[0]
        return OffsetAndEpoch(found, found_epoch)

    def validate_offset_and_epoch(self, offset: int, epoch: int) -> tuple[str, OffsetAndEpoch]:
        """``ReplicatedLog.validateOffsetAndEpoch``, the leader's check of a follower's fetch position."""
        if self.start_offset == 0 and offset == 0:
            return VALID, OffsetAndEpoch(0, 0)
        if self.snapshots:
            earliest = self.snapshots[0]
            if offset < self.start_offset or (offset == self.start_offset and epoch != earliest.epoch) or epoch < earliest.epoch:
                return SNAPSHOT, self.snapshots[-1]
        end = self.end_offset_for_epoch(epoch)
        if end.epoch != epoch or end.offset < offset:
            return DIVERGING, end
        return VALID, OffsetAndEpoch(offset, epoch)

    def truncate_to_end_offset(self, diverging: OffsetAndEpoch) -> int:
        """``ReplicatedLog.truncateToEndOffset``: where a follower cuts its log on a diverging epoch."""
        if diverging.epoch == 0:
            return min(diverging.offset, self.end_offset)
        local = self.end_offset_for_epoch(diverging.epoch)
        return min(local.offset, diverging.offset) if local.epoch == diverging.epoch else local.offset


@dataclass(frozen=True)
class FetchTruncation:
    """What a copy's next fetches from the leader do: ``truncate_to`` (its end offset when nothing
    is cut; None when the leader answers with a snapshot: the copy lags behind its log start) and
    the epochs it fetched with, in order."""

    truncate_to: int | None
    epochs_sent: tuple[int, ...] = ()


def fetch_truncation(follower: RaftLogCopy, leader: RaftLogCopy) -> FetchTruncation:
    """Replay ``KafkaRaftClient``'s fetch loop: the follower fetches at (its end offset, its last
    epoch); on DIVERGING it truncates (``truncate_to_end_offset``) and fetches again, until VALID."""
    copy, sent = follower, []
    for _ in range(MAX_FETCHES):
        epoch = copy.last_fetched_epoch
        sent.append(epoch)
        kind, answer = leader.validate_offset_and_epoch(copy.end_offset, epoch)
        if kind == VALID:
            return FetchTruncation(copy.end_offset, tuple(sent))
        if kind == SNAPSHOT:
            return FetchTruncation(None, tuple(sent))
        cut = copy.truncate_to_end_offset(answer)
        if cut >= copy.end_offset:  # (only damaged epochs get here: nothing left to cut)
            return FetchTruncation(copy.end_offset, tuple(sent))
        copy = copy.truncated(cut)
    return FetchTruncation(copy.end_offset, tuple(sent))


@dataclass(frozen=True)
class UnmatchedRun:
    """Batches of one epoch the leader's copy does not hold identically (same base and last offset,
    epoch and CRC), all held by the same nodes: ``unmatched_runs``' rows."""

    holders: tuple[int, ...]
    epoch: int
    first_offset: int
    last_offset: int
    batches: int
    records: int
    first_timestamp: int | None = None
    last_timestamp: int | None = None
    evidence: tuple[tuple[int, str, int], ...] = ()  # (node, path, position) of the first batch, per holder


@dataclass(frozen=True)
class EpochStart:
    """An epoch's ``LeaderChangeMessage``: its leader, voters and the voters that granted it, where it sits."""

    epoch: int
    offset: int
    leader: int
    voters: tuple[int, ...]
    granting: tuple[int, ...]
    timestamp: int | None = None
    nodes: tuple[int, ...] = ()
    path: str | None = None
    position: int | None = None
    copies: tuple[tuple[int, str, int], ...] = ()  # (node, path, batch position) of every copy holding it

    def where(self, node: int) -> tuple[str | None, int | None]:
        """Where ``node``'s copy holds it (else the first copy's place)."""
        return next(((p, pos) for n, p, pos in self.copies if n == node), (self.path, self.position))


@dataclass
class CopyVerdict:
    """One node's copy against the leader's (``compare``)."""

    node: int
    leader_copy: int
    end_offset: int
    truncate_to: int | None  # see FetchTruncation
    epochs_sent: tuple[int, ...] = ()
    tail: list[UnmatchedRun] = field(default_factory=list)  # what it holds from truncate_to on
    committed_end: int | None = None  # the tail below this offset was committed ...
    committed_by: list[str] = field(default_factory=list)  # ... by these: "snapshot N-E on node X", "a majority of voters …"
    conflict: list[UnmatchedRun] = field(default_factory=list)  # below truncate_to: same epoch, other bytes


def reference_copy(copies: Sequence[RaftLogCopy], starts: Sequence[EpochStart] = ()) -> RaftLogCopy | None:
    """The leader's log, as far as collected: the copy with the highest (last epoch, end offset),
    Raft's order of logs; among equals, the leader of the newest epoch, then the lowest node id."""
    if not copies:
        return None
    leaders = {s.epoch: s.leader for s in starts}
    return max(copies, key=lambda c: (c.last_fetched_epoch, c.end_offset, leaders.get(c.last_fetched_epoch) == c.node, -c.node))


def _majority(holders: Iterable[int], voters: Sequence[int]) -> bool:
    return bool(voters) and len(set(holders) & set(voters)) > len(set(voters)) // 2


def compare(copies: Sequence[RaftLogCopy], unmatched: Sequence[UnmatchedRun], starts: Sequence[EpochStart] = ()) -> list[CopyVerdict]:
    """Each copy but the leader's against it (see the module doc). ``unmatched``: the batches the
    leader's copy does not hold (``unmatched_runs`` against ``reference_copy``); ``starts``: the
    epochs' LeaderChangeMessages (their voters decide a majority)."""
    ref = reference_copy(copies, starts)
    if ref is None:
        return []
    voters = {s.epoch: s.voters for s in starts}
    # The leader's latest epoch is open: a copy taken later than the leader's (a follower's, or the
    # leader's own copied first) may hold more of it, which is no divergence.
    leader = RaftLogCopy(ref.node, ref.epochs, ref.start_offset, max(c.end_offset for c in copies), ref.snapshots, ref.path)
    out = []
    for copy in sorted(copies, key=lambda c: c.node):
        if copy.node == ref.node:
            continue
        ft = fetch_truncation(copy, leader)
        v = CopyVerdict(copy.node, ref.node, copy.end_offset, ft.truncate_to, ft.epochs_sent)
        out.append(v)
        if ft.truncate_to is None:  # behind the leader's log start: it will load the leader's snapshot; nothing to compare
            continue
        mine = sorted((u for u in unmatched if copy.node in u.holders), key=lambda u: u.first_offset)
        ends: list[tuple[int, str]] = []
        for snap in copy.snapshots:
            # a snapshot is committed; one the leader's log does not hold (a diverging answer that is
            # not just this copy being ahead in the leader's latest epoch) proves a committed tail
            kind, answer = leader.validate_offset_and_epoch(snap.offset, snap.epoch)
            if kind == DIVERGING:  # (where the copy's own epochs part from the answer; at the latest its last record)
                v.truncate_to = min(v.truncate_to, copy.truncate_to_end_offset(answer), answer.offset, snap.offset - 1)
                ends.append((snap.offset, f"its snapshot {snap.offset}-{snap.epoch} (a node snapshots only below its high watermark), "
                                          f"which the leader's log does not hold"))
        cut = v.truncate_to
        v.tail = [u for u in mine if u.last_offset >= cut]
        v.conflict = [u for u in mine if u.first_offset < min(cut, ref.end_offset) and u.first_offset >= ref.start_offset]
        for u in v.tail:
            if _majority(u.holders, voters.get(u.epoch, ())):
                ends.append((u.last_offset + 1, f"held by {len(set(u.holders) & set(voters[u.epoch]))} of epoch {u.epoch}'s "
                                                f"voters {list(voters[u.epoch])}, a majority"))
        if ends and max(e for e, _ in ends) > cut:
            v.committed_end = max(e for e, _ in ends)
            v.committed_by = [why for e, why in sorted(ends) if e > cut]
    return out


# ------------------------------------------------------------------ Spark: the few rows the driver needs
def _metadata(df: DataFrame, kinds: tuple[str, ...] = ("segment",)) -> DataFrame:
    return df.where((F.col("topic") == METADATA_TOPIC) & (F.col("partition") == 0) & (F.col("dir_state") == "live")
                    & F.col("file_kind").isin(*kinds))


def read_copies(batch_runs: DataFrame, files: DataFrame) -> list[RaftLogCopy]:
    """Each node's copy from its runs (a few rows a segment) and its snapshots' file names."""
    runs = _metadata(batch_runs).where(F.col("partition_leader_epoch").isNotNull()).select(
        "broker", F.col("first_offset").alias("start"), F.col("last_offset").alias("last"), "partition_leader_epoch", "batches",
        *DIGEST_PARTS, "path", F.lit(None).cast("string").alias("snapshot"))
    snaps = files.where((F.col("topic") == METADATA_TOPIC) & (F.col("dir_state") == "live") & (F.col("kind") == "kraft_snapshot")).select(
        "broker", F.col("path").alias("snapshot"))
    rows = runs.unionByName(snaps, allowMissingColumns=True).collect()  # (one job: most collections hold no metadata log)
    snaps = [r for r in rows if r["snapshot"] is not None]
    runs = [r for r in rows if r["snapshot"] is None]
    by_node: dict[int, list] = {}
    for r in runs:
        by_node.setdefault(r["broker"], []).append(r)
    snap_ids: dict[int, list[OffsetAndEpoch]] = {}
    for s in snaps:
        name = s["snapshot"].rsplit("/", 1)[-1]
        end, epoch = name.split(".", 1)[0].split("-")
        snap_ids.setdefault(s["broker"], []).append(OffsetAndEpoch(int(end), int(epoch)))
    out = []
    for node in sorted(set(by_node) | set(snap_ids)):
        rs = sorted(by_node.get(node, []), key=lambda r: r["start"])
        epochs: list[tuple[int, int]] = []
        for r in rs:  # LeaderEpochFileCache.assign: only a newer epoch starts an entry
            if not epochs or r["partition_leader_epoch"] > epochs[-1][0]:
                epochs.append((r["partition_leader_epoch"], r["start"]))
        snapshots = tuple(sorted(snap_ids.get(node, [])))
        if rs:
            start, end = rs[0]["start"], max(r["last"] for r in rs) + 1
        else:  # only snapshots: an empty log at the latest snapshot
            start = end = snapshots[-1].offset
        out.append(RaftLogCopy(node, tuple(epochs), start, end, snapshots, min((r["path"] for r in rs), default=None),
                               tuple((r["start"], r["last"], r["partition_leader_epoch"], r["batches"], *(r[d] for d in DIGEST_PARTS))
                                     for r in rs)))
    return out


MAX_WINDOWS = 256  # past this many unmatched runs, every batch is compared (one predicate per window otherwise)


def unmatched_windows(copies: Sequence[RaftLogCopy], leader: int) -> list[tuple[int, int, int]] | None:
    """(node, first, last offset) of each run of a copy that no run of the leader's copy equals
    (same offsets, epoch, batch count and digests: the same batches). Copies of one Raft log
    store the same bytes and mostly roll their segments at the same offsets, so their runs
    match but for a lagging or diverged end: only those windows need comparing batch by batch.
    None: too many to name (the whole log is compared)."""
    ref = next(c for c in copies if c.node == leader)
    have = set(ref.runs)
    out = [(c.node, r[0], r[1]) for c in copies if c.node != leader for r in c.runs if r not in have]
    return None if len(out) > MAX_WINDOWS else out


def unmatched_runs(batches: DataFrame, leader: int, splits: Sequence[int] = (),
                   windows: Sequence[tuple[int, int, int]] | None = None) -> list[UnmatchedRun]:
    """The other copies' batches that ``leader``'s copy does not hold identically (base and last
    offset, epoch, CRC), summed per (set of holders, epoch) and between ``splits`` (the snapshots'
    end offsets, so that a run never straddles what a snapshot proves committed): one Spark query;
    a healthy quorum's copies leave nothing (followers store the leader's batches byte for byte)."""
    mb = _metadata(batches).select("broker", "base_offset", "last_offset", F.col("partition_leader_epoch").alias("epoch"), "crc",
                                   "record_count", "is_control", "max_timestamp", "path", "position")
    key = ["base_offset", "last_offset", "epoch", "crc"]
    ref = mb.where(F.col("broker") == leader).select(*key)
    others = mb.where(F.col("broker") != leader)
    if windows is not None:  # only the runs no leader run equals (literal bounds: Parquet skips the rest)
        if not windows:
            return []
        within = F.lit(False)
        for node, first, last in windows:
            within = within | ((F.col("broker") == node) & F.col("base_offset").between(first, last))
        others = others.where(within)
        lo, hi = min(w[1] for w in windows), max(w[2] for w in windows)
        ref = ref.where(F.col("base_offset").between(lo, hi))
    others = others.join(ref, key, "left_anti")
    per_batch = others.groupBy(*key).agg(
        F.sort_array(F.collect_set("broker")).alias("holders"),
        F.first(F.when(F.col("is_control"), F.lit(0)).otherwise(F.col("record_count"))).alias("records"),
        F.max("max_timestamp").alias("ts"),
        F.collect_list(F.struct("broker", "path", "position")).alias("where"),
    )
    bucket = F.lit(0)
    for split in sorted(set(splits)):
        bucket = bucket + (F.col("base_offset") >= F.lit(split)).cast("int")
    rows = per_batch.groupBy("holders", "epoch", bucket.alias("_between")).agg(
        F.min("base_offset").alias("first"), F.max("last_offset").alias("last"), F.count(F.lit(1)).alias("batches"),
        F.sum("records").alias("records"), F.min("ts").alias("ts0"), F.max("ts").alias("ts1"),
        F.min_by("where", "base_offset").alias("where"),
    ).collect()
    return [UnmatchedRun(tuple(r["holders"]), r["epoch"], r["first"], r["last"], r["batches"], int(r["records"] or 0), r["ts0"], r["ts1"],
                         tuple(sorted((w["broker"], w["path"], w["position"]) for w in r["where"])))
            for r in rows]


CONTROL_TYPES = ("LEADER_CHANGE", "KRAFT_VOTERS", "KRAFT_VERSION")


def quorum_records(metadata_records: DataFrame) -> list:
    """The KRaft control records that say who led and who votes (LeaderChangeMessage, VotersRecord,
    KRaftVersionRecord), one row per record and copy (few: one per epoch and reconfiguration)."""
    m = metadata_records.where(F.col("is_control") & F.col("record_type").isin(*CONTROL_TYPES) & F.col("error").isNull())
    return m.select("broker", "path", "file_kind", "snapshot_end_offset", "offset", "batch_position", "timestamp", "record_type",
                    "data_json").collect()


def epoch_starts(records: Sequence, copies: Sequence[RaftLogCopy]) -> list[EpochStart]:
    """The epochs' LeaderChangeMessages, deduplicated over the copies holding them; the epoch is
    the one the holding copy's epochs give that offset (a control record carries none of its own)."""
    by_node = {c.node: c for c in copies}
    found: dict[tuple[int, int], dict] = {}
    for r in records:
        if r["record_type"] != "LEADER_CHANGE" or r["file_kind"] != "segment" or r["broker"] not in by_node:
            continue
        epochs = [e for e, s in by_node[r["broker"]].epochs if s <= r["offset"]]
        if not epochs:
            continue
        data = json.loads(r["data_json"])
        key = (epochs[-1], r["offset"])
        got = found.setdefault(key, {"data": data, "nodes": set(), "rows": []})
        got["nodes"].add(r["broker"])
        got["rows"].append(r)
    out = []
    for (epoch, offset), g in sorted(found.items()):
        d, first = g["data"], min(g["rows"], key=lambda r: (r["broker"], r["path"]))
        out.append(EpochStart(epoch, offset, d.get("leaderId", -1), tuple(v["voterId"] for v in d.get("voters", [])),
                              tuple(v["voterId"] for v in d.get("grantingVoters", [])), first["timestamp"],
                              tuple(sorted(g["nodes"])), first["path"], first["batch_position"],
                              tuple(sorted((r["broker"], r["path"], r["batch_position"]) for r in g["rows"]))))
    return out


@dataclass(frozen=True)
class MetadataLogComparison:
    """Everything the detector and the timeline read about the metadata log's copies."""

    copies: tuple[RaftLogCopy, ...]
    leader_copy: int | None
    starts: tuple[EpochStart, ...]
    verdicts: tuple[CopyVerdict, ...]
    control_records: tuple = ()


def read_comparison(tables: dict[str, DataFrame]) -> MetadataLogComparison:
    """The comparison over the ingested tables: no Spark job beyond a few small collects when at
    most one copy was collected, and one batch-level query otherwise."""
    copies = read_copies(tables["batch_runs"], tables["files"])
    records = quorum_records(tables["metadata_records"]) if copies else []
    starts = epoch_starts(records, copies)
    ref = reference_copy(copies, starts)
    if ref is None or len(copies) < 2:
        return MetadataLogComparison(tuple(copies), None if ref is None else ref.node, tuple(starts), (), tuple(records))
    splits = [snap.offset for c in copies for snap in c.snapshots]
    verdicts = compare(copies, unmatched_runs(tables["batches"], ref.node, splits, unmatched_windows(copies, ref.node)), starts)
    return MetadataLogComparison(tuple(copies), ref.node, tuple(starts), tuple(verdicts), tuple(records))
