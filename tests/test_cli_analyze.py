"""``analyze`` as a user runs it: exit codes, stdout formats, and the DIR it leaves behind."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pyarrow.parquet as pq
from conftest import REAL
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from analyzer.analyze import run_analyze
from analyzer.report import exit_code, load, render
from jobs.store.tables import ALL_TABLES, JOB_SCHEMAS

CLI = [sys.executable, "-m", "analyzer.cli"]


def test_analyze_cli_clean_failover_exits_0_and_the_catalog_answers(tmp_path):
    out = tmp_path / "cf"
    src = REAL / "clean-failover"
    run = subprocess.run([*CLI, "analyze", str(src), "--out", str(out), "--format", "json", "--ledger", str(src / "ledger.jsonl")],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    doc = json.loads(run.stdout)
    assert doc["summary"]["errors"] == 0 and doc["summary"]["records_lost"] == 0
    assert doc == json.loads((out / "findings.json").read_text())
    assert (out / "report.html").stat().st_size > 100_000
    assert "Traceback" not in run.stderr
    q = subprocess.run([*CLI, "sql", str(out), "select count(*) as n from replica_logs where topic like 'cf%'", "--format", "json"],
                       capture_output=True, text=True, timeout=600)
    assert q.returncode == 0, q.stderr[-2000:]
    assert json.loads(q.stdout.strip().splitlines()[-1])["n"] == 9, "3 partitions x 3 brokers"


def test_analyze_cli_unusable_input_is_one_line_and_exit_2(tmp_path):
    run = subprocess.run([*CLI, "analyze", str(tmp_path / "nope"), "--out", str(tmp_path / "o")], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1 and "nope" in run.stderr
    assert not (tmp_path / "o").exists()


def test_analyze_exit_code_follows_fail_on(spark, tmp_path, monkeypatch):
    """Also: DIR is read for the report once, in the staged DIR, and every format renders from that
    (the text summary loaded DIR a second time after the swap); and every table of the analyzed
    DIR is one docs/tables.md documents, a job table with the columns it says."""
    import analyzer.report

    loads = []
    monkeypatch.setattr(analyzer.report, "load", lambda out_dir: loads.append(out_dir) or load(out_dir))
    out = tmp_path / "crash"
    buf = io.StringIO()
    code = run_analyze([REAL / "crash-only"], out, fmt="text", spark=spark, progress=False, stream=buf, register_catalog=False)
    assert code == 0, "only an info finding: below the default --fail-on error"
    doc = json.loads((out / "findings.json").read_text())
    assert exit_code(doc, "info") == 1 and exit_code(doc, "warning") == 0
    assert "unclean_shutdown" in buf.getvalue()
    assert len(loads) == 1 and loads[0].name.startswith("crash.tmp-"), loads
    again = io.StringIO()
    render(load(out), "text", again)
    assert again.getvalue() == buf.getvalue(), "the staged DIR's data renders as DIR's own"

    written = {p.name for p in (out / "tables").iterdir()}
    assert written == {*ALL_TABLES, *JOB_SCHEMAS}, written ^ {*ALL_TABLES, *JOB_SCHEMAS}
    for name, declared in JOB_SCHEMAS.items():
        footer = pq.read_schema(next((out / "tables" / name).glob("*.parquet"))).metadata[b"org.apache.spark.sql.parquet.row.metadata"]
        got = [(f.name, f.dataType.simpleString()) for f in StructType.fromJson(json.loads(footer)).fields]
        assert got == [(f.name, f.dataType.simpleString()) for f in from_arrow_schema(declared).fields], name
