"""Small files (indexes, snapshots, checkpoints, metadata) against Kafka's own readers.

Expected values come from ../shared/fixtures/golden/expected, written by Kafka 4.0's reader
classes (OffsetIndex, TimeIndex, TransactionIndex, ProducerStateManager.readSnapshot,
OffsetCheckpointFile, LeaderEpochCheckpointFile + LeaderEpochFileCache, PartitionMetadataFile,
MetaProperties). Where Kafka accepts a file we must decode the same values with no problem;
where it throws (or silently misreads), corrupt/CASES.tsv names the fault and we must report
the right problem kind at the right position.
"""

from __future__ import annotations

import csv

import pyarrow as pa
import pytest
from conftest import GOLDEN, read_jsonl
from small_parsers import PARSERS

from parsers import (
    leader_epoch_checkpoint,
    offset_checkpoint,
    offset_index,
    time_index,
)
from parsers._index import padding_entries
from parsers.common import PROBLEM_SCHEMA, FileBytes
from parsers.names import base_offset_from_name, detect_kind

EXPECTED = GOLDEN / "expected"
SMALL_FILES = [
    p
    for root in ("logdir", "meta")
    for p in sorted((GOLDEN / root).rglob("*"))
    if p.is_file() and detect_kind(p.name) in PARSERS
]


def _rel(path) -> str:
    return str(path.relative_to(GOLDEN))


def _parse(path, kind=None):
    with FileBytes(path) as fb:
        return PARSERS[kind or detect_kind(path.name)](fb.data, _rel(path))


def _expected(path, kind=None):
    return [e for e in read_jsonl(EXPECTED / (_rel(path) + ".jsonl")) if kind is None or e["type"] == kind]


def _batches(segment_rel: str) -> tuple[pa.Table, int]:
    """The batch table and file size Kafka's reader gave for a golden segment."""
    lines = read_jsonl(EXPECTED / (segment_rel + ".jsonl"))
    batches = [e for e in lines if e["type"] == "batch"]
    table = pa.table(
        {
            "position": pa.array([b["position"] for b in batches], pa.int64()),
            "base_offset": pa.array([b["baseOffset"] for b in batches], pa.int64()),
            "last_offset": pa.array([b["lastOffset"] for b in batches], pa.int64()),
        }
    )
    return table, lines[0]["size"]


def test_every_golden_small_file_has_expected_output():
    assert len(SMALL_FILES) >= 20
    for p in SMALL_FILES:
        assert (EXPECTED / (_rel(p) + ".jsonl")).exists(), p


@pytest.mark.parametrize("path", SMALL_FILES, ids=_rel)
def test_golden_small_file_has_no_problems(path):
    got = _parse(path)
    assert got.problems.schema == PROBLEM_SCHEMA
    assert got.problems.num_rows == 0, got.problems.to_pylist()


def _index_matches_kafka(path, module, kind: str, fields: dict[str, str], padding) -> tuple:
    """Check an index against Kafka's reader: entry count, real entries, padding slots.

    ``kind`` names the expected lines (``<kind>-header``, ``<kind>-entry``); ``fields`` maps
    our columns to Kafka's entry keys; ``padding(header)`` is what Kafka reads in a padding
    slot (a dict of entry keys). Returns (parsed, header, our rows, Kafka's entries).
    """
    got = _parse(path)
    assert got.table.schema == module.SCHEMA
    header = _expected(path, f"{kind}-header")[0]
    want = _expected(path, f"{kind}-entry")
    rows = got.table.to_pylist()
    assert got.extra["index_info"]["kafka_entries"][0].as_py() == header["entries"] == len(want)
    # real entries decode exactly as Kafka's entry(n)
    for row, e in zip(rows, want):
        assert tuple(row[c] for c in fields) == tuple(e[k] for k in fields.values())
    # what we call padding is what Kafka reads as all-zero slots
    assert len(rows) + padding_entries(got) == len(want)
    pad = padding(header)
    for e in want[len(rows):]:
        assert tuple(e[k] for k in pad) == tuple(pad.values())
    return got, header, rows, want


@pytest.mark.parametrize("path", [p for p in SMALL_FILES if p.suffix == ".index"], ids=_rel)
def test_offset_index_matches_kafka(path):
    got, header, rows, _ = _index_matches_kafka(
        path,
        offset_index,
        "index",
        {"slot": "n", "offset": "offset", "relative_offset": "relativeOffset", "position": "position"},
        lambda header: {"offset": header["baseOffset"], "relativeOffset": 0, "position": 0},
    )
    assert got.extra["index_info"]["base_offset"][0].as_py() == header["baseOffset"] == base_offset_from_name(path.name)
    for row in rows:
        assert row["path"] == _rel(path) and row["is_padding"] is False


def test_crashed_offset_index_is_padded_like_kafka_dump_log_says():
    path = GOLDEN / "logdir/golden-topic-0/00000000000000000049.index"
    got = _parse(path)
    # kafka-dump-log prints exactly these 5 entries and stops at the first zero entry
    assert [(r["offset"], r["position"]) for r in got.table.to_pylist()] == [
        (52, 263), (54, 526), (56, 789), (58, 1052), (60, 1315)
    ]
    assert padding_entries(got) == 123
    assert got.problems.num_rows == 0


@pytest.mark.parametrize("path", [p for p in SMALL_FILES if p.suffix == ".timeindex"], ids=_rel)
def test_time_index_matches_kafka(path):
    _index_matches_kafka(
        path,
        time_index,
        "timeindex",
        {"slot": "n", "timestamp": "timestamp", "offset": "offset", "relative_offset": "relativeOffset"},
        lambda header: {"timestamp": 0, "offset": header["baseOffset"]},
    )


def test_crashed_time_index_padding_is_not_a_problem_although_kafka_sanity_check_fails():
    path = GOLDEN / "logdir/golden-topic-0/00000000000000000049.timeindex"
    assert any(e["type"] == "error" for e in _expected(path))  # Kafka: "last timestamp is 0 …"
    got = _parse(path)
    assert got.table.num_rows == 5 and padding_entries(got) == 80
    assert got.problems.num_rows == 0


@pytest.mark.parametrize("path", [p for p in SMALL_FILES if p.suffix == ".txnindex"], ids=_rel)
def test_txn_index_matches_kafka(path):
    got = _parse(path)
    want = _expected(path, "aborted-txn")
    assert len(want) == got.table.num_rows
    for row, e in zip(got.table.to_pylist(), want):
        assert (row["version"], row["producer_id"], row["first_offset"], row["last_offset"], row["last_stable_offset"]) == (
            e["version"], e["producerId"], e["firstOffset"], e["lastOffset"], e["lastStableOffset"]
        )


@pytest.mark.parametrize("path", [p for p in SMALL_FILES if p.suffix == ".snapshot"], ids=_rel)
def test_producer_snapshot_matches_kafka(path):
    got = _parse(path)
    head = _expected(path, "snapshot")[0]
    want = _expected(path, "producer")
    assert head["producers"] == got.table.num_rows == len(want)
    for row, e in zip(got.table.to_pylist(), want):
        assert row["snapshot_offset"] == head["offset"]
        assert (
            row["producer_id"], row["producer_epoch"], row["coordinator_epoch"], row["timestamp"],
            row["current_txn_first_offset"], row["first_sequence"], row["last_sequence"],
            row["last_offset"], row["offset_delta"],
        ) == (
            e["producerId"], e["producerEpoch"], e["coordinatorEpoch"], e["lastTimestamp"],
            e["currentTxnFirstOffset"], e["firstSeq"], e["lastSeq"], e["lastDataOffset"], e["lastOffsetDelta"],
        )


@pytest.mark.parametrize("path", [p for p in SMALL_FILES if p.name.endswith("offset-checkpoint")], ids=_rel)
def test_offset_checkpoint_matches_kafka(path):
    got = _parse(path)
    want = _expected(path, "offset-entry")
    assert _expected(path, "offset-checkpoint")[0]["entries"] == len(want)
    assert [(r["topic"], r["partition"], r["offset"]) for r in got.table.to_pylist()] == [
        (e["topic"], e["partition"], e["offset"]) for e in want
    ]
    assert set(got.table["file_kind"].to_pylist()) <= {detect_kind(path.name)}


@pytest.mark.parametrize("path", [p for p in SMALL_FILES if p.name == "leader-epoch-checkpoint"], ids=_rel)
def test_leader_epoch_checkpoint_matches_kafka(path):
    got = _parse(path)
    want = _expected(path, "epoch-entry")
    assert [(r["epoch"], r["start_offset"]) for r in got.table.to_pylist()] == [(e["epoch"], e["startOffset"]) for e in want]
    assert set(got.table["file_kind"].to_pylist()) <= {"leader_epoch"}
    cache = leader_epoch_checkpoint.kafka_cache_view(got.table)
    assert _cache_string(cache) == _expected(path, "leader-epoch-cache")[0]["entries"]


def _cache_string(cache: pa.Table) -> str:
    return ",".join(f"{r['epoch']}:{r['start_offset']}" for r in cache.to_pylist())


@pytest.mark.parametrize("path", [p for p in SMALL_FILES if p.name == "partition.metadata"], ids=_rel)
def test_partition_metadata_matches_kafka(path):
    row = _parse(path).table.to_pylist()
    want = _expected(path, "partition-metadata")[0]
    assert [(r["version"], r["topic_id"]) for r in row] == [(want["version"], want["topicId"])]


@pytest.mark.parametrize("path", [p for p in SMALL_FILES if p.name == "meta.properties"], ids=_rel)
def test_meta_properties_matches_kafka(path):
    row = _parse(path).table.to_pylist()
    want = _expected(path, "meta-properties")[0]
    assert [(r["version"], r["node_id"], r["cluster_id"], r["directory_id"]) for r in row] == [
        (want["version"], want["nodeId"], want["clusterId"], want["directoryId"])
    ]


# ---- corrupt/: one fault per file --------------------------------------------------------------

# case -> (damaged file, expected problem kind or None where Kafka reads it as valid, position)
CORRUPT_SMALL = {
    "index-torn": ("00000000000000000000.index", "index_mismatch", 24),
    "index-non-monotonic": ("00000000000000000000.index", "index_mismatch", 8),
    "index-entry-past-eof": ("00000000000000000000.index", None, None),  # needs the segment: below
    "empty-index": ("00000000000000000000.index", None, None),
    "timeindex-backwards": ("00000000000000000000.timeindex", "timeindex_mismatch", 36),
    "txnindex-torn": ("00000000000000000031.txnindex", "txnindex_mismatch", 0),
    "snapshot-crc-mismatch": ("00000000000000000049.snapshot", "producer_snapshot_corrupt", 2),
    "checkpoint-bad-version": ("replication-offset-checkpoint", "checkpoint_malformed", 1),
    "checkpoint-count-mismatch": ("replication-offset-checkpoint", "checkpoint_malformed", 2),
    "checkpoint-non-numeric": ("replication-offset-checkpoint", "checkpoint_malformed", 3),
    "checkpoint-malformed-line": ("replication-offset-checkpoint", "checkpoint_malformed", 3),
    "empty-checkpoint": ("replication-offset-checkpoint", None, None),
    "leader-epoch-epoch-decreasing": ("leader-epoch-checkpoint", "leader_epoch_malformed", 5),
    "leader-epoch-offset-decreasing": ("leader-epoch-checkpoint", "leader_epoch_malformed", 5),
    "partition-metadata-bad-topic-id": ("partition.metadata", "checkpoint_malformed", 2),
    "meta-properties-no-node-id": ("meta.properties", "checkpoint_malformed", 0),  # a missing key has no line
}


def _cases() -> dict[str, str]:
    with open(GOLDEN / "corrupt" / "CASES.tsv", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f, delimiter="\t") if r and not r[0].startswith("#")]
    return {r[0]: r[1] for r in rows}


def test_every_small_file_corrupt_case_is_covered():
    small = {case for case, damaged in _cases().items() if detect_kind(damaged) in PARSERS}
    assert small == set(CORRUPT_SMALL)
    for case, (damaged, _, _) in CORRUPT_SMALL.items():
        assert _cases()[case] == damaged


@pytest.mark.parametrize("case", sorted(CORRUPT_SMALL))
def test_corrupt_case_problem(case):
    damaged, kind, position = CORRUPT_SMALL[case]
    got = _parse(GOLDEN / "corrupt" / case / damaged)
    problems = got.problems.to_pylist()
    if kind is None:
        assert problems == []
        return
    assert problems, f"{case}: no problem reported"
    assert {p["kind"] for p in problems} == {kind}
    assert position in [p["position"] for p in problems]
    assert all(p["path"] == f"corrupt/{case}/{damaged}" for p in problems)


def test_corrupt_checkpoints_keep_the_entries_that_parsed():
    got = _parse(GOLDEN / "corrupt/checkpoint-non-numeric/replication-offset-checkpoint")
    assert [(r["topic"], r["partition"], r["offset"]) for r in got.table.to_pylist()] == [("legacy-topic", 0, 27)]
    detail = got.problems["detail"][0].as_py()
    assert 'For input string: "59x"' in detail  # Kafka's bare NumberFormatException message
    got = _parse(GOLDEN / "corrupt/checkpoint-bad-version/replication-offset-checkpoint")
    assert got.table.num_rows == 2
    assert "Unrecognised version:1, expected version: 0" in got.problems["detail"][0].as_py()


@pytest.mark.parametrize(
    ("lines", "dupes"),
    [
        (["orders 0 5", "orders 0 6", "logs 0 1"], [4]),
        (["orders 0 5", "orders 1 6", "logs 0 1"], []),  # same topic, other partition
        (["a 1 5", "b 1 6", "a -1 7", "b 2147483647 8", "a -2147483648 9"], []),  # partitions at int32's ends
        (["a 2147483647 5", "b -2147483648 6", "a 2147483647 7", "x 0 1", "a 2147483647 2"], [5, 7]),
    ],
)
def test_duplicate_checkpoint_entries_are_found_exactly(lines, dupes):
    """The duplicate check without a group-by still tells (topic, partition) pairs apart."""
    data = ("0\n" + str(len(lines)) + "\n" + "\n".join(lines) + "\n").encode()
    got = offset_checkpoint.parse(data, "replication-offset-checkpoint")
    found = [p["position"] for p in got.problems.to_pylist() if p["detail"].startswith("duplicate entry")]
    assert found == dupes


def test_corrupt_snapshot_reports_kafka_crcs_and_keeps_entries():
    got = _parse(GOLDEN / "corrupt/snapshot-crc-mismatch/00000000000000000049.snapshot")
    want = _expected(GOLDEN / "corrupt/snapshot-crc-mismatch/00000000000000000049.snapshot", "error")[0]["message"]
    detail = got.problems["detail"][0].as_py()
    # "Stored crc: 851112875. Computed crc: 4125062002"
    for number in [w.rstrip(".") for w in want.split() if w.rstrip(".").isdigit()]:
        assert number in detail
    assert got.table.num_rows == 4


def test_torn_txn_index_is_reported_although_kafka_reads_it_as_empty():
    path = GOLDEN / "corrupt/txnindex-torn/00000000000000000031.txnindex"
    assert _expected(path, "aborted-txn") == []  # Kafka: silently no aborted transactions
    got = _parse(path)
    assert got.table.num_rows == 0
    assert got.problems["kind"].to_pylist() == ["txnindex_mismatch"]


@pytest.mark.parametrize("case", ["leader-epoch-epoch-decreasing", "leader-epoch-offset-decreasing"])
def test_leader_epoch_cache_view_matches_kafka_on_corrupt_files(case):
    path = GOLDEN / "corrupt" / case / "leader-epoch-checkpoint"
    got = _parse(path)
    assert got.table.num_rows == 3  # the file's entries, as written
    assert _cache_string(leader_epoch_checkpoint.kafka_cache_view(got.table)) == _expected(path, "leader-epoch-cache")[0]["entries"]


def test_partition_metadata_bad_id_detail_is_kafkas():
    got = _parse(GOLDEN / "corrupt/partition-metadata-bad-topic-id/partition.metadata")
    assert "Illegal base64 character 21" in got.problems["detail"][0].as_py()


def test_meta_properties_missing_node_id_detail_is_kafkas():
    got = _parse(GOLDEN / "corrupt/meta-properties-no-node-id/meta.properties")
    assert got.problems["detail"].to_pylist() == ["Failed to find node.id"]
    assert got.table.to_pylist()[0]["cluster_id"] == "R29sZGVuQ2x1c3RlcklkMA"


# ---- indexes against their segment (batches as Kafka's reader listed them) -----------------------

INDEXED_SEGMENTS = [
    p for p in SMALL_FILES if p.suffix in (".index", ".timeindex") and (EXPECTED / (_rel(p.with_suffix(".log")) + ".jsonl")).exists()
]


@pytest.mark.parametrize("path", INDEXED_SEGMENTS, ids=_rel)
def test_golden_index_entries_point_into_their_segment(path):
    batches, size = _batches(_rel(path.with_suffix(".log")))
    got = _parse(path)
    if path.suffix == ".index":
        problems = offset_index.verify_against_batches(got.table, batches, _rel(path), segment_size=size)
        # MANIFEST surprise 1: the entry's offset is the LAST offset of the append that started at
        # its position: of that one batch (golden-topic, v2), or of a later batch of the same
        # multi-message append (legacy-topic: 12-14 in one append gives (14 -> 567), which
        # kafka-dump-log --verify-index-only calls "Index offset: 14, log offset: 12")
        rows = batches.to_pylist()
        for r in got.table.to_pylist():
            assert any(b["position"] >= r["position"] and b["last_offset"] == r["offset"] for b in rows)
            if "golden-topic" in str(path):
                assert next(b for b in rows if b["position"] == r["position"])["last_offset"] == r["offset"]
    else:
        problems = time_index.verify_against_batches(got.table, batches, _rel(path))
    assert problems.schema == PROBLEM_SCHEMA
    assert problems.num_rows == 0, problems.to_pylist()


def test_index_entry_past_eof_is_found_against_the_segment():
    # Kafka's sanityCheck passes this file; kafka-dump-log dies on "Slice from position 2664 exceeds end position"
    index = _parse(GOLDEN / "corrupt/index-entry-past-eof/00000000000000000000.index")
    assert index.problems.num_rows == 0
    batches, size = _batches("logdir/golden-topic-0/00000000000000000000.log")
    problems = offset_index.verify_against_batches(index.table, batches, "x.index", segment_size=size).to_pylist()
    assert [(p["kind"], p["position"]) for p in problems] == [("index_mismatch", 24)]
    assert "2664" in problems[0]["detail"] and "1664" in problems[0]["detail"]


def test_non_monotonic_index_still_points_at_batches():
    # Kafka's --verify-index-only prints nothing for it: each entry still points at a real batch
    index = _parse(GOLDEN / "corrupt/index-non-monotonic/00000000000000000000.index")
    batches, size = _batches("logdir/golden-topic-0/00000000000000000000.log")
    assert offset_index.verify_against_batches(index.table, batches, "x.index", segment_size=size).num_rows == 0


def test_index_entry_at_wrong_batch_or_offset_is_a_mismatch():
    batches, size = _batches("logdir/golden-topic-0/00000000000000000000.log")
    good = _parse(GOLDEN / "logdir/golden-topic-0/00000000000000000000.index").table
    bad = good.set_column(good.schema.get_field_index("position"), "position", pa.array([352, 700, 1299, 1542], pa.int64()))
    bad = bad.set_column(bad.schema.get_field_index("offset"), "offset", pa.array([10, 18, 19, 99], pa.int64()))
    problems = offset_index.verify_against_batches(bad, batches, "x.index", segment_size=size).to_pylist()
    assert [p["position"] for p in problems] == [8, 16, 24]
    assert "no batch starts" in problems[0]["detail"]
    assert "below the base offset 24" in problems[1]["detail"]
    assert "no batch of the segment holds" in problems[2]["detail"]


def test_time_index_offset_outside_every_batch_is_a_mismatch():
    batches, _ = _batches("logdir/golden-topic-0/00000000000000000000.log")
    good = _parse(GOLDEN / "logdir/golden-topic-0/00000000000000000000.timeindex").table
    bad = good.set_column(good.schema.get_field_index("offset"), "offset", pa.array([10, 18, 26, 31], pa.int64()))
    problems = time_index.verify_against_batches(bad, batches, "x.timeindex").to_pylist()
    assert [(p["kind"], p["position"]) for p in problems] == [("timeindex_mismatch", 36)]
