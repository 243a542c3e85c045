"""``kafka-forensics sql``: one query, or an interactive prompt, over an output DIR's catalog."""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path
from typing import TextIO

from pyspark.errors import PySparkException, PythonException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.errors import InputError
from jobs.terminal import CONTROLS, escape

HISTORY = Path(os.environ.get("KF_SQL_HISTORY", Path.home() / ".kafka_forensics_sql_history"))
MAX_TABLE_ROWS = 10_000


class QueryError(InputError):
    """Spark refused the query or failed running it: its first line, exit 2."""


def emit(df: DataFrame, fmt: str, out: TextIO | None = None) -> int:
    """Print ``df`` as a text table, JSON Lines or CSV (``choices.SQL_FORMATS``; to ``out``, default
    the current stdout); returns the row count."""
    out = out or sys.stdout  # (looked up per call: a default bound at import keeps a replaced stdout)
    if fmt == "json":
        n = 0
        from pyspark.sql import functions as F

        for row in df.select(F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns]))).toLocalIterator():
            out.write(row[0] + "\n")
            n += 1
        return n
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(df.columns)
        n = 0
        for row in df.toLocalIterator():
            writer.writerow(["" if v is None else v for v in row])
            n += 1
        return n
    df = shown(df)
    rows = df.limit(MAX_TABLE_ROWS + 1).collect()
    out.write(df.limit(MAX_TABLE_ROWS)._show_string(MAX_TABLE_ROWS, 0, False))  # (pyspark's own, local and over Connect)
    if len(rows) > MAX_TABLE_ROWS:
        out.write(f"(first {MAX_TABLE_ROWS} rows; use --format csv or json for all)\n")
    return min(len(rows), MAX_TABLE_ROWS)


def _has_strings(dtype: T.DataType) -> bool:
    if isinstance(dtype, T.StringType):
        return True
    if isinstance(dtype, T.ArrayType):
        return _has_strings(dtype.elementType)
    if isinstance(dtype, T.MapType):
        return _has_strings(dtype.keyType) or _has_strings(dtype.valueType)
    if isinstance(dtype, T.StructType):
        return any(_has_strings(f.dataType) for f in dtype.fields)
    return False


def _escaped(col: Column, dtype: T.DataType) -> Column:
    """``col`` with every string in it, at any depth, escaped as ``jobs.terminal.escape``
    writes the ``CONTROLS``: one ``replace`` per character, each to ``escape``'s own spelling."""
    if isinstance(dtype, T.StringType):
        for c in CONTROLS:
            col = F.replace(col, F.lit(c), F.lit(escape(c)))
        return col
    if not _has_strings(dtype):
        return col
    if isinstance(dtype, T.ArrayType):
        return F.transform(col, lambda x: _escaped(x, dtype.elementType))
    if isinstance(dtype, T.MapType):
        col = F.transform_keys(col, lambda k, _: _escaped(k, dtype.keyType)) if _has_strings(dtype.keyType) else col
        return F.transform_values(col, lambda _, v: _escaped(v, dtype.valueType))
    if isinstance(dtype, T.StructType):
        fields = [_escaped(col[f.name], f.dataType).alias(f.name) for f in dtype.fields]
        return F.when(col.isNull(), F.lit(None)).otherwise(F.struct(*fields))
    return col


def shown(df: DataFrame) -> DataFrame:
    """``df`` as the table shows it: the control characters of its strings (names and lines
    from the evidence) escaped, as everything else that reaches a terminal (``jobs.terminal``).

    Why in Spark: ``show`` sizes its columns to the text it prints, so the escaped text must be
    what it measures (Spark escapes a few itself, ``\\n`` or ``\\a``, but sends ESC and the C1
    controls raw). Columns are renamed by position first: a query may return two of one name."""
    types = [f.dataType for f in df.schema.fields]
    if not any(map(_has_strings, types)):
        return df
    names = df.columns
    renamed = df.toDF(*[f"_{i}" for i in range(len(names))])
    return renamed.select(*[_escaped(F.col(f"_{i}"), t).alias(n) for i, (n, t) in enumerate(zip(names, types))])


def run_query(spark: SparkSession, query: str, fmt: str = "table", out: TextIO | None = None) -> int:
    """Run ``query`` and print its rows (``emit``); a query Spark refuses or fails is a ``QueryError``."""
    try:
        return emit(spark.sql(query), fmt, out)
    except PySparkException as exc:
        if not the_querys(exc):
            raise
        said = str(exc).strip()
        raise QueryError(said.splitlines()[0] if said else type(exc).__name__) from None


def the_querys(exc: PySparkException) -> bool:
    """Whether Spark's error is the query's fault: one the JVM raised, refusing the query
    (AnalysisException, ParseException) or failing as it ran (a cast ANSI mode refuses ...),
    locally or over Connect. Not a Python worker's (PythonException: code of ours), nor pyspark's
    own Python-side checks, which are builtins' errors too (PySparkValueError is a ValueError ...)."""
    return not isinstance(exc, (PythonException, ValueError, TypeError, LookupError, AttributeError, RuntimeError,
                                AssertionError, ImportError))


def repl(spark: SparkSession, fmt: str = "table") -> None:
    """A prompt with history (readline); a statement ends with ';' or an empty line."""
    try:
        import readline

        readline.set_history_length(1000)
        if HISTORY.is_file():
            readline.read_history_file(HISTORY)
    except (ImportError, OSError):
        readline = None  # type: ignore[assignment]
    print("tables: " + ", ".join(t.name for t in spark.catalog.listTables()), file=sys.stderr)
    print("end a statement with ';'; Ctrl-D to quit", file=sys.stderr)
    buf: list[str] = []
    while True:
        try:
            line = input("sql> " if not buf else "...> ")
        except EOFError:
            print(file=sys.stderr)
            break
        except KeyboardInterrupt:
            buf = []
            print(file=sys.stderr)
            continue
        buf.append(line)
        text = "\n".join(buf).strip()
        if not text:
            buf = []
            continue
        if not (text.endswith(";") or line.strip() == ""):
            continue
        buf = []
        try:
            run_query(spark, text.rstrip(";"), fmt)
        except QueryError as exc:  # AnalysisException, ParseException...: show and go on
            print(f"error: {escape(str(exc).splitlines()[0])}", file=sys.stderr)
    if readline is not None:
        try:
            readline.write_history_file(HISTORY)
        except OSError:
            pass
