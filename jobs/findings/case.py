"""The case a detector reads: the ingested tables and the views several detectors share, each
computed once per run.

``Case.open`` builds the job tables (replica_logs, metadata_events, epoch_lineage, offset_ranges,
broker_events, timeline) and writes each into the output DIR; the detectors read the first four
back from their files (broker_events only feeds the timeline): each is computed once, by its
write. replica_logs, epoch_lineage and offset_ranges are computed on the driver from the small
input tables (``batch_runs``, summed at ingest: a few rows per segment; files, checkpoints), so
their cost follows segments and replicas, not batches, and pays no Spark query. Why not keep them cached instead: a cached DataFrame carries its whole plan into every
query that reads it, and Spark plans through it each time (its analysis, and the cache manager
comparing every piece of the plan with every cached one: a third of a small collection's jobs
phase, docs/design.md). Read back, a job table is one Parquet scan declared with the schema in its footer
(``jobs.store.io.declared_schema``: no Spark job), and on a cluster its files outlive any
executor. Who led each epoch comes from the metadata log and the broker logs before the files
(``logged_leaders``, ``current``), so metadata_events is written before the lineage, and the
surviving logs are decided from both. Views are computed on first use. What reaches the driver is
per replica, per range or per event (thousands of rows for thousands of partitions), never per
record. A finding module may share a view of its own with ``case.shared(fn)``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from fnmatch import translate
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.history import metadata, quorum, timeline, views
from jobs.history.views import History
from jobs.ingest.focus import INTERNAL_PREFIX, Focus
from jobs.replicas import batch_diffs, compare, epoch_lineage, local_diffs, offset_ranges, replica_logs
from jobs.replicas.epoch_lineage import LeaderEpoch
from jobs.replicas.grouped import Groups
from jobs.replicas.ledger import read_ledger
from jobs.replicas.metadata_log import MetadataLogComparison, read_comparison
from jobs.replicas.replica_logs import live_segment_batches, live_segment_runs
from jobs.replicas.survivors import Survivor, survivors, survivors_frame
from jobs.session.parallel import side_by_side
from jobs.store.io import (
    arrow_table,
    collected,
    collected_rows,
    collected_together,
    local_frame,
    read_table,
    row_count,
    small_table,
    write_empty_job_table,
    write_local_table,
    write_table,
)
from jobs.store.tables import schema_of

INPUT_TABLES = ["brokers", "files", "batches", "batch_runs", "records", "checkpoints", "leader_epochs", "partition_metadata",
                "clean_shutdown", "problems", "index_files", "index_entries", "producer_states", "metadata_records", "consumer_offsets",
                "transactions", "log_events", "remote_segments", "share_group_state"]
# (topic, partition) rows, for the few partitions a comparison reads
PARTITION_SCHEMA = T.StructType([T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType())])
# Past this many differing partitions, their rows are not also filtered by literal offset bounds
# (one predicate each; Spark plans and pushes down every one): the scope's join keeps them exact.
MAX_RECORD_WINDOWS = 256
# From this many records in a differing partition's scope (summed over its replicas, told by its
# runs), it is compared in spans (``jobs.replicas.batch_diffs``): below, record by record is as
# cheap, and its fewer Spark jobs are what a small collection's comparison costs.
MIN_SPAN_RECORDS = 20_000
# Up to this many records read for the whole scope (summed over the differing partitions' replicas,
# told by their runs: ``local_diffs.records_read``), the comparison runs on the driver (``jobs.replicas.local_diffs``: no Spark
# job; measured ~2.4 KB of driver memory a record at its peak, Parquet row groups decoded whole
# included: ~1.2 GB at the bound); above, in Spark.
LOCAL_SCOPE_RECORDS = 500_000
# (topic, partition, broker) rows: the replicas collected, for the timeline's node-level facts
REPLICAS = T.StructType([*PARTITION_SCHEMA.fields, T.StructField("broker", T.IntegerType())])
JOB_TABLES = ["replica_logs", "epoch_lineage", "offset_ranges", "metadata_events", "broker_events", "timeline", "findings", "restart_preview"]


class once_property:
    """``functools.cached_property`` with a lock per case and attribute: computed once even when
    two detectors ask at the same time (since Python 3.12 cached_property has no lock at all, and
    3.11's is one lock per attribute for every instance)."""

    def __init__(self, fn: Callable) -> None:
        self.fn, self.name, self.__doc__ = fn, fn.__name__, fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, case: Any, owner: type | None = None) -> Any:
        if case is None:
            return self
        values = case.__dict__
        if self.name not in values:
            with case._lock(self.name):
                if self.name not in values:
                    values[self.name] = self.fn(case)
        return values[self.name]


def focused_events(events: DataFrame, focus: Focus | None) -> DataFrame:
    """metadata_events of the partitions ``focus`` keeps. Ingest kept every partition record of
    the metadata log (they name a topic id, not a topic), so without this a focused analysis would
    list, as clean, partitions it never read, and judge their elections from the metadata alone.
    Globs become Java regexes (``fnmatch.translate``) so that nothing is collected to filter."""
    if focus is None:
        return events
    topic, partition = F.col("topic"), F.col("partition")
    for f in (focus, *(Focus(c.topics, c.partitions) for c in focus.collected)):
        if not (f.topics or f.partitions):
            continue  # (a collection focused by --since alone)
        kept = F.lit(True)
        if f.topics:
            kept = F.lit(False)
            for glob in f.topics:
                kept = kept | topic.rlike("^" + translate(glob))  # (rlike finds: anchored)
        if f.partitions:
            kept = kept & (partition.isNull() | partition.isin(list(f.partitions)))
        events = events.where(topic.isNull() | topic.startswith(INTERNAL_PREFIX) | kept)
    return events


def input_table(spark: SparkSession, out: Path, name: str) -> DataFrame:
    """Input table ``name``, or, when ingest wrote it empty (``row_count``, from the Parquet
    footers), an empty frame of its schema held by the driver: Spark's optimizer then drops every
    aggregate, join and collect over it without a job (a healthy collection has no problems, no
    transactions, no consumer offsets, no share groups; each pass over one was a Spark job or
    two of ~0.1 s whatever its rows)."""
    if row_count(out, name):
        return read_table(spark, out, name)
    return local_frame(spark, [], from_arrow_schema(schema_of(name)))


class Case:
    """One ingested output DIR under investigation: what every detector's ``find(case)`` reads.
    The attributes below (the ingested tables, and the job tables as written and read back), then
    the views the detectors share, each computed on first use (a ``list[Row]`` is a small table,
    collected; its columns are its schema's in ``jobs.store.tables``)."""

    spark: SparkSession
    out: Path  # the output DIR
    tables: dict[str, DataFrame]  # the ingested tables (``INPUT_TABLES``)
    ledger: Path | None  # the producers' acknowledgements (--ledger), if given
    focus: Focus | None  # the partitions ingest read, when not all
    replica_logs: DataFrame  # one row per replica (job table, ``jobs.replicas.replica_logs``)
    metadata_events: DataFrame  # the KRaft metadata log per partition (job table, ``jobs.history.metadata``)
    epoch_lineage: DataFrame  # per partition, epoch and replica (job table, ``jobs.replicas.epoch_lineage``)
    offset_ranges: DataFrame  # contiguous ranges and holes per replica (job table, ``jobs.replicas.offset_ranges``)

    def __init__(self, spark: SparkSession, out: Path, tables: dict[str, DataFrame], ledger: Path | None = None,
                 focus: Focus | None = None) -> None:
        self.spark, self.out, self.tables, self.ledger, self.focus = spark, Path(out), tables, ledger, focus
        self._shared: dict[Callable, Any] = {}
        self._locks: dict[Any, threading.RLock] = {}
        self._locks_lock = threading.Lock()
        self.replica_logs = self.metadata_events = self.epoch_lineage = self.offset_ranges = None
        self.timeline_written: Future | None = None

    @classmethod
    def open(cls, spark: SparkSession, out: Path, ledger: Path | None = None, stage: Callable[[str], None] = lambda name: None,
             pool: Executor | None = None, focus: Focus | None = None) -> Case:
        """Read the ingested tables under ``out`` and write the job tables next to them (``stage``
        is told each one's name as it starts). With ``pool``, the timeline (which no detector
        reads) is written there while the caller goes on: ``timeline_written`` is its future."""
        case = cls(spark, out, {name: input_table(spark, out, name) for name in INPUT_TABLES}, ledger, focus)
        try:
            case.write_job_tables(stage, pool)
        except BaseException:  # (what it cached so far goes, in a session that goes on)
            case.close()
            raise
        return case

    def write_job_tables(self, stage: Callable[[str], None] = lambda name: None, pool: Executor | None = None) -> None:
        """Each job table once, two at a time where one does not read the other (``side_by_side``:
        a small collection's job is mostly Spark planning it on one JVM thread, and the other core
        sat half idle).

        Why so few Spark jobs (each ~0.1-1 s whatever its rows): the small inputs the tables need
        (clean-shutdown markers, whether a ClearElrRecord exists, whether there is a metadata log at
        all) are read from the files without Spark; replica_logs, the epoch starts (with the
        replicas whose runs overlap) and offset_ranges are computed on the driver from
        ``batch_runs`` and the other per-file tables, read by pyarrow (``arrow_table``), where
        on a deep healthy partition their Spark queries over nine runs were ~8 Spark jobs and
        most of the jobs phase (issue 35); offset_ranges goes to Spark only where runs overlap
        (it joins those replicas' batches); the leadership events and broker records come back in
        one query (``collected_together``), none when nothing can name a leader; the tables
        decided on the driver are written by pyarrow (``write_local_table``); the metadata log's
        tables are not computed when ingest found no metadata log."""
        t = self.tables
        has_metadata_log = row_count(self.out, "metadata_records") > 0
        with side_by_side(1, "kf-job") as beside:
            stage("jobs: replica logs, metadata log")
            if has_metadata_log:
                clear_elr = metadata.clear_elr_in(small_table(self.out, "metadata_records", ["record_type", "error"],
                                                              filters=[("record_type", "=", metadata.CLEAR_ELR)]))
                events = focused_events(metadata.metadata_events(t["metadata_records"], clear_elr), self.focus)
                meta = beside.submit(self._written, events, "metadata_events")
            markers = small_table(self.out, "clean_shutdown", ["broker", "log_dir"])
            small = {n: arrow_table(self.out, n, c) for n, c in replica_logs.LOCAL_INPUTS.items()}
            small["batch_runs"] = arrow_table(self.out, "batch_runs", list(dict.fromkeys(
                replica_logs.LOCAL_INPUTS["batch_runs"] + epoch_lineage.LOCAL_INPUTS["batch_runs"] + offset_ranges.LOCAL_INPUT)))
            logs = replica_logs.local_build(small, markers)
            write_local_table(self.out, "replica_logs", logs, replica_logs.SCHEMA)
            self.replica_logs = read_table(self.spark, self.out, "replica_logs")
            self.__dict__["replicas"] = replica_logs.rows_of(logs)
            self.metadata_events = meta.result() if has_metadata_log else self._written_empty(
                focused_events(metadata.metadata_events(t["metadata_records"], False), self.focus), "metadata_events")
            stage("jobs: epoch lineage, offset ranges")
            starts = epoch_lineage.local_epoch_starts(small)
            if has_metadata_log or row_count(self.out, "log_events"):
                meta_rows, log_rows, brokers = collected_together(
                    *epoch_lineage.leadership_events(self.metadata_events, t["log_events"]), metadata.broker_records(t["metadata_records"]))
            else:  # (nothing names a leader or a broker: no query)
                meta_rows, log_rows, brokers = [], [], []
            self.__dict__["leadership_events"] = (meta_rows, log_rows)
            overlapping = epoch_lineage.overlapping(starts)
            if overlapping:  # (runs that interleave: their batches are joined, in Spark)
                ranges = beside.submit(lambda: self._written(offset_ranges.build(t, self.replica_logs, overlapping), "offset_ranges"))
            else:
                write_local_table(self.out, "offset_ranges", offset_ranges.local_build(small["batch_runs"], logs), offset_ranges.SCHEMA)
                ranges = beside.submit(read_table, self.spark, self.out, "offset_ranges")
            lineage = epoch_lineage.build(epoch_lineage.starts_only(starts), self.replicas, self.logged_leaders)
            write_local_table(self.out, "epoch_lineage", lineage, epoch_lineage.SCHEMA)
            self.epoch_lineage = read_table(self.spark, self.out, "epoch_lineage")
            self.__dict__["lineage"] = collected_rows([Row(**dict(zip(epoch_lineage.COLUMNS, r, strict=True))) for r in lineage])
            self.offset_ranges = ranges.result()
            # (in the schema Spark gives broker_events: a DataFrame's schema is known without a job)
            write_local_table(self.out, "broker_events", metadata.broker_event_rows(brokers), metadata.broker_events(t["metadata_records"]).schema)
            broker_events = read_table(self.spark, self.out, "broker_events")

        def write_timeline() -> None:
            stage("jobs: timeline")
            epochs = local_frame(self.spark, timeline.epoch_starts(self.lineage), timeline.EPOCHS)
            tl = timeline.build(self.metadata_events, broker_events, epochs, self.log_events, t["consumer_offsets"],
                                local_frame(self.spark, list(dict.fromkeys((r["topic"], r["partition"], r["broker"]) for r in self.replicas)), REPLICAS),
                                quorum=local_frame(self.spark, [tuple(r[c] for c in timeline.COLUMNS)
                                                                for r in quorum.quorum_rows(self.metadata_log)], timeline.TIMELINE))
            # (one sorted file: one shuffle into one partition, where orderBy sampled the rows first in a job of its own)
            write_table(tl.repartition(1).sortWithinPartitions("topic", "partition", F.col("time").asc_nulls_last(), "seq"),
                        self.out, "timeline")

        if pool is None:
            write_timeline()
        else:
            self.timeline_written = pool.submit(write_timeline)

    def _written(self, df: DataFrame, name: str) -> DataFrame:
        """``df`` written as job table ``name``, and that table as the detectors read it (see the module doc)."""
        write_table(df, self.out, name)
        return read_table(self.spark, self.out, name)

    def _written_empty(self, df: DataFrame, name: str) -> DataFrame:
        """Job table ``name`` written empty in ``df``'s schema (``write_empty_job_table``: no Spark
        job), for a table whose input is empty; read back as ``_written`` reads."""
        write_empty_job_table(self.out, name, df.schema)
        return read_table(self.spark, self.out, name)

    def shared(self, fn: Callable[[Case], Any]) -> Any:
        """``fn(self)``, computed once per case: a view several detectors read (detectors run two
        at a time: the second to ask waits for the first's answer instead of computing it again)."""
        with self._lock(fn):
            if fn not in self._shared:
                self._shared[fn] = fn(self)
        return self._shared[fn]

    def _lock(self, key: Any) -> threading.RLock:
        """The lock of one view or property of this case. Views depend on each other without
        cycles, so threads holding some of these locks never wait on each other in a circle."""
        with self._locks_lock:
            return self._locks.setdefault(key, threading.RLock())

    def close(self) -> None:
        """Unpersist what this case cached (a session that goes on keeps no memory of it)."""
        spans = (self.__dict__.get("span_comparison") or (None,))[0]
        for df in (*(self.__dict__.get(n) for n in ("diffs", "batches", "not_everywhere", "ledger_records", "span_pairs")), spans):
            if df is not None:
                df.unpersist()

    # -- replicas ---------------------------------------------------------------------------
    @once_property
    def replicas(self) -> list[Row]:
        """The replica_logs rows, collected: one per replica (``REPLICA_LOGS_SCHEMA``)."""
        return collected(self.replica_logs)

    @once_property
    def lineage(self) -> list[Row]:
        """The epoch_lineage rows, collected: one per partition, leader epoch and replica (``EPOCH_LINEAGE_SCHEMA``)."""
        return collected(self.epoch_lineage)

    @once_property
    def holes(self) -> list[Row]:
        """The offset_ranges holes that nothing benign explains (``OFFSET_RANGES_SCHEMA`` rows)."""
        # (read by the driver: a job table's few rows per replica, and a Spark job fewer)
        columns = self.offset_ranges.columns
        rows = small_table(self.out, "offset_ranges", columns, [("kind", "=", "hole"), ("reason", "=", "unexplained")])
        return sorted((Row(**r) for r in rows), key=lambda row: tuple((v is None, v) for v in row))  # (as ``collected`` sorts)

    @once_property
    def segment_epochs(self) -> list[Row]:
        """Per live segment and leader epoch of its batches (``partition_leader_epoch``, null for
        v0/v1): ``first_offset`` (lowest), ``last_offset`` (highest), ``last_timestamp`` (newest),
        from one group-by over ``batch_runs`` on the driver (a few rows per segment, read by
        pyarrow: no Spark job), sorted as ``collected`` sorts. Segment overlaps (gaps) and each
        epoch's first offset (the restart preview) read it, where each was an aggregate of its own
        over the same runs."""
        key = ["topic", "partition", "broker", "path", "partition_leader_epoch"]
        runs = live_segment_runs(arrow_table(self.out, "batch_runs", [*key, "log_dir", "dir_state", "file_kind", "first_offset",
                                                                     "last_offset", "last_timestamp"]))
        g = Groups(runs, key)
        rows = pa.table({**dict(zip(key, g.keys(runs, key), strict=True)), "first_offset": g.min(runs.column("first_offset")),
                         "last_offset": g.max(runs.column("last_offset")), "last_timestamp": g.max(runs.column("last_timestamp"))})
        return collected_rows([Row(**r) for r in rows.to_pylist()])

    @once_property
    def batches(self) -> DataFrame:
        """Live segment batches with their transaction outcome (``aborted``)."""
        return compare.with_txn_outcome(self.tables["batches"], self.tables["records"]).cache()

    @once_property
    def differing(self) -> list[tuple[str, int]]:
        """(topic, partition) of every partition whose live replicas' batch digests differ
        (``compare.differing_partitions``): the only ones compared batch by batch."""
        return compare.differing_partitions(self.replicas)

    @once_property
    def replicas_agree(self) -> bool:
        """Every replica of every partition holds the same readable batches (or no partition has
        two): nothing can differ record by record. Healthy replicas are the common case; told by
        the digests of one row per replica, it costs no Spark job at all, and spares divergence
        and loss the record-level comparison."""
        return not self.differing

    @once_property
    def scope_runs(self) -> list[dict]:
        """The runs (``batch_runs`` rows: a few a segment) of the live segments of the differing
        partitions, read by pyarrow on the driver (as ``segment_epochs`` reads them: a Spark job fewer)."""
        columns = ["topic", "partition", "broker", "first_offset", "last_offset", "record_count", *compare.RUN_SUMS]
        differing = set(self.differing)
        return [r for r in live_segment_runs(arrow_table(self.out, "batch_runs", [*columns, "log_dir", "dir_state", "file_kind"],
                                                         [("topic", "in", sorted({t for t, _ in differing}))])).select(columns).to_pylist()
                if (r["topic"], r["partition"]) in differing]

    @once_property
    def scope(self) -> list[tuple]:
        """What the comparison reads (``compare.SCOPE_SCHEMA`` rows): per differing partition, the
        offset from which its replicas may differ (below it every live replica holds the same
        batches, told by their ``scope_runs``: ``compare.agreed_prefixes``) and its live replicas;
        their records from that offset on are ``scope_records``."""
        return compare.comparison_scope(compare.agreed_prefixes(self.scope_runs, self.replicas), self.replicas)

    @once_property
    def scope_records(self) -> dict[tuple[str, int], int]:
        """Per partition of the ``scope``, the records its live replicas hold from its ``from_offset`` on."""
        start = {(t, p): first for t, p, first, _ in self.scope}
        counts: dict[tuple[str, int], int] = {}
        for r in self.scope_runs:
            key = (r["topic"], r["partition"])
            if key in start and r["first_offset"] >= start[key]:
                counts[key] = counts.get(key, 0) + (r["record_count"] or 0)
        return counts

    @once_property
    def local_comparison(self) -> tuple[list[Row], list[Row]] | None:
        """The divergent ranges and the lost committed ranges (HW evidence) of a scope of at most
        ``LOCAL_SCOPE_RECORDS`` records, told on the driver (``local_diffs.compare_scope``); None
        where the replicas agree or the scope is bigger: Spark compares it. (With a producer
        ledger the lost ranges are told in Spark, where its acknowledged offsets join the HW's.)"""
        if self.replicas_agree or local_diffs.records_read(self.scope, self.scope_runs) > LOCAL_SCOPE_RECORDS:
            return None
        differing = set(self.differing)
        markers = any(r["control_records"] for r in self.replicas if (r["topic"], r["partition"]) in differing)
        return local_diffs.compare_scope(self.out, self.scope, self.replicas, self.survivors, markers, lost=self.ledger is None)

    @once_property
    def span_comparison(self) -> tuple[DataFrame | None, list[tuple[str, int]]]:
        """The spans (``batch_diffs.spans``, cached) of the deep partitions of the scope (at least
        ``MIN_SPAN_RECORDS`` records in it) whose every difference is a whole batch, and those
        partitions. Not with a producer ledger (its lost offsets are told record by record, beside
        the HW's). One job decides which partitions the spans say all of (``batch_diffs.leftover``)."""
        deep = [r for r in self.scope if self.scope_records.get((r[0], r[1]), 0) >= MIN_SPAN_RECORDS]
        if self.ledger is not None or not deep:
            return None, []
        parts = [(t, p) for t, p, _, _ in deep]
        some = self._of(self.not_everywhere, parts)
        records = compare.live_records(self._scoped("records", "offset", deep))
        pairs = batch_diffs.batch_pairs(batch_diffs.aligned_offsets(records, some)).cache()
        self.__dict__["span_pairs"] = pairs
        left = {(r["topic"], r["partition"]) for r in batch_diffs.leftover(pairs).collect() if r["leftover"]}
        exact = [k for k in parts if k not in left]
        if not exact:
            return None, []
        return batch_diffs.spans(self._of(pairs, exact), some).cache(), exact

    @property
    def spans(self) -> DataFrame | None:
        """``span_comparison``'s spans."""
        return self.span_comparison[0]

    @property
    def span_partitions(self) -> list[tuple[str, int]]:
        """The partitions ``spans`` say all the differences of (nothing of them is in ``diffs``)."""
        return self.span_comparison[1]

    @once_property
    def record_partitions(self) -> list[tuple[str, int]]:
        """The partitions of the scope compared record by record (``diffs``)."""
        spans = set(self.span_partitions)
        return [(t, p) for t, p, _, _ in self.scope if (t, p) not in spans]

    def _of(self, df: DataFrame, parts: list[tuple[str, int]]) -> DataFrame:
        """The rows of ``df`` in ``parts``, partitions of the scope (all of them: ``df`` itself)."""
        if len(parts) == len(self.scope):
            return df
        if len(parts) <= MAX_RECORD_WINDOWS:
            return compare.in_partitions(df, parts)
        return compare.within(df, local_frame(self.spark, parts, PARTITION_SCHEMA), sorted({t for t, _ in parts}))

    def _scoped(self, table: str, offset: str, scope: list[tuple] | None = None) -> DataFrame:
        """Input table ``table``'s rows of the ``scope`` (or of ``scope``, some of its rows): its partitions, from their ``from_offset``
        (``offset``: the column compared with it), as literal predicates too for up to
        ``MAX_RECORD_WINDOWS`` partitions (Parquet skips the row groups below), with ``brokers``."""
        scope = self.scope if scope is None else scope
        frame = None if len(scope) <= MAX_RECORD_WINDOWS else local_frame(self.spark, scope, compare.SCOPE_SCHEMA)
        return compare.in_scope(self.tables[table], frame, scope, offset)

    @once_property
    def not_everywhere(self) -> DataFrame:
        """The scope's batches some replica lacks (``compare.unshared_batches``), with their
        transaction outcome: cached, as both sides of the record join read them (a diverged tail,
        not the whole log). A healthy partition's batches are never read here, nor a differing
        one's below where its replicas agree, and the outcome's window sorts transactional batches
        only; where their replicas hold no control batch at all (``control_records``), no record is
        read for a marker. (A batch's outcome is its producer's next marker, which lies above it:
        in the scope too.)"""
        batches = live_segment_batches(self._scoped("batches", "base_offset"))
        differing = set(self.differing)
        if any(r["control_records"] for r in self.replicas if (r["topic"], r["partition"]) in differing):
            aborted = compare.aborted_batches(batches, self._scoped("records", "offset"))
        else:  # no marker anywhere in them: nothing is aborted, and their records are not scanned for one
            aborted, batches = None, batches.withColumn("aborted", F.lit(False))
        return compare.unshared_batches(batches, aborted).cache()

    @once_property
    def diffs(self) -> DataFrame:
        """Record-level differences between replica pairs (divergence and loss both read them) of
        the ``record_partitions``: only the records of the batches some replica lacks, above where
        the replicas agree."""
        return self.record_diffs(self.record_partitions).cache()

    def record_diffs(self, parts: list[tuple[str, int]]) -> DataFrame:
        """``diffs`` of the partitions ``parts`` of the scope (not cached)."""
        scope = [r for r in self.scope if (r[0], r[1]) in set(parts)]
        records = compare.live_records(self._scoped("records", "offset", scope))
        return compare.scoped_record_diffs(records, self._of(self.not_everywhere, parts))

    @once_property
    def ranges(self) -> list[Row]:
        """The replica pairs' divergent offset ranges (``compare.diff_ranges`` rows: per side its
        broker, epochs, bytes, evidence), in (partition, offsets, pair) order: of the records of
        the ``record_partitions``, and of the ``spans`` of the others."""
        if self.replicas_agree:
            return []
        if self.local_comparison is not None:
            rows = self.local_comparison[0]
            return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["first_offset"], r["last_offset"], r["broker_a"], r["broker_b"]))
        rows = compare.diff_ranges(self.diffs.where(F.col("status") == "divergent")).collect() if self.record_partitions else []
        if self.spans is not None:
            rows += batch_diffs.span_ranges(self.spans.where(F.col("status") == "divergent")).collect()
        return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["first_offset"], r["last_offset"], r["broker_a"], r["broker_b"]))

    @once_property
    def current(self) -> dict[tuple[str, int], LeaderEpoch]:
        """Per (topic, partition), the leader of the latest epoch the metadata log names a leader of."""
        return epoch_lineage.current_leaders(self.logged_leaders)

    @once_property
    def logged_leaders(self) -> list[dict]:
        """The leaders the metadata log and the broker logs name, one row per epoch
        (``epoch_lineage.logged_leaders``): the lineage and ``current`` read them."""
        return epoch_lineage.logged_leaders(*self.leadership_events)

    @once_property
    def leadership_events(self) -> tuple[list[Row], list[Row]]:
        """``epoch_lineage.leadership_events``, collected (per event): who led, and the topic names."""
        meta, logs = epoch_lineage.leadership_events(self.metadata_events, self.tables["log_events"])
        return meta.collect(), logs.collect()

    @once_property
    def metadata_log(self) -> MetadataLogComparison:
        """The nodes' copies of the KRaft metadata log against the leader's (``jobs.replicas.metadata_log``)."""
        return read_comparison(self.tables)

    @once_property
    def survivors(self) -> dict[tuple[str, int], Survivor]:
        """Per (topic, partition), its surviving log (``jobs.replicas.survivors``): broker, candidates, why."""
        return survivors(self.replicas, self.lineage, self.current)

    @once_property
    def survivors_df(self) -> DataFrame:
        """``survivors`` as a DataFrame, one row per candidate (``survivors_frame``), to join record-level frames with."""
        return survivors_frame(self.spark, self.survivors)

    @once_property
    def ledger_records(self) -> DataFrame | None:
        """The producer ledger's records (``jobs.replicas.ledger``), cached; None without --ledger."""
        return None if self.ledger is None else read_ledger(self.spark, self.ledger).cache()

    # -- history ----------------------------------------------------------------------------
    @once_property
    def log_events(self) -> DataFrame:
        """Broker log events with topic names resolved from the metadata log (its topics' names,
        from the rows collected for ``leadership_events``: one per topic, not an aggregate each time
        a query reads the log events)."""
        names = sorted((i, n) for i, ns in epoch_lineage.topic_names(self.leadership_events[0]).items() for n in ns)
        return timeline.named_log_events(self.tables["log_events"], local_frame(self.spark, names, timeline.TOPIC_NAMES))

    @once_property
    def history(self) -> History:
        """The few rows of the cluster's history the detectors read (``jobs.history.views.History``)."""
        t = self.tables
        return views.collect(self.metadata_events, self.log_events, self.replicas, t["consumer_offsets"], t["transactions"],
                             t["share_group_state"])
