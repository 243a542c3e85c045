"""A parse task's own Parquet files: laid out and typed as Spark's writer would (Spark reads them
back with the table's schema, Hive folders named as Spark names them), committed all at once, and
a retried attempt never doubles a row."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.ingest.shaping import conform
from jobs.ingest.task_writer import TEMP_SUFFIX, partition_folder, remove_temporaries, write_task
from jobs.store.tables import PARTITION_BY, schema_of

# topics a hostile or odd input may give a partition folder: Spark must read every one back
TOPICS = ["plain", "a/b", "x=y", "50%", "sp ace", "ü-topic", "", None, "123"]


def file_of(topic) -> dict:
    return {"broker": 1, "log_dir": "d", "topic": topic, "partition": 0, "dir_state": None, "path": "d/t-0/0.log"}


def batches_of(topic, n: int = 3, first: int = 0) -> pa.Table:
    """``n`` rows of the batches table for one topic, offsets from ``first``."""
    f = file_of(topic)
    t = pa.table({"position": pa.array(range(first, first + n), pa.int64()),
                  "base_offset": pa.array(range(first, first + n), pa.int64()),
                  "magic": pa.array([2] * n, pa.int8())})
    return conform(t, "batches", f)


def visible_files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))


def test_folders_are_named_as_spark_names_them(spark, tmp_path):
    """The same rows written by Spark's partitionBy and by a task land in the same folders."""
    table = pa.concat_tables([batches_of(t, 1) for t in TOPICS])
    spark.createDataFrame(table.to_pandas(), from_arrow_schema(table.schema)).write.partitionBy("topic").parquet(str(tmp_path / "spark"))
    ours = {partition_folder(["topic"], (t,)) for t in TOPICS}
    theirs = {p.name for p in (tmp_path / "spark").iterdir() if p.is_dir()}
    assert ours == theirs


def test_spark_reads_the_tables_schema_and_rows(spark, tmp_path):
    """Several topics in one task's rows: one file per topic folder, read back with the types of
    ``schema_of`` (partition column last, as Spark infers it) and every row once."""
    table = pa.concat_tables([batches_of(t, 2) for t in TOPICS])
    counts = write_task(tmp_path, 3, 0, [("batches", table)]).to_pylist()
    assert counts == [{"task": 3, "table": "batches", "rows": len(table), "files": len(set(TOPICS) - {""}),
                       "bytes": counts[0]["bytes"], "write_seconds": counts[0]["write_seconds"]}]
    df = spark.read.parquet(str(tmp_path / "batches"))
    schema = schema_of("batches")
    cols = PARTITION_BY["batches"]
    expected = from_arrow_schema(pa.schema([f for f in schema if f.name not in cols] + [schema.field(c) for c in cols]))
    assert df.schema == expected
    got = Counter((r["topic"], r["position"]) for r in df.select("topic", "position").collect())
    want = Counter((t or None, p) for t in TOPICS for p in range(2))  # Spark reads "" back as null
    assert got == want


def test_a_retried_task_replaces_its_files(tmp_path):
    """A second attempt of the same task renames onto the first attempt's files: same names, no
    row twice, and a failed attempt leaves nothing Spark would read."""
    write_task(tmp_path, 7, 0, [("batches", batches_of("t", 5)), ("files", conform(pa.table({"size": [1]}), "files", file_of("t")))])
    first = visible_files(tmp_path)

    def failing():
        yield "batches", batches_of("t", 5, first=100)
        yield "batches", batches_of("u", 5, first=100)
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_task(tmp_path, 8, 1, failing())
    assert visible_files(tmp_path) == first
    assert not list(tmp_path.rglob(f"*{TEMP_SUFFIX}"))
    write_task(tmp_path, 7, 1, [("batches", batches_of("t", 5)), ("files", conform(pa.table({"size": [1]}), "files", file_of("t")))])
    assert visible_files(tmp_path) == first == ["batches/topic=t/part-00007.parquet", "files/part-00007.parquet"]
    assert pq.read_table(tmp_path / "batches" / "topic=t").num_rows == 5


def test_remove_temporaries(tmp_path):
    """What a killed attempt leaves (it never reached abort) is removed by the driver."""
    folder = tmp_path / "records" / "topic=t"
    folder.mkdir(parents=True)
    (folder / f".part-00001.parquet.0{TEMP_SUFFIX}").write_bytes(b"partial")
    (folder / "part-00002.parquet").write_bytes(b"kept")
    assert remove_temporaries(tmp_path) == 1
    assert visible_files(tmp_path) == ["records/topic=t/part-00002.parquet"]


def test_digest_columns_are_written_plain(tmp_path):
    """SHA-256 hex digests are one distinct value a row: no dictionary, no min/max statistics, no
    snappy (it cannot shrink hex); the other columns keep all three."""
    import hashlib

    n = 1000
    f = file_of("plain")
    records = conform(pa.table({
        "offset": pa.array(range(n), pa.int64()),
        "key_sha256": pa.array([hashlib.sha256(str(i).encode()).hexdigest() for i in range(n)]),
        "value_sha256": pa.array([hashlib.sha256(str(-i).encode()).hexdigest() for i in range(n)]),
    }), "records", f)
    write_task(tmp_path, 0, 0, [("records", records)])
    (path,) = (tmp_path / "records").rglob("part-*.parquet")
    group = pq.ParquetFile(path).metadata.row_group(0)
    chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    for name in ("key_sha256", "value_sha256"):
        assert chunks[name].compression == "UNCOMPRESSED" and not chunks[name].is_stats_set
        assert not any("DICTIONARY" in e for e in chunks[name].encodings)
    assert chunks["offset"].compression == "SNAPPY" and chunks["offset"].is_stats_set
    assert pq.read_table(path).column("key_sha256").to_pylist() == records.column("key_sha256").to_pylist()


def test_nested_columns_keep_compression_dictionaries_and_statistics(tmp_path):
    """Per-column writer options name Parquet leaf paths (``log_dirs.list.element``): a list
    column must not fall outside them and lose snappy, its dictionary and its statistics."""
    from jobs.store.tables import BROKERS

    rows = [{"broker": b, "cluster_id": "c", "directory_ids": ["d1", "d2"], "log_dirs": ["/var/kafka"], "id_source": "meta",
             "roles": "broker", "files": 3, "bytes": 10} for b in range(50)]
    write_task(tmp_path, 0, 0, [("brokers", pa.Table.from_pylist(rows, schema=BROKERS))])
    (path,) = (tmp_path / "brokers").rglob("part-*.parquet")
    group = pq.ParquetFile(path).metadata.row_group(0)
    chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    leaf = chunks["log_dirs.list.element"]
    assert leaf.compression == "SNAPPY" and leaf.is_stats_set and any("DICTIONARY" in e for e in leaf.encodings)


def test_rising_columns_are_delta_encoded_and_read_back(spark, tmp_path):
    """A record's or batch's offset, position and timestamps rise row after row: written
    DELTA_BINARY_PACKED (``task_writer.RISING``), never through a dictionary, which only cost a
    hash lookup a value before Parquet fell back to plain; statistics kept (they prune by offset).
    Spark's vectorized reader reads them back, nulls (a compressed batch's record positions) too."""
    n = 3000
    f = file_of("plain")
    ms = [1_700_000_000_000 + i for i in range(n)]
    raw = pa.table({
        "offset": pa.array(range(n), pa.int64()),
        "batch_position": pa.array([i // 10 * 1200 for i in range(n)], pa.int64()),
        "position": pa.array([None if i % 7 == 0 else i * 120 for i in range(n)], pa.int64()),
        "timestamp_ms": pa.array(ms, pa.int64()),
        "timestamp": pa.array([m * 1000 for m in ms], pa.int64()).cast(schema_of("records").field("timestamp").type),
    })
    write_task(tmp_path, 0, 0, [("records", conform(raw, "records", f)), ("batches", batches_of("plain", n))])
    for table, rising in (("records", ["offset", "batch_position", "position", "timestamp_ms", "timestamp"]),
                          ("batches", ["position", "base_offset"])):
        (path,) = (tmp_path / table).rglob("part-*.parquet")
        group = pq.ParquetFile(path).metadata.row_group(0)
        chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
        for name in rising:
            assert "DELTA_BINARY_PACKED" in chunks[name].encodings, (table, name)
            assert not any("DICTIONARY" in e for e in chunks[name].encodings), (table, name)
            assert chunks[name].is_stats_set, (table, name)
    df = spark.read.parquet(str(tmp_path / "records"))
    got = sorted(tuple(r) for r in df.select("offset", "batch_position", "position", "timestamp_ms", "timestamp").collect())
    assert [g[:4] for g in got] == [(i, i // 10 * 1200, None if i % 7 == 0 else i * 120, ms[i]) for i in range(n)]
    assert [int(g[4].timestamp() * 1000) for g in got] == ms


def test_file_columns_are_dictionaries_and_read_back_as_strings(spark, tmp_path):
    """A record's or batch's file columns (``log_dir``, ``dir_state``, ``path``) hold one value a
    file: shaped as Arrow dictionaries (``shaping.ENCODED``), so Parquet writes their indices
    instead of hashing every row's string to find its dictionary entry. What reads the files
    back, pyarrow or Spark, sees the table's schema: plain strings, the same values, nulls kept."""
    from jobs.ingest.shaping import Piece, conform_all

    def raw(first: int, n: int) -> pa.Table:
        return pa.table({"offset": pa.array(range(first, first + n), pa.int64())})

    files = [{**file_of("plain"), "path": f"d/t-0/{i}.log", "dir_state": None if i == 1 else "live"} for i in range(3)]
    shaped = conform_all([Piece("records", raw(0, 4), files[0]), Piece("records", raw(4, 3), files[1]),
                          Piece("records", raw(7, 2), files[0])])
    alone = conform(raw(9, 5), "records", files[2])
    for table in (shaped, alone):
        assert all(pa.types.is_dictionary(table.schema.field(c).type) for c in ("log_dir", "dir_state", "path"))
    write_task(tmp_path, 0, 0, [("records", shaped), ("records", alone)])
    (path,) = (tmp_path / "records").rglob("part-*.parquet")
    expected = schema_of("records").remove(schema_of("records").get_field_index("topic"))
    back = pq.read_table(path)
    assert back.schema.equals(expected)
    paths = ["d/t-0/0.log"] * 4 + ["d/t-0/1.log"] * 3 + ["d/t-0/0.log"] * 2 + ["d/t-0/2.log"] * 5
    states = ["live"] * 4 + [None] * 3 + ["live"] * 7
    assert back.select(["offset", "path", "dir_state", "log_dir"]).to_pylist() == [
        {"offset": i, "path": p, "dir_state": s, "log_dir": "d"} for i, (p, s) in enumerate(zip(paths, states))]
    df = spark.read.parquet(str(tmp_path / "records"))
    assert dict(df.dtypes)["path"] == "string"
    assert sorted(tuple(r) for r in df.select("offset", "path", "dir_state").collect()) == list(zip(range(14), paths, states))
