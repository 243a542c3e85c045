"""Where a parse task's tables go: Parquet files written by the task itself, on the executor.

Why the task writes them (and not a Spark writer after it): the rows a task parses are already
typed Arrow tables; handing them to Spark meant serializing them once more, staging them and
writing them a second time, which cost far more than parsing. Here each task writes its own
files with pyarrow and hands back only counts; Spark then reads the finished tables. The output
directory must therefore be a path every executor sees (local, NFS, a shared mount).

Layout, as Spark's own Parquet writer would make it, so ``spark.read.parquet`` and the catalog
read it unchanged: ``tables/<name>/[<col>=<value>/…]part-<task>.parquet``, Hive partition folders
for the columns of ``PARTITION_BY`` (escaped as Spark's ``ExternalCatalogUtils.escapePathName``,
a null or empty value in ``__HIVE_DEFAULT_PARTITION__``, the column left out of the file).

Commit: one file per task per table per partition folder, written under a hidden temporary name
(Spark skips names starting with ``.``) and renamed when the whole task succeeded. The final name
carries only the task number, so a retried or speculative attempt renames onto the same file:
rows are never doubled, and a failed attempt leaves at most hidden temporaries (removed by the
driver with ``remove_temporaries``). No Spark import here: it runs inside ``mapInArrow`` workers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs.ingest.shaping import written_schema
from jobs.store.tables import PARTITION_BY
from parsers.common import empty_table

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# Spark's ExternalCatalogUtils.charToEscape (copied from Hive's FileUtils), POSIX part
_ESCAPE = frozenset([chr(c) for c in range(0x01, 0x20)] + list('"#%\'*/:=?\\\x7f{[]^'))
TEMP_SUFFIX = ".tmp"
# Columns of SHA-256 hex digests (``key_sha256``, ``value_sha256``, ``sha256``): one distinct value a
# row in real data, so a dictionary only costs a hash table before Parquet falls back to plain,
# min/max statistics of random hex prune nothing, and snappy cannot shrink hex (no entropy
# coding); all three are off for them. Measured on 401,000 records with unique digests: 153 ms
# to write with the defaults, 108 ms so, for 58.4 against 59.9 MB (benchmarks/parse_bench.py).
DIGEST_SUFFIX = "sha256"

COUNTS_SCHEMA = pa.schema([
    pa.field("task", pa.int32()),
    pa.field("table", pa.string()),
    pa.field("rows", pa.int64()),
    pa.field("files", pa.int32()),
    pa.field("bytes", pa.int64()),  # Parquet bytes written
    pa.field("write_seconds", pa.float64()),
])


# Columns that rise through a task's file row after row (a record's or batch's offset, byte
# position, timestamps): written DELTA_BINARY_PACKED (Parquet's delta encoding; Spark's vectorized
# reader reads it) instead of dictionary-then-plain. Every value is new, so a dictionary only
# cost a hash table lookup a value before Parquet fell back to plain: 55-65 ns a record each for
# ``offset`` and ``position`` of the records table's ~470 ns write, against 7-9 so, measured on
# 786,780 records of 1.2 KiB batches (benchmarks/ingest_small_bench.py); and the deltas are small
# (0.01-0.8 bytes a value, against 4-5.5 plain with snappy), which the jobs' reads gain too.
RISING = {
    "records": ("offset", "timestamp", "timestamp_ms", "batch_position", "position"),
    "batches": ("position", "base_offset", "last_offset", "base_timestamp", "max_timestamp"),
}


@cache
def writer_options(schema: pa.Schema, name: str | None = None) -> dict:
    """ParquetWriter options for table ``name`` of ``schema``: snappy, dictionaries and statistics
    everywhere but in the digest columns, and the ``RISING`` columns delta-encoded. The per-column
    forms name Parquet leaf paths (``isr.list.element``, not ``isr``), and a column a list leaves out
    gets the feature off: so the paths are read from the Parquet schema pyarrow makes of ``schema``."""
    rising = [c for c in RISING.get(name, ()) if c in schema.names]
    if not rising and not any(c.endswith(DIGEST_SUFFIX) for c in schema.names):
        return {"compression": "snappy"}
    buf = pa.BufferOutputStream()
    pq.write_table(empty_table(schema), buf)  # (Schema.empty_table would import pandas in every parse worker)
    parquet = pq.ParquetFile(pa.BufferReader(buf.getvalue())).schema
    leaves = [parquet.column(i).path for i in range(len(parquet))]
    plain = [p for p in leaves if not p.split(".", 1)[0].endswith(DIGEST_SUFFIX)]
    options = {"compression": {p: "snappy" if p in plain else "none" for p in leaves},
               "use_dictionary": [p for p in plain if p not in rising], "write_statistics": plain}
    if rising:
        options["column_encoding"] = dict.fromkeys(rising, "DELTA_BINARY_PACKED")
    return options


def escape_path_name(value: str) -> str:
    """A partition value as Spark writes it in a folder name (``%XX`` for the risky characters)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in value)


def partition_folder(columns: list[str], values: tuple) -> str:
    """``col=value/…`` of one partition, the way Spark's dynamic partition writer names it."""
    parts = []
    for col, value in zip(columns, values):
        text = None if value is None else str(value)
        parts.append(f"{col}={DEFAULT_PARTITION if not text else escape_path_name(text)}")
    return "/".join(parts)


def split_partitions(table: pa.Table, columns: list[str]) -> Iterable[tuple[tuple, pa.Table]]:
    """(partition values, rows without the partition columns) of ``table``; one piece, unfiltered,
    in the common case of a table holding a single partition."""
    if not columns:
        yield (), table
        return
    keys = table.select(columns).group_by(columns).aggregate([]) if len(columns) > 1 else None
    combos = keys.to_pylist() if keys is not None else [{columns[0]: v} for v in pc.unique(table.column(columns[0])).to_pylist()]
    rest = table.drop_columns(columns)
    if len(combos) == 1:
        yield tuple(combos[0][c] for c in columns), rest
        return
    for combo in combos:
        mask = None
        for col in columns:
            value = combo[col]
            m = pc.is_null(table.column(col)) if value is None else pc.equal(table.column(col), pa.scalar(value, table.schema.field(col).type))
            m = pc.fill_null(m, False)
            mask = m if mask is None else pc.and_(mask, m)
        yield tuple(combo[c] for c in columns), rest.filter(mask)


class TaskWriter:
    """The Parquet files of one task (one per table per partition folder), committed together."""

    def __init__(self, tables_dir: str | Path, task: int, attempt: int = 0, payloads: bool = False):
        self.tables_dir = Path(tables_dir)
        self.task = task
        self.attempt = attempt
        self.payloads = payloads
        self.writers: dict[tuple[str, str], tuple[pq.ParquetWriter, Path, Path]] = {}
        self.rows: dict[str, int] = {}
        self.seconds: dict[str, float] = {}

    def _writer(self, name: str, folder: str, schema: pa.Schema) -> pq.ParquetWriter:
        key = (name, folder)
        if key not in self.writers:
            where = self.tables_dir / name / folder if folder else self.tables_dir / name
            where.mkdir(parents=True, exist_ok=True)
            final = where / f"part-{self.task:05d}.parquet"
            temp = where / f".{final.name}.{self.attempt}{TEMP_SUFFIX}"
            # (a dictionary column's Arrow type stays out of the file: it reads back as its plain
            # values' type, as the table's schema says; shaping.ENCODED)
            plain = not any(pa.types.is_dictionary(t) for t in schema.types)
            self.writers[key] = (pq.ParquetWriter(temp, schema, store_schema=plain, **writer_options(schema, name)), temp, final)
        return self.writers[key][0]

    def write(self, name: str, table: pa.Table) -> None:
        """Append ``table`` (already in table ``name``'s schema) to this task's files of it."""
        if not table.num_rows:
            return
        t = time.perf_counter()
        schema = written_schema(name, self.payloads)
        if not table.schema.equals(schema):
            table = table.cast(schema)
        columns = PARTITION_BY.get(name, [])
        for values, rows in split_partitions(table, columns):
            self._writer(name, partition_folder(columns, values), rows.schema).write_table(rows)
        self.rows[name] = self.rows.get(name, 0) + table.num_rows
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t

    def commit(self) -> pa.Table:
        """Close and rename every file into place; the counts (``COUNTS_SCHEMA``) per table."""
        files: dict[str, int] = {}
        sizes: dict[str, int] = {}
        for (name, _), (writer, temp, final) in self.writers.items():
            t = time.perf_counter()
            writer.close()
            os.replace(temp, final)
            files[name] = files.get(name, 0) + 1
            sizes[name] = sizes.get(name, 0) + final.stat().st_size
            self.seconds[name] += time.perf_counter() - t
        self.writers = {}
        names = sorted(self.rows)
        return pa.table({
            "task": pa.array([self.task] * len(names), pa.int32()),
            "table": pa.array(names, pa.string()),
            "rows": pa.array([self.rows[n] for n in names], pa.int64()),
            "files": pa.array([files.get(n, 0) for n in names], pa.int32()),
            "bytes": pa.array([sizes.get(n, 0) for n in names], pa.int64()),
            "write_seconds": pa.array([self.seconds[n] for n in names], pa.float64()),
        }, schema=COUNTS_SCHEMA)

    def abort(self) -> None:
        """Drop this attempt's temporaries (a failed attempt must leave no partial file)."""
        for writer, temp, _ in self.writers.values():
            try:
                writer.close()
            except Exception:  # closing a broken writer may fail too; the file goes anyway
                pass
            temp.unlink(missing_ok=True)
        self.writers = {}


def write_task(tables_dir: str | Path, task: int, attempt: int, pieces: Iterable[tuple[str, pa.Table]], payloads: bool = False) -> pa.Table:
    """Write one task's (table name, rows) pieces; all its files appear together or none do."""
    writer = TaskWriter(tables_dir, task, attempt, payloads)
    try:
        for name, table in pieces:
            writer.write(name, table)
        return writer.commit()
    except BaseException:
        writer.abort()
        raise


def remove_temporaries(tables_dir: str | Path) -> int:
    """Remove what failed attempts left (hidden ``.part-….tmp`` files); how many there were."""
    n = 0
    for temp in Path(tables_dir).rglob(f".part-*{TEMP_SUFFIX}"):
        temp.unlink(missing_ok=True)
        n += 1
    return n
