"""``salvage``: the records a replica still holds of a lost or divergent range, judged by Kafka's own
reader (kafka-dump-log, also of the .txnindex) and by the producers' ledger, never by our parser alone.

Inputs: a simulated cluster (``story``): topic ``am`` is the acks-all-min-isr-1 scenario (broker 1
acked 90 records alone, brokers 2 and 3 then wrote other records at 120-179: loss and divergence,
salvageable from broker 1); topic ``tx`` has, in broker 1's lone window, an aborted transaction, a
committed one and plain records, where broker 2 then wrote other records. And the real Kafka 3.6.2
cluster after an unclean election whose old leader truncated (200 acked records lost and held by no
replica: nothing to salvage). Each is analyzed once per module.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GOLDEN, REAL, REPO, read_jsonl

from analyzer.analyze import build
from analyzer.salvageable import SalvageRange, aborted_batches, salvage_ranges, select_records
from parsers import segment
from parsers.common import FileBytes
from parsers.default_records import record_headers
from sample_data.sim.cluster import LAG_TIME_MAX_MS, Cluster, Size
from sample_data.sim.materialize import materialize

TOPICS = ("am", "tx")


def salvage(*args) -> subprocess.CompletedProcess:
    """The command as a user runs it (its own process: stdout, stderr and exit code as they are)."""
    return subprocess.run([sys.executable, "-m", "analyzer.cli", "salvage", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=300)


def story(out):
    """acks-all-min-isr-1's steps (sample_data/scenarios.py) on ``am``, with transactions on ``tx``."""
    c, size = Cluster([1, 2, 3], seed=0), Size()
    for t in TOPICS:
        c.create_topic(t, 1, 3, min_isr=1)
    c.produce("am", 0, 120)
    c.produce("tx", 0, 40)
    c.fetch(3)
    c.produce("am", 0, 90)  # followers stalled: acked once the ISR shrinks to broker 1
    c.produce("tx", 0, 20, acks="1", producer_id=1000, transactional=True)
    c.write_marker("tx", 0, 1000, "abort")
    c.produce("tx", 0, 20, acks="1", producer_id=1001, transactional=True)
    c.write_marker("tx", 0, 1001, "commit")
    c.produce("tx", 0, 10, acks="1")
    c.advance(LAG_TIME_MAX_MS + 1_000)
    c.crash(1)
    for t in TOPICS:
        c.elect(t, 0, 2, unclean=True)
    c.produce("am", 0, 60)
    c.produce("tx", 0, 30)
    c.fetch(3)
    c.collect()
    materialize(c, out, size)
    (out / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in c.ledger), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def sim(spark, tmp_path_factory):
    """The story written and analyzed once (with its ledger)."""
    root = tmp_path_factory.mktemp("salvage-sim")
    data = story(root / "data")
    build([data], root / "out", ledger=data / "ledger.jsonl", spark=spark, progress=False, register_catalog=False)
    return data, root / "out"


@pytest.fixture(scope="module")
def salvaged(sim, tmp_path_factory):
    data, out = sim
    dest = tmp_path_factory.mktemp("salvage-file") / "salvage.jsonl"
    res = salvage(out, "--out", dest, "--format", "json")
    assert res.returncode == 0, res.stderr
    return res, read_jsonl(dest)


def _dump_fields(text: str) -> dict[str, str]:
    words = text.split()
    return {k.rstrip(":"): v for k, v in zip(words[0::2], words[1::2], strict=False)}


@pytest.fixture(scope="module")
def kafka_dump(sim, dump_log):
    """kafka-dump-log --deep-iteration --print-data-log over brokers 1 and 2's segments and broker 1's
    .txnindex of both topics, in one JVM: ({(broker, topic): [records]}, {topic: [(producer, first, last)]}
    aborted per the .txnindex). The simulator's keys are ASCII: the printed key is its bytes."""
    data, _ = sim
    files = [p for b in (1, 2) for t in TOPICS for p in sorted((data / f"broker-{b}" / f"{t}-0").glob("*.log"))]
    files += [p for t in TOPICS for p in sorted((data / "broker-1" / f"{t}-0").glob("*.txnindex"))]
    out = subprocess.run([str(dump_log.script), "--deep-iteration", "--print-data-log", "--files", ",".join(map(str, files))],
                         capture_output=True, text=True, timeout=300, errors="replace")
    assert out.returncode == 0, out.stderr[-2000:]
    recs: dict[tuple, list[dict]] = {}
    aborted: dict[str, list[tuple]] = {t: [] for t in TOPICS}
    where = batch = None
    for line in out.stdout.splitlines():
        if line.startswith("Dumping "):
            broker, topic = int(line.split("/broker-")[1].split("/")[0]), line.split("/")[-2][:-2]
            where = recs.setdefault((broker, topic), [])
        elif line.startswith("baseOffset: "):
            batch = _dump_fields(line)
        elif line.startswith("version: ") and "firstOffset:" in line:
            f = _dump_fields(line)
            aborted[topic].append((int(f["producerId"]), int(f["firstOffset"]), int(f["lastOffset"])))
        elif line.startswith("| offset: "):
            head, _, key = line[2:].partition(" key: ")
            f = _dump_fields(head.split(" headerKeys: ")[0])
            where.append({"offset": int(f["offset"]), "keySize": int(f["keySize"]), "valueSize": int(f["valueSize"]),
                          "sequence": int(f["sequence"]), "producer_id": int(batch["producerId"]),
                          "marker": "endTxnMarker:" in head,
                          "key_sha256": hashlib.sha256(key.split(" payload: ")[0].encode()).hexdigest() if key else None})
    return recs, aborted


def _salvageable_offsets(out) -> dict[str, set[int]]:
    """Per topic, the offsets of the findings that name broker 1 for salvage."""
    doc = json.loads((out / "findings.json").read_text())
    got: dict[str, set[int]] = {t: set() for t in TOPICS}
    for f in doc["findings"]:
        if f["salvage_brokers"] == [1]:
            got[f["topic"]] |= set(range(f["first_offset"], f["last_offset"] + 1))
    return got


def _expected(sim, kafka_dump) -> tuple[dict[str, list[dict]], dict[str, int]]:
    """Per topic, broker 1's records (kafka-dump-log) at the salvageable offsets less markers,
    aborted ones (the .txnindex) and those broker 2 holds with the same key; and those counts."""
    recs, aborted = kafka_dump
    cover = _salvageable_offsets(sim[1])
    want, left = {}, {"aborted": 0, "control": 0}
    for t in TOPICS:
        kept = {(r["offset"], r["key_sha256"]) for r in recs[(2, t)]}
        want[t] = []
        for r in recs[(1, t)]:
            if r["offset"] not in cover[t]:
                continue
            if r["marker"]:
                left["control"] += 1
            elif any(p == r["producer_id"] and a <= r["offset"] <= b for p, a, b in aborted[t]):
                left["aborted"] += 1
            elif (r["offset"], r["key_sha256"]) not in kept:
                want[t].append(r)
    return want, left


def test_divergence_names_the_surviving_log_candidates_and_the_salvage_broker(sim):
    """Brokers 2 and 3 both carry the latest epoch and no metadata log says which leads: the
    divergence names no surviving broker, and broker 1 (no candidate) as where its version lies."""
    _, out = sim
    doc = json.loads((out / "findings.json").read_text())
    [div] = [f for f in doc["findings"] if f["kind"] == "replica_divergence" and f["topic"] == "am"]
    assert (div["brokers"], div["surviving_broker"], div["salvage_brokers"]) == ([1, 2, 3], None, [1])


def test_salvage_equals_what_kafka_reads_on_the_holder(salvaged, kafka_dump, sim):
    """Every record broker 1 holds at the salvageable offsets as kafka-dump-log reads them (offsets,
    key hashes, value sizes, sequences), less markers and aborted transactions (Kafka's .txnindex);
    the payload decodes to bytes of the stated hash; the left-out counts are Kafka's."""
    res, lines = salvaged
    want, left = _expected(sim, kafka_dump)
    assert len(want["am"]) == 90 and len(want["tx"]) == 30 and left == {"aborted": 20, "control": 1}
    for t in TOPICS:
        mine = [ln for ln in lines if ln["topic"] == t]
        assert [ln["offset"] for ln in mine] == [r["offset"] for r in want[t]]
        for ln, r in zip(mine, want[t], strict=True):
            value, key = base64.b64decode(ln["value"]), base64.b64decode(ln["key"])
            assert hashlib.sha256(value).hexdigest() == ln["value_sha256"] and len(value) == r["valueSize"]
            assert hashlib.sha256(key).hexdigest() == ln["key_sha256"] == r["key_sha256"]
            assert (ln["sequence"], ln["producer_id"], ln["broker"], ln["partition"]) == (r["sequence"], r["producer_id"], 1, 0)
            assert ln["is_transactional"] == (r["producer_id"] >= 0) and ln["path"].startswith(f"broker-1/{t}-0/")
            assert ln["headers"] == []
    summary = json.loads(res.stdout)
    assert summary["records"] == 120 and summary["left_out"] == left
    assert res.stderr.count("\n") == 1 and "salvaged 120 records" in res.stderr and "20 aborted" in res.stderr
    assert set(summary["findings"]) == {ln["finding_id"] for ln in lines}
    assert not any(ln["value"] in res.stdout + res.stderr for ln in lines), "payloads go only to FILE"


def test_salvage_is_the_acked_records_the_surviving_log_lost(salvaged, kafka_dump, sim):
    """The producers' ledger: the acked records at the salvageable offsets that broker 2 (a
    surviving-log candidate) does not hold, outside aborted transactions, are exactly the salvaged
    ones, value hashes included."""
    data, out = sim
    _, lines = salvaged
    recs, aborted = kafka_dump
    cover = _salvageable_offsets(out)
    for t in TOPICS:
        kept = {(r["offset"], r["key_sha256"]) for r in recs[(2, t)]}
        ledger = [r for r in read_jsonl(data / "ledger.jsonl") if r["topic"] == t and r["offset"] in cover[t]
                  and not any(a <= r["offset"] <= b for _, a, b in aborted[t])]
        lost = {(r["offset"], r["key_sha256"], r["value_sha256"]) for r in ledger if (r["offset"], r["key_sha256"]) not in kept}
        assert len(lost) == {"am": 90, "tx": 30}[t]
        assert {(ln["offset"], ln["key_sha256"], ln["value_sha256"]) for ln in lines if ln["topic"] == t} == lost


def test_topic_and_partition_filters(sim, tmp_path):
    _, out = sim
    ok = salvage(out, "--out", tmp_path / "a.jsonl", "--topic", "tx", "--partition", "0")
    assert ok.returncode == 0 and {ln["topic"] for ln in read_jsonl(tmp_path / "a.jsonl")} == {"tx"}
    assert "salvaged 30 records" in ok.stderr
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


def test_the_salvage_file_is_its_owners_alone(sim, salvaged, tmp_path):
    """FILE holds keys and values: mode 0600 however it is made, new or replacing a file others
    could read, under a umask that would let them."""
    res, _ = salvaged
    made = Path(json.loads(res.stdout)["out"])
    assert stat.S_IMODE(made.stat().st_mode) == 0o600
    _, out = sim
    dest = tmp_path / "shared.jsonl"
    dest.write_text("old\n")
    dest.chmod(0o644)
    again = subprocess.run([sys.executable, "-m", "analyzer.cli", "salvage", str(out), "--out", str(dest)], capture_output=True,
                           text=True, cwd=REPO, timeout=300, preexec_fn=lambda: os.umask(0))
    assert again.returncode == 0, again.stderr
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600 and dest.read_text() != "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["shared.jsonl"], "no temporary file left beside it"


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

