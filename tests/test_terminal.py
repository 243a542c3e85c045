"""Terminal escapes from the evidence never reach the terminal (issue 37 item 4).

A collection whose partition folder, log dir and cluster id carry ANSI/OSC sequences (``ESC [31m``
recolours, ``ESC ] 0 ; … BEL`` sets the window title, ``\\x9b`` is the one-byte CSI) is analyzed,
dumped and queried through the CLI: no raw ESC, BEL or CSI reaches stdout or stderr, and the
escaped form (``\\x1b``) is shown instead; findings.json keeps the names as they are (JSON escapes
them by its own rules) and report.html holds none of those bytes raw. The pieces that do it
(``jobs.terminal``) are tested alone first.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_report_data import FINDINGS, make_out_dir
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.report import load, render, write_html
from jobs.terminal import CONTROLS, LogFormatter, escape
from sample_data.writer.log import write_broker_dir
from sample_data.writer.records import BatchSpec, Record

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "analyzer.cli"]
TOPIC = "t\x1b[31mRED\x1b]0;TITLE\x07"  # recolours, then sets the window title
TOPIC_SHOWN = r"t\x1b[31mRED\x1b]0;TITLE\x07"
MARKUP_TOPIC = "m[link=https:evil]x"  # rich markup: a hyperlink (OSC 8) if it were interpreted
LOG_DIR = "broker-2\x1b]0;W\x07"
CLUSTER = "Q2x\x9b1c3RlcklkMDAwMDAwMA"  # a C1 CSI
RAW = ("\x1b", "\x07", "\x9b")
SGR = re.compile("\x1b\\[[0-9;]*m")  # rich's own colours on a terminal
T0 = 1_735_689_600_000


def raw_controls(text: str) -> list[str]:
    return sorted({c for c in text if c in CONTROLS and c != "\n"})


# ---------------------------------------------------------------- the pieces

def test_escape_shows_every_control_character():
    assert escape("orders-0") == "orders-0"
    assert escape(TOPIC) == TOPIC_SHOWN
    assert escape("a\tb\nc\rd\x00\x7f\x9b\x85") == r"a\tb\nc\rd\x00\x7f\x9b\x85"
    assert escape("right\u202eleft\u2028") == r"right\u202eleft\u2028"  # bidi override, line separator
    assert escape("ünïcode ≥ …") == "ünïcode ≥ …"  # printable text is not touched
    assert escape("line 1\nline\x1b 2", keep="\n") == "line 1\nline\\x1b 2"
    for c in CONTROLS:
        assert escape(c).isprintable() and escape(c).startswith("\\")


def test_log_formatter_escapes_values_whole_and_keeps_our_lines():
    record = logging.LogRecord("jobs.x", logging.WARNING, __file__, 1, "%s: skipped (%r), %d files\nsecond line of ours",
                               (LOG_DIR + "\nFAKE LINE", TOPIC, 3), None)
    shown = LogFormatter("%(levelname)s %(message)s").format(record)
    assert shown == ("WARNING broker-2\\x1b]0;W\\x07\\nFAKE LINE: skipped ('t\\x1b[31mRED\\x1b]0;TITLE\\x07'), 3 files\n"
                     "second line of ours")
    assert record.getMessage().startswith(LOG_DIR)  # other handlers see the record as logged
    mapping = logging.LogRecord("jobs.x", logging.INFO, __file__, 1, "%(path)s is %(n).1f MB", ({"path": TOPIC, "n": 2.0},), None)
    assert LogFormatter().format(mapping) == f"{TOPIC_SHOWN} is 2.0 MB"
    try:
        raise ValueError(TOPIC)
    except ValueError:
        failed = logging.LogRecord("jobs.x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    lines = LogFormatter().format(failed).splitlines()
    assert lines[0] == "failed" and lines[1].startswith("Traceback") and lines[-1] == f"ValueError: {TOPIC_SHOWN}"


def test_text_report_escapes_every_value_and_interprets_no_markup(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # (no value wrapped across lines)
    finding = dict(FINDINGS[0], topic=TOPIC, explanation=f"lost on {TOPIC}-0 (group g\x1b]52;c;SGVsbG8=\x07)",
                   evidence=[{"broker": 1, "path": f"broker-1/{TOPIC}-0/0.log", "position": 0, "detail": "line\tsaid \x9bK"}])
    out = make_out_dir(tmp_path / "out", findings=[finding, dict(FINDINGS[1], topic=MARKUP_TOPIC)])
    for tty in (False, True):
        buf = io.StringIO()
        buf.isatty = lambda tty=tty: tty  # on a terminal rich adds its colours (SGR): nothing else
        render(load(out), "text", buf)
        text = SGR.sub("", buf.getvalue()) if tty else buf.getvalue()
        assert raw_controls(text) == []
        assert f"{TOPIC_SHOWN}-0" in text and r"g\x1b]52;c;SGVsbG8=\x07" in text and r"line\tsaid \x9bK" in text
        assert f"{MARKUP_TOPIC}-0" in text, "rich markup in a name is shown, not interpreted (as an OSC 8 link)"


def test_html_report_holds_no_raw_control_byte(tmp_path):
    finding = dict(FINDINGS[0], topic=TOPIC, explanation=f"lost on {TOPIC}-0",
                   evidence=[{"broker": 1, "path": f"{LOG_DIR}/{TOPIC}-0/0.log", "position": 0, "detail": "\x9b2J"}])
    out = make_out_dir(tmp_path / "out", findings=[finding])
    html = write_html(load(out)).read_text(encoding="utf-8")
    assert not [c for c in RAW if c in html]  # (plotly.js, inlined, has a few controls of its own in strings)
    assert f"{TOPIC_SHOWN}-0" in html and r"\x9b2J" in html


def test_one_line_errors_are_escaped(tmp_path):
    result = CliRunner().invoke(app, ["report", str(tmp_path / f"{TOPIC}\nkafka-forensics: fake line")])
    assert result.exit_code == 2
    assert result.stderr == f"kafka-forensics: {tmp_path}/{TOPIC_SHOWN}\\nkafka-forensics: fake line: not a directory\n"


# ---------------------------------------------------------------- end to end, through the CLI

def _batches(n: int, tag: bytes = b"") -> list[BatchSpec]:
    return [BatchSpec(i * 5, tuple(Record(b"k%d" % (i * 5 + j), b"v%d" % (i * 5 + j) + tag, T0 + i * 5 + j) for j in range(5)),
                      partition_leader_epoch=0) for i in range(n)]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    """Two brokers whose copies of a hostile-named partition differ (findings name it), a second
    topic named with rich markup, a cluster id with a C1 CSI, and a log dir named with an OSC
    sequence and no meta.properties (a warning names it)."""
    case = tmp_path_factory.mktemp("hostile") / "case"
    tp, mp = (TOPIC, 0), (MARKUP_TOPIC, 0)
    write_broker_dir(case / "broker-1", 1, CLUSTER, directory_id=None, partitions={tp: _batches(4), mp: _batches(2)},
                     hw={tp: 20, mp: 10}, recovery_points={tp: 20, mp: 10}, log_starts={tp: 0, mp: 0}, clean_shutdown=False)
    write_broker_dir(case / LOG_DIR, 2, CLUSTER, directory_id=None, partitions={tp: _batches(4, b"x")},
                     hw={tp: 20}, recovery_points={tp: 20}, log_starts={tp: 0}, clean_shutdown=True)
    (case / LOG_DIR / "meta.properties").unlink()
    return case


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's code in the child, whatever is installed
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=900, cwd=cwd, env=env)


def _no_raw(run: subprocess.CompletedProcess) -> None:
    for name, text in (("stdout", run.stdout), ("stderr", run.stderr)):
        assert not [c for c in RAW if c in text], f"raw control character on {name}: {text[-2000:]!r}"
        if name == "stderr":
            # the JVM's relayed stderr keeps the tab Java starts a stack frame with (a loaded
            # machine can make Spark warn with one); a tab anywhere else is a value's
            text = "\n".join(line[1:] if line.startswith(("\tat ", "\t... ")) else line for line in text.splitlines())
        assert raw_controls(text) == [], f"{name}: {text[-2000:]!r}"


def test_hostile_names_reach_no_terminal_raw(hostile, tmp_path):
    out = tmp_path / "out"
    run = _cli("analyze", str(hostile), "--out", str(out), "--format", "text", cwd=tmp_path)
    assert run.returncode == 1, run.stderr[-3000:]
    _no_raw(run)
    assert f"Topics           2 ({MARKUP_TOPIC}, {TOPIC_SHOWN})" in run.stdout, "markup shown as it is, escapes escaped"
    assert f"{TOPIC_SHOWN}-0  2 errors" in run.stdout and r"\x9b1c3RlcklkMDAwMDAwMA" in run.stdout
    warned = [ln for ln in run.stderr.splitlines() if ln.startswith("WARNING ") and "no usable meta.properties" in ln]
    assert len(warned) == 1 and warned[0].startswith(r"WARNING broker-2\x1b]0;W\x07: no usable meta.properties; "), run.stderr

    # the machine outputs keep the names as they are (JSON escapes them), and report.html has none raw
    doc = json.loads((out / "findings.json").read_text(encoding="utf-8"))
    assert TOPIC in {f["topic"] for f in doc["findings"]}
    assert "\\u001b" in (out / "findings.json").read_text(encoding="utf-8")
    html = (out / "report.html").read_text(encoding="utf-8")
    assert not [c for c in RAW if c in html] and f"{TOPIC_SHOWN}-0" in html

    seg = hostile / "broker-1" / f"{TOPIC}-0" / "00000000000000000000.log"
    dumped = _cli("dump", str(seg), "--records", cwd=tmp_path)
    assert dumped.returncode == 0, dumped.stderr
    _no_raw(dumped)
    assert dumped.stdout.splitlines()[0].startswith(f"Dumping {hostile}/broker-1/{TOPIC_SHOWN}-0/00000000000000000000.log")

    queried = _cli("sql", str(out), "select topic, log_dir, array(topic) as topics, named_struct('t', topic) as s "
                   "from replica_logs where topic like 't%' order by log_dir", cwd=tmp_path)
    assert queried.returncode == 0, queried.stderr[-3000:]
    _no_raw(queried)
    table = [ln for ln in queried.stdout.splitlines() if ln[:1] in "|+"]
    rows = [[cell.strip() for cell in ln.split("|")[1:-1]] for ln in table if ln.startswith("|")]
    assert rows == [["topic", "log_dir", "topics", "s"],
                    [TOPIC_SHOWN, "broker-1", f"[{TOPIC_SHOWN}]", f"{{{TOPIC_SHOWN}}}"],
                    [TOPIC_SHOWN, r"broker-2\x1b]0;W\x07", f"[{TOPIC_SHOWN}]", f"{{{TOPIC_SHOWN}}}"]]
    assert len({len(ln) for ln in table}) == 1, "columns sized to the escaped text"
