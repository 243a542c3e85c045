"""Tables on disk: where each lives in an output DIR and how it is read and written (Parquet).

Ingest and the jobs share these, so a table is written the same way whoever produces it, and a
missing one reads as an empty table with its schema.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from .tables import ALL_TABLES, schema_of


def table_path(out: Path, name: str) -> Path:
    """Where table ``name`` lives in an output DIR (or a staging dir)."""
    return Path(out) / "tables" / name


def read_table(spark: SparkSession, out: Path, name: str) -> DataFrame:
    """Table ``name`` of an output DIR, without needing the catalog (an empty table if absent).

    An ingested table is read with the schema it was written with: Spark then needs no job to
    infer it from the files' footers (a job per table, most of a small analysis's reading)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    path = table_path(out, name)
    known = from_arrow_schema(schema_of(name)) if name in ALL_TABLES else None
    if not path.is_dir() or not (any(path.glob("*.parquet")) or any(path.glob("*=*"))):
        if known is not None:
            return spark.createDataFrame([], known)
        raise FileNotFoundError(f"no table {name!r} in {out}")
    reader = spark.read if known is None else spark.read.schema(known)
    return reader.parquet(str(path))


def write_table(df: DataFrame, out: Path, name: str, partition_by: list[str] | None = None) -> Path:
    """Write ``df`` as table ``name`` (Parquet, overwrite) under ``out/tables/``; used for job outputs too."""
    path = table_path(out, name)
    writer = df.write.mode("overwrite")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(str(path))
    return path


def write_empty(out: Path, name: str, schema: pa.Schema) -> Path:
    """An empty table that still carries its schema (Spark cannot infer one from no files), so
    readers, the catalog and spark-sql see every table even when no input file fed it."""
    import pyarrow.parquet as pq

    path = table_path(out, name)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    pq.write_table(schema.empty_table(), path / "part-00000-empty.parquet")
    return path
