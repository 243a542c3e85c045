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

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

INFO_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("base_offset", pa.int64()),  # from the file name; null if it has none
        pa.field("file_size", pa.int64()),
        pa.field("kafka_entries", pa.int64()),  # length / entry size: what Kafka's index class counts
        pa.field("entries", pa.int64()),  # real entries (rows in the entry table)
        pa.field("padding_entries", pa.int64()),  # trailing all-zero slots (preallocation)
        pa.field("torn_bytes", pa.int64()),  # length % entry size
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


def info_table(path: str, base_offset: int | None, size: int, lay: Layout) -> pa.Table:
    """The one-row ``index_info`` table (Parsed.extra) for an index file."""
    return pa.table(
        {
            "path": [path],
            "base_offset": pa.array([base_offset], pa.int64()),
            "file_size": pa.array([size], pa.int64()),
            "kafka_entries": pa.array([lay.n_slots], pa.int64()),
            "entries": pa.array([lay.n_real], pa.int64()),
            "padding_entries": pa.array([lay.padding], pa.int64()),
            "torn_bytes": pa.array([lay.torn_bytes], pa.int64()),
        },
        schema=INFO_SCHEMA,
    )


def padding_entries(parsed: object) -> int:
    """Trailing zero-padding slots of a parsed index (0 when not an index)."""
    extra = getattr(parsed, "extra", {}) or {}
    info = extra.get("index_info")
    if info is None or info.num_rows == 0:
        return 0
    return int(info["padding_entries"][0].as_py())
