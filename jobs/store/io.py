"""Tables on disk: where each lives in an output DIR and how it is read and written (Parquet).

Ingest and the jobs share these, so a table is written the same way whoever produces it, and a
missing one reads as an empty table with its schema.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from .tables import ALL_TABLES, schema_of


def table_path(out: Path, name: str) -> Path:
    """Where table ``name`` lives in an output DIR (or a staging dir)."""
    return Path(out) / "tables" / name


def declared_schema(path: Path, name: str):
    """The Spark schema of table folder ``path`` (table ``name``) without a Spark job, or None.

    Why: without a schema Spark infers one with a job per table that reads a footer in a thread
    pool of its own; registering ~28 tables in the catalog, or opening them as views for one
    query, paid those jobs beside the analysis (and 7 CPU-s on two cores). The schema is known
    without them: an ingested table's is ours (with the payload columns when its files hold
    them, ``--payloads``), and a job table's is in its files' footer, where Spark wrote it."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructType

    path = Path(path)
    first = next((f for f in path.rglob("*.parquet") if not any(part[0] in "_." for part in f.relative_to(path).parts)), None)
    if first is None:
        return None
    import pyarrow.parquet as pq

    try:
        footer = pq.read_schema(first)
    except (OSError, pa.ArrowException):
        return None
    if name in ALL_TABLES:
        ours = schema_of(name, payloads=name == "records" and "value" in footer.names)
        # (files of another version, with a column ours lacks or typed otherwise: let Spark read them)
        same = all(n in ours.names and ours.field(n).type == footer.field(n).type for n in footer.names)
        return from_arrow_schema(ours) if same else None
    spark_json = (footer.metadata or {}).get(b"org.apache.spark.sql.parquet.row.metadata")
    if spark_json is None or any(p.is_dir() and "=" in p.name for p in path.iterdir()):
        return None  # (a partitioned folder's partition columns are not in the footer)
    try:
        return StructType.fromJson(json.loads(spark_json))
    except (ValueError, KeyError, TypeError):  # (not what Spark writes there: let Spark read the files)
        return None


def read_parquet(spark: SparkSession, path: Path, name: str, fallback=None) -> DataFrame:
    """Table folder ``path`` as a DataFrame, with its ``declared_schema`` where there is one, else
    ``fallback`` (None: Spark infers one)."""
    known = declared_schema(path, name)
    known = fallback if known is None else known
    reader = spark.read if known is None else spark.read.schema(known)
    return reader.parquet(str(path))


def local_frame(spark: SparkSession, rows: list, schema: StructType) -> DataFrame:
    """A DataFrame of ``rows`` the driver computed (tuples in ``schema``'s field order, each of
    its length), handed to Spark as one Arrow table.

    Why not ``createDataFrame(rows, schema)``: in a classic session Python rows are pickled into an
    RDD that the JVM unpickles in a job of its own, ~1.0 s cold against ~0.3 s for the same rows as
    Arrow; a small analysis made four such frames (the findings, the restart preview, its cuts, the
    survivors). (Over Spark Connect both travel as Arrow.) For rows of the schema's types the frame
    and the Parquet Spark writes of it are the same; Arrow converts values itself (a float in an
    integer field is truncated where pyspark refused it, a naive datetime is read as UTC, the
    session's time zone, where pyspark read it as local time): the callers pass ints, strings,
    bools and lists of them."""
    from pyspark.sql.pandas.types import to_arrow_schema

    names = schema.fieldNames()
    arrow = to_arrow_schema(schema, timezone="UTC")
    return spark.createDataFrame(pa.Table.from_pylist([dict(zip(names, row, strict=True)) for row in rows], schema=arrow), schema)


def read_table(spark: SparkSession, out: Path, name: str) -> DataFrame:
    """Table ``name`` of an output DIR, without needing the catalog (an empty table if absent).

    Read with its declared schema (``declared_schema``): Spark then needs no job to infer it from
    the files' footers (a job per table, most of a small analysis's reading)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    path = table_path(out, name)
    ours = from_arrow_schema(schema_of(name)) if name in ALL_TABLES else None
    if not path.is_dir() or not (any(path.glob("*.parquet")) or any(path.glob("*=*"))):
        if ours is not None:
            return local_frame(spark, [], ours)
        raise FileNotFoundError(f"no table {name!r} in {out}")
    return read_parquet(spark, path, name, fallback=ours)


def collected(df: DataFrame) -> list:
    """The rows of a small DataFrame, sorted by their values column by column.

    Why: a table read back from its files comes in the order Spark packs them (the biggest file
    first), not the order it was written in; evidence lists and finding ids built from the rows
    must not depend on how a table happened to be split into files."""
    return collected_rows(df.collect())


def collected_rows(rows: list) -> list:
    """``rows`` sorted as ``collected`` sorts them."""
    return sorted(rows, key=row_key)


def collected_together(*frames: DataFrame) -> list[list]:
    """The rows of several small DataFrames (``collected``, each sorted), from one Spark query.

    Why: each ``collect`` is a Spark job of its own, ~0.1 s of planning and scheduling whatever
    its rows; the job tables' small frames (per replica, epoch or event) were five of them. Here
    each frame's rows travel as one struct column of a union (the others null in its rows), and
    the driver sorts them back out: one job, and a shuffle one frame needs is its only other."""
    cols = [f"_frame{i}" for i in range(len(frames))]
    union = None
    for df, c in zip(frames, cols, strict=True):
        part = df.select(F.struct(*[F.col(f"`{n}`") for n in df.columns]).alias(c))
        union = part if union is None else union.unionByName(part, allowMissingColumns=True)
    rows = union.collect()
    return [collected_rows([r[c] for r in rows if r[c] is not None]) for c in cols]


def row_key(row) -> tuple:
    """The key ``collected`` sorts rows by: their values column by column."""
    return tuple((v is None, repr(v) if isinstance(v, (tuple, list, dict)) else v) for v in row)


def row_count(out: Path, name: str) -> int:
    """How many rows input table ``name`` of an output DIR holds, from its Parquet footers (no
    Spark job): 0 for a table ingest wrote empty or not at all. Whole passes over a table that is
    empty (most collections hold no KRaft metadata log) are skipped on it."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in data_files(table_path(out, name)))


def data_files(path: Path) -> list[Path]:
    """The Parquet files of a table folder (none when it is missing), not Spark's markers or hidden files."""
    if not path.is_dir():
        return []
    return [f for f in path.rglob("*.parquet") if not any(part[0] in "_." for part in f.relative_to(path).parts)]


def small_table(out: Path, name: str, columns: list[str], filters=None) -> list[dict]:
    """Rows (``columns`` of them, ``filters`` as ``pyarrow.parquet.read_table`` takes them) of an
    input table small enough for the driver (one row per log dir or a few records), or of a job
    table (as Spark wrote it), read with pyarrow: a Spark scan and collect of a few rows is a
    Spark job of its own."""
    return arrow_table(out, name, columns, filters).to_pylist() if data_files(table_path(out, name)) else []


def arrow_table(out: Path, name: str, columns: list[str], filters=None) -> pa.Table:
    """``small_table``'s rows as an Arrow table (of ``columns``; empty, with their types, when the
    table is): what the job tables computed on the driver read (``jobs.replicas.grouped``)."""
    import pyarrow.parquet as pq

    path = table_path(out, name)
    schema = schema_of(name) if name in ALL_TABLES else None
    if schema is not None and not data_files(path):  # (no file: the table was written empty, or not at all)
        return pa.schema([schema.field(c) for c in columns]).empty_table()
    return pq.read_table(path, columns=columns, filters=filters, schema=schema)


def write_empty_job_table(out: Path, name: str, schema: StructType) -> Path:
    """Job table ``name`` written empty without a Spark job (``write_local_table`` of no rows)."""
    return write_local_table(out, name, [], schema)


def write_local_table(out: Path, name: str, rows: list | pa.Table, schema: StructType) -> Path:
    """Job table ``name`` of ``rows`` the driver computed (as ``local_frame`` takes them, or an
    Arrow table with the schema's columns), written
    by pyarrow: one Parquet file, with Spark schema ``schema`` in its footer where Spark keeps it,
    so that ``declared_schema`` reads it back as if Spark had written it.

    Why: written through Spark, a small table the driver built was a Spark job of its own (the
    frame handed over, then written), ~0.1 s to write a few rows."""
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(schema, timezone="UTC").with_metadata({"org.apache.spark.sql.parquet.row.metadata": schema.json()})
    names = schema.fieldNames()
    path = table_path(out, name)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    table = rows.select(names).cast(arrow) if isinstance(rows, pa.Table) else \
        pa.Table.from_pylist([dict(zip(names, row, strict=True)) for row in rows], schema=arrow)
    pq.write_table(table, path / "part-00000.parquet")
    return path


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
