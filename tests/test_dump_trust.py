"""`kafka-forensics dump` can be trusted on anything it is pointed at: every file a Kafka log dir
holds (and every other file of the fixtures), foreign bytes read as any kind, a folder, a closed
stdout. Either rows and problems with the documented exit code, or one line on stderr, exit 2."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import subprocess
import sys

import pytest
from conftest import FOUND, GOLDEN, REAL, REPO, SHARED
from typer.testing import CliRunner

from analyzer.cli import app
from jobs.ingest.discover import Root, discover
from parsers import files
from parsers.names import detect_kind, kind_before_pending

runner = CliRunner()
CLI = [sys.executable, "-m", "analyzer.cli"]
GT = GOLDEN / "logdir" / "golden-topic-0"


def _noise(seed: int, size: int = 4096) -> bytes:
    return random.Random(seed).randbytes(size)


def _json_lines(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def _one_line_exit_2(result, name: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafka-forensics: ") and name in lines[0], result.stderr


def test_every_fixture_file_dumps_or_says_in_one_line_why():
    """Every file of every fixture set: no traceback; a Kafka file dumps (exit 1 exactly when a
    problem line is printed), anything else is one line on stderr and exit 2."""
    seen = set()
    for path in sorted((SHARED / "fixtures").rglob("*")):
        if not path.is_file():
            continue
        result = runner.invoke(app, ["dump", str(path), "--json"])
        assert result.exception is None or isinstance(result.exception, SystemExit), (path, result.exception)
        kind = kind_before_pending(path.name) or files.detect(str(path))
        if kind in files.DUMP_KINDS:
            assert result.exit_code in (0, 1) and result.stderr == "", (path, result.exit_code, result.stderr)
            lines = _json_lines(result)
            assert all("type" in ln for ln in lines)
            assert (result.exit_code == 1) == any(ln["type"] == "problem" for ln in lines), path
        else:
            _one_line_exit_2(result, path.name)
            expected = "not a kind dump reads" if kind in files.NOT_DECODED else "cannot tell the file kind"
            assert expected in result.stderr, (path, result.stderr)
        seen.add(kind)
    # the walk met the log-dir files that used to crash dump, and the ones it reads
    assert {"quorum_state", "lock", "segment", "kraft_snapshot", "offset_index", "meta_properties"} <= seen


def test_quorum_state_shows_its_json():
    path = REAL / "crash-only" / "broker-1" / "__cluster_metadata-0" / "quorum-state"
    doc = json.loads(path.read_text())
    result = runner.invoke(app, ["dump", str(path), "--json"])
    assert result.exit_code == 0, result.output
    [row] = _json_lines(result)
    assert row["type"] == "quorum_state" and row["path"] == str(path)
    assert (row["data_version"], row["leader_id"], row["leader_epoch"], row["voted_id"], row["applied_offset"]) == (
        doc["data_version"], doc["leaderId"], doc["leaderEpoch"], doc["votedId"], doc["appliedOffset"])
    assert row["current_voters"] == [v["voterId"] for v in doc["currentVoters"]]
    text = runner.invoke(app, ["dump", str(path)])
    assert text.exit_code == 0 and f"leader_id: {doc['leaderId']}" in text.stdout


@pytest.mark.parametrize("content, problem", [
    (b"", "File ended prematurely"),
    (b'{"leaderId":1}', "does not have data_version"),
    (b'{"data_version":7}', "not within"),
    (b'{"data_version":1,"leaderId":"x","leaderEpoch":1,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA"}', "leaderId"),
    (b"[1, 2]", "not an object"),
    (_noise(3), "UTF-8"),
])  # fmt: skip
def test_quorum_state_faults_are_problems(tmp_path, content, problem):
    path = tmp_path / "quorum-state"
    path.write_bytes(content)
    result = runner.invoke(app, ["dump", str(path), "--json"])
    assert result.exit_code == 1, result.output
    details = [ln["detail"] for ln in _json_lines(result) if ln["type"] == "problem"]
    assert any(problem in d for d in details), details
    assert all(ln["kind"] == "checkpoint_malformed" for ln in _json_lines(result) if ln["type"] == "problem")


def test_lock_and_pending_files(tmp_path):
    lock = tmp_path / ".lock"
    lock.write_bytes(b"")
    _one_line_exit_2(runner.invoke(app, ["dump", str(lock)]), ".lock")
    # a segment renamed for deletion is still a segment's bytes: dumped, and said not to be live
    src = GT / "00000000000000000000.log"
    deleted = tmp_path / (src.name + ".deleted")
    shutil.copyfile(src, deleted)
    assert detect_kind(deleted.name) == "pending_delete"
    live = runner.invoke(app, ["dump", str(src), "--json"])
    result = runner.invoke(app, ["dump", str(deleted), "--json"])
    assert result.exit_code == 0
    assert [{**ln, "path": None} for ln in _json_lines(result)] == [{**ln, "path": None} for ln in _json_lines(live)]
    assert "not live data" in runner.invoke(app, ["dump", str(deleted)]).stdout.splitlines()[0]


def test_offset_index_is_checked_against_the_segment_beside_it(tmp_path):
    case = GOLDEN / "corrupt" / "index-entry-past-eof"
    index, log = case / "00000000000000000000.index", case / "00000000000000000000.log"
    entries = _json_lines(runner.invoke(app, ["dump", str(index), "--json"]))
    past = [e for e in entries if e["type"] == "index_entry" and e["position"] >= log.stat().st_size]
    assert len(past) == 1
    result = runner.invoke(app, ["dump", str(index), "--json"])
    assert result.exit_code == 1
    problems = [ln for ln in _json_lines(result) if ln["type"] == "problem"]
    assert [(p["kind"], p["position"]) for p in problems] == [("index_mismatch", past[0]["slot"] * 8)]
    assert f"entry {past[0]['slot']}" in problems[0]["detail"] and str(past[0]["position"]) in problems[0]["detail"]
    # the same index alone: nothing to check it against, and Kafka's sanityCheck passes it
    alone = tmp_path / index.name
    shutil.copyfile(index, alone)
    assert runner.invoke(app, ["dump", str(alone)]).exit_code == 0
    # a sound index beside its segment stays clean
    assert runner.invoke(app, ["dump", str(GT / "00000000000000000000.index")]).exit_code == 0
    assert runner.invoke(app, ["dump", str(GT / "00000000000000000000.timeindex")]).exit_code == 0


def _into_closed_pipe(args: list[str]) -> subprocess.CompletedProcess:
    """Run the CLI with a stdout nobody reads any more (``| head -1`` once head has exited)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([*CLI, *args], stdout=write_end, stderr=subprocess.PIPE, cwd=REPO, timeout=300)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [
    [str(GT / "00000000000000000000.log"), "--json"],
    [str(GT / "00000000000000000000.log"), "--records"],
    [str(GT / "00000000000000000049.index")],
])  # fmt: skip
def test_closed_stdout_is_exit_0_without_noise(args):
    got = _into_closed_pipe(["dump", *args])
    assert (got.returncode, got.stderr.decode()) == (0, "")


def test_foreign_bytes_as_meta_properties_are_a_problem(tmp_path):
    path = tmp_path / "random.bin"
    path.write_bytes(_noise(1))
    result = runner.invoke(app, ["dump", str(path), "--kind", "meta_properties", "--json"])
    assert result.exit_code == 1
    assert {ln["kind"] for ln in _json_lines(result) if ln["type"] == "problem"} == {"checkpoint_malformed"}


def test_binary_never_reaches_the_terminal_raw(tmp_path):
    path = tmp_path / "random.bin"
    path.write_bytes(_noise(2))
    for kind in sorted(files.DUMP_KINDS):
        for args in ([], ["--json"]):
            result = runner.invoke(app, ["dump", str(path), "--kind", kind, *args])
            assert result.exit_code == 1, (kind, args)
            bad = {c for c in result.stdout if not (c.isprintable() or c == "\n")}
            assert not bad, (kind, args, sorted(bad)[:5])
    result = runner.invoke(app, ["dump", str(path), "--kind", "leader_epoch"])
    assert "PROBLEM leader_epoch_malformed" in result.stdout


SAMPLES = {
    "segment": GT / "00000000000000000000.log",
    "offset_index": GT / "00000000000000000000.index",
    "time_index": GT / "00000000000000000000.timeindex",
    "txn_index": GT / "00000000000000000031.txnindex",
    "producer_snapshot": GT / "00000000000000000049.snapshot",
    "replication_offset": GOLDEN / "logdir" / "replication-offset-checkpoint",
    "leader_epoch": GT / "leader-epoch-checkpoint",
    "partition_metadata": GT / "partition.metadata",
    "meta_properties": GOLDEN / "logdir" / "meta.properties",
    "quorum_state": REAL / "crash-only" / "broker-1" / "__cluster_metadata-0" / "quorum-state",
    "clean_shutdown": FOUND / "kraft-nomanazeem" / "kafka-logs" / ".kafka_cleanshutdown",
}
SAME_FORMAT = [files.SEGMENT_KINDS, frozenset({"replication_offset", "recovery_point", "log_start", "cleaner"})]


@pytest.mark.parametrize("source", sorted(SAMPLES))
def test_a_file_read_as_another_kind_is_a_problem(source):
    """Every Kafka file read with a --kind of a different format: exit 1, never a clean dump."""
    path = SAMPLES[source]
    assert path.stat().st_size > 0 and files.detect(str(path)) == source
    clean = []
    for kind in sorted(files.DUMP_KINDS):
        if kind == source or any(source in g and kind in g for g in SAME_FORMAT):
            continue
        result = runner.invoke(app, ["dump", str(path), "--kind", kind])
        if result.exit_code != 1:
            clean.append((kind, result.exit_code))
    assert not clean


def test_a_directory_says_so_and_points_to_analyze():
    result = runner.invoke(app, ["dump", str(GT)])
    _one_line_exit_2(result, GT.name)
    assert "is a directory" in result.stderr and "analyze" in result.stderr
    assert "cannot tell the file kind" not in result.stderr


@pytest.mark.parametrize("seed", range(24))
def test_random_bytes_are_not_a_torn_segment(tmp_path, seed):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_noise(100 + seed))
    result = runner.invoke(app, ["dump", str(path), "--json"])
    assert result.exit_code == 1
    problems = [ln for ln in _json_lines(result) if ln["type"] == "problem"]
    assert (problems[0]["kind"], problems[0]["position"]) == ("invalid_batch", 0)
    assert "does not look like a Kafka segment" in problems[0]["detail"]
    assert "torn_tail" not in {p["kind"] for p in problems}


@pytest.mark.parametrize("name", ["golden-topic-0/00000000000000000000.log", "golden-topic-0/00000000000000000031.log",
                                  "legacy-topic-0/00000000000000000000.log"])
def test_a_first_batch_cut_short_is_still_a_torn_tail(tmp_path, name):
    data = (GOLDEN / "logdir" / name).read_bytes()
    first = 12 + int.from_bytes(data[8:12], "big")
    for cut in (20, first // 2, first - 1):
        path = tmp_path / "00000000000000000000.log"
        path.write_bytes(data[:cut])
        problems = [ln for ln in _json_lines(runner.invoke(app, ["dump", str(path), "--json"])) if ln["type"] == "problem"]
        assert [(p["kind"], p["position"]) for p in problems] == [("torn_tail", 0)], (cut, problems)


def test_no_broker_id_is_not_said_to_come_from_the_folder_name(tmp_path, caplog):
    for folder in ("pdir", "broker-7"):
        (tmp_path / "case" / folder / "t-0").mkdir(parents=True)
        (tmp_path / "case" / folder / "t-0" / "00000000000000000000.log").write_bytes(_noise(5))
    with caplog.at_level(logging.WARNING, logger="jobs.ingest.discover"):
        found = {b.log_dirs[0]: b.broker for b in discover([Root(tmp_path / "case" / "pdir", "")]).brokers}
        found.update({b.log_dirs[0]: b.broker for b in discover([Root(tmp_path / "case" / "broker-7", "")]).brokers})
    said = {r.getMessage().split(":", 1)[0]: r.getMessage() for r in caplog.records}
    assert found == {"pdir": -1, "broker-7": 7}
    assert "no broker id could be found" in said["pdir"] and "taken from the folder name" not in said["pdir"]
    assert "broker id 7 taken from the folder name" in said["broker-7"]
