"""``salvage``: the records a replica still holds of a lost or divergent range, judged by Kafka's own
reader (kafka-dump-log) and by the producers' ledger, never by our parser alone.

Inputs: the simulator's acks-all-min-isr-1 (broker 1 acked 90 records alone; brokers 2 and 3 wrote
other records at 120-179: loss and divergence, salvageable from broker 1) and the real Kafka 3.6.2
cluster after an unclean election whose old leader truncated (200 acked records lost and held by no
replica: nothing to salvage). Each is analyzed once per module.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys

import pytest
from conftest import GOLDEN, REAL, REPO, read_jsonl

from analyzer.analyze import build
from analyzer.salvageable import SalvageRange, aborted_batches, salvage_ranges, select_records
from parsers import segment
from parsers.common import FileBytes
from parsers.default_records import record_headers
from sample_data.scenarios import generate

SCENARIO = "acks-all-min-isr-1"


def salvage(*args: str) -> subprocess.CompletedProcess:
    """The command as a user runs it (its own process: stdout, stderr and exit code as they are)."""
    return subprocess.run([sys.executable, "-m", "analyzer.cli", "salvage", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=300)


@pytest.fixture(scope="module")
def sim(spark, tmp_path_factory):
    """acks-all-min-isr-1 generated and analyzed once (with its ledger)."""
    root = tmp_path_factory.mktemp("salvage-sim")
    data = generate(SCENARIO, root / "data")
    build([data], root / "out", ledger=data / "ledger.jsonl", spark=spark, progress=False, register_catalog=False)
    return data, root / "out"


@pytest.fixture(scope="module")
def salvaged(sim, tmp_path_factory):
    data, out = sim
    dest = tmp_path_factory.mktemp("salvage-file") / "salvage.jsonl"
    res = salvage(out, "--out", dest, "--format", "json")
    assert res.returncode == 0, res.stderr
    return res, read_jsonl(dest)


@pytest.fixture(scope="module")
def kafka_dump(sim, dump_log):
    """kafka-dump-log --deep-iteration --print-data-log over broker 1's and 2's segments of am-0, in
    one JVM: {broker: [record fields]} (the simulator's keys are ASCII, so the printed key is its bytes)."""
    data, _ = sim
    paths = {b: sorted((data / f"broker-{b}" / "am-0").glob("*.log")) for b in (1, 2)}
    files = ",".join(str(p) for b in paths for p in paths[b])
    out = subprocess.run([str(dump_log.script), "--deep-iteration", "--print-data-log", "--files", files],
                         capture_output=True, text=True, timeout=300, errors="replace")
    assert out.returncode == 0, out.stderr[-2000:]
    recs: dict[int, list[dict]] = {1: [], 2: []}
    broker = None
    for line in out.stdout.splitlines():
        if line.startswith("Dumping "):
            broker = 1 if "/broker-1/" in line else 2
        elif line.startswith("| offset: "):
            head, key = line[2:].split(" key: ", 1)[0], line.split(" key: ", 1)[1].split(" payload: ", 1)[0]
            f = dict(zip(head.split()[0::2], head.split()[1::2], strict=False))
            recs[broker].append({"offset": int(f["offset:"]), "keySize": int(f["keySize:"]), "valueSize": int(f["valueSize:"]),
                                 "sequence": int(f["sequence:"]), "key_sha256": hashlib.sha256(key.encode()).hexdigest()})
    return recs


def test_divergence_names_the_surviving_log_candidates_and_the_salvage_broker(sim):
    """Brokers 2 and 3 both carry the latest epoch and no metadata log says which leads: the
    divergence names no surviving broker, and broker 1 (no candidate) as where its version lies."""
    _, out = sim
    doc = json.loads((out / "findings.json").read_text())
    [div] = [f for f in doc["findings"] if f["kind"] == "replica_divergence"]
    assert (div["brokers"], div["surviving_broker"], div["salvage_brokers"]) == ([1, 2, 3], None, [1])


def test_salvage_equals_what_kafka_reads_on_the_holder(salvaged, kafka_dump, sim):
    """Every record broker 1 holds at the lost offsets 120-209, as kafka-dump-log reads them:
    offsets, key hashes, value sizes, sequences; the payload decodes to bytes of the stated hash."""
    res, lines = salvaged
    want = [r for r in kafka_dump[1] if 120 <= r["offset"] <= 209]
    assert len(want) == 90
    assert [ln["offset"] for ln in lines] == [r["offset"] for r in want]
    for ln, r in zip(lines, want, strict=True):
        value = base64.b64decode(ln["value"])
        key = base64.b64decode(ln["key"])
        assert hashlib.sha256(value).hexdigest() == ln["value_sha256"] and len(value) == r["valueSize"]
        assert hashlib.sha256(key).hexdigest() == ln["key_sha256"] == r["key_sha256"]
        assert (ln["sequence"], ln["broker"], ln["topic"], ln["partition"]) == (r["sequence"], 1, "am", 0)
        assert ln["path"].startswith("broker-1/am-0/") and ln["headers"] == []
    summary = json.loads(res.stdout)
    assert summary["records"] == 90 and res.stderr.count("\n") == 1 and "salvaged 90 records" in res.stderr
    assert set(summary["findings"]) == {ln["finding_id"] for ln in lines}
    assert not any(ln["value"] in res.stdout + res.stderr for ln in lines), "payloads go only to FILE"


def test_salvage_is_the_acked_records_the_surviving_log_lost(salvaged, kafka_dump, sim):
    """The producers' ledger: the acked records at 120-209 whose key broker 2 (a surviving-log
    candidate) does not hold at that offset are exactly the salvaged ones, value hashes included."""
    data, _ = sim
    _, lines = salvaged
    kept = {(r["offset"], r["key_sha256"]) for r in kafka_dump[2]}
    ledger = [r for r in read_jsonl(data / "ledger.jsonl") if r["topic"] == "am" and 120 <= r["offset"] <= 209]
    lost = {(r["offset"], r["key_sha256"], r["value_sha256"]) for r in ledger if (r["offset"], r["key_sha256"]) not in kept}
    assert len(lost) == 90
    assert {(ln["offset"], ln["key_sha256"], ln["value_sha256"]) for ln in lines} == lost


def test_topic_and_partition_filters(sim, tmp_path):
    _, out = sim
    ok = salvage(out, "--out", tmp_path / "a.jsonl", "--topic", "am", "--partition", "0")
    assert ok.returncode == 0 and len(read_jsonl(tmp_path / "a.jsonl")) == 90
    for args in (("--topic", "other"), ("--partition", "1")):
        res = salvage(out, "--out", tmp_path / "b.jsonl", *args)
        assert res.returncode == 2 and res.stderr.startswith("kafka-forensics: nothing to salvage") and res.stderr.count("\n") == 1
        assert not (tmp_path / "b.jsonl").exists()


def test_refuses_stdout_and_the_inputs(sim, tmp_path):
    data, out = sim
    seg = sorted((data / "broker-1" / "am-0").glob("*.log"))[-1]
    before = seg.read_bytes()
    for dest in ("-", seg, data / "broker-1" / "new.jsonl"):
        res = salvage(out, "--out", dest)
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and res.stdout == "", res.stderr
    assert seg.read_bytes() == before and not (data / "broker-1" / "new.jsonl").exists()


def test_not_analyzed_dir(tmp_path):
    res = salvage(tmp_path, "--out", tmp_path / "s.jsonl")
    assert res.returncode == 2 and "no findings.json" in res.stderr and res.stderr.count("\n") == 1


def test_changed_input_is_refused(sim, salvaged, tmp_path):
    """One byte appended to the holder's segment after analysis: refused, naming it; nothing written."""
    data, out = sim
    seg = data / salvaged[1][0]["path"]
    size = seg.stat().st_size
    try:
        with open(seg, "ab") as fh:
            fh.write(b"\0")
        res = salvage(out, "--out", tmp_path / "s.jsonl")
    finally:
        with open(seg, "r+b") as fh:
            fh.truncate(size)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "changed since it was analyzed" in res.stderr and seg.name in res.stderr
    assert not (tmp_path / "s.jsonl").exists()


@pytest.fixture(scope="module")
def rejoined(spark, tmp_path_factory):
    d = REAL / "unclean-election-divergence-rejoined"
    out = tmp_path_factory.mktemp("salvage-real") / "out"
    build([d], out, ledger=d / "ledger.jsonl", spark=spark, progress=False, register_catalog=False)
    return out


def test_real_loss_held_by_no_replica_is_nothing_to_salvage(rejoined, tmp_path):
    """Kafka 3.6.2: the 200 acked records at 300-499 are lost, and the old leader truncated them: no
    replica holds them (ground truth), so there is nothing to salvage: exit 2, one line, no FILE."""
    doc = json.loads((rejoined / "findings.json").read_text())
    [loss] = [f for f in doc["findings"] if f["kind"] == "acked_data_loss"]
    assert (loss["first_offset"], loss["last_offset"], loss["salvage_brokers"]) == (300, 499, [])
    res = salvage(rejoined, "--out", tmp_path / "s.jsonl")
    assert res.returncode == 2 and res.stderr.startswith("kafka-forensics: nothing to salvage") and res.stderr.count("\n") == 1
    assert not (tmp_path / "s.jsonl").exists()


# ---------------------------------------------------------------------------- pure rules

def _rec(offset, value="v", **kw):
    return {"topic": "t", "partition": 0, "offset": offset, "key_sha256": "k", "value_sha256": value, "control_type": None,
            "is_control": False, "aborted": False, "crc_valid": True, **kw}


def test_selection_leaves_out_identical_control_aborted_damaged_and_duplicates():
    loss = SalvageRange("acked_data_loss-1", "acked_data_loss", "t", 0, 10, 14, (1, 3), (2,))
    div = SalvageRange("replica_divergence-1", "replica_divergence", "t", 0, 10, 16, (1,), (2,))
    held = {("t", 0, 1): [_rec(10), _rec(11, "same"), _rec(12, control_type="abort", is_control=True), _rec(13, aborted=True),
                          _rec(14, crc_valid=False), _rec(15), _rec(16)],
            ("t", 0, 3): [_rec(10), _rec(11, "other")]}
    refs = {("t", 0, 2): {11: ("k", "same", None), 16: ("k", "v", None)}}
    out, left = select_records([loss, div], held, refs)
    assert [(r["offset"], r["broker"], r["finding_id"]) for r in out] == [
        (10, 1, "acked_data_loss-1"), (11, 3, "acked_data_loss-1"), (15, 1, "replica_divergence-1")]
    assert dict(left) == {"identical": 2, "control": 1, "aborted": 1, "damaged": 1, "duplicate": 1}


def test_ranges_follow_salvage_brokers_or_the_surviving_log():
    findings = [
        {"id": "t-1", "kind": "truncation_below_hw", "topic": "t", "partition": 0, "first_offset": 5, "last_offset": 9,
         "brokers": [1, 2], "salvage_brokers": [], "surviving_broker": 2},
        {"id": "a-1", "kind": "acked_data_loss", "topic": "t", "partition": 0, "first_offset": 5, "last_offset": 9,
         "brokers": [1, 2, 3], "salvage_brokers": [1], "surviving_broker": None},
        {"id": "a-2", "kind": "acked_data_loss", "topic": "t", "partition": 1, "first_offset": 0, "last_offset": 1,
         "brokers": [2], "salvage_brokers": [], "surviving_broker": 2},
        {"id": "u-1", "kind": "unclean_shutdown", "topic": None, "partition": None, "first_offset": None, "last_offset": None,
         "brokers": [1], "salvage_brokers": [], "surviving_broker": None},
    ]
    got = salvage_ranges(findings)
    assert [(r.finding_id, r.holders, r.references) for r in got] == [("a-1", (1,), (2, 3)), ("t-1", (1,), (2,))]
    assert salvage_ranges(findings, topic="t", partition=1) == []


def test_aborted_is_the_producers_next_marker_on_that_replica():
    def b(key, pid, txn=True, ctl=None):
        return {"key": key, "producer_id": pid, "is_transactional": txn, "is_control": ctl is not None, "control_type": ctl}
    batches = [b(1, 7), b(2, 8), b(3, 7, ctl="abort"), b(4, 7), b(5, 8, ctl="commit"), b(6, 7, ctl="commit"), b(7, 9, txn=False), b(8, 7)]
    assert aborted_batches(batches) == {1}


def test_record_headers_as_kafka_wrote_them():
    """Golden Kafka bytes: the header keys GoldenReader read, in every codec; one header value null."""
    path = GOLDEN / "logdir" / "golden-topic-0" / "00000000000000000000.log"
    want = {r["offset"]: r.get("headerKeys", "") for r in read_jsonl(GOLDEN / "expected" / "logdir" / "golden-topic-0" /
                                                                       "00000000000000000000.log.jsonl") if r["type"] == "record"}
    with FileBytes(path) as fb:
        recs = segment.parse(fb.data, str(path), records=True, payloads=True).extra["records"]
        assert "header_bytes" not in recs.column_names
        rows = [r for p in segment.iter_parse(fb.data, str(path), records=True, payloads=True, headers=True)
                for r in p.extra["records"].to_pylist()]
    got = {r["offset"]: record_headers(r["header_bytes"], r["headers"]) for r in rows}
    assert {o: ",".join(k for k, _ in h) for o, h in got.items()} == want
    assert [v for _, v in got[2]].count(None) == 1

