"""The cause of an epoch that starts below a checkpointed high watermark, decided from the files
(issue 19 item 1): the pure rules in jobs/findings/elections.py on replica_logs/epoch_lineage rows
shaped as the jobs write them, and the fork wording of replica_divergence."""

from __future__ import annotations

from jobs.findings.divergence import fork_cause
from jobs.findings.elections import crash_lost_data, decided_partitions, epoch_below_hw, files_election_findings


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
    rl = [replica(1, hw=old_hw, recovery=old_hw, clean=False, epochs=old),
          replica(2, hw=new_start, recovery=new_recovery, clean=new_clean, epochs=new)]
    lin = lineage(1, old, leaders) + lineage(2, new, leaders or {1: (2, "leader_epoch_checkpoint")})
    surv = {("t", 0): {"broker": 2, "candidates": [rl[1]], "epoch": 1, "why": "test"}}
    return rl, lin, surv


def test_an_epoch_below_the_old_leaders_hw_without_a_crash_is_an_unclean_election_from_the_files():
    rl, lin, surv = case(new_clean=True, new_recovery=240)
    [f] = files_election_findings(rl, lin, surv, set())
    assert (f.kind, f.severity, f.evidence_basis) == ("unclean_leader_election", "error", "files")
    assert (f.brokers, f.first_offset, f.last_offset, f.records, f.leader_epochs) == ([2], 120, 209, 90, [1])
    assert any(e.broker == 1 and "210" in e.detail and e.path.endswith("replication-offset-checkpoint") for e in f.evidence)
    assert any(e.broker == 2 and "starts at offset 120" in e.detail for e in f.evidence)


def test_a_new_leader_that_crashed_with_its_recovery_point_below_the_hw_lost_committed_data_in_a_crash():
    rl, lin, surv = case(new_clean=False, new_recovery=120)
    [f] = files_election_findings(rl, lin, surv, set())
    assert (f.kind, f.severity, f.evidence_basis, f.first_offset, f.last_offset) == ("committed_data_lost_in_crash", "error", "files", 120, 209)
    assert any("no .kafka_cleanshutdown" in e.detail and "recovery point 120" in e.detail for e in f.evidence)


def test_an_unclean_stop_whose_recovery_point_covers_the_hw_is_no_crash_that_lost_data():
    rl, lin, surv = case(new_clean=False, new_recovery=230)
    [f] = files_election_findings(rl, lin, surv, set())
    assert f.kind == "unclean_leader_election"
    assert not crash_lost_data(rl[1], 210) and crash_lost_data({**rl[1], "recovery_point": 200}, 210)


def test_an_epoch_starting_at_or_above_the_hw_is_a_clean_election_even_when_an_unreplicated_tail_was_lost():
    # the old leader held offsets up to 240 (acks=1 tail) but its HW was 120: the new epoch starts at the HW
    rl, lin, surv = case(new_clean=True, new_recovery=240, old_hw=120)
    assert files_election_findings(rl, lin, surv, set()) == []
    assert epoch_below_hw({0: 0, 1: 120}, 0, 0, 120) is None and epoch_below_hw({0: 0, 1: 119}, 0, 0, 120) == (1, 119)


def test_the_metadata_log_or_a_controller_log_decides_where_it_exists():
    rl, lin, surv = case(new_clean=True, new_recovery=240)
    assert files_election_findings(rl, lin, surv, {("t", 0)}) == []
    rl, lin, surv = case(new_clean=True, new_recovery=240, leaders={1: (2, "metadata_log")})
    assert files_election_findings(rl, lin, surv, set()) == []
    history = {"elections": [{"topic": "a", "partition": 1}], "log_unclean": [{"topic": "b", "partition": 2}]}
    assert decided_partitions(history, {("c", 3): (1, 4)}) == {("a", 1), ("b", 2), ("c", 3)}


def test_logs_without_leader_epochs_are_left_to_kafka_1211_wording():
    rl, lin, surv = case(new_clean=True, new_recovery=240)
    no_epochs = [r for r in lin if r["broker"] != 2]
    assert files_election_findings(rl, no_epochs, surv, set()) == []
    assert "KAFKA-1211" in fork_cause(False) and "KAFKA-1211" not in fork_cause(True)


def test_a_start_at_a_trimmed_log_start_is_no_evidence():
    assert epoch_below_hw({1: 150}, 150, 0, 210) is None and epoch_below_hw({1: 150}, 100, 0, 210) == (1, 150)


def test_undetermined_leaders_are_all_named_and_a_crash_needs_every_one_to_show_it():
    rl, lin, surv = case(new_clean=True, new_recovery=240, leaders={})
    third = replica(3, hw=120, recovery=240, clean=True, epochs={0: 0, 1: 120})
    rl, lin = rl + [third], lin + lineage(3, {0: 0, 1: 120})
    surv = {("t", 0): {"broker": None, "candidates": [rl[1], third], "epoch": 1, "why": "test"}}
    [f] = files_election_findings(rl, lin, surv, set())
    assert (f.kind, f.brokers) == ("unclean_leader_election", [2, 3])
    rl[1] = {**rl[1], "clean_shutdown": False, "recovery_point": 120}  # only one of them crashed: the files cannot tell
    assert files_election_findings(rl, lin, {("t", 0): {**surv[("t", 0)], "candidates": [rl[1], third]}}, set()) == []
