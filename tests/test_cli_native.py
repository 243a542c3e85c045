"""The command line behaves like a native tool: --version, -h, help that reads as words (FILE,
DIR, INPUT..., the accepted values), analyze listed first, shell completion, demo --list, and a
real analyze whose stderr holds nothing with --quiet (no progress, no Spark start-up lines)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import typer
from conftest import FOUND, REPO
from typer.testing import CliRunner

from analyzer import cli, cli_doc
from sample_data.scenarios import SCENARIOS

CLI = [sys.executable, "-m", "analyzer.cli"]
SCRIPT = Path(sys.executable).with_name("kafka-forensics")  # the console script, named as users type it
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
# what the JVM and Spark 4 print on stderr while starting, seen before the CLI filtered them
STARTUP_LINES = ("WARNING: Using incubator modules", "Setting default log level", "sc.setLogLevel", "NativeCodeLoader")
TYPE_HINT = re.compile(r"<[a-z][\w\[\], ]*>")  # Typer's <bool>, <int>, <path>, <list[Path]>


def _run(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600, env=ENV, **kw)


def test_version_prints_the_installed_version():
    run = _run("--version")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"kafka-forensics {version('kafka-forensics')}"


def test_dash_h_is_help_everywhere():
    for args in ([], ["analyze"], ["dump"]):
        short, long = _run(*args, "-h"), _run(*args, "--help")
        assert short.returncode == long.returncode == 0, short.stderr
        assert short.stdout == long.stdout and "Usage:" in short.stdout


def _rich_helps() -> dict[str, str]:
    """Each command's --help as a terminal shows it (Typer's rich panels)."""
    runner = CliRunner()
    names = ["", *typer.main.get_command(cli.app).commands]
    return {name: runner.invoke(cli.app, [name, "--help"] if name else ["--help"], terminal_width=120).output for name in names}


def test_help_reads_as_words_in_the_terminal_and_the_reference():
    for source in (_rich_helps(), cli_doc.command_helps()):
        for name, text in source.items():
            assert "Usage:" in text, name
            assert not TYPE_HINT.findall(text), (name, TYPE_HINT.findall(text))
            usage = next(line for line in text.splitlines() if "Usage:" in line)
            assert "{" not in usage, usage
    plain = cli_doc.command_helps()
    assert "Usage: kafka-forensics analyze [OPTIONS] INPUT..." in plain["kafka-forensics analyze"]
    assert "Usage: kafka-forensics sql [OPTIONS] DIR [QUERY]" in plain["kafka-forensics sql"]
    assert "--format text|json|html" in plain["kafka-forensics analyze"]
    assert "--ledger FILE" in plain["kafka-forensics analyze"]
    assert "--codec none|gzip|snappy|lz4|zstd" in plain["kafka-forensics demo"]


def test_analyze_is_the_first_command_listed():
    text = _run("--help").stdout
    listed = [line.split()[1] for line in text.splitlines() if re.match(r"^│ [a-z]+ ", line)]
    assert listed[0] == "analyze", listed
    assert set(listed) == set(typer.main.get_command(cli.app).commands)


def test_every_command_takes_quiet():
    for name, cmd in typer.main.get_command(cli.app).commands.items():
        assert any("--quiet" in p.opts for p in cmd.params), name


def test_shell_completion_is_offered_and_completes():
    root = cli_doc.command_helps()["kafka-forensics"]
    assert "--install-completion" in root and "--show-completion" in root
    env = {**ENV, "_KAFKA_FORENSICS_COMPLETE": "complete_bash", "COMP_WORDS": "kafka-forensics an", "COMP_CWORD": "1"}
    run = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60, env=env)
    assert run.stdout.split() == ["analyze"], (run.stdout, run.stderr)
    env |= {"COMP_WORDS": "kafka-forensics analyze --fo", "COMP_CWORD": "2"}
    run = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60, env=env)
    assert run.stdout.split() == ["--format"], (run.stdout, run.stderr)


def test_demo_list_names_every_scenario_and_writes_nothing(tmp_path):
    run = _run("demo", "--list", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(SCENARIOS)
    assert all(len(line.split(maxsplit=1)) == 2 and len(line) <= 100 for line in lines), lines
    assert list(tmp_path.iterdir()) == [], "demo --list generated files"


SMALLEST = FOUND / "k3x-zk-3brokers-shubhamdixit863"  # 3 brokers, my-topic-0 and my-topic2-0..2


@pytest.fixture(scope="module")
def focused_quiet(tmp_path_factory):
    """The smallest real input, one analyze: quiet, JSON, focused on my-topic2's partition 1."""
    out = tmp_path_factory.mktemp("focused") / "out"
    run = _run("analyze", str(SMALLEST), "--out", str(out), "--format", "json", "--quiet", "--topic", "my-topic2*", "--partition", "1")
    return run, out


def test_quiet_analyze_prints_only_the_result(focused_quiet):
    """stdout is findings.json's document, stderr is empty: no progress bar, no INFO lines, none
    of the lines the JVM and Spark print while starting."""
    run, out = focused_quiet
    assert run.returncode in (0, 1), run.stderr
    assert not [m for m in STARTUP_LINES if m in run.stderr]
    assert run.stderr == ""
    assert json.loads(run.stdout) == json.loads((out / "findings.json").read_text())


def _partitions(out: Path, table: str) -> set:
    t = pq.read_table(out / "tables" / table)
    return {(r["topic"], r["partition"]) for r in t.select(["topic", "partition"]).to_pylist() if r["topic"] is not None}


def test_focused_analyze_reads_and_keeps_only_those_partitions(focused_quiet):
    run, out = focused_quiet
    doc = json.loads(run.stdout)
    assert doc["input"]["focus"] == {"topics": ["my-topic2*"], "partitions": [1]}
    assert doc["input"]["brokers"] == [1, 2, 3]
    for table in ("files", "batches", "checkpoints", "leader_epochs", "replica_logs"):
        assert _partitions(out, table) == {("my-topic2", 1)}, table
    # read: the log dirs' own files and my-topic2-1's, nothing of the other partitions
    wanted = [p for p in SMALLEST.glob("kafka-logs-*/*") if p.is_file()] + list(SMALLEST.glob("kafka-logs-*/my-topic2-1/*"))
    assert doc["input"]["files"] == len(wanted)
    shown = _run("report", str(out))
    assert "Focus" in shown.stdout and "my-topic2*" in shown.stdout, shown.stdout


def test_a_focus_that_matches_nothing_is_one_line_before_spark(tmp_path):
    run = _run("analyze", str(SMALLEST), "--out", str(tmp_path / "out"), "--topic", "orders")
    assert run.returncode == 2
    assert run.stderr.startswith("kafka-forensics: --topic orders: no such partition") and "my-topic, my-topic2" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
