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
