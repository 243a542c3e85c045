"""``kafka-forensics sql``: one query, or an interactive prompt, over an output DIR's catalog."""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path
from typing import TextIO

from pyspark.errors import PySparkException, PythonException
from pyspark.sql import DataFrame, SparkSession

from jobs.errors import InputError

FORMATS = ("table", "json", "csv")
HISTORY = Path(os.environ.get("KF_SQL_HISTORY", Path.home() / ".kafka_forensics_sql_history"))
MAX_TABLE_ROWS = 10_000


class QueryError(InputError):
    """Spark refused the query or failed running it: its first line, exit 2."""


def emit(df: DataFrame, fmt: str, out: TextIO | None = None) -> int:
    """Print ``df`` as a text table, JSON Lines or CSV (to ``out``, default the current stdout);
    returns the row count."""
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
    rows = df.limit(MAX_TABLE_ROWS + 1).collect()
    out.write(df.limit(MAX_TABLE_ROWS)._show_string(MAX_TABLE_ROWS, 0, False))  # (pyspark's own, local and over Connect)
    if len(rows) > MAX_TABLE_ROWS:
        out.write(f"(first {MAX_TABLE_ROWS} rows; use --format csv or json for all)\n")
    return min(len(rows), MAX_TABLE_ROWS)


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
            print(f"error: {exc}", file=sys.stderr)
    if readline is not None:
        try:
            readline.write_history_file(HISTORY)
        except OSError:
            pass
