"""Segments against Kafka's own readers: every golden and corrupt .log, batch by batch, record by record.

The expected values come from ../shared/fixtures/golden/expected, written by Kafka 4.0's
reader classes (FileRecords.batches(), LogSegment.recover); nothing here is our own judgement.
"""

from __future__ import annotations

import pytest
from conftest import GOLDEN, read_jsonl

from parsers import segment
from parsers.common import FileBytes

# every .log that Kafka's reader described (corrupt/ companions are unchanged copies without their own expected/)
SEGMENTS = [
    p
    for p in sorted((GOLDEN / "logdir").rglob("*.log")) + sorted((GOLDEN / "corrupt").rglob("*.log"))
    if (GOLDEN / "expected" / (str(p.relative_to(GOLDEN)) + ".jsonl")).exists()
]
TS_TYPES = {"CreateTime": "create", "LogAppendTime": "log_append", "NoTimestampType": None}


def _expected(path):
    rel = path.relative_to(GOLDEN)
    return read_jsonl(GOLDEN / "expected" / (str(rel) + ".jsonl"))


def _parse(path):
    with FileBytes(path) as fb:
        return segment.parse(fb.data, str(path), records=True)


@pytest.mark.parametrize("path", SEGMENTS, ids=lambda p: str(p.relative_to(GOLDEN)))
def test_batches_and_records_match_kafka(path):
    exp = _expected(path)
    got = _parse(path)
    batches = got.table.to_pylist()
    records = got.extra["records"].to_pylist()
    exp_batches = [e for e in exp if e["type"] == "batch"]
    exp_records = [e for e in exp if e["type"] == "record"]
    assert len(batches) == len(exp_batches)
    for b, e in zip(batches, exp_batches):
        legacy = e["magic"] < 2
        assert b["position"] == e["position"]
        assert b["size"] == e["size"]
        assert b["magic"] == e["magic"]
        assert b["base_offset"] == e["baseOffset"]
        assert b["last_offset"] == e["lastOffset"]
        if e["count"] is not None:
            assert b["record_count"] == e["count"]
        assert b["codec"] == e["codec"]
        assert b["crc"] == e["crc"]
        assert b["crc_valid"] == e["crcValid"]
        assert b["partition_leader_epoch"] == (None if legacy else e["partitionLeaderEpoch"])
        assert b["producer_id"] == e["producerId"]
        assert b["producer_epoch"] == e["producerEpoch"]
        assert b["base_sequence"] == e["baseSequence"]
        assert b["last_sequence"] == e["lastSequence"]
        assert b["is_transactional"] == e["isTransactional"]
        assert b["is_control"] == e["isControl"]
        assert b["timestamp_type"] == TS_TYPES[e["timestampType"]]
        assert b["max_timestamp"] == e["maxTimestamp"]
    summary = next(e for e in exp if e["type"] == "summary")
    assert len(records) == summary["records"] == len(exp_records)
    for r, e in zip(records, exp_records):
        assert r["offset"] == e["offset"]
        assert r["timestamp"] == e["timestamp"]
        assert r["key_size"] == e["keySize"]
        assert r["value_size"] == e["valueSize"]
        assert r["key_sha256"] == e.get("keySha256")
        assert r["value_sha256"] == e.get("valueSha256")
        assert r["headers"] == e.get("headerCount", 0)
        if "controlType" in e:
            assert r["control_type"] == e["controlType"].lower()
            assert r["coordinator_epoch"] == e["coordinatorEpoch"]
        else:
            assert r["control_type"] is None


def _kinds(parsed):
    return [(p["kind"], p["position"]) for p in parsed.problems.to_pylist()]


@pytest.mark.parametrize("path", sorted((GOLDEN / "logdir").rglob("*.log")), ids=lambda p: p.name)
def test_clean_golden_segments_have_no_problems(path):
    assert _kinds(_parse(path)) == []


# What each damaged segment must produce. Positions come from Kafka's own output
# (summary.validBytes is where Kafka's reader stopped; the invalid batch's position otherwise).
def _stop_position(case):
    exp = _expected(GOLDEN / "corrupt" / case / "00000000000000000000.log")
    return next(e for e in exp if e["type"] == "summary")["validBytes"]


def _batch_position(case, pred):
    exp = _expected(GOLDEN / "corrupt" / case / "00000000000000000000.log")
    return next(e["position"] for e in exp if e["type"] == "batch" and pred(e))


CORRUPT_SEGMENTS = {
    "torn-tail-mid-batch": lambda: [("torn_tail", _stop_position("torn-tail-mid-batch"))],
    "torn-tail-in-header": lambda: [("torn_tail", _stop_position("torn-tail-in-header"))],
    "zero-filled-tail": lambda: [("zero_filled_tail", _stop_position("zero-filled-tail"))],
    "batch-length-too-large": lambda: [("torn_tail", _stop_position("batch-length-too-large"))],
    "negative-batch-length": lambda: [("invalid_batch", _stop_position("negative-batch-length"))],
    "crc-mismatch": lambda: [("crc_mismatch", _batch_position("crc-mismatch", lambda e: not e["crcValid"]))],
    "legacy-v0-crc-mismatch": lambda: [("crc_mismatch", _batch_position("legacy-v0-crc-mismatch", lambda e: not e["crcValid"]))],
    "bad-magic": lambda: [("invalid_batch", _batch_position("bad-magic", lambda e: e["magic"] == 7))],
    "empty-segment": lambda: [],
}


@pytest.mark.parametrize("case", sorted(CORRUPT_SEGMENTS))
def test_corrupt_segment_problem(case):
    got = _parse(GOLDEN / "corrupt" / case / "00000000000000000000.log")
    assert _kinds(got) == CORRUPT_SEGMENTS[case]()
    for p in got.problems.to_pylist():
        assert p["detail"]


def test_every_corrupt_segment_case_is_covered():
    cases = [
        line.split("\t")[0]
        for line in (GOLDEN / "corrupt" / "CASES.tsv").read_text().splitlines()
        if line and not line.startswith("#") and line.split("\t")[1].endswith(".log")
    ]
    assert sorted(cases) == sorted(CORRUPT_SEGMENTS)


def test_chunked_parse_equals_whole_parse():
    path = GOLDEN / "logdir" / "golden-topic-0" / "00000000000000000031.log"
    with FileBytes(path) as fb:
        whole = segment.parse(fb.data, "x", records=True)
        pieces = list(segment.iter_parse(fb.data, "x", records=True, chunk_bytes=100))
    assert len(pieces) > 3
    import pyarrow as pa

    assert pa.concat_tables([p.table for p in pieces]).equals(whole.table)
    assert pa.concat_tables([p.extra["records"] for p in pieces]).equals(whole.extra["records"])


def test_payloads_only_when_asked():
    path = GOLDEN / "logdir" / "golden-topic-0" / "00000000000000000000.log"
    with FileBytes(path) as fb:
        plain = segment.parse(fb.data, "x", records=True)
        full = segment.parse(fb.data, "x", records=True, payloads=True)
    assert "value" not in plain.extra["records"].column_names
    values = full.extra["records"].column("value").to_pylist()
    assert values[0] == b"value-0 none"
    assert full.extra["records"].column("key").to_pylist()[0] == b"key-0"
    import hashlib

    for v, h in zip(values, full.extra["records"].column("value_sha256").to_pylist()):
        assert (v is None and h is None) or hashlib.sha256(v).hexdigest() == h
