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
from conftest import REAL, SHARED

from jobs.ingest import discover as disc
from jobs.ingest.tasks import parse_file
from parsers.common import FileBytes

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

KAFKA_TGZ = SHARED / "tools" / "kafka_2.13-3.6.2.tgz"
# writes 200 lines of 500 bytes every 0.1 s until its reader goes away
FEED = ("import sys, time\nline = b'x' * 499 + b'\\n'\nwhile True:\n"
        "    sys.stdout.buffer.write(line * 200); sys.stdout.flush(); time.sleep(0.1)\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _started(server_log: Path) -> bool:
    return server_log.exists() and "Kafka Server started" in server_log.read_text(errors="replace")


def _stop(proc: subprocess.Popen) -> None:
    """SIGKILL: a single KRaft node's controlled shutdown waits a minute for a quorum; nothing
    of this throwaway broker needs to survive."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture()
def live_broker(tmp_path):
    """A single-node KRaft Kafka 3.6.2 with 100 KB segments and 1 s retention, and a producer
    writing to it the whole time: (its log dir, its own log dir, the broker process)."""
    home = tmp_path / "kafka"
    home.mkdir()
    subprocess.run(["tar", "-xzf", str(KAFKA_TGZ), "-C", str(home)], check=True)
    bin_ = next(home.glob("kafka_*")) / "bin"
    port, cport = _free_port(), _free_port()
    data, logs = tmp_path / "data", tmp_path / "kafka-logs"
    props = tmp_path / "server.properties"
    props.write_text("\n".join([
        "process.roles=broker,controller", "node.id=1", f"controller.quorum.voters=1@127.0.0.1:{cport}",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
        "controller.listener.names=CONTROLLER", "inter.broker.listener.name=PLAINTEXT",
        f"log.dirs={data}", "num.partitions=2", "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1",
        "log.segment.bytes=102400", "log.retention.ms=1000", "log.retention.check.interval.ms=1000",
        "log.segment.delete.delay.ms=0", "group.initial.rebalance.delay.ms=0", "",
    ]))
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m -Xms64m", "LOG_DIR": str(logs),
           "KAFKA_JVM_PERFORMANCE_OPTS": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"}
    subprocess.run([str(bin_ / "kafka-storage.sh"), "format", "-t", "Zm9yZW5zaWNzLWxpdmUtMQ", "-c", str(props)],
                   check=True, env=env, capture_output=True, timeout=120)
    broker = subprocess.Popen([str(bin_ / "kafka-server-start.sh"), str(props)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    producer = feeder = None
    said = open(tmp_path / "producer.out", "wb")  # noqa: SIM115 - closed below
    try:
        # wait for the broker's own "started" line, not a TCP probe: a probe that connects and closes
        # races Kafka's non-blocking accept (accept() returns null, the acceptor logs an ERROR), and
        # that ERROR is the very thing this test asserts never happens
        deadline = time.monotonic() + 120
        while not _started(logs / "server.log"):
            assert broker.poll() is None, "the broker exited at start"
            assert time.monotonic() < deadline, "the broker did not start"
            time.sleep(0.2)
        # ~1 MB/s of 500-byte records (kafka-producer-perf-test is not in this build: the console producer, fed at a rate)
        feeder = subprocess.Popen([sys.executable, "-c", FEED], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
        producer = subprocess.Popen(
            [str(bin_ / "kafka-console-producer.sh"), "--bootstrap-server", f"127.0.0.1:{port}", "--topic", "live",
             "--producer-property", "acks=1", "--producer-property", "linger.ms=5"],
            env={**env, "KAFKA_HEAP_OPTS": "-Xmx128m"}, stdin=feeder.stdout, stdout=said, stderr=subprocess.STDOUT,
            start_new_session=True)
        feeder.stdout.close()
        deadline = time.monotonic() + 120  # until segments roll and retention deleted some
        while not any(data.glob("live-*/*.log")) or sum(1 for _ in data.glob("live-*/*.log")) < 3:
            assert broker.poll() is None, "the broker died"
            assert producer.poll() is None, (tmp_path / "producer.out").read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "no segments rolled"
            time.sleep(0.2)
        yield data, logs, broker, producer
    finally:
        for proc in (feeder, producer):
            if proc is not None:
                _stop(proc)
        _stop(broker)
        said.close()


def test_analyze_a_live_broker(spark, live_broker, tmp_path, capsys):
    """Analyze runs on the log dir of a broker that is serving traffic, rolling 100 KB segments
    and deleting them after 1 s: each run completes (exit 0 or 1), says the input moved, and the
    broker never logs an ERROR (nothing of ours locks or writes its files)."""
    from analyzer.analyze import run_analyze

    data, logs, broker, producer = live_broker
    for run in range(2):
        out = tmp_path / f"out-{run}"
        code = run_analyze([data], out, fmt="text", progress=False, spark=spark, register_catalog=False)
        assert code in (0, 1)
        doc = json.loads((out / "findings.json").read_text())
        moved = doc["input"]["changed_during_run"]
        assert moved["files_changed"] + moved["files_removed"] > 0, moved
        assert "Input changed" in capsys.readouterr().out
        assert broker.poll() is None and producer.poll() is None, "the broker or its producer stopped"
    errors = []
    for p in logs.glob("*.log"):
        lines = p.read_text(errors="replace").splitlines()
        errors += ["\n".join(lines[i:i + 8]) for i, line in enumerate(lines) if " ERROR " in line]  # with its trace
    assert not errors, "\n".join(errors[:3])


def test_a_window_of_a_file_cut_while_read_names_its_size_now(tmp_path):
    """A split segment's window (``FileWindow``) read further after the file was cut below what
    it had read: the message names the file's size now, not how far the reading had got."""
    from parsers.common import FileChanged, FileWindow

    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    window = FileWindow(path, 1 << 20, 0, 512 << 10)
    try:
        os.truncate(path, 0)
        with pytest.raises(FileChanged, match=f"shrank from {1 << 20} to 0 bytes"):
            window.ensure(1 << 20)
        with pytest.raises(FileChanged, match=f"shrank from {1 << 20} to 0 bytes"):
            window.sha256()
    finally:
        window.close()


def test_a_file_cut_while_read_whole_names_its_size_now(tmp_path, monkeypatch):
    """``FileBytes`` reading a file that is cut between two of its reads: the message names the
    file's size now (as ``FileStream``'s and ``FileWindow``'s do), not how far the reading got."""
    from parsers import common

    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    pread = os.pread
    calls = []

    def pread_then_cut(fd, n, offset):
        part = pread(fd, n, offset)
        if not calls:
            os.truncate(path, 0)  # a live broker's retention, between the first read and the next
        calls.append(n)
        return part

    monkeypatch.setattr(common, "_MAX_READ", 64 << 10)  # (several reads for 1 MiB)
    monkeypatch.setattr(os, "pread", pread_then_cut)
    with pytest.raises(common.FileChanged, match=f"shrank from {1 << 20} to 0 bytes while it was read"):
        common.FileBytes(path, listed_size=1 << 20)
