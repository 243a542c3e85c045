"""``jobs.session.memory.gc_frozen``: a Spark task's Python function starts with its worker's objects
frozen out of garbage collection, so the full ``gc.collect()`` pyspark runs after every task in a
reused worker looks at that task's objects only, not at the ~160,000 of numba, pyarrow and pandas."""

from __future__ import annotations

from jobs.history import metadata
from jobs.ingest import pipeline
from jobs.session.memory import gc_frozen

SCHEMA = "collectable long, frozen long"


def test_a_task_sees_its_worker_frozen(spark):
    """Run twice, so the second run's worker already holds what the first imported."""

    def _gc_state(batches):  # (defined here: shipped to the worker by value)
        import gc

        import numpy  # noqa: F401  (what a parse task holds: thousands of objects)
        import pyarrow

        for _ in batches:
            pass
        yield pyarrow.RecordBatch.from_pydict({"collectable": [len(gc.get_objects())], "frozen": [gc.get_freeze_count()]})

    df = spark.range(2, numPartitions=1)
    for _ in range(2):
        row = df.mapInArrow(gc_frozen(_gc_state), SCHEMA).collect()[0]
    assert row.frozen > 20_000
    assert row.collectable < row.frozen // 10


def test_the_python_tasks_of_ingest_and_the_metadata_replay_are_frozen_first():
    """Both of our Python task functions go through it (the parse tasks, one per few MB of input;
    the metadata replay, one per topic group)."""
    run = pipeline._parse_write("tasks", "tables", False, None, None, None)
    assert run.__wrapped__.__qualname__ == "_parse_write.<locals>.run"
    source = metadata.metadata_events.__code__.co_names
    assert "gc_frozen" in source and "_replay" in source


def test_a_frozen_group_function_is_still_one_pyspark_accepts(spark):
    """pyspark reads a grouped function's arguments (one: the group; two: key and group) before it
    runs it: the wrapper must show one, not ``*args``."""
    from pyspark.sql import functions as F

    def halve(pdf):
        return pdf.assign(id=pdf["id"] // 2)

    rows = spark.range(6).groupBy((F.col("id") % 2).alias("k")).applyInPandas(gc_frozen(halve), "id long").collect()
    assert sorted(r.id for r in rows) == [0, 0, 1, 1, 2, 2]


def test_a_task_freezes_once_not_at_every_group():
    """pyspark calls a grouped function once per group (the metadata replay: once per topic): a
    freeze before each would make every group's leftover reference cycles immortal."""
    import gc
    import weakref

    class Node:
        pass

    left: list[weakref.ref] = []

    def group(data):
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle only the collector frees
        left.append(weakref.ref(a))
        return data

    run = gc_frozen(group)  # one task's function (unpickled afresh for every task)
    try:
        for i in range(50):
            run(i)
        gc.collect()
        alive = sum(ref() is not None for ref in left)
    finally:
        gc.unfreeze()
    assert alive == 0
