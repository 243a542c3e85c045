"""Damage the parsers saw in one replica's files (problem rows) and index entries past their segment.

Benign by design (the contract's list), so never reported here: preallocated zero-padded indexes of
a broker that did not shut down cleanly (part of ``unclean_shutdown``); 0-byte files of a broker
killed after a roll; anything in ``-delete``, ``-future`` or ``-stray`` dirs or
``.deleted``/``.cleaned``/``.swap`` files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from jobs.store.io import arrow_table
from parsers.offset_index import ENTRY_SIZE

from .model import Evidence, Finding

if TYPE_CHECKING:
    from .case import Case

FINDING_KINDS = {
    # corrupt data is an error: a torn tail is a write cut short (what it held is gone); a wrong
    # offset or transaction index serves wrong data until rebuilt
    "crc_mismatch": "error",
    "invalid_batch": "error",
    "offset_regression": "error",
    "torn_tail": "error",
    "zero_filled_tail": "warning",
    "index_mismatch": "error",
    "timeindex_mismatch": "warning",
    "txnindex_mismatch": "error",
    "checkpoint_malformed": "warning",
    "leader_epoch_malformed": "warning",
    "producer_snapshot_corrupt": "warning",
    "unreadable_file": "warning",
    "parser_error": "warning",
    # internal topics whose records do not decode (Kafka's own loader would reject them)
    "metadata_record_undecodable": "warning",
    "invalid_record": "warning",
    # broker logs: context, not Kafka data (a log cut short by rotation or copying is common)
    "truncated_gzip": "info",
    "trailing_garbage": "info",
    "corrupt_gzip": "info",
    "not_log4j": "info",
    "gzip_bomb": "warning",
    "unsafe_archive_entry": "warning",
}


PROBLEM_EXPLANATIONS = {
    "metadata_record_undecodable": "A __cluster_metadata record does not decode as its type and version say; Kafka would fail to "
                                   "replay this log here. The metadata timeline skips the record.",
    "invalid_record": "An internal-topic record (__consumer_offsets / __transaction_state / __share_group_state / __remote_log_metadata) does not decode; Kafka's coordinator "
                      "would fail to load it. It is kept raw in its table.",
    "truncated_gzip": "This compressed broker log ends early (cut by rotation or copying): its events up to the cut are used.",
    "corrupt_gzip": "This compressed broker log is damaged: its events up to the damage are used.",
    "trailing_garbage": "Bytes follow the last gzip member of this broker log; they were ignored.",
    "not_log4j": "No line of this file has Kafka's default log4j layout, so no events were read from it.",
    "gzip_bomb": "This compressed broker log expands beyond the safety bounds; it was read only up to them.",
    "parser_error": "A parser failed on this file; the rest of the run went on without it.",
    "crc_mismatch": "The batch's stored CRC does not match its bytes: the data was corrupted on disk or in transit to it; "
                    "Kafka's log recovery truncates the log at this batch.",
    "invalid_batch": "A batch header is impossible (size or magic), so Kafka stops reading this segment here; "
                     "everything after it is unreachable until recovery truncates it.",
    "offset_regression": "Offsets go backwards inside the segment, which Kafka's recovery treats as corruption.",
    "torn_tail": "The segment ends inside a batch: a write was cut short (crash or full disk); "
                 "Kafka truncates the partial batch at the next start, and it was never readable.",
    "zero_filled_tail": "The segment ends in zero bytes after its last batch: typical of a crash after the file was extended "
                        "but before the data reached disk; Kafka truncates it at recovery.",
    "index_mismatch": "The offset index points to offsets or positions the segment does not hold; "
                      "Kafka rebuilds the index when it notices, but reads through it may fail until then.",
    "timeindex_mismatch": "The time index disagrees with the segment's batches (offsets or timestamps); "
                          "time-based lookups and retention may be wrong until it is rebuilt.",
    "txnindex_mismatch": "The transaction index disagrees with the abort markers in the segment: consumers "
                         "in read_committed mode may see aborted data or skip committed data.",
    "checkpoint_malformed": "A checkpoint file is not in Kafka's format; Kafka fails to load it (or ignores it) at start-up.",
    "leader_epoch_malformed": "The leader-epoch-checkpoint has non-increasing epochs or start offsets, "
                              "which breaks KIP-101 truncation on this replica.",
    "producer_snapshot_corrupt": "The producer-state snapshot is unreadable; Kafka discards it and rebuilds producer state "
                                 "from the log, losing idempotence state for expired segments.",
}


def problem_findings(problems: DataFrame) -> list[Finding]:
    """One finding per (file, kind): the first position as evidence, the count in the detail."""
    # cluster_id_mismatch is also a discovery problem row; identity.py reports it once.
    p = problems.where((F.col("dir_state").isNull()) | (F.col("dir_state") == "live")).where(F.col("kind") != "cluster_id_mismatch")
    g = p.groupBy("broker", "topic", "partition", "path", "kind").agg(
        F.count("*").alias("n"), F.min("position").alias("position"), F.min_by("detail", "position").alias("detail")
    )
    out = []
    for r in g.collect():
        detail = r["detail"] or r["kind"]
        if r["n"] > 1:
            detail = f"{detail} (and {r['n'] - 1} more in this file)"
        out.append(Finding(
            kind=r["kind"], severity=FINDING_KINDS[r["kind"]], topic=r["topic"], partition=r["partition"], brokers=[r["broker"]],
            evidence=[Evidence(r["broker"], r["path"], r["position"], detail)],
            explanation=PROBLEM_EXPLANATIONS.get(r["kind"], f"{r['kind']} in {r['path']}."),
        ))
    return out


def index_past_eof_findings(index_entries: DataFrame, files: DataFrame) -> list[Finding]:
    """Offset-index entries pointing at or past the end of their segment (``kafka-dump-log`` dies
    on them; a fetch through them reads nothing). The segment is the ``.log`` of the same name in
    the same dir; an index whose segment was not collected is not judged. Zero padding slots
    are not entries."""
    segs = files.where(F.col("kind") == "segment").select(
        F.regexp_replace("path", r"\.log$", ".index").alias("path"), F.col("size").alias("segment_size"))
    e = index_entries.where(~F.coalesce("is_padding", F.lit(False)) & (F.col("position") > 0)).select(
        "broker", "topic", "partition", "path", "slot", "offset", "position")
    # each index beside its segment's size by one shuffle on the path, which the aggregate below
    # reuses (a join then an aggregate were two, and a Spark job each)
    both = e.unionByName(segs, allowMissingColumns=True).withColumn("segment_size", F.max("segment_size").over(Window.partitionBy("path")))
    bad = both.where(F.col("slot").isNotNull() & (F.col("position") >= F.col("segment_size")))
    g = bad.groupBy("broker", "topic", "partition", "path", "segment_size").agg(
        F.count("*").alias("n"), F.min_by(F.struct("slot", "offset", "position"), "slot").alias("first"))
    out = []
    for r in g.collect():
        first = r["first"]
        out.append(Finding(
            kind="index_mismatch", severity=FINDING_KINDS["index_mismatch"], topic=r["topic"], partition=r["partition"], brokers=[r["broker"]], first_offset=first["offset"],
            evidence=[Evidence(r["broker"], r["path"], first["slot"] * ENTRY_SIZE,
                               f"entry {first['slot']} (offset {first['offset']}) points to byte {first['position']}, beyond the "
                               f"{r['segment_size']}-byte segment" + (f" (and {r['n'] - 1} more entries)" if r["n"] > 1 else ""))],
            explanation=PROBLEM_EXPLANATIONS["index_mismatch"],
        ))
    return out


def indexes_past_eof(index_files: pa.Table, files: pa.Table) -> list[str]:
    """The paths of the offset indexes that ``index_past_eof_findings`` must read entry by entry:
    those whose highest entry position (``index_files.max_position``, from ingest) is at or past
    the size of their segment (the ``.log`` of the same name; the largest, as the finding's
    check takes it). Why: that check read every index entry (one per 4 KB of log), and on a
    deep healthy partition found nothing; an entry points past the end exactly when the highest
    one does, so one row per index file decides which indexes have any (``index_files``: path,
    index_kind, max_position; ``files``: path, kind, size)."""
    segs = files.filter(pc.equal(files.column("kind"), "segment"))
    segs = pa.table({"path": pc.replace_substring_regex(segs.column("path"), r"\.log$", ".index"), "segment_size": segs.column("size")})
    sizes = segs.filter(pc.is_valid(segs.column("segment_size"))).group_by("path").aggregate([("segment_size", "max")])
    ix = index_files.filter(pc.and_(pc.equal(index_files.column("index_kind"), "offset_index"), pc.is_valid(index_files.column("max_position"))))
    both = ix.select(["path", "max_position"]).join(sizes, "path", join_type="inner")
    bad = both.filter(pc.greater_equal(both.column("max_position"), both.column("segment_size_max")))
    return sorted(set(bad.column("path").to_pylist()))


def find(case: Case) -> list[Finding]:
    tables = case.tables
    # (index entries are read only for the indexes that point past their segment: none, in most logs)
    paths = indexes_past_eof(arrow_table(case.out, "index_files", ["path", "index_kind", "max_position"]),
                             arrow_table(case.out, "files", ["path", "kind", "size"]))
    past = index_past_eof_findings(tables["index_entries"].where(F.col("path").isin(paths)), tables["files"]) if paths else []
    return problem_findings(tables["problems"]) + past
