"""restart_preview and consumer_read_lost_data judged by what Kafka 3.6.2 really did.

real-cluster ``unclean-election-divergence-rejoined`` was collected after the old leader (broker 1)
rejoined: it truncated ue-0 from 500 to 300 and re-fetched from broker 2. The snapshot of the same
incident before that rejoin is not among the fixtures, so it is rebuilt here from the collected
bytes, the way it was at that moment: brokers 2 and 3 and every metadata log exactly as collected
(nothing was written to ue-0 between the rejoin and the collection), broker 1 as its own
checkpoints and Kafka's log describe it before it came back (killed, no clean-shutdown marker,
HW checkpoint 500, leader-epoch-checkpoint ``0 0``), its real segment bytes for 0..299 and its 200
acked phase-B records 300..499 in epoch 0 (written with the ledger's keys: their values are not
in the fixture). Server logs are left out: they tell the rejoin that has not happened yet.

A ``__consumer_offsets-0`` on broker 2 adds three groups: one behind the lost range (nothing),
one inside it, one beyond the surviving log's end. One analyze for the module.
"""

from __future__ import annotations

import os
import shutil
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import REAL, read_jsonl
from kafka_bytes import offset_commit

from analyzer.analyze import build
from parsers import leader_epoch_checkpoint, segment
from sample_data.writer.checkpoints import leader_epoch_checkpoint_bytes, offset_checkpoint_bytes
from sample_data.writer.log import write_partition
from sample_data.writer.records import BatchSpec, Record

SCENARIO = REAL / "unclean-election-divergence-rejoined"
BATCH = 25  # records per batch, as the real producer's batches here


def _rejoined_epochs() -> list[tuple[int, int]]:
    """Broker 1's leader-epoch-checkpoint after the real rejoin."""
    path = SCENARIO / "broker-1" / "ue-0" / "leader-epoch-checkpoint"
    table = leader_epoch_checkpoint.parse(path.read_bytes(), str(path)).table
    return [(r["epoch"], r["start_offset"]) for r in table.to_pylist()]


def _writable(root: Path) -> None:
    for d, _, files in os.walk(root):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(Path(d) / f, 0o644)


def _broker1_before_rejoin(root: Path, ledger: list[dict], tmp: Path) -> None:
    """Replace the copy's broker-1/ue-0 (and its checkpoints) by what it held before the rejoin."""
    part = root / "broker-1" / "ue-0"
    seg = part / "00000000000000000275.log"
    kept = [b for b in segment.parse(seg.read_bytes(), str(seg)).table.to_pylist() if b["last_offset"] < 300]
    seg.write_bytes(seg.read_bytes()[: kept[-1]["position"] + kept[-1]["size"]])
    (part / "00000000000000000275.timeindex").write_bytes(b"")  # its one entry pointed at an epoch-2 batch
    for name in ("00000000000000000300.snapshot", "00000000000000000450.snapshot"):
        (part / name).unlink()
    phase_b = sorted((r for r in ledger if r["phase"] == "B"), key=lambda r: r["offset"])
    assert [r["offset"] for r in phase_b] == list(range(300, 500))
    ts = [int(datetime.fromisoformat(r["ack_ts"].replace("Z", "+00:00")).timestamp() * 1000) for r in phase_b]
    specs = [BatchSpec(300 + i, tuple(Record(r["key"].encode(), os.urandom(r["value_len"]), t)
                                      for r, t in zip(phase_b[i:i + BATCH], ts[i:i + BATCH])), partition_leader_epoch=0)
             for i in range(0, 200, BATCH)]
    written = tmp / "ue-0"
    write_partition(written, specs)
    for suffix in (".log", ".index", ".timeindex"):
        shutil.copy(written / f"00000000000000000300{suffix}", part / f"00000000000000000300{suffix}")
    (part / "leader-epoch-checkpoint").write_bytes(leader_epoch_checkpoint_bytes([(0, 0)]))
    for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
        (root / "broker-1" / name).write_bytes(offset_checkpoint_bytes({("ue", 0): 500}))
    (root / "broker-1" / ".kafka_cleanshutdown").unlink()  # it was killed with kill -9


@pytest.fixture(scope="module")
def before(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("restart") / "unclean-election-divergence-before-rejoin"
    shutil.copytree(SCENARIO, root, ignore=shutil.ignore_patterns("dumps", "server-logs"))
    _writable(root)
    _broker1_before_rejoin(root, read_jsonl(SCENARIO / "ledger.jsonl"), tmp_path_factory.mktemp("written"))
    ts = 1_795_374_700_000
    write_partition(root / "broker-2" / "__consumer_offsets-0", [
        BatchSpec(0, (offset_commit("lagging", "ue", 0, 250, ts), offset_commit("inside", "ue", 0, 400, ts),
                      offset_commit("beyond", "ue", 0, 480, ts))),
    ])
    out = tmp_path_factory.mktemp("restart-out") / "out"
    doc = build([root], out, spark=spark, progress=False, register_catalog=False)
    rows = pq.read_table(out / "tables" / "restart_preview").to_pylist()
    return {"doc": doc, "out": out, "rows": {(r["topic"], r["partition"], r["broker"]): r for r in rows}}


def test_preview_truncates_broker_1_where_kafka_really_did(before):
    """Kafka's rejoined broker 1 follows the new leader from the offset it truncated to: the start of
    the first epoch in its checkpoint it did not have before (0 0 only)."""
    truncated_to = next(start for epoch, start in _rejoined_epochs() if epoch > 0)
    r = before["rows"][("ue", 0, 1)]
    assert (r["leo"], r["truncate_to"], r["rule"], r["leader"], r["epochs_asked"]) == (500, truncated_to, "leader_epoch", 2, [0])
    assert truncated_to == 300  # and Kafka's own log line: EpochEndOffset(leaderEpoch=0, endOffset=300)


def test_broker_1_destroys_the_200_acked_records_no_one_else_holds(before):
    r = before["rows"][("ue", 0, 1)]
    assert (r["records_destroyed"], r["records_nowhere_else"], r["held_elsewhere"]) == (200, 200, [])
    assert r["sentence"] == ("Restarting broker 1 truncates ue-0 from 500 to 300 (rule leader_epoch): 200 records that no other "
                             "replica holds — run salvage first.")
    loss = {f["id"]: f for f in before["doc"]["findings"] if f["kind"] == "acked_data_loss"}
    assert r["finding_id"] in loss and (loss[r["finding_id"]]["first_offset"], loss[r["finding_id"]]["last_offset"]) == (300, 499)


def test_broker_3_on_the_leaders_lineage_truncates_nothing(before):
    r = before["rows"][("ue", 0, 3)]
    assert (r["truncate_to"], r["leo"], r["records_destroyed"], r["sentence"], r["finding_id"]) == (450, 450, 0, None, None)
    assert ("ue", 0, 2) not in before["rows"]  # the surviving log itself


def test_groups_that_read_the_lost_records_and_only_those(before):
    found = {f["evidence"][0]["detail"].split("group ")[1].split()[0]: f
             for f in before["doc"]["findings"] if f["kind"] == "consumer_read_lost_data"}
    assert set(found) == {"inside", "beyond"}  # "lagging" committed 250, below the lost range
    inside, beyond = found["inside"], found["beyond"]
    assert (inside["severity"], inside["first_offset"], inside["last_offset"], inside["records"]) == ("warning", 300, 399, 100)
    assert inside["salvage_brokers"] == [1] and "silently reads other records" in inside["explanation"]
    assert (beyond["first_offset"], beyond["last_offset"], beyond["records"]) == (300, 479, 180)
    assert "OFFSET_OUT_OF_RANGE" in beyond["explanation"]


def test_the_divergence_names_for_salvage_only_the_forked_replica(before):
    """Broker 3 follows broker 2's lineage: its records at 300-449 are the survivor's, though it
    differs from broker 1 there, so it is no salvage broker (it was, before issue 37's one computation)."""
    [forked] = [f for f in before["doc"]["findings"] if f["kind"] == "replica_divergence"]
    assert (forked["first_offset"], forked["last_offset"], forked["brokers"]) == (300, 449, [1, 2, 3])
    assert (forked["surviving_broker"], forked["salvage_brokers"]) == (2, [1])
    for read in (f for f in before["doc"]["findings"] if f["kind"] == "consumer_read_lost_data"):
        assert (read["surviving_broker"], read["salvage_brokers"]) == (2, [1])


def test_report_has_the_before_you_restart_box(before):
    import io

    from analyzer.report import load
    from analyzer.report.html import render_html
    from analyzer.report.summary import restart_lines
    from analyzer.report.text import render_text

    data = load(before["out"])
    lines = restart_lines(data)
    assert lines == [{"sentence": before["rows"][("ue", 0, 1)]["sentence"], "finding_id": before["rows"][("ue", 0, 1)]["finding_id"]}]
    html = render_html(data)
    box = html.split('id="before-restart"', 1)[1].split("</section>", 1)[0]
    assert "Before you restart" in box and lines[0]["sentence"] in box and f'data-finding-id="{lines[0]["finding_id"]}"' in box
    assert box.count("<li ") == 2  # one row per group that read lost records
    link = box.split('href="#', 1)[1].split('"', 1)[0]
    assert f'id="{link}" data-finding-id="{lines[0]["finding_id"]}"' in html  # the link lands on that finding
    out = io.StringIO()
    render_text(data, out)
    text = " ".join(out.getvalue().split())
    assert "Before you restart" in text and "run salvage first" in text and text.count("committed offset") >= 2


def test_the_truncation_still_to_come_is_reported_pending_where_kafka_did_it(before):
    """Issue 37 item 3: before the rejoin, broker 1's HW checkpoint (500) lies above the start of
    the surviving log's next epoch (300): its truncation below the HW is pending, exactly where
    Kafka's real rejoin cut it (and where the restart preview says), once."""
    [f] = [f for f in before["doc"]["findings"] if f["kind"] == "truncation_below_hw"]
    r = before["rows"][("ue", 0, 1)]
    assert (f["brokers"], f["first_offset"], f["last_offset"], f["records"]) == ([1], r["truncate_to"], 499, 200)
    assert f["first_offset"] == next(start for epoch, start in _rejoined_epochs() if epoch > 0)
    assert f["explanation"].startswith("Pending: broker 1 has not rejoined ue-0")
    assert any(e["path"] == "broker-1/replication-offset-checkpoint" and "500" in e["detail"] for e in f["evidence"])


def test_nothing_else_is_reported(before):
    """The rebuilt snapshot is the incident and nothing more: the rebuilt bytes add no damage."""
    kinds = {f["kind"] for f in before["doc"]["findings"] if f["severity"] in ("error", "warning")}
    assert kinds == {"acked_data_loss", "replica_divergence", "unclean_leader_election", "consumer_read_lost_data",
                     "truncation_below_hw"}, kinds
