"""The persistent catalog: ``ingest`` registers DIR's tables, and ``kafka-forensics sql``,
``spark-sql`` and pyspark (the README's one-liners, run as written) all query them by name.

Each step is its own process: one JVM pins one Derby metastore (see jobs/store/catalog.py)."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from conftest import REAL, REPO

QUERY = "select broker, topic, partition, count(*) from records group by 1,2,3"
BIN = Path(sys.executable).parent


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run(args: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600, **kw)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def readme_line(start: str) -> str:
    lines = [ln for ln in (REPO / "README.md").read_text().splitlines() if ln.startswith(start)]
    assert len(lines) == 1, f"README must hold exactly one line starting with {start!r}"
    return lines[0]


def _counts_from_rows(rows) -> Counter:
    out = Counter()
    for broker, topic, partition, n in rows:
        out[(int(broker), None if topic in ("", "NULL") else topic, None if partition in ("", "NULL") else int(partition))] = int(n)
    return out


def test_ingest_sql_spark_sql_pyspark(tmp_path):
    out = tmp_path / "case"
    cli = str(BIN / "kafka-forensics")
    _run([cli, "ingest", str(REAL / "crash-only"), "--out", str(out), "--quiet"], tmp_path)
    assert (out / "catalog" / "metastore_db").is_dir() and (out / "catalog" / "spark-sql.conf").is_file()
    assert not (tmp_path / "derby.log").exists() and not (tmp_path / "metastore_db").exists()

    # spark-sql, exactly as the README says
    proc = _run(["bash", "-c", f"DIR={out}; " + readme_line("SPARK_HOME=")], tmp_path)
    rows = [ln.split("\t") for ln in proc.stdout.splitlines() if ln.strip()]
    via_spark_sql = _counts_from_rows(rows)
    assert via_spark_sql[(1, "tc", 0)] == 300 and via_spark_sql[(2, "tc", 0)] == 550
    assert {k[0] for k in via_spark_sql} == {1, 2, 3, 100}

    # a one-shot read of DIR's tables: temporary views, no metastore booted (Derby logs each boot)
    derby_log = out / "catalog" / "derby.log"
    before = derby_log.read_bytes()
    proc = _run([cli, "sql", str(out), "select count(*) as n from records where broker = 1", "--format", "csv"], tmp_path)
    assert proc.stdout.splitlines() == ["n", str(sum(n for k, n in via_spark_sql.items() if k[0] == 1))]
    assert derby_log.read_bytes() == before

    # moved DIR: kafka-forensics sql rebuilds the catalog for the new place
    moved = tmp_path / "moved"
    shutil.move(out, moved)
    proc = _run([cli, "sql", str(moved), QUERY, "--format", "csv"], tmp_path)
    rows = list(csv.reader(io.StringIO(proc.stdout)))[1:]
    assert _counts_from_rows(rows) == via_spark_sql

    # pyspark, exactly as the README says
    proc = _run(["bash", "-c", f"DIR={moved}; " + readme_line('python -c "import sys; from pyspark')], tmp_path)
    table_rows = [ln.strip("|").split("|") for ln in proc.stdout.splitlines() if ln.startswith("|") and "broker" not in ln]
    assert _counts_from_rows([[c.strip() for c in r] for r in table_rows]) == via_spark_sql
    assert not (tmp_path / "derby.log").exists()


def test_formats_and_prompt(spark, monkeypatch, capsys, tmp_path):
    """table/json/csv output and the interactive prompt (multi-line statements, errors go on)."""
    from analyzer import sql

    spark.range(3).selectExpr("id", "cast(id as string) as s").createOrReplaceTempView("nums")
    buf = io.StringIO()
    assert sql.run_query(spark, "select id, s from nums order by id", "json", buf) == 3
    assert buf.getvalue().splitlines()[0] == '{"id":0,"s":"0"}'
    buf = io.StringIO()
    sql.run_query(spark, "select id from nums order by id", "table", buf)
    assert "|id |" in buf.getvalue() and "|2  |" in buf.getvalue()
    monkeypatch.setattr(sql, "HISTORY", tmp_path / "history")
    monkeypatch.setattr("sys.stdin", io.StringIO("select count(*) as n\nfrom nums;\nselect * from no_such_table;\nselect 7 as x;\n"))
    sql.repl(spark, "csv")
    out, err = capsys.readouterr()
    assert "n\n3\n" in out and "x\n7\n" in out
    assert "error:" in err


def test_which_queries_are_read_from_views():
    """A one-shot query is answered from temporary views only when its text says for certain that
    it reads DIR's tables and nothing else; anything else goes to DIR's catalog. The views are
    every DIR table named as a word (a CTE may read the table it shadows)."""
    from jobs.store.catalog import tables_of_query

    names = ["batches", "files", "findings", "problems", "records", "replica_logs"]
    assert tables_of_query("select * from records", names) == ["records"]
    assert tables_of_query("SELECT b.x FROM records r JOIN batches b ON r.p = b.p", names) == ["batches", "records"]
    assert tables_of_query("with x as (select * from records) select * from x", names) == ["records"]
    assert tables_of_query("with a as (select 1), b (n) as (select * from findings) select * from a join b", names) == ["findings"]
    assert tables_of_query("select 'from files' as s from `replica_logs`", names) == ["replica_logs"]
    assert tables_of_query("(select * from files) union (select * from files)", names) == ["files"]
    assert tables_of_query("select 1", names) == []
    assert tables_of_query("select broker, topic, partition, count(*) from records group by 1,2,3", names) == ["records"]
    # every table a query reads is a view, however it is named
    assert tables_of_query("select * from records, batches where records.x = batches.x", names) == ["batches", "records"]
    assert tables_of_query("select * from records join (problems) on true", names) == ["problems", "records"]
    assert tables_of_query("with records as (select * from records where topic = 'x') select count(*) from records", names) == ["records"]
    assert tables_of_query("select * from records -- don't\njoin batches on true -- it's", names) == ["batches", "records"]
    assert tables_of_query("select * from records where detail = '-- not a comment' or x in (select x from files)", names) == ["files", "records"]
    for query in ("show tables", "describe records", "create table x as select * from records", "select * from mine",
                  "select * from default.records", "select extract(year from timestamp) from records",
                  "insert into records select * from records", "select * from records r, default.secret s",
                  "with x as (select 1) insert into records select * from x", "from records insert into foo select *"):
        assert tables_of_query(query, names) is None, query


def test_tables_are_read_with_their_schema_and_no_spark_job(spark, tmp_path):
    """Without a schema Spark infers a Parquet folder's with a job of its own (one per table: the
    catalog's registration and a one-shot query's views paid ~28 of them). A job table's schema
    is in its footer and an ingested table's is ours, payload columns included when written."""
    import pyarrow.parquet as pq

    from jobs.store.io import read_table, table_path, write_table
    from jobs.store.tables import schema_of

    df = spark.range(3).selectExpr("id", "cast(id as string) AS s", "array(id) AS a", "named_struct('x', id, 'y', 'z') AS st")
    write_table(df.coalesce(1), tmp_path, "some_job_table")
    records = table_path(tmp_path, "records") / "topic=t"
    records.mkdir(parents=True)
    with_payloads = schema_of("records", payloads=True)
    pq.write_table(with_payloads.empty_table().drop_columns(["topic"]), records / "part-0.parquet")

    sc = spark.sparkContext
    sc.setJobGroup("kf-read-tables", "reading two tables")
    try:
        job_table, recs = read_table(spark, tmp_path, "some_job_table"), read_table(spark, tmp_path, "records")
        sc._jsc.sc().listenerBus().waitUntilEmpty()  # (the tracker hears of jobs through the listener bus)
        assert list(sc.statusTracker().getJobIdsForGroup("kf-read-tables")) == [], "reading a table's schema ran a Spark job"
    finally:
        sc.setJobGroup(None, None)
    assert job_table.schema == spark.read.parquet(str(table_path(tmp_path, "some_job_table"))).schema
    assert recs.schema == spark.read.parquet(str(table_path(tmp_path, "records"))).schema
    assert {"key", "value"} <= set(recs.columns)
