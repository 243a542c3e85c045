"""The metadata-log replay (jobs.history.metadata._replay, pure pandas) on record sequences Kafka writes:
which leader changes are elections, and which elections are unclean."""

from __future__ import annotations

import json

import pandas as pd

from jobs.history.metadata import _replay

TID = "vWvdb6-VQJ6vN03_foMm1Q"


def _rows(*records: tuple[str, dict]) -> pd.DataFrame:
    return pd.DataFrame([{
        "meta_offset": i, "source": "log", "seq": 0, "record_type": t, "data_json": json.dumps(d),
        "timestamp_ms": 1_795_374_000_000 + i, "nodes": [100], "path": "c/__cluster_metadata-0/0.log",
        "batch_position": 10 * i, "topic_id": TID,
    } for i, (t, d) in enumerate(records)])


def _created(**kw) -> tuple[str, dict]:
    d = {"partitionId": 0, "topicId": TID, "replicas": [1, 2, 3], "isr": [1, 2, 3], "leader": 1, "leaderEpoch": 0,
         "partitionEpoch": 0}
    d.update(kw)
    return "PARTITION_RECORD", d


def _change(**kw) -> tuple[str, dict]:
    return "PARTITION_CHANGE_RECORD", {"partitionId": 0, "topicId": TID, **kw}


def test_unclean_election_is_the_recovering_one():
    ev = _replay(_rows(("TOPIC_RECORD", {"name": "ue", "topicId": TID}), _created(), _change(isr=[1]), _change(leader=-1),
                       _change(leader=2, isr=[2], leaderRecoveryState=1), _change(isr=[2, 3], leaderRecoveryState=0)))
    assert list(ev["event"]) == ["partition_created", "isr_change", "leader_change", "leader_change", "leader_recovered"]
    assert list(ev["election"])[2:4] == ["offline", "unclean"]
    assert list(ev["leader_epoch"]) == [0, 0, 1, 2, 2] and list(ev["partition_epoch"]) == [0, 1, 2, 3, 4]
    assert set(ev["topic"]) == {"ue"}


def test_a_finished_reassignment_elects_cleanly():
    # [1,2,3] -> [4,5,6]: 4 joins the ISR and leads in the record that completes the reassignment
    ev = _replay(_rows(_created(), _change(replicas=[4, 5, 6], isr=[4, 5, 6], leader=4)))
    assert [None if pd.isna(x) else x for x in ev["election"]] == [None, "clean"]


def test_leader_outside_isr_without_recovering_state_is_unclean_in_older_logs():
    ev = _replay(_rows(_created(isr=[1]), _change(leader=3, isr=[3])))
    assert list(ev["election"])[-1] == "unclean"


def test_same_leader_is_an_epoch_bump_not_an_election():
    ev = _replay(_rows(_created(), _change(leader=1, isr=[1, 2])))
    assert list(ev["event"])[-1] == "leader_epoch_bump" and pd.isna(ev["election"].iloc[-1])
    assert ev["leader_epoch"].iloc[-1] == 1


def test_controlled_shutdown_moves_leadership_within_the_isr():
    ev = _replay(_rows(_created(), _change(leader=2, isr=[2, 3])))
    assert list(ev["election"])[-1] == "clean"


# ---------------------------------------------------------------- KIP-966 (Kafka 4.x): ELR, last known leader


def _elr_story(*tail: tuple[str, dict]) -> pd.DataFrame:
    """min.insync.replicas 2 on [1, 2, 3], as 4.1.1's PartitionChangeBuilder writes the fencings one
    by one: below min ISR the replicas leaving the ISR cleanly become eligible leaders (ELR); when
    the ISR empties the last leader is remembered (LastKnownElr)."""
    return _replay(_rows(("TOPIC_RECORD", {"name": "elr", "topicId": TID}), _created(),
                         _change(isr=[1, 2]),  # broker 3 fenced: ISR still at min ISR, no ELR
                         _change(isr=[1], eligibleLeaderReplicas=[2]),  # broker 2 fenced
                         _change(leader=-1, isr=[], eligibleLeaderReplicas=[1, 2], lastKnownElr=[1]),  # broker 1 fenced
                         *tail))


def test_a_leader_elected_from_the_elr_is_a_clean_election():
    ev = _elr_story(_change(leader=2, isr=[2], eligibleLeaderReplicas=[1], lastKnownElr=[]))  # broker 2 back
    last = ev.iloc[-1]
    assert (last["event"], last["election"], last["clean"], last["elected_from"]) == ("leader_change", "clean", True, "elr")
    assert "elected from ELR [1, 2]" in last["detail"] and "UNCLEAN" not in last["detail"]
    assert (list(last["elr"]), list(last["last_known_elr"]), list(last["isr"])) == ([1], [], [2])
    offline = ev.iloc[-2]
    assert (offline["election"], list(offline["last_known_elr"]), list(offline["elr"])) == ("offline", [1], [1, 2])
    assert ev.iloc[2]["event"] == "isr_change" and ev.iloc[2]["detail"] == "ISR [1, 2] → [1], ELR [] → [2]"


def test_the_last_known_leader_brought_back_is_an_unclean_recovery():
    # brokers 1 and 2 came back from unclean shutdowns: both left the ELR; broker 1, the last known
    # leader, is elected with leaderRecoveryState RECOVERING and the last known ELR cleared
    ev = _elr_story(_change(eligibleLeaderReplicas=[]),
                    _change(leader=1, isr=[1], leaderRecoveryState=1, lastKnownElr=[]))
    assert ev.iloc[-2]["event"] == "elr_change"
    last = ev.iloc[-1]
    assert (last["election"], last["clean"], last["elected_from"], last["leader_recovery_state"]) == ("unclean", False, "last_known_leader", 1)
    assert "UNCLEAN recovery: last known leader 1 brought back" in last["detail"]


def test_an_election_outside_isr_and_elr_is_unclean_and_names_both():
    ev = _elr_story(_change(leader=3, isr=[3], leaderRecoveryState=1, eligibleLeaderReplicas=[], lastKnownElr=[]))
    last = ev.iloc[-1]
    assert (last["election"], last["elected_from"]) == ("unclean", "outside_isr")
    assert "not in ISR [] nor ELR [1, 2]" in last["detail"]


def test_clear_elr_record_empties_the_elr_of_its_topic_or_of_every_topic():
    other = _elr_story(("CLEAR_ELR_RECORD", {"topicName": "another-topic"}))
    assert list(other["event"]).count("elr_change") == 0
    ev = _elr_story(("CLEAR_ELR_RECORD", {"topicName": ""}))
    last = ev.iloc[-1]
    assert (last["event"], list(last["elr"]), list(last["last_known_elr"])) == ("elr_change", [], [])
    assert last["partition_epoch"] == ev.iloc[-2]["partition_epoch"] + 1 and "ClearElrRecord" in last["detail"]
    named = _elr_story(("CLEAR_ELR_RECORD", {"topicName": "elr"}))
    assert named.iloc[-1]["event"] == "elr_change"


def test_a_re_election_while_still_recovering_is_unclean_only_outside_the_isr():
    # Kafka does not set RECOVERING again on a partition that still is: the ISR decides
    ev = _replay(_rows(_created(isr=[1]), _change(leader=-1), _change(leader=2, isr=[2], leaderRecoveryState=1),
                       _change(leader=-1), _change(leader=2), _change(leader=-1), _change(leader=3, isr=[3])))
    assert [x for x in ev["elected_from"] if isinstance(x, str)] == ["outside_isr", "isr", "outside_isr"]


def test_a_snapshot_restating_the_state_with_an_emptied_elr_adds_nothing():
    """A change record that empties the ELR writes ``[]``; the snapshot's PartitionRecord of the same
    state leaves the tag out (``PartitionRegistration.toRecord`` writes the ELR fields only when not
    empty): the same state, no snapshot_state row."""
    rows = _rows(_created(), _change(isr=[1], eligibleLeaderReplicas=[2, 3]), _change(isr=[1, 2], eligibleLeaderReplicas=[]),
                 _created(isr=[1, 2], partitionEpoch=2))
    rows.loc[3, "source"] = "snapshot"
    ev = _replay(rows)
    assert list(ev["event"]) == ["partition_created", "isr_change", "isr_change"]
