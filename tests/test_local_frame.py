"""Rows the driver computed reach Spark as one Arrow table (``jobs.store.io.local_frame``): the
same frame as ``createDataFrame(rows, schema)``, without the pickled RDD and the job it costs."""

from jobs.findings.model import FINDINGS_SCHEMA
from jobs.replicas.survivors import SURVIVORS_SCHEMA
from jobs.store.io import local_frame

FINDING = ("f1", "replica_divergence", "error", "t", 0, [1, 2], 5, 9, 5, 600, [3, 4], [(7, 0, 1, 5), (8, None, None, None)],
           None, 1_700_000_000_000, [(1, "b1/t-0/00000000000000000000.log", 70, "leader epochs [3]")], "why", [2], 1, "files")


def _plan(df) -> str:
    return df._jdf.queryExecution().analyzed().toString()


def test_local_frame_is_the_frame_create_dataframe_gives_as_a_local_relation(spark):
    for rows, schema in (([FINDING], FINDINGS_SCHEMA), ([], FINDINGS_SCHEMA), ([("t", 0, 2, 1, False, 1)], SURVIVORS_SCHEMA)):
        ours, theirs = local_frame(spark, rows, schema), spark.createDataFrame(rows, schema)
        assert ours.schema == theirs.schema == schema
        assert ours.collect() == theirs.collect()
        assert "LocalRelation" in _plan(ours) and "LogicalRDD" in _plan(theirs)  # (no pickled RDD: no job to read it back)
