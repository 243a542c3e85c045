"""Terminal summary: verdict wording, overview, grouping, 100 columns, no colour off a terminal,
and the ``report`` command's exit codes."""

from __future__ import annotations

import io
import json
import re

import pytest
from test_report_data import FINDINGS, make_out_dir
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.report import load, render, run_report

ANSI = re.compile(r"\x1b\[")


@pytest.fixture
def out_dir(tmp_path):
    return make_out_dir(tmp_path / "out")


def text_of(out_dir, **env) -> str:
    buf = io.StringIO()
    render(load(out_dir), "text", buf)
    return buf.getvalue()


def test_verdict_names_loss_offsets_and_salvage_broker(out_dir):
    out = text_of(out_dir)
    assert "Verdict: 812 acknowledged records lost on orders-0, offsets 1000–1811, still held by broker 1" in out
    assert "Also 1 error on 1 partition: replica_divergence" in out


def test_overview_lines(out_dir):
    out = text_of(out_dir)
    for needle in ("Brokers          3 (1, 2, 3)", "Log dirs         3", "Topics           2 (orders, payments)", "Partitions       4",
                   "Kafka era        Kafka ≥ 3.7, KRaft (guessed)", "Findings         2 errors · 2 warnings · 1 info", "Parser problems  1 (checkpoint_malformed 1)", "38 files, 1.0 MiB"):
        assert needle in out


def test_findings_grouped_by_partition_worst_first_with_evidence(out_dir):
    out = text_of(out_dir)
    assert out.index("orders-0  2 errors · 1 warning") < out.index("cluster-wide  1 warning") < out.index("orders-1  1 info")
    assert "↳ broker 1 broker-1/orders-0/00000000000000000000.log @131072: epoch 1 batches 1000–1811" in out
    assert "↳ … 1 more piece of evidence in report.html" in out
    assert out.index("ERROR   acked_data_loss") < out.index("ERROR   replica_divergence") < out.index("WARNING unclean_leader_election")


def test_readable_at_100_columns_and_plain_when_not_a_terminal(out_dir, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    out = text_of(out_dir)
    assert not ANSI.search(out)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert all(line == line.rstrip() for line in lines)


def test_colour_on_a_terminal(out_dir):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    buf = Tty()
    render(load(out_dir), "text", buf)
    assert ANSI.search(buf.getvalue())


def test_points_to_full_report(out_dir):
    run_report(out_dir, "text", io.StringIO())
    out = text_of(out_dir)
    assert f"Full report: {out_dir / 'report.html'}" in out
    assert "not written yet" not in out


def test_clean_and_missing_tables(tmp_path):
    out_dir = make_out_dir(tmp_path / "out", findings=[], tables=("brokers", "files"))
    out = text_of(out_dir)
    assert "Verdict: Clean: no findings" in out
    assert "Tables missing (not shown): replica_logs, offset_ranges, epoch_lineage, problems." in out


def test_only_warnings_and_infos(tmp_path):
    out_dir = make_out_dir(tmp_path / "out", findings=[f for f in FINDINGS if f["severity"] != "error"])
    assert "Verdict: No data loss or divergence found; 2 warnings to review" in text_of(out_dir)


def test_json_format_is_findings_json(out_dir):
    buf = io.StringIO()
    render(load(out_dir), "json", buf)
    assert json.loads(buf.getvalue()) == json.loads((out_dir / "findings.json").read_text())


def test_html_format_prints_the_reports_path_not_megabytes_of_html(out_dir):
    buf = io.StringIO()
    assert run_report(out_dir, "html", buf) == 1
    assert buf.getvalue() == f"{out_dir / 'report.html'}\n"


def test_report_html_output_dash_is_the_html_on_stdout_and_a_file_gets_a_copy(out_dir, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(out_dir), "--format", "html", "-o", "-"])
    assert result.exit_code == 1, result.output
    assert result.stdout == (out_dir / "report.html").read_text(encoding="utf-8")
    copy = tmp_path / "incident.html"
    result = runner.invoke(app, ["report", str(out_dir), "--format", "html", "--output", str(copy)])
    assert result.exit_code == 1, result.output
    assert result.stdout == f"{copy}\n"
    assert copy.read_text(encoding="utf-8") == (out_dir / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("args", [["--format", "text", "-o", "-"], ["--format", "html", "-o", "/nonexistent-dir/x.html"]])
def test_report_output_misuse_is_one_line_and_exit_2(out_dir, args):
    result = CliRunner().invoke(app, ["report", str(out_dir), *args])
    assert result.exit_code == 2
    assert result.stdout == "" and result.stderr.startswith("kafka-forensics: ") and result.stderr.count("\n") == 1


def test_report_command_exit_codes(out_dir, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(out_dir)])
    assert result.exit_code == 1, result.output
    assert "812 acknowledged records lost" in result.output
    assert (out_dir / "report.html").exists()
    infos = make_out_dir(tmp_path / "infos", findings=[f for f in FINDINGS if f["severity"] == "info"])
    assert runner.invoke(app, ["report", str(infos)]).exit_code == 0
    assert runner.invoke(app, ["report", str(infos), "--fail-on", "info"]).exit_code == 1
    assert runner.invoke(app, ["report", str(infos), "--format", "json"]).exit_code == 0


@pytest.mark.parametrize("args", [["--format", "pdf"], ["--fail-on", "fatal"]])
def test_report_command_bad_usage(out_dir, args):
    result = CliRunner().invoke(app, ["report", str(out_dir), *args])
    assert result.exit_code == 2


def test_report_command_unusable_dir(tmp_path):
    result = CliRunner().invoke(app, ["report", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert "not a directory" in result.output


def test_report_command_without_a_readable_findings_json_gives_no_verdict(out_dir):
    """A verdict comes only from findings.json: unreadable, it is one line and exit 2, never "Clean"."""
    (out_dir / "findings.json").write_text('{"version": 1, "findings": [')
    result = CliRunner().invoke(app, ["report", str(out_dir)])
    assert result.exit_code == 2
    assert "Clean" not in result.output and "findings.json could not be read" in result.output
    (out_dir / "findings.json").unlink()
    result = CliRunner().invoke(app, ["report", str(out_dir)])
    assert result.exit_code == 2
    assert "Clean" not in result.output and f"the analysis has not run on {out_dir} (no findings.json)" in result.output
