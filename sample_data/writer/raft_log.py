"""A KRaft node's replica of ``__cluster_metadata-0``, as ``KafkaRaftClient`` leaves it on disk.

    control batch     => a v2 RecordBatch with isControl set (not transactional), no producer, stamped
                         with the Raft epoch as its partition leader epoch; each record's
                         key => Version:int16=0 Type:int16 (ControlRecordType), value => the message
                         at its version 0 (ControlRecordUtils.*_CURRENT_VERSION), flexible:
      LeaderChangeMessage (2)  => Version int16 LeaderId int32 Voters [VoterId int32] GrantingVoters [VoterId int32]
      SnapshotHeaderRecord (3) => Version int16 LastContainedLogTimestamp int64
      SnapshotFooterRecord (4) => Version int16
      KRaftVersionRecord (5)   => Version int16 KRaftVersion int16
      VotersRecord (6)         => Version int16 Voters [VoterId int32 VoterDirectoryId uuid
                                  Endpoints [Name string Host string Port uint16]
                                  KRaftVersionFeature {MinSupportedVersion int16 MaxSupportedVersion int16}]
    metadata batch    => records keyless, value = frame (AbstractApiMessageSerde): here NoOpRecord (20)
                         and FeatureLevelRecord (12), the records a quiet controller writes
    snapshot          => <end offset:20>-<epoch:10>.checkpoint: batches from offset 0 at the snapshot's
                         epoch: a control batch (SnapshotHeaderRecord, then with kraft.version 1
                         KRaftVersionRecord and VotersRecord), the state's records, a control batch
                         with SnapshotFooterRecord (RecordsSnapshotWriter)
    quorum-state      => one JSON line (FileQuorumStateStore, QuorumStateDataJsonConverter + data_version)

Written from Kafka 4.1.1's ``raft/`` (``LeaderState.appendStartOfEpochControlRecords``,
``RecordsSnapshotWriter.Builder.build``, ``FileQuorumStateStore``) and the message definitions in
``clients/src/main/resources/common/message``; ``kafka-dump-log --cluster-metadata-decoder`` of
Kafka 4.1.1 judges the bytes (tests/test_metadata_log.py).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from .log import LogConfig, PartitionLayout, write_partition
from .records import CONTROL_MASK, BatchSpec, Record
from .remote_log_metadata import FRAME_VERSION, uvarint

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # Uuid.METADATA_TOPIC_ID (0, 1)
METADATA_DIR = f"{METADATA_TOPIC}-0"
QUORUM_STATE_FILE = "quorum-state"
# ControlRecordType ids of the KRaft control records
LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS = 2, 3, 4, 5, 6
NO_OP_RECORD, FEATURE_LEVEL_RECORD = 20, 12  # metadata record api keys
NOT_VOTED = -1
NO_DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # ReplicaKey.NO_DIRECTORY_ID (Uuid.ZERO_UUID)

_I16, _I32, _I64, _U16 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q"), struct.Struct(">H")
_TAGS = uvarint(0)  # an empty tagged-field section


def _compact(items: Sequence[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def _string(s: str) -> bytes:
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


@dataclass(frozen=True)
class Voter:
    """One voter of a VotersRecord (KIP-853): its id, directory id (16 bytes) and endpoints."""

    voter_id: int
    directory_id: bytes = bytes(16)
    endpoints: tuple[tuple[str, str, int], ...] = (("CONTROLLER", "localhost", 9093),)
    min_kraft_version: int = 0
    max_kraft_version: int = 1


def control_key(control_type: int) -> bytes:
    """``ControlRecordType.recordKey``: version 0, then the type id."""
    return _I16.pack(0) + _I16.pack(control_type)


def leader_change_message(leader_id: int, voters: Sequence[int], granting: Sequence[int]) -> bytes:
    """LeaderChangeMessage v0: what a new leader writes first in its epoch."""
    def voter_list(ids: Sequence[int]) -> bytes:
        return _compact([_I32.pack(v) + _TAGS for v in ids])
    return _I16.pack(0) + _I32.pack(leader_id) + voter_list(voters) + voter_list(granting) + _TAGS


def voters_record(voters: Sequence[Voter]) -> bytes:
    """VotersRecord v0: the whole voter set (KIP-853), written at a reconfiguration or kraft.version upgrade."""
    def one(v: Voter) -> bytes:
        if len(v.directory_id) != 16:
            raise ValueError("a directory id is 16 bytes")
        eps = _compact([_string(n) + _string(h) + _U16.pack(p) + _TAGS for n, h, p in v.endpoints])
        feature = _I16.pack(v.min_kraft_version) + _I16.pack(v.max_kraft_version) + _TAGS
        return _I32.pack(v.voter_id) + v.directory_id + eps + feature + _TAGS
    return _I16.pack(0) + _compact([one(v) for v in voters]) + _TAGS


def kraft_version_record(kraft_version: int) -> bytes:
    """KRaftVersionRecord v0: the kraft.version from this offset on."""
    return _I16.pack(0) + _I16.pack(kraft_version) + _TAGS


def snapshot_header_record(last_contained_log_timestamp: int) -> bytes:
    return _I16.pack(0) + _I64.pack(last_contained_log_timestamp) + _TAGS


def snapshot_footer_record() -> bytes:
    return _I16.pack(0) + _TAGS


def _frame(api_key: int, message: bytes) -> bytes:
    return uvarint(FRAME_VERSION) + uvarint(api_key) + uvarint(0) + message


def no_op_record() -> bytes:
    """A framed NoOpRecord v0: the leader's heartbeat into the log (KIP-835, every 500 ms when idle)."""
    return _frame(NO_OP_RECORD, _TAGS)


def feature_level_record(name: str, level: int) -> bytes:
    """A framed FeatureLevelRecord v0 (``metadata.version`` and the other features)."""
    return _frame(FEATURE_LEVEL_RECORD, _string(name) + _I16.pack(level) + _TAGS)


@dataclass(frozen=True)
class RaftControlBatch(BatchSpec):
    """A control batch of KRaft control records: ``records`` are the control records as stored
    (``control_key`` keys, message values). ``BatchSpec.control`` only knows transaction markers."""

    @cached_property
    def wire_records(self) -> tuple[Record, ...]:
        return self.records

    @property
    def is_control(self) -> bool:
        return True

    @property
    def attributes(self) -> int:
        return CONTROL_MASK  # isControl, not transactional, no compression, CreateTime


def control_batch(base_offset: int, epoch: int, timestamp: int, messages: Sequence[tuple[int, bytes]]) -> RaftControlBatch:
    """One control batch holding ``messages`` ((ControlRecordType id, value) pairs), in order."""
    return RaftControlBatch(base_offset, tuple(Record(control_key(t), v, timestamp) for t, v in messages), partition_leader_epoch=epoch)


def metadata_batch(base_offset: int, epoch: int, timestamp: int, values: Sequence[bytes]) -> BatchSpec:
    """One batch of framed metadata records (keyless), as the controller's BatchAccumulator writes it."""
    return BatchSpec(base_offset, tuple(Record(None, v, timestamp) for v in values), partition_leader_epoch=epoch)


def snapshot_file_name(end_offset: int, epoch: int) -> str:
    """``Snapshots.filenameFromSnapshotId``: end offset to 20 digits, epoch to 10."""
    return f"{end_offset:020d}-{epoch:010d}.checkpoint"


def snapshot_batches(epoch: int, timestamp: int, last_contained_log_timestamp: int, values: Sequence[bytes], *,
                     kraft_version: int = 0, voters: Sequence[Voter] = ()) -> list[BatchSpec]:
    """A snapshot's batches (``RecordsSnapshotWriter``): header, the state's records, footer, from offset 0."""
    if kraft_version == 0 and voters:
        raise ValueError("a voter set is not expected when the kraft.version is 0")
    head: list[tuple[int, bytes]] = [(SNAPSHOT_HEADER, snapshot_header_record(last_contained_log_timestamp))]
    if kraft_version > 0:
        head.append((KRAFT_VERSION, kraft_version_record(kraft_version)))
        if voters:
            head.append((KRAFT_VOTERS, voters_record(voters)))
    out: list[BatchSpec] = [control_batch(0, epoch, timestamp, head)]
    if values:
        out.append(metadata_batch(len(head), epoch, timestamp, values))
    out.append(control_batch(out[-1].next_offset, epoch, timestamp, [(SNAPSHOT_FOOTER, snapshot_footer_record())]))
    return out


def quorum_state_text(leader_id: int, leader_epoch: int, voted_id: int = NOT_VOTED, *, voters: Sequence[int] | None = None,
                      data_version: int = 0, voted_directory_id: str = NO_DIRECTORY_ID) -> str:
    """``quorum-state``: ``QuorumStateDataJsonConverter.write`` (fields in declaration order) plus
    ``data_version``; version 0 (kraft.version 0) lists the static voters, version 1 the voted directory."""
    if data_version == 0:
        state = {"clusterId": "", "leaderId": leader_id, "leaderEpoch": leader_epoch, "votedId": voted_id, "appliedOffset": 0,
                 "currentVoters": [{"voterId": v} for v in (voters or [])]}
    else:
        state = {"leaderId": leader_id, "leaderEpoch": leader_epoch, "votedId": voted_id, "votedDirectoryId": voted_directory_id}
    state["data_version"] = data_version
    return json.dumps(state, separators=(",", ":"))


@dataclass(frozen=True)
class RaftSnapshot:
    """One ``.checkpoint`` of a node: its id (end offset, epoch) and batches (``snapshot_batches``)."""

    end_offset: int
    epoch: int
    batches: tuple[BatchSpec, ...]


def write_metadata_log(log_dir: Path, batches: Sequence[BatchSpec], *, quorum_state: str | None,
                       snapshots: Sequence[RaftSnapshot] = (), log_start_offset: int | None = None, clean: bool = True,
                       config: LogConfig | None = None) -> PartitionLayout:
    """``log_dir/__cluster_metadata-0``: the segments of ``batches`` (``write_partition``: indexes,
    leader-epoch-checkpoint, producer snapshots, partition.metadata with the metadata topic id),
    each snapshot's ``.checkpoint`` and ``quorum-state``. ``log_start_offset``: the log's start
    after ``KafkaMetadataLog`` deleted the segments a snapshot covers (segments wholly below go)."""
    from .records import encode_batch  # (the batch encoder, shared with every other writer)

    lay = write_partition(Path(log_dir) / METADATA_DIR, list(batches), config or LogConfig(), clean=clean,
                          topic_id=METADATA_TOPIC_ID, log_start_offset=log_start_offset)
    for snap in snapshots:
        (lay.dir / snapshot_file_name(snap.end_offset, snap.epoch)).write_bytes(b"".join(encode_batch(b) for b in snap.batches))
    if quorum_state is not None:
        (lay.dir / QUORUM_STATE_FILE).write_text(quorum_state, encoding="utf-8")
    return lay
