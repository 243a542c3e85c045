"""Group-by on the driver over Arrow columns: what the job tables built from ingest's summaries
(``batch_runs``: a few rows per segment; files, checkpoints: a few per replica) need, with
Spark's null semantics, in numpy.

Why not Spark: those tables' rows are proportional to segments and replicas, never to batches,
and a Spark query over them cost ~0.5-1 CPU-second of planning, code generation and scheduling
whatever its rows (a deep partition's jobs phase was mostly that fixed cost, docs/design.md).
Why not ``pyarrow.Table.group_by``: it has no ``min_by``/``max_by`` and no running windows.

Rows are sorted by their key once (``Groups``); every aggregate is then one ``reduceat`` over
the sorted column. As in Spark, a null key is a key of its own (nulls group together), and an
aggregate over no non-null value is null.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def values(col: pa.ChunkedArray | pa.Array, fill=0) -> tuple[np.ndarray, np.ndarray]:
    """(values with nulls filled, validity) of an Arrow column, as numpy arrays."""
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    return col.fill_null(fill).to_numpy(zero_copy_only=False), np.asarray(valid, dtype=bool)


def codes(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An int64 code per value that is equal where the values are (null: -1): strings and
    numbers alike, for sorting rows into groups (the codes' order is not the values')."""
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        # (one array first: a chunked column's chunks would each get a dictionary of their own)
        enc = pc.dictionary_encode(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
        return enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    v, ok = values(col)
    # (two columns: the value, and whether it is null, kept apart by a stride of 2)
    return np.where(ok, v.astype(np.int64), 0) * 2 + ok


def changes(cols: list[np.ndarray], n: int) -> np.ndarray:
    """Per row, whether it opens a run of equal keys (``codes`` columns, rows in their order)."""
    brk = np.zeros(n, dtype=bool)
    brk[:1] = True
    for c in cols:
        brk[1:] |= c[1:] != c[:-1]
    return brk


class Groups:
    """The rows of ``table`` grouped by ``keys``: ``order`` sorts them by key, ``starts`` are the
    first sorted row of each group, ``first`` the table's rows that open each group (their keys)."""

    def __init__(self, table: pa.Table, keys: list[str]) -> None:
        self.n = table.num_rows
        cols = [codes(table.column(k)) for k in keys]
        self.order = np.lexsort(cols[::-1]) if cols else np.arange(self.n)
        brk = changes([c[self.order] for c in cols], self.n)
        self.starts = np.flatnonzero(brk) if self.n else np.array([], dtype=np.int64)
        self.first = self.order[self.starts]
        self.id = np.cumsum(brk) - 1  # the group of each sorted row

    def __len__(self) -> int:
        return len(self.starts)

    def keys(self, table: pa.Table, names: list[str]) -> list[pa.Array]:
        """Columns ``names`` of each group's first row (its key)."""
        idx = pa.array(self.first, pa.int64())
        return [table.column(n).take(idx).combine_chunks() if isinstance(table.column(n), pa.ChunkedArray)
                else table.column(n).take(idx) for n in names]

    def _sorted(self, col, fill) -> tuple[np.ndarray, np.ndarray]:
        v, ok = values(col, fill)
        return v[self.order], ok[self.order]

    def count(self, valid: np.ndarray) -> np.ndarray:
        """Per group, how many rows ``valid`` marks (a boolean per table row)."""
        if not len(self):
            return np.zeros(0, dtype=np.int64)
        return np.add.reduceat(valid[self.order].astype(np.int64), self.starts)

    def _reduce(self, ufunc, col, fill, dtype, where=None) -> pa.Array:
        v, ok = self._sorted(col, fill)
        if where is not None:
            ok = ok & where[self.order]
        v = np.where(ok, v, fill).astype(dtype)
        if not len(self):
            return pa.array(np.zeros(0, dtype=dtype), mask=np.zeros(0, dtype=bool))
        out = ufunc.reduceat(v, self.starts)
        return pa.array(out, mask=np.add.reduceat(ok.astype(np.int64), self.starts) == 0)

    def sum(self, col, where=None) -> pa.Array:
        """Spark's ``sum``: null for a group with no non-null value (``where``: only those rows)."""
        return self._reduce(np.add, col, 0, np.int64, where)

    def min(self, col, dtype=np.int64, where=None) -> pa.Array:
        return self._reduce(np.minimum, col, np.iinfo(dtype).max, dtype, where)

    def max(self, col, dtype=np.int64, where=None) -> pa.Array:
        return self._reduce(np.maximum, col, np.iinfo(dtype).min, dtype, where)

    def any(self, col) -> pa.Array:
        """Spark's ``max`` of a boolean column: null where every value is."""
        v, ok = self._sorted(col, False)
        if not len(self):
            return pa.array([], pa.bool_())
        out = np.add.reduceat((v.astype(bool) & ok).astype(np.int64), self.starts) > 0
        return pa.array(out, mask=np.add.reduceat(ok.astype(np.int64), self.starts) == 0)

    def pick(self, col: pa.ChunkedArray | pa.Array, by, highest: bool) -> pa.Array:
        """Spark's ``min_by``/``max_by`` (``highest``): ``col`` at the row of each group's lowest
        (highest) ``by``, rows with a null ``by`` left out; null for a group without one. On a tie
        the first such row in table order (Spark takes the first it meets, an order it does not define)."""
        b, ok = values(by)
        b = b.astype(np.int64)
        rows = np.arange(self.n)
        gid = np.empty(self.n, dtype=np.int64)
        gid[self.order] = self.id
        key = -b if highest else b
        o = np.lexsort((rows, key, ~ok, gid))  # per group: rows with a value first, best first
        first = np.ones(self.n, dtype=bool)
        first[1:] = gid[o][1:] != gid[o][:-1]
        chosen = o[first]
        has = ok[chosen]
        taken = (col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col).take(pa.array(chosen, pa.int64()))
        return pc.if_else(pa.array(has), taken, pa.nulls(len(chosen), taken.type))

    def first_of(self, col, where: np.ndarray) -> pa.Array:
        """``col`` at the first row (table order) of each group that ``where`` marks; null without one."""
        rows = np.arange(self.n)
        gid = np.empty(self.n, dtype=np.int64)
        gid[self.order] = self.id
        o = np.lexsort((rows, ~where, gid))
        first = np.ones(self.n, dtype=bool)
        first[1:] = gid[o][1:] != gid[o][:-1]
        chosen = o[first]
        taken = (col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col).take(pa.array(chosen, pa.int64()))
        return pc.if_else(pa.array(where[chosen]), taken, pa.nulls(len(chosen), taken.type))


def stack(parts: list[pa.Table]) -> pa.Table:
    """Tables with some columns in common, one under the other, a column a part lacks null in its
    rows (Spark's ``unionByName(allowMissingColumns=True)``)."""
    return pa.concat_tables(parts, promote_options="default")
