"""Files → Parquet tables, parsing as Spark tasks.

Flow (all heavy work on executors, nothing parsed comes back to the driver):
1. discovery on the driver (``discover.discover_inputs``; archives extracted safely first) gives the
   file list; callers run it before starting Spark, so unusable input fails without a JVM;
2. files are packed into tasks: a file of ``GROUP_BYTES`` or more is a task of its own (a segment
   is never split: Kafka's default segment is 1 GiB and the parser streams it in 32 MiB chunks
   through bounded memory), smaller files of one log dir are grouped up to ``GROUP_BYTES`` /
   ``GROUP_FILES``; tasks are ordered largest first so the long ones start early;
3. ``spark.range`` gives one Spark partition per task number and ``mapInArrow`` runs
   ``tasks.run_task`` on each number's files (the task list travels with the function: Spark
   broadcasts a function over 1 MB to each executor once), and the task writes each table's Parquet files itself
   (``task_writer.py``: ``tables/<name>/``, Hive folders per ``PARTITION_BY``) and hands back only
   counts. Each byte is parsed once and each row written once: no staging pass, no second write.
   The output DIR must be a path every executor sees (on a ``spark://`` cluster: a shared mount);
4. the driver adds what it alone knows (``brokers``, discovery's problems) and an empty file for
   every table no task fed; Spark then reads the finished tables.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from jobs.store.io import table_path, write_empty
from jobs.store.spark import is_remote, parallelism
from jobs.store.tables import ALL_TABLES, BROKERS, schema_of

from . import discover as disc
from .focus import Focus

log = logging.getLogger(__name__)

GROUP_BYTES = 64 << 20
GROUP_FILES = 512

FILE_FIELDS = ["abs_path", "path", "broker", "log_dir", "topic", "partition", "dir_state", "kind", "size", "mtime_ms", "archive"]


@dataclass
class IngestResult:
    out: Path
    brokers: list[dict]
    files: int
    bytes: int
    tasks: int
    rows: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    problems: int = 0
    input_changes: dict = field(default_factory=dict)  # discover.changes_since at the end of parsing


def group_bytes_for(total_bytes: int, parallelism: int) -> int:
    """Pack small files into tasks of at most this many bytes: about four tasks per core so
    cores stay busy to the end, never tiny (1 MiB) nor huge (``GROUP_BYTES``)."""
    return int(min(GROUP_BYTES, max(1 << 20, total_bytes // max(1, 4 * parallelism))))


def plan_tasks(files: list[disc.FileEntry], group_bytes: int = GROUP_BYTES) -> list[dict]:
    """Tasks of whole files: big files alone, small files of one log dir packed together."""
    tasks: list[dict] = []
    current: list[dict] = []
    current_bytes = 0
    current_dir = None

    def close():
        nonlocal current, current_bytes
        if current:
            tasks.append({"bytes": current_bytes, "files": current})
        current, current_bytes = [], 0

    for f in sorted(files, key=lambda f: f.path):
        row = {k: getattr(f, k) for k in FILE_FIELDS}
        if f.size >= group_bytes:
            tasks.append({"bytes": f.size, "files": [row]})
            continue
        if current_dir != f.log_dir or current_bytes + f.size > group_bytes or len(current) >= GROUP_FILES:
            close()
            current_dir = f.log_dir
        current.append(row)
        current_bytes += f.size
    close()
    tasks.sort(key=lambda t: -t["bytes"])
    for i, t in enumerate(tasks):
        t["task"] = i
    return tasks


def _parse_write(tasks: list[dict], tables_dir: str, payloads: bool, files_acc, bytes_acc, parse_acc, focus=None):
    """The mapInArrow function of step 3 (a closure Spark ships to the executors, ``tasks`` in
    it): parse the tasks numbered in its batches, write their tables' Parquet files there and
    then, hand back only counts."""

    def run(batches):
        from pyspark import TaskContext

        from jobs.ingest.task_writer import write_task
        from jobs.ingest.tasks import run_task

        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        for batch in batches:
            for number in batch.column(0).to_pylist():
                task = tasks[number]
                timing: dict = {}
                counts = write_task(tables_dir, task["task"], attempt, run_task(task["files"], payloads, timing, focus), payloads)
                yield from counts.to_batches()
                if files_acc is not None:  # (none over Spark Connect)
                    files_acc.add(len(task["files"]))
                    parse_acc.add(timing.get("parse", 0.0))
                    bytes_acc.add(task["bytes"])

    return run


def task_frame(spark: SparkSession, tasks: list[dict]) -> DataFrame:
    """One row, and one Spark partition, per task number (``tasks[i]["task"] == i``, largest
    first), for ``mapInArrow`` to look the task up in its closure.

    Not a DataFrame of the task rows themselves: classic pyspark makes one from local rows (or
    ``parallelize``) as a Python RDD, unpickled by Python workers of their own, which cost a
    second daemon and a second Python process beside every parse task, each paying its start
    (measured: four workers for two cores, the first tasks 0.8 s slower). A range needs no
    Python at all, and is one partition per number over Spark Connect too."""
    return spark.range(0, len(tasks), 1, len(tasks))


def _spark_schema(schema: pa.Schema) -> T.StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def ingest(spark: SparkSession, inputs: list[Path], work_dir: Path, payloads: bool = False, progress: bool = True,
           found: disc.Discovery | None = None, focus: Focus | None = None) -> IngestResult:
    """Parse every file under ``inputs`` and write the tables under ``work_dir/tables/``.

    ``work_dir`` is the staging directory of ``outdir.staged_output``; no catalog is touched here
    (the catalog is registered after the swap, see catalog.py). ``found``: what
    ``discover_inputs(inputs, work_dir, focus)`` already returned (it is run here otherwise).
    ``focus``: only its partitions' files are parsed, and only its partitions' rows are kept.
    """
    from jobs.ingest.progress import Progress

    t0 = time.monotonic()
    work_dir = Path(work_dir)
    (work_dir / "tables").mkdir(parents=True, exist_ok=True)
    found = found or disc.discover_inputs(inputs, work_dir, focus)
    problems = found.problems
    total_bytes = sum(f.size for f in found.files)
    tasks = plan_tasks(found.files, group_bytes_for(total_bytes, parallelism(spark)))
    log.info("%d brokers, %d log dirs, %d files, %.1f MB in %d tasks", len(found.brokers),
             sum(len(b.log_dirs) for b in found.brokers), len(found.files), total_bytes / 1e6, len(tasks))
    seconds = {"discover": found.seconds + time.monotonic() - t0}

    # accumulators feed the progress bar and the summed parse time; Spark Connect has none (no
    # SparkContext): there, no bar and no ``task_parse`` in run.json
    remote = is_remote(spark)
    sc = None if remote else spark.sparkContext
    files_acc, bytes_acc, parse_acc = (None, None, None) if remote else (sc.accumulator(0), sc.accumulator(0), sc.accumulator(0.0))
    tables_dir = str(table_path(work_dir.absolute(), "brokers").parent)  # executors must see this path
    t1 = time.monotonic()
    counts = []
    with Progress(len(found.files), total_bytes, lambda: (files_acc.value, bytes_acc.value), enabled=progress and not remote):
        if tasks:
            task_df = task_frame(spark, tasks)
            from .task_writer import COUNTS_SCHEMA

            counts = task_df.mapInArrow(_parse_write(tasks, tables_dir, payloads, files_acc, bytes_acc, parse_acc, focus),
                                        _spark_schema(COUNTS_SCHEMA)).collect()
    seconds["parse"] = time.monotonic() - t1
    changes = disc.changes_since(found.files)
    if said := disc.changes_text(changes):
        log.warning("%s", said)
    if parse_acc is not None:
        seconds["task_parse"] = parse_acc.value  # summed over tasks: reading, hashing, parsing only
    seconds["task_write"] = sum(r["write_seconds"] for r in counts)  # summed over tasks: Parquet writes

    t2 = time.monotonic()
    from .task_writer import remove_temporaries, write_task

    remove_temporaries(tables_dir)
    if problems:  # discovery's and the archives' own, written as one more task would write them
        from .tasks import problem_rows

        extra = pa.concat_tables([
            problem_rows({"broker": None, "log_dir": None, "topic": None, "partition": None, "dir_state": None, "path": p["path"]},
                         [(p["position"], p["kind"], p["detail"])]) for p in problems])
        counts += write_task(tables_dir, len(tasks), 0, [("problems", extra)]).to_pylist()
    brokers = [asdict(b) for b in found.brokers]
    counts += write_task(tables_dir, 0, 0, [("brokers", pa.Table.from_pylist(brokers, schema=BROKERS))]).to_pylist()
    rows = {name: 0 for name in ALL_TABLES}
    for r in counts:
        rows[r["table"]] += r["rows"]
    for name, n in rows.items():
        if not n:  # no task fed it: an empty file still carries its schema
            write_empty(work_dir, name, schema_of(name, payloads))
    seconds["write"] = time.monotonic() - t2
    shutil.rmtree(work_dir / disc.WORK, ignore_errors=True)
    seconds["total"] = time.monotonic() - t0
    return IngestResult(work_dir, brokers, len(found.files), total_bytes, len(tasks), rows, seconds, rows["problems"], changes)
