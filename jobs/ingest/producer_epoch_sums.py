"""Per producer epoch, sums of its batches' sequence numbers: what a piece of a segment says about
idempotent and transactional producers, in a row per producer epoch.

Why at ingest: the producers detector (``jobs.findings.producers.producer_epochs``) asks of every
batch of every producer epoch whether its sequences chain (no sequence written twice) and where
its last transaction marker and transactional data are. Those answers are sums, minima and
maxima over the epoch's batches, so they break down into per-piece partial ones that add up. Asked
of the batches in Spark, that was one aggregate fed by every batch of a deep partition (~700,000
batches at 100 MB of small batches of an idempotent producer), the biggest part of the jobs
phase; here the task that parsed the batches sums them with a few numpy calls over columns it
already holds, and the detector reads one row per piece and producer epoch
(``jobs.findings.producers.local_producer_epochs``).

The hash of a sequence number is our own (splitmix64's finalizer, as ``batch_runs``' digests):
the detector only compares sums of hashes for equality, so any 64-bit hash that mixes every bit
gives the same answer; the driver hashes the epoch's lowest and highest sequence with the same
``sequence_hash_slices``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from jobs.ingest.batch_runs import _mix
from jobs.store.tables import PRODUCER_EPOCH_SUM_SCHEMA

_MASK31 = np.uint64(0x7FFFFFFF)
_SEED = np.uint64(0x2545F4914F6CDD1D)


def sequence_hash_slices(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two 31-bit slices (int64) of a 64-bit hash of each of ``x`` (longs): summed over fewer than
    2^32 batches they cannot overflow a long."""
    with np.errstate(over="ignore"):
        h = _mix(x.astype(np.int64).view(np.uint64) ^ _SEED)
        return (h & _MASK31).view(np.int64), ((h >> np.uint64(31)) & _MASK31).view(np.int64)


def _flag(batches: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    col = batches.column(name)
    return (col.fill_null(False).to_numpy(zero_copy_only=False).astype(bool),
            np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool))


def sums_of(batches: pa.Table) -> pa.Table:
    """One row per producer epoch (producer id >= 0) of one piece's batches
    (``PRODUCER_EPOCH_SUM_SCHEMA`` without the common columns), with Spark's null semantics of the
    aggregate it replaces: a data batch is a non-control batch with a base sequence >= 0 (its
    sequences go into the sums), a marker a control batch, transactional data a transactional
    non-control batch; a null flag counts as neither."""
    pid = batches.column("producer_id")
    keep = pid.is_valid().to_numpy(zero_copy_only=False) & (pid.fill_null(-1).to_numpy(zero_copy_only=False) >= 0)
    if not keep.any():
        return PRODUCER_EPOCH_SUM_SCHEMA.empty_table()
    idx = np.flatnonzero(keep)
    b = batches.take(pa.array(idx, pa.int64()))
    pid = b.column("producer_id").to_numpy(zero_copy_only=False).astype(np.int64)
    epoch_col = b.column("producer_epoch")
    epoch_ok = np.asarray(epoch_col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    epoch = epoch_col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    n = len(pid)
    if (pid == pid[0]).all() and (epoch == epoch[0]).all() and (epoch_ok == epoch_ok[0]).all():
        order = np.arange(n)  # (one producer epoch, a piece's usual case: no sort)
    else:
        order = np.lexsort((epoch, epoch_ok, pid))
        pid, epoch, epoch_ok = pid[order], epoch[order], epoch_ok[order]
    brk = np.ones(n, dtype=bool)
    brk[1:] = (pid[1:] != pid[:-1]) | (epoch_ok[1:] != epoch_ok[:-1]) | (epoch[1:] != epoch[:-1])
    starts = np.flatnonzero(brk)

    def col(name: str, fill=0) -> tuple[np.ndarray, np.ndarray]:
        c = b.column(name)
        return (c.fill_null(fill).to_numpy(zero_copy_only=False)[order].astype(np.int64),
                np.asarray(c.is_valid().to_numpy(zero_copy_only=False), dtype=bool)[order])

    control, control_ok = (a[order] for a in _flag(b, "is_control"))
    txn, txn_ok = (a[order] for a in _flag(b, "is_transactional"))
    base, base_ok = col("base_sequence")
    last, last_ok = col("last_sequence")
    offset, offset_ok = col("base_offset")
    data = control_ok & ~control & base_ok & (base >= 0)
    # (Spark: null + 1 is null, and a null is left out of sum, min and max)
    end_ok = data & last_ok
    end = last + 1
    span_ok = data & base_ok & last_ok
    marker = control_ok & control & offset_ok
    txn_data = txn_ok & txn & control_ok & ~control & offset_ok

    def reduce(ufunc, v: np.ndarray, ok: np.ndarray, fill: int) -> pa.Array:
        out = ufunc.reduceat(np.where(ok, v, fill), starts)
        return pa.array(out, pa.int64(), mask=np.add.reduceat(ok.astype(np.int64), starts) == 0)

    lo, hi = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    b_slices, e_slices = sequence_hash_slices(base), sequence_hash_slices(end)
    return pa.Table.from_arrays([
        pa.array(pid[starts]),
        pa.array(epoch[starts].astype(np.int16), mask=~epoch_ok[starts]),
        pa.array(np.add.reduceat(data.astype(np.int64), starts)),
        reduce(np.minimum, base, data, lo),
        reduce(np.maximum, end, end_ok, hi),
        reduce(np.minimum, end - base, span_ok, lo),
        reduce(np.add, base, data, 0),
        reduce(np.add, end, end_ok, 0),
        *[reduce(np.add, s, data, 0) for s in b_slices],
        *[reduce(np.add, s, end_ok, 0) for s in e_slices],
        reduce(np.maximum, offset, marker, hi),
        reduce(np.maximum, offset, txn_data, hi),
    ], schema=PRODUCER_EPOCH_SUM_SCHEMA)
