"""Every sample-data scenario analyzed end to end: its ground truth found, its must-not list silent.

The ground truth comes from the simulator's event log (sample_data/sim/truth.py), not from our
jobs. A finding whose only evidence is the event log (what a server log line would show, e.g. the
moment a broker truncated) is optional here: the files and the ledger cannot show it (the timeline
issue brings broker logs and the metadata log). Everything else must match kind by kind.
"""

from __future__ import annotations

import json

import pytest

from analyzer.analyze import build
from sample_data.scenarios import SCENARIOS, generate

DETECTABLE = {"files", "ledger"}


@pytest.fixture(scope="module")
def scenario(spark, tmp_path_factory):
    cache: dict[str, tuple[dict, dict]] = {}

    def run(name: str) -> tuple[dict, dict]:
        if name not in cache:
            root = tmp_path_factory.mktemp(name)
            data = generate(name, root / "data")
            doc = build([data], root / "out", ledger=data / "ledger.jsonl", spark=spark, progress=False, register_catalog=False)
            cache[name] = (json.loads((data / "ground_truth.json").read_text()), doc)
        return cache[name]

    return run


def _replica_state(gt: dict, broker: int, topic: str, partition: int) -> dict | None:
    rep = gt["replicas"].get(f"broker-{broker}", {}).get("partitions", {}).get(f"{topic}-{partition}")
    if rep is None:
        return None
    return {k: rep[k] for k in ("leo", "leader_epoch_checkpoint", "batch_epoch_ranges", "log_start")}


def matches(found: dict, want: dict, gt: dict) -> bool:
    for k in ("kind", "topic", "partition", "first_offset", "last_offset", "records"):
        if want.get(k) is not None and found.get(k) != want[k]:
            return False
    if want.get("salvage_brokers") is not None and found["salvage_brokers"] != want["salvage_brokers"]:
        return False
    if found["brokers"] == want["brokers"]:
        return True
    if want["kind"] != "acked_data_loss":
        return False
    # The surviving log may sit on several replicas with identical files (an unclean election
    # followed by a rejoin leaves them byte-identical); naming either is right.
    mine = set(found["brokers"]) - set(found["salvage_brokers"])
    theirs = set(want["brokers"]) - set(want.get("salvage_brokers") or [])
    if len(mine) != 1 or len(theirs) != 1:
        return False
    a, b = _replica_state(gt, mine.pop(), want["topic"], want["partition"]), _replica_state(gt, theirs.pop(), want["topic"], want["partition"])
    return a is not None and a == b


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_ground_truth_found_exactly(scenario, name):
    gt, doc = scenario(name)
    found = doc["findings"]
    required = [w for w in gt["expected_findings"] if "event_log" not in w["evidence_sources"]]
    optional = [w for w in gt["expected_findings"] if "event_log" in w["evidence_sources"]]
    for want in required:
        hits = [f for f in found if matches(f, want, gt)]
        assert hits, f"{name}: missing {json.dumps(want)[:400]}\nfound: {json.dumps(found)[:3000]}"
        assert hits[0]["severity"] == want["severity"], (want["kind"], hits[0]["severity"])
    for f in found:
        assert any(matches(f, w, gt) for w in required + optional), f"{name}: not in the ground truth: {json.dumps(f)[:600]}"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_must_not_report_is_silent(scenario, name):
    gt, doc = scenario(name)
    for bad in gt["must_not_report"]:
        hits = [f for f in doc["findings"] if f["kind"] == bad["kind"] and f["topic"] == bad.get("topic")
                and (bad.get("partition") is None or f["partition"] == bad["partition"])
                and (not bad.get("brokers") or set(bad["brokers"]) & set(f["brokers"]))
                and (bad.get("broker") is None or bad["broker"] in f["brokers"])]
        assert not hits, f"{name}: reported {bad['kind']} although {bad['why']}"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_loss_equals_the_ledger(scenario, name):
    gt, doc = scenario(name)
    lost = sum(w["records"] for w in gt["expected_findings"] if w["kind"] == "acked_data_loss")
    assert doc["summary"]["records_lost"] == lost
