"""``analyze`` as a user runs it: exit codes, stdout formats, and the DIR it leaves behind."""

from __future__ import annotations

import io
import json
import subprocess
import sys

from conftest import REAL

from analyzer.analyze import run_analyze
from analyzer.report import exit_code

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


def test_analyze_exit_code_follows_fail_on(spark, tmp_path):
    out = tmp_path / "crash"
    buf = io.StringIO()
    code = run_analyze([REAL / "crash-only"], out, fmt="text", spark=spark, progress=False, stream=buf, register_catalog=False)
    assert code == 0, "only an info finding: below the default --fail-on error"
    doc = json.loads((out / "findings.json").read_text())
    assert exit_code(doc, "info") == 1 and exit_code(doc, "warning") == 0
    assert "unclean_shutdown" in buf.getvalue()
