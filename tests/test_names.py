"""File kinds, base offsets and partition directory names, by Kafka's naming rules."""

from __future__ import annotations

import pytest
from conftest import FOUND, GOLDEN, REAL
from hypothesis import given
from hypothesis import strategies as st

from parsers.names import base_offset_from_name, detect_kind, parse_partition_dir


@pytest.mark.parametrize(
    "name,kind",
    [
        ("00000000000000000000.log", "segment"),
        ("00000000000000000031.index", "offset_index"),
        ("00000000000000000031.timeindex", "time_index"),
        ("00000000000000000031.txnindex", "txn_index"),
        ("00000000000000000049.snapshot", "producer_snapshot"),
        ("00000000000000392983-0000000002.checkpoint", "kraft_snapshot"),
        ("replication-offset-checkpoint", "replication_offset"),
        ("recovery-point-offset-checkpoint", "recovery_point"),
        ("log-start-offset-checkpoint", "log_start"),
        ("cleaner-offset-checkpoint", "cleaner"),
        ("leader-epoch-checkpoint", "leader_epoch"),
        ("partition.metadata", "partition_metadata"),
        ("meta.properties", "meta_properties"),
        (".kafka_cleanshutdown", "clean_shutdown"),
        ("quorum-state", "quorum_state"),
        ("bootstrap.checkpoint", "bootstrap_checkpoint"),
        (".lock", "lock"),
        ("00000000000000000000.log.deleted", "pending_delete"),
        ("00000000000000000000.index.deleted", "pending_delete"),
        ("00000000000000000049.snapshot.deleted", "pending_delete"),
        ("00000000000000000000.log.cleaned", "pending_clean"),
        ("00000000000000000000.timeindex.swap", "pending_swap"),
        ("00000000000000392983-0000000002.checkpoint.deleted", "pending_delete"),
        ("replication-offset-checkpoint.tmp", "pending_tmp"),
        ("123.log", "segment"),  # Kafka parses the digits before the first '.', whatever their count
        ("some/dir/00000000000000000000.index", "offset_index"),
        ("server.log", None),
        ("00000000000000000000.logx", None),
        ("99999999999999999999.log", None),  # beyond Long.MAX_VALUE
        ("foo.deleted", None),
        (".deleted", None),
        ("checkpoint", None),
        ("", None),
    ],
)
def test_detect_kind(name, kind):
    assert detect_kind(name) == kind


@pytest.mark.parametrize(
    "name,offset",
    [
        ("00000000000000000000.log", 0),
        ("00000000000000000049.snapshot", 49),
        ("00000000000000000031.txnindex", 31),
        ("00000000000000000031.log.deleted", 31),
        ("00000000000000000290.index.swap", 290),
        ("00000000000000392983-0000000002.checkpoint", 392983),
        ("leader-epoch-checkpoint", None),
        ("99999999999999999999.log", None),
        ("abc.log", None),
    ],
)
def test_base_offset_from_name(name, offset):
    assert base_offset_from_name(name) == offset


@pytest.mark.parametrize(
    "name,expected",
    [
        ("golden-topic-0", ("golden-topic", 0, "live")),
        ("__consumer_offsets-49", ("__consumer_offsets", 49, "live")),
        ("__cluster_metadata-0", ("__cluster_metadata", 0, "live")),
        ("my.topic-12", ("my.topic", 12, "live")),
        ("orders-3.5f2d0ae0c1b94b5c8f1c3f0e9a3b2c1d-delete", ("orders", 3, "delete")),
        ("my.topic-0.5f2d0ae0c1b94b5c8f1c3f0e9a3b2c1d-delete", ("my.topic", 0, "delete")),
        ("orders-3.5f2d0ae0c1b94b5c8f1c3f0e9a3b2c1d-future", ("orders", 3, "future")),
        ("orders-3.5f2d0ae0c1b94b5c8f1c3f0e9a3b2c1d-stray", ("orders", 3, "stray")),
        ("a-b-c-7", ("a-b-c", 7, "live")),
        ("topic-delete-0", ("topic-delete", 0, "live")),  # a topic named "topic-delete"
        ("topic--1", ("topic-", 1, "live")),  # split on the LAST '-'
        ("topic-+1", ("topic", 1, "live")),  # Integer.parseInt takes a '+'
        ("orders-3-delete", None),  # -delete without ".uniqueId"
        ("orders-x", None),
        ("orders-", None),
        ("-0", None),
        ("orders", None),
        ("orders-2147483648", None),  # not an int
        ("kafka-logs", None),
    ],
)
def test_parse_partition_dir(name, expected):
    assert parse_partition_dir(name) == expected


def test_every_file_in_a_fixture_log_dir_is_recognised():
    log_dirs = {m.parent for root in (GOLDEN / "logdir", FOUND, REAL) for m in root.rglob("meta.properties")}
    assert len(log_dirs) >= 20
    unknown = set()
    for log_dir in log_dirs:
        for p in log_dir.iterdir():
            if p.is_dir():
                assert parse_partition_dir(p.name) is not None, p
                unknown |= {f.name for f in p.iterdir() if detect_kind(f.name) is None}
            elif detect_kind(p.name) is None:
                unknown.add(p.name)
    assert unknown == set()


@given(st.text(max_size=80))
def test_names_never_raise(name):
    detect_kind(name)
    base_offset_from_name(name)
    parse_partition_dir(name)
