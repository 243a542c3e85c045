"""The forensic jobs on data Kafka itself wrote: no false alarms, and the staged incidents found.

real-cluster: a Kafka 3.6.2 cluster with staged incidents and a ledger of acknowledged records
(../shared/fixtures/real-cluster/*/ground_truth.json). found: real broker dirs from public
repositories with no staged incident, where any error would be a false alarm.
"""

from __future__ import annotations

import json

import pytest
from conftest import FOUND, REAL

from analyzer.analyze import build

SCENARIOS = ["clean-failover", "crash-only", "unclean-election-divergence-rejoined"]
FOUND_SETS = sorted(p.name for p in FOUND.iterdir() if p.is_dir()) if FOUND.is_dir() else []


@pytest.fixture(scope="module")
def analyzed(spark, tmp_path_factory):
    cache: dict[str, dict] = {}

    def run(root, name: str, ledger: bool = True) -> dict:
        if name not in cache:
            src = root / name
            led = src / "ledger.jsonl" if ledger and (src / "ledger.jsonl").exists() else None
            out = tmp_path_factory.mktemp(name) / "out"
            doc = build([src], out, ledger=led, spark=spark, progress=False, register_catalog=False)
            on_disk = json.loads((out / "findings.json").read_text())
            assert on_disk["findings"] == doc["findings"], "findings.json must be what the jobs found"
            cache[name] = doc
        return cache[name]

    return run


def by_kind(doc: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in doc["findings"]:
        out.setdefault(f["kind"], []).append(f)
    return out


def test_clean_failover_reports_nothing(analyzed):
    doc = analyzed(REAL, "clean-failover")
    bad = [f for f in doc["findings"] if f["severity"] in ("error", "warning")]
    assert bad == []
    assert doc["summary"]["records_lost"] == 0


def test_crash_only_is_one_unclean_shutdown_of_broker_1(analyzed):
    doc = analyzed(REAL, "crash-only")
    assert [(f["kind"], f["severity"], f["brokers"]) for f in doc["findings"]] == [("unclean_shutdown", "info", [1])]
    details = " ".join(e["detail"] for e in doc["findings"][0]["evidence"])
    assert "recovery point 0 behind LEO" in details, "the recovery point lagging the LEO is the evidence"


def test_unclean_election_rejoined_loses_exactly_the_200_acked_records(analyzed):
    gt = json.loads((REAL / "unclean-election-divergence-rejoined" / "ground_truth.json").read_text())
    expected = next(a for a in gt["expected_anomalies"] if a["kind"] == "acked_data_loss")
    doc = analyzed(REAL, "unclean-election-divergence-rejoined")
    loss = by_kind(doc)["acked_data_loss"]
    assert len(loss) == 1
    f = loss[0]
    assert (f["topic"], f["partition"]) == (expected["topic"], expected["partition"])
    assert [f["first_offset"], f["last_offset"]] == expected["offsets"]
    assert f["records"] == expected["count"] == doc["summary"]["records_lost"]
    assert f["salvage_brokers"] == [], "the old leader truncated: no replica holds them any more"
    # replicas are identical again: no divergence, no unclean shutdown, no corruption
    assert not {"replica_divergence", "unclean_shutdown", "torn_tail", "crc_mismatch"} & set(by_kind(doc))


@pytest.mark.parametrize("name", FOUND_SETS)
def test_found_datasets_have_no_errors_or_warnings(analyzed, name):
    doc = analyzed(FOUND, name)
    assert [f for f in doc["findings"] if f["severity"] == "error"] == []
    warnings = [f for f in doc["findings"] if f["severity"] == "warning"]
    assert warnings == [], json.dumps(warnings, indent=1)[:2000]


def test_found_unclean_shutdown_only_where_the_marker_is_absent(analyzed):
    """k010 and k27 were collected without .kafka_cleanshutdown and with preallocated all-zero
    indexes (MANIFEST.md); every other found dataset has the marker."""
    flagged = set()
    for name in FOUND_SETS:
        doc = analyzed(FOUND, name)
        if any(f["kind"] == "unclean_shutdown" for f in doc["findings"]):
            flagged.add(name)
    markers = {name for name in FOUND_SETS if not any((FOUND / name).rglob(".kafka_cleanshutdown"))}
    assert flagged == markers
