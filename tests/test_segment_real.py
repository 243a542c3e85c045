"""Segments written by real brokers: Kafka 3.6.2 (real-cluster, judged by its own kafka-dump-log
output in dumps/) and Kafka 0.10 to 4.1 from public repositories (found/, judged by MANIFEST.md)."""

from __future__ import annotations

import re

import pytest
from conftest import FOUND, REAL
from kafka_dump_log import parse_dump

from parsers import segment
from parsers.common import FileBytes

SCENARIOS = sorted(p for p in REAL.iterdir() if (p / "dumps").is_dir()) if REAL.is_dir() else []
TS_KEY = ("CreateTime", "LogAppendTime", "NoTimestampType")


def _parse(path, records=True):
    with FileBytes(path) as fb:
        return segment.parse(fb.data, str(path), records=records)


def _dump_sections():
    for scen in SCENARIOS:
        for dump in sorted((scen / "dumps").glob("*.txt")):
            for rel, sec in parse_dump(dump).items():
                yield pytest.param(scen, rel, sec, id=f"{scen.name}:{rel}")


@pytest.mark.parametrize("scen,rel,sec", list(_dump_sections()))
def test_real_cluster_segment_matches_kafka_dump_log(scen, rel, sec):
    got = _parse(scen / rel)
    batches = got.table.to_pylist()
    records = got.extra["records"].to_pylist()
    assert len(batches) == len(sec["batches"])
    for b, e in zip(batches, sec["batches"]):
        assert b["position"] == int(e["position"])
        assert b["size"] == int(e["size"])
        assert b["base_offset"] == int(e["baseOffset"])
        assert b["last_offset"] == int(e["lastOffset"])
        assert b["record_count"] == int(e["count"])
        assert b["crc"] == int(e["crc"])
        assert b["crc_valid"] == (e["isvalid"] == "true")
        assert b["codec"] == e["compresscodec"]
        assert b["producer_id"] == int(e["producerId"])
        assert b["producer_epoch"] == int(e["producerEpoch"])
        assert b["base_sequence"] == int(e["baseSequence"])
        assert b["last_sequence"] == int(e["lastSequence"])
        assert b["partition_leader_epoch"] == int(e["partitionLeaderEpoch"])
        assert b["is_transactional"] == (e["isTransactional"] == "true")
        assert b["is_control"] == (e["isControl"] == "true")
        key = next(k for k in TS_KEY if k in e)
        assert b["timestamp_type"] == {"CreateTime": "create", "LogAppendTime": "log_append"}[key]
        assert b["max_timestamp"] == int(e[key])
    assert len(records) == len(sec["records"])
    for r, e in zip(records, sec["records"]):
        key = next(k for k in TS_KEY if k in e)
        assert r["offset"] == int(e["offset"])
        assert r["timestamp"] == int(e[key])
        assert r["key_size"] == int(e["keySize"])
        assert r["value_size"] == int(e["valueSize"])
    assert got.problems.num_rows == sec["trailing"] == 0


def _all_segments(root):
    return sorted(p for p in root.rglob("*.log") if p.is_file()) + sorted(root.rglob("*-*.checkpoint"))


@pytest.mark.parametrize("scen", SCENARIOS, ids=lambda p: p.name)
def test_real_cluster_every_segment_parses_without_problems(scen):
    """Crash artifacts (0-byte segments, active segments of a killed broker) are not damage."""
    paths = [p for d in scen.iterdir() if d.name.startswith(("broker-", "controller-")) for p in _all_segments(d)]
    assert paths
    empty = 0
    for p in paths:
        got = _parse(p, records=True)
        assert got.problems.num_rows == 0, (p, got.problems.to_pylist())
        empty += p.stat().st_size == 0
    if scen.name == "crash-only":
        assert empty >= 1  # the 0-byte .log of a segment rolled just before the kill


FOUND_SETS = sorted(p for p in FOUND.iterdir() if p.is_dir()) if FOUND.is_dir() else []


def _manifest_batches():
    """dataset -> total batches from MANIFEST.md's table (the last column: '...; N batches')."""
    out = {}
    for line in (FOUND / "MANIFEST.md").read_text().splitlines():
        m = re.match(r"\| `([^`]+)` \|", line)
        if m:
            last = line.rstrip(" |").split("|")[-1]
            nums = re.findall(r"([\d ]+?) (?:v1 messages|batches)", last.replace("\u202f", " "))
            if nums:
                out[m.group(1)] = int(nums[0].replace(" ", ""))
    return out


@pytest.mark.parametrize("ds", FOUND_SETS, ids=lambda p: p.name)
def test_found_dataset_parses_cleanly_and_matches_manifest(ds):
    missing = set()
    if (ds / "MISSING.tsv").exists():
        missing = {line.split("\t")[0] for line in (ds / "MISSING.tsv").read_text().splitlines() if line and not line.startswith("#")}
    total = 0
    magics = set()
    snapshots = sorted(ds.rglob("*-*.checkpoint")) + sorted(ds.rglob("bootstrap.checkpoint"))
    for p in snapshots:  # KRaft metadata snapshots are record batches too
        got = _parse(p, records=True)
        assert got.problems.num_rows == 0, (p, got.problems.to_pylist())
        assert got.table.num_rows > 0 and set(got.table.column("magic").to_pylist()) == {2}
    if ds.name.startswith("kraft-snapshots"):
        assert len(snapshots) == 45 + 1  # 45 metadata snapshots + bootstrap.checkpoint
    for p in sorted(ds.rglob("*.log")):
        if str(p.relative_to(ds)) in missing:
            continue
        got = _parse(p, records=True)
        assert got.problems.num_rows == 0, (p, got.problems.to_pylist())
        total += got.table.num_rows
        magics |= set(got.table.column("magic").to_pylist())
        assert got.extra["records"].num_rows >= got.table.num_rows - int(sum(c == 0 for c in got.table.column("record_count").to_pylist()))
    expected = _manifest_batches().get(ds.name)
    if expected is not None and "kraft-snapshots" not in ds.name:
        assert total == expected
    if ds.name.startswith("k010"):
        assert magics == {1}
    elif total:
        assert magics == {2}
