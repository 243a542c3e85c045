"""ingest's tables hold what ``dump`` reads file by file: per broker, per partition, the same
batch and record counts, on every real-cluster scenario, every found dataset and an archive."""

from __future__ import annotations

import os
import tarfile
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import FOUND, REAL

from jobs.ingest.pipeline import ingest
from jobs.store.io import read_table
from jobs.store.tables import ALL_TABLES, PARTITION_BY, schema_of
from parsers.files import SEGMENT_KINDS, detect, parse_path
from parsers.meta_properties import parse as parse_meta

REAL_SCENARIOS = sorted(p.name for p in REAL.iterdir() if p.is_dir())
FOUND_DATASETS = sorted(p.name for p in FOUND.iterdir() if p.is_dir())


def _log_dir_of(path: Path, root: Path) -> Path:
    for parent in path.parents:
        if (parent / "meta.properties").is_file() or parent == root:
            return parent
    return root


def dump_counts(root: Path) -> tuple[Counter, Counter]:
    """(broker, topic, partition) -> batches / records, as dump reads each segment-kind file;
    the broker from the log dir's meta.properties."""
    batches, records = Counter(), Counter()
    for dirpath, _, names in os.walk(root):
        for name in names:
            kind = detect(name)
            if kind not in SEGMENT_KINDS:
                continue
            full = Path(dirpath) / name
            ld = _log_dir_of(full, root)
            meta = parse_meta((ld / "meta.properties").read_bytes(), "m").table.to_pylist()[0]
            part = full.parent.name if full.parent != ld else None
            topic, partition = (part.rsplit("-", 1)[0], int(part.rsplit("-", 1)[1])) if part else (None, None)
            key = (meta["node_id"], topic, partition)
            for piece in parse_path(str(full), kind, records=True):
                batches[key] += piece.table.num_rows
                records[key] += piece.extra["records"].num_rows
    return batches, records


def table_counts(spark, out: Path, name: str) -> Counter:
    rows = read_table(spark, out, name).groupBy("broker", "topic", "partition").count().collect()
    return Counter({(r["broker"], r["topic"], r["partition"]): r["count"] for r in rows})


def check(spark, src: Path, out: Path, inputs: list[Path] | None = None):
    result = ingest(spark, inputs or [src], out, progress=False)
    batches, records = dump_counts(src)
    assert table_counts(spark, out, "batches") == +batches
    assert table_counts(spark, out, "records") == +records
    n_files = sum(len(f) for _, _, f in os.walk(src))
    assert result.files <= n_files
    assert result.rows["files"] == result.files
    for name in ALL_TABLES:  # what the tasks counted is what Spark reads, typed as schema_of says
        df = read_table(spark, out, name)
        assert df.schema == spark_schema(name, has_rows=result.rows[name] > 0), name
        assert df.count() == result.rows[name], name
    return result


def spark_schema(name: str, has_rows: bool):
    """Table ``name`` as Spark reads it: ``schema_of`` with the Hive partition columns last (a
    table no task fed is one unpartitioned empty file)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = schema_of(name)
    cols = PARTITION_BY.get(name, []) if has_rows else []
    return from_arrow_schema(pa.schema([f for f in schema if f.name not in cols] + [schema.field(c) for c in cols]))


@pytest.mark.parametrize("scenario", REAL_SCENARIOS)
def test_real_cluster(spark, tmp_path, scenario):
    src = REAL / scenario
    result = check(spark, src, tmp_path / "out")
    brokers = {b["broker"]: b for b in result.brokers}
    assert set(brokers) == {1, 2, 3, 100}
    assert all(b["id_source"] == "meta.properties" for b in brokers.values())
    assert brokers[100]["roles"] == "controller" and brokers[1]["roles"] == "broker"
    files = read_table(spark, tmp_path / "out", "files")
    assert files.where("sha256 is null").count() == 0
    assert files.where("path like 'broker-1/%'").select("broker").distinct().collect()[0][0] == 1


@pytest.fixture(scope="module")
def found_out(spark, tmp_path_factory):
    """All found datasets in one ingest (several INPUTs: paths start with each dataset's name)."""
    out = tmp_path_factory.mktemp("found") / "out"
    result = ingest(spark, [FOUND / d for d in FOUND_DATASETS], out, progress=False)
    return out, result


@pytest.mark.parametrize("dataset", FOUND_DATASETS)
def test_found(spark, found_out, dataset):
    out, result = found_out
    batches, records = dump_counts(FOUND / dataset)
    for name, expected in (("batches", batches), ("records", records)):
        df = read_table(spark, out, name).where(f"log_dir like '{dataset}/%'")
        got = Counter({(r["broker"], r["topic"], r["partition"]): r["count"]
                       for r in df.groupBy("broker", "topic", "partition").count().collect()})
        assert got == +expected, name
    brokers = [b for b in result.brokers if any(ld.startswith(dataset + "/") for ld in b["log_dirs"])]
    assert {b["id_source"] for b in brokers} == {"meta.properties"}
    if dataset.startswith("k3x-zk-3brokers"):
        assert sorted(b["broker"] for b in brokers) == [1, 2, 3]
    files = read_table(spark, out, "files").where(f"path like '{dataset}/%'").count()
    on_disk = sum(len(f) for _, _, f in os.walk(FOUND / dataset)) - 2  # MISSING.tsv, SHA256SUMS
    assert files == on_disk


def test_tar_gz(spark, tmp_path):
    src = REAL / "crash-only"
    archive = tmp_path / "crash-only.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        for sub in ("broker-1", "broker-2", "broker-3", "controller-100"):
            tf.add(src / sub, arcname=f"crash-only/{sub}")
    before = archive.stat().st_mtime_ns
    out = tmp_path / "out"
    check(spark, src, out, inputs=[archive])
    paths = [r["path"] for r in read_table(spark, out, "files").select("path").collect()]
    assert all(p.startswith("crash-only.tar.gz/crash-only/") for p in paths)
    assert archive.stat().st_mtime_ns == before
    assert not (out / "_work").exists()


def test_bad_file_is_a_problem_row(spark, tmp_path):
    """A garbage segment and an unreadable checkpoint give problem rows, never a failed run."""
    ld = tmp_path / "in" / "kafka-logs"
    (ld / "t-0").mkdir(parents=True)
    (ld / "meta.properties").write_text("version=0\nbroker.id=7\n")
    (ld / "t-0" / "00000000000000000000.log").write_bytes(os.urandom(5000))
    bad = ld / "replication-offset-checkpoint"
    bad.write_text("0\n1\nt 0 5\n")
    bad.chmod(0)
    try:
        ingest(spark, [tmp_path / "in"], tmp_path / "out", progress=False)
    finally:
        bad.chmod(0o644)
    problems = read_table(spark, tmp_path / "out", "problems").collect()
    paths = {p["path"] for p in problems}
    assert "kafka-logs/t-0/00000000000000000000.log" in paths
    if os.geteuid() != 0:
        assert any(p["kind"] == "unreadable_file" and p["path"].endswith("replication-offset-checkpoint") for p in problems)


def test_the_task_list_needs_no_python_worker_of_its_own(spark):
    """The parse tasks' input is a range, not a DataFrame of the task rows: classic pyspark makes
    those a Python RDD, unpickled by a second daemon and a second Python process beside every
    parse task (four workers on two cores, each paying its start)."""
    from jobs.ingest.pipeline import task_frame

    tasks = [{"task": i, "bytes": 1, "files": []} for i in range(3)]
    df = task_frame(spark, tasks)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "Range" in plan and "ExistingRDD" not in plan and "Python" not in plan
    assert df.rdd.getNumPartitions() == 3
    assert [r.id for r in df.collect()] == [0, 1, 2]


def test_a_task_reads_only_its_own_files_from_the_task_list(tmp_path):
    """The task list is a file in the staging dir, one record batch per task: a task reads its
    own batch (it used to travel in the task function, unpickled whole by every task)."""
    from jobs.ingest.pipeline import TASK_LIST, read_task, write_task_list

    def file(i: int) -> dict:
        return {f.name: None for f in TASK_LIST.field("files").type.value_type} | {"abs_path": f"/in/{i}.log", "path": f"{i}.log", "broker": 1, "partition": i,
                                                 "kind": "segment", "size": i, "mtime_ms": 7}

    tasks = [{"task": i, "bytes": 10 * i, "files": [file(i), file(i + 100)]} for i in range(3)]
    write_task_list(tasks, tmp_path / "_work" / "tasks.arrow")
    assert [read_task(str(tmp_path / "_work" / "tasks.arrow"), i) for i in (2, 0, 1)] == [tasks[2], tasks[0], tasks[1]]


def test_a_task_names_few_topics_and_many_files():
    """Small files are packed by the thousand (a Python task costs ~60 ms before its first file),
    but a task's files name at most ``GROUP_TOPICS`` topics: each is a folder of the partitioned
    tables, and a task holds a Parquet writer (an open file) per folder until it commits."""
    from jobs.ingest.discover import FileEntry
    from jobs.ingest.pipeline import GROUP_FILES, GROUP_FILES_MAX, GROUP_TOPICS, group_files_for, plan_tasks

    def entry(topic: int, name: str) -> FileEntry:
        path = f"b1/t{topic:04d}-0/{name}"
        return FileEntry(f"/in/{path}", path, 1, "b1", f"t{topic:04d}", 0, None, "partition_metadata", 10, 0, None)

    one_topic = [entry(0, f"{i:05d}.snapshot") for i in range(3000)]
    assert [len(t["files"]) for t in plan_tasks(one_topic, 1 << 30, group_files=group_files_for(90_000, 2))] == [3000]
    many_topics = [entry(t, "partition.metadata") for t in range(300)]
    tasks = plan_tasks(many_topics, 1 << 30, group_files=GROUP_FILES_MAX)
    assert max(len({f["topic"] for f in t["files"]}) for t in tasks) == GROUP_TOPICS
    assert sum(len(t["files"]) for t in tasks) == 300
    assert group_files_for(1_000, 2) == GROUP_FILES and group_files_for(10**7, 2) == GROUP_FILES_MAX


def test_small_files_of_several_log_dirs_share_a_task():
    """A task is not closed at a log dir's end: a collection of a few brokers' small files was one
    task per log dir (five tasks for the real-cluster example's 190 files on 2 cores), each paying
    a Python task's start and a Parquet file per table, and leaving the jobs that many more files
    to read."""
    from jobs.ingest.discover import FileEntry
    from jobs.ingest.pipeline import plan_tasks

    files = [FileEntry(f"/in/b{b}/d{d}/t-0/{i:020d}.log", f"b{b}/d{d}/t-0/{i:020d}.log", b, f"b{b}/d{d}", "t", 0, None, "segment",
                       1000, 0, None) for b in (1, 2, 3) for d in (1, 2) for i in range(3)]
    tasks = plan_tasks(files, 1 << 20, group_files=512)
    assert [len(t["files"]) for t in tasks] == [18]
    assert {f["log_dir"] for f in tasks[0]["files"]} == {f"b{b}/d{d}" for b in (1, 2, 3) for d in (1, 2)}


def test_a_task_of_many_small_files_starts_before_a_bigger_file():
    """Tasks start in order of their cost, not of their bytes only: thousands of small files cost
    more to open, hash and parse than one segment of a few MB, and started last they would hold
    up the end of the ingest."""
    from jobs.ingest.discover import FileEntry
    from jobs.ingest.pipeline import plan_tasks

    small = [FileEntry(f"/in/b1/t-0/{i:05d}.snapshot", f"b1/t-0/{i:05d}.snapshot", 1, "b1", "t", 0, None, "producer_snapshot",
                       10, 0, None) for i in range(3000)]
    big = FileEntry("/in/b1/u-0/00000000000000000000.log", "b1/u-0/00000000000000000000.log", 1, "b1", "u", 0, None, "segment",
                    8 << 20, 0, None)
    tasks = plan_tasks([*small, big], 1 << 20, group_files=4096)
    assert [len(t["files"]) for t in tasks] == [3000, 1]


def test_a_few_big_segments_are_split_so_both_cores_work_to_the_end():
    """One partition's three 100 MB replicas were three tasks on two cores: one core read two
    segments while the other read one and then sat idle (at best 1.5x one core). The span size
    shrinks until the tasks, taken largest first by the first free core, end together; a
    collection of many segments is balanced whole (none split: each span is a Python task more),
    and a lone big segment is still spread over both cores."""
    from jobs.ingest.pipeline import BALANCE, balanced_span_bytes, makespan, span_bytes_for

    def segment(size: int) -> dict:
        return {"bytes": size, "files": [{"kind": "segment", "size": size, "span_start": None}]}

    def end(whole: list[dict], span: int, cores: int = 2) -> float:
        """The makespan of ``whole`` read in spans of ``span`` (each piece a task), over an even share."""
        pieces = sorted((s["bytes"] // n for s in whole for n in [-(-s["bytes"] // span) if s["bytes"] >= 2 * span else 1]
                         for _ in range(n)), reverse=True)
        return makespan(pieces, cores) / (sum(pieces) / cores)

    three = [segment(100_000_000) for _ in range(3)]
    span = balanced_span_bytes(three, 2)
    assert 2 * span <= 100_000_000 and end(three, span) <= BALANCE  # split
    assert end(three, span_bytes_for(300_000_000, 2)) >= 1.3  # (what a core's share gave: no split)
    many = [segment(100_000_000) for _ in range(24)]
    assert balanced_span_bytes(many, 2) > 50_000_000  # none split
    assert (1 << 30) // 8 <= balanced_span_bytes([segment(1 << 30)], 2) <= span_bytes_for(1 << 30, 2)  # 4-8 spans
    assert balanced_span_bytes(three, 1) == span_bytes_for(300_000_000, 1)
