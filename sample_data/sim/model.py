"""What the simulator keeps in memory: records, batches, one broker's replica of a partition, and
the controller's view of a partition (leader, leader epoch, ISR, the leader's view of its followers).

Names follow Kafka's classes: a ``Replica`` is one broker's ``UnifiedLog`` plus the ``Partition``
fields that broker holds (high watermark, ``LeaderEpochFileCache``), and the ``ckpt_*`` fields are
what the checkpoint files said when last flushed, which is what survives a kill -9.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property

UNDEFINED_EPOCH = -1  # LeaderEpochFileCache / OffsetsForLeaderEpoch "no such epoch"
NO_PRODUCER_ID = -1


def sha256_hex(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def epochs_from_start(epochs: list[tuple[int, int]], log_start: int) -> list[tuple[int, int]]:
    """LeaderEpochFileCache.truncateFromStart, as the checkpoint file shows it once the log start moved:
    the epoch holding the log start now starts there."""
    below = [e for e in epochs if e[1] <= log_start]
    return ([(below[-1][0], log_start)] if below else []) + [e for e in epochs if e[1] > log_start]


@dataclass(frozen=True)
class SimRecord:
    """One record as the producer sent it; the content an analyzer compares across replicas."""

    key: bytes | None
    value: bytes | None
    timestamp: int

    @cached_property
    def content(self) -> tuple[str | None, str | None]:
        """(key sha256, value sha256): what "the same record" means for ground truth."""
        return sha256_hex(self.key), sha256_hex(self.value)


@dataclass(frozen=True)
class SimBatch:
    """One v2 record batch with contiguous offsets, stamped with the leader epoch that appended it.

    Control batches (transaction markers) hold no SimRecord: ``count`` is 1 and ``control`` names it.
    """

    base_offset: int
    records: tuple[SimRecord, ...]
    epoch: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False
    control: str | None = None  # "commit" | "abort"
    coordinator_epoch: int = 0
    timestamp: int = 0  # control batches: the marker's timestamp

    @property
    def count(self) -> int:
        return 1 if self.control else len(self.records)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.count - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count

    def offsets(self) -> range:
        return range(self.base_offset, self.next_offset)


@dataclass
class Replica:
    """One broker's copy of one partition: its log, high watermark, leader-epoch cache and the
    checkpoint values last written to disk (``None`` = no entry ever written)."""

    broker: int
    topic: str
    partition: int
    batches: list[SimBatch] = field(default_factory=list)
    leo: int = 0
    log_start: int = 0
    hw: int = 0
    epochs: list[tuple[int, int]] = field(default_factory=list)  # (epoch, start offset), flushed on change
    ckpt_hw: int | None = None
    ckpt_recovery: int | None = None
    ckpt_log_start: int | None = None
    cleaner_offset: int | None = None
    legacy_epoch_cache: bool = False  # LeaderEpochFileCache.assign before KIP-279 (Kafka 1.x)

    @property
    def tp(self) -> tuple[str, int]:
        return self.topic, self.partition

    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else UNDEFINED_EPOCH

    def assign_epoch(self, epoch: int, start_offset: int) -> bool:
        """LeaderEpochFileCache.assign: a different epoch (or an earlier start for the latest one)
        replaces every entry with an epoch >= it or a start offset >= its start (so an epoch that
        never held a record disappears when the next one starts at the same offset)."""
        if self.legacy_epoch_cache:  # Kafka < 2.0: only a newer epoch at or after the latest start is added
            if epoch > self.latest_epoch and (not self.epochs or start_offset >= self.epochs[-1][1]):
                self.epochs.append((epoch, start_offset))
                return True
            return False
        if self.epochs and epoch == self.epochs[-1][0] and start_offset >= self.epochs[-1][1]:
            return False
        while self.epochs and (self.epochs[-1][0] >= epoch or self.epochs[-1][1] >= start_offset):
            self.epochs.pop()
        self.epochs.append((epoch, start_offset))
        return True

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        """LeaderEpochFileCache.endOffsetFor: (largest epoch <= ``epoch``, its end offset).

        The end offset of the latest epoch is the LEO; of an older one, the start of the next entry.
        """
        if epoch == self.latest_epoch:
            return epoch, self.leo
        below = [i for i, (e, _) in enumerate(self.epochs) if e <= epoch]
        if not below:
            return UNDEFINED_EPOCH, -1
        i = below[-1]
        return self.epochs[i][0], self.epochs[i + 1][1] if i + 1 < len(self.epochs) else self.leo

    def append(self, batch: SimBatch) -> None:
        if batch.base_offset != self.leo:
            raise AssertionError(f"broker {self.broker} {self.tp}: append at {batch.base_offset}, LEO {self.leo}")
        self.batches.append(batch)
        self.leo = batch.next_offset

    def truncate_to(self, offset: int) -> list[SimBatch]:
        """UnifiedLog.truncateTo at a batch boundary; the epoch cache is truncated from the end too."""
        kept = [b for b in self.batches if b.last_offset < offset]
        removed = self.batches[len(kept) :]
        self.batches = kept
        self.leo = min(self.leo, offset)
        self.hw = min(self.hw, self.leo)
        self.epochs = [(e, s) for e, s in self.epochs if s < self.leo]
        return removed

    def record_at(self) -> dict[int, tuple[SimBatch, SimRecord | None]]:
        """{offset: (batch, record)} for every offset held in the log (None record for markers)."""
        out: dict[int, tuple[SimBatch, SimRecord | None]] = {}
        for b in self.batches:
            if b.control:
                out[b.base_offset] = (b, None)
            else:
                for off, r in zip(b.offsets(), b.records):
                    out[off] = (b, r)
        return out


@dataclass
class PartitionState:
    """The controller's record of a partition (leader, epoch, ISR) plus the leader's per-follower
    fetch state (``Partition.remoteReplicas``: LEO and last caught-up time)."""

    topic: str
    partition: int
    replicas: list[int]
    min_isr: int = 1
    leader: int = -1
    epoch: int = 0
    isr: list[int] = field(default_factory=list)
    remote_leo: dict[int, int | None] = field(default_factory=dict)
    caught_up_ms: dict[int, int] = field(default_factory=dict)
    committed: int = 0  # the highest HW any leader ever reached: every offset below was committed
    compacted: bool = False
    elr: list[int] = field(default_factory=list)  # eligible leader replicas (KIP-966; a KRaft cluster's, ``Cluster(kraft=True)``)
    last_known_elr: list[int] = field(default_factory=list)
    recovering: bool = False  # leaderRecoveryState RECOVERING: an unclean leader not yet past its first ISR expansion

    @property
    def tp(self) -> tuple[str, int]:
        return self.topic, self.partition


@dataclass
class Broker:
    node_id: int
    alive: bool = True
    crashed: bool = False  # the last stop was a kill -9 (no clean-shutdown marker, stale checkpoints)
    clean_marker: bool = False


@dataclass
class PendingAck:
    """An acks=all produce request waiting in the purgatory for the HW to pass its last offset."""

    topic: str
    partition: int
    batch: SimBatch
    epoch: int
