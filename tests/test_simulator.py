"""Mechanics of the replication simulator, each against the Kafka behaviour it stands for:
the two-fetch HW delay, ISR shrink and min.insync.replicas, truncation by HW vs by leader
epoch, KIP-279's double failover, the leader-epoch cache, determinism."""

from __future__ import annotations

import json

import pytest

from sample_data.scenarios import generate, simulate
from sample_data.sim.cluster import LAG_TIME_MAX_MS, Cluster
from sample_data.sim.model import Replica
from sample_data.sim.truth import expected_findings, replica_divergence


def _pair(truncation: str = "kip279", min_isr: int = 1) -> Cluster:
    c = Cluster([1, 2], truncation=truncation)
    c.create_topic("t", 1, 2, min_isr=min_isr)
    return c


def test_follower_learns_the_hw_one_fetch_after_the_leader_moves_it():
    c = _pair()
    c.produce("t", 0, 10, acks="all", batch_records=10)
    leader, follower = c.replica(1, "t", 0), c.replica(2, "t", 0)
    assert (leader.leo, leader.hw, c.ledger) == (10, 0, [])
    c.fetch(1)  # follower gets the batch; the response carried HW 0
    assert (follower.leo, follower.hw, leader.hw, c.ledger) == (10, 0, 0, [])
    c.fetch(1)  # this fetch (offset 10) moves the leader's HW and acks; the response still says 0
    assert (leader.hw, follower.hw, len(c.ledger)) == (10, 0, 10)
    c.fetch(1)
    assert follower.hw == 10


def test_isr_shrinks_after_lag_time_and_min_isr_refuses_acks_all():
    c = _pair(min_isr=2)
    c.produce("t", 0, 10)
    c.fetch(3)
    c.crash(2)
    c.advance(LAG_TIME_MAX_MS * 2)
    assert c.part("t", 0).isr == [1, 2]  # Replica.isCaughtUp: a follower at the leader's LEO is never out of sync
    c.produce("t", 0, 10, acks="1")  # its last caught-up time is long past: out as soon as the LEO moves
    assert c.part("t", 0).isr == [1]
    c.produce("t", 0, 5, acks="all", batch_records=5)
    assert [r["error"] for r in c.ledger_failed] == ["NOT_ENOUGH_REPLICAS"] * 5
    c.produce("t", 0, 5, acks="1", batch_records=5)
    assert [r["offset"] for r in c.ledger[-5:]] == [20, 21, 22, 23, 24]


def test_acks_all_waits_for_the_isr_to_shrink_when_a_follower_stalls():
    c = _pair(min_isr=1)
    c.produce("t", 0, 10, acks="all", batch_records=10)
    assert c.ledger == []
    c.advance(LAG_TIME_MAX_MS + 1000)  # no fetches: follower 2 drops out, the leader alone is the ISR
    assert c.part("t", 0).isr == [1] and len(c.ledger) == 10


@pytest.mark.parametrize("rule, diverges", [("hw", True), ("kip101", False), ("kip279", False)])
def test_kafka_1211_sequence_diverges_only_with_hw_truncation(rule, diverges):
    cluster, _, _ = simulate("kafka-1211-divergence", truncation=rule)
    assert bool(replica_divergence(cluster)) is diverges
    truncated_below = [e for e in cluster.events if e["action"] == "truncate" and e["to"] < e["hw_bound"]]
    assert bool(truncated_below) is diverges


def test_double_failover_diverges_without_kip_279_and_not_with_it():
    old, _, _ = simulate("double-failover-kip-279", truncation="kip101")
    new, _, _ = simulate("double-failover-kip-279", truncation="kip279")
    bad = replica_divergence(old)
    assert bad and bad[0]["leader_epochs"] == [0, 1] and bad[0]["brokers"] == [1, 2]
    assert replica_divergence(new) == []
    # with the fix broker 2 truncated to the end of epoch 0 (where its epoch-1 records began)
    cut = [e for e in new.events if e["action"] == "truncate" and e["actor"] == "broker-2" and e["partition"] == 0]
    assert cut and cut[-1]["to"] == bad[0]["first_offset"]
    # the epoch-1 records acked by broker 2 are lost either way; only without the fix does broker 2 still hold them
    lost_old = [f for f in expected_findings(old, []) if f["kind"] == "acked_data_loss" and f["partition"] == 0]
    lost_new = [f for f in expected_findings(new, []) if f["kind"] == "acked_data_loss" and f["partition"] == 0]
    assert lost_old[0]["salvage_brokers"] == [2] and lost_new[0]["salvage_brokers"] == []
    assert lost_old[0]["records"] == lost_new[0]["records"]


def test_unclean_election_is_recorded_with_the_committed_offset_it_lost():
    cluster, _, _ = simulate("unclean-election")
    e = next(e for e in cluster.events if e["action"] == "leader" and e["unclean"])
    assert e["isr"] == [e["leader"]] and e["epoch_start_offset"] < e["committed_before"]


def test_epoch_cache_drops_an_empty_epoch_when_the_next_starts_at_the_same_offset():
    r = Replica(1, "t", 0, epochs=[(0, 0), (1, 150)])
    r.assign_epoch(2, 150)
    assert r.epochs == [(0, 0), (2, 150)]
    assert r.assign_epoch(2, 160) is False
    assert r.end_offset_for(1) == (0, 150) and r.end_offset_for(5) == (2, 0)


def test_hw_rule_truncates_to_the_checkpoint_and_epoch_rule_does_not():
    for rule, expect in (("hw", 150), ("kip279", 160)):
        cluster, _, _ = simulate("kip-101-safe", truncation=rule)
        first = next(e for e in cluster.events if e["action"] == "start" and e["actor"] == "broker-2")
        after = [
            e for e in cluster.events[cluster.events.index(first) :] if e["action"] == "truncate" and e["actor"] == "broker-2"
        ]
        leo = after[0]["to"] if after else 160
        assert leo == expect, rule


def test_same_seed_same_bytes_other_seed_other_values(tmp_path):
    a = generate("unclean-election", tmp_path / "a", seed=7)
    b = generate("unclean-election", tmp_path / "b", seed=7)
    c = generate("unclean-election", tmp_path / "c", seed=8)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    seg = "broker-1/ue-0/00000000000000000000.log"
    assert (a / seg).read_bytes() != (c / seg).read_bytes()
    assert (
        json.loads((a / "ground_truth.json").read_text())["expected_findings"]
        == json.loads((c / "ground_truth.json").read_text())["expected_findings"]
    )


def test_a_retry_after_failover_duplicates_records_that_had_been_replicated():
    cluster, _, _ = simulate("clean-failover")
    failed = {(r["key_sha256"], r["value_sha256"]) for r in cluster.ledger_failed}
    assert failed and all(r["error"].startswith("NOT_LEADER_OR_FOLLOWER") for r in cluster.ledger_failed)
    leader = cluster.replica(cluster.part("cf", 0).leader, "cf", 0)
    copies = [r.content for _, (_, r) in leader.record_at().items() if r is not None and r.content in failed]
    assert len(copies) == 2 * len(failed)  # the first attempt (replicated, never acked) and the acked retry
    acked = [(r["key_sha256"], r["value_sha256"]) for r in cluster.ledger if (r["key_sha256"], r["value_sha256"]) in failed]
    assert sorted(acked) == sorted(failed)


def _kraft_trio(min_isr: int = 2) -> Cluster:
    c = Cluster([1, 2, 3], kraft=True)
    c.create_topic("t", 1, 3, min_isr=min_isr)
    c.produce("t", 0, 10)
    c.fetch(3)
    return c


def test_kraft_elr_follows_the_isr_below_min_isr_and_elects_cleanly_when_the_isr_empties():
    """PartitionChangeBuilder.maybePopulateTargetElr: replicas leaving an ISR smaller than
    min.insync.replicas are eligible; the last ISR member's controlled shutdown empties the ISR
    (leader -1 bumps the epoch); the first eligible replica back is elected from the ELR, cleanly."""
    c = _kraft_trio()
    part = c.part("t", 0)
    c.stop(3)
    assert (part.isr, part.elr) == ([1, 2], [])
    c.stop(2)
    assert (part.isr, part.elr) == ([1], [2])
    c.stop(1)
    assert (part.leader, part.epoch, part.isr, part.elr) == (-1, 1, [], [1, 2])
    c.restart(2)
    [e] = [e for e in c.events if e["action"] == "leader" and e["leader"] == 2]
    assert (e["epoch"], e["unclean"], e["elected_from"], e["prev_isr"], e["elr"]) == (2, False, "elr", [], [1])
    c.restart(1)
    c.fetch(3)
    assert (part.isr, part.elr, part.last_known_elr) == ([2, 1], [], [])


def test_kraft_fences_a_killed_broker_and_its_unclean_restart_leaves_the_elr():
    """A killed broker leaves every ISR when it is fenced; re-registering after an unclean shutdown
    takes it out of the ELR (handleBrokerUncleanShutdown), so it cannot be elected cleanly."""
    c = _kraft_trio(min_isr=1)
    part = c.part("t", 0)
    c.crash(3)
    c.crash(2)
    assert (part.isr, part.elr) == ([1], [])
    c.crash(1)
    assert (part.leader, part.isr, part.elr) == (-1, [], [1])
    c.restart(1)
    assert (part.leader, part.elr, part.last_known_elr) == (-1, [], [1])
    c.elect("t", 0, 1, unclean=True)
    assert (part.leader, part.recovering) == (1, True)
    c.restart(2)
    c.fetch(2)
    assert (part.isr, part.recovering) == ([1, 2], False)  # the first ISR expansion marks it RECOVERED


def test_the_controller_writes_each_partition_change_as_kafka_does():
    """sample_data.sim.controller: TopicRecord and PartitionRecord at creation, then one
    PartitionChangeRecord (v2) per change with only what changed, read back by our decoder."""
    from parsers import segment
    from parsers.metadata_records import decode_records
    from sample_data.scenarios import _kafka4
    from sample_data.writer.records import encode_batch

    c = Cluster([1, 2, 3])
    q = _kafka4(c)
    c.create_topic("t", 1, 3, min_isr=2)
    c.stop(3)
    c.stop(2)
    c.stop(1)
    c.restart(2)
    raw = b"".join(encode_batch(b) for b in q.nodes[100].log)
    table, problems = decode_records(segment.parse(raw, "x.log", records=True, payloads=True).extra["records"])
    assert problems == []
    rows = [(r["record_type"], json.loads(r["data_json"])) for r in table.to_pylist()
            if r["record_type"] in ("TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD")]
    assert [t for t, _ in rows] == ["TOPIC_RECORD", "PARTITION_RECORD"] + ["PARTITION_CHANGE_RECORD"] * 4
    changes = [{k: v for k, v in d.items() if k not in ("partitionId", "topicId")} for _, d in rows[2:]]
    assert changes == [{"isr": [1, 2]}, {"isr": [1], "eligibleLeaderReplicas": [2]},
                       {"leader": -1, "isr": [], "eligibleLeaderReplicas": [1, 2]},
                       {"leader": 2, "isr": [2], "eligibleLeaderReplicas": [1]}]
