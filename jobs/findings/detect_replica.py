"""Findings about one replica's own files: damage the parsers saw, and what its files contradict.

Benign by design (the contract's list), so never reported here: a HW checkpoint below the LEO;
preallocated zero-padded indexes of a broker that did not shut down cleanly (part of
``unclean_shutdown``); 0-byte files of a broker killed after a roll; anything in ``-delete``,
``-future`` or ``-stray`` dirs or ``.deleted``/``.cleaned``/``.swap`` files; holes in compacted logs;
a KRaft controller-only node without a clean-shutdown marker.
"""

from __future__ import annotations

from collections import defaultdict

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from jobs.findings.model import Evidence, Finding
from jobs.replicas.replica_logs import live_segment_batches

# Transaction timeout Kafka allows at most by default (transaction.max.timeout.ms): a transaction
# open longer than this against the partition's newest data should have been aborted.
TXN_MAX_TIMEOUT_MS = 15 * 60 * 1000

PROBLEM_EXPLANATIONS = {
    "metadata_record_undecodable": "A __cluster_metadata record does not decode as its type and version say; Kafka would fail to "
                                   "replay this log here. The metadata timeline skips the record.",
    "invalid_record": "An internal-topic record (__consumer_offsets / __transaction_state) does not decode; Kafka's coordinator "
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
    # cluster_id_mismatch is also a discovery problem row; the cross-broker job reports it once.
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
            kind=r["kind"], topic=r["topic"], partition=r["partition"], brokers=[r["broker"]],
            evidence=[Evidence(r["broker"], r["path"], r["position"], detail)],
            explanation=PROBLEM_EXPLANATIONS.get(r["kind"], f"{r['kind']} in {r['path']}."),
        ))
    return out


def unclean_shutdown_findings(rl: list, files: DataFrame, brokers: DataFrame) -> list[Finding]:
    """A data broker's log dir without ``.kafka_cleanshutdown`` (info, not damage).

    Controller-only KRaft nodes never write the marker, so a log dir counts only if it holds a
    partition other than the metadata log or any broker-level offset checkpoint.
    """
    kinds = files.groupBy("broker", "log_dir").agg(
        F.collect_set("kind").alias("kinds"),
        F.max(F.when((F.col("topic").isNotNull()) & (F.col("topic") != "__cluster_metadata"), 1).otherwise(0)).alias("has_data"),
        F.collect_list(F.when((F.col("size") == 0) & F.col("kind").isin("segment", "producer_snapshot"), F.col("path"))).alias(
            "empty_files"),
    ).collect()
    by_dir = defaultdict(list)
    for r in rl:
        by_dir[(r["broker"], r["log_dir"])].append(r)
    out = []
    for k in kinds:
        data_dir = k["has_data"] or bool({"replication_offset", "recovery_point", "log_start"} & set(k["kinds"]))
        if not data_dir or "clean_shutdown" in k["kinds"]:
            continue
        reps = sorted(by_dir.get((k["broker"], k["log_dir"]), []), key=lambda r: (r["topic"], r["partition"]))
        behind = [r for r in reps if r["recovery_point"] is not None and r["recovery_point"] < r["leo"]]
        padded = [r for r in reps if (r["index_padding_entries"] or 0) > 0]
        ev = [Evidence(k["broker"], k["log_dir"], None, "no .kafka_cleanshutdown marker in this log dir")]
        for r in behind[:5]:
            ev.append(Evidence(k["broker"], None, None,
                               f"{r['topic']}-{r['partition']}: recovery point {r['recovery_point']} behind LEO {r['leo']}"))
        for r in padded[:5]:
            ev.append(Evidence(k["broker"], None, None,
                               f"{r['topic']}-{r['partition']}: active segment indexes still preallocated "
                               f"({r['index_padding_entries']} zero slots)"))
        for p in [p for p in k["empty_files"] if p][:5]:
            ev.append(Evidence(k["broker"], p, 0, "0-byte file of a segment rolled just before the stop"))
        out.append(Finding(
            kind="unclean_shutdown", brokers=[k["broker"]], evidence=ev,
            explanation=f"Broker {k['broker']} did not shut down cleanly (no .kafka_cleanshutdown): Kafka runs log recovery "
                        f"from the recovery point at the next start; checkpoints on disk may be stale "
                        f"({len(behind)} partitions with recovery point behind LEO).",
        ))
    return out


def checkpoint_findings(rl: list) -> list[Finding]:
    """Checkpointed offsets beyond what the replica's log holds.

    A HW checkpoint *below* the LEO is normal (it lags by design). Above it, the replica lacks
    offsets it once knew were committed: that is ``truncation_below_hw`` (cross-replica module).
    """
    out = []
    for r in rl:
        if r["dir_state"] != "live" or r["segments"] == 0:
            continue
        for col, name in (("recovery_point", "recovery point"), ("log_start_checkpoint", "log start offset"),
                          ("cleaner_offset", "cleaner offset")):
            v = r[col]
            if v is not None and v > r["leo"]:
                out.append(Finding(
                    kind="checkpoint_inconsistent", topic=r["topic"], partition=r["partition"], brokers=[r["broker"]],
                    first_offset=r["leo"], last_offset=v - 1,
                    evidence=[Evidence(r["broker"], r["log_dir"], None, f"{name} checkpoint {v} > LEO {r['leo']}")],
                    explanation=f"The {name} checkpointed for {r['topic']}-{r['partition']} on broker {r['broker']} is "
                                f"beyond the log end ({v} > {r['leo']}): the log lost data after the checkpoint was written.",
                ))
    return out


def gap_findings(holes: list) -> list[Finding]:
    out = []
    for h in holes:
        kind = "segment_gap" if h["at_segment_boundary"] else "offset_gap"
        n = h["last_offset"] - h["first_offset"] + 1
        out.append(Finding(
            kind=kind, topic=h["topic"], partition=h["partition"], brokers=[h["broker"]],
            first_offset=h["first_offset"], last_offset=h["last_offset"], records=n,
            evidence=[Evidence(h["broker"], h["path"], h["position"], f"offsets {h['first_offset']}-{h['last_offset']} missing before this batch")],
            explanation=f"{n} offsets are missing inside the log of a non-compacted topic; no transaction marker, "
                        "compaction or log-start move explains them.",
        ))
    return out


def segment_overlap_findings(batches: DataFrame) -> list[Finding]:
    b = live_segment_batches(batches)
    seg = b.groupBy("topic", "partition", "broker", "path").agg(
        F.min("base_offset").alias("first"), F.max("last_offset").alias("last"),
    )
    w = Window.partitionBy("topic", "partition", "broker").orderBy("first", "path")
    seg = seg.withColumn("next_first", F.lead("first").over(w)).withColumn("next_path", F.lead("path").over(w))
    out = []
    for r in seg.where(F.col("next_first") <= F.col("last")).collect():
        out.append(Finding(
            kind="segment_overlap", topic=r["topic"], partition=r["partition"], brokers=[r["broker"]],
            first_offset=r["next_first"], last_offset=r["last"], records=r["last"] - r["next_first"] + 1,
            evidence=[Evidence(r["broker"], r["next_path"], 0, f"starts at {r['next_first']}, before the end {r['last']} of {r['path']}")],
            explanation="Two segments of the same log hold the same offsets: a fetch or recovery went wrong and consumers "
                        "may read the same offsets twice with different content.",
        ))
    return out


def duplicate_sequence_findings(batches: DataFrame) -> list[Finding]:
    """Same producer id, epoch and base sequence at two offsets of one replica: a retry that the
    broker did not de-duplicate (its producer state was lost, e.g. across a leader change)."""
    b = live_segment_batches(batches).where(
        (F.col("producer_id") >= 0) & (F.col("base_sequence") >= 0) & (~F.col("is_control"))
    )
    g = b.groupBy("topic", "partition", "broker", "producer_id", "producer_epoch", "base_sequence").agg(
        F.count("*").alias("n"), F.min("base_offset").alias("first"), F.max("base_offset").alias("second"),
        F.min_by("path", "base_offset").alias("path"), F.min_by("position", "base_offset").alias("position"),
        F.max("last_sequence").alias("last_sequence"), F.sum("record_count").alias("records"),
    ).where(F.col("n") > 1)
    agg = g.groupBy("topic", "partition", "broker", "producer_id", "producer_epoch").agg(
        F.min("first").alias("first"), F.max("second").alias("second"), F.count("*").alias("batches"),
        F.min("base_sequence").alias("min_seq"), F.max("last_sequence").alias("max_seq"),
        F.min_by("path", "first").alias("path"), F.min_by("position", "first").alias("position"),
        F.sum("records").alias("records"),
    )
    out = []
    for r in agg.collect():
        out.append(Finding(
            kind="duplicate_sequence", topic=r["topic"], partition=r["partition"], brokers=[r["broker"]],
            first_offset=r["first"], last_offset=r["second"], records=r["records"],
            producers=[{"producer_id": r["producer_id"], "producer_epoch": r["producer_epoch"],
                        "first_sequence": r["min_seq"], "last_sequence": r["max_seq"]}],
            evidence=[Evidence(r["broker"], r["path"], r["position"], f"{r['batches']} sequence numbers written twice")],
            explanation=f"Producer {r['producer_id']} (epoch {r['producer_epoch']}) has the same sequence numbers at two "
                        "offsets: a retried batch was appended twice, so consumers see duplicates.",
        ))
    return out


def hanging_transaction_findings(batches: DataFrame, producer_states: DataFrame) -> list[Finding]:
    """Transactional data after the producer's last marker, that no producer state holds open,
    and older than the longest transaction Kafka allows against the partition's newest data."""
    all_batches = live_segment_batches(batches)
    b = all_batches.where(F.col("producer_id") >= 0)
    per = b.groupBy("topic", "partition", "broker", "producer_id").agg(
        F.max(F.when(F.col("is_control"), F.col("base_offset"))).alias("last_marker"),
        F.collect_list(F.when(F.col("is_transactional") & ~F.col("is_control"),
                              F.struct("base_offset", "last_offset", "max_timestamp", "path", "position",
                                       "producer_epoch"))).alias("data"),
    )
    newest = all_batches.groupBy("topic", "partition", "broker").agg(F.max("max_timestamp").alias("newest_ts"))
    ps = producer_states.where(F.col("current_txn_first_offset").isNotNull()).select(
        "topic", "partition", "broker", "producer_id", F.col("current_txn_first_offset").alias("open_first")
    ).groupBy("topic", "partition", "broker", "producer_id").agg(F.collect_set("open_first").alias("open_firsts"))
    rows = per.join(newest, ["topic", "partition", "broker"]).join(ps, ["topic", "partition", "broker", "producer_id"], "left").collect()
    out = []
    for r in rows:
        pending = [d for d in r["data"] if r["last_marker"] is None or d["base_offset"] > r["last_marker"]]
        if not pending:
            continue
        first = min(pending, key=lambda d: d["base_offset"])
        if r["open_firsts"] and first["base_offset"] in r["open_firsts"]:
            continue
        if r["newest_ts"] is None or first["max_timestamp"] is None or r["newest_ts"] - first["max_timestamp"] < TXN_MAX_TIMEOUT_MS:
            continue
        last = max(pending, key=lambda d: d["last_offset"])
        out.append(Finding(
            kind="hanging_transaction", topic=r["topic"], partition=r["partition"], brokers=[r["broker"]],
            first_offset=first["base_offset"], last_offset=last["last_offset"],
            producers=[{"producer_id": r["producer_id"], "producer_epoch": first["producer_epoch"]}],
            first_timestamp=first["max_timestamp"], last_timestamp=last["max_timestamp"],
            evidence=[Evidence(r["broker"], first["path"], first["position"], "transactional data with no later commit/abort marker")],
            explanation=f"Producer {r['producer_id']} has transactional data from offset {first['base_offset']} with no commit or "
                        "abort marker, older than transaction.max.timeout.ms: the last stable offset is stuck there and "
                        "read_committed consumers stall.",
        ))
    return out


def index_past_eof_findings(index_entries: DataFrame, files: DataFrame) -> list[Finding]:
    """Offset-index entries pointing at or past the end of their segment (``kafka-dump-log`` dies
    on them; a fetch through them reads nothing). The segment is the ``.log`` of the same name in
    the same dir; an index whose segment was not collected is not judged. Zero padding slots
    are not entries."""
    segs = files.where(F.col("kind") == "segment").select(
        F.regexp_replace("path", r"\.log$", ".index").alias("path"), F.col("size").alias("segment_size"))
    e = index_entries.where(~F.coalesce("is_padding", F.lit(False)) & (F.col("position") > 0))
    bad = e.join(segs, "path").where(F.col("position") >= F.col("segment_size"))
    g = bad.groupBy("broker", "topic", "partition", "path", "segment_size").agg(
        F.count("*").alias("n"), F.min_by(F.struct("slot", "offset", "position"), "slot").alias("first"))
    out = []
    for r in g.collect():
        first = r["first"]
        out.append(Finding(
            kind="index_mismatch", topic=r["topic"], partition=r["partition"], brokers=[r["broker"]], first_offset=first["offset"],
            evidence=[Evidence(r["broker"], r["path"], first["slot"] * 8,
                               f"entry {first['slot']} (offset {first['offset']}) points to byte {first['position']}, beyond the "
                               f"{r['segment_size']}-byte segment" + (f" (and {r['n'] - 1} more entries)" if r["n"] > 1 else ""))],
            explanation=PROBLEM_EXPLANATIONS["index_mismatch"],
        ))
    return out
