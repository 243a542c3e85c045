"""transaction_marker_lost (issue 19 item 2): the pure rule in jobs/findings/transactions.py on the
rows its Spark helpers collect, and which of it and hanging_transaction reports a transaction."""

from __future__ import annotations

from dataclasses import replace

from jobs.findings.transactions import TXN_MAX_TIMEOUT_MS, hanging_transaction_findings, lost_marker_findings
from jobs.replicas.survivors import Survivor

T0 = 1_767_225_600_000


def pending(broker, *, first=120, last=139, epoch=0, open_firsts=(), age=0):
    """A pending_transactions row: producer 2000's data after its last marker on ``broker``."""
    data = [{"base_offset": first, "last_offset": last, "max_timestamp": T0, "path": f"broker-{broker}/t-0/0.log",
             "position": 1000, "producer_epoch": epoch}]
    return {"topic": "t", "partition": 0, "broker": broker, "producer_id": 2000, "pending": data,
            "newest_ts": T0 + age, "open_firsts": list(open_firsts)}


def marker(broker, offset=140, epoch=0, control="commit"):
    return {"topic": "t", "partition": 0, "broker": broker, "producer_id": 2000, "producer_epoch": epoch, "base_offset": offset,
            "path": f"broker-{broker}/t-0/0.log", "position": 1201, "control_type": control}


def txn(status, epoch=0, at=T0 + 5, pid=2000, previous=None):
    return {"transactional_id": "orders-tx", "producer_id": pid, "producer_epoch": epoch, "status_name": status,
            "last_update_ms": at, "broker": 3, "path": "broker-3/__transaction_state-7/0.log", "batch_position": 77,
            "previous_producer_id": previous, "producer_ids": sorted({2000, pid})}


SURVIVORS = {("t", 0): Survivor(broker=2, candidates=[{"broker": 2}], epoch=1, why="test")}


def test_a_marker_held_off_the_surviving_lineage_pins_the_lso_at_the_transactions_first_offset():
    [f] = lost_marker_findings([pending(2, open_firsts=[120])], [marker(1)], [txn("CompleteCommit")], SURVIVORS)
    assert (f.kind, f.severity, f.first_offset, f.last_offset, f.brokers) == ("transaction_marker_lost", "error", 120, 139, [1, 2])
    assert f.producers[0]["producer_id"] == 2000 and f.producers[0]["producer_epoch"] == 0
    held = [e for e in f.evidence if "COMMIT marker" in e.detail]
    assert [(e.broker, e.path, e.position) for e in held] == [(1, "broker-1/t-0/0.log", 1201)]
    assert "transactional id orders-tx" in f.explanation
    assert "kafka-transactions.sh --bootstrap-server <broker> abort --topic t --partition 0 --start-offset 120" in f.explanation


def test_the_coordinator_recording_the_transaction_complete_is_enough():
    [f] = lost_marker_findings([pending(2)], [], [txn("CompleteAbort", epoch=1)], SURVIVORS)
    assert f.brokers == [2] and any("__transaction_state: orders-tx CompleteAbort" in e.detail for e in f.evidence)


def test_no_proof_of_the_end_is_no_lost_marker():
    assert lost_marker_findings([pending(2)], [], [txn("Ongoing")], SURVIVORS) == []
    assert lost_marker_findings([pending(2)], [], [txn("CompleteCommit", at=T0 - 1)], SURVIVORS) == []  # an earlier transaction
    assert lost_marker_findings([pending(2, epoch=3)], [marker(1, epoch=2)], [], SURVIVORS) == []  # an older epoch's marker
    assert lost_marker_findings([pending(2)], [marker(1, offset=100)], [], SURVIVORS) == []  # a marker before the data
    assert lost_marker_findings([pending(1)], [marker(2)], [], SURVIVORS) == []  # open only off the surviving log
    lagging = {("t", 0): replace(SURVIVORS[("t", 0)], broker=None, candidates=[{"broker": 1}, {"broker": 2}])}
    assert lost_marker_findings([pending(2)], [marker(1)], [], lagging) == []  # a candidate ahead is not a lost marker


def test_a_lost_marker_wins_over_hanging_transaction_for_the_same_transaction():
    old = pending(2, age=TXN_MAX_TIMEOUT_MS + 1)
    assert [f.kind for f in hanging_transaction_findings([old])] == ["hanging_transaction"]
    lost = lost_marker_findings([old], [marker(1)], [], SURVIVORS)
    assert hanging_transaction_findings([old], lost) == []


def test_transactions_v2_markers_one_epoch_above_their_data_are_the_transactions_markers():
    """KIP-890 part 2: the coordinator bumps the epoch at every commit/abort, so the marker of data at
    epoch 32766 (the last one a producer id may use) carries 32767; the COMMIT held off the surviving
    lineage is that transaction's."""
    [f] = lost_marker_findings([pending(2, epoch=32766)], [marker(1, epoch=32767)], [], SURVIVORS)
    assert (f.first_offset, f.brokers, f.producers[0]["producer_epoch"]) == (120, [1, 2], 32766)
    assert any("COMMIT marker of producer 2000 (epoch 32767) at offset 140" in e.detail for e in f.evidence)


def test_a_producer_id_handed_over_at_an_exhausted_epoch_ended_the_old_ids_transaction():
    """At an exhausted epoch the coordinator completes a transactions v2 transaction under a new
    producer id (epoch 0; InitProducerId rotates it the same way, after aborting what was open): the
    old id's data still open in the surviving log gets no marker any more. The transactional id's
    records tell: an earlier one under the old id (Kafka 4.1), or the PreviousProducerId Kafka 4.4
    writes (KAFKA-20310), whatever the transactional id went on to do under the new id."""
    for state in ("CompleteCommit", "CompleteAbort", "Empty", "Ongoing", "PrepareCommit"):
        for ids, previous in (([2000, 2001], None), ([2001], 2000)):
            t = txn(state, epoch=0, pid=2001, previous=previous) | {"producer_ids": ids}
            [f] = lost_marker_findings([pending(2, epoch=32766)], [], [t], SURVIVORS)
            assert f.brokers == [2] and "transactional id orders-tx" in f.explanation
            assert f"records its transactional id {state} under producer id 2001, which took over from 2000" in f.explanation
            assert any("which took over from producer 2000" in e.detail for e in f.evidence)


def test_a_new_producer_id_is_no_proof_unless_the_old_one_was_its_or_before_the_data():
    # the old id's records compacted away and no PreviousProducerId (Kafka 4.0-4.3): nothing ties 2000 to it
    t = txn("CompleteCommit", pid=2001) | {"producer_ids": [2001]}
    assert lost_marker_findings([pending(2, epoch=32766)], [], [t], SURVIVORS) == []
    # the hand-over written before the data is about an earlier transaction
    assert lost_marker_findings([pending(2)], [], [txn("CompleteCommit", pid=2001, previous=2000, at=T0 - 1)], SURVIVORS) == []
    # the same producer id as its own previous one: an ordinary record of that id, judged by its epoch
    assert lost_marker_findings([pending(2, epoch=3)], [], [txn("CompleteCommit", epoch=2, previous=2000)], SURVIVORS) == []


def test_a_transactions_v2_transaction_with_no_marker_anywhere_is_still_a_hanging_transaction():
    """No replica holds its marker (the one at epoch + 1) and the coordinator says nothing: the old
    open data is hanging_transaction, at the data's epoch, as under transactions v0."""
    old = pending(2, epoch=32766, age=TXN_MAX_TIMEOUT_MS + 1)
    assert lost_marker_findings([old], [marker(1, offset=100, epoch=32766)], [txn("Ongoing", epoch=32766)], SURVIVORS) == []
    [f] = hanging_transaction_findings([old])
    assert (f.kind, f.first_offset, f.producers[0]["producer_epoch"]) == ("hanging_transaction", 120, 32766)
