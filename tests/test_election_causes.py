"""The cause of an epoch that starts below a checkpointed high watermark, decided from the files
(issue 19 item 1): the pure rules in jobs/findings/elections.py on replica_logs/epoch_lineage rows
shaped as the jobs write them, and the fork wording of replica_divergence."""

from __future__ import annotations

from dataclasses import replace

from jobs.findings.divergence import fork_cause
from jobs.findings.elections import crash_lost_data, epoch_below_hw, files_election_findings
from jobs.history.views import History
from jobs.replicas.survivors import Survivor


def replica(broker, *, hw, recovery, clean, epochs, log_start=0):
    """A replica_logs row (the columns the rule reads)."""
    return {"topic": "t", "partition": 0, "broker": broker, "log_dir": f"broker-{broker}/data", "dir_state": "live",
            "hw_checkpoint": hw, "recovery_point": recovery, "clean_shutdown": clean, "log_start_offset": log_start,
            "last_epoch": max(epochs) if epochs else None, "batch_max_epoch": max(epochs) if epochs else None}


def lineage(broker, epochs, leaders=None):
    """epoch_lineage rows of one replica: {epoch: start} from its checkpoint."""
    leaders = leaders or {}
    return [{"topic": "t", "partition": 0, "broker": broker, "leader_epoch": e, "checkpoint_start_offset": s,
             "batch_start_offset": s, "likely_leader": leaders.get(e, (None, None))[0],
             "leader_evidence": leaders.get(e, (None, None))[1]} for e, s in epochs.items()]


def case(new_clean, new_recovery, *, old_hw=210, new_start=120, leaders=None):
    """Broker 1 led epoch 0 and checkpointed ``old_hw``; broker 2 (the surviving log) leads epoch 1 from ``new_start``."""
    old, new = {0: 0}, {0: 0, 1: new_start}
    replicas = [replica(1, hw=old_hw, recovery=old_hw, clean=False, epochs=old),
                replica(2, hw=new_start, recovery=new_recovery, clean=new_clean, epochs=new)]
    lin = lineage(1, old, leaders) + lineage(2, new, leaders or {1: (2, "leader_epoch_checkpoint")})
    survivors = {("t", 0): Survivor(broker=2, candidates=[replicas[1]], epoch=1, why="test")}
    return replicas, lin, survivors


def test_an_epoch_below_the_old_leaders_hw_without_a_crash_is_an_unclean_election_from_the_files():
    rl, lin, surv = case(new_clean=True, new_recovery=240)
    [f] = files_election_findings(rl, lin, surv)
    assert (f.kind, f.severity, f.evidence_basis) == ("unclean_leader_election", "error", "files")
    assert (f.brokers, f.first_offset, f.last_offset, f.records, f.leader_epochs) == ([2], 120, 209, 90, [1])
    assert any(e.broker == 1 and "210" in e.detail and e.path.endswith("replication-offset-checkpoint") for e in f.evidence)
    assert any(e.broker == 2 and "starts at offset 120" in e.detail for e in f.evidence)


def test_a_new_leader_that_crashed_with_its_recovery_point_below_the_hw_lost_committed_data_in_a_crash():
    rl, lin, surv = case(new_clean=False, new_recovery=120)
    [f] = files_election_findings(rl, lin, surv)
    assert (f.kind, f.severity, f.evidence_basis, f.first_offset, f.last_offset) == ("committed_data_lost_in_crash", "error", "files", 120, 209)
    assert any("no .kafka_cleanshutdown" in e.detail and "recovery point 120" in e.detail for e in f.evidence)


def test_an_unclean_stop_whose_recovery_point_covers_the_hw_is_no_crash_that_lost_data():
    rl, lin, surv = case(new_clean=False, new_recovery=230)
    [f] = files_election_findings(rl, lin, surv)
    assert f.kind == "unclean_leader_election"
    assert not crash_lost_data(rl[1], 210) and crash_lost_data({**rl[1], "recovery_point": 200}, 210)


def test_an_epoch_starting_at_or_above_the_hw_is_a_clean_election_even_when_an_unreplicated_tail_was_lost():
    # the old leader held offsets up to 240 (acks=1 tail) but its HW was 120: the new epoch starts at the HW
    rl, lin, surv = case(new_clean=True, new_recovery=240, old_hw=120)
    assert files_election_findings(rl, lin, surv) == []
    assert epoch_below_hw({0: 0, 1: 120}, 0, 0, 120) is None and epoch_below_hw({0: 0, 1: 119}, 0, 0, 120) == (1, 119)


def test_an_election_decided_unclean_elsewhere_is_not_found_again_from_the_files():
    rl, lin, surv = case(new_clean=True, new_recovery=240)
    assert files_election_findings(rl, lin, surv, {("t", 0, 1): "unclean"}) == []
    # another epoch's verdict says nothing of this one
    [f] = files_election_findings(rl, lin, surv, {("t", 0, 0): "unclean"})
    assert f.kind == "unclean_leader_election"


def test_logs_without_leader_epochs_are_left_to_kafka_1211_wording():
    rl, lin, surv = case(new_clean=True, new_recovery=240)
    no_epochs = [r for r in lin if r["broker"] != 2]
    assert files_election_findings(rl, no_epochs, surv) == []
    assert "KAFKA-1211" in fork_cause(False) and "KAFKA-1211" not in fork_cause(True)


def test_a_start_at_a_trimmed_log_start_is_no_evidence():
    assert epoch_below_hw({1: 150}, 150, 0, 210) is None and epoch_below_hw({1: 150}, 100, 0, 210) == (1, 150)


def test_undetermined_leaders_are_all_named_and_a_crash_needs_every_one_to_show_it():
    rl, lin, surv = case(new_clean=True, new_recovery=240, leaders={})
    third = replica(3, hw=120, recovery=240, clean=True, epochs={0: 0, 1: 120})
    rl, lin = rl + [third], lin + lineage(3, {0: 0, 1: 120})
    surv = {("t", 0): Survivor(broker=None, candidates=[rl[1], third], epoch=1, why="test")}
    [f] = files_election_findings(rl, lin, surv)
    assert (f.kind, f.brokers) == ("unclean_leader_election", [2, 3])
    rl[1] = {**rl[1], "clean_shutdown": False, "recovery_point": 120}  # only one of them crashed: the files cannot tell
    assert files_election_findings(rl, lin, {("t", 0): replace(surv[("t", 0)], candidates=[rl[1], third])}) == []


# ---------------------------------------------------------------- who decides (issue 37 item 2)

from datetime import UTC, datetime  # noqa: E402

from jobs.findings.elections import election_findings  # noqa: E402
from parsers import broker_log  # noqa: E402

T = datetime(2026, 11, 22, 19, 11, 16, tzinfo=UTC)


def log_lines(path: str, *lines: tuple[str, str], node: int | None = None) -> list[dict]:
    """``views.collect``'s log_unclean rows for log4j lines (message, logger) as Kafka writes them:
    parsed by the broker-log parser, ``node`` from the file name where the line names none."""
    text = "\n".join(f"[2026-11-22 19:11:{16 + i:02d},317] INFO {msg} ({logger})" for i, (msg, logger) in enumerate(lines))
    rows = broker_log.parse(text.encode(), path).table.to_pylist()
    for r in rows:
        r["node"] = r["node"] if r["node"] is not None else node
        r["path"], r["topic"] = path, r["topic"] or ("t" if r["topic_id"] else None)
    return [r for r in rows if r["event"] in ("unclean_election", "leader_recovery")]


UNCLEAN_CHANGE = ("[QuorumController id=100] UNCLEAN partition change for t-0 with topic ID vWvdb6-VQJ6vN03_foMm1Q: "
                  "replicas: [1, 2, 3] -> [2, 3, 4], isr: [1, 2, 3] -> [2, 3, 4], leader: 1 -> 4, leaderEpoch: 0 -> 1, "
                  "partitionEpoch: 3 -> 4", "org.apache.kafka.controller.ReplicationControlManager")
ZK_RECOVERING = ("[Controller id=1 epoch=3] Changed partition t-0 from OfflinePartition to OnlinePartition with state "
                 "LeaderAndIsr(leader=2, leaderEpoch=1, isrWithBrokerEpoch=List(BrokerState(brokerId=2, brokerEpoch=-1)), "
                 "leaderRecoveryState=RECOVERING, partitionEpoch=5)", "state.change.logger")
ZK_BEFORE_3_2 = ("[Controller id=1 epoch=3] Changed partition t-0 from OfflinePartition to OnlinePartition with state "
                 "LeaderAndIsr(leader=2, leaderEpoch=1, isr=List(2), zkVersion=4)", "state.change.logger")
NEW_LEADER = ("[Broker id=2] The topic partition t-0 was marked as RECOVERING. Marking the topic partition as RECOVERED.",
              "state.change.logger")
ZK_0_10 = ("[OfflinePartitionLeaderSelector]: No broker in ISR is alive for [t,0]. Elect leader 2 from live brokers 2,3. "
           "There's potential data loss.", "kafka.controller.OfflinePartitionLeaderSelector")


def record(election: str, elected_from: str, *, leader=2, epoch=1, prev_isr=(1,), lrs=0) -> dict:
    """A metadata_events leader_change row (the columns the rules read)."""
    return {"topic": "t", "partition": 0, "leader": leader, "leader_epoch": epoch, "prev_isr": list(prev_isr), "election": election,
            "elected_from": elected_from, "leader_recovery_state": lrs, "meta_offset": 7, "time": T, "nodes": [100],
            "path": "controller-100/__cluster_metadata-0/00000000000000000000.log", "batch_position": 70}


def found(history: dict, **kw) -> list:
    rl, lin, surv = case(**kw)
    return election_findings(History(**history), lin, rl, surv)


def test_a_controllers_unclean_sentence_on_a_clean_reassignment_is_no_finding():
    """3.6's UNCLEAN partition change fires when the new leader was not in the previous ISR: a
    finished reassignment's leader joins the ISR in the same record. The record decides: clean."""
    history = {"events": [record("clean", "reassignment", leader=4, prev_isr=(1, 2, 3))],
               "log_unclean": log_lines("node-100-controller.log", UNCLEAN_CHANGE)}
    assert history["log_unclean"] and history["log_unclean"][0]["leader_recovery_state"] is None
    assert found(history, new_clean=True, new_recovery=240, old_hw=120) == []


def test_a_sentence_alone_decides_nothing_and_the_files_still_run():
    sentence = log_lines("node-100-controller.log", UNCLEAN_CHANGE)
    assert found({"log_unclean": sentence}, new_clean=True, new_recovery=240, old_hw=120) == []  # files: epoch at the HW
    [f] = found({"log_unclean": sentence}, new_clean=True, new_recovery=240)  # files: epoch 1 starts at 120, below 210
    assert (f.kind, f.evidence_basis) == ("unclean_leader_election", "files")
    assert any("UNCLEAN partition change" in e.detail for e in f.evidence), "the sentence corroborates the files"


def test_the_zookeeper_controllers_recovering_state_decides_and_the_files_do_not_double_it():
    lines = log_lines("node-1-state-change.log", ZK_RECOVERING, NEW_LEADER)
    lines[1]["leader_epoch"] = 1  # (views.recovering_rows ties it to the epoch its next line starts)
    [f] = found({"log_unclean": lines}, new_clean=True, new_recovery=240)
    assert (f.kind, f.evidence_basis, f.brokers, f.leader_epochs, f.first_offset) == ("unclean_leader_election", "broker_log", [2], [1], 120)
    assert [e.path for e in f.evidence] == ["node-1-state-change.log"] * 2 and "RECOVERING" in f.explanation


def test_the_new_leaders_recovering_line_alone_decides():
    line = log_lines("node-2-state-change.log", NEW_LEADER)
    assert line[0]["leader"] == 2 and line[0]["leader_recovery_state"] == 1
    line[0]["leader_epoch"] = 1
    [f] = found({"log_unclean": line}, new_clean=True, new_recovery=240, old_hw=120)  # the files see nothing: the line still decides
    assert (f.evidence_basis, f.brokers, f.leader_epochs) == ("broker_log", [2], [1])


def test_a_log_naming_the_leader_of_an_epoch_leaves_its_cleanliness_to_the_files():
    """'Leader t-0 starts at leader epoch 1' (or a pre-3.2 LeaderAndIsr line) names the leader:
    the lineage's leader evidence is broker_log, but nothing there says how it was elected."""
    old = log_lines("node-1-state-change.log", ZK_BEFORE_3_2)
    assert old == []  # a leader_change, not an unclean_election: no verdict
    [f] = found({}, new_clean=True, new_recovery=240, leaders={1: (2, "broker_log")})
    assert (f.kind, f.evidence_basis, f.brokers) == ("unclean_leader_election", "files", [2])


def test_the_0_10_controllers_warning_corroborates_the_files():
    warn = log_lines("node-1-controller.log", ZK_0_10)
    assert (warn[0]["leader"], warn[0]["leader_recovery_state"]) == (2, None)
    [f] = found({"log_unclean": warn}, new_clean=True, new_recovery=240)
    assert f.evidence_basis == "files" and any("potential data loss" in e.detail for e in f.evidence)
    assert found({"log_unclean": warn}, new_clean=True, new_recovery=240, old_hw=120) == []


def test_a_clean_record_leaves_only_the_crash_as_the_files_cause():
    clean = {"events": [record("clean", "isr")]}
    assert found(clean, new_clean=True, new_recovery=240) == []  # the record wins over the files
    [f] = found(clean, new_clean=False, new_recovery=120)
    assert (f.kind, f.evidence_basis) == ("committed_data_lost_in_crash", "files")
    assert any("__cluster_metadata offset 7" in e.detail and "cleanly" in e.detail for e in f.evidence)
    [f] = found({"events": [record("unclean", "outside_isr", lrs=1)]}, new_clean=False, new_recovery=120)
    assert (f.kind, f.evidence_basis) == ("unclean_leader_election", "metadata_log")


def test_an_unclean_recovery_is_named_as_such():
    [f] = found({"events": [record("unclean", "last_known_leader", prev_isr=(), lrs=1)]}, new_clean=True, new_recovery=240)
    assert f.evidence_basis == "metadata_log" and "unclean recovery" in f.explanation and "last known leader" in f.explanation
