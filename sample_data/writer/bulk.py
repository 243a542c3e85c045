"""Deterministic bulk data for benchmarks: N brokers x P partitions x R records, gigabytes fast.

Why it is fast: every batch of a partition is one of a few *templates* (a record set, encoded
and compressed once by ``records.py``/``compression.py``). A batch differs from its template only
in header fields (base offset, timestamps, sequence), because record offsets and timestamps are
stored as deltas. So a numba kernel writes each header into the segment buffer, copies the
template payload, and gets the CRC-32C without reading the payload again: the CRC of the
40-byte header tail is extended over the payload's length with a precomputed GF(2) "append n
zero bytes" operator and xor-ed with the payload's own CRC (zlib's ``crc32_combine`` method).
Rolls and index entries follow ``LogSegment`` exactly (the same rules as ``log.write_partition``,
in a numba loop), so the output is a realistic log dir, not just a pile of batches.

Run:  python -m sample_data.writer.bulk OUT --brokers 3 --partitions 4 --records 2000000 --codec lz4
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
import numpy as np
from numba import njit

from .checkpoints import LEADER_EPOCH_CHECKPOINT_FILE, leader_epoch_checkpoint_bytes
from .compression import codec_id, compress
from .indexes import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE, preallocated_size
from .log import LogConfig, partition_dir_name, segment_file_name, write_broker_files
from .producer_snapshot import ProducerEntry, producer_snapshot_bytes
from .properties import PARTITION_METADATA_FILE, partition_metadata_text
from .records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    INT_MAX,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    RECORD_BATCH_OVERHEAD,
    BatchSpec,
    Record,
    encode_records,
)

CRC32C_POLY_REFLECTED = 0x82F63B78
T0 = 1_735_689_600_000
CHUNK_BYTES = 64 << 20  # segment bytes built in memory before each write
EVENTS = ("page_view", "click", "add_to_cart", "checkout", "login", "logout", "search", "refund")
FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor " * 4
TAIL_SIZE = RECORD_BATCH_OVERHEAD - ATTRIBUTES_OFFSET  # 40 bytes under the CRC before the records


# ---------------------------------------------------------------------------------- CRC algebra


def _crc_table() -> np.ndarray:
    t = np.zeros(256, dtype=np.uint32)
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ (CRC32C_POLY_REFLECTED if c & 1 else 0)
        t[n] = c
    return t


CRC_TABLE = _crc_table()


def _gf2_times(mat: list[int], vec: int) -> int:
    out, i = 0, 0
    while vec:
        if vec & 1:
            out ^= mat[i]
        vec >>= 1
        i += 1
    return out


def _gf2_square(mat: list[int]) -> list[int]:
    return [_gf2_times(mat, mat[n]) for n in range(32)]


def zeros_operator(n_bytes: int) -> np.ndarray:
    """32 columns of the GF(2) matrix that advances a (reflected) CRC-32C register over n zero bytes."""
    one_bit = [CRC32C_POLY_REFLECTED] + [1 << (k - 1) for k in range(1, 32)]
    op = _gf2_square(_gf2_square(_gf2_square(one_bit)))  # one zero byte
    result = [1 << k for k in range(32)]  # identity
    while n_bytes:
        if n_bytes & 1:
            result = [_gf2_times(op, c) for c in result]
        n_bytes >>= 1
        if n_bytes:
            op = _gf2_square(op)
    return np.array(result, dtype=np.uint32)


def crc32c_combine(crc_a: int, crc_b: int, len_b: int) -> int:
    """CRC-32C of A+B from the CRCs of A and B (used to check the kernel's algebra)."""
    return _gf2_times(list(zeros_operator(len_b)), crc_a) ^ crc_b


# ---------------------------------------------------------------------------------- templates


@dataclass(frozen=True)
class BatchTemplate:
    """One record set, encoded and compressed once; batches reuse it with their own header."""

    payload: bytes  # records section as stored (compressed unless codec none)
    count: int
    raw_len: int  # uncompressed records bytes
    last_offset_delta: int
    max_timestamp_delta: int  # max record timestamp - base timestamp
    codec: str = "none"


def template_from_records(records: Sequence[Record], codec: str = "none") -> BatchTemplate:
    """A template from records whose timestamps are relative to 0 (the batch's base timestamp)."""
    spec = BatchSpec(0, tuple(records), codec=codec, base_timestamp=0)
    raw = encode_records(spec)
    return BatchTemplate(
        compress(codec, raw),
        spec.record_count,
        len(raw),
        spec.computed_last_offset_delta,
        max(r.timestamp for r in records),
        codec,
    )


def json_value(rng: random.Random, seq: int, size: int) -> bytes:
    """A JSON-ish event of exactly ``size`` bytes: compresses about as well as real event data."""
    s = (
        f'{{"seq":{seq},"user":"user-{rng.randrange(10**6):06d}","event":"{rng.choice(EVENTS)}",'
        f'"amount":{rng.random() * 1000:.2f},"session":"{rng.getrandbits(64):016x}","note":"'
    )
    pad = max(0, size - len(s) - 2)
    return (s + FILLER[rng.randrange(40) :][:pad] + '"}').encode()[:size]


def make_templates(
    codec: str, records_per_batch: int, value_size: int, key_size: int, variants: int, seed: int
) -> list[BatchTemplate]:
    """``variants`` record sets of keyed JSON events; record i has offset and timestamp delta i."""
    rng = random.Random(seed)
    out = []
    for _ in range(variants):
        recs = [
            Record(f"user-{rng.randrange(10**12):012d}".encode()[:key_size], json_value(rng, i, value_size), i)
            for i in range(records_per_batch)
        ]
        out.append(template_from_records(recs, codec))
    return out


# ---------------------------------------------------------------------------------- kernels


@njit(cache=True, inline="always")
def _put(buf, p, value, n):
    for k in range(n):
        buf[p + n - 1 - k] = (value >> (8 * k)) & 0xFF


@njit(cache=True)
def _fill(
    out,
    out_start,
    first,
    last,
    positions,
    tmpl,
    base_offsets,
    base_ts,
    seqs,
    payloads,
    p_start,
    p_len,
    p_crc,
    p_ops,
    counts,
    last_deltas,
    ts_deltas,
    attrs,
    epoch,
    pid,
    pepoch,
    table,
):
    """Write batches [first, last) into ``out`` (which starts at file position ``out_start``)."""
    for i in range(first, last):
        t = tmpl[i]
        p = positions[i] - out_start
        n = p_len[t]
        _put(out, p, base_offsets[i], 8)
        _put(out, p + 8, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + n, 4)
        _put(out, p + 12, epoch, 4)
        out[p + 16] = MAGIC_V2
        q = p + ATTRIBUTES_OFFSET
        _put(out, q, attrs, 2)
        _put(out, q + 2, last_deltas[t], 4)
        _put(out, q + 6, base_ts[i], 8)
        _put(out, q + 14, base_ts[i] + ts_deltas[t], 8)
        _put(out, q + 22, pid, 8)
        _put(out, q + 30, pepoch, 2)
        _put(out, q + 32, seqs[i], 4)
        _put(out, q + 36, counts[t], 4)
        out[q + TAIL_SIZE : q + TAIL_SIZE + n] = payloads[p_start[t] : p_start[t] + n]
        crc = np.uint32(0xFFFFFFFF)
        for k in range(q, q + TAIL_SIZE):
            crc = table[(crc ^ out[k]) & 0xFF] ^ (crc >> np.uint32(8))
        crc ^= np.uint32(0xFFFFFFFF)
        shifted = np.uint32(0)
        for k in range(32):
            if (crc >> np.uint32(k)) & np.uint32(1):
                shifted ^= p_ops[t, k]
        _put(out, p + CRC_OFFSET, shifted ^ p_crc[t], 4)


@njit(cache=True)
def _plan(
    sizes,
    max_ts,
    last_offsets,
    segment_bytes,
    interval,
    max_index_entries,
    max_time_entries,
    seg_start,
    index_pos,
    time_flag,
    time_ts,
    time_off,
):
    """LogSegment.shouldRoll/append over all batches: marks segment starts, offset-index entries
    (index_pos = position, else -1) and time-index entries (also the ones added at each roll)."""
    seg_size = 0
    since = 0
    n_idx = 0
    n_time = 0
    max_so_far = -1
    off_of_max = -1
    last_time_ts = -1
    for i in range(sizes.shape[0]):
        size = sizes[i]
        if seg_size > 0 and (seg_size > segment_bytes - size or n_idx >= max_index_entries or n_time >= max_time_entries):
            if max_so_far > last_time_ts:  # onBecomeInactiveSegment: a last time entry for the old segment
                time_flag[i - 1] = 2
                time_ts[i - 1] = max_so_far
                time_off[i - 1] = off_of_max
            seg_start[i] = True
            seg_size = since = n_idx = n_time = 0
            max_so_far = off_of_max = last_time_ts = -1
        if max_ts[i] > max_so_far:
            max_so_far = max_ts[i]
            off_of_max = last_offsets[i]
        if since > interval:
            index_pos[i] = seg_size
            n_idx += 1
            if max_so_far > last_time_ts:
                time_flag[i] = 1
                time_ts[i] = max_so_far
                time_off[i] = off_of_max
                last_time_ts = max_so_far
                n_time += 1
            since = 0
        since += size
        seg_size += size
    return max_so_far, off_of_max, last_time_ts


# ---------------------------------------------------------------------------------- partitions


@dataclass
class SegmentStats:
    path: str
    codec: str
    size: int = 0
    batches: int = 0
    records: int = 0
    raw_bytes: int = 0  # uncompressed record bytes
    batch_size: int = 0  # of the first batch


@dataclass
class PartitionStats:
    dir: Path
    segments: list[SegmentStats] = field(default_factory=list)
    log_end_offset: int = 0
    bytes: int = 0
    records: int = 0


@dataclass
class _Plan:
    tmpl: np.ndarray
    base_offsets: np.ndarray
    base_ts: np.ndarray
    seqs: np.ndarray
    sizes: np.ndarray
    positions: np.ndarray  # in the whole partition's byte stream
    last_offsets: np.ndarray
    max_ts: np.ndarray


class _Templates:
    def __init__(self, templates: Sequence[BatchTemplate]) -> None:
        codecs = {t.codec for t in templates}
        if len(codecs) != 1:
            raise ValueError(f"templates must share one codec, got {sorted(codecs)}")
        self.codec = codecs.pop()
        self.list = list(templates)
        self.payloads = np.frombuffer(b"".join(t.payload for t in templates) or b"\0", dtype=np.uint8)
        self.p_len = np.array([len(t.payload) for t in templates], dtype=np.int64)
        self.p_start = np.concatenate([[0], np.cumsum(self.p_len)[:-1]]).astype(np.int64)
        self.p_crc = np.array([crc32c.crc32c(t.payload) for t in templates], dtype=np.uint32)
        self.p_ops = np.stack([zeros_operator(len(t.payload)) for t in templates])
        self.counts = np.array([t.count for t in templates], dtype=np.int64)
        self.last_deltas = np.array([t.last_offset_delta for t in templates], dtype=np.int64)
        self.ts_deltas = np.array([t.max_timestamp_delta for t in templates], dtype=np.int64)
        self.raw_len = np.array([t.raw_len for t in templates], dtype=np.int64)


def _plan_batches(tp: _Templates, tmpl: np.ndarray, base_offset: int, t0: int, ts_step: int, idempotent: bool) -> _Plan:
    spans = tp.last_deltas[tmpl] + 1
    base_offsets = base_offset + np.concatenate([[0], np.cumsum(spans)[:-1]]).astype(np.int64)
    base_ts = t0 + np.arange(len(tmpl), dtype=np.int64) * ts_step
    seqs = ((base_offsets - base_offset) % (INT_MAX + 1)).astype(np.int64) if idempotent else np.full(len(tmpl), -1, np.int64)
    sizes = RECORD_BATCH_OVERHEAD + tp.p_len[tmpl]
    positions = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    return _Plan(tmpl, base_offsets, base_ts, seqs, sizes, positions, base_offsets + spans - 1, base_ts + tp.ts_deltas[tmpl])


def _fill_range(f, tp: _Templates, plan: _Plan, first: int, last: int, epoch: int, pid: int, pepoch: int) -> None:
    """Write batches [first, last) to ``f`` in chunks of about CHUNK_BYTES."""
    attrs = codec_id(tp.codec)
    i = first
    while i < last:
        start = plan.positions[i]
        j = int(np.searchsorted(plan.positions, start + CHUNK_BYTES, side="left"))
        j = min(max(j, i + 1), last)
        end = plan.positions[j - 1] + plan.sizes[j - 1]
        buf = np.empty(end - start, dtype=np.uint8)
        _fill(buf, start, i, j, plan.positions, plan.tmpl, plan.base_offsets, plan.base_ts, plan.seqs, tp.payloads, tp.p_start,
              tp.p_len, tp.p_crc, tp.p_ops, tp.counts, tp.last_deltas, tp.ts_deltas, attrs, epoch, pid, pepoch, CRC_TABLE)  # fmt: skip
        f.write(memoryview(buf))
        i = j


def write_segment_file(
    path: str | Path,
    templates: Sequence[BatchTemplate],
    target_bytes: int = 0,
    max_batches: int | None = None,
    *,
    base_offset: int = 0,
    t0: int = T0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    partition_leader_epoch: int = 0,
) -> SegmentStats:
    """One bare ``.log`` (no indexes): batch i uses template i % len(templates), base timestamp
    t0 + i, sequences counted from 0 when ``producer_id`` is set; at least ``target_bytes`` or
    exactly ``max_batches`` batches."""
    tp = _Templates(templates)
    if max_batches is None:
        cycle = RECORD_BATCH_OVERHEAD + tp.p_len
        n = int(target_bytes // cycle.sum()) * len(cycle)
        rest = target_bytes - (n // len(cycle)) * int(cycle.sum())
        k = 0
        while rest > 0:
            rest -= int(cycle[k % len(cycle)])
            k += 1
        max_batches = n + k
    tmpl = (np.arange(max_batches) % len(templates)).astype(np.int64)
    plan = _plan_batches(tp, tmpl, base_offset, t0, 1, producer_id != NO_PRODUCER_ID)
    with open(path, "wb") as f:
        _fill_range(f, tp, plan, 0, max_batches, partition_leader_epoch, producer_id, producer_epoch)
    return SegmentStats(
        str(path),
        tp.codec,
        size=int(plan.sizes.sum()),
        batches=max_batches,
        records=int(tp.counts[tmpl].sum()),
        raw_bytes=int(tp.raw_len[tmpl].sum()),
        batch_size=int(plan.sizes[0]) if max_batches else 0,
    )


def write_bulk_partition(
    dir: Path,
    templates: Sequence[BatchTemplate],
    n_batches: int,
    config: LogConfig | None = None,
    *,
    seed: int = 0,
    base_offset: int = 0,
    t0: int = T0,
    ts_step: int = 1,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = 0,
    partition_leader_epoch: int = 0,
    topic_id: str | None = None,
) -> PartitionStats:
    """A partition directory of ``n_batches`` batches (templates picked by a seeded RNG), laid out
    as a cleanly shut down broker leaves it: segments, trimmed indexes, producer snapshots at
    each roll and at the end (when ``producer_id`` is set), leader-epoch-checkpoint."""
    config = config or LogConfig()
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=False)
    tp = _Templates(templates)
    tmpl = np.random.default_rng(seed).integers(0, len(templates), n_batches).astype(np.int64)
    idempotent = producer_id != NO_PRODUCER_ID
    if not idempotent:
        producer_epoch = NO_PRODUCER_EPOCH
    plan = _plan_batches(tp, tmpl, base_offset, t0, ts_step, idempotent)
    seg_start = np.zeros(n_batches, dtype=np.bool_)
    index_pos = np.full(n_batches, -1, dtype=np.int64)
    time_flag = np.zeros(n_batches, dtype=np.int8)
    time_ts = np.zeros(n_batches, dtype=np.int64)
    time_off = np.zeros(n_batches, dtype=np.int64)
    max_idx = preallocated_size(config.max_index_bytes, OFFSET_ENTRY_SIZE) // OFFSET_ENTRY_SIZE
    max_time = preallocated_size(config.max_index_bytes, TIME_ENTRY_SIZE) // TIME_ENTRY_SIZE
    final = _plan(plan.sizes, plan.max_ts, plan.last_offsets, config.segment_bytes, config.index_interval_bytes, max_idx, max_time,
                  seg_start, index_pos, time_flag, time_ts, time_off)  # fmt: skip
    if n_batches and final[0] > final[2]:  # LogSegment.close: a last time entry for the active segment
        time_flag[-1], time_ts[-1], time_off[-1] = 2, final[0], final[1]
    if n_batches:
        seg_start[0] = True
    starts = list(np.flatnonzero(seg_start)) + [n_batches]
    stats = PartitionStats(dir)
    snapshots: list[int] = []
    for a, b in zip(starts, starts[1:]):
        seg_base = int(plan.base_offsets[a])
        pos0 = int(plan.positions[a])
        log = dir / segment_file_name(seg_base, ".log")
        with open(log, "wb") as f:
            _fill_range(f, tp, plan, a, b, partition_leader_epoch, producer_id, producer_epoch)
        sl = slice(a, b)
        idx_sel = np.flatnonzero(index_pos[sl] >= 0) + a
        idx = np.empty(len(idx_sel), dtype=[("rel", ">i4"), ("pos", ">i4")])
        idx["rel"] = plan.last_offsets[idx_sel] - seg_base
        idx["pos"] = index_pos[idx_sel]
        (dir / segment_file_name(seg_base, ".index")).write_bytes(idx.tobytes())
        t_sel = np.flatnonzero(time_flag[sl] > 0) + a
        tix = np.empty(len(t_sel), dtype=[("ts", ">i8"), ("rel", ">i4")])
        tix["ts"] = time_ts[t_sel]
        tix["rel"] = time_off[t_sel] - seg_base
        (dir / segment_file_name(seg_base, ".timeindex")).write_bytes(tix.tobytes())
        size = int(plan.positions[b - 1] + plan.sizes[b - 1] - pos0)
        stats.segments.append(
            SegmentStats(
                str(log),
                tp.codec,
                size,
                b - a,
                int(tp.counts[tmpl[sl]].sum()),
                int(tp.raw_len[tmpl[sl]].sum()),
                int(plan.sizes[a]),
            )
        )
        snapshots.append(b - 1)  # producer state after the segment's last batch: snapshot at the next offset
    stats.log_end_offset = int(plan.last_offsets[-1]) + 1 if n_batches else base_offset
    stats.bytes = sum(s.size for s in stats.segments)
    stats.records = sum(s.records for s in stats.segments)
    if idempotent:
        for i in snapshots:
            spec_last = int(plan.last_offsets[i])
            t = int(tmpl[i])
            entry = ProducerEntry(
                producer_id,
                producer_epoch,
                int((plan.seqs[i] + tp.last_deltas[t]) % (INT_MAX + 1)),
                spec_last,
                int(tp.last_deltas[t]),
                int(plan.max_ts[i]),
            )
            (dir / segment_file_name(spec_last + 1, ".snapshot")).write_bytes(producer_snapshot_bytes([entry]))
    else:
        for i in snapshots:
            (dir / segment_file_name(int(plan.last_offsets[i]) + 1, ".snapshot")).write_bytes(producer_snapshot_bytes([]))
    epochs = [(partition_leader_epoch, base_offset)] if n_batches else []
    (dir / LEADER_EPOCH_CHECKPOINT_FILE).write_bytes(leader_epoch_checkpoint_bytes(epochs))
    if topic_id is not None:
        (dir / PARTITION_METADATA_FILE).write_text(partition_metadata_text(topic_id), encoding="utf-8")
    return stats


def topic_id_for(name: str, seed: int) -> str:
    """A deterministic base64url Uuid for a topic name."""
    import base64
    import hashlib

    return base64.urlsafe_b64encode(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:16]).rstrip(b"=").decode()


@dataclass
class BulkResult:
    root: Path
    brokers: list[Path]
    partitions: dict[tuple[str, int], PartitionStats]
    bytes: int
    seconds: float


def generate(
    out: Path,
    brokers: int = 3,
    partitions: int = 4,
    records: int = 1_000_000,
    *,
    codec: str = "none",
    segment_bytes: int = 128 << 20,
    index_interval_bytes: int = 4096,
    records_per_batch: int = 100,
    value_size: int = 145,
    key_size: int = 12,
    variants: int = 8,
    seed: int = 0,
    topic: str = "bench",
    idempotent: bool = True,
    cluster_id: str = "QmVuY2hDbHVzdGVySWQwMA",
) -> BulkResult:
    """``brokers`` broker dirs (``out/broker-<n>``), each a replica of every partition of
    ``topic`` (replication factor = brokers, all in sync: HW = LEO), ``records`` records per
    partition. The first broker's files are generated; the others are copies."""
    t_start = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes)
    tid = topic_id_for(topic, seed)
    first = out / "broker-1"
    stats: dict[tuple[str, int], PartitionStats] = {}
    for p in range(partitions):
        templates = make_templates(codec, records_per_batch, value_size, key_size, variants, seed * 1000 + p)
        n_batches = -(-records // records_per_batch)
        stats[(topic, p)] = write_bulk_partition(
            first / partition_dir_name(topic, p),
            templates,
            n_batches,
            config,
            seed=seed * 1000 + p,
            producer_id=1000 + p if idempotent else NO_PRODUCER_ID,
            topic_id=tid,
        )
    leo = {tp: s.log_end_offset for tp, s in stats.items()}
    dirs = [first]
    write_broker_files(
        first,
        1,
        cluster_id,
        directory_id=None,
        hw=leo,
        recovery_points=leo,
        log_starts=dict.fromkeys(leo, 0),
        clean_shutdown=True,
    )
    for b in range(2, brokers + 1):
        d = out / f"broker-{b}"
        for tp in stats:
            shutil.copytree(first / partition_dir_name(*tp), d / partition_dir_name(*tp))
        write_broker_files(
            d,
            b,
            cluster_id,
            directory_id=None,
            hw=leo,
            recovery_points=leo,
            log_starts=dict.fromkeys(leo, 0),
            clean_shutdown=True,
        )
        dirs.append(d)
    total = sum(s.bytes for s in stats.values()) * brokers
    return BulkResult(out, dirs, stats, total, time.perf_counter() - t_start)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--records", type=int, default=1_000_000, help="records per partition")
    ap.add_argument("--codec", default="none", choices=("none", "gzip", "snappy", "lz4", "zstd"))
    ap.add_argument("--segment-bytes", type=int, default=128 << 20)
    ap.add_argument("--records-per-batch", type=int, default=100)
    ap.add_argument("--value-size", type=int, default=145)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    r = generate(
        args.out,
        args.brokers,
        args.partitions,
        args.records,
        codec=args.codec,
        segment_bytes=args.segment_bytes,
        records_per_batch=args.records_per_batch,
        value_size=args.value_size,
        seed=args.seed,
    )
    print(
        f"wrote {r.bytes / 1e6:.0f} MB in {r.seconds:.1f} s ({r.bytes / r.seconds / 1e6:.0f} MB/s) under {r.root}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
