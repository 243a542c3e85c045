"""Files → Parquet tables, parsing as Spark tasks.

Flow (all heavy work on executors, nothing parsed comes back to the driver):
1. discovery on the driver (``discover.discover_inputs``; archives extracted safely first) gives the
   file list; callers run it before starting Spark, so unusable input fails without a JVM;
2. files are packed into tasks: a file of ``GROUP_BYTES`` or more is a task of its own, smaller
   files are grouped, in path order, across log dirs and brokers (``group_bytes_for``, ``group_files_for``, ``GROUP_TOPICS``);
   a segment bigger than a core's share of the input is read in spans, one task each, cut at
   batch positions its offset index names (``split_segment``; after the job ``check_spans``
   verifies that they chained, as one reading from the start would); tasks are ordered largest
   first so the long ones start early;
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

import heapq
import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from jobs.session.connect import is_remote
from jobs.session.memory import gc_frozen
from jobs.session.parallel import executors_of, job_group, parallelism
from jobs.store.io import table_path, write_empty
from jobs.store.tables import ALL_TABLES, BROKERS, schema_of
from parsers.common import Problem
from parsers.headers import STOP_LIMIT

from . import discover as disc
from . import stores
from .focus import Focus

log = logging.getLogger(__name__)

GROUP_BYTES = 64 << 20
# a task's worker first loads numba's kernels: a small collection is done sooner in one task
# than in two (measured: docs/design.md, "Measurements behind the numbers")
MIN_GROUP_BYTES = 4 << 20
GROUP_FILES = 512  # the least and the most that group_files_for lets a task hold (a task may
GROUP_FILES_MAX = 4096  # hold fewer: its bytes or its topics close it sooner)
# a file costs about as much to open, hash and parse as this many bytes of a segment (~0.3 ms a
# small file, ~200 MB/s a core): tasks are ordered by bytes plus this per file, so that a task of
# thousands of small files is not the last to start
FILE_COST_BYTES = 64 << 10
# topics a task's files may name: each is a folder of each table of PARTITION_BY (records,
# batches), and a task keeps one Parquet writer, an open file, per folder until it commits:
# 2 x 128 and the unpartitioned tables' stay well under a default limit of 1,024 open files
GROUP_TOPICS = 128
SPAN_MIN_BYTES = 16 << 20  # a span of a split segment: never smaller (each task costs its start and its files)
# the first span of a split segment also reads and hashes the whole file, at about this many
# times the speed of parsing (SHA-256 ~1.9 GB/s, parsing ~200 MB/s a core): its task is ordered
# as if it were that much bigger, so that it starts first
HASH_SHARE = 8
# a Python task costs about as much to start as parsing this many bytes (~0.05-0.1 s against
# ~100 MB/s a core on small batches; docs/design.md): what a span more costs in balancing
TASK_COST_BYTES = 8 << 20
# the tasks are balanced when the core that ends last ends within this factor of an even share
BALANCE = 1.05

# a task's files are discover.FileEntry rows (its fields, in order: Kafka's int32s broker and
# partition as int32) with the span of a split segment they read
FILE_FIELDS = [f.name for f in fields(disc.FileEntry)]
_ARROW = {"str": pa.string(), "int": pa.int64()}
TASK_LIST = pa.schema([
    pa.field("task", pa.int32()),
    pa.field("bytes", pa.int64()),
    pa.field("files", pa.list_(pa.struct([
        *(pa.field(f.name, pa.int32() if f.name in ("broker", "partition") else _ARROW[f.type.removesuffix(" | None")])
          for f in fields(disc.FileEntry)),
        pa.field("span_start", pa.int64()), pa.field("span_stop", pa.int64()),
    ]))),
])
# what a task that read a span of a split segment hands back beside its counts (tasks.file_pieces)
SPAN_FIELDS = [pa.field("path", pa.string()), pa.field("span_start", pa.int64()), pa.field("span_next", pa.int64()),
               pa.field("span_code", pa.int32()), pa.field("first_base", pa.int64()), pa.field("last_offset", pa.int64())]


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
    executors: list[dict] | None = None  # spark.executors_of the parse tasks: where they ran


def group_bytes_for(total_bytes: int, parallelism: int) -> int:
    """Pack small files into tasks of at most this many bytes: about four tasks per core so
    cores stay busy to the end, never tiny (``MIN_GROUP_BYTES``) nor huge (``GROUP_BYTES``)."""
    return int(min(GROUP_BYTES, max(MIN_GROUP_BYTES, total_bytes // max(1, 4 * parallelism))))


def group_files_for(files: int, parallelism: int) -> int:
    """Pack small files into tasks of at most this many files: about four tasks per core, between
    ``GROUP_FILES`` and ``GROUP_FILES_MAX``. Why not always the least: a Python task costs Spark
    and pyspark time before its first file, and its first files cost more than its later ones
    (measured: docs/design.md)."""
    return int(min(GROUP_FILES_MAX, max(GROUP_FILES, files // max(1, 4 * parallelism))))


def span_bytes_for(total_bytes: int, cores: int) -> int:
    """The size of a split segment's spans at the least: two per core of the whole input. A
    segment is split only when it alone is more than a core's share (twice this), so a collection
    of many segments is not split at all, and a lone big one is spread over every core (fewer,
    bigger spans start fewer Python tasks: measured in docs/design.md). ``balanced_span_bytes``
    makes them smaller where a few big segments would leave a core idle at the end."""
    return max(SPAN_MIN_BYTES, total_bytes // (2 * cores))


def makespan(costs: list[int], cores: int) -> int:
    """When the last of ``cores`` would finish ``costs``, each task taken in this order by the
    first free core: how Spark's local scheduler hands out a stage's tasks (in partition order,
    ours largest first)."""
    loads = [0] * max(1, cores)
    for c in costs:
        heapq.heapreplace(loads, loads[0] + c)
    return max(loads)


def task_cost(t: dict) -> int:
    """A task's work in bytes, for ordering: its bytes, ``FILE_COST_BYTES`` a file, and the
    whole-file hash of a split segment's first span."""
    return (t["bytes"] + FILE_COST_BYTES * len(t["files"])
            + sum(f["size"] // HASH_SHARE for f in t["files"] if f["span_start"] == 0))


def balanced_span_bytes(whole: list[dict], cores: int) -> int:
    """The span size that keeps every core busy to the end, for ``whole``: the tasks of whole
    files (``plan_tasks`` without spans).

    Why: a segment a task of its own runs on one core, and a few of them leave the other cores
    idle while the last runs: one partition's three 100 MB replicas were three tasks on two cores,
    one core reading two of them and the other one (at best 1.5x one core, where the issue asks
    1.8x). Spans of a core's share (``span_bytes_for``) split only a segment bigger than twice
    that; here the span shrinks (a third, a quarter... of a core's share, never under
    ``SPAN_MIN_BYTES``) until the tasks, taken largest first by the first free core, end within
    ``BALANCE`` of one another's share, or no smaller span would do better: a collection of many
    segments balances with none split, and every span more costs a Python task's start."""
    total = sum(t["bytes"] for t in whole)
    if cores < 2 or not total:
        return span_bytes_for(total, cores)
    best = None
    for share in range(2, 17):
        span = max(SPAN_MIN_BYTES, total // (share * cores))
        costs = []  # (every whole file is hashed as it is read: a split moves that to its first span)
        for t in whole:
            f = t["files"][0]
            hashing = sum(g["size"] // HASH_SHARE for g in t["files"])
            if len(t["files"]) == 1 and f["kind"] == "segment" and f["size"] >= 2 * span:
                pieces = -(-f["size"] // span)
                costs += [f["size"] // pieces + FILE_COST_BYTES + TASK_COST_BYTES] * pieces
                costs[-pieces] += hashing
            else:
                costs.append(task_cost(t) + hashing + TASK_COST_BYTES)
        costs.sort(reverse=True)
        end = makespan(costs, cores)
        if best is None or end < best[0]:
            best = (end, span)
        if end <= sum(costs) / cores * BALANCE or span == SPAN_MIN_BYTES:
            break
    return best[1]


def span_cuts(index: bytes, size: int, spans: int) -> list[int]:
    """Where to cut a segment of ``size`` bytes into about ``spans`` parts: positions its offset
    index (``.index``: big-endian int32 relative offset, int32 position) names, nearest below
    each even share. An index entry names the position of a batch (``OffsetIndex.append`` is
    called with the batch's own position), so these are batch boundaries; only the entries that
    rise and stay inside the file count (a preallocated index ends in zero entries). The driver
    checks afterwards that the spans' readings chained (``check_spans``): a stale index costs a
    second reading, never a wrong one."""
    import numpy as np

    from parsers.offset_index import ENTRY_DTYPE, ENTRY_SIZE

    positions = np.frombuffer(index[: len(index) // ENTRY_SIZE * ENTRY_SIZE], ENTRY_DTYPE)["position"].astype(np.int64)
    rising = np.diff(positions, prepend=0) > 0
    usable = positions[: len(positions) if rising.all() else int(np.argmin(rising))]
    usable = usable[usable < size]
    if not len(usable):
        return []
    picks = np.searchsorted(usable, [size * k // spans for k in range(1, spans)], side="right") - 1
    return sorted({int(usable[i]) for i in picks if i >= 0})


def split_segment(row: dict, index: tuple[str, int] | None, span_bytes: int) -> list[dict]:
    """``row`` (a segment's task-list row) as rows of spans ``[span_start, span_stop)`` cut at the
    batch positions of its index (``(path, listed size)``), or ``[row]`` when it is not worth it
    or its index gives no cut.

    Why: a task reads one file, and a 1 GiB segment alone would hold one core while the others
    sit idle at the end of an ingest."""
    if row["kind"] != "segment" or index is None or row["size"] < 2 * span_bytes:
        return [row]
    from .stores import listed_bytes

    try:  # (read as every listed file is: no link followed, no fifo blocking, not grown)
        with listed_bytes(index[0], index[1]) as fb:
            cuts = span_cuts(fb.data, row["size"], -(-row["size"] // span_bytes))
    except OSError:
        return [row]
    if not cuts:
        return [row]
    bounds = [0, *cuts, row["size"]]
    return [{**row, "span_start": a, "span_stop": b} for a, b in zip(bounds, bounds[1:])]


def plan_tasks(files: list[disc.FileEntry], group_bytes: int = GROUP_BYTES, span_bytes: int | None = None,
               group_files: int = GROUP_FILES) -> list[dict]:
    """Tasks of whole files: big files alone, small files packed together in path order (up to
    ``group_bytes``, ``group_files`` and ``GROUP_TOPICS``), and with ``span_bytes`` a segment of
    twice that or more in spans of about that size, one task each.

    A task does not end at a log dir's end: a few brokers' small files were one task per log dir
    (five for the real-cluster example's 190 files on 2 cores), each paying a Python task's start
    and writing a Parquet file per table, which the jobs then read as that many more files."""
    tasks: list[dict] = []
    current: list[dict] = []
    current_bytes = 0
    topics: set = set()
    indexes = {f.abs_path: f.size for f in files if f.kind == "offset_index"}

    def close():
        nonlocal current, current_bytes
        if current:
            tasks.append({"bytes": current_bytes, "files": current})
        current, current_bytes = [], 0
        topics.clear()

    for f in sorted(files, key=lambda f: f.path):
        row = {k: getattr(f, k) for k in FILE_FIELDS} | {"span_start": None, "span_stop": None}
        if f.size >= group_bytes:
            index = f.abs_path[: -len(".log")] + ".index" if f.abs_path.endswith(".log") else None
            index = (index, indexes[index]) if index in indexes else None
            for part in split_segment(row, index, span_bytes) if span_bytes else [row]:
                size = part["size"] if part["span_start"] is None else part["span_stop"] - part["span_start"]
                tasks.append({"bytes": size, "files": [part]})
            continue
        if (current_bytes + f.size > group_bytes or len(current) >= group_files
                or (f.topic not in topics and len(topics) >= GROUP_TOPICS)):
            close()
        topics.add(f.topic)
        current.append(row)
        current_bytes += f.size
    close()
    tasks.sort(key=lambda t: -task_cost(t))  # (largest first: the long ones start early)
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


def task_results(counts: pa.Table, spans: list[dict]) -> pa.Table:
    """A task's counts (``COUNTS_SCHEMA``) and its span rows, as one table of ``result_schema()``."""
    schema = result_schema()
    counts = pa.Table.from_arrays([*counts.columns, *(pa.nulls(counts.num_rows, f.type) for f in SPAN_FIELDS)], schema=schema)
    return pa.concat_tables([counts, pa.Table.from_pylist(spans, schema=schema)]) if spans else counts


def result_schema() -> pa.Schema:
    """What a parse task hands back: a row per table it wrote (``COUNTS_SCHEMA``, span fields
    null) and a row per span it read (``table`` null)."""
    from .task_writer import COUNTS_SCHEMA

    return pa.schema(list(COUNTS_SCHEMA) + SPAN_FIELDS)


def planned_spans(tasks: list[dict]) -> dict[str, list[tuple[int, int]]]:
    """Path → (start, task number) of each span of every split segment of ``tasks``: what
    ``check_spans`` checks the spans' readings against."""
    planned: dict[str, list[tuple[int, int]]] = {}
    for t in tasks:
        for f in t["files"]:
            if f["span_start"] is not None:
                planned.setdefault(f["path"], []).append((f["span_start"], t["task"]))
    return planned


def check_spans(planned: dict[str, list[tuple[int, int]]], reported: list[dict]) -> tuple[set[int], dict[str, int], list[tuple[str, int, str]]]:
    """Whether the spans of each split segment read it as one reading from its start would.

    ``planned``: path → its spans' (start, task number); ``reported``: the span rows the tasks
    handed back. Returns the tasks whose output must go, the files to read again whole (path →
    the task number their reading takes), and the ``offset_regression`` problems (path, position,
    detail) that fall between two spans, which no single task could see.

    A span chains into the next when its reading stopped at its limit exactly where the next one
    starts. Where it stopped earlier (a corrupt length, a torn batch mid-file), Kafka's reading
    of the file ends there too: the spans after it are dropped, as a whole reading never reaches
    them. Where it went past the next span's start (the index named a position that is not a
    batch boundary) or a span reported nothing (its task failed to read the file), the file is
    read again whole."""
    got = {(r["path"], r["span_start"]): r for r in reported}
    discard: set[int] = set()
    rerun: dict[str, int] = {}
    problems: list[tuple[str, int, str]] = []
    for path, parts in planned.items():
        parts = sorted(parts)
        found: list[tuple[str, int, str]] = []
        prev_last = None
        for i, (start, _) in enumerate(parts):
            r = got.get((path, start))
            if r is None or (i + 1 < len(parts) and r["span_code"] == STOP_LIMIT and r["span_next"] != parts[i + 1][0]):
                discard.update(task for _, task in parts)
                rerun[path] = parts[0][1]
                found = []
                break
            if prev_last is not None and r["first_base"] is not None and r["first_base"] <= prev_last:
                found.append((path, start, f"batch base offset {r['first_base']} is not above the previous batch's last offset {prev_last}"))
            if r["last_offset"] is not None:
                prev_last = r["last_offset"]
            if r["span_code"] != STOP_LIMIT:
                discard.update(task for _, task in parts[i + 1:])
                break
        problems += found
    return discard, rerun, problems


def remove_task_files(tables_dir: str, tasks: set[int]) -> None:
    """Delete every table file these tasks wrote (``task_writer``'s ``part-<task>.parquet``)."""
    names = {f"part-{task:05d}.parquet" for task in tasks}
    for part in Path(tables_dir).rglob("part-*.parquet"):
        if part.name in names:
            part.unlink()


def _parse_write(task_list: str, tables_dir: str, payloads: bool, files_acc, bytes_acc, parse_acc, focus=None, known=None):
    """The mapInArrow function of step 3 (a closure Spark ships to the executors): parse the
    tasks numbered in its batches (read from ``task_list``), write their tables' Parquet files
    there and then, hand back only counts (and where each span of a split segment ended).
    ``known``: the object stores the driver listed (``stores.Store``: endpoints and regions,
    no credential), so the executors read where the driver listed."""

    @gc_frozen
    def run(batches):
        from pyspark import TaskContext

        from jobs.ingest import stores
        from jobs.ingest.pipeline import read_task, task_results
        from jobs.ingest.task_writer import write_task
        from jobs.ingest.tasks import run_task
        from parsers.common import keep_freed_memory

        if known:
            stores.use(known)
        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        keep_freed_memory()  # (this worker's memory reused from file to file, task to task)
        for batch in batches:
            for number in batch.column(0).to_pylist():
                task = read_task(task_list, number)
                timing: dict = {}
                spans: list[dict] = []
                counts = write_task(tables_dir, task["task"], attempt, run_task(task["files"], payloads, timing, focus, spans), payloads)
                yield from task_results(counts, spans).to_batches()
                if files_acc is not None:  # (none over Spark Connect)
                    files_acc.add(sum(1 for f in task["files"] if not f["span_start"]))
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
           found: disc.Discovery | None = None, focus: Focus | None = None, span_bytes: int | None = None) -> IngestResult:
    """Parse every file under ``inputs`` and write the tables under ``work_dir/tables/``.

    ``work_dir`` is the staging directory of ``outdir.staged_output``; no catalog is touched here
    (the catalog is registered after the swap, see catalog.py). ``found``: what
    ``discover_inputs(inputs, work_dir, focus)`` already returned (it is run here otherwise).
    ``focus``: only its partitions' files are parsed, and only its partitions' rows are kept.
    ``span_bytes``: the size of a split segment's spans (``balanced_span_bytes`` by default, and no
    split on one core).
    """
    from jobs.ingest.progress import Progress

    t0 = time.monotonic()
    work_dir = Path(work_dir)
    (work_dir / "tables").mkdir(parents=True, exist_ok=True)
    found = found or disc.discover_inputs(inputs, work_dir, focus)
    problems = found.problems
    total_bytes = sum(f.size for f in found.files)
    cores = parallelism(spark)
    group_bytes = group_bytes_for(total_bytes, cores)
    group_files = group_files_for(len(found.files), cores)
    if span_bytes is None and cores > 1:  # (on one core a split only adds tasks)
        span_bytes = span_bytes_for(total_bytes, cores)
        if any(f.kind == "segment" and f.size >= max(group_bytes, 2 * SPAN_MIN_BYTES) for f in found.files):  # (else none splits)
            span_bytes = balanced_span_bytes(plan_tasks(found.files, group_bytes, None, group_files), cores)
    tasks = plan_tasks(found.files, group_bytes, span_bytes, group_files)
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
    counts: list[dict] = []
    spans: list[dict] = []
    executors = None
    with Progress(len(found.files), total_bytes, lambda: (files_acc.value, bytes_acc.value), enabled=progress and not remote):
        if tasks:
            task_list = work_dir.absolute() / disc.WORK / "tasks.arrow"  # executors must see this path too
            write_task_list(tasks, task_list)
            task_df = task_frame(spark, tasks)
            parse = _parse_write(str(task_list), tables_dir, payloads, files_acc, bytes_acc, parse_acc, focus, stores.known())
            group = f"kafka-forensics-parse-{os.getpid()}-{time.monotonic_ns()}"
            try:
                with job_group(spark, group, "kafka-forensics: parse"):
                    results = task_df.mapInArrow(parse, _spark_schema(result_schema())).collect()
            except Exception as exc:  # a task the store refused (credentials, throttling): its one line, exit 2
                if (said := stores.failed_read(exc)) is None:
                    raise
                raise stores.StoreError(said) from None
            executors = executors_of(spark, group)
            counts = [r.asDict() for r in results if r["table"] is not None]
            spans = [r.asDict() for r in results if r["table"] is None]
    seconds["parse"] = time.monotonic() - t1
    changes = disc.changes_since(found.files)
    if said := disc.changes_text(changes):
        log.warning("%s", said)
    if parse_acc is not None:
        seconds["task_parse"] = parse_acc.value  # summed over tasks: reading, hashing, parsing only
    seconds["task_write"] = sum(r["write_seconds"] for r in counts)  # summed over tasks: Parquet writes

    t2 = time.monotonic()
    from .shaping import problem_rows
    from .task_writer import remove_temporaries, write_task
    from .tasks import run_task

    remove_temporaries(tables_dir)
    extra = []
    planned = planned_spans(tasks)
    if planned:
        by_path = {f["path"]: f for t in tasks for f in t["files"]}
        discard, rerun, between = check_spans(planned, spans)
        if discard:
            remove_task_files(tables_dir, discard)
        counts = [r for r in counts if r["task"] not in discard]
        for path, task in rerun.items():  # rare (a stale index, a span that failed): this file once more, whole, here
            log.warning("%s: its spans did not read as one reading would (a stale offset index, or a span that failed); read again whole", path)
            whole = {**by_path[path], "span_start": None, "span_stop": None}
            counts += write_task(tables_dir, task, 0, run_task([whole], payloads, focus=focus), payloads).to_pylist()
        extra += [problem_rows(by_path[path], [Problem(position, "offset_regression", detail)]) for path, position, detail in between]
    # discovery's and the archives' own problems, written as one more task would write them
    extra += [problem_rows({"broker": None, "log_dir": None, "topic": None, "partition": None, "dir_state": None, "path": p.path}, [p])
              for p in problems]
    if extra:
        counts += write_task(tables_dir, len(tasks), 0, [("problems", pa.concat_tables(extra))]).to_pylist()
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
    return IngestResult(work_dir, brokers, len(found.files), total_bytes, len(tasks), rows, seconds, rows["problems"], changes,
                        executors)
