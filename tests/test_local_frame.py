"""Rows the driver computed reach Spark as one Arrow table (``jobs.store.io.local_frame``): the
same frame as ``createDataFrame(rows, schema)``, without the pickled RDD and the job it costs."""

from pyspark.sql.pandas.types import from_arrow_schema

from jobs.replicas.survivors import SURVIVORS_SCHEMA
from jobs.store.io import local_frame
from jobs.store.tables import FINDINGS_SCHEMA as FINDINGS_ARROW

FINDINGS_SCHEMA = from_arrow_schema(FINDINGS_ARROW)

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


def test_an_absent_table_reads_as_an_empty_frame_of_its_schema_timestamps_included(spark, tmp_path):
    """read_table's fallback goes through local_frame: the tables with a timestamp column (files,
    records, log_events) need Arrow's timestamps given a time zone, or the fallback raised."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from jobs.store.io import read_table
    from jobs.store.tables import ALL_TABLES, schema_of

    for name in ALL_TABLES:
        df = read_table(spark, tmp_path, name)
        assert df.schema == from_arrow_schema(schema_of(name)) and df.isEmpty(), name


def test_a_row_of_the_wrong_length_is_refused(spark):
    """As createDataFrame refuses it: a field added to a schema and not to its rows must not become a
    column of nulls."""
    import pytest

    for row in (FINDING[:-1], (*FINDING, "extra")):
        with pytest.raises(ValueError):
            local_frame(spark, [row], FINDINGS_SCHEMA)
