"""One small collection with one topic per anomaly, written by the sample-data writer: each
finding kind appears on its topic, with its offsets, and nothing else is reported.

The writer's bytes are judged by Kafka's kafka-dump-log in tests/test_writer_*.py; here they are
only the input. One collection (not one per kind) keeps it to a single analyze run.
"""

from __future__ import annotations

import shutil

import pytest

from analyzer.analyze import build
from sample_data.writer.log import LogConfig, PartitionSpec, write_broker_dir, write_partition
from sample_data.writer.records import BatchSpec, Record

T0 = 1_700_000_000_000
HOUR = 3_600_000


def batches(first: int, last: int, per: int = 5, ts: int = T0, epoch: int = 0, **kw) -> list[BatchSpec]:
    out = []
    for base in range(first, last + 1, per):
        n = min(per, last + 1 - base)
        recs = tuple(Record(f"k{o}".encode(), f"value-{o}".encode() * 4, ts + o) for o in range(base, base + n))
        out.append(BatchSpec(base_offset=base, records=recs, partition_leader_epoch=epoch, **kw))
    return out


def idempotent(first: int, last: int, pid: int, seq0: int, per: int = 5, ts: int = T0, transactional: bool = False) -> list[BatchSpec]:
    out = []
    for i, b in enumerate(batches(first, last, per, ts)):
        out.append(BatchSpec(base_offset=b.base_offset, records=b.records, producer_id=pid, producer_epoch=0,
                             base_sequence=seq0 + i * per, is_transactional=transactional))
    return out


@pytest.fixture(scope="module")
def zoo_run(spark, tmp_path_factory):
    """The zoo written and analyzed once: (findings document, output DIR)."""
    root = tmp_path_factory.mktemp("zoo")
    data = root / "data"
    cfg = LogConfig(segment_bytes=1 << 20)
    b1 = {
        ("crc", 0): PartitionSpec(batches(0, 49)),
        ("ovl", 0): PartitionSpec(batches(0, 29)),
        ("sgap", 0): PartitionSpec(batches(0, 24) + batches(30, 49), roll_at=[30]),
        ("ogap", 0): PartitionSpec(batches(0, 24) + batches(30, 49)),
        ("ckpt", 0): PartitionSpec(batches(0, 49)),
        ("trunc", 0): PartitionSpec(batches(0, 49)),
        ("dup", 0): PartitionSpec(idempotent(0, 29, pid=7, seq0=0) + idempotent(30, 34, pid=7, seq0=10)),
        ("hang", 0): PartitionSpec(idempotent(0, 4, pid=9, seq0=0, transactional=True) + batches(5, 49, ts=T0 + HOUR),
                                   producer_snapshot=False),
        ("tid", 0): PartitionSpec(batches(0, 19), topic_id="EjRWeJCrze8SNFZ4kKvN7w"),
        ("ok", 0): PartitionSpec(batches(0, 49)),
    }
    hw = {k: 50 for k in b1}
    hw.update({("ovl", 0): 30, ("dup", 0): 35, ("tid", 0): 20, ("trunc", 0): 80})
    rp = dict(hw)
    rp.update({("ckpt", 0): 999, ("trunc", 0): 50})
    layouts = write_broker_dir(data / "broker-1", 1, "ZooClusterAAAAAAAAAAAA", directory_id=None, partitions=b1, hw=hw,
                               recovery_points=rp, log_starts={k: 0 for k in b1}, clean_shutdown=True)
    b2 = {("tid", 0): PartitionSpec(batches(0, 19), topic_id="_ty6CYdlQyH-3LoJh2VDIQ"), ("ok", 0): PartitionSpec(batches(0, 49))}
    write_broker_dir(data / "broker-2", 2, "ZooClusterAAAAAAAAAAAA", directory_id=None, partitions=b2,
                     hw={("tid", 0): 20, ("ok", 0): 50}, recovery_points={("tid", 0): 20, ("ok", 0): 50},
                     log_starts={("tid", 0): 0, ("ok", 0): 0}, clean_shutdown=True)
    # jbod: broker 4 has two log dirs (same meta.properties) and neither has .kafka_cleanshutdown
    for log_dir, topic in (("data-a", "jbod-a"), ("data-b", "jbod-b")):
        k = (topic, 0)
        write_broker_dir(data / "broker-4" / log_dir, 4, "ZooClusterAAAAAAAAAAAA", directory_id=None,
                         partitions={k: PartitionSpec(batches(0, 19))}, hw={k: 20}, recovery_points={k: 10},
                         log_starts={k: 0}, clean_shutdown=False)
    write_broker_dir(data / "broker-3", 3, "AnotherClusterBBBBBBBB", directory_id=None, partitions={("other", 0): PartitionSpec(batches(0, 9))},
                     hw={("other", 0): 10}, recovery_points={("other", 0): 10}, log_starts={("other", 0): 0}, clean_shutdown=True)

    # crc: one byte of batch 3's last record value flipped, after the writer computed the CRC
    loc = layouts[("crc", 0)].batches[3]
    raw = bytearray(loc.path.read_bytes())
    raw[loc.position + loc.size - 3] ^= 0xFF
    loc.path.write_bytes(bytes(raw))
    # ovl: a second segment, named 20, holding offsets 20..49 (overlapping 20..29 of the first)
    other = write_partition(root / "ovl-src", batches(20, 49), cfg)
    shutil.copy(other.segments[0].log_path, layouts[("ovl", 0)].dir / "00000000000000000020.log")
    # dup: the batch with sequences 10..14 appended a second time at offset 35
    dup_layout = layouts[("dup", 0)]
    again = write_partition(root / "dup-src", [BatchSpec(base_offset=35, records=idempotent(10, 14, 7, 10)[0].records, producer_id=7,
                                                          producer_epoch=0, base_sequence=10)], cfg)
    with open(dup_layout.active_segment.log_path, "ab") as fh:
        fh.write(again.segments[0].log_path.read_bytes())

    doc = build([data], root / "out", spark=spark, progress=False, register_catalog=False)
    return doc, root / "out"


@pytest.fixture(scope="module")
def zoo(zoo_run):
    return zoo_run[0]


EXPECTED = {
    ("crc_mismatch", "crc"),
    ("segment_overlap", "ovl"),
    ("segment_gap", "sgap"),
    ("offset_gap", "ogap"),
    ("checkpoint_inconsistent", "ckpt"),
    ("truncation_below_hw", "trunc"),
    ("duplicate_sequence", "dup"),
    ("hanging_transaction", "hang"),
    ("topic_id_mismatch", "tid"),
    ("cluster_id_mismatch", None),
    ("unclean_shutdown", None),
}


def test_each_anomaly_is_found_on_its_topic_and_nothing_else(zoo):
    got = {(f["kind"], f["topic"]) for f in zoo["findings"]}
    assert got == EXPECTED


def one(zoo, kind: str) -> dict:
    [f] = [f for f in zoo["findings"] if f["kind"] == kind]
    return f


def test_offsets_and_brokers_of_each_finding(zoo):
    assert (one(zoo, "segment_gap")["first_offset"], one(zoo, "segment_gap")["last_offset"]) == (25, 29)
    assert (one(zoo, "offset_gap")["first_offset"], one(zoo, "offset_gap")["last_offset"]) == (25, 29)
    assert (one(zoo, "segment_overlap")["first_offset"], one(zoo, "segment_overlap")["last_offset"]) == (20, 29)
    assert (one(zoo, "truncation_below_hw")["first_offset"], one(zoo, "truncation_below_hw")["last_offset"]) == (50, 79)
    assert one(zoo, "checkpoint_inconsistent")["first_offset"] == 50
    dup = one(zoo, "duplicate_sequence")
    assert (dup["first_offset"], dup["last_offset"]) == (10, 35)
    assert dup["producers"][0]["producer_id"] == 7
    hang = one(zoo, "hanging_transaction")
    assert (hang["first_offset"], hang["producers"][0]["producer_id"]) == (0, 9)
    crc = one(zoo, "crc_mismatch")
    assert crc["brokers"] == [1] and crc["evidence"][0]["path"].endswith("crc-0/00000000000000000000.log")
    assert one(zoo, "topic_id_mismatch")["brokers"] == [1, 2]
    assert one(zoo, "cluster_id_mismatch")["brokers"] == [1, 2, 3, 4]
    assert zoo["summary"]["records_lost"] == 0


def test_a_jbod_broker_stopped_uncleanly_is_one_finding_naming_both_log_dirs(zoo):
    f = one(zoo, "unclean_shutdown")
    assert f["brokers"] == [4]
    marker = [e["path"] for e in f["evidence"] if "no .kafka_cleanshutdown" in e["detail"]]
    assert marker == ["broker-4/data-a", "broker-4/data-b"]
    assert "broker-4/data-a" in f["explanation"] and "broker-4/data-b" in f["explanation"]
    details = " ".join(e["detail"] for e in f["evidence"])
    assert "jbod-a-0: recovery point 10 behind LEO 20" in details and "jbod-b-0: recovery point 10 behind LEO 20" in details


def test_detectors_read_the_job_tables_from_their_files(zoo_run, spark, tmp_path):
    """Cached, a job table carried its whole plan into every detector's query, and Spark planned
    through it each time (a third of a small collection's jobs phase): the detectors read each
    job table back from the files its write left, and caches none of them."""
    from pyspark import StorageLevel

    from jobs.findings.case import Case

    _, analyzed = zoo_run
    out = tmp_path / "out"
    shutil.copytree(analyzed, out)
    case = Case.open(spark, out)
    try:
        for name in ("replica_logs", "metadata_events", "epoch_lineage", "offset_ranges"):
            df = getattr(case, name)
            files = df.inputFiles()
            assert files and all(f"/tables/{name}/" in f for f in files), (name, files[:3])
            assert df.storageLevel == StorageLevel.NONE, name
    finally:
        case.close()


def test_agreeing_replicas_are_not_compared_record_by_record(zoo_run, spark, tmp_path):
    """Brokers 1 and 2 hold the same batches of ok-0 and tid-0: no record can differ, so divergence
    and loss ask one question (is any batch without its twin?) and build no record-level diffs
    (two dozen Spark jobs over nothing, on every healthy collection)."""
    from jobs.findings import divergence, loss
    from jobs.findings.case import Case
    from jobs.replicas import compare

    _, analyzed = zoo_run
    out = tmp_path / "out"
    shutil.copytree(analyzed, out)
    case = Case.open(spark, out)
    try:
        assert divergence.find(case) == [] and loss.find(case) == []
        assert case.replicas_agree and "diffs" not in case.__dict__
        parts = {(r["topic"], r["partition"]) for r in case.replicas}
        scope = compare.comparison_scope(dict.fromkeys(parts, -1), case.replicas)
        assert sum(len(brokers) > 1 for *_, brokers in scope) == 2  # (ok-0 and tid-0: there were pairs to compare)
    finally:
        case.close()
