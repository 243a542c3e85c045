"""Offset checkpoints of a log dir: ``OffsetCheckpointFile`` over ``CheckpointFile``.

    OffsetCheckpointFile => Version:"0" EntryCount Entry*          (one text line each)
      Entry              => Topic:string \\s+ Partition:int32 \\s+ Offset:int64

One format, four files (names.py maps the file name to ``file_kind``):

    replication-offset-checkpoint     replication_offset   high watermark per partition
    recovery-point-offset-checkpoint  recovery_point       everything below is flushed
    log-start-offset-checkpoint       log_start            log start offset (retention, DeleteRecords)
    cleaner-offset-checkpoint         cleaner              where the log cleaner stopped

Kafka's behaviour on bad files (all reproduced as ``checkpoint_malformed`` problems at the
1-based line number, see checkpoint_file.py): a bad version or count, a line without exactly
3 fields, a non-numeric partition or offset. An empty (0-byte) file reads as an empty
checkpoint in Kafka too, so it yields no rows and no problem: a broker killed within seconds
of starting leaves exactly that. Unlike Kafka, which discards the whole file at the first
fault, we keep every entry that parsed, because on a damaged broker those entries are still
evidence. Stricter than Kafka: the same topic-partition twice is reported (the writer
serialises a map, so it never writes duplicates; Kafka's reader silently keeps the last one).
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .checkpoint_file import check_count, entries_table, read_checkpoint_text
from .common import Parsed, Problem, empty_table, problems_table
from .names import OFFSET_CHECKPOINT_KINDS, detect_kind

CURRENT_VERSION = 0  # OffsetCheckpointFile.CURRENT_VERSION
PROBLEM_KIND = "checkpoint_malformed"

SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("file_kind", pa.string()),  # replication_offset|recovery_point|log_start|cleaner
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("line", pa.int32()),  # 1-based line of the entry in the file
    ]
)


def file_kind_from_path(path: str) -> str | None:
    """``replication_offset`` etc. from the file name; None for any other name."""
    kind = detect_kind(os.path.basename(path))
    return kind if kind in OFFSET_CHECKPOINT_KINDS else None


def parse(data: bytes | memoryview, path: str, file_kind: str | None = None) -> Parsed:
    """Read one offset checkpoint; never raises.

    ``file_kind`` overrides the kind derived from the file name (for copies renamed by the
    person who collected them).
    """
    kind = file_kind if file_kind is not None else file_kind_from_path(path)
    text = read_checkpoint_text(data, CURRENT_VERSION, PROBLEM_KIND)
    problems = list(text.problems)
    lines = text.entry_lines
    if not lines:
        problems += check_count(text, PROBLEM_KIND)
        return Parsed(empty_table(SCHEMA), problems_table(path, problems))

    table, entry_problems = entries_table(lines, SCHEMA, path, kind, PROBLEM_KIND)
    problems += entry_problems
    problems += check_count(text, PROBLEM_KIND)
    problems += _duplicate_problems(table)
    problems.sort(key=lambda p: p.position)
    return Parsed(table, problems_table(path, problems))


def _has_duplicates(table: pa.Table) -> bool:
    """Whether some (topic, partition) repeats, without Acero: its group-by starts a thread pool
    per call (~3 ms), ten times the cost of parsing a small checkpoint that has no duplicates."""
    topic = pc.dictionary_encode(table["topic"]).combine_chunks().indices
    tidx = pc.fill_null(topic, -1).to_numpy().astype(np.int64) + 1
    part = table["partition"].combine_chunks()
    pidx = pc.fill_null(part, 0).to_numpy().astype(np.int64) + (1 << 31)  # 0 .. 2^32 - 1
    pidx[pc.is_null(part).to_numpy(zero_copy_only=False)] = 1 << 32  # null: its own value
    keys = (tidx << 33) | pidx
    return np.unique(keys).size < keys.size


def _duplicate_problems(table: pa.Table) -> list[Problem]:
    """Topic-partitions listed more than once (vectorised group-by; loop over duplicates only)."""
    if table.num_rows < 2 or not _has_duplicates(table):
        return []
    counts = table.group_by(["topic", "partition"]).aggregate([("line", "min"), ("line", "count")])
    dupes = counts.filter(pc.greater(counts["line_count"], 1))
    if dupes.num_rows == 0:
        return []
    problems = []
    for row in dupes.to_pylist():
        lines = table.filter(
            pc.and_(pc.equal(table["topic"], row["topic"]), pc.equal(table["partition"], row["partition"]))
        )["line"].to_pylist()
        for line in lines[1:]:
            problems.append(
                Problem(
                    line,
                    PROBLEM_KIND,
                    f"duplicate entry for {row['topic']}-{row['partition']} (first at line"
                    f" {row['line_min']}); Kafka keeps only the last one",
                )
            )
    return problems
