"""Who led an epoch, and whose log survives: decided by evidence, in order, never by broker id.

The order (jobs/replicas/epoch_lineage.py): the metadata log or the brokers' logs; the one replica whose
leader-epoch-checkpoint starts the epoch earliest; among those tied, the one holding the epoch's
first batch at that start; else undetermined. Each case below has the lower broker id on the
losing side, so a tie broken by broker id fails it. End-to-end cases on Kafka's own bytes are in
test_forensics_real.py and on the simulator's in test_forensics_scenarios.py.
"""

from __future__ import annotations

from pyspark.sql import Row

from jobs.replicas.epoch_lineage import LeaderEpoch, current_leaders, decide_leaders
from jobs.replicas.survivors import survivors

LINEAGE = ("topic", "partition", "leader_epoch", "broker", "checkpoint_start_offset", "batch_start_offset", "_log_start")


def test_decide_leaders_follows_the_evidence_order():
    rows = [
        # epoch 1 of "cp": broker 2's checkpoint starts it earliest (broker 1 kept old records: KAFKA-1211)
        ("cp", 0, 1, 1, 160, 160, 0), ("cp", 0, 1, 2, 150, 150, 0),
        # "fb": checkpoints tie at 100; only broker 3 holds the epoch's first batch there
        ("fb", 0, 1, 1, 100, 110, 0), ("fb", 0, 1, 3, 100, 100, 0),
        # "nocp": no checkpoint names the epoch; broker 2's batches start it
        ("nocp", 0, 1, 1, None, 40, 0), ("nocp", 0, 1, 2, None, 30, 0),
        # "tie": followers that never missed a batch: identical, undetermined
        ("tie", 0, 1, 1, 120, 120, 0), ("tie", 0, 1, 2, 120, 120, 0), ("tie", 0, 1, 3, 120, 120, 0),
        # "trim": broker 1's start 500 is its trimmed log start (retention moved it): no evidence
        ("trim", 0, 3, 1, 500, 500, 500), ("trim", 0, 3, 2, 450, 450, 0),
        # "trimmed-both": each start sits on its own trimmed log start: undetermined
        ("trimmed-both", 0, 3, 1, 500, 500, 500), ("trimmed-both", 0, 3, 2, 200, 200, 200),
    ]
    got = decide_leaders([dict(zip(LINEAGE, r, strict=True)) for r in rows])
    lead = {"cp": (2, "leader_epoch_checkpoint"), "fb": (3, "first_batch"), "nocp": (2, "first_batch"), "tie": (None, None),
            "trim": (2, "leader_epoch_checkpoint"), "trimmed-both": (None, None)}
    assert [(r["topic"], r["broker"], r["likely_leader"], r["leader_evidence"]) for r in got] == [(t, b, *lead[t]) for t, _, _, b, *_ in rows]


def _replica(topic: str, broker: int, last_epoch: int) -> dict:
    return {"topic": topic, "partition": 0, "broker": broker, "dir_state": "live", "last_epoch": last_epoch,
            "batch_max_epoch": last_epoch, "log_start_offset": 0, "compacted": False}


def _lineage(topic: str, epoch: int, leader: int | None, evidence: str | None) -> dict:
    return {"topic": topic, "partition": 0, "leader_epoch": epoch, "likely_leader": leader, "leader_evidence": evidence}


def test_survivor_is_decided_by_evidence_or_undetermined():
    rl = [_replica("meta", 1, 2), _replica("meta", 2, 2),      # the metadata log names broker 2 (epoch 3, not yet on disk)
          _replica("alone", 1, 1), _replica("alone", 2, 2),    # only broker 2 carries epoch 2
          _replica("lin", 1, 1), _replica("lin", 2, 1),        # tie on epoch 1; the lineage names broker 2
          _replica("tie", 1, 1), _replica("tie", 2, 1), _replica("tie", 3, 0),
          _replica("gone", 1, 1), _replica("gone", 2, 1)]      # the metadata log's leader, broker 3, was not collected
    lineage = [_lineage("lin", 1, 2, "leader_epoch_checkpoint"), _lineage("tie", 1, None, None), _lineage("gone", 1, 3, "metadata_log")]
    current = current_leaders([Row(topic="meta", partition=0, leader_epoch=3, leader=2, leader_evidence="metadata_log"),
                               Row(topic="meta", partition=0, leader_epoch=1, leader=1, leader_evidence="metadata_log"),
                               Row(topic="gone", partition=0, leader_epoch=1, leader=3, leader_evidence="metadata_log"),
                               Row(topic="lin", partition=0, leader_epoch=1, leader=1, leader_evidence="broker_log")])
    assert current == {("meta", 0): LeaderEpoch(leader=2, epoch=3), ("gone", 0): LeaderEpoch(leader=3, epoch=1)}, "only the metadata log says who leads now"
    surv = survivors(rl, lineage, current)
    got = {t: (s.broker, sorted(c["broker"] for c in s.candidates)) for (t, _), s in surv.items()}
    assert got == {"meta": (2, [2]), "alone": (2, [2]), "lin": (2, [2]), "tie": (None, [1, 2]), "gone": (None, [1, 2])}
    assert "metadata log" in surv[("meta", 0)].why and "checkpoint" in surv[("lin", 0)].why
    assert "nothing collected tells" in surv[("tie", 0)].why and "broker 3" in surv[("gone", 0)].why
