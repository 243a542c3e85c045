"""truncation_below_hw (issue 37 item 3): a truncation still pending on a replica that has not
rejoined (its HW checkpoint above the surviving log's next epoch start) is reported, as the restart
preview predicts it; a follower lagging below the HW is not; and one truncation told by several
rules (the ledger and the broker's own "Truncating ..." line after it rejoined; the surviving log
lacking what a replica will cut) is one finding with every piece of evidence. Pure functions on
rows shaped as the jobs collect them, no Spark."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobs.findings.model import Finding
from jobs.findings.truncation import ledger_truncation_findings, logged_truncation_findings, merged, pending_truncation_findings
from jobs.replicas.restart_preview import preview
from jobs.replicas.survivors import Survivor
from parsers import broker_log


def rep(broker, leo, hw, epochs):
    return {"topic": "ue", "partition": 0, "broker": broker, "dir_state": "live", "leo": leo, "hw_checkpoint": hw,
            "log_dir": f"broker-{broker}/data", "epoch_entries": [{"epoch": e, "start_offset": s} for e, s in epochs]}


SURVIVOR = {("ue", 0): Survivor(broker=2, candidates=[], epoch=2, why="test")}


def test_an_old_leader_not_rejoined_yet_will_truncate_below_its_hw():
    # broker 1 led epoch 0 to 500 with HW 500; broker 2 was elected uncleanly at 300 (epoch 2) and wrote on
    rl = [rep(1, 500, 500, [(0, 0)]), rep(2, 450, 450, [(0, 0), (2, 300)]), rep(3, 450, 450, [(0, 0), (2, 300)])]
    planned = preview(rl, SURVIVOR)
    [f] = pending_truncation_findings(planned, rl)
    assert (f.kind, f.brokers, f.first_offset, f.last_offset, f.records) == ("truncation_below_hw", [1], 300, 499, 200)
    assert f.first_offset == next(r["truncate_to"] for r in planned if r["broker"] == 1), "what the restart preview says"
    assert f.explanation.startswith("Pending: broker 1 has not rejoined")
    assert [e.path for e in f.evidence] == ["broker-1/data/replication-offset-checkpoint", "broker-2/data/ue-0/leader-epoch-checkpoint"]


def test_a_lagging_follower_or_one_that_has_rejoined_is_no_pending_truncation():
    rl = [rep(1, 300, 280, [(0, 0)]),  # behind, on the same lineage: keeps everything
          rep(2, 450, 450, [(0, 0), (2, 300)]),
          rep(3, 450, 440, [(0, 0), (2, 300)]),  # caught up: nothing to cut
          rep(4, 320, 300, [(0, 0), (1, 310)])]  # its own epoch 1 above the HW it checkpointed: cut at 300, not below 300
    assert pending_truncation_findings(preview(rl, SURVIVOR), rl) == []


def _rows(*lines: tuple[str, str, str]) -> list[dict]:
    """views.collect's log_rows of log4j lines (time, message, logger) of broker 1's logs."""
    text = "\n".join(f"[2026-11-22 {t},634] INFO {msg} ({logger})" for t, msg, logger in lines)
    out = []
    for r in broker_log.parse(text.encode(), "server-logs/node-1-server.log").table.to_pylist():
        if r["topic"] is not None and (r["hw"] is not None or r["event"] == "truncation"):
            out.append({**r, "node": 1, "path": "server-logs/node-1-server.log"})
    return out


def test_the_ledger_and_the_rejoined_brokers_own_line_are_one_truncation():
    t0 = datetime(2026, 11, 22, 19, 10, 11, tzinfo=UTC)
    lines = _rows(("19:09:59", "[Partition ue-0 broker=1] Log loaded for partition ue-0 with initial high watermark 500", "kafka.cluster.Partition"),
                  ("19:11:38", "[ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Truncating partition ue-0 with "
                   "TruncationState(offset=300, completed=true) due to leader epoch and offset EpochEndOffset(errorCode=0, "
                   "partition=0, leaderEpoch=0, endOffset=300)", "kafka.server.ReplicaFetcherThread"))
    logged = logged_truncation_findings(lines)
    events = [{"topic": "ue", "partition": 0, "time": t0 - timedelta(seconds=5), "source": "log", "meta_offset": 58, "leader": 1,
               "isr": [1], "leader_epoch": 0, "path": "broker-1/__cluster_metadata-0/00000000000000000000.log", "batch_position": 4051}]
    acks = [{"topic": "ue", "partition": 0, "acks": "1", "first_offset": 300, "last_offset": 499, "first_ack": t0, "last_ack": t0 + timedelta(seconds=2)}]
    loss = [Finding(kind="acked_data_loss", severity="error", topic="ue", partition=0, brokers=[2], first_offset=300, last_offset=499, records=200)]
    ledger = ledger_truncation_findings(acks, events, [rep(1, 450, 450, [(0, 0), (2, 300)])], loss)
    assert len(logged) == len(ledger) == 1  # what each rule says alone: twice the same truncation
    [f] = merged([(f, set(f.brokers)) for f in ledger + logged])
    assert (f.brokers, f.first_offset, f.last_offset, f.records) == ([1], 300, 499, 200)
    details = " ".join(e.detail for e in f.evidence)
    assert "__cluster_metadata offset 58" in details and "Truncating partition ue-0" in details and "high watermark 500" in details


def test_different_truncations_stay_apart():
    a = Finding(kind="truncation_below_hw", severity="warning", topic="ue", partition=0, brokers=[1], first_offset=300, last_offset=499, records=200)
    b = Finding(kind="truncation_below_hw", severity="warning", topic="ue", partition=0, brokers=[3], first_offset=300, last_offset=449, records=150)
    c = Finding(kind="truncation_below_hw", severity="warning", topic="ue", partition=0, brokers=[1], first_offset=900, last_offset=950, records=51)
    assert len(merged([(a, {1}), (b, {3}), (c, {1})])) == 3
