"""Every sample-data scenario analyzed end to end: its ground truth found, its must-not list silent.

The ground truth comes from the simulator's event log (sample_data/sim/truth.py), not from our
jobs. A finding whose only evidence is the event log (what a server log line would show, e.g. the
moment a broker truncated) is optional here: the files and the ledger cannot show it (the timeline
issue brings broker logs and the metadata log). Everything else must match kind by kind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analyzer.analyze import build
from analyzer.demo import expected_surviving, same_brokers
from sample_data.scenarios import RETOLD_BY_KAFKA4, SCENARIOS, generate

DETECTABLE = {"files", "ledger"}
ANALYZED = sorted(set(SCENARIOS) - RETOLD_BY_KAFKA4)  # those stories are analyzed inside kafka4-benign and kafka4-incident


@pytest.fixture(scope="module")
def scenario(spark, tmp_path_factory):
    cache: dict[str, tuple[dict, dict]] = {}
    outs: dict[str, Path] = {}

    def run(name: str) -> tuple[dict, dict]:
        if name not in cache:
            root = tmp_path_factory.mktemp(name)
            data = generate(name, root / "data")
            doc = build([data], root / "out", ledger=data / "ledger.jsonl", spark=spark, progress=False, register_catalog=False)
            cache[name] = (json.loads((data / "ground_truth.json").read_text()), doc)
            outs[name] = root / "out"
        return cache[name]

    run.outs = outs
    return run


def matches(found: dict, want: dict) -> bool:
    """Same kind, place and offsets, and the same brokers named (for a loss: the surviving log, or
    undetermined where the files cannot tell it, and the salvage brokers)."""
    for k in ("kind", "topic", "partition", "first_offset", "last_offset", "records"):
        if want.get(k) is not None and found.get(k) != want[k]:
            return False
    return same_brokers(found, want)


@pytest.mark.parametrize("name", ANALYZED)
def test_scenario_ground_truth_found_exactly(scenario, name):
    gt, doc = scenario(name)
    found = doc["findings"]
    required = [w for w in gt["expected_findings"] if "event_log" not in w["evidence_sources"]]
    optional = [w for w in gt["expected_findings"] if "event_log" in w["evidence_sources"]]
    for want in required:
        hits = [f for f in found if matches(f, want)]
        assert hits, f"{name}: missing {json.dumps(want)[:400]}\nfound: {json.dumps(found)[:3000]}"
        assert hits[0]["severity"] == want["severity"], (want["kind"], hits[0]["severity"])
    for f in found:
        assert any(matches(f, w) for w in required + optional), f"{name}: not in the ground truth: {json.dumps(f)[:600]}"


@pytest.mark.parametrize("name", ANALYZED)
def test_scenario_must_not_report_is_silent(scenario, name):
    gt, doc = scenario(name)
    for bad in gt["must_not_report"]:
        hits = [f for f in doc["findings"] if f["kind"] == bad["kind"] and f["topic"] == bad.get("topic")
                and (bad.get("partition") is None or f["partition"] == bad["partition"])
                and (not bad.get("brokers") or set(bad["brokers"]) & set(f["brokers"]))
                and (bad.get("broker") is None or bad["broker"] in f["brokers"])]
        assert not hits, f"{name}: reported {bad['kind']} although {bad['why']}"


@pytest.mark.parametrize("name", ANALYZED)
def test_scenario_loss_equals_the_ledger(scenario, name):
    gt, doc = scenario(name)
    lost = sum(w["records"] for w in gt["expected_findings"] if w["kind"] == "acked_data_loss")
    assert doc["summary"]["records_lost"] == lost


@pytest.mark.parametrize("name", ["kafka-1211-divergence", "unclean-election", "hw-two-fetch"])
def test_surviving_log_is_the_true_leader_or_undetermined(scenario, name):
    """unclean-election: the replicas are byte-identical and the simulator writes no metadata log, so
    nothing collected says which leads; the lower broker id is not an answer. hw-two-fetch,
    kafka-1211-divergence: pre-0.11 logs carry no leader epochs, so nothing tells the replicas
    apart either (kafka-1211-divergence: each holds acked records the other lacks)."""
    gt, doc = scenario(name)
    [want] = [w for w in gt["expected_findings"] if w["kind"] == "acked_data_loss"]
    [got] = [f for f in doc["findings"] if f["kind"] == "acked_data_loss"]
    expected = expected_surviving(want)
    assert expected is None
    assert got["surviving_broker"] == expected
    assert got["records"] == want["records"] and same_brokers(got, want)
    # each candidate may be the surviving log: kafka-1211-divergence's both hold acked records the other lacks
    assert got["salvage_brokers"] == ([1, 2] if name == "kafka-1211-divergence" else want["salvage_brokers"])
    if expected is None:
        assert got["brokers"] == want["surviving_candidates"] and "undetermined" in got["explanation"]
    else:
        assert f"on broker {expected}" in got["explanation"]
    # the lineage names the same leader for the latest epoch, by the same evidence
    epoch = max(int(e) for e in gt["replicas"][f"broker-{want['surviving_broker']}"]["partitions"][
        f"{want['topic']}-{want['partition']}"]["batch_epoch_ranges"])
    rows = [r for r in pq.read_table(scenario.outs[name] / "tables" / "epoch_lineage").to_pylist()
            if (r["topic"], r["partition"], r["leader_epoch"]) == (want["topic"], want["partition"], epoch)]
    if epoch < 0:  # no leader epochs on disk: no epoch to name a leader of, and the finding says why
        assert not rows and "carry no leader epochs" in got["explanation"]
        return
    assert rows and {(r["likely_leader"], r["leader_evidence"]) for r in rows} == {
        (expected, None if expected is None else "leader_epoch_checkpoint")}


@pytest.mark.parametrize(("name", "kind"), [("acks-all-min-isr-1", "unclean_leader_election"),
                                            ("crash-lost-unflushed", "committed_data_lost_in_crash")])
def test_the_files_name_the_cause_of_an_epoch_below_a_checkpointed_hw(scenario, name, kind):
    """No metadata log, no broker logs: the leader epochs and checkpoints alone tell an election from
    outside the ISR (acks-all-min-isr-1) from a clean election of a replica a power cut had robbed of
    its unflushed committed records (crash-lost-unflushed), and the divergence is not blamed on
    KAFKA-1211, which leader epochs rule out."""
    gt, doc = scenario(name)
    [want] = [w for w in gt["expected_findings"] if w["kind"] == kind]
    [got] = [f for f in doc["findings"] if f["kind"] in ("unclean_leader_election", "committed_data_lost_in_crash")]
    assert (got["kind"], got["evidence_basis"], got["severity"]) == (kind, "files", "error")
    assert (got["first_offset"], got["last_offset"], got["brokers"]) == (want["first_offset"], want["last_offset"], want["brokers"])
    assert any(e["path"].endswith("replication-offset-checkpoint") for e in got["evidence"])
    assert all(f["evidence_basis"] is None for f in doc["findings"] if f is not got)
    [div] = [f for f in doc["findings"] if f["kind"] == "replica_divergence"]
    assert "KAFKA-1211" not in div["explanation"]


@pytest.mark.parametrize("name", ["hw-two-fetch", "kafka-1211-divergence"])
def test_logs_without_leader_epochs_keep_kafka_1211_as_a_cause(scenario, name):
    """The pre-0.11 scenarios write v1 message sets and no leader-epoch-checkpoint: the files name no
    election cause (a cleanly elected leader's truncation to a stale HW, KAFKA-1211, stays possible)
    and a fork is explained with KAFKA-1211, the wording only logs without leader epochs get."""
    gt, doc = scenario(name)
    assert not [f for f in doc["findings"] if f["kind"] in ("unclean_leader_election", "committed_data_lost_in_crash",
                                                             "leader_epoch_conflict")]
    divs = [f for f in doc["findings"] if f["kind"] == "replica_divergence"]
    assert len(divs) == (name == "kafka-1211-divergence")
    assert all("KAFKA-1211" in f["explanation"] for f in divs)


def test_a_transaction_whose_marker_only_the_old_leader_holds_is_transaction_marker_lost(scenario):
    """txn-marker-lost: the COMMIT marker reached the leader alone, a follower was elected uncleanly.
    The finding pins the last stable offset at the transaction's first offset, names the producer and
    where the marker is, and gives the abort command; hanging_transaction does not repeat it."""
    gt, doc = scenario("txn-marker-lost")
    [want] = [w for w in gt["expected_findings"] if w["kind"] == "transaction_marker_lost"]
    [got] = [f for f in doc["findings"] if f["kind"] == "transaction_marker_lost"]
    assert (got["first_offset"], got["last_offset"], got["brokers"]) == (want["first_offset"], want["last_offset"], want["brokers"])
    assert [(p["producer_id"], p["producer_epoch"]) for p in got["producers"]] == [(2000, 0)]
    [marker] = [e for e in got["evidence"] if "COMMIT marker" in e["detail"]]
    assert marker["broker"] == 1 and marker["path"].startswith("broker-1/") and marker["position"] is not None
    assert f"--topic tm --partition 0 --start-offset {want['first_offset']}" in got["explanation"]
    assert not [f for f in doc["findings"] if f["kind"] == "hanging_transaction"]


def _rows(scenario, name: str, table: str) -> list[dict]:
    return pq.read_table(scenario.outs[name] / "tables" / table).to_pylist()


def test_a_kafka_4_cluster_at_work_is_silent(scenario):
    """kafka4-benign, a Kafka 4.1 cluster in KRaft mode: transactions v2 through a
    transaction.version upgrade (markers one epoch above their data, sequences from 0 at every
    epoch, a producer id handed over at epoch 32767, transactions v0 and v2 producers in one
    partition, v0 and v1 coordinator records), a KIP-848 group and a share group committing and
    acknowledging up to the HW, partitions offline in a full restart and their leaders elected from
    the ELR, a controller failover with an uncommitted tail: no finding at all, not even an info."""
    gt, doc = scenario("kafka4-benign")
    assert gt["expected_findings"] == [] and doc["findings"] == []
    assert doc["summary"] == {"errors": 0, "warnings": 0, "infos": 0, "records_lost": 0}
    quiet = {(b["kind"], b["topic"]) for b in gt["must_not_report"]}
    assert {("duplicate_sequence", "payments"), ("hanging_transaction", "payments"), ("transaction_marker_lost", "payments"),
            ("unclean_leader_election", "inventory"), ("metadata_log_divergence", "__cluster_metadata")} <= quiet


def test_elections_from_the_elr_are_read_as_the_simulator_made_them(scenario):
    """Every leader the simulated controller took from the eligible leader replicas (KIP-966) is
    an election from the ELR in the replayed metadata log, at the same epoch, clean, and the
    timeline says so."""
    gt, _ = scenario("kafka4-benign")
    made = {(e["topic"], e["partition"], e["leader"], e["epoch"]) for e in gt["events"]
            if e["action"] == "leader" and e.get("elected_from") == "elr"}
    assert ("inventory", 0, 2, 2) in made
    rows = [r for r in _rows(scenario, "kafka4-benign", "metadata_events") if r["election"] is not None]
    read = {(r["topic"], r["partition"], r["leader"], r["leader_epoch"]) for r in rows if r["elected_from"] == "elr"}
    assert read == made and all(r["clean"] for r in rows if r["election"] != "offline")
    [line] = [r for r in _rows(scenario, "kafka4-benign", "timeline")
              if (r["topic"], r["partition"], r["event"], r["leader_epoch"]) == ("inventory", 0, "leader_change", 2)]
    assert "elected from ELR [1, 2] (ISR []): clean, KIP-966" in line["detail"] and line["severity"] is None


def test_a_controller_failover_is_silent_and_its_quorum_story_is_in_the_timeline(scenario):
    """kafka4-benign's controller failover: controller 100's uncommitted tail (it led epoch 1 and
    died) parts from the new leader's log; nothing proves it committed, so Raft's truncation of it is
    normal: no finding, a timeline row. The timeline of __cluster_metadata 0 tells the quorum's
    changes: the epochs' leaders and voters, kraft.version 1 and the voter set (KIP-853)."""
    gt, doc = scenario("kafka4-benign")
    leaders = [(e["leader"], e["offset"]) for e in gt["quorum_events"] if e["action"] == "raft_leader"]
    assert [b for b, _ in leaders] == [100, 101]
    rows = [r for r in _rows(scenario, "kafka4-benign", "timeline") if r["topic"] == "__cluster_metadata"]
    events = [(r["event"], r["node"], r["offset"]) for r in rows if r["source"] == "metadata"]
    assert all(("quorum_leader", b, o) in events for b, o in leaders)
    assert ("uncommitted_tail", 100, leaders[1][1]) in events and not any(r["severity"] for r in rows)
    voters = [r["detail"] for r in rows if r["event"] == "quorum_voters"]
    assert len(voters) == 2 and "-[100]" in voters[1] and any(r["event"] == "kraft_version" for r in rows)


def test_a_lost_transactions_v2_marker_at_an_exhausted_epoch_is_transaction_marker_lost(scenario):
    """kafka4-incident, orders-0: the COMMIT (epoch 32767) of the last transaction under the old
    producer id (data at 32766) reached the leader alone, which went on with the new id's aborted
    transaction and died. The open transaction is found at its offsets, on the surviving log's
    broker and the marker's; the new id's aborted data the dead leader alone holds is no loss."""
    gt, doc = scenario("kafka4-incident")
    [want] = [w for w in gt["expected_findings"] if w["kind"] == "transaction_marker_lost"]
    [got] = [f for f in doc["findings"] if f["kind"] == "transaction_marker_lost"]
    assert (got["topic"], got["first_offset"], got["last_offset"], got["brokers"]) == (
        "orders", want["first_offset"], want["last_offset"], want["brokers"])
    assert [(p["producer_id"], p["producer_epoch"]) for p in got["producers"]] == [
        (p["producer_id"], p["producer_epoch"]) for p in want["producers"]] == [(6000, 32766)]
    [marker] = [e for e in got["evidence"] if "COMMIT marker" in e["detail"]]
    assert marker["broker"] == 1 and "(epoch 32767)" in marker["detail"]
    assert "transactional id orders-tx" in got["explanation"]
    assert not [f for f in doc["findings"] if f["kind"] in ("hanging_transaction", "duplicate_sequence")
                or f["kind"] == "acked_data_loss" and f["topic"] == "orders"]


def test_a_share_group_past_an_unclean_elections_lost_range_read_lost_data(scenario):
    """kafka4-incident, clicks-0: broker 2 elected from outside the ISR (the metadata log's
    PartitionChangeRecord, leaderRecoveryState RECOVERING) at the end of its log; the records broker
    1 acked alone are gone, and the share group whose start offset is past them is named as one."""
    gt, doc = scenario("kafka4-incident")
    [loss] = [w for w in gt["expected_findings"] if w["kind"] == "acked_data_loss"]
    [got] = [f for f in doc["findings"] if f["kind"] == "consumer_read_lost_data"]
    assert (got["topic"], got["first_offset"], got["last_offset"], got["severity"]) == ("clicks", loss["first_offset"], loss["last_offset"], "error")
    assert got["explanation"].startswith("Share group clicks-share")
    [election] = [f for f in doc["findings"] if f["kind"] == "unclean_leader_election" and f["topic"] == "clicks"]
    assert (election["evidence_basis"], election["first_offset"], election["brokers"]) == ("metadata_log", loss["first_offset"], [2])
    assert "leaderRecoveryState RECOVERING" in election["evidence"][0]["detail"]


def test_a_controller_that_lost_committed_metadata_is_found_at_its_offsets(scenario):
    """kafka4-incident's controllers: 100 and 101 committed four batches of epoch 1 while 102 was
    down; 101's disk was replaced and voted for 102, which leads epoch 2 without them. Controller
    100 alone holds them, with the snapshot that proves them committed."""
    gt, doc = scenario("kafka4-incident")
    [want] = [w for w in gt["expected_findings"] if w["kind"] == "metadata_log_divergence"]
    [got] = [f for f in doc["findings"] if f["kind"] == "metadata_log_divergence"]
    assert (got["topic"], got["partition"], got["first_offset"], got["last_offset"], got["records"]) == (
        "__cluster_metadata", 0, want["first_offset"], want["last_offset"], want["records"])
    assert (got["brokers"], got["salvage_brokers"], got["severity"]) == (want["brokers"], want["salvage_brokers"], "error")
    assert want["brokers"] == [100, 102] and want["salvage_brokers"] == [100]  # the story: 100 holds them, 102 leads
    assert got["evidence"][0]["path"] == "controller-100/__cluster_metadata-0/00000000000000000000.log"
    assert got["evidence"][-1]["path"].startswith("controller-102/") and "elected by voters [101, 102]" in got["evidence"][-1]["detail"]
