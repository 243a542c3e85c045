"""`kafka-forensics dump` as users call it: contract line shapes, exit codes, one-line errors."""

from __future__ import annotations

import json

from conftest import GOLDEN
from typer.testing import CliRunner

from analyzer.cli import app

runner = CliRunner()

BATCH_FIELDS = {
    "path", "position", "size", "magic", "base_offset", "last_offset", "record_count", "codec", "crc", "crc_valid",
    "partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence", "is_transactional", "is_control",
    "timestamp_type", "base_timestamp", "max_timestamp",
}  # fmt: skip
RECORD_FIELDS = {"offset", "timestamp", "key_size", "value_size", "key_sha256", "value_sha256", "headers"}


def _lines(result):
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_segment_json_lines_follow_the_contract():
    path = GOLDEN / "logdir" / "golden-topic-0" / "00000000000000000031.log"
    result = runner.invoke(app, ["dump", str(path), "--json", "--records"])
    assert result.exit_code == 0, result.output
    lines = _lines(result)
    batches = [ln for ln in lines if ln["type"] == "batch"]
    records = [ln for ln in lines if ln["type"] == "record"]
    assert len(batches) == 10 and len(records) == 16
    for b in batches:
        assert BATCH_FIELDS <= set(b)
        assert b["codec"] in {"none", "gzip", "snappy", "lz4", "zstd"}
        assert b["timestamp_type"] in {"create", "log_append"}
    for r in records:
        assert RECORD_FIELDS <= set(r)
    markers = [r for r in records if r.get("control_type")]
    assert [(m["offset"], m["control_type"], m["coordinator_epoch"]) for m in markers] == [(42, "commit", 7), (44, "abort", 7)]
    # records follow their batch: the first record line comes right after the first batch line
    assert lines[0]["type"] == "batch" and lines[1]["type"] == "record" and lines[1]["offset"] == lines[0]["base_offset"]


def test_problem_line_and_exit_code_1():
    path = GOLDEN / "corrupt" / "zero-filled-tail" / "00000000000000000000.log"
    result = runner.invoke(app, ["dump", str(path), "--json"])
    assert result.exit_code == 1
    problems = [ln for ln in _lines(result) if ln["type"] == "problem"]
    assert [(p["kind"], p["position"]) for p in problems] == [("zero_filled_tail", 1664)]
    assert problems[0]["path"] == str(path) and problems[0]["detail"]


def test_human_text_by_default():
    path = GOLDEN / "logdir" / "golden-topic-0" / "00000000000000000000.log"
    result = runner.invoke(app, ["dump", str(path)])
    assert result.exit_code == 0
    assert result.stdout.startswith("Dumping ")
    assert result.stdout.count("\nposition: ") == 9


def test_unknown_name_needs_kind_and_kind_works(tmp_path):
    src = (GOLDEN / "logdir" / "golden-topic-0" / "00000000000000000000.log").read_bytes()
    odd = tmp_path / "evidence.bin"
    odd.write_bytes(src)
    result = runner.invoke(app, ["dump", str(odd)])
    assert result.exit_code == 2
    assert "--kind" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    result = runner.invoke(app, ["dump", str(odd), "--kind", "segment", "--json"])
    assert result.exit_code == 0
    assert sum(1 for ln in _lines(result) if ln["type"] == "batch") == 9


def test_missing_file_is_one_line_exit_2(tmp_path):
    result = runner.invoke(app, ["dump", str(tmp_path / "00000000000000000000.log")])
    assert result.exit_code == 2
    assert "no such file" in result.stderr and "Traceback" not in result.output
