"""Files → Parquet tables, parsing as Spark tasks.

Flow (all heavy work on executors, nothing parsed comes back to the driver):
1. discovery on the driver (``discover.discover_inputs``; archives extracted safely first) gives the
   file list; callers run it before starting Spark, so unusable input fails without a JVM;
2. files are packed into tasks: a file of ``GROUP_BYTES`` or more is a task of its own (a segment
   is never split: Kafka's default segment is 1 GiB and the parser streams it in 32 MiB chunks
   through bounded memory), smaller files of one log dir are grouped up to ``GROUP_BYTES`` /
   ``GROUP_FILES``; tasks are ordered largest first so the long ones start early;
3. the task list is written to the staging dir (``_work/tasks.arrow``, one Arrow record batch per
   task); ``spark.range`` gives one Spark partition per task number and ``mapInArrow`` runs
   ``tasks.run_task`` on the files of its number, read from that file, and the task writes each table's Parquet files itself
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
TASK_LIST = pa.schema([
    pa.field("task", pa.int32()),
    pa.field("bytes", pa.int64()),
    pa.field("files", pa.list_(pa.struct([
        pa.field("abs_path", pa.string()), pa.field("path", pa.string()), pa.field("broker", pa.int32()),
        pa.field("log_dir", pa.string()), pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
        pa.field("dir_state", pa.string()), pa.field("kind", pa.string()), pa.field("size", pa.int64()),
        pa.field("mtime_ms", pa.int64()), pa.field("archive", pa.string()),
    ]))),
])


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


def write_task_list(tasks: list[dict], path: Path) -> None:
    """The task list as an Arrow IPC file, task ``i`` in record batch ``i``, for ``read_task``.

    Why a file in the staging dir, which every executor must see anyway: a task then reads its
    own files and nothing else. Carried in the task function's closure, the whole list was
    unpickled by every task (~0.3 s and ~80 MB a task at 100,000 files) and, over Spark Connect,
    sat inline in a plan capped at 128 MiB; a DataFrame of the task rows is a Python RDD in
    classic pyspark, with a second daemon and a second Python worker beside every parse task."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, TASK_LIST) as writer:
        for t in tasks:
            writer.write_batch(pa.RecordBatch.from_pylist([t], TASK_LIST))


def read_task(path: str, number: int) -> dict:
    """Task ``number`` of a ``write_task_list`` file (memory-mapped: only its batch is read)."""
    with pa.memory_map(path) as source:
        return pa.ipc.open_file(source).get_batch(number).to_pylist()[0]


def _parse_write(task_list: str, tables_dir: str, payloads: bool, files_acc, bytes_acc, parse_acc, focus=None):
    """The mapInArrow function of step 3 (a closure Spark ships to the executors): parse the
    tasks numbered in its batches (read from ``task_list``), write their tables' Parquet files
    there and then, hand back only counts."""

    def run(batches):
        from pyspark import TaskContext

        from jobs.ingest.pipeline import read_task
        from jobs.ingest.task_writer import write_task
        from jobs.ingest.tasks import run_task

        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        for batch in batches:
            for number in batch.column(0).to_pylist():
                task = read_task(task_list, number)
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
    first). A range needs no Python to build, unlike a DataFrame of local rows (a Python RDD in
    classic pyspark), and is one partition per number over Spark Connect too."""
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
            task_list = work_dir.absolute() / disc.WORK / "tasks.arrow"  # executors must see this path too
            write_task_list(tasks, task_list)
            task_df = task_frame(spark, tasks)
            from .task_writer import COUNTS_SCHEMA

            counts = task_df.mapInArrow(_parse_write(str(task_list), tables_dir, payloads, files_acc, bytes_acc, parse_acc, focus),
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
