"""History detections on a real cluster with a history added: consumer commits beyond every
replica's log end, a transaction the coordinator left open, a logged truncation below the HW.

The base is real-cluster ``clean-failover`` (Kafka 3.6.2, nothing wrong: the negative control of
test_forensics_real). Into a copy we add, in Kafka's own formats, what a worse day would have
left: a ``__consumer_offsets-0`` partition (OffsetCommitKey v1 / OffsetCommitValue v1, byte by
byte from Kafka's message definitions), a ``__transaction_state-0`` partition (TransactionLogKey
v0 / TransactionLogValue v0) and a server log with a broker loading a HW then truncating below it
(Kafka 3.6's wording). Each rule must fire exactly where the added bytes say, and nowhere else.
"""

from __future__ import annotations

import json
import shutil
import struct

import pyarrow.parquet as pq
import pytest
from conftest import REAL
from kafka_bytes import offset_commit as commit

from analyzer.analyze import build
from sample_data.writer.log import write_partition
from sample_data.writer.records import BatchSpec, Record


def _s(text: str) -> bytes:
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def txn(tid: str, pid: int, status: int, topic: str, parts: list[int], start: int, update: int, timeout: int) -> Record:
    key = struct.pack(">h", 0) + _s(tid)
    value = (struct.pack(">hqhib", 0, pid, 0, timeout, status) + struct.pack(">i", 1) + _s(topic)
             + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts) + struct.pack(">qq", update, start))
    return Record(key, value, update)


@pytest.fixture(scope="module")
def story(spark, tmp_path_factory):
    src = REAL / "clean-failover"
    root = tmp_path_factory.mktemp("history") / "clean-failover-plus"
    shutil.copytree(src, root, ignore=shutil.ignore_patterns("dumps", "describe"))
    gt = json.loads((src / "ground_truth.json").read_text())
    leo = {p: v["LEO"] for p, v in gt["replicas_at_collection"]["broker-1"]["partitions"].items()}
    ts = 1_795_374_000_000  # Nov 2026, before the cluster's own records: commit times are not checked against them
    lost_to = leo["cf-0"] + 50
    write_partition(root / "broker-1" / "__consumer_offsets-0", [
        BatchSpec(0, (commit("billing", "cf", 0, leo["cf-0"] - 100, ts), commit("billing", "cf", 1, leo["cf-1"] - 10, ts))),
        BatchSpec(2, (commit("billing", "cf", 0, lost_to, ts + 1000),)),
    ])
    write_partition(root / "broker-1" / "__transaction_state-0", [
        BatchSpec(0, (txn("orders-tx", 4000, 1, "cf", [2], ts, ts, 60_000),)),  # Ongoing since long before collection
        # the coordinator went on working for an hour: its own clock says orders-tx is long overdue
        BatchSpec(1, (txn("done-tx", 4001, 1, "cf", [1], ts + 3_600_000, ts + 3_600_000, 60_000),
                      txn("done-tx", 4001, 4, "cf", [1], ts + 3_600_000, ts + 3_600_005, 60_000))),
    ])
    hw, to = leo["cf-2"], leo["cf-2"] - 50
    log = root / "server-logs" / "node-3-server.log"
    log.write_text(
        f"[2026-11-22 19:30:00,000] INFO [Partition cf-2 broker=3] Log loaded for partition cf-2 with initial high watermark {hw} (kafka.cluster.Partition)\n"
        f"[2026-11-22 19:30:01,000] INFO [ReplicaFetcher replicaId=3, leaderId=1, fetcherId=0] Truncating partition cf-2 with "
        f"TruncationState(offset={to}, completed=true) due to leader epoch and offset EpochEndOffset(errorCode=0, partition=2, "
        f"leaderEpoch=1, endOffset={to}) (kafka.server.ReplicaFetcherThread)\n"
    )
    out = tmp_path_factory.mktemp("history-out") / "out"
    doc = build([root], out, spark=spark, progress=False, register_catalog=False)
    return {"doc": doc, "out": out, "leo": leo, "lost_to": lost_to, "hw": hw, "to": to}


def _kind(doc, kind):
    return [f for f in doc["findings"] if f["kind"] == kind]


def test_consumer_commit_beyond_every_log_end_is_loss(story):
    loss = _kind(story["doc"], "acked_data_loss")
    assert len(loss) == 1, loss
    f = loss[0]
    assert (f["topic"], f["partition"], f["first_offset"], f["last_offset"], f["records"]) == (
        "cf", 0, story["leo"]["cf-0"], story["lost_to"] - 1, story["lost_to"] - story["leo"]["cf-0"])
    assert any("__consumer_offsets" in (e["path"] or "") and "billing" in e["detail"] for e in f["evidence"])
    rows = pq.read_table(story["out"] / "tables" / "consumer_offsets").to_pylist()
    assert {(r["group"], r["topic"], r["partition"], r["committed_offset"]) for r in rows} >= {("billing", "cf", 0, story["lost_to"])}


def test_the_group_that_committed_past_the_log_end_read_lost_data(story):
    """billing's commit on cf-0 is past every replica's end: it read records no replica holds (error);
    its commit on the healthy cf-1, below the log end, is nothing."""
    read = _kind(story["doc"], "consumer_read_lost_data")
    assert len(read) == 1, read
    f = read[0]
    assert (f["severity"], f["topic"], f["partition"], f["first_offset"], f["last_offset"], f["records"]) == (
        "error", "cf", 0, story["leo"]["cf-0"], story["lost_to"] - 1, story["lost_to"] - story["leo"]["cf-0"])
    assert "billing" in f["explanation"] and "OFFSET_OUT_OF_RANGE" in f["explanation"] and f["salvage_brokers"] == []


def test_transaction_left_open_by_the_coordinator_is_hanging(story):
    hang = _kind(story["doc"], "hanging_transaction")
    assert len(hang) == 1, hang
    assert "orders-tx" in hang[0]["evidence"][0]["detail"] and hang[0]["producers"][0]["producer_id"] == 4000


def test_logged_truncation_below_the_loaded_hw(story):
    trunc = _kind(story["doc"], "truncation_below_hw")
    assert len(trunc) == 1, trunc
    f = trunc[0]
    assert (f["topic"], f["partition"], f["brokers"], f["first_offset"], f["last_offset"], f["records"]) == (
        "cf", 2, [3], story["to"], story["hw"] - 1, story["hw"] - story["to"])
    assert f["evidence"][0]["path"].endswith("node-3-server.log") and f["evidence"][0]["position"] == 2
    tl = pq.read_table(story["out"] / "tables" / "timeline").to_pylist()
    assert any(r["source"] == "broker_log" and r["event"] == "truncation" and r["offset"] == story["to"] for r in tl
               if (r["topic"], r["partition"]) == ("cf", 2))


def test_nothing_else_is_reported(story):
    kinds = {f["kind"] for f in story["doc"]["findings"] if f["severity"] in ("error", "warning")}
    assert kinds == {"acked_data_loss", "consumer_read_lost_data", "hanging_transaction", "truncation_below_hw"}, story["doc"]["findings"]
