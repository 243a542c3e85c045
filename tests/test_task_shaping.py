"""A task shapes its pieces of one table together (``shaping.conform_all``): the rows must be those
of shaping each file's pieces alone (``tasks.parse_file``), in the same order, each row with its
own file's columns. No Spark: this is what a parse task does on an executor."""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import SHARED

from jobs.ingest.discover import discover_inputs
from jobs.ingest.focus import Focus
from jobs.ingest.pipeline import plan_tasks
from jobs.ingest.shaping import Piece, conform, conform_all, shaped
from jobs.ingest.tasks import file_pieces, parse_file, records_raw, run_task

FIXTURES = SHARED / "fixtures"
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


def test_records_join_their_batch_as_the_hash_join_does_when_positions_do_not_rise():
    """A binary search over positions that do not rise can land on a later batch of the same
    position; the first one's facts are the record's (as ``index_in`` finds it)."""
    batches = pa.table({"position": pa.array([4, 3, 4], pa.int64()), "timestamp_type": ["create"] * 3,
                        "partition_leader_epoch": pa.array([0, 0, 0], pa.int32()), "producer_id": pa.array([100, 101, 102], pa.int64()),
                        "is_transactional": [False] * 3})
    records = pa.table({"batch_position": pa.array([4], pa.int64()), "timestamp": pa.array([1], pa.int64())})
    assert records_raw(records, batches).column("producer_id").to_pylist() == [100]


def test_a_piece_that_cannot_be_shaped_is_a_problem_of_its_file_and_the_others_stay():
    good = pa.table({"position": pa.array([0], pa.int64()), "kind": ["a"], "detail": ["fine"]})
    bad = pa.table({"position": pa.array(["not a number"]), "kind": ["b"], "detail": ["broken"]})
    out = shaped([Piece("problems", good, _file("p0", 0)), Piece("problems", bad, _file("p1", 1))])
    rows = pa.concat_tables([t for _, t in out]).to_pylist()
    assert [r["path"] for r in rows] == ["p0", "p1"]
    assert rows[0]["detail"] == "fine"
    assert rows[1]["kind"] == "parser_error" and "problems rows" in rows[1]["detail"]


def test_an_internal_topics_records_leave_their_payloads_unless_asked(tmp_path):
    """Their payloads are read to decode them; without ``payloads`` they leave before the task's
    pieces wait to be shaped (they would be dropped then, but held and copied until)."""
    files = [f for task in plan_tasks(discover_inputs(INPUTS["real-cluster"], tmp_path).files, 64 << 20) for f in task["files"]]
    meta = next(f for f in files if f["kind"] == "segment" and f["topic"] == "__cluster_metadata")
    for payloads in (False, True):
        recs = [p for p in file_pieces(meta, payloads) if isinstance(p, Piece) and p.name == "records"]
        assert recs and all(("key" in p.raw.column_names) == payloads for p in recs)


def test_small_segments_read_together_still_wait_for_a_row_group(tmp_path, monkeypatch):
    """A file's piece of a group read together is a slice of the group's table, whose buffers are
    the whole group's: only a piece that is itself big ends a row group early."""
    import jobs.ingest.tasks as tasks

    monkeypatch.setattr(tasks, "PIECE_BYTES", 256 << 10)
    files = [f for task in plan_tasks(discover_inputs([FIXTURES / "real-cluster" / "crash-only"], tmp_path).files, 64 << 20)
             for f in task["files"]]
    small = [f for f in files if tasks.groupable(f)]
    assert len(small) > 10 and sum(f["size"] for f in small) > 3 * tasks.PIECE_BYTES
    assert [name for name, _ in run_task(files)].count("records") == 1
