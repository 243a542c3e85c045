"""The truncation a follower does when it rejoins (``jobs.replicas.restart_preview``), case by case
from KIP-101 and KIP-279, without Spark: the same answers Kafka's ``AbstractFetcherThread`` and
``LeaderEpochFileCache.endOffsetFor`` give (the real cluster's rejoin is checked in
test_restart_preview_real.py)."""

from __future__ import annotations

import pytest

from jobs.replicas.restart_preview import (
    HIGH_WATERMARK,
    LEADER_EPOCH,
    UNDEFINED,
    end_offset_for,
    preview,
    recovered_epochs,
    sentence,
    truncation,
)
from jobs.replicas.survivors import Survivor
from sample_data.scenarios import SCENARIOS, simulate
from sample_data.sim.cluster import Cluster


def test_end_offset_for_mirrors_the_leader_epoch_cache():
    epochs = [(0, 0), (2, 300), (4, 450)]
    assert end_offset_for(epochs, 500, 4) == (4, 500)  # the latest epoch ends at the LEO
    assert end_offset_for(epochs, 500, 0) == (0, 300)
    assert end_offset_for(epochs, 500, 1) == (0, 300)  # an epoch it never had: the one below it, ending where 2 starts
    assert end_offset_for(epochs, 500, 3) == (2, 450)
    assert end_offset_for([(3, 100), (5, 200)], 250, 1) == (1, 100)  # below every entry: the first start
    assert end_offset_for(epochs, 500, 7) == UNDEFINED
    assert end_offset_for([], 500, 0) == UNDEFINED


def test_old_leader_with_epoch_0_records_truncates_to_the_end_of_epoch_0():
    """The real cluster's unclean election: broker 1 kept writing epoch 0 to 500, the new leader
    started epoch 2 at 300 (Kafka logged EpochEndOffset(leaderEpoch=0, endOffset=300))."""
    t = truncation([(0, 0)], 500, 500, [(0, 0), (2, 300), (4, 450)], 450)
    assert (t.truncate_to, t.rule, t.epochs_asked) == (300, LEADER_EPOCH, (0,))


def test_divergent_epoch_truncates_to_the_end_of_the_common_epoch():
    """KIP-101 scenario 2: the follower's epoch 1 (100..149) was never the leader's; the answer for
    epoch 1 is (0, 120), and the follower's own epoch 0 ends at 100."""
    t = truncation([(0, 0), (1, 100)], 150, 150, [(0, 0), (2, 120)], 200)
    assert (t.truncate_to, t.rule) == (100, LEADER_EPOCH)


def test_several_divergent_epochs_ask_again_until_the_lineages_agree():
    """KIP-279: each answer names an epoch the follower did not have, so it truncates to its own end
    of the epoch below and asks again: 4 -> (3, 90) cuts to 80; 2 -> (1, 60) cuts to 50; 0 -> (0, 40)."""
    t = truncation([(0, 0), (2, 50), (4, 80)], 100, 0, [(0, 0), (1, 40), (3, 60), (5, 90)], 120)
    assert (t.truncate_to, t.rule, t.epochs_asked) == (40, LEADER_EPOCH, (4, 2, 0))


def test_latest_epoch_the_leader_never_had_falls_back_to_the_leaders_previous_epoch_end():
    """double-failover-kip-279: broker 2 led epoch 1 alone; the leader (epoch 0 then 2) answers
    epoch 1 with the end of its epoch 0, which the follower knows."""
    t = truncation([(0, 0), (1, 100)], 160, 160, [(0, 0), (2, 100)], 150)
    assert (t.truncate_to, t.rule) == (100, LEADER_EPOCH)


def test_pre_0_11_logs_truncate_to_the_high_watermark():
    assert truncation([], 100, 80, [], 120) == truncation([], 100, 80, [(0, 0)], 120)
    t = truncation([], 100, 80, [], 120)
    assert (t.truncate_to, t.rule) == (80, HIGH_WATERMARK)
    assert truncation([], 100, None, [], 120).truncate_to == 0  # no HW checkpoint: Kafka starts the HW at 0


def test_follower_behind_on_the_same_lineage_keeps_everything():
    t = truncation([(0, 0), (2, 300)], 400, 350, [(0, 0), (2, 300), (4, 450)], 450)
    assert t.truncate_to == 400


def test_fetch_beyond_the_leaders_log_end_truncates_to_it():
    t = truncation([(0, 0)], 500, 500, [(0, 0)], 420)
    assert t.truncate_to == 420


def test_recovery_adds_the_epochs_a_crashed_checkpoint_missed():
    assert recovered_epochs([(0, 0)], [(0, 0), (3, 200)]) == [(0, 0), (3, 200)]
    assert recovered_epochs([(0, 0), (2, 300)], [(0, 0), (1, 250)]) == [(0, 0), (2, 300)]


def _rl(broker, leo, hw, epochs):
    return {"topic": "ue", "partition": 0, "broker": broker, "dir_state": "live", "leo": leo, "hw_checkpoint": hw,
            "epoch_entries": [{"epoch": e, "start_offset": s} for e, s in epochs]}


def test_preview_rows_every_replica_but_the_surviving_log():
    rl = [_rl(1, 500, 500, [(0, 0)]), _rl(2, 450, 450, [(0, 0), (2, 300)]), _rl(3, 450, 450, [(0, 0), (2, 300)])]
    rows = preview(rl, {("ue", 0): Survivor(broker=2, candidates=[], epoch=2, why="test")})
    assert [(r["broker"], r["truncate_to"], r["rule"]) for r in rows] == [(1, 300, LEADER_EPOCH), (3, 450, LEADER_EPOCH)]
    assert preview(rl, {("ue", 0): Survivor(broker=None, candidates=[], epoch=2, why="test")}) == []  # undetermined: no lineage to follow


@pytest.mark.parametrize("nowhere, held, expect", [
    (200, [], "200 records that no other replica holds — run salvage first."),
    (50, [3], "200 records, 50 of which no other replica holds — run salvage first."),
    (0, [3], "200 records that only broker 3 also holds (not the leader's log) — run salvage first."),
    (0, [2, 3], "200 records that leader broker 2 holds too: it fetches them again, nothing is lost."),
])
def test_sentence_says_whether_to_salvage(nowhere, held, expect):
    row = {"broker": 1, "topic": "ue", "partition": 0, "leo": 500, "truncate_to": 300, "rule": LEADER_EPOCH, "leader": 2,
           "records_destroyed": 200, "records_nowhere_else": nowhere, "held_elsewhere": held}
    assert sentence(row) == f"Restarting broker 1 truncates ue-0 from 500 to 300 (rule leader_epoch): {expect}"
    assert sentence({**row, "records_destroyed": 0}) is None


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_same_answer_as_the_simulator_on_every_rejoin_of_its_scenarios(name, monkeypatch):
    """Every time a replica becomes a follower in the simulator's scenarios (Kafka >= 2.0 rule,
    kip279), the rule replayed from that replica's and the leader's state gives the offset the
    simulator truncated to: two implementations of KIP-101/KIP-279 that must agree."""
    seen = []
    original = Cluster._truncation_offset

    def spy(self, fol, leader):
        target = original(self, fol, leader)
        seen.append((list(fol.epochs), fol.leo, fol.hw, list(leader.epochs), leader.leo, min(target, leader.leo)))
        return target

    monkeypatch.setattr(Cluster, "_truncation_offset", spy)
    simulate(name, truncation="kip279")
    assert seen
    for f_epochs, leo, hw, l_epochs, l_leo, expected in seen:
        assert truncation(f_epochs, leo, hw, l_epochs, l_leo).truncate_to == expected, (f_epochs, leo, hw, l_epochs, l_leo)
