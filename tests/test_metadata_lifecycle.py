"""A topic's whole life in the KRaft metadata log, replayed through Spark as ``analyze`` runs it.

The records are written by our writer (``sample_data.writer.metadata_records``, judged here by
Kafka 3.6.2's ``kafka-dump-log --cluster-metadata-decoder``) in the orders the controller writes
them: CreateTopics (TopicRecord + PartitionRecords), a reassignment (PartitionChangeRecord with
adding/removing replicas, the ISR catching up, then the record completing it), CreatePartitions (a
PartitionRecord for a new partition of an existing topic), DeleteTopics (one RemoveTopicRecord)
and a re-creation under the same name with a new topic id. The replay is a grouped pandas function
(``applyInPandas``): a row missing one of its fields became NaN in a list column, and Arrow failed
the whole ``analyze`` on it ("'float' object is not iterable").

A deleted topic's directories are renamed ``topic-N.<id>-delete`` and removed later; a collection
made in between holds them beside the re-created topic's live ``topic-N``. They are not replicas:
the analysis of such a collection says nothing about them.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
from test_metadata_records import compare, parse_dump

from analyzer.analyze import build
from jobs.history.metadata import METADATA_EVENTS, metadata_events
from jobs.ingest.shaping import conform
from parsers import segment
from parsers.metadata_records import decode_records
from sample_data.writer import metadata_records as mr
from sample_data.writer.log import PartitionSpec, write_broker_dir
from sample_data.writer.records import BatchSpec, Record, encode_batches

T0 = 1_767_225_600_000
ORDERS, GONE, GONE_AGAIN = bytes(range(16)), bytes(range(16, 32)), bytes(range(32, 48))
CLUSTER = "LifecycleClusterAAAAAA"
METADATA_LOG = "broker-1/__cluster_metadata-0/00000000000000000000.log"


def uuid_str(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


# one entry per controller write (one batch: the records of one operation are appended atomically)
LIFE: list[tuple[str, list[bytes]]] = [
    ("create orders", [mr.topic_record("orders", ORDERS),
                       mr.partition_record(ORDERS, 0, [1, 2, 3], [1, 2, 3], 1),
                       mr.partition_record(ORDERS, 1, [2, 3, 1], [2, 3, 1], 2)]),
    ("create gone", [mr.topic_record("gone", GONE), mr.partition_record(GONE, 0, [3, 1, 2], [3, 1, 2], 3)]),
    # reassign orders-0 from [1,2,3] to [2,3,4]: target first, then the replicas being removed
    ("reassign orders-0", [mr.partition_change_record(ORDERS, 0, replicas=[2, 3, 4, 1], adding=[4], removing=[1])]),
    ("broker 4 caught up", [mr.partition_change_record(ORDERS, 0, isr=[1, 2, 3, 4])]),
    ("reassignment done", [mr.partition_change_record(ORDERS, 0, replicas=[2, 3, 4], isr=[2, 3, 4], leader=2, adding=[], removing=[])]),
    ("add orders-2", [mr.partition_record(ORDERS, 2, [3, 1, 2], [3, 1, 2], 3)]),
    ("gone shrinks", [mr.partition_change_record(GONE, 0, isr=[3, 1])]),
    ("add gone-1", [mr.partition_record(GONE, 1, [1, 2, 3], [1, 2, 3], 1)]),
    ("delete gone", [mr.remove_topic_record(GONE)]),
    ("create gone again", [mr.topic_record("gone", GONE_AGAIN), mr.partition_record(GONE_AGAIN, 0, [2, 3, 1], [2, 3, 1], 2)]),
    ("orders-1 leader moves", [mr.partition_change_record(ORDERS, 1, leader=3, isr=[3, 1])]),
    ("delete gone again", [mr.remove_topic_record(GONE_AGAIN)]),
]


def batches_of(life: list) -> list[BatchSpec]:
    """One batch a step of ``life`` ((name, record values) pairs), a second apart."""
    out, offset = [], 0
    for i, (_, values) in enumerate(life):
        out.append(BatchSpec(offset, tuple(Record(None, v, T0 + 1000 * i) for v in values), partition_leader_epoch=1))
        offset += len(values)
    return out


def metadata_batches() -> list[BatchSpec]:
    return batches_of(LIFE)


def ingested(path: str, data: bytes) -> pa.Table:
    """The ``metadata_records`` rows ingest writes for one segment of broker 1 (its decoder, then
    its ``conform``: the common columns, ``file_kind``)."""
    parsed = segment.parse(data, path, records=True, payloads=True)
    table, problems = decode_records(parsed.extra["records"])
    assert problems == [] and parsed.problems.num_rows == 0
    f = {"broker": 1, "log_dir": "broker-1", "topic": "__cluster_metadata", "partition": 0, "dir_state": "live", "path": path}
    return conform(table, "metadata_records", f, file_kind="segment", snapshot_end_offset=None)


def test_the_writer_writes_what_kafka_reads(dump_log, tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(encode_batches(metadata_batches()))
    out = subprocess.run([str(dump_log.script), "--cluster-metadata-decoder", "--files", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    printed = parse_dump(out.stdout)[str(path)]
    rows = ingested(str(path), path.read_bytes()).to_pylist()
    assert len(rows) == len(printed) == sum(len(v) for _, v in LIFE)
    assert {compare(printed[r["offset"]], r) for r in rows} == {"payload"}
    assert [r["record_type"] for r in rows if r["record_type"] == "REMOVE_TOPIC_RECORD"] == ["REMOVE_TOPIC_RECORD"] * 2


def test_every_step_of_a_topics_life_replays_through_spark(spark):
    meta = spark.createDataFrame(ingested(METADATA_LOG, encode_batches(metadata_batches())))
    rows = [r.asDict() for r in metadata_events(meta).orderBy("meta_offset", "topic_id", "partition").collect()]
    got = [(r["meta_offset"], r["topic"], r["topic_id"], r["partition"], r["event"], r["leader"], r["isr"], r["replicas"]) for r in rows]
    o, g, a = uuid_str(ORDERS), uuid_str(GONE), uuid_str(GONE_AGAIN)
    assert got == [
        (1, "orders", o, 0, "partition_created", 1, [1, 2, 3], [1, 2, 3]),
        (2, "orders", o, 1, "partition_created", 2, [2, 3, 1], [2, 3, 1]),
        (4, "gone", g, 0, "partition_created", 3, [3, 1, 2], [3, 1, 2]),
        (5, "orders", o, 0, "replicas_change", 1, [1, 2, 3], [2, 3, 4, 1]),
        (6, "orders", o, 0, "isr_change", 1, [1, 2, 3, 4], [2, 3, 4, 1]),
        (7, "orders", o, 0, "leader_change", 2, [2, 3, 4], [2, 3, 4]),
        (8, "orders", o, 2, "partition_created", 3, [3, 1, 2], [3, 1, 2]),
        (9, "gone", g, 0, "isr_change", 3, [3, 1], [3, 1, 2]),
        (10, "gone", g, 1, "partition_created", 1, [1, 2, 3], [1, 2, 3]),
        (11, "gone", g, 0, "topic_removed", 3, [3, 1], [3, 1, 2]),
        (11, "gone", g, 1, "topic_removed", 1, [1, 2, 3], [1, 2, 3]),
        (13, "gone", a, 0, "partition_created", 2, [2, 3, 1], [2, 3, 1]),
        (14, "orders", o, 1, "leader_change", 3, [3, 1], [2, 3, 1]),
        (15, "gone", a, 0, "topic_removed", 2, [2, 3, 1], [2, 3, 1]),
    ]
    by = {(r["meta_offset"], r["partition"]): r for r in rows}
    assert by[(7, 0)]["election"] == "clean" and by[(14, 1)]["election"] == "clean"
    removed = by[(11, 0)]
    assert removed["election"] is None and removed["clean"] is None and removed["prev_isr"] is None
    assert removed["detail"] == "topic gone removed" and removed["nodes"] == [1] and removed["path"] == METADATA_LOG
    # every event has every field of the schema, of its type (none left for Arrow to guess)
    assert all(set(r) == {f.name for f in METADATA_EVENTS.fields} for r in rows)


# ---------------------------------------------------------------- through analyze, with a -delete dir


def data_batches(n: int, tag: str) -> list[BatchSpec]:
    return [BatchSpec(i, (Record(f"k{i}".encode(), f"{tag}{i}".encode(), T0 + i),)) for i in range(n)]


@pytest.fixture(scope="module")
def analyzed(spark, tmp_path_factory) -> tuple[dict, Path]:
    """Three brokers after ``gone`` was deleted and created again (the last deletion left out: the
    new ``gone`` is live): each holds the metadata log, ``orders``, the new ``gone-0`` and the old
    incarnation's ``gone-0.<id>-delete``, whose records differ at the same offsets."""
    root = tmp_path_factory.mktemp("lifecycle")
    data = root / "data"
    meta = metadata_batches()[:-1]
    n_meta = sum(len(b.records) for b in meta)
    for b in (1, 2, 3):
        parts = {("__cluster_metadata", 0): PartitionSpec(meta),
                 ("orders", 0): PartitionSpec(data_batches(20, "o"), topic_id=uuid_str(ORDERS), leader_epochs=[(0, 0)]),
                 ("gone", 0): PartitionSpec(data_batches(10, "new"), topic_id=uuid_str(GONE_AGAIN), leader_epochs=[(0, 0)])}
        hw = {("__cluster_metadata", 0): n_meta, ("orders", 0): 20, ("gone", 0): 10}
        write_broker_dir(data / f"broker-{b}", b, CLUSTER, directory_id=None, partitions=parts, hw=hw, recovery_points=hw,
                         log_starts={k: 0 for k in hw}, clean_shutdown=True)
        # the deleted incarnation's dir, as LogManager.asyncDelete renames it (its own checkpoints went with it)
        old = root / f"old-{b}"
        write_broker_dir(old, b, CLUSTER, directory_id=None, clean_shutdown=True, hw={}, recovery_points={}, log_starts={},
                         partitions={("gone", 0): PartitionSpec(data_batches(30 + b, f"old{b}-"), topic_id=uuid_str(GONE), leader_epochs=[(0, 0)])})
        (old / "gone-0").rename(data / f"broker-{b}" / f"gone-0.{GONE.hex()}-delete")
    out = root / "out"
    return build([data], out, spark=spark, progress=False, register_catalog=False), out


def test_analyze_replays_a_deleted_and_recreated_topic(analyzed):
    import pyarrow.parquet as pq

    _, out = analyzed
    events = pq.read_table(out / "tables" / "metadata_events").to_pylist()
    removed = sorted((e["topic"], e["topic_id"], e["partition"]) for e in events if e["event"] == "topic_removed")
    assert removed == [("gone", uuid_str(GONE), 0), ("gone", uuid_str(GONE), 1)]
    files = pq.read_table(out / "tables" / "files").to_pylist()
    assert {f["dir_state"] for f in files if "-delete" in f["path"]} == {"delete"}


def test_a_deleted_topics_dirs_are_not_replicas(analyzed):
    doc, _ = analyzed
    about_gone = [(f["kind"], f["partition"], f["brokers"]) for f in doc["findings"] if f["topic"] == "gone"]
    assert about_gone == []
    assert not any("-delete" in (e["path"] or "") for f in doc["findings"] for e in f["evidence"])


# ---------------------------------------------------------------- Kafka 4.x: ELR (KIP-966), every record version

ELR_TOPIC = bytes(range(48, 64))
DIR = bytes(range(64, 80))
# min.insync.replicas 2, brokers fenced one by one and brought back, as 4.1.1's PartitionChangeBuilder writes it
ELR_LIFE: list[tuple[str, list[bytes]]] = [
    ("create", [mr.topic_record("elr", ELR_TOPIC),
                mr.partition_record(ELR_TOPIC, 0, [1, 2, 3], [1, 2, 3], 1, version=2, directories=[DIR] * 3),
                mr.partition_record(ELR_TOPIC, 1, [2, 3, 1], [2, 3, 1], 2, version=2, directories=[DIR] * 3)]),
    ("3 fenced", [mr.partition_change_record(ELR_TOPIC, 0, isr=[1, 2], version=2),
                  mr.partition_change_record(ELR_TOPIC, 1, isr=[2, 1], version=2)]),
    ("2 fenced", [mr.partition_change_record(ELR_TOPIC, 0, isr=[1], elr=[2], version=2),
                  mr.partition_change_record(ELR_TOPIC, 1, leader=1, isr=[1], elr=[2], version=2)]),
    ("1 fenced", [mr.partition_change_record(ELR_TOPIC, 0, leader=-1, isr=[], elr=[1, 2], last_known_elr=[1], version=2),
                  mr.partition_change_record(ELR_TOPIC, 1, leader=-1, isr=[], elr=[1, 2], last_known_elr=[1], version=2)]),
    # broker 2 returns cleanly: elected from the ELR of both partitions
    ("2 back", [mr.partition_change_record(ELR_TOPIC, 0, leader=2, isr=[2], elr=[1], last_known_elr=[], version=2)]),
    # partition 1: brokers 1 and 2 came back from unclean shutdowns (out of the ELR); the last known leader is brought back
    ("1 unclean", [mr.partition_change_record(ELR_TOPIC, 1, elr=[], version=2)]),
    ("1 back", [mr.partition_change_record(ELR_TOPIC, 1, leader=1, isr=[1], leader_recovery_state=mr.RECOVERING, last_known_elr=[],
                                           version=2)]),
    ("dirs moved", [mr.partition_change_record(ELR_TOPIC, 0, directories=[DIR, DIR, bytes(16)], version=1)]),
    ("min.insync.replicas changed", [mr.clear_elr_record("elr")]),
    ("cluster default changed", [mr.clear_elr_record("")]),
]


def elr_batches() -> list[BatchSpec]:
    return batches_of(ELR_LIFE)


def test_the_elr_records_are_what_kafka_4_reads(kafka41_bin, tmp_path):
    """Every PartitionRecord/PartitionChangeRecord version and ClearElrRecord, judged by 4.1.1's
    decoder (3.6.2 reads neither version 2 nor ClearElrRecord)."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(encode_batches(elr_batches()))
    out = subprocess.run([str(kafka41_bin / "kafka-dump-log.sh"), "--cluster-metadata-decoder", "--files", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    printed = parse_dump(out.stdout)[str(path)]
    rows = ingested(str(path), path.read_bytes()).to_pylist()
    assert len(rows) == len(printed) == sum(len(v) for _, v in ELR_LIFE)
    assert {compare(printed[r["offset"]], r) for r in rows} == {"payload"}
    assert {(r["record_type"], r["version"]) for r in rows} >= {("PARTITION_RECORD", 2), ("PARTITION_CHANGE_RECORD", 2),
                                                                 ("PARTITION_CHANGE_RECORD", 1), ("CLEAR_ELR_RECORD", 0)}


def test_elr_elections_replay_through_spark(spark):
    meta = spark.createDataFrame(ingested(METADATA_LOG, encode_batches(elr_batches())))
    rows = [r.asDict() for r in metadata_events(meta).orderBy("meta_offset", "partition").collect()]
    got = [(r["partition"], r["event"], r["election"], r["elected_from"], r["elr"], r["last_known_elr"]) for r in rows]
    assert got == [
        (0, "partition_created", None, None, None, None),
        (1, "partition_created", None, None, None, None),
        (0, "isr_change", None, None, None, None),
        (1, "isr_change", None, None, None, None),
        (0, "isr_change", None, None, [2], None),
        (1, "leader_change", "clean", "isr", [2], None),
        (0, "leader_change", "offline", None, [1, 2], [1]),
        (1, "leader_change", "offline", None, [1, 2], [1]),
        (0, "leader_change", "clean", "elr", [1], []),
        (1, "elr_change", None, None, [], [1]),
        (1, "leader_change", "unclean", "last_known_leader", [], []),
        (0, "partition_change", None, None, [1], []),
        (0, "elr_change", None, None, [], []),  # ClearElrRecord("elr"); ("") then finds nothing left to clear
    ]
    elr_elected = rows[8]
    assert "elected from ELR [1, 2]" in elr_elected["detail"] and elr_elected["leader_recovery_state"] == 0
    recovery = rows[10]
    assert recovery["leader_recovery_state"] == 1 and "UNCLEAN recovery: last known leader 1" in recovery["detail"]
