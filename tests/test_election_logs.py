"""Who decides an election on a ZooKeeper-mode collection (issue 37 item 2), through ``analyze``:
no metadata log, the brokers' and the controller's state-change.log beside the log dirs.

Two partitions had the same incident: broker 1 led epoch 0 to offset 50 (HW 50, checkpointed) and
was lost; broker 2, out of the ISR at 30, was elected for epoch 1 and wrote on with broker 3.

- ``zk-unclean``: the 3.5+ controller wrote the election's state, ``LeaderAndIsr(leader=2,
  leaderEpoch=1, ..., leaderRecoveryState=RECOVERING, ...)``, and broker 2 its ``marked as
  RECOVERING`` line: the logs decide (``evidence_basis`` broker_log). Before, this line was a plain
  leader change that "decided" the partition: nothing was reported, not even from the files.
- ``zk-named``: the logs only name the leader (a pre-3.2 ``LeaderAndIsr(leader=2, leaderEpoch=1,
  isr=List(2), zkVersion=4)`` and ``Leader zk-named-0 ... starts at leader epoch 1``): they say who
  led, not how it was elected, so the files decide.
- ``zk-ok``: healthy, broker 1 lagging: nothing.

Broker 1 has not rejoined: its truncation below its HW is pending (issue 37 item 3), where the
restart preview says it will cut.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from analyzer.analyze import build
from sample_data.writer.log import PartitionSpec, write_broker_dir
from sample_data.writer.records import BatchSpec, Record

T0 = 1_795_374_000_000
CLUSTER = "ZkElectionsClusterAAAAA"
TOPIC_IDS = {"zk-unclean": "vWvdb6-VQJ6vN03_foMm1Q", "zk-named": "EjRWeJCrze8SNFZ4kKvN7w", "zk-ok": "_ty6CYdlQyH-3LoJh2VDIQ"}


def batches(first: int, last: int, epoch: int, tag: str, per: int = 5) -> list[BatchSpec]:
    return [BatchSpec(base, tuple(Record(f"k{o}".encode(), f"{tag}-{o}".encode() * 4, T0 + o) for o in range(base, min(base + per, last + 1))),
                      partition_leader_epoch=epoch) for base in range(first, last + 1, per)]


def _log(lines: list[tuple[str, str]]) -> str:
    return "".join(f"[2026-11-22 19:11:{16 + i:02d},317] INFO {msg} (state.change.logger)\n" for i, (msg, _) in enumerate(lines))


def state_change_logs(root) -> None:
    logs = root / "server-logs"
    logs.mkdir()
    controller = [
        ("[Controller id=3 epoch=2] Changed partition zk-unclean-0 from OfflinePartition to OnlinePartition with state "
         "LeaderAndIsr(leader=2, leaderEpoch=1, isrWithBrokerEpoch=List(BrokerState(brokerId=2, brokerEpoch=-1)), "
         "leaderRecoveryState=RECOVERING, partitionEpoch=3)", ""),
        ("[Controller id=3 epoch=2] Changed partition zk-named-0 from OfflinePartition to OnlinePartition with state "
         "LeaderAndIsr(leader=2, leaderEpoch=1, isr=List(2), zkVersion=4)", ""),
    ]
    (logs / "node-3-state-change.log").write_text(_log(controller))
    leader = [
        ("[Broker id=2] The topic partition zk-unclean-0 was marked as RECOVERING. Marking the topic partition as RECOVERED.", ""),
        (f"[Broker id=2] Leader zk-unclean-0 with topic id Some({TOPIC_IDS['zk-unclean']}) starts at leader epoch 1 from offset 30 "
         "with partition epoch 3, high watermark 30, ISR [2], adding replicas [] and removing replicas [] . Previous leader Some(1) "
         "and previous leader epoch was 0.", ""),
        (f"[Broker id=2] Leader zk-named-0 with topic id Some({TOPIC_IDS['zk-named']}) starts at leader epoch 1 from offset 30 "
         "with partition epoch 3, high watermark 30, ISR [2], adding replicas [] and removing replicas [] . Previous leader Some(1) "
         "and previous leader epoch was 0.", ""),
    ]
    (logs / "node-2-state-change.log").write_text(_log(leader))


@pytest.fixture(scope="module")
def analyzed(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("zk-elections")
    data = root / "data"
    forked = ("zk-unclean", "zk-named")
    for b in (1, 2, 3):
        parts, hw = {}, {}
        for t in forked:
            if b == 1:  # the old leader, lost after HW 50: its tail 30-49 is committed, and nowhere else
                parts[(t, 0)] = PartitionSpec(batches(0, 49, 0, "old"), topic_id=TOPIC_IDS[t], leader_epochs=[(0, 0)])
                hw[(t, 0)] = 50
            else:  # out of the ISR at 30, then leader (2) and follower (3) of epoch 1
                parts[(t, 0)] = PartitionSpec(batches(0, 29, 0, "old") + batches(30, 59, 1, "new"), topic_id=TOPIC_IDS[t],
                                              leader_epochs=[(0, 0), (1, 30)])
                hw[(t, 0)] = 60
        parts[("zk-ok", 0)] = PartitionSpec(batches(0, 39 if b == 1 else 49, 0, "ok"), topic_id=TOPIC_IDS["zk-ok"], leader_epochs=[(0, 0)])
        hw[("zk-ok", 0)] = 40 if b == 1 else 50
        write_broker_dir(data / f"broker-{b}", b, CLUSTER, directory_id=None, partitions=parts, hw=hw, recovery_points=hw,
                         log_starts={k: 0 for k in hw}, clean_shutdown=True, meta_version=0)
    state_change_logs(data)
    out = root / "out"
    doc = build([data], out, spark=spark, progress=False, register_catalog=False)
    return doc, out


def of(doc, topic, kind):
    return [f for f in doc["findings"] if f["topic"] == topic and f["kind"] == kind]


def test_the_zookeeper_controllers_recovering_state_decides_the_election(analyzed):
    doc, _ = analyzed
    [f] = of(doc, "zk-unclean", "unclean_leader_election")
    assert (f["evidence_basis"], f["brokers"], f["leader_epochs"], f["first_offset"]) == ("broker_log", [2], [1], 30)
    paths = sorted({e["path"] for e in f["evidence"]})
    assert paths == ["server-logs/node-2-state-change.log", "server-logs/node-3-state-change.log"]
    assert of(doc, "zk-unclean", "committed_data_lost_in_crash") == []


def test_logs_that_only_name_the_leader_leave_the_election_to_the_files(analyzed):
    doc, out = analyzed
    [f] = of(doc, "zk-named", "unclean_leader_election")
    assert (f["evidence_basis"], f["brokers"], f["first_offset"], f["last_offset"]) == ("files", [2], 30, 49)
    lineage = [r for r in pq.read_table(out / "tables" / "epoch_lineage").to_pylist() if r["topic"] == "zk-named" and r["leader_epoch"] == 1]
    assert {(r["likely_leader"], r["leader_evidence"]) for r in lineage} == {(2, "broker_log")}


def test_the_old_leaders_pending_truncation_is_what_the_restart_preview_says(analyzed):
    doc, out = analyzed
    preview = {r["topic"]: r for r in pq.read_table(out / "tables" / "restart_preview").to_pylist() if r["broker"] == 1}
    for topic in ("zk-unclean", "zk-named"):
        [f] = of(doc, topic, "truncation_below_hw")
        assert (f["brokers"], f["first_offset"], f["last_offset"], f["records"]) == ([1], 30, 49, 20)
        assert preview[topic]["truncate_to"] == f["first_offset"] and "Pending" in f["explanation"]


def test_a_healthy_lagging_follower_is_nothing(analyzed):
    doc, _ = analyzed
    assert [f for f in doc["findings"] if f["topic"] == "zk-ok"] == []
    assert {f["kind"] for f in doc["findings"]} == {"unclean_leader_election", "replica_divergence", "acked_data_loss", "truncation_below_hw"}


def test_the_new_leaders_recovering_line_takes_the_epoch_it_starts_next(spark):
    """``views.recovering_rows``: the RECOVERING line names no epoch; the same file's next
    become-leader line of the partition (a minute at most) does."""
    from pyspark.sql import functions as F

    from jobs.history.views import LOG_COLUMNS, recovering_rows
    from parsers import broker_log

    lines = [
        "[Broker id=2] The topic partition ue-0 was marked as RECOVERING. Marking the topic partition as RECOVERED.",
        "[Broker id=2] Leader other-0 with topic id Some(x) starts at leader epoch 7 from offset 0 with partition epoch 7, high "
        "watermark 0, ISR [2], adding replicas [] and removing replicas [] . Previous leader Some(1) and previous leader epoch was 6.",
        "[Broker id=2] Leader ue-0 with topic id Some(y) starts at leader epoch 2 from offset 300 with partition epoch 4, high "
        "watermark 300, ISR [2], adding replicas [] and removing replicas [] . Previous leader Some(-1) and previous leader epoch was 1.",
        "[Broker id=2] The topic partition lone-0 was marked as RECOVERING. Marking the topic partition as RECOVERED.",
    ]
    text = "".join(f"[2026-11-22 19:11:{16 + i:02d},317] INFO {m} (state.change.logger)\n" for i, m in enumerate(lines))
    table = broker_log.parse(text.encode(), "node-2-state-change.log").table.to_pandas()
    table["path"], table["broker"] = "node-2-state-change.log", 2
    lines = spark.createDataFrame(table).select(*[F.coalesce("node", "broker").alias("node") if c == "node" else c for c in LOG_COLUMNS],
                                                 F.col("node").alias("_node"), F.col("broker").alias("_broker")).collect()
    got = {r["topic"]: r["leader_epoch"] for r in recovering_rows(lines)}
    assert got == {"ue": 2, "lone": None}
