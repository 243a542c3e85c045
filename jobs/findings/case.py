"""The case a detector reads: the ingested tables and the views several detectors share, each
computed once per run.

``Case.open`` builds the job tables (replica_logs, metadata_events, epoch_lineage, offset_ranges,
broker_events, timeline) and writes each into the output DIR; the detectors read the first four
back from their files (broker_events only feeds the timeline): each is computed once, by its
write. Why not keep them cached instead: a cached DataFrame carries its whole plan into every
query that reads it, and Spark plans through it each time (its analysis, and the cache manager
comparing every piece of the plan with every cached one). With the job tables cached that
planning was a third of a small collection's jobs phase (crash-only, warm: 12.2 s cached, 8.0 s
read back). Read back, a job table is one Parquet scan declared with the schema in its footer
(``jobs.store.io.declared_schema``: no Spark job), and on a cluster its files outlive any
executor. Who led each epoch comes from the metadata log and the broker logs before the files
(``logged_leaders``, ``current``), so metadata_events is written before the lineage, and the
surviving logs are decided from both. Views are computed on first use. What reaches the driver is
per replica, per range or per event (thousands of rows for thousands of partitions), never per
record. A finding module may share a view of its own with ``case.shared(fn)``.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.history import metadata, timeline, views
from jobs.replicas import compare, epoch_lineage, offset_ranges, replica_logs
from jobs.replicas.ledger import read_ledger
from jobs.replicas.survivors import survivors, survivors_frame
from jobs.store.io import collected, read_table, write_table

INPUT_TABLES = ["brokers", "files", "batches", "records", "checkpoints", "leader_epochs", "partition_metadata",
                "clean_shutdown", "problems", "index_files", "index_entries", "producer_states", "metadata_records", "consumer_offsets",
                "transactions", "log_events", "remote_segments"]
JOB_TABLES = ["replica_logs", "epoch_lineage", "offset_ranges", "metadata_events", "broker_events", "timeline", "findings", "restart_preview"]


class Case:
    """One ingested output DIR under investigation (``ledger``: the producers' acknowledgements, if given)."""

    def __init__(self, spark: SparkSession, out: Path, tables: dict[str, DataFrame], ledger: Path | None = None) -> None:
        self.spark, self.out, self.tables, self.ledger = spark, Path(out), tables, ledger
        self._shared: dict[Callable, Any] = {}
        self.replica_logs = self.metadata_events = self.epoch_lineage = self.offset_ranges = None
        self.timeline_written: Future | None = None

    @classmethod
    def open(cls, spark: SparkSession, out: Path, ledger: Path | None = None, stage: Callable[[str], None] = lambda name: None,
             pool: Executor | None = None) -> Case:
        """Read the ingested tables under ``out`` and write the job tables next to them (``stage``
        is told each one's name as it starts). With ``pool``, the timeline (which no detector
        reads) is written there while the caller goes on: ``timeline_written`` is its future."""
        case = cls(spark, out, {name: read_table(spark, out, name) for name in INPUT_TABLES}, ledger)
        case.write_job_tables(stage, pool)
        return case

    def write_job_tables(self, stage: Callable[[str], None] = lambda name: None, pool: Executor | None = None) -> None:
        """Each job table once, two at a time where one does not read the other: a small
        collection's job is mostly Spark planning it on one JVM thread, and the other core sat
        half idle."""
        t = self.tables
        with ThreadPoolExecutor(2, thread_name_prefix="kf-job") as beside:
            stage("jobs: replica logs, metadata log")
            meta = beside.submit(self._written, metadata.metadata_events(t["metadata_records"]), "metadata_events")
            self.replica_logs = self._written(replica_logs.build(t), "replica_logs")
            self.metadata_events = meta.result()
            stage("jobs: epoch lineage, offset ranges")
            ranges = beside.submit(lambda: self._written(offset_ranges.build(t, self.replica_logs), "offset_ranges"))
            broker = beside.submit(lambda: self._written(metadata.broker_events(t["metadata_records"]), "broker_events"))
            self.epoch_lineage = self._written(epoch_lineage.build(t, self.replica_logs, self.logged_leaders), "epoch_lineage")
            self.offset_ranges, broker_events = ranges.result(), broker.result()

        def write_timeline() -> None:
            stage("jobs: timeline")
            tl = timeline.build(self.metadata_events, broker_events, self.epoch_lineage, self.log_events, t["consumer_offsets"],
                                self.replica_logs.select("topic", "partition", "broker"))
            write_table(tl.orderBy("topic", "partition", F.col("time").asc_nulls_last(), "seq").coalesce(1), self.out, "timeline")

        if pool is None:
            write_timeline()
        else:
            self.timeline_written = pool.submit(write_timeline)

    def _written(self, df: DataFrame, name: str) -> DataFrame:
        """``df`` written as job table ``name``, and that table as the detectors read it (see the module doc)."""
        write_table(df, self.out, name)
        return read_table(self.spark, self.out, name)

    def shared(self, fn: Callable[[Case], Any]) -> Any:
        """``fn(self)``, computed once per case: a view several detectors read."""
        if fn not in self._shared:
            self._shared[fn] = fn(self)
        return self._shared[fn]

    def close(self) -> None:
        for df in (self.__dict__.get(n) for n in ("diffs", "batches", "ledger_records", "logged_leaders")):
            if df is not None:
                df.unpersist()

    # -- replicas ---------------------------------------------------------------------------
    @cached_property
    def rl(self) -> list:
        """replica_logs, collected (one row per replica)."""
        return collected(self.replica_logs)

    @cached_property
    def lineage(self) -> list:
        return collected(self.epoch_lineage)

    @cached_property
    def holes(self) -> list:
        """offset_ranges holes that nothing benign explains."""
        return collected(self.offset_ranges.where((F.col("kind") == "hole") & (F.col("reason") == "unexplained")))

    @cached_property
    def batches(self) -> DataFrame:
        """Live segment batches with their transaction outcome (``aborted``)."""
        return compare.with_txn_outcome(self.tables["batches"], self.tables["records"]).cache()

    @cached_property
    def unmatched(self) -> tuple[DataFrame, DataFrame]:
        return compare.unmatched_batches(self.batches, self.replica_logs)

    @cached_property
    def replicas_agree(self) -> bool:
        """Every batch of every replica pair has its identical twin on the other replica (or no
        partition has two): nothing can differ record by record. Healthy replicas are the common
        case, and one query saying so spares the record-level comparison (two dozen Spark jobs
        over nothing) to divergence and loss alike."""
        ua, ub = self.unmatched
        return ua.select(*compare.PAIR).unionByName(ub.select(*compare.PAIR)).isEmpty()

    @cached_property
    def diffs(self) -> DataFrame:
        """Record-level differences between replica pairs (divergence and loss both read them)."""
        return compare.record_diffs(self.batches, self.tables["records"], self.replica_logs, self.unmatched).cache()

    @cached_property
    def ranges(self) -> list:
        return [] if self.replicas_agree else compare.diff_ranges(self.diffs, self.replica_logs).collect()

    @cached_property
    def logged_leaders(self) -> DataFrame:
        """The leaders the metadata log and the broker logs name, per epoch (``epoch_lineage.logged_leaders``)."""
        return epoch_lineage.logged_leaders(self.metadata_events, self.log_events).cache()

    @cached_property
    def current(self) -> dict:
        """Per partition, (leader, epoch) of the latest epoch the metadata log names a leader of."""
        return epoch_lineage.current_leaders(self.logged_leaders.collect())

    @cached_property
    def survivors(self) -> dict:
        """The surviving log of each partition (``jobs.replicas.survivors``): broker, candidates, why."""
        return survivors(self.rl, self.lineage, self.current)

    @cached_property
    def survivors_df(self) -> DataFrame:
        return survivors_frame(self.spark, self.survivors)

    @cached_property
    def ledger_records(self) -> DataFrame | None:
        return None if self.ledger is None else read_ledger(self.spark, self.ledger).cache()

    # -- history ----------------------------------------------------------------------------
    @cached_property
    def log_events(self) -> DataFrame:
        """Broker log events with topic names resolved from the metadata log."""
        return timeline.named_log_events(self.tables["log_events"], timeline.topic_names(self.metadata_events))

    @cached_property
    def history(self) -> dict:
        t = self.tables
        return views.collect(self.metadata_events, self.log_events, self.replica_logs, t["consumer_offsets"], t["transactions"])
