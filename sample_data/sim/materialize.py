"""Write a simulated cluster to disk as broker directories (``broker-<id>/``), with the byte-exact
writer in ``sample_data.writer``, then do the byte-level damage the scenario asked for.

What goes to disk is what a broker would have left: the log as held in memory (a kill -9 keeps
the page cache), checkpoint files as **last flushed** (stale after a crash), the leader-epoch
cache (flushed on every change), no ``.kafka_cleanshutdown`` and zero-padded active-segment
indexes for a crashed broker.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path

from sample_data.writer.compression import compress
from sample_data.writer.indexes import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE, offset_index_bytes, time_index_bytes
from sample_data.writer.log import LogConfig, PartitionLayout, PartitionSpec, segment_file_name, write_broker_dir
from sample_data.writer.records import MAGIC_V1, MAGIC_V2, NO_PARTITION_LEADER_EPOCH, BatchSpec, Record, encode_records

from .cluster import Cluster, Size
from .model import Replica, SimBatch, epochs_from_start


def writes_leader_epochs(cluster: Cluster) -> bool:
    """Whether the simulated brokers stamp leader epochs (message format v2, a leader-epoch-checkpoint
    per partition). A cluster that truncates by high watermark is pre-0.11 Kafka (KIP-101 came with
    v2): it writes v1 message sets and no leader-epoch-checkpoint."""
    return cluster.truncation != "hw"


def batch_spec(b: SimBatch, codec: str, cache: dict | None = None, magic: int = MAGIC_V2) -> BatchSpec:
    """The writer's BatchSpec of a simulated batch. Replicas share batch objects, so with ``cache``
    each batch's records are encoded and compressed once, not once per replica."""
    if magic != MAGIC_V2:
        return _legacy_spec(b, codec, magic)
    if cache is None:
        return _batch_spec(b, codec)
    spec = cache.get(id(b))
    if spec is None:
        spec = _batch_spec(b, codec)
        if not b.control:
            spec = replace(spec, stored_payload=compress(codec, encode_records(spec)))
        cache[id(b)] = spec
    return spec


def _batch_spec(b: SimBatch, codec: str) -> BatchSpec:
    if b.control:
        return BatchSpec(
            b.base_offset,
            (),
            b.epoch,
            producer_id=b.producer_id,
            producer_epoch=b.producer_epoch,
            is_transactional=True,
            control=b.control,
            coordinator_epoch=b.coordinator_epoch,
            max_timestamp=b.timestamp,
        )
    return BatchSpec(
        b.base_offset,
        tuple(Record(r.key, r.value, r.timestamp) for r in b.records),
        b.epoch,
        codec=codec,
        producer_id=b.producer_id,
        producer_epoch=b.producer_epoch,
        base_sequence=b.base_sequence,
        is_transactional=b.transactional,
    )


def _legacy_spec(b: SimBatch, codec: str, magic: int) -> BatchSpec:
    """A pre-0.11 message set: the records alone (BatchSpec refuses what v0/v1 cannot hold, so a
    scenario giving such a cluster idempotent or transactional producers fails loudly). zstd came
    with Kafka 2.1 and message format v2: such a cluster compresses with lz4."""
    return BatchSpec(
        b.base_offset,
        tuple(Record(r.key, r.value, r.timestamp) for r in b.records),
        NO_PARTITION_LEADER_EPOCH,
        codec="lz4" if codec == "zstd" else codec,
        producer_id=b.producer_id,
        producer_epoch=b.producer_epoch,
        base_sequence=b.base_sequence,
        is_transactional=b.transactional,
        control=b.control,
        magic=magic,
    )


def _uuid(seed: int, name: str) -> str:
    """A reproducible Kafka Uuid in its base64url form (22 chars)."""
    import base64

    raw = uuid.uuid5(uuid.NAMESPACE_OID, f"{seed}:{name}").bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def materialize(cluster: Cluster, out_dir: Path, size: Size) -> list[dict]:
    """Write every broker dir under ``out_dir``; returns the parser problems the damage must cause
    (``path`` relative to ``out_dir``, ``position``, ``kind``, ``detail``)."""
    out_dir = Path(out_dir)
    config = LogConfig(segment_bytes=size.segment_bytes, index_interval_bytes=size.index_interval_bytes)
    torn = {(d["broker"], d["topic"], d["partition"]): d for d in cluster.damage if d["kind"] == "torn_tail"}
    layouts: dict[tuple[int, str, int], PartitionLayout] = {}
    encoded: dict = {}
    epochs = writes_leader_epochs(cluster)
    magic = MAGIC_V2 if epochs else MAGIC_V1
    for b, broker in sorted(cluster.brokers.items()):
        reps: list[Replica] = [r for (rb, _, _), r in sorted(cluster.replicas.items()) if rb == b]
        parts = {}
        for r in reps:
            batches = list(r.batches)
            if (b, r.topic, r.partition) in torn:
                batches.append(torn[(b, r.topic, r.partition)]["batch"])
            first = batches[0].base_offset if batches else r.log_start
            parts[r.tp] = PartitionSpec(
                [batch_spec(x, size.codec, encoded, magic) for x in batches],
                config,
                topic_id=cluster.topic_ids[r.topic],
                log_start_offset=r.log_start if r.log_start > first else None,
                leader_epochs=epochs_from_start(r.epochs, r.log_start),
                epoch_cache=epochs,
            )
        written = write_broker_dir(
            out_dir / f"broker-{b}",
            b,
            cluster.cluster_id,
            directory_id=_uuid(cluster.seed, f"dir-{b}"),
            partitions=parts,
            hw={r.tp: r.ckpt_hw for r in reps if r.ckpt_hw is not None},
            recovery_points={r.tp: r.ckpt_recovery for r in reps if r.ckpt_recovery is not None},
            log_starts={
                r.tp: r.ckpt_log_start
                for r in reps
                if r.ckpt_log_start is not None and r.batches and r.ckpt_log_start > r.batches[0].base_offset
            },
            cleaner={r.tp: r.cleaner_offset for r in reps if r.cleaner_offset is not None} or None,
            clean_shutdown=broker.clean_marker,
        )
        for tp, lay in written.items():
            layouts[(b, *tp)] = lay
    cluster.layouts = layouts
    quorum = getattr(cluster, "quorum", None)  # a KRaft controller quorum (sample_data.sim.quorum), when the scenario has one
    if quorum is not None:
        quorum.materialize(out_dir, cluster.cluster_id, clean={b: br.clean_marker for b, br in cluster.brokers.items()})
    problems = []
    for d in cluster.damage:
        lay = layouts[(d["broker"], d["topic"], d["partition"])]
        if d["kind"] == "torn_tail":
            problems.append(_tear(lay, out_dir))
        elif d["kind"] == "index_mismatch":
            problems.append(_corrupt_index(lay, out_dir))
        elif d["kind"] == "rolled_before_kill":
            _rolled_before_kill(lay, cluster.replica(d["broker"], d["topic"], d["partition"]))
    return problems


def _rolled_before_kill(lay: PartitionLayout, rep: Replica) -> None:
    """Killed right after a roll (crash-only in the real-cluster fixtures): the old active segment's
    indexes were trimmed by the roll (with its last time-index entry), the new segment has a 0-byte
    .log, no index files yet (created lazily) and a 0-byte .snapshot (the async snapshot never ran)."""
    seg = lay.active_segment
    in_seg = [b for b in rep.batches if seg.base_offset <= b.base_offset < lay.log_end_offset and b.records]
    time_entries = list(seg.time_index_entries)
    if in_seg:
        ts, off = max((max(r.timestamp for r in b.records), b.last_offset) for b in in_seg)
        if not time_entries or ts > time_entries[-1][0]:
            time_entries.append((ts, off))  # onBecomeInactiveSegment: the segment's max timestamp
    seg.index_path.write_bytes(offset_index_bytes(seg.base_offset, seg.index_entries))
    seg.time_index_path.write_bytes(time_index_bytes(seg.base_offset, time_entries))
    for suffix in (".log", ".snapshot"):
        (lay.dir / segment_file_name(lay.log_end_offset, suffix)).write_bytes(b"")


def _tear(lay: PartitionLayout, root: Path) -> dict:
    """Crash mid-append: keep half of the last batch; its index entries were never written."""
    loc = lay.batches[-1]
    keep = max(12, loc.size // 2)
    with open(loc.path, "r+b") as f:
        f.truncate(loc.position + keep)
    seg = next(s for s in lay.segments if s.base_offset == loc.segment_base_offset)
    for path, entries, width, match in (
        (seg.index_path, seg.index_entries, OFFSET_ENTRY_SIZE, lambda e: e[1] == loc.position),
        (seg.time_index_path, seg.time_index_entries, TIME_ENTRY_SIZE, lambda e: loc.base_offset <= e[1] <= loc.last_offset),
    ):
        for slot, e in enumerate(entries):
            if match(e):
                with open(path, "r+b") as f:
                    f.seek(slot * width)
                    f.write(bytes(width * (len(entries) - slot)))
                break
    return {
        "path": str(loc.path.relative_to(root)),
        "position": loc.position,
        "kind": "torn_tail",
        "detail": f"batch {loc.base_offset}..{loc.last_offset} cut to {keep} of {loc.size} bytes",
    }


def _corrupt_index(lay: PartitionLayout, root: Path) -> dict:
    """Overwrite offset-index entry 1 of the first segment with two real entries so that its offset
    repeats entry 0's: OffsetIndex.append would never write that."""
    seg = next(s for s in lay.segments if not s.deleted and len(s.index_entries) >= 2)
    (o0, _), _ = seg.index_entries[0], seg.index_entries[1]
    with open(seg.index_path, "r+b") as f:
        f.seek(OFFSET_ENTRY_SIZE)
        f.write((o0 - seg.base_offset).to_bytes(4, "big"))
    return {
        "path": str(seg.index_path.relative_to(root)),
        "position": OFFSET_ENTRY_SIZE,
        "kind": "index_mismatch",
        "detail": f"entry 1 offset set to entry 0's ({o0})",
    }
