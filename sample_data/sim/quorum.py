"""A KRaft controller quorum, step by step: every node's replica of ``__cluster_metadata-0``.

Mechanics followed (Kafka 4.1.1's ``raft/`` classes in brackets):
  * elect [CandidateState, EpochElection]: a candidate wins epoch E+1 with the votes of a majority
    of the voters; a running voter grants its vote when the candidate's log is at least as up to
    date as its own (last epoch, then end offset). A voter that lost its disk votes with an empty
    log and no memory of its vote: with kraft.version 0 nothing stops it (KIP-853's case). The
    winner appends a LeaderChangeMessage (voters, granting voters) at its log end
    [LeaderState.appendStartOfEpochControlRecords].
  * append [BatchAccumulator]: the leader appends a batch of metadata records in its epoch.
  * replicate [KafkaRaftClient fetch]: every running node but the leader (voters and observers
    alike) fetches at (end offset, last epoch); the leader checks it [validateOffsetAndEpoch];
    on a diverging epoch the node truncates [truncateToEndOffset] and fetches again, then copies
    the leader's batches byte for byte. The leader's high watermark is the end offset a majority
    of the voters reached, once past its epoch's start [LeaderState.maybeUpdateHighWatermark];
    the batches below it are committed (kept here as ground truth).
  * snapshot [SnapshotGenerator, KafkaMetadataLog.createNewSnapshot]: at the node's high
    watermark (a batch boundary), named by its end offset and the last record's epoch.
  * upgrade_kraft_version / remove_voter (KIP-853): a control batch with KRaftVersionRecord
    and/or VotersRecord.
  * crash / start, lose_disk (a replaced disk: log, snapshots and quorum-state gone).

``committed_lost`` derives the ground truth from what happened: committed batches that the
leader of the newest epoch does not hold and some collected node does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sample_data.writer import raft_log as rl
from sample_data.writer.log import LogConfig
from sample_data.writer.properties import META_PROPERTIES_FILE, meta_properties_text
from sample_data.writer.records import BatchSpec

METADATA_VERSION = 27  # 4.1-IV1
APPEND_MS = 500  # metadata.max.idle.interval.ms: a quiet leader appends a NoOpRecord every 500 ms


@dataclass
class RaftNode:
    """One node's replica and its quorum-state (what it knows of the election)."""

    node: int
    voter: bool
    log: list[BatchSpec] = field(default_factory=list)
    snapshots: list[tuple[int, int]] = field(default_factory=list)  # (end offset, epoch)
    hw: int = 0
    running: bool = True
    epoch: int = 0  # quorum-state leaderEpoch
    leader: int = -1
    voted: int = -1

    @property
    def end(self) -> int:
        if self.log:
            return self.log[-1].next_offset
        return self.snapshots[-1][0] if self.snapshots else 0

    @property
    def last_epoch(self) -> int:
        if self.log:
            return self.log[-1].partition_leader_epoch
        return self.snapshots[-1][1] if self.snapshots else 0

    def epoch_end(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch`` it holds, where that epoch ends): its endOffsetForEpoch."""
        held = [b for b in self.log if b.partition_leader_epoch <= epoch]
        if not held:
            return epoch, self.log[0].base_offset if self.log else self.end
        e = held[-1].partition_leader_epoch
        after = [b for b in self.log if b.partition_leader_epoch > e]
        return e, after[0].base_offset if after else self.end

    def truncate(self, offset: int) -> None:
        self.log = [b for b in self.log if b.base_offset < offset]
        self.hw = min(self.hw, self.end)


class ControllerQuorum:
    """The controllers ``voters`` (``controller-<id>`` dirs) and the brokers ``observers``, which
    keep a copy of the metadata log in their own log dir."""

    def __init__(self, voters: list[int], observers: list[int] = (), *, start_ms: int = 1_767_225_600_000, kraft_version: int = 0) -> None:
        self.nodes = {n: RaftNode(n, True) for n in voters}
        self.nodes.update({n: RaftNode(n, False) for n in observers})
        self.voters = list(voters)
        self.kraft_version = kraft_version
        self.now = start_ms
        self.leader: int | None = None
        self.epoch = 0
        self.epoch_start = 0
        self.committed: dict[int, BatchSpec] = {}  # base offset -> the batch committed there
        # the metadata image at an end offset, as records (besides metadata.version): what a snapshot
        # restates; set by whoever writes the records (sample_data.sim.controller), else none
        self.image = None
        self.images: dict[tuple[int, int], list[bytes]] = {}  # (end offset, epoch) -> a snapshot's image records
        self.events: list[dict] = []

    def _event(self, action: str, **kw) -> None:
        self.events.append({"t": self.now, "action": action, **kw})

    def _lead(self) -> RaftNode:
        if self.leader is None or not self.nodes[self.leader].running:
            raise ValueError("the quorum has no running leader")
        return self.nodes[self.leader]

    # -- elections and appends -------------------------------------------------------------------
    def elect(self, candidate: int) -> None:
        c = self.nodes[candidate]
        epoch = max(n.epoch for n in self.nodes.values()) + 1
        granting = [v for v in self.voters if self.nodes[v].running
                    and (c.last_epoch, c.end) >= (self.nodes[v].last_epoch, self.nodes[v].end)]
        if candidate not in granting or len(granting) <= len(self.voters) // 2:
            raise ValueError(f"node {candidate} cannot win epoch {epoch}: votes {granting} of {self.voters}")
        for v in granting:
            n = self.nodes[v]
            n.epoch, n.leader, n.voted = epoch, candidate, candidate
        self.leader, self.epoch, self.epoch_start = candidate, epoch, c.end
        self.now += 1
        c.log.append(rl.control_batch(c.end, epoch, self.now, [(rl.LEADER_CHANGE, rl.leader_change_message(candidate, self.voters, granting))]))
        self._event("raft_leader", leader=candidate, epoch=epoch, offset=self.epoch_start, granting=granting)

    def append(self, batches: int = 1, values: list[bytes] | None = None) -> None:
        """``batches`` batches of one NoOpRecord each, or one batch of ``values``."""
        lead = self._lead()
        for _ in range(1 if values else batches):
            self.now += APPEND_MS
            lead.log.append(rl.metadata_batch(lead.end, self.epoch, self.now, values or [rl.no_op_record()]))

    def upgrade_kraft_version(self, voters) -> None:
        """kraft.version 0 -> 1 (KIP-853): KRaftVersionRecord and the voter set, one control batch."""
        lead = self._lead()
        self.now += 1
        self.kraft_version = 1
        lead.log.append(rl.control_batch(lead.end, self.epoch, self.now, [(rl.KRAFT_VERSION, rl.kraft_version_record(1)),
                                                                         (rl.KRAFT_VOTERS, rl.voters_record(voters))]))
        self._event("kraft_version", version=1)

    def remove_voter(self, node: int, voters) -> None:
        """RemoveRaftVoter: a VotersRecord without ``node`` (``voters`` are the remaining ``Voter``s)."""
        lead = self._lead()
        self.now += 1
        self.voters = [v for v in self.voters if v != node]
        lead.log.append(rl.control_batch(lead.end, self.epoch, self.now, [(rl.KRAFT_VOTERS, rl.voters_record(voters))]))
        self._event("remove_voter", node=node)

    # -- replication ---------------------------------------------------------------------------
    def fetch(self, node: int) -> None:
        """One node's fetch from the leader, with Raft's truncation on a diverging epoch."""
        lead, n = self._lead(), self.nodes[node]
        for _ in range(100):
            e, end = lead.epoch_end(n.last_epoch)
            if e == n.last_epoch and end >= n.end:
                break
            mine_e, mine_end = n.epoch_end(e)
            cut = min(mine_end, end) if mine_e == e else mine_end
            if cut < n.end:
                self._event("raft_truncate", node=node, offset=cut, held_to=n.end)
            n.truncate(cut)
        n.log += [b for b in lead.log if b.base_offset >= n.end]
        n.epoch, n.leader = self.epoch, self.leader
        n.hw = min(lead.hw, n.end)

    def replicate(self, rounds: int = 2, nodes: list[int] | None = None) -> None:
        """``rounds`` of fetches by the running nodes (or only ``nodes``), the leader's HW moving after each."""
        for _ in range(rounds):
            for node in nodes if nodes is not None else sorted(self.nodes):
                if node != self.leader and self.nodes[node].running:
                    self.fetch(node)
            self._advance_hw()

    def _advance_hw(self) -> None:
        lead = self._lead()
        ends = sorted((self.nodes[v].end if self.nodes[v].running or v == self.leader else 0 for v in self.voters), reverse=True)
        hw = ends[len(self.voters) // 2]
        if hw > self.epoch_start and hw > lead.hw:
            lead.hw = hw
            for b in lead.log:
                if b.last_offset < hw:
                    self.committed.setdefault(b.base_offset, b)

    def snapshot(self, node: int) -> None:
        """A snapshot at the node's high watermark (its end offset and the last record's epoch)."""
        n = self.nodes[node]
        if n.hw > 0 and (not n.snapshots or n.snapshots[-1][0] < n.hw):
            last = next(b for b in n.log if b.base_offset < n.hw <= b.next_offset)
            n.snapshots.append((n.hw, last.partition_leader_epoch))
            if self.image is not None:
                self.images[n.snapshots[-1]] = self.image(n.hw)
            self._event("raft_snapshot", node=node, offset=n.hw, epoch=last.partition_leader_epoch)

    # -- failures --------------------------------------------------------------------------------
    def crash(self, node: int) -> None:
        self.nodes[node].running = False
        if node == self.leader:
            self.leader = None
        self._event("crash", node=node)

    def start(self, node: int) -> None:
        self.nodes[node].running = True
        self._event("start", node=node)

    def lose_disk(self, node: int) -> None:
        """The node's log dir replaced by an empty one (formatted again): everything it held is gone."""
        n = self.nodes[node]
        n.log, n.snapshots, n.hw, n.epoch, n.leader, n.voted = [], [], 0, 0, -1, -1
        self._event("lose_disk", node=node)

    # -- ground truth and files ------------------------------------------------------------------
    def reference(self) -> RaftNode:
        """The leader's log: the newest epoch's leader, as Raft orders logs (last epoch, end offset)."""
        return max(self.nodes.values(), key=lambda n: (n.last_epoch, n.end, n.node == self.leader, -n.node))

    def committed_lost(self) -> list[dict]:
        """Committed batches the leader's log does not hold identically, per range, with the nodes
        that still hold them (the ground truth of ``metadata_log_divergence``)."""
        ref = self.reference()
        have = {b.base_offset: b for b in ref.log}
        start = ref.log[0].base_offset if ref.log else ref.end
        lost = sorted((b for off, b in self.committed.items() if have.get(off) != b and off >= start), key=lambda b: b.base_offset)
        if not lost:
            return []
        holders = sorted(n.node for n in self.nodes.values() if n.node != ref.node and any(b in n.log for b in lost))
        return [{"first_offset": lost[0].base_offset, "last_offset": lost[-1].last_offset,
                 "records": sum(b.record_count for b in lost if not isinstance(b, rl.RaftControlBatch)),
                 "brokers": sorted({*holders, ref.node}), "holders": holders, "leader_copy": ref.node}]

    def materialize(self, out_dir: Path, cluster_id: str, *, clean: dict[int, bool] | None = None) -> None:
        """Each voter's ``controller-<id>/`` (meta.properties and its metadata log), each observer's
        metadata log inside its existing ``broker-<id>/``; ``clean``: whether a broker stopped cleanly."""
        out_dir = Path(out_dir)
        for n in self.nodes.values():
            if n.voter:
                root = out_dir / f"controller-{n.node}"
                root.mkdir(parents=True, exist_ok=True)
                (root / META_PROPERTIES_FILE).write_text(meta_properties_text(n.node, cluster_id, None, 1), encoding="utf-8")
            else:
                root = out_dir / f"broker-{n.node}"
            state = rl.quorum_state_text(n.leader, n.epoch, n.voted, voters=self.voters) if n.epoch else None
            snaps = [rl.RaftSnapshot(end, epoch, tuple(rl.snapshot_batches(
                epoch, self.now, self.now, [rl.feature_level_record("metadata.version", METADATA_VERSION),
                                            *self.images.get((end, epoch), [])])))
                     for end, epoch in n.snapshots]
            rl.write_metadata_log(root, n.log, quorum_state=state, snapshots=snaps,
                                  clean=(clean or {}).get(n.node, False) if not n.voter else n.running,
                                  config=LogConfig(segment_bytes=1 << 20))
