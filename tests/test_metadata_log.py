"""The KRaft metadata log's copies compared (``jobs.replicas.metadata_log``, ``metadata_log_divergence``).

The rules are Kafka 4.1.1's raft/ (``ReplicatedLog.validateOffsetAndEpoch``/``truncateToEndOffset``,
``KafkaMetadataLog.endOffsetForEpoch``, ``LeaderState.maybeUpdateHighWatermark``), tested on plain
rows without Spark; the writer's bytes are judged by Kafka 4.1.1's ``kafka-dump-log
--cluster-metadata-decoder`` and read back by our decoder. The scenarios built on them are analyzed
end to end in test_forensics_scenarios.py.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from kafka_dump_log import parse_dump_text

from jobs.findings.metadata_log import divergence_findings
from jobs.history.quorum import quorum_rows
from jobs.replicas.metadata_log import (
    EpochStart,
    MetadataLogComparison,
    OffsetAndEpoch,
    RaftLogCopy,
    UnmatchedRun,
    compare,
    fetch_truncation,
    reference_copy,
)
from parsers import segment
from parsers.metadata_records import decode_records
from sample_data.scenarios import simulate
from sample_data.writer import raft_log as rl
from sample_data.writer.records import encode_batch


def copy(node, epochs, end, *, start=0, snapshots=()):
    return RaftLogCopy(node, tuple(epochs), start, end, tuple(OffsetAndEpoch(*s) for s in snapshots), f"controller-{node}/x.log")


def run(holders, epoch, first, last, records=None):
    return UnmatchedRun(tuple(holders), epoch, first, last, last - first + 1, last - first + 1 if records is None else records,
                        evidence=tuple((h, f"controller-{h}/x.log", first * 10) for h in holders))


STARTS = [EpochStart(1, 0, 100, (100, 101, 102), (100, 101, 102)), EpochStart(2, 6, 101, (100, 101, 102), (101, 102))]


# --------------------------------------------------------------------------- Raft's fetch truncation
def test_a_follower_that_is_a_prefix_of_the_leader_keeps_its_log():
    leader = copy(101, [(1, 0), (2, 6)], 20)
    assert fetch_truncation(copy(102, [(1, 0), (2, 6)], 12), leader).truncate_to == 12
    assert fetch_truncation(copy(102, [(1, 0)], 5), leader).truncate_to == 5  # behind, in an older epoch


def test_an_old_leaders_tail_is_cut_where_the_new_epoch_starts():
    """The old leader fetches at (9, epoch 1); the leader answers DIVERGING (epoch 1 ends at 6)."""
    ft = fetch_truncation(copy(100, [(1, 0)], 9), copy(101, [(1, 0), (2, 6)], 14))
    assert (ft.truncate_to, ft.epochs_sent) == (6, (1, 1))


def test_a_follower_of_an_epoch_the_leader_never_had_asks_again_with_its_previous_epoch():
    """Node 100 led epoch 2 alone from 6; the leader's log goes epoch 1 to 10, then epoch 3: the
    answer for epoch 2 is (1, 10); node 100's own epoch 1 ends at 6, so it cuts there and asks again."""
    ft = fetch_truncation(copy(100, [(1, 0), (2, 6)], 12), copy(102, [(1, 0), (3, 10)], 15))
    assert (ft.truncate_to, ft.epochs_sent) == (6, (2, 1))


def test_the_reference_is_the_most_up_to_date_log_by_raft_order():
    a, b, c = copy(100, [(1, 0)], 30), copy(101, [(1, 0), (2, 6)], 10), copy(102, [(1, 0), (2, 6)], 10)
    assert reference_copy([a, b, c], STARTS).node == 101  # epoch 2 beats a longer epoch 1; 101 led epoch 2


# --------------------------------------------------------------------------- benign and committed
def test_a_failovers_uncommitted_tail_is_no_finding_and_the_timeline_says_so():
    copies = [copy(100, [(1, 0)], 9), copy(101, [(1, 0), (2, 6)], 14), copy(102, [(1, 0), (2, 6)], 12)]
    verdicts = compare(copies, [run([100], 1, 6, 8)], STARTS)
    old = next(v for v in verdicts if v.node == 100)
    assert (old.truncate_to, old.committed_end, [u.first_offset for u in old.tail]) == (6, None, [6])
    cmp = MetadataLogComparison(tuple(copies), 101, tuple(STARTS), tuple(verdicts))
    assert divergence_findings(cmp) == []
    [row] = [r for r in quorum_rows(cmp) if r["event"] == "uncommitted_tail"]
    assert row["node"] == 100 and row["offset"] == 6 and row["severity"] is None and "never committed" in row["detail"]
    assert [r["event"] for r in quorum_rows(cmp)].count("quorum_leader") == 2


def test_a_follower_copied_after_the_leader_is_ahead_not_diverged():
    """The leader's copy taken first: a follower holds more of the leader's latest epoch (and a
    snapshot there), which the leader's copy cannot show. Nothing to truncate, nothing committed lost."""
    copies = [copy(101, [(1, 0), (2, 6)], 14), copy(102, [(1, 0), (2, 6)], 20, snapshots=[(18, 2)])]
    verdicts = compare(copies, [run([102], 2, 14, 19)], STARTS)
    [v] = [v for v in verdicts if v.node == 101]
    assert (v.truncate_to, v.tail, v.committed_end, v.conflict) == (14, [], None, [])


def test_committed_records_the_leader_lacks_proven_by_a_snapshot():
    copies = [copy(100, [(1, 0)], 11, snapshots=[(10, 1)]), copy(101, [(2, 6)], 10, start=6), copy(102, [(1, 0), (2, 6)], 10)]
    starts = [STARTS[0], EpochStart(2, 6, 102, (100, 101, 102), (101, 102))]
    verdicts = compare(copies, [run([100], 1, 6, 9), run([100], 1, 10, 10)], starts)
    cmp = MetadataLogComparison(tuple(copies), 102, tuple(starts), tuple(verdicts))
    [f] = divergence_findings(cmp)
    assert (f.kind, f.severity, f.topic, f.partition) == ("metadata_log_divergence", "error", "__cluster_metadata", 0)
    assert (f.first_offset, f.last_offset, f.records, f.brokers, f.salvage_brokers) == (6, 9, 4, [100, 102], [100])
    assert "snapshot 10-1" in f.evidence[0].detail and "elected by voters [101, 102]" in f.evidence[-1].detail


def test_committed_records_the_leader_lacks_proven_by_a_majority_of_the_epochs_voters():
    """Voters 100 and 101 of epoch 1 hold 6-9, a majority of three: committed, though 102 leads epoch 2
    without them (elected by a voter's vote from another voter set: say, a misconfigured quorum)."""
    copies = [copy(100, [(1, 0)], 10), copy(101, [(1, 0)], 10), copy(102, [(1, 0), (2, 6)], 12)]
    starts = [STARTS[0], EpochStart(2, 6, 102, (102, 103, 104), (102, 103, 104))]
    verdicts = compare(copies, [run([100, 101], 1, 6, 9)], starts)
    [f] = divergence_findings(MetadataLogComparison(tuple(copies), 102, tuple(starts), tuple(verdicts)))
    assert (f.first_offset, f.last_offset, f.brokers) == (6, 9, [100, 101, 102])
    assert "a majority" in f.explanation or "a majority" in f.evidence[0].detail


def test_an_observers_tail_is_no_evidence_of_commitment():
    """Broker 1 (an observer) fetched the old leader's tail too: two holders, but one voter of three."""
    copies = [copy(100, [(1, 0)], 9), copy(1, [(1, 0)], 9), copy(101, [(1, 0), (2, 6)], 12)]
    verdicts = compare(copies, [run([1, 100], 1, 6, 8)], STARTS)
    assert all(v.committed_end is None for v in verdicts)


def test_other_bytes_in_the_same_epoch_are_a_conflict():
    copies = [copy(100, [(1, 0)], 10), copy(101, [(1, 0)], 10)]
    verdicts = compare(copies, [run([101], 1, 4, 4)], STARTS[:1])
    [f] = divergence_findings(MetadataLogComparison(tuple(copies), 100, tuple(STARTS[:1]), tuple(verdicts)))
    assert (f.first_offset, f.last_offset, f.brokers) == (4, 4, [100, 101]) and "one epoch" in f.explanation


def test_a_snapshot_only_copy_whose_snapshot_the_leader_does_not_hold():
    """A node whose log was deleted below its snapshot (10, epoch 1); the leader's epoch 1 ends at 6."""
    copies = [copy(100, [], 10, start=10, snapshots=[(10, 1)]), copy(102, [(1, 0), (2, 6)], 12)]
    verdicts = compare(copies, [], STARTS)
    [v] = verdicts
    assert (v.truncate_to, v.committed_end) == (6, 10)


# --------------------------------------------------------------------------- the simulator's ground truth
def test_the_quorum_simulator_commits_by_majority_and_loses_with_a_replaced_disk():
    c, _, _ = simulate("kraft-controller-diverged")
    q = c.quorum
    assert q.reference().node == 102 and q.committed_lost() == [
        {"first_offset": 6, "last_offset": 9, "records": 4, "brokers": [100, 102], "holders": [100], "leader_copy": 102}]
    c, _, _ = simulate("kraft-controller-failover")
    assert c.quorum.committed_lost() == [] and c.quorum.nodes[100].end > c.quorum.nodes[101].log[6].base_offset


# --------------------------------------------------------------------------- bytes, judged by Kafka 4.1.1
def _decode(path):
    parsed = segment.parse(path.read_bytes(), str(path), records=True, payloads=True)
    table, problems = decode_records(parsed.extra["records"])
    return table, parsed.table, problems


def test_written_metadata_logs_read_by_kafka_4_1_1_as_by_us(tmp_path, kafka41_bin):
    """Every node of kafka4-benign (kraft-controller-failover's story in a cluster whose controller
    writes its partitions: sample_data.sim.controller): LeaderChangeMessage, KRaftVersionRecord,
    VotersRecord, NoOpRecord, FeatureLevelRecord, TopicRecord, PartitionRecord and
    PartitionChangeRecord (v2, ELR fields) in the logs, and the snapshots, as Kafka's dump tool
    prints them."""
    c, _, _ = simulate("kafka4-benign")
    for b in c.brokers:
        (tmp_path / f"broker-{b}").mkdir()
    c.quorum.materialize(tmp_path, c.cluster_id)
    files = sorted(tmp_path.glob("*/__cluster_metadata-0/*.log")) + sorted(tmp_path.glob("*/__cluster_metadata-0/*.checkpoint"))
    assert len(files) == 8
    out = subprocess.run([str(kafka41_bin / "kafka-dump-log.sh"), "--cluster-metadata-decoder", "--files", ",".join(map(str, files))],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    dumps = parse_dump_text(out.stdout)
    kinds = set()
    for f in files:
        dump = dumps[str(f)]
        table, batches, problems = _decode(f)
        assert problems == []
        assert [(int(b["baseOffset"]), int(b["lastOffset"]), int(b["partitionLeaderEpoch"]), b["isControl"] == "true", int(b["crc"]))
                for b in dump["batches"]] == [(r["base_offset"], r["last_offset"], r["partition_leader_epoch"], r["is_control"], r["crc"])
                                              for r in batches.to_pylist()]
        ours = table.to_pylist()
        texts = [line for line in out.stdout.split("Dumping " + str(f))[1].split("Dumping ")[0].splitlines() if line.startswith("| offset")]
        assert len(texts) == len(ours)
        for line, row in zip(texts, ours):
            kinds.add(row["record_type"])
            if "payload: " in line:  # a metadata record: Kafka's JSON of it
                assert json.loads(line.split("payload: ", 1)[1])["data"] == json.loads(row["data_json"])
            else:  # a control record: ``<Name> {json}`` (LeaderChange: ``LeaderChange: {json}``)
                assert json.loads(line[line.index("{"):]) == json.loads(row["data_json"])
    assert {"LEADER_CHANGE", "KRAFT_VERSION", "KRAFT_VOTERS", "NO_OP_RECORD", "FEATURE_LEVEL_RECORD", "SNAPSHOT_HEADER",
            "SNAPSHOT_FOOTER", "TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD"} <= kinds
    state = json.loads((tmp_path / "controller-101" / "__cluster_metadata-0" / "quorum-state").read_text())
    assert state == {"clusterId": "", "leaderId": 101, "leaderEpoch": 2, "votedId": 101, "appliedOffset": 0,
                     "currentVoters": [{"voterId": 101}, {"voterId": 102}], "data_version": 0}


@pytest.mark.parametrize("kraft_version", [0, 1])
def test_a_snapshot_states_the_voters_only_from_kraft_version_1(kraft_version):
    voters = [rl.Voter(1)] if kraft_version else []
    batches = rl.snapshot_batches(3, 5, 4, [rl.no_op_record()], kraft_version=kraft_version, voters=voters)
    raw = b"".join(encode_batch(b) for b in batches)
    table, problems = decode_records(segment.parse(raw, "x.checkpoint", records=True, payloads=True).extra["records"])
    assert problems == []
    want = ["SNAPSHOT_HEADER", *(["KRAFT_VERSION", "KRAFT_VOTERS"] if kraft_version else []), "NO_OP_RECORD", "SNAPSHOT_FOOTER"]
    assert table.column("record_type").to_pylist() == want
    with pytest.raises(ValueError):
        rl.snapshot_batches(3, 5, 4, [], kraft_version=0, voters=[rl.Voter(1)])
