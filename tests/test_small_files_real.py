"""Small files written by real brokers must parse with zero problems.

found/: Kafka 0.10 to 4.1+ log dirs from public repositories (byte-for-byte copies);
real-cluster/: Kafka 3.6.2 brokers and a KRaft controller, including one killed with kill -9
(preallocated 10 MiB indexes, a 0-byte snapshot and checkpoints). None of these files is
damaged, so every problem reported here would be a false positive. Files listed in a
dataset's MISSING.tsv were never collected and are absent on disk.
(Index entries against their segments are checked with the segment parser, elsewhere.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FOUND, REAL
from small_parsers import PARSERS

from parsers._index import padding_entries
from parsers.common import FileBytes
from parsers.leader_epoch_checkpoint import kafka_cache_view
from parsers.names import detect_kind, parse_partition_dir


def _missing(dataset: Path) -> set[Path]:
    listing = dataset / "MISSING.tsv"
    if not listing.exists():
        return set()
    rows = [line.split("\t") for line in listing.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    return {dataset / r[0] for r in rows}


def _node_dirs() -> list[Path]:
    dirs = sorted(p for p in FOUND.iterdir() if p.is_dir()) if FOUND.is_dir() else []
    if REAL.is_dir():
        for scenario in sorted(p for p in REAL.iterdir() if p.is_dir()):
            dirs += sorted(p for p in scenario.iterdir() if p.is_dir() and p.name.startswith(("broker-", "controller-")))
    return dirs


NODE_DIRS = _node_dirs()


def _small_files(root: Path) -> list[Path]:
    missing = _missing(root)
    return [p for p in sorted(root.rglob("*")) if p.is_file() and p not in missing and detect_kind(p.name) in PARSERS]


def _parse(path: Path):
    with FileBytes(path) as fb:
        return PARSERS[detect_kind(path.name)](fb.data, str(path))


def _id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


def test_real_data_is_present():
    assert len(NODE_DIRS) >= 7 + 3 * 4


@pytest.mark.parametrize("root", NODE_DIRS, ids=_id)
def test_real_small_files_have_no_problems(root):
    files = _small_files(root)
    assert files, f"no small files under {root}"
    failures = []
    for path in files:
        got = _parse(path)
        if got.problems.num_rows:
            failures.append((str(path.relative_to(root)), got.problems.to_pylist()))
    assert failures == []


@pytest.mark.parametrize("root", NODE_DIRS, ids=_id)
def test_real_partition_dirs_parse(root):
    for d in (p for p in root.rglob("*") if p.is_dir() and (p / "leader-epoch-checkpoint").exists()):
        parsed = parse_partition_dir(d.name)
        assert parsed is not None and parsed[2] == "live", d


@pytest.mark.parametrize("root", NODE_DIRS, ids=_id)
def test_real_leader_epoch_files_are_what_the_cache_keeps(root):
    # a healthy checkpoint is written from LeaderEpochFileCache, so replaying it changes nothing
    for path in root.rglob("leader-epoch-checkpoint"):
        table = _parse(path).table
        cache = kafka_cache_view(table)
        assert cache.to_pylist() == table.select(["epoch", "start_offset"]).to_pylist(), path


def test_crashed_broker_indexes_are_padding_not_problems():
    broker = REAL / "crash-only" / "broker-1"
    if not broker.is_dir():
        pytest.skip("real-cluster/crash-only not present")
    meta_index = _parse(broker / "__cluster_metadata-0" / "00000000000000000000.index")
    assert meta_index.problems.num_rows == 0
    assert meta_index.extra["index_info"]["file_size"][0].as_py() == 10 * 1024 * 1024
    assert meta_index.table.num_rows + padding_entries(meta_index) == 10 * 1024 * 1024 // 8
    active = _parse(broker / "tc-0" / "00000000000000000290.index")
    assert padding_entries(active) > 0 and active.problems.num_rows == 0
    snapshot = _parse(broker / "tc-2" / "00000000000000000290.snapshot")  # 0 bytes: killed right after a roll
    assert snapshot.table.num_rows == 0 and snapshot.problems.num_rows == 0


def test_clean_shutdown_markers_of_every_era():
    epochs = {}
    for root in NODE_DIRS:
        for path in root.rglob(".kafka_cleanshutdown"):
            row = _parse(path).table.to_pylist()[0]
            epochs[str(path.relative_to(path.parents[2]))] = (row["version"], row["broker_epoch"])
    assert epochs["kraft-nomanazeem/kafka-logs/.kafka_cleanshutdown"] == (0, 12)
    assert epochs["kraft-snapshots-duongnvt2110/kraft-combined-logs/.kafka_cleanshutdown"] == (0, 428)
    assert epochs["k3x-zk-3brokers-shubhamdixit863/kafka-logs-1/.kafka_cleanshutdown"] == (0, -1)
    assert epochs["k31-zk-aryanjadon/kafka-logs/.kafka_cleanshutdown"] == (None, None)  # empty: pre-3.7


def test_meta_properties_of_every_era():
    rows = {}
    for root in NODE_DIRS:
        for path in root.rglob("meta.properties"):
            rows[str(path.relative_to(path.parents[2]))] = _parse(path).table.to_pylist()[0]
    old = rows["k010-zk-v1-bullshit/kafka-logs/meta.properties"]
    assert (old["version"], old["node_id"], old["cluster_id"]) == (0, 0, None)
    kraft = rows["kraft-nomanazeem/kafka-logs/meta.properties"]
    assert (kraft["version"], kraft["node_id"], kraft["directory_id"]) == (1, 1, "WvVzx-Xl3swcqvxXsPbjww")
