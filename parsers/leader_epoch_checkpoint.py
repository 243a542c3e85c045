"""A partition's ``leader-epoch-checkpoint``: ``LeaderEpochCheckpointFile`` over ``CheckpointFile``.

    LeaderEpochCheckpointFile => Version:"0" EntryCount Entry*     (one text line each)
      Entry                   => Epoch:int32 \\s+ StartOffset:int64

Each entry says "leader epoch E started at offset S". The file is written from
``LeaderEpochFileCache``, which keeps epochs and start offsets strictly increasing, so a file
that is not is damaged (or was edited).

What Kafka does with a non-monotonic file is the surprise: the checkpoint reader returns every
entry, and ``LeaderEpochFileCache`` then feeds them to ``assign`` one by one, which silently
deletes every earlier entry whose epoch or start offset is not below the new one. The golden
corrupt cases show it: (0,0),(3,31),(1,49) is kept as 0:0, 1:49 and (0,0),(1,49),(3,31) as
0:0, 3:31. Nothing is logged above WARN and nothing fails. We report each entry that breaks
monotonicity as ``leader_epoch_malformed`` (position = its 1-based line) and keep the file's
entries as written; :func:`kafka_cache_view` gives what the broker's cache would have kept.

Format faults (version, count, malformed line, non-numeric field) are reported exactly as in
offset_checkpoint.py, also as ``leader_epoch_malformed``, keeping the entries that parsed.
An empty file, or ``0``/``0`` (no epochs, e.g. a v0/v1-format partition), is valid.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .checkpoint_file import check_count, entries_table, read_checkpoint_text
from .common import Parsed, Problem, empty_table, problems_table

CURRENT_VERSION = 0  # LeaderEpochCheckpointFile.CURRENT_VERSION
FILE_KIND = "leader_epoch"
PROBLEM_KIND = "leader_epoch_malformed"

SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("file_kind", pa.string()),  # always "leader_epoch" (contract's checkpoint_entry)
        pa.field("epoch", pa.int32()),
        pa.field("start_offset", pa.int64()),
        pa.field("line", pa.int32()),  # 1-based line of the entry in the file
    ]
)

CACHE_SCHEMA = pa.schema([pa.field("epoch", pa.int32()), pa.field("start_offset", pa.int64())])


def parse(data: bytes | memoryview, path: str) -> Parsed:
    """Read one leader-epoch checkpoint; never raises."""
    text = read_checkpoint_text(data, CURRENT_VERSION, PROBLEM_KIND)
    problems = list(text.problems)
    lines = text.entry_lines
    problems += check_count(text, PROBLEM_KIND)
    if not lines:
        return Parsed(empty_table(SCHEMA), problems_table(path, problems))

    table, entry_problems = entries_table(lines, SCHEMA, path, FILE_KIND, PROBLEM_KIND)
    problems += entry_problems
    problems += sanity_check(table)
    problems.sort(key=lambda p: p.position)
    return Parsed(table, problems_table(path, problems))


def sanity_check(table: pa.Table) -> list[Problem]:
    """Entries the cache would reject or silently drop, compared with the previous entry.

    Epochs and start offsets must both strictly increase (``LeaderEpochFileCache.assign``
    truncates any earlier entry with ``epoch >= new.epoch || startOffset >= new.startOffset``),
    and neither may be negative (``assign`` throws "Received invalid partition leader epoch
    entry"). Vectorised with numpy; the loop runs over offending entries only.
    """
    epochs = table["epoch"].to_numpy(zero_copy_only=False).astype(np.int64)
    starts = table["start_offset"].to_numpy(zero_copy_only=False)
    lines = table["line"].to_numpy(zero_copy_only=False)
    problems: list[Problem] = []
    for i in np.flatnonzero((epochs < 0) | (starts < 0)):
        problems.append(
            Problem(
                int(lines[i]),
                PROBLEM_KIND,
                f"Received invalid partition leader epoch entry EpochEntry(epoch={epochs[i]},"
                f" startOffset={starts[i]}): LeaderEpochFileCache refuses to load it",
            )
        )
    if len(epochs) < 2:
        return problems
    epoch_down = np.flatnonzero(np.diff(epochs) <= 0) + 1
    start_down = np.flatnonzero(np.diff(starts) <= 0) + 1
    for i in epoch_down:
        problems.append(
            Problem(
                int(lines[i]),
                PROBLEM_KIND,
                f"epoch {epochs[i]} (start offset {starts[i]}) is not greater than the previous"
                f" epoch {epochs[i - 1]} (line {lines[i - 1]}): LeaderEpochFileCache silently"
                " drops the conflicting entries",
            )
        )
    for i in start_down:
        problems.append(
            Problem(
                int(lines[i]),
                PROBLEM_KIND,
                f"start offset {starts[i]} of epoch {epochs[i]} is not greater than the previous"
                f" start offset {starts[i - 1]} (epoch {epochs[i - 1]}, line {lines[i - 1]}):"
                " LeaderEpochFileCache silently drops the conflicting entries",
            )
        )
    return problems


def kafka_cache_view(table: pa.Table) -> pa.Table:
    """The entries ``LeaderEpochFileCache`` would hold after loading this checkpoint.

    Replays ``assign(EpochEntry)`` for each entry in file order: skip it when the latest
    entry has the same epoch and a start offset not above it; otherwise remove, from the
    end, every entry with ``epoch >= new.epoch || startOffset >= new.startOffset`` and append
    it. A negative epoch or offset makes Kafka throw, which aborts loading: the view stops
    there. This is a replay of a stateful algorithm, so it loops over entries (files hold
    a handful of epochs).
    """
    kept: list[tuple[int, int]] = []
    for epoch, start in zip(table["epoch"].to_pylist(), table["start_offset"].to_pylist()):
        if epoch < 0 or start < 0:
            break
        if kept and not (epoch != kept[-1][0] or start < kept[-1][1]):
            continue
        while kept and (kept[-1][0] >= epoch or kept[-1][1] >= start):
            kept.pop()
        kept.append((epoch, start))
    return pa.table(
        {
            "epoch": pa.array([e for e, _ in kept], pa.int32()),
            "start_offset": pa.array([s for _, s in kept], pa.int64()),
        },
        schema=CACHE_SCHEMA,
    )
