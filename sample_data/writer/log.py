"""Partition and broker directories laid out the way a broker leaves them.

Follows the broker's append path (``UnifiedLog.append`` -> ``maybeRoll`` -> ``LogSegment.append``),
one ``LogSegment.append`` per batch:

* roll before an append when the active segment is non-empty and ``size > segment.bytes -
  batch size``, or when its offset/time index is full (``LogSegment.shouldRoll``); the new
  segment is named after the batch's base offset (20 digits);
* ``LogSegment.append``: when more than ``index.interval.bytes`` were appended since the last
  index entry, the offset index gets (batch LAST offset, position where the batch STARTS) and
  the time index gets (max timestamp so far, the offset it belongs to) if that timestamp grew;
  the first batch of a segment is never indexed (the counter starts at 0);
* rolling a segment (``onBecomeInactiveSegment``) and closing one cleanly (``close``) add a last
  time-index entry for the segment's max timestamp, then trim both indexes; a killed broker
  leaves the active segment's indexes preallocated to ``segment.index.bytes``, zero-padded;
* ``ProducerStateManager``: idempotent/transactional batches update per-producer state; an
  ABORT marker that ends a transaction appends (pid, first offset, marker offset, last stable
  offset) to the active segment's ``.txnindex``; a snapshot is taken at every roll (named by
  the new segment's base offset) and at clean shutdown (at the log end offset);
* ``LeaderEpochFileCache.assign``: a batch whose partition leader epoch is above the latest
  starts a new epoch at its base offset.

Positions and sizes of everything written come back in a ``PartitionLayout``, so callers can
damage exact bytes afterwards (torn tails, flipped CRCs, corrupt index entries).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .checkpoints import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    OFFSET_CHECKPOINT_FILES,
    leader_epoch_checkpoint_bytes,
    offset_checkpoint_bytes,
)
from .indexes import (
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY_SIZE,
    offset_index_bytes,
    preallocated_size,
    time_index_bytes,
    txn_index_bytes,
)
from .producer_snapshot import (
    NO_COORDINATOR_EPOCH,
    NO_TXN_FIRST_OFFSET,
    ProducerEntry,
    java_hashmap_order,
    producer_snapshot_bytes,
)
from .properties import (
    CLEAN_SHUTDOWN_FILE,
    META_PROPERTIES_FILE,
    PARTITION_METADATA_FILE,
    clean_shutdown_bytes,
    meta_properties_text,
    partition_metadata_text,
)
from .records import MAGIC_V2, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP, BatchSpec, encode_batch

OFFSET_NAME_DIGITS = 20
NO_OFFSET = -1
INT_MAX = (1 << 31) - 1


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``LogFileUtils.filenamePrefixFromOffset``: the base offset, zero-padded to 20 digits."""
    return f"{base_offset:0{OFFSET_NAME_DIGITS}d}{suffix}"


@dataclass
class LogConfig:
    segment_bytes: int = 1 << 20
    index_interval_bytes: int = 4096
    max_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes: what a crashed broker's active-segment indexes are padded to


@dataclass(frozen=True)
class BatchLocation:
    """Where one batch of the input went (``path`` None: its segment was deleted below the log start)."""

    index: int
    base_offset: int
    last_offset: int
    segment_base_offset: int
    path: Path | None
    position: int
    size: int


@dataclass
class SegmentLayout:
    base_offset: int
    dir: Path
    size: int = 0
    next_offset: int = 0
    index_entries: list[tuple[int, int]] = field(default_factory=list)  # (absolute offset, position)
    time_index_entries: list[tuple[int, int]] = field(default_factory=list)  # (timestamp, absolute offset)
    aborted_txns: list[tuple[int, int, int, int]] = field(default_factory=list)
    index_file_size: int = 0
    time_index_file_size: int = 0
    deleted: bool = False  # entirely below log_start_offset: not written

    def path(self, suffix: str) -> Path:
        return self.dir / segment_file_name(self.base_offset, suffix)

    @property
    def log_path(self) -> Path:
        return self.path(".log")

    @property
    def index_path(self) -> Path:
        return self.path(".index")

    @property
    def time_index_path(self) -> Path:
        return self.path(".timeindex")

    @property
    def txn_index_path(self) -> Path | None:
        return self.path(".txnindex") if self.aborted_txns else None


@dataclass
class PartitionLayout:
    dir: Path
    batches: list[BatchLocation]
    segments: list[SegmentLayout]
    log_start_offset: int
    log_end_offset: int
    leader_epochs: list[tuple[int, int]]
    producer_snapshots: dict[int, list[ProducerEntry]]  # snapshot offset -> entries as written
    clean: bool

    @property
    def active_segment(self) -> SegmentLayout:
        return self.segments[-1]


class _Segment:
    """One LogSegment's in-memory state while batches are appended."""

    def __init__(self, base_offset: int, config: LogConfig, dir: Path) -> None:
        self.layout = SegmentLayout(base_offset, dir, next_offset=base_offset)
        self.chunks: list[bytes] = []
        self.bytes_since_last_index_entry = 0
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp = NO_OFFSET
        self.last_time_entry = (NO_TIMESTAMP, base_offset)  # TimeIndex.lastEntry of an empty index
        self.max_index_entries = preallocated_size(config.max_index_bytes, OFFSET_ENTRY_SIZE) // OFFSET_ENTRY_SIZE
        self.max_time_entries = preallocated_size(config.max_index_bytes, TIME_ENTRY_SIZE) // TIME_ENTRY_SIZE
        self.config = config

    def should_roll(self, batch_size: int, last_offset: int) -> bool:
        seg = self.layout
        return seg.size > 0 and (
            seg.size > self.config.segment_bytes - batch_size
            or len(seg.index_entries) >= self.max_index_entries
            or len(seg.time_index_entries) >= self.max_time_entries
            or last_offset - seg.base_offset > INT_MAX
        )

    def append(self, data: bytes, spec: BatchSpec) -> int:
        seg = self.layout
        position = seg.size
        self.chunks.append(data)
        seg.size += len(data)
        seg.next_offset = spec.next_offset
        max_ts = spec.computed_max_timestamp
        if max_ts > self.max_timestamp_so_far:
            self.max_timestamp_so_far, self.offset_of_max_timestamp = max_ts, spec.offset_of_max_timestamp
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes:
            # v2: the batch's last offset (LogSegment.append per batch); a v0/v1 message set as a
            # pre-0.11 broker indexed it: the first offset of the append (0.10's LogSegment.append)
            seg.index_entries.append((spec.last_offset if spec.magic == MAGIC_V2 else spec.base_offset, position))
            self.maybe_append_time_entry()
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += len(data)
        return position

    def maybe_append_time_entry(self) -> None:
        """TimeIndex.maybeAppend: only a timestamp larger than the last entry's is appended."""
        if self.max_timestamp_so_far > self.last_time_entry[0]:
            self.last_time_entry = (self.max_timestamp_so_far, self.offset_of_max_timestamp)
            self.layout.time_index_entries.append(self.last_time_entry)


@dataclass
class _Producer:
    producer_id: int
    insertion: int
    producer_epoch: int = -1
    last_sequence: int = -1
    last_offset: int = NO_OFFSET
    offset_delta: int = 0
    timestamp: int = NO_TIMESTAMP
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    current_txn_first_offset: int = NO_TXN_FIRST_OFFSET

    def entry(self) -> ProducerEntry:
        return ProducerEntry(
            self.producer_id,
            self.producer_epoch,
            self.last_sequence,
            self.last_offset,
            self.offset_delta,
            self.timestamp,
            self.coordinator_epoch,
            self.current_txn_first_offset,
        )


class ProducerState:
    """ProducerStateManager as far as the files show it: entries, open transactions, aborted ones."""

    def __init__(self) -> None:
        self.producers: dict[int, _Producer] = {}

    def append(self, spec: BatchSpec) -> tuple[int, int, int, int] | None:
        """Update for one batch; returns the txn-index entry when an ABORT marker ended a transaction."""
        if spec.producer_id == NO_PRODUCER_ID:
            return None
        p = self.producers.setdefault(spec.producer_id, _Producer(spec.producer_id, len(self.producers)))
        if p.producer_epoch != spec.producer_epoch:
            # ProducerStateEntry.maybeUpdateProducerEpoch: a new epoch drops the batches kept for
            # de-duplication, so a marker that bumps it (transactions v2: one epoch above its data)
            # leaves no last sequence or offset behind (-1, -1, delta 0 in the snapshot)
            p.last_sequence, p.last_offset, p.offset_delta = NO_SEQUENCE, NO_OFFSET, 0
        p.producer_epoch = spec.producer_epoch
        if spec.is_control:  # ProducerAppendInfo.appendEndTxnMarker
            aborted = None
            if p.current_txn_first_offset != NO_TXN_FIRST_OFFSET and spec.control == "abort":
                aborted = (
                    p.producer_id,
                    p.current_txn_first_offset,
                    spec.base_offset,
                    self._last_stable_offset(p.producer_id, spec.base_offset),
                )
            p.coordinator_epoch = spec.coordinator_epoch
            p.timestamp = spec.computed_max_timestamp
            p.current_txn_first_offset = NO_TXN_FIRST_OFFSET
            return aborted
        p.last_sequence = spec.last_sequence
        p.last_offset = spec.last_offset
        p.offset_delta = spec.computed_last_offset_delta
        p.timestamp = spec.computed_max_timestamp
        if spec.is_transactional and p.current_txn_first_offset == NO_TXN_FIRST_OFFSET:
            p.current_txn_first_offset = spec.base_offset
        return None

    def _last_stable_offset(self, completed_pid: int, marker_offset: int) -> int:
        """ProducerStateManager.lastStableOffset: the first offset of the earliest other open
        transaction, else the offset after the marker."""
        others = [
            q.current_txn_first_offset
            for q in self.producers.values()
            if q.producer_id != completed_pid and q.current_txn_first_offset != NO_TXN_FIRST_OFFSET
        ]
        return min(others) if others else marker_offset + 1

    def snapshot(self) -> list[ProducerEntry]:
        """Entries in the broker's HashMap iteration order (insertion order = first appearance)."""
        by_insertion = sorted(self.producers.values(), key=lambda p: p.insertion)
        order = java_hashmap_order(p.producer_id for p in by_insertion)
        return [self.producers[pid].entry() for pid in order]


def _check_empty_dir(dir: Path) -> None:
    if dir.exists() and (not dir.is_dir() or any(dir.iterdir())):
        raise FileExistsError(f"{dir} exists and is not an empty directory")
    dir.mkdir(parents=True, exist_ok=True)


def _write_sparse(path: Path, data: bytes, size: int) -> None:
    """Entries, then a hole up to ``size``: preallocated like the broker's mmap'd index, without using disk."""
    with open(path, "wb") as f:
        f.write(data)
        f.truncate(max(size, len(data)))


def _assign_epoch(epochs: list[tuple[int, int]], spec: BatchSpec) -> None:
    if spec.partition_leader_epoch >= 0 and (not epochs or spec.partition_leader_epoch > epochs[-1][0]):
        epochs.append((spec.partition_leader_epoch, spec.base_offset))


def _truncate_epochs_from_start(epochs: list[tuple[int, int]], log_start: int) -> list[tuple[int, int]]:
    """LeaderEpochFileCache.truncateFromStart: the epoch holding the log start now starts there."""
    below = [e for e in epochs if e[1] <= log_start]
    kept = [e for e in epochs if e[1] > log_start]
    return ([(below[-1][0], log_start)] if below else []) + kept


def write_partition(
    dir: Path,
    batches: Sequence[BatchSpec],
    config: LogConfig | None = None,
    *,
    clean: bool = True,
    topic_id: str | None = None,
    producer_snapshot: bool = True,
    log_start_offset: int | None = None,
    leader_epochs: list[tuple[int, int]] | None = None,
    roll_at: Sequence[int] = (),
    epoch_cache: bool = True,
) -> PartitionLayout:
    """Write one partition directory (``dir`` must not exist or be empty); see the module doc.

    ``log_start_offset``: segments wholly below it are deleted (not written), as retention or
    DeleteRecords would, and the leader-epoch cache is truncated from the start. ``leader_epochs``
    replaces the epochs derived from the batches (a leader writes epochs that hold no batch too).
    ``roll_at``: base offsets of batches that start a new segment whatever its size (a roll by
    time, by an operator, or by a restart of a broker that had rolled). ``epoch_cache`` False: no
    ``leader-epoch-checkpoint``, as a pre-0.11 broker (no LeaderEpochFileCache) left the partition,
    or a later one whose message format precedes v2 (UnifiedLog deletes the file).
    """
    config = config or LogConfig()
    dir = Path(dir)
    _check_empty_dir(dir)
    segments = [_Segment(batches[0].base_offset if batches else 0, config, dir)]
    locations: list[tuple[int, int, int, BatchSpec]] = []  # (segment index, position, size, spec)
    producers = ProducerState()
    snapshots: dict[int, list[ProducerEntry]] = {}
    epochs: list[tuple[int, int]] = []
    next_offset = segments[0].layout.base_offset
    roll_set = set(roll_at)
    for spec in batches:
        if spec.base_offset < next_offset:
            raise ValueError(f"batch at offset {spec.base_offset} does not follow the previous batch (next offset {next_offset})")
        data = encode_batch(spec)
        forced = spec.base_offset in roll_set and segments[-1].layout.size > 0
        if forced or segments[-1].should_roll(len(data), spec.last_offset):
            active = segments[-1]
            active.maybe_append_time_entry()  # onBecomeInactiveSegment
            segments.append(_Segment(spec.base_offset, config, dir))
            snapshots[spec.base_offset] = producers.snapshot()  # UnifiedLog.roll -> takeSnapshot
        position = segments[-1].append(data, spec)
        locations.append((len(segments) - 1, position, len(data), spec))
        _assign_epoch(epochs, spec)
        aborted = producers.append(spec)
        if aborted:
            segments[-1].layout.aborted_txns.append(aborted)
        next_offset = spec.next_offset
    log_end_offset = next_offset
    if clean:
        segments[-1].maybe_append_time_entry()  # LogSegment.close
        if log_end_offset not in snapshots and log_end_offset > segments[0].layout.base_offset:
            snapshots[log_end_offset] = producers.snapshot()

    log_start = segments[0].layout.base_offset if log_start_offset is None else log_start_offset
    for i, seg in enumerate(segments[:-1]):
        seg.layout.deleted = segments[i + 1].layout.base_offset <= log_start
    first_kept = next(s.layout.base_offset for s in segments if not s.layout.deleted)
    if leader_epochs is None:
        leader_epochs = _truncate_epochs_from_start(epochs, log_start) if log_start_offset is not None else epochs

    for i, seg in enumerate(segments):
        lay = seg.layout
        if lay.deleted:
            continue
        active = i == len(segments) - 1
        lay.log_path.write_bytes(b"".join(seg.chunks))
        idx = offset_index_bytes(lay.base_offset, lay.index_entries)
        tidx = time_index_bytes(lay.base_offset, lay.time_index_entries)
        if active and not clean:
            lay.index_file_size = preallocated_size(config.max_index_bytes, OFFSET_ENTRY_SIZE)
            lay.time_index_file_size = preallocated_size(config.max_index_bytes, TIME_ENTRY_SIZE)
        else:
            lay.index_file_size, lay.time_index_file_size = len(idx), len(tidx)
        _write_sparse(lay.index_path, idx, lay.index_file_size)
        _write_sparse(lay.time_index_path, tidx, lay.time_index_file_size)
        if lay.aborted_txns:
            lay.txn_index_path.write_bytes(txn_index_bytes(lay.aborted_txns))
    if producer_snapshot:
        snapshots = {o: e for o, e in snapshots.items() if o >= first_kept}
        for offset, entries in snapshots.items():
            (dir / segment_file_name(offset, ".snapshot")).write_bytes(producer_snapshot_bytes(entries))
    else:
        snapshots = {}
    if epoch_cache:
        (dir / LEADER_EPOCH_CHECKPOINT_FILE).write_bytes(leader_epoch_checkpoint_bytes(leader_epochs))
    else:
        leader_epochs = []
    if topic_id is not None:
        (dir / PARTITION_METADATA_FILE).write_text(partition_metadata_text(topic_id), encoding="utf-8")

    layouts = [s.layout for s in segments]
    out = [
        BatchLocation(
            n,
            spec.base_offset,
            spec.last_offset,
            layouts[si].base_offset,
            None if layouts[si].deleted else layouts[si].log_path,
            pos,
            size,
        )
        for n, (si, pos, size, spec) in enumerate(locations)
    ]
    return PartitionLayout(dir, out, layouts, log_start, log_end_offset, list(leader_epochs), snapshots, clean)


@dataclass
class PartitionSpec:
    """Everything ``write_partition`` takes besides the directory, for ``write_broker_dir``."""

    batches: Sequence[BatchSpec]
    config: LogConfig | None = None
    topic_id: str | None = None
    producer_snapshot: bool = True
    log_start_offset: int | None = None
    leader_epochs: list[tuple[int, int]] | None = None
    roll_at: Sequence[int] = ()
    clean: bool | None = None  # None: the broker's clean_shutdown
    epoch_cache: bool = True  # False: no leader-epoch-checkpoint (pre-0.11, message format < v2)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def write_broker_dir(
    dir: Path,
    node_id: int,
    cluster_id: str,
    *,
    directory_id: str | None,
    partitions: Mapping[tuple[str, int], Sequence[BatchSpec] | PartitionSpec],
    hw: Mapping[tuple[str, int], int],
    recovery_points: Mapping[tuple[str, int], int],
    log_starts: Mapping[tuple[str, int], int],
    cleaner: Mapping[tuple[str, int], int] | None = None,
    clean_shutdown: bool,
    meta_version: int = 1,
    broker_epoch: int | None = None,
) -> dict[tuple[str, int], PartitionLayout]:
    """One log dir of one broker: its partitions plus meta.properties, the four offset
    checkpoints (cleaner only if given) and ``.kafka_cleanshutdown`` when ``clean_shutdown``
    (empty unless ``broker_epoch``, the 3.7+ form). Returns each partition's layout."""
    dir = Path(dir)
    _check_empty_dir(dir)
    layouts = {}
    for (topic, partition), value in partitions.items():
        spec = value if isinstance(value, PartitionSpec) else PartitionSpec(list(value))
        layouts[(topic, partition)] = write_partition(
            dir / partition_dir_name(topic, partition),
            spec.batches,
            spec.config,
            clean=clean_shutdown if spec.clean is None else spec.clean,
            topic_id=spec.topic_id,
            producer_snapshot=spec.producer_snapshot,
            log_start_offset=spec.log_start_offset,
            leader_epochs=spec.leader_epochs,
            roll_at=spec.roll_at,
            epoch_cache=spec.epoch_cache,
        )
    write_broker_files(
        dir,
        node_id,
        cluster_id,
        directory_id=directory_id,
        hw=hw,
        recovery_points=recovery_points,
        log_starts=log_starts,
        cleaner=cleaner,
        clean_shutdown=clean_shutdown,
        meta_version=meta_version,
        broker_epoch=broker_epoch,
    )
    return layouts


def write_broker_files(
    dir: Path,
    node_id: int,
    cluster_id: str,
    *,
    directory_id: str | None,
    hw: Mapping[tuple[str, int], int],
    recovery_points: Mapping[tuple[str, int], int],
    log_starts: Mapping[tuple[str, int], int],
    cleaner: Mapping[tuple[str, int], int] | None = None,
    clean_shutdown: bool,
    meta_version: int = 1,
    broker_epoch: int | None = None,
) -> None:
    """The broker-level files of a log dir (partitions aside): meta.properties, the offset
    checkpoints (cleaner only if given) and the clean-shutdown marker."""
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    (dir / META_PROPERTIES_FILE).write_text(
        meta_properties_text(node_id, cluster_id, directory_id, meta_version), encoding="utf-8"
    )
    checkpoints = {"replication_offset": hw, "recovery_point": recovery_points, "log_start": log_starts, "cleaner": cleaner}
    for kind, entries in checkpoints.items():
        if entries is not None:
            (dir / OFFSET_CHECKPOINT_FILES[kind]).write_bytes(offset_checkpoint_bytes(dict(entries)))
    if clean_shutdown:
        (dir / CLEAN_SHUTDOWN_FILE).write_bytes(clean_shutdown_bytes(broker_epoch))
