"""Live input: a broker's log dir read while the broker serves traffic (issue 20, item 1).

Segments roll, retention deletes files, a follower truncates, the active segment grows: each file
is read as discovery listed it, a file removed, shrunk or swapped for a fifo since then is an
``unreadable_file`` problem row naming why (never a hang, never a SIGBUS), and the report says the
input moved. The deterministic tests change the files by hand, without Kafka; the last one runs a
real single-node Kafka 3.6.2 with 100 KB segments and 1 s retention and analyzes its log dir live.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobs.ingest import discover as disc
from jobs.ingest.tasks import parse_file
from parsers.common import FileBytes

from conftest import REAL, SHARED

BROKER = REAL / "crash-only" / "broker-2"
ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def deadline(seconds: float):
    """Fail instead of hanging: a blocked open() of a fifo is interrupted by SIGALRM."""

    def expire(*_):
        raise TimeoutError(f"still blocked after {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture()
def listed(tmp_path):
    """A copy of a real broker's log dir and discovery's listing of it, as ingest tasks get it."""
    copy = tmp_path / "broker-2"
    shutil.copytree(BROKER, copy)
    found = disc.discover([disc.Root(copy, "")])
    by_name = {Path(f.abs_path).relative_to(copy).as_posix(): f for f in found.files}
    return copy, by_name


def _parsed(entry) -> dict[str, list]:
    out: dict[str, list] = {}
    with deadline(10):
        for name, table in parse_file(vars(entry)):
            out.setdefault(name, []).extend(table.to_pylist())
    return out


def _biggest_segment(by_name: dict) -> str:
    return max((n for n, f in by_name.items() if f.kind == "segment" and f.size > 0 and not n.startswith("__")),
               key=lambda n: by_name[n].size)


def test_file_removed_since_discovery_is_a_problem_row(listed):
    copy, by_name = listed
    name = _biggest_segment(by_name)
    os.unlink(copy / name)
    got = _parsed(by_name[name])
    (problem,) = got["problems"]
    assert problem["kind"] == "unreadable_file" and "removed since it was listed" in problem["detail"]
    assert got["files"][0]["sha256"] is None


def test_file_truncated_since_discovery_is_a_problem_row(listed):
    copy, by_name = listed
    name = _biggest_segment(by_name)
    size = by_name[name].size
    os.truncate(copy / name, size // 2)
    got = _parsed(by_name[name])
    (problem,) = got["problems"]
    assert problem["kind"] == "unreadable_file"
    assert f"shrank from {size} to {size // 2} bytes" in problem["detail"]
    assert "batches" not in got  # nothing of a file that changed under us is taken as evidence


def test_file_replaced_by_a_fifo_does_not_block(listed):
    copy, by_name = listed
    name = _biggest_segment(by_name)
    os.unlink(copy / name)
    os.mkfifo(copy / name)
    got = _parsed(by_name[name])  # a plain O_RDONLY open would block here until a writer came
    (problem,) = got["problems"]
    assert problem["kind"] == "unreadable_file" and "a fifo, not a regular file" in problem["detail"]


def test_active_segment_grown_since_discovery_is_read_as_listed(listed):
    copy, by_name = listed
    name = _biggest_segment(by_name)
    before = _parsed(by_name[name])
    with open(copy / name, "ab") as f:
        f.write(b"\x00" * 4096)  # what a live broker appends (or preallocates) after discovery
    after = _parsed(by_name[name])
    assert after == before  # same batches, same sha256 and size: the bytes that were listed
    assert "problems" not in after  # the zeros appended later are not a zero_filled_tail


def test_truncation_while_read_cannot_kill_the_reader(tmp_path):
    """The old mmap reader died with SIGBUS when the file was truncated under the map."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"\x01" * (1 << 20))
    code = (
        "import os, sys; from parsers.common import FileBytes\n"
        "fb = FileBytes(sys.argv[1])\n"
        "os.truncate(sys.argv[1], 0)\n"
        "print(sum(fb.data[i] for i in range(0, len(fb.data), 4096)))\n"
    )
    run = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, f"reader died: {run.returncode} {run.stderr[-300:]}"
    assert run.stdout.strip() == str(256)


def test_a_fifo_is_refused_not_waited_for(tmp_path):
    fifo = tmp_path / "00000000000000000000.log"
    os.mkfifo(fifo)
    with deadline(10), pytest.raises(OSError, match="a fifo, not a regular file"):
        FileBytes(fifo)


def test_changes_since_discovery_are_counted(listed):
    copy, by_name = listed
    files = list(by_name.values())
    assert disc.changes_since(files) == {"files_changed": 0, "files_removed": 0, "examples": []}
    assert disc.changes_text(disc.changes_since(files)) is None
    grown, gone = _biggest_segment(by_name), "meta.properties"
    with open(copy / grown, "ab") as f:
        f.write(b"\x00" * 10)
    os.unlink(copy / gone)
    moved = disc.changes_since(files)
    assert (moved["files_changed"], moved["files_removed"]) == (1, 1)
    size = by_name[grown].size
    assert f"{by_name[grown].path} ({size} -> {size + 10} bytes)" in moved["examples"]
    assert "1 files changed and 1 removed" in disc.changes_text(moved)


# --- a real broker, live ------------------------------------------------------------------------

KAFKA = SHARED / "tools"


def _kafka_home() -> Path | None:
    for p in sorted(KAFKA.glob("kafka*")):
        if (p / "bin" / "kafka-server-start.sh").exists():
            return p
    return None
