"""No bytes make a small-file parser raise, and the output always has the declared shape.

Random bytes exercise the early exits; the structured strategies (near-valid checkpoint text,
properties, snapshot headers, index entries with zero runs) reach the deep paths.
"""

from __future__ import annotations

import os
import struct

import crc32c
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from small_parsers import PARSERS

from parsers import (
    broker_log,
    clean_shutdown,
    leader_epoch_checkpoint,
    meta_properties,
    offset_checkpoint,
    offset_index,
    partition_metadata,
    producer_snapshot,
    time_index,
    transaction_index,
)
from parsers.common import PROBLEM_SCHEMA

SCHEMAS = {
    "offset_index": offset_index.SCHEMA,
    "time_index": time_index.SCHEMA,
    "txn_index": transaction_index.SCHEMA,
    "producer_snapshot": producer_snapshot.SCHEMA,
    "replication_offset": offset_checkpoint.SCHEMA,
    "recovery_point": offset_checkpoint.SCHEMA,
    "log_start": offset_checkpoint.SCHEMA,
    "cleaner": offset_checkpoint.SCHEMA,
    "leader_epoch": leader_epoch_checkpoint.SCHEMA,
    "partition_metadata": partition_metadata.SCHEMA,
    "meta_properties": meta_properties.SCHEMA,
    "clean_shutdown": clean_shutdown.SCHEMA,
    "broker_log": broker_log.SCHEMA,
}
NAMES = {
    "offset_index": "00000000000000000100.index",
    "time_index": "00000000000000000100.timeindex",
    "txn_index": "00000000000000000100.txnindex",
    "producer_snapshot": "00000000000000000100.snapshot",
    "replication_offset": "replication-offset-checkpoint",
    "recovery_point": "recovery-point-offset-checkpoint",
    "log_start": "log-start-offset-checkpoint",
    "cleaner": "cleaner-offset-checkpoint",
    "leader_epoch": "leader-epoch-checkpoint",
    "partition_metadata": "partition.metadata",
    "meta_properties": "meta.properties",
    "clean_shutdown": ".kafka_cleanshutdown",
    "broker_log": "server.log.gz",
}
KINDS = {
    "index_mismatch",
    "timeindex_mismatch",
    "txnindex_mismatch",
    "checkpoint_malformed",
    "leader_epoch_malformed",
    "producer_snapshot_corrupt",
    # broker logs
    "truncated_gzip",
    "corrupt_gzip",
    "trailing_garbage",
    "gzip_bomb",
    "not_log4j",
    "parser_error",
}
# KF_FUZZ_EXAMPLES=5000 for a long run
FUZZ = settings(max_examples=int(os.environ.get("KF_FUZZ_EXAMPLES", "150")), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check_all(data: bytes) -> None:
    assert set(PARSERS) == set(SCHEMAS)
    for kind, parser in PARSERS.items():
        _check(kind, parser(data, NAMES[kind]))
        _check(kind, parser(memoryview(data), NAMES[kind]))


def _check(kind: str, got) -> None:
    assert got.table.schema == SCHEMAS[kind]
    assert got.problems.schema == PROBLEM_SCHEMA
    assert set(got.problems["kind"].to_pylist()) <= KINDS
    assert all(p is not None and p >= 0 for p in got.problems["position"].to_pylist())
    assert all(d for d in got.problems["detail"].to_pylist())
    if "path" in got.table.column_names:  # (log_events rows carry a line number instead)
        assert set(got.table["path"].to_pylist()) <= {NAMES[kind]}


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes_never_raise(data):
    _check_all(data)


TOKENS = st.sampled_from(
    ["0", "1", "2", "-1", "+3", "007", "59x", "2147483648", "9223372036854775808", "-9223372036854775808",
     "topic", "a-b", " ", "  ", "\t", "\n", "\r", "\r\n", "\x0b", "\u00e9", "\ufeff", "\\", "\\u00e9", "\\u00", "\\n",
     "#", "!", "=", ":", ": ", "version", "version=1", "node.id=1", "broker.id=2", "cluster.id=x",
     "directory.id=R29sZGVuTG9nRGlySWQwMA", "version: 0", "topic_id: ", "R29sZGVuVG9waWNJZDAwMA",
     "AAAAAAAAAAAAAAAAAAAAAA", "!R29s", "{", "}", '"version"', '"brokerEpoch"', "12", "null", "[", "]", ","]
)


@FUZZ
@given(st.lists(TOKENS, max_size=40).map("".join))
def test_near_valid_text_never_raises(text):
    _check_all(text.encode("utf-8"))
    _check_all(text.encode("latin-1", errors="replace"))


@FUZZ
@given(
    st.integers(-2, 3),
    st.integers(-3, 6),
    st.lists(st.binary(min_size=46, max_size=46), max_size=5),
    st.binary(max_size=50),
    st.booleans(),
)
def test_snapshot_headers_never_raise(version, count, entries, tail, good_crc):
    body = struct.pack(">i", count) + b"".join(entries) + tail
    crc = crc32c.crc32c(body) if good_crc else 0xDEADBEEF
    data = struct.pack(">hI", version, crc) + body
    got = producer_snapshot.parse(data, NAMES["producer_snapshot"])
    _check("producer_snapshot", got)
    if version == 1 and good_crc and 0 <= count == len(entries) and not tail:
        assert got.problems.num_rows == 0 and got.table.num_rows == count


ENTRY8 = st.one_of(st.just(b"\0" * 8), st.binary(min_size=8, max_size=8))
ENTRY12 = st.one_of(st.just(b"\0" * 12), st.binary(min_size=12, max_size=12))
ENTRY34 = st.one_of(st.just(b"\0" * 34), st.binary(min_size=34, max_size=34))


@FUZZ
@given(st.lists(ENTRY8, max_size=20), st.lists(ENTRY12, max_size=20), st.lists(ENTRY34, max_size=6), st.binary(max_size=11))
def test_index_entries_never_raise(e8, e12, e34, torn):
    _check("offset_index", offset_index.parse(b"".join(e8) + torn[:7], NAMES["offset_index"]))
    _check("time_index", time_index.parse(b"".join(e12) + torn, NAMES["time_index"]))
    _check("txn_index", transaction_index.parse(b"".join(e34) + torn, NAMES["txn_index"]))


@FUZZ
@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**40), 2**40)), max_size=8))
def test_index_verification_never_raises(entries):
    data = b"".join(struct.pack(">ii", r, p % (2**31)) for r, p in entries)
    index = offset_index.parse(data, NAMES["offset_index"]).table
    batches = pa.table(
        {
            "position": pa.array([0, 100, 250], pa.int64()),
            "base_offset": pa.array([100, 103, 110], pa.int64()),
            "last_offset": pa.array([102, 109, 110], pa.int64()),
        }
    )
    assert offset_index.verify_against_batches(index, batches, "x", segment_size=300).schema == PROBLEM_SCHEMA
    tindex = time_index.parse(data + data[:4], NAMES["time_index"]).table
    assert time_index.verify_against_batches(tindex, batches, "x").schema == PROBLEM_SCHEMA
    empty = batches.slice(0, 0)
    assert offset_index.verify_against_batches(index, empty, "x").schema == PROBLEM_SCHEMA
    assert time_index.verify_against_batches(tindex, empty, "x").schema == PROBLEM_SCHEMA


def test_preallocated_index_of_zeros_has_no_entries_and_no_problems():
    for parse, size in ((offset_index.parse, 8 * 1000), (time_index.parse, 12 * 1000)):
        got = parse(b"\0" * size, "00000000000000000100.index")
        assert got.table.num_rows == 0 and got.problems.num_rows == 0
        assert got.extra["index_info"]["padding_entries"][0].as_py() == 1000


def test_zeroed_hole_before_real_entries_is_a_problem():
    data = struct.pack(">ii", 5, 300) + b"\0" * 8 + struct.pack(">ii", 9, 700) + b"\0" * 16
    got = offset_index.parse(data, "00000000000000000100.index")
    assert got.table["is_padding"].to_pylist() == [False, True, False]
    assert got.extra["index_info"]["padding_entries"][0].as_py() == 2
    assert [(p["kind"], p["position"]) for p in got.problems.to_pylist()] == [("index_mismatch", 8)]


LINE_TOKENS = st.sampled_from(["0", "1", "-1", "+3", "007", "59x", "2147483647", "2147483648", "-2147483648", "-2147483649",
                               "9223372036854775807", "9223372036854775808", "1_0", "topic", "a-b", " ", "  ", "\t", "\x0b",
                               "\f", "\u00a0", "\u00e9", "\u0663", ""])


@FUZZ
@given(st.lists(st.lists(LINE_TOKENS, max_size=6).map("".join), max_size=12))
def test_few_lines_parse_as_the_whole_column_way(entry_lines):
    """A checkpoint of a few lines is split and converted line by line (``FEW_LINES``); that way
    must give the rows and problems of the Arrow whole-column way, for every kind of entry."""
    from parsers import checkpoint_file

    for schema, kind in ((leader_epoch_checkpoint.SCHEMA, "leader_epoch_malformed"), (offset_checkpoint.SCHEMA, "checkpoint_malformed")):
        few = checkpoint_file.entries_table(entry_lines, schema, "p", "k", kind)
        limit = checkpoint_file.FEW_LINES
        checkpoint_file.FEW_LINES = -1
        try:
            whole = checkpoint_file.entries_table(entry_lines, schema, "p", "k", kind)
        finally:
            checkpoint_file.FEW_LINES = limit
        assert few[0].equals(whole[0]), (few[0].to_pylist(), whole[0].to_pylist())
        assert few[1] == whole[1]
