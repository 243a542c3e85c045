"""``consumer_read_lost_data``: which consumer groups read past lost or divergent records, and what
their next fetch does (``jobs.findings.loss.consumer_read_lost``), on collected rows without Spark.
The same rule on real Kafka bytes is checked in test_restart_preview_real.py."""

from __future__ import annotations

from jobs.findings.loss import consumer_read_lost, share_progress
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


def share_start(group: str, offset: int, partition: int = 0, start: int | None = None) -> dict:
    return {**commit(group, offset, partition), "path": "broker-2/__share_group_state-0/00000000000000000000.log", "share": True,
            "start_offset": offset if start is None else start}


def test_a_share_group_past_a_lost_range_read_it_and_says_it_is_a_share_group():
    """A share group's start offset is its progress (every record below it acknowledged or
    archived): past the first lost offset it consumed lost records, like a committed offset."""
    [f] = consumer_read_lost([share_start("sg", 400)], [loss(300, 499, [1])], LEO)
    assert (f.kind, f.severity, f.first_offset, f.last_offset, f.records) == ("consumer_read_lost_data", "warning", 300, 399, 100)
    assert f.explanation.startswith("Share group sg acknowledged or archived every record of ue-0 below offset 400 "
                                    "(its share-partition start offset 400)")
    assert f.evidence[0].path.startswith("broker-2/__share_group_state-0")
    assert f.evidence[0].detail == "__share_group_state: share group sg start offset 400"
    [f] = consumer_read_lost([share_start("sg", 400, start=250)], [loss(300, 499, [1])], LEO)  # acknowledged batches past its start
    assert f.records == 100 and "start offset 250, and the acknowledged state batches after it" in f.explanation
    assert f.evidence[0].detail == "__share_group_state: share group sg start offset 250, acknowledged or archived up to 399"
    assert consumer_read_lost([share_start("behind", 300)], [loss(300, 499, [1])], LEO) == []


def test_a_share_group_beyond_the_surviving_log_end_is_never_delivered_the_records_written_below_its_start():
    [f] = consumer_read_lost([share_start("sg", 480)], [loss(300, 499, [])], LEO)
    assert f.severity == "error" and "Share group sg" in f.explanation
    assert "does not move a share-partition's start offset back" in f.explanation and "450-479" in f.explanation
    assert "auto.offset.reset" not in f.explanation


def test_share_starts_name_their_topic_by_the_id_in_partition_metadata():
    """The record's Uuid.toString() (base64url) against replica_logs' UUID string."""
    rl = [{"topic": "ue", "partition": 0, "broker": 1, "topic_id": "00010203-0405-0607-0809-0a0b0c0d0e0f"},
          {"topic": "old", "partition": 0, "broker": 1, "topic_id": None}]
    base = {"group": "sg", "partition": 0, "start_offset": 7, "acknowledged_to": 9, "broker": 2, "path": "p", "batch_position": 0}
    starts = [{**base, "topic_id": "AAECAwQFBgcICQoLDA0ODw"}, {**base, "topic_id": "AQIDBAUGBwgJCgsMDQ4PEA"},  # a deleted topic's id
              {**base, "topic_id": "not-an-id"}]
    assert share_progress(starts, rl) == [{"group": "sg", "topic": "ue", "partition": 0, "committed_offset": 9, "start_offset": 7,
                                           "broker": 2, "path": "p", "batch_position": 0, "share": True}]


def test_divergence_alone_names_the_surviving_log_and_the_salvageable_replicas():
    forked = Finding(kind="replica_divergence", severity="error", topic="ue", partition=0, brokers=[1, 2], first_offset=300, last_offset=449,
                     records=150, surviving_broker=2, salvage_brokers=[1], explanation="forked")
    [f] = consumer_read_lost([commit("inside", 400)], [forked], LEO)
    assert (f.surviving_broker, f.salvage_brokers, f.severity) == (2, [1], "warning")
    assert "whichever the broker it fetched from held; the surviving log is broker 2's, broker 1's are salvageable" in f.explanation


def test_the_consumer_rule_reads_the_divergence_the_divergence_detector_reports():
    """One finding, one computation (issue 37): the divergence a consumer finding builds on is the
    replica_divergence finding itself, with its surviving and salvage brokers, not a second
    computation without the surviving logs. The case's views are given as rows (no Spark)."""
    from pathlib import Path

    from jobs.findings import committed, divergence, loss
    from jobs.findings.case import Case
    from jobs.history.views import History
    from jobs.replicas.survivors import Survivor

    rng = {"status": "divergent", "topic": "ue", "partition": 0, "first_offset": 300, "last_offset": 449, "offsets": 150}
    for side, broker in (("a", 1), ("b", 2)):
        rng |= {f"broker_{side}": broker, f"path_{side}": f"broker-{broker}/ue-0/00000000000000000000.log", f"position_{side}": 0,
                f"epochs_{side}": [broker - 1], f"bytes_{side}": 1000, f"producer_keys_{side}": [], f"min_seq_{side}": None,
                f"max_seq_{side}": None, f"first_ts_{side}": 1, f"last_ts_{side}": 2}
    replicas = [{"topic": "ue", "partition": 0, "broker": b, "dir_state": "live", "leo": leo} for b, leo in ((1, 450), (2, 450))]
    case = Case(None, Path("/nonexistent"), {})
    case.__dict__.update(ranges=[rng], replicas=replicas, replicas_agree=False, ledger_records=None,
                         survivors={("ue", 0): Survivor(broker=2, candidates=[replicas[1]], epoch=1, why="latest epoch")},
                         history=History(commits=[commit("inside", 400)], complete={("ue", 0)}))
    case._shared[committed._committed_ranges] = []  # (no committed loss: the replicas' HWs agree)
    [forked] = divergence.find(case)
    [read] = loss.find(case)
    assert (forked.surviving_broker, forked.salvage_brokers) == (2, [1])
    assert (read.kind, read.surviving_broker, read.salvage_brokers) == ("consumer_read_lost_data", 2, [1])
    assert f"replica_divergence at offsets {forked.first_offset}-{forked.last_offset}" in read.evidence[1].detail
