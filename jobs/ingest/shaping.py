"""A parser's rows as an ingest table: the file's own columns in front, columns in the table's
schema and order, and a table's whole-column step (``Piece.finish``) run once for all its pieces.

Why apart from reading (``tasks.py``): what a task reads is a stream of ``Piece``s, a parser's rows as
it made them; shaping them is deferred and done for a run of pieces at once (``conform_all``), and
it is the same whether the pieces come from one file (``parse_file``), from a task's files
(``run_task``) or from a test. Shaping, from one piece to a task's: ``conform`` (one table, one
file), ``conform_run`` (pieces that share a layout), ``conform_all`` (runs of them, in file order),
``shaped`` (each piece alone where shaping the run failed). No Spark import here.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.store.tables import COMMON, TS, schema_of

_MAX_TS_MS = 253_402_300_799_999  # 9999-12-31: beyond this a Spark timestamp overflows


# tables whose topic/partition are the row's own (a checkpoint entry, a consumer commit, a
# metadata record, a log line), not those of the directory holding the file
OWN_COLUMNS: dict[str, set[str]] = {
    "checkpoints": {"topic", "partition", "dir_state"},
    "consumer_offsets": {"topic", "partition"},
    "share_group_state": {"topic", "partition"},
    "remote_segments": {"topic", "partition"},
    "metadata_records": {"topic", "partition"},
    "log_events": {"topic", "partition"},
}


# The file's own text columns of the tables with a row per batch or record: one value a file, so
# written as Arrow dictionaries (one value, an int32 index a row). Why: as plain strings, Parquet's
# dictionary encoder hashed every row's value to find the one it had already seen (~20 ns a row
# each, a tenth of the records table's write on 1.2 KiB batches); given the dictionary, it writes
# the indices as they are. The Parquet bytes are the same encoding (a dictionary page, then
# run-length indices) and read back as the same string column, in Spark and in pyarrow
# (``task_writer`` leaves the Arrow schema out of those files). ``topic`` and ``partition`` stay
# plain: the focus and the Hive folders filter on them.
ENCODED: dict[str, tuple[str, ...]] = {name: ("log_dir", "dir_state", "path") for name in ("records", "batches")}
_DICTIONARY = pa.dictionary(pa.int32(), pa.string())


@cache
def written_schema(name: str, payloads: bool = False) -> pa.Schema:
    """Table ``name``'s schema as a task shapes and writes it: ``schema_of``, with the ``ENCODED``
    columns Arrow dictionaries of their string values."""
    schema = schema_of(name, payloads)
    for column in ENCODED.get(name, ()):
        i = schema.get_field_index(column)
        schema = schema.set(i, schema.field(i).with_type(_DICTIONARY))
    return schema


_scalars_of: tuple = (None, {})  # the last file's (values, {column: pa.scalar}): its pieces come in a row


def _common(n: int, f: dict, names: Iterable[str] = ("broker", "log_dir", "topic", "partition", "dir_state", "path"),
            encoded: Iterable[str] = ()) -> dict:
    """The file's own columns, one value repeated on every row (``pa.repeat``: a Python list of
    ``n`` copies cost ~170 ns a row per column, a seventh of a segment's whole ingest); those
    ``encoded`` as a dictionary of that one value and ``n`` zero indices."""
    global _scalars_of
    values = tuple(f[c.name] for c in COMMON)
    known, scalars = _scalars_of  # (one tuple, swapped whole: threads never see half of one)
    if known != values:
        scalars = {c.name: pa.scalar(v, c.type) for c, v in zip(COMMON, values)}
        _scalars_of = (values, scalars)
    cols = {c.name: pa.repeat(scalars[c.name], n) for c in COMMON if c.name in names and c.name not in encoded}
    for name in encoded:
        cols[name] = _one_value(f[name], n)
    return cols


def _one_value(value: str | None, n: int) -> pa.DictionaryArray:
    """``n`` rows of ``value`` as a dictionary array (a null value: null indices, no entry)."""
    if value is None:
        return pa.DictionaryArray.from_arrays(pa.nulls(n, pa.int32()), pa.array([], pa.string()))
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value], pa.string()))


def _spread(values: list, which: pa.Array) -> pa.DictionaryArray:
    """Per-piece ``values`` spread over the rows (``which``: a row's piece) as a dictionary array
    of the distinct values (the Parquet writer needs each value once in a dictionary)."""
    encoded = pa.array(values, pa.string()).dictionary_encode()
    return pa.DictionaryArray.from_arrays(encoded.indices.take(which), encoded.dictionary)


_COMMON_NAMES = frozenset(c.name for c in COMMON)


@cache
def _layout(name: str, payloads: bool) -> tuple[pa.Schema, frozenset[str]]:
    """Table ``name``'s schema as written (``written_schema``) and which of its columns are the
    file's own (``COMMON`` less the entry's ``OWN_COLUMNS``). Worked out once: ``conform`` runs for
    every run of pieces, and for every piece of a file read alone (~100 µs a call when it rebuilt both)."""
    schema = written_schema(name, payloads)
    return schema, frozenset(c.name for c in schema if c.name in _COMMON_NAMES - OWN_COLUMNS.get(name, set()))


class Piece(NamedTuple):
    """Rows of one file for table ``name`` as its parser made them (``raw``), not yet in the
    table's schema: ``conform_run`` adds the file's own columns (from ``f``) and the per-file
    ``extra`` values, after ``finish`` (a whole-column step of the table's own, e.g. the records'
    timestamps). Why deferred: shaping a small file's pieces one by one cost ~100 µs each (a
    dozen Arrow calls a piece, four pieces a partition), more than reading them; a task shapes
    its pieces of one table in one go, one concatenation and one ``take`` a column."""

    name: str
    raw: pa.Table
    f: dict
    extra: Mapping[str, Any] = MappingProxyType({})
    finish: Callable[[pa.Table], pa.Table] | None = None


def conform(table: pa.Table, name: str, f: dict, payloads: bool = False, **extra) -> pa.Table:
    """A parser table as ingest table ``name``: common columns in front, ``path`` relative to the
    input root, columns in the schema's order (missing ones null)."""
    schema, common = _layout(name, payloads)
    n = table.num_rows
    cols = _common(n, f, common, ENCODED.get(name, ()))
    for key, value in extra.items():
        cols[key] = pa.repeat(pa.scalar(value, schema.field(key).type), n)
    return _assemble(table, schema, cols)


def conform_run(pieces: list[Piece], payloads: bool = False) -> pa.Table:
    """Pieces of one table with the same raw schema and ``extra`` keys, in file order, as one
    table in that table's schema (``Piece``): each file's own values are made an array of one
    value a piece and spread over its rows by a ``take``."""
    first = pieces[0]
    if len(pieces) == 1:
        raw = first.raw if first.finish is None else first.finish(first.raw)
        return conform(raw, first.name, first.f, payloads, **first.extra)
    schema, common = _layout(first.name, payloads)
    raw = pa.concat_tables([p.raw for p in pieces]).combine_chunks()
    if first.finish is not None:
        raw = first.finish(raw)
    counts = np.fromiter((p.raw.num_rows for p in pieces), np.int64, len(pieces))
    which = pa.array(np.repeat(np.arange(len(pieces), dtype=np.int32), counts))
    encoded = ENCODED.get(first.name, ())
    cols = {}
    for c in COMMON:
        if c.name in common:
            values = [p.f[c.name] for p in pieces]
            cols[c.name] = _spread(values, which) if c.name in encoded else pa.array(values, c.type).take(which)
    for key in first.extra:
        cols[key] = pa.array([p.extra[key] for p in pieces], schema.field(key).type).take(which)
    return _assemble(raw, schema, cols)


def conform_all(pieces: list[Piece], payloads: bool = False) -> pa.Table:
    """Pieces of one table in file order, as one table of its schema: ``conform_run`` over each
    run of consecutive pieces that share a raw schema, ``extra`` keys and ``finish`` (the pieces
    of one table are mostly one run; row order is kept)."""
    runs: list[list[Piece]] = []
    for p in pieces:
        last = runs[-1][-1] if runs else None
        if (last is not None and p.finish is last.finish and p.extra.keys() == last.extra.keys()
                and p.raw.schema.equals(last.raw.schema)):
            runs[-1].append(p)
        else:
            runs.append([p])
    tables = [conform_run(run, payloads) for run in runs]
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


def shaped(pieces: list[Piece], payloads: bool = False) -> list[tuple[str, pa.Table]]:
    """``conform_all`` of one table's pieces, as (name, rows); should shaping fail (a value
    that does not fit its column: a bug, as a parser's own is), each piece is shaped alone and
    one that still fails becomes a ``parser_error`` row naming its file, as in ``tasks.file_pieces``:
    the task's other rows are kept."""
    try:
        return [(pieces[0].name, conform_all(pieces, payloads))]
    except Exception:
        out = []
        for p in pieces:
            try:
                out.append((p.name, conform_run([p], payloads)))
            except Exception as exc:
                out.append(("problems", problem_rows(p.f, [(0, "parser_error", bug_detail(exc, f"{p.name} rows"))])))
        return out


def bug_detail(exc: Exception, what: str = "") -> str:
    """A parser_error row's text: what failed, the exception, and where it was raised."""
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{what}{': ' if what else ''}{type(exc).__name__}: {exc} (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})"


def _assemble(table: pa.Table, schema: pa.Schema, cols: dict[str, pa.Array]) -> pa.Table:
    """``schema``'s columns: from ``cols``, else ``table``'s (cast where its type differs), else nulls."""
    n = table.num_rows
    present = set(table.column_names)
    arrays = []
    for field in schema:
        if field.name in cols:
            arrays.append(cols[field.name])
        elif field.name in present:
            column = table.column(field.name)
            arrays.append(column if column.type == field.type else column.cast(field.type))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def records_final(table: pa.Table) -> pa.Table:
    """``records_raw`` rows with Spark's Kafka-source timestamp columns: ``timestamp`` (null
    where the stored value is -1 or past what Spark holds), ``timestampType`` (0 create, 1 log
    append: ``records_raw`` took it from the batch) and the stored ``timestamp_ms``."""
    ms = table.column("timestamp")
    tt = table.column("_timestamp_type")
    valid = pc.and_(pc.greater_equal(ms, 0), pc.less_equal(ms, _MAX_TS_MS))
    ts = pc.if_else(valid, pc.multiply(ms, 1000), pa.scalar(None, pa.int64())).cast(pa.int64()).cast(TS)
    table = table.drop_columns(["timestamp", "_timestamp_type"]).append_column("timestamp", ts)
    table = table.append_column("timestampType", tt)
    return table.append_column("timestamp_ms", ms)


def problem_rows(f: dict, rows: list[tuple[int, str, str]]) -> pa.Table:
    """``problems`` rows of file ``f`` from (position, kind, detail)."""
    return conform(problem_raw(rows), "problems", f)


def problem_raw(rows: list[tuple[int, str, str]]) -> pa.Table:
    return pa.table({"position": pa.array([r[0] for r in rows], pa.int64()), "kind": [r[1] for r in rows], "detail": [r[2] for r in rows]})


def files_row(f: dict, sha: str | None) -> dict:
    """The ``files`` row of one file, as Python values (``files`` table's schema; mtime in µs)."""
    _, common = _layout("files", False)
    row = {name: f[name] for name in common}
    row.update(kind=f["kind"], size=f["size"], sha256=sha, mtime=f["mtime_ms"] * 1000, archive=f["archive"])
    return row


def files_table(rows: list[dict]) -> pa.Table:
    """``files_row`` rows as a ``files`` table."""
    return pa.Table.from_pylist(rows, schema=_layout("files", False)[0])
