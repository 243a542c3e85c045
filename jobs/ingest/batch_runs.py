"""Runs of contiguous batches: what a piece of a segment says about its replica's log, in a few rows.

Why at ingest: every question the jobs ask of a replica's batches but the record-level ones
(where its log starts and ends, its contiguous ranges and holes, each leader epoch's first and
last offset, each segment's span, which replicas hold the same batches) is a property of runs of
batches that continue one another (each batch starts at the previous one's last offset + 1) in
one leader epoch. Asked of the batches in Spark, each was a pass over one row per batch, and
deep partitions hold millions of batches (a 1 GiB segment of small batches is ~900,000): the
jobs phase cost several times the ingest. Here the task that parsed the batches sums them into
runs with a few numpy calls over columns it already holds, and the jobs read one row per run.

A run never spans two pieces, so one replica's runs still need joining across pieces and
segments: the jobs do that with the same gaps-and-islands rule over runs that they used over
batches (``jobs.replicas.offset_ranges.islands``); breaking a run earlier than needed is
harmless, the join merges it back. Batches are taken in (base offset, position) order, the
order the jobs use.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from jobs.store.tables import BATCH_RUN_SCHEMA

_MASK31 = np.uint64(0x7FFFFFFF)
_SEEDS = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xD1B54A32D192ED03))


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: every input bit moves every output bit (uint64, wrapping)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def digest_parts(base: np.ndarray, last: np.ndarray, crc: np.ndarray) -> list[np.ndarray]:
    """Four 31-bit slices of two 64-bit hashes of each batch's (base offset, last offset, CRC).

    Summed per replica (a multiset hash: order-free, so runs and tasks can be summed in any
    order), they make ``replica_logs.batch_digest``: replicas with equal digests hold the same
    batches, which the comparison then never joins batch by batch. 31-bit slices summed over
    fewer than 2^32 batches cannot overflow a long (Spark's ANSI mode fails a query on that)."""
    with np.errstate(over="ignore"):
        b, e, c = (a.astype(np.int64).view(np.uint64) for a in (base, last, crc))
        out = []
        for seed in _SEEDS:
            h = _mix(_mix(_mix(b ^ seed) ^ e) ^ c)
            out += [(h & _MASK31).view(np.int64), ((h >> np.uint64(31)) & _MASK31).view(np.int64)]
    return out


def runs_of(batches: pa.Table) -> pa.Table:
    """The runs of one piece's batches (``BATCH_RUN_SCHEMA`` without the common columns): a run
    breaks where a batch does not start at the previous one's last offset + 1, or where the leader
    epoch changes (null, v0/v1, is its own epoch here). Per run: its offsets, epoch, counts, bytes,
    the first batch's position, timestamps, magic range, record holes and digest parts."""
    n = batches.num_rows
    if n == 0:
        return BATCH_RUN_SCHEMA.empty_table()

    def col(name: str, fill=0) -> np.ndarray:
        return batches.column(name).fill_null(fill).to_numpy()

    base, last, position = col("base_offset"), col("last_offset"), col("position")
    order = np.lexsort((position, base))
    if (order[1:] < order[:-1]).any():
        base, last, position = base[order], last[order], position[order]
    else:
        order = None

    def take(name: str, fill=0) -> np.ndarray:
        a = col(name, fill)
        return a if order is None else a[order]

    epoch_valid = batches.column("partition_leader_epoch").is_valid().to_numpy(zero_copy_only=False)
    if order is not None:
        epoch_valid = epoch_valid[order]
    epoch = np.where(epoch_valid, take("partition_leader_epoch", -1), -1).astype(np.int64)
    brk = np.ones(n, dtype=bool)
    brk[1:] = (base[1:] != last[:-1] + 1) | (epoch[1:] != epoch[:-1]) | (epoch_valid[1:] != epoch_valid[:-1])
    starts = np.flatnonzero(brk)
    ends = np.append(starts[1:], n) - 1

    count = take("record_count").astype(np.int64)
    control = take("is_control", False).astype(bool)
    magic = take("magic").astype(np.int8)
    max_ts = take("max_timestamp").astype(np.int64)
    readable = take("crc_valid", True).astype(bool)
    holes = magic == 2
    gap = (last - base + 1) > count

    def total(a: np.ndarray) -> np.ndarray:
        return np.add.reduceat(a, starts)

    parts = digest_parts(base, last, take("crc"))
    v2 = total(holes.astype(np.int64))
    return pa.Table.from_arrays([
        pa.array(base[starts]),
        pa.array(np.maximum.reduceat(last, starts)),
        pa.array(last[ends]),
        pa.array(base[ends]),
        pa.array(epoch[starts].astype(np.int32), mask=~epoch_valid[starts]),
        pa.array(position[starts]),
        pa.array((ends - starts + 1).astype(np.int64)),
        pa.array(total(np.where(control, 0, count))),
        pa.array(total(np.where(control, count, 0))),
        pa.array(total(count)),
        pa.array(total(take("size").astype(np.int64))),
        pa.array(np.minimum.reduceat(max_ts, starts)),
        pa.array(np.maximum.reduceat(max_ts, starts)),
        pa.array(np.minimum.reduceat(magic, starts)),
        pa.array(np.maximum.reduceat(magic, starts)),
        pa.array(total((holes & gap).astype(np.int64)) > 0, mask=v2 == 0),
        pa.array(total(readable.astype(np.int64))),
        *[pa.array(total(np.where(readable, p, 0))) for p in parts],
    ], schema=BATCH_RUN_SCHEMA)
