"""A task shapes its pieces of one table together (``tasks.conform_all``): the rows must be those
of shaping each file's pieces alone (``tasks.parse_file``), in the same order, each row with its
own file's columns. No Spark: this is what a parse task does on an executor."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from jobs.ingest.discover import discover_inputs
from jobs.ingest.focus import Focus
from jobs.ingest.pipeline import plan_tasks
from jobs.ingest.tasks import Piece, conform, conform_all, parse_file, run_task

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
INPUTS = {
    # segments of several partitions and internal topics (metadata records), indexes, checkpoints, snapshots, broker logs
    "real-cluster": [FIXTURES / "real-cluster" / "unclean-election-divergence-rejoined"],
    # Kafka's own files and their damaged variants of every kind: problems from many parsers, between rows
    "golden": [FIXTURES / "golden" / "logdir", *sorted(p for p in (FIXTURES / "golden" / "corrupt").iterdir() if p.is_dir())],
}


def _tables(pieces) -> dict[str, pa.Table]:
    got: dict[str, list[pa.Table]] = {}
    for name, table in pieces:
        got.setdefault(name, []).append(table)
    tables = {name: pa.concat_tables(ts).combine_chunks() for name, ts in got.items()}
    return {name: t for name, t in tables.items() if t.num_rows}  # (a task writes no empty table)


@pytest.mark.parametrize("payloads", [False, True])
@pytest.mark.parametrize("which", sorted(INPUTS))
def test_a_task_shapes_its_files_as_each_file_alone(tmp_path, which, payloads):
    files = discover_inputs(INPUTS[which], tmp_path).files
    tasks = plan_tasks(files, 64 << 20)
    assert sum(len(t["files"]) for t in tasks) == len(files) > 20
    together = _tables(piece for task in tasks for piece in run_task(task["files"], payloads))
    alone = _tables(piece for task in tasks for f in task["files"] for piece in parse_file(f, payloads))
    assert sorted(together) == sorted(alone)
    assert {"batches", "records", "files"} | ({"problems"} if which == "golden" else set()) <= set(together)
    for name in together:
        assert together[name].equals(alone[name], check_metadata=True), name


def test_a_focused_task_keeps_the_rows_of_each_file_alone(tmp_path):
    """The focus filters the shaped rows: by each row's own file's topic and partition."""
    files = [f for task in plan_tasks(discover_inputs(INPUTS["real-cluster"], tmp_path).files, 64 << 20) for f in task["files"]]
    focus = Focus(partitions=(0,))
    focused = _tables(piece for piece in run_task(files, False, focus=focus))
    alone = _tables((name, focus.rows(t)) for f in files for name, t in parse_file(f))
    for name in focused:
        assert focused[name].equals(alone[name]), name
    assert set(focused["batches"].column("partition").to_pylist()) == {0, None}  # (None: bootstrap.checkpoint, in no partition)


def _file(path: str, partition: int) -> dict:
    return {"broker": 1, "log_dir": "/d", "topic": "t", "partition": partition, "dir_state": "live", "path": path}


def test_runs_of_different_raw_schemas_keep_file_order_and_columns():
    """Problems come from many parsers (with and without a path column): consecutive pieces of one
    raw schema are shaped together, and the runs joined in file order."""
    with_path = pa.table({"path": ["x"], "position": pa.array([1], pa.int64()), "kind": ["a"], "detail": ["d1"]})
    bare = pa.table({"position": pa.array([2, 3], pa.int64()), "kind": ["b", "c"], "detail": ["d2", "d3"]})
    pieces = [Piece("problems", with_path, _file("p0", 0)), Piece("problems", with_path, _file("p1", 1)),
              Piece("problems", bare, _file("p2", 2)), Piece("problems", with_path, _file("p3", 3))]
    shaped = conform_all(pieces)
    assert shaped.column("path").to_pylist() == ["p0", "p1", "p2", "p2", "p3"]
    assert shaped.column("partition").to_pylist() == [0, 1, 2, 2, 3]
    assert shaped.column("detail").to_pylist() == ["d1", "d1", "d2", "d3", "d1"]
    one_by_one = pa.concat_tables([conform(p.raw, "problems", p.f) for p in pieces])
    assert shaped.equals(one_by_one)
