"""What the fixed-width index files share: ``AbstractIndex`` (entry count, torn tail, padding).

Kafka opens an index with ``entries = length / entrySize`` and never looks at a partial
trailing entry except in ``sanityCheck``. An active segment's index is preallocated to
``segment.index.bytes`` (10 MiB by default) and filled with zeros; a clean roll or shutdown
trims it, a crash leaves the zeros. ``OffsetIndex`` then counts every zero slot as an entry
(offset = base offset, position 0) and ``kafka-dump-log`` stops at the first one after
slot 0. We treat the trailing run of all-zero entries as padding: benign, not a problem,
kept out of the entry table, counted in an ``index_info`` row.

Slot 0 belongs to that run too when it is all zeros: Kafka never indexes a segment's first
batch (``LogSegment.append`` only adds an entry once more than ``index.interval.bytes`` have
been appended since the last one), so an entry (base offset, position 0) cannot be real, and
a file of nothing but zeros has no entries. ``kafka-dump-log`` would print that one phantom
entry; we do not.

An all-zero entry *before* a non-zero one is not padding but a hole (zeroed pages in the
middle of a written index); the index parsers keep those rows, flagged ``is_padding``, and
report them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .common import Parsed, Problem, empty_table, problems_at, problems_table
from .names import base_offset_from_name

INFO_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("base_offset", pa.int64()),  # from the file name; null if it has none
        pa.field("file_size", pa.int64()),
        pa.field("kafka_entries", pa.int64()),  # length / entry size: what Kafka's index class counts
        pa.field("entries", pa.int64()),  # real entries (rows in the entry table)
        pa.field("padding_entries", pa.int64()),  # trailing all-zero slots (preallocation)
        pa.field("torn_bytes", pa.int64()),  # length % entry size
        # the highest position > 0 of its real entries (an offset index's byte in the segment);
        # null for an index without positions or none above 0. Why: whether an entry points past
        # its segment's end is one comparison per index file then (``damage.index_past_eof_findings``),
        # not one per entry (an entry per 4 KB of log)
        pa.field("max_position", pa.int64()),
    ]
)


@dataclass(frozen=True)
class Layout:
    """How a file of fixed-size entries splits up."""

    n_slots: int  # complete entries (Kafka's entries())
    n_real: int  # slots before the trailing all-zero run
    torn_bytes: int  # bytes of a partial entry at the end

    @property
    def padding(self) -> int:
        return self.n_slots - self.n_real


def layout(raw: np.ndarray, entry_size: int) -> Layout:
    """Split a uint8 view of the file into real entries, padding and a torn tail.

    Vectorised: one reshape and one ``any`` over all slots.
    """
    n_slots = raw.size // entry_size
    torn = raw.size - n_slots * entry_size
    if n_slots == 0:
        return Layout(0, 0, torn)
    nonzero = raw[: n_slots * entry_size].reshape(n_slots, entry_size).any(axis=1)
    hits = np.flatnonzero(nonzero)
    n_real = int(hits[-1]) + 1 if hits.size else 0
    return Layout(n_slots, n_real, torn)


def as_uint8(data: bytes | memoryview) -> np.ndarray:
    """A zero-copy uint8 view of bytes, memoryview or mmap."""
    return np.frombuffer(data, dtype=np.uint8) if len(data) else np.zeros(0, np.uint8)


def info_table(path: str, base_offset: int | None, size: int, lay: Layout, max_position: int | None = None) -> pa.Table:
    """The one-row ``index_info`` table (Parsed.extra) for an index file.

    Built from one int64 array sliced per column: ``pa.array`` of a Python list costs ~2.5 µs a
    call (it reads an environment variable each time), and a collection of many partitions has
    two index files in each (7 such calls were ~50 µs of a ~100 µs empty index)."""
    ints = pa.array(np.array([base_offset or 0, size, lay.n_slots, lay.n_real, lay.padding, lay.torn_bytes], np.int64))
    base = ints.slice(0, 1) if base_offset is not None else pa.nulls(1, pa.int64())
    top = pa.nulls(1, pa.int64()) if max_position is None else pa.array(np.array([max_position], np.int64))
    return pa.Table.from_arrays([pa.array([path], pa.string()), base, *(ints.slice(i, 1) for i in range(1, 6)), top],
                                schema=INFO_SCHEMA)


def parse_index(
    data: bytes | memoryview,
    path: str,
    base_offset: int | None,
    dtype: np.dtype,
    schema: pa.Schema,
    sanity_check: Callable[[pa.Table, int, int], list[Problem]],
) -> Parsed:
    """Decode an index of ``dtype`` entries into ``schema``; never raises.

    ``dtype`` has a ``relative_offset`` field; the table gets ``path``, ``slot``, ``offset``
    (base offset + relative offset), ``relative_offset``, every other field as int64 and
    ``is_padding`` (an all-zero entry). ``base_offset`` defaults to the one in the file name
    (0 when the name has none, as for a renamed copy; pass it explicitly then).
    ``sanity_check(table, base offset, length)`` gives the problems.
    """
    if base_offset is None:
        base_offset = base_offset_from_name(os.path.basename(path))
    base = 0 if base_offset is None else base_offset
    raw = as_uint8(data)
    lay = layout(raw, dtype.itemsize)
    n = lay.n_real
    max_position = None
    if n == 0:
        table = empty_table(schema)  # (most index files of a many-partition collection)
    else:
        entries = np.frombuffer(raw[: n * dtype.itemsize].tobytes(), dtype=dtype)
        relative = entries["relative_offset"].astype(np.int32)
        others = {name: entries[name].astype(np.int64) for name in dtype.names if name != "relative_offset"}
        columns = {
            "path": pa.array([path] * n, pa.string()),
            "slot": pa.array(np.arange(n, dtype=np.int32)),
            "offset": pa.array(relative.astype(np.int64) + base),
            "relative_offset": pa.array(relative),
            "is_padding": pa.array(np.logical_and.reduce([relative == 0, *(v == 0 for v in others.values())])),
        }
        columns.update((name, pa.array(v)) for name, v in others.items())
        table = pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)
        if "position" in others:
            position = others["position"]
            real = ~table.column("is_padding").to_numpy(zero_copy_only=False) & (position > 0)
            max_position = int(position[real].max()) if real.any() else None
    return Parsed(
        table,
        problems_table(path, sanity_check(table, base, raw.size)),
        extra={"index_info": info_table(path, base_offset, raw.size, lay, max_position)},
    )


def padding_entries(parsed: object) -> int:
    """Trailing zero-padding slots of a parsed index (0 when not an index)."""
    extra = getattr(parsed, "extra", {}) or {}
    info = extra.get("index_info")
    if info is None or info.num_rows == 0:
        return 0
    return int(info["padding_entries"][0].as_py())


def sanity_problems(
    table: pa.Table,
    base_offset: int,
    length: int,
    *,
    entry_size: int,
    kind: str,
    torn_note: str,
    hole_note: str,
    below_note: str,
    increasing: Sequence[tuple[str, bool]],
    backwards_note: Callable[[int, np.ndarray], str],
) -> list[Problem]:
    """The checks every fixed-width index shares, over all entries; sorted by position.

    ``table`` needs ``slot``, ``offset``, ``is_padding`` and the ``increasing`` columns.
    Reported: a torn tail (``length`` not a multiple of ``entry_size``), each zeroed hole,
    each real entry whose offset is below ``base_offset``, and each real entry that goes
    backwards from the previous real one in an ``increasing`` column. For a column named
    with ``strict`` True an equal value is backwards too ("is not greater than"), else only
    a smaller one ("is less than"). The notes end the detail texts:
    ``torn_note`` after "... a partial entry ", ``hole_note`` after "... a zeroed hole in the ",
    ``below_note`` after "... below the base offset N" and ``backwards_note(b, real)`` (``b``
    the entry's row, ``real`` the rows of real entries) after the reasons for going backwards.
    Vectorised; Python only touches the offending entries.
    """
    problems: list[Problem] = []
    torn = length % entry_size
    if torn:
        problems.append(
            Problem(
                length - torn,
                kind,
                f"{length} bytes, not a multiple of {entry_size}: the last {torn} bytes are a"
                f" partial entry {torn_note}",
            )
        )
    if table.num_rows == 0:
        return problems
    slot = table["slot"].to_numpy()
    offset = table["offset"].to_numpy()
    hole = table["is_padding"].to_numpy(zero_copy_only=False)

    def at(i: int) -> int:
        return int(slot[i]) * entry_size

    problems += problems_at(
        np.flatnonzero(hole),
        at,
        kind,
        lambda i: f"entry {slot[i]} is all zeros but real entries follow it: a zeroed hole in the {hole_note}",
    )
    real = np.flatnonzero(~hole)
    problems += problems_at(
        real[offset[real] < base_offset],
        at,
        kind,
        lambda i: f"entry {slot[i]} has offset {offset[i]}, below the base offset {base_offset}{below_note}",
    )
    if real.size >= 2:
        prev, cur = real[:-1], real[1:]
        columns = [(name, table[name].to_numpy(), strict) for name, strict in increasing]
        down = [v[cur] <= v[prev] if strict else v[cur] < v[prev] for _, v, strict in columns]
        for k in np.flatnonzero(np.logical_or.reduce(down)):
            a, b = prev[k], cur[k]
            what = [
                f"{name} {v[b]} is {'not greater than' if strict else 'less than'} {v[a]}"
                for (name, v, strict), d in zip(columns, down)
                if d[k]
            ]
            problems.append(
                Problem(
                    at(b),
                    kind,
                    f"entry {slot[b]} goes backwards from entry {slot[a]}: {' and '.join(what)}"
                    f"{backwards_note(b, real)}",
                )
            )
    problems.sort(key=lambda p: p.position)
    return problems


def real_entries(index: pa.Table) -> pa.Table:
    """An index table without its zeroed-hole rows (``is_padding``), when it has that column."""
    return index.filter(pc.invert(index["is_padding"])) if "is_padding" in index.column_names else index
