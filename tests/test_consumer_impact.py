"""``consumer_read_lost_data``: which consumer groups read past lost or divergent records, and what
their next fetch does (``jobs.findings.loss.consumer_read_lost``), on collected rows without Spark.
The same rule on real Kafka bytes is checked in test_restart_preview_real.py."""

from __future__ import annotations

from jobs.findings.loss import consumer_read_lost
from jobs.findings.model import Finding

LEO = {("ue", 0): 450}


def commit(group: str, offset: int, partition: int = 0) -> dict:
    return {"group": group, "topic": "ue", "partition": partition, "committed_offset": offset, "broker": 2,
            "path": "broker-2/__consumer_offsets-0/00000000000000000000.log", "batch_position": 0}


def loss(first: int, last: int, salvage: list[int]) -> Finding:
    return Finding(kind="acked_data_loss", severity="error", topic="ue", partition=0, brokers=[2, *salvage], first_offset=first, last_offset=last,
                   records=last - first + 1, salvage_brokers=salvage, surviving_broker=2, explanation="lost")


def divergence(first: int, last: int) -> Finding:
    return Finding(kind="replica_divergence", severity="error", topic="ue", partition=0, brokers=[1, 2], first_offset=first, last_offset=last,
                   records=last - first + 1, explanation="forked")


def test_a_group_behind_the_range_or_on_a_healthy_partition_is_nothing():
    ranges = [loss(300, 499, [1])]
    assert consumer_read_lost([commit("lagging", 250), commit("at-start", 300), commit("other", 900, partition=1)],
                              ranges, LEO) == []
    assert consumer_read_lost([commit("healthy", 400)], [], LEO) == []


def test_commit_inside_a_salvageable_loss_warns_and_says_the_offsets_were_reused():
    [f] = consumer_read_lost([commit("inside", 400)], [loss(300, 499, [1]), divergence(300, 449)], LEO)
    assert (f.kind, f.severity, f.first_offset, f.last_offset, f.records) == ("consumer_read_lost_data", "warning", 300, 399, 100)
    assert f.salvage_brokers == [1] and f.brokers == [1, 2]
    assert "still held by broker 1" in f.explanation and "silently reads other records" in f.explanation
    assert "400-449" in f.explanation
    assert f.evidence[0].path.startswith("broker-2/__consumer_offsets-0") and "group inside committed offset 400" in f.evidence[0].detail


def test_commit_beyond_the_surviving_log_end_fails_with_offset_out_of_range():
    [f] = consumer_read_lost([commit("beyond", 480)], [loss(300, 499, [1])], LEO)
    assert (f.first_offset, f.last_offset, f.records) == (300, 479, 180)
    assert "OFFSET_OUT_OF_RANGE" in f.explanation and "auto.offset.reset" in f.explanation


def test_records_no_replica_holds_make_it_an_error():
    [f] = consumer_read_lost([commit("gone", 350)], [loss(300, 499, [])], LEO)
    assert f.severity == "error" and "no replica holds" in f.explanation


def test_divergence_alone_warns_once_per_group_over_the_union_of_ranges():
    found = consumer_read_lost([commit("a", 460), commit("b", 320)], [divergence(300, 449), divergence(440, 455)], LEO)
    assert [(f.first_offset, f.last_offset, f.records, f.severity) for f in found] == [(300, 455, 156, "warning"), (300, 319, 20, "warning")]
    assert "OFFSET_OUT_OF_RANGE" in found[0].explanation
