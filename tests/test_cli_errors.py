"""Exit 2 is the user's (bad usage, unusable input: ``jobs.errors.InputError``), exit 3 is ours.

A plain ``ValueError`` inside a job is a bug, whatever Python calls it: it must not be printed as
a usage error (exit 2, "kafka-forensics: ..."), which sends the user looking for a mistake they did
not make, nor end as a bare traceback with exit 1, which reads as "found something". No Spark here:
the failures are made before any session starts.
"""

from __future__ import annotations

import os

import pytest
from conftest import REAL
from test_report_data import FINDINGS, make_out_dir
from typer.testing import CliRunner

from analyzer.cli import app

LINE = "internal error: ValueError: boom (-v shows the traceback; please report it)\n"


def _boom(*args, **kwargs):
    raise ValueError("boom\nand a second line")


@pytest.fixture(autouse=True)
def _verbose_stays_in_the_test():
    """-v sets KF_SPARK_LOG_LEVEL for the process: run in-process it must not outlive its test (a
    later test's Spark in this worker would start verbose, with class sharing off)."""
    before = os.environ.get("KF_SPARK_LOG_LEVEL")
    yield
    if before is None:
        os.environ.pop("KF_SPARK_LOG_LEVEL", None)
    else:
        os.environ["KF_SPARK_LOG_LEVEL"] = before


@pytest.fixture
def broken_discovery(monkeypatch):
    """The analyze path's discovery (``jobs.ingest.run.discover_inputs``) raises a plain ValueError."""
    import jobs.ingest.run

    monkeypatch.setattr(jobs.ingest.run, "discover_inputs", _boom)


def test_a_bug_in_analyze_is_one_line_and_exit_3(broken_discovery, tmp_path):
    res = CliRunner().invoke(app, ["analyze", str(REAL / "crash-only"), "--out", str(tmp_path / "o"), "-q"])
    assert (res.exit_code, res.stderr, res.stdout) == (3, LINE, "")
    assert not (tmp_path / "o").exists()


def test_verbose_shows_the_traceback_before_the_line(broken_discovery, tmp_path):
    res = CliRunner().invoke(app, ["analyze", str(REAL / "crash-only"), "--out", str(tmp_path / "o"), "-q", "-v"])
    assert res.exit_code == 3
    assert res.stderr.startswith("Traceback (most recent call last):") and "in _boom" in res.stderr
    assert res.stderr.endswith(LINE)


def test_a_bug_in_report_is_not_bad_usage(monkeypatch, tmp_path):
    """report caught ValueError as bad usage: a bug while rendering was exit 2."""
    import analyzer.report

    out = make_out_dir(tmp_path / "dir", findings=FINDINGS)
    monkeypatch.setattr(analyzer.report, "write_html", _boom)
    res = CliRunner().invoke(app, ["report", str(out)])
    assert (res.exit_code, res.stderr) == (3, LINE)


@pytest.mark.parametrize(("args", "said"), [
    (["analyze", "{tmp}/nope", "--out", "{tmp}/o", "-q"], "{tmp}/nope: no such file or directory"),
    (["analyze", str(REAL / "crash-only" / "broker-1" / "meta.properties"), "--out", "{tmp}/o", "-q"], "a Kafka file (meta_properties), not a log dir"),
    (["analyze", str(REAL / "crash-only"), "--out", "{tmp}/o", "--format", "pdf", "-q"], "--format must be text, json or html, not 'pdf'"),
    (["analyze", str(REAL / "crash-only"), "--out", "{tmp}/o", "--ledger", "{tmp}/none.jsonl", "-q"], "--ledger {tmp}/none.jsonl: no such file"),
    (["analyze", str(REAL / "crash-only"), "--out", "{tmp}/file", "-q"], "{tmp}/file exists and is not a directory"),
    (["report", "{tmp}/missing"], "{tmp}/missing: not a directory"),
    (["demo", "--out", "{tmp}/d", "--brokers", "1", "-q"], "scenarios need at least 2 brokers"),
    (["demo", "--out", "{tmp}/d", "--codec", "brotli", "-q"], "unknown codec 'brotli'"),
    (["dump", "{tmp}/nope.log"], "{tmp}/nope.log: no such file"),
])  # fmt: skip
def test_bad_input_is_still_one_line_and_exit_2(tmp_path, args, said):
    (tmp_path / "file").write_text("in the way")
    res = CliRunner().invoke(app, [a.format(tmp=tmp_path) for a in args])
    assert res.exit_code == 2, res.stderr
    assert res.stderr.startswith("kafka-forensics: ") and res.stderr.count("\n") == 1, res.stderr
    assert said.format(tmp=tmp_path) in res.stderr


class _Unsayable(Exception):
    """What a py4j error is once its JVM has died: asking it for its text raises."""

    def __str__(self) -> str:
        raise ConnectionRefusedError(111, "Connection refused")


def test_an_error_that_cannot_say_what_it_is_is_still_one_line(monkeypatch, tmp_path):
    """A Py4JJavaError of a JVM that died (out of heap, killed) cannot be printed: its ``str`` asks
    the JVM. The internal error is still one line (it was a second traceback, from the handler)."""
    import jobs.ingest.run

    def _dead(*args, **kwargs):
        raise _Unsayable()

    monkeypatch.setattr(jobs.ingest.run, "discover_inputs", _dead)
    res = CliRunner().invoke(app, ["analyze", str(REAL / "crash-only"), "--out", str(tmp_path / "o"), "-q"])
    assert (res.exit_code, res.stderr, res.stdout) == (3, "internal error: _Unsayable (-v shows the traceback; please report it)\n", "")


def test_py4j_calls_a_dead_jvm_breaks_print_no_traceback():
    """A JVM that dies in a task (out of heap: Spark's exit 52) breaks the call of every thread still
    talking to it, and py4j logs each with its traceback on the root logger, which the CLI's process
    leaves to logging's last resort (stderr). The command says the one line itself, so the CLI's
    last resort drops py4j's report (a CI run printed a page of it above the out-of-memory line). Real
    py4j, in a process set up as the CLI's: its gateway client calls a port whose every connection
    is closed unanswered, as a dead JVM's is; a warning of ours still reaches stderr, once (the
    handler ``logging.error`` gives a root without one printed each a second time)."""
    import socket
    import subprocess
    import sys
    import threading

    from conftest import REPO

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def close_each():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=close_each, daemon=True).start()
    script = f"""
import logging, sys
from analyzer import cli
sys.argv = ["kafka-forensics", "--help"]
try:
    cli.main()
except SystemExit:
    pass
from py4j.java_gateway import GatewayClient, GatewayParameters
client = GatewayClient(gateway_parameters=GatewayParameters(port={port}))
from py4j.protocol import ERROR
print("dead end" if client.send_command("c\\nt\\ngetVersion\\ne\\n") == ERROR else "answered")
logging.getLogger("jobs.x").warning("ours still said")
cli._log_to_stderr()
logging.getLogger("jobs.y").warning("said once")
"""
    try:
        run = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:
        server.close()
    assert run.stdout.split()[-2:] == ["dead", "end"], run.stdout[-500:] + run.stderr  # py4j's error path was taken
    assert "Traceback" not in run.stderr and "Exception while sending command" not in run.stderr, run.stderr
    assert run.stderr.count("ours still said") == 1 and run.stderr.count("said once") == 1, run.stderr
