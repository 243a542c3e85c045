"""Every named scenario: its files parse with exactly the problems its ground truth names, its
ground truth speaks the contract's vocabulary and agrees with the bytes and the ledger, and
Kafka's own kafka-dump-log reads its segments as the batches the simulator meant."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import REPO, SHARED, read_jsonl
from kafka_dump_log import parse_dump_text

from parsers.files import detect, parse_path
from sample_data.scenarios import RETOLD_BY_KAFKA4, SCENARIOS, generate, simulate

NAMES = sorted(SCENARIOS)
# at scale, the stories kafka4-benign and kafka4-incident tell again are judged there
JUDGED = sorted(set(SCENARIOS) - RETOLD_BY_KAFKA4)


def contract_kinds() -> set[str]:
    text = (SHARED / "docs" / "contract.md").read_text(encoding="utf-8")
    section = text.split("## Finding kinds", 1)[1].split("Must NOT", 1)[0]
    return set(re.findall(r"`([a-z_]+)`", section))


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("scenarios")
    return {name: generate(name, root) for name in NAMES}


def _truth(path: Path) -> dict:
    return json.loads((path / "ground_truth.json").read_text(encoding="utf-8"))


def _broker_files(path: Path):
    for f in sorted(path.rglob("*")):
        if f.is_file() and f.relative_to(path).parts[0].startswith("broker-"):
            yield f


def _contents(path: Path) -> dict[tuple[int, str, int], dict[int, tuple]]:
    """{(broker, topic, partition): {offset: (key sha, value sha)}} read back from the segments."""
    out: dict = defaultdict(dict)
    for f in _broker_files(path):
        if detect(str(f)) != "segment":
            continue
        rel = f.relative_to(path).parts
        topic, _, part = rel[1].rpartition("-")
        for parsed in parse_path(str(f), "segment", records=True):
            for r in parsed.extra["records"].to_pylist():
                if r["control_type"] is None:
                    out[(int(rel[0].split("-")[1]), topic, int(part))][r["offset"]] = (r["key_sha256"], r["value_sha256"])
    return out


@pytest.mark.parametrize("name", NAMES)
def test_parsers_find_exactly_the_problems_ground_truth_names(generated, name):
    path = generated[name]
    found = []
    for f in _broker_files(path):
        kind = detect(str(f))
        assert kind is not None, f
        for parsed in parse_path(str(f), kind):
            found += [(str(f.relative_to(path)), p["position"], p["kind"]) for p in parsed.problems.to_pylist()]
    expected = [(p["path"], p["position"], p["kind"]) for p in _truth(path)["expected_problems"]]
    assert sorted(found) == sorted(expected)


SCALED = {"brokers": 4, "partitions": 2, "codec": "zstd", "segment_bytes": 4096, "records": 400}


@pytest.fixture(scope="module")
def scaled(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("scaled")
    return {name: generate(name, root, seed=3, **SCALED) for name in JUDGED}


@pytest.mark.parametrize("name", JUDGED)
def test_scaled_scenarios_keep_their_story_and_exact_problems(scaled, name):
    """More brokers and partitions, compressed, small segments: the same story on partition 0,
    and still exactly the named problems in the files."""
    test_parsers_find_exactly_the_problems_ground_truth_names(scaled, name)
    test_each_story_produces_its_findings(scaled, name)
    test_losses_agree_with_the_bytes_and_the_ledger(scaled, name)


def test_too_small_a_cluster_is_refused(tmp_path):
    with pytest.raises(ValueError):
        generate("clean-failover", tmp_path, brokers=1)


@pytest.mark.parametrize("name", NAMES)
def test_ground_truth_speaks_the_contract(generated, name):
    from jobs.findings.registry import FINDING_KINDS

    truth = _truth(generated[name])
    # the contract's kinds, and ours that extend it (each documented in docs/findings.md,
    # test_docs_findings), until the contract lists them too
    kinds = contract_kinds() | set(FINDING_KINDS)
    assert truth["scenario"] == name and truth["events"]
    for f in truth["expected_findings"]:
        assert f["kind"] in kinds
        assert f["severity"] in ("error", "warning", "info")
        assert {"topic", "partition", "brokers", "first_offset", "last_offset", "records", "explanation"} <= set(f)
        if f["records"] is not None and f["last_offset"] is not None:
            assert f["records"] <= f["last_offset"] - f["first_offset"] + 1
    reported = {(f["kind"], f["topic"], f["partition"]) for f in truth["expected_findings"]}
    for m in truth["must_not_report"]:
        assert m["kind"] in kinds and m["why"]
        if "broker" in m:  # broker-level: no finding of that kind names this broker
            assert not any(f["kind"] == m["kind"] and m["broker"] in f["brokers"] for f in truth["expected_findings"])
        else:
            assert (m["kind"], m["topic"], m["partition"]) not in reported


STORIES = {  # the kinds each story must produce on its incident partition (partition 0, or broker-level)
    "clean-failover": set(),
    "kip-101-safe": set(),
    "benign-mix": {"unclean_shutdown"},
    "hw-two-fetch": {"acked_data_loss", "truncation_below_hw"},
    # pre-0.11 logs: no leader-epoch caches to disagree
    "kafka-1211-divergence": {"replica_divergence", "acked_data_loss", "truncation_below_hw"},
    "unclean-election": {"acked_data_loss", "truncation_below_hw", "unclean_leader_election", "consumer_read_lost_data"},
    "acks-all-min-isr-1": {"replica_divergence", "acked_data_loss", "unclean_leader_election", "unclean_shutdown"},
    "crash-lost-unflushed": {"replica_divergence", "acked_data_loss", "truncation_below_hw", "committed_data_lost_in_crash",
                             "unclean_shutdown"},
    "txn-marker-lost": {"replica_divergence", "unclean_leader_election", "transaction_marker_lost", "unclean_shutdown", "truncation_below_hw"},
    "torn-write": {"torn_tail", "unclean_shutdown"},
    "index-corruption": {"index_mismatch"},
    "double-failover-kip-279": {"replica_divergence", "acked_data_loss", "unclean_leader_election"},
    "txn-v2-upgrade": set(),
    "txn-v2-marker-lost": {"replica_divergence", "unclean_leader_election", "transaction_marker_lost", "unclean_shutdown",
                           "truncation_below_hw"},
    "kraft-controller-failover": set(),
    "kraft-controller-diverged": {"metadata_log_divergence"},
    "kafka4-benign": set(),
    # clicks-0 (a share group past an unclean election's loss), orders-0 (a lost TV2 marker), the controllers
    "kafka4-incident": {"acked_data_loss", "truncation_below_hw", "unclean_leader_election", "consumer_read_lost_data",
                        "replica_divergence", "transaction_marker_lost", "unclean_shutdown", "metadata_log_divergence"},
}


@pytest.mark.parametrize("name", NAMES)
def test_each_story_produces_its_findings(generated, name):
    kinds = {f["kind"] for f in _truth(generated[name])["expected_findings"] if f["partition"] in (0, None)}
    assert kinds == STORIES[name]


@pytest.mark.parametrize("name", NAMES)
def test_losses_agree_with_the_bytes_and_the_ledger(generated, name):
    path = generated[name]
    truth = _truth(path)
    held = _contents(path)
    ledger = read_jsonl(path / "ledger.jsonl")
    failed = read_jsonl(path / "ledger_failed.jsonl")
    assert all(r["offset"] is None for r in failed)
    losses = [f for f in truth["expected_findings"] if f["kind"] == "acked_data_loss"]
    for f in losses:
        tp = (f["topic"], f["partition"])
        rows = [r for r in ledger if (r["topic"], r["partition"]) == tp and f["first_offset"] <= r["offset"] <= f["last_offset"]]
        surviving = held[(f["surviving_broker"], *tp)]
        gone = [r for r in rows if surviving.get(r["offset"]) != (r["key_sha256"], r["value_sha256"])]
        assert len(gone) == f["records"]
        for b in f["salvage_brokers"]:
            assert all(held[(b, *tp)].get(r["offset"]) == (r["key_sha256"], r["value_sha256"]) for r in gone)
    if not losses and name != "benign-mix":  # benign-mix: compaction and aborts remove acked records by design
        for r in ledger:
            replicas = [v for (b, t, p), v in held.items() if (t, p) == (r["topic"], r["partition"])]
            assert any(v.get(r["offset"]) == (r["key_sha256"], r["value_sha256"]) for v in replicas), r


def _latest_epoch_start(path: Path, broker: int, topic: str, partition: int) -> tuple[int, int] | None:
    """(latest epoch, its start offset) as the replica's leader-epoch-checkpoint file has it."""
    f = path / f"broker-{broker}" / f"{topic}-{partition}" / "leader-epoch-checkpoint"
    entries = [e for parsed in parse_path(str(f), "leader_epoch") for e in parsed.table.to_pylist()] if f.is_file() else []
    return max(((e["epoch"], e["start_offset"]) for e in entries), default=None)


@pytest.mark.parametrize("name", NAMES)
def test_surviving_candidates_are_what_the_checkpoint_files_cannot_tell_apart(generated, name):
    """A loss's ``surviving_candidates``: the surviving broker plus every replica whose
    leader-epoch-checkpoint on disk ends with the same epoch starting no later (or, with no
    checkpoint at all, pre-0.11: every replica without one). Just the survivor: the files show it;
    several: only the metadata log could say (unclean-election: three identical replicas;
    hw-two-fetch, kafka-1211-divergence: two replicas without leader epochs)."""
    path = generated[name]
    truth = _truth(path)
    replicas = defaultdict(list)
    for b, v in truth["replicas"].items():
        for tp in v["partitions"]:
            topic, _, part = tp.rpartition("-")
            replicas[(topic, int(part))].append(int(b.split("-")[1]))
    for f in (f for f in truth["expected_findings"] if f["kind"] == "acked_data_loss"):
        tp = (f["topic"], f["partition"])
        mine = _latest_epoch_start(path, f["surviving_broker"], *tp)
        same = [b for b in replicas[tp] if (e := _latest_epoch_start(path, b, *tp)) == mine
                or (None not in (e, mine) and e[0] == mine[0] and e[1] <= mine[1])]
        assert f["surviving_candidates"] == sorted(same) and f["surviving_broker"] in same
    if name in ("hw-two-fetch", "kafka-1211-divergence"):
        assert [f["surviving_candidates"] for f in truth["expected_findings"] if f["kind"] == "acked_data_loss"] == [[1, 2]]
    if name == "unclean-election":
        assert [f["surviving_candidates"] for f in truth["expected_findings"] if f["kind"] == "acked_data_loss"] == [[1, 2, 3]]


@pytest.mark.parametrize("name", ["hw-two-fetch", "kafka-1211-divergence", "kip-101-safe"])
def test_pre_0_11_scenarios_write_message_sets_without_leader_epochs(generated, name):
    """The scenarios that truncate by high watermark are pre-0.11 Kafka: v1 message sets (no leader
    epoch in any batch) and no leader-epoch-checkpoint, so they test the HW-rule path; kip-101-safe,
    the same story with KIP-101, writes v2 batches and checkpoints."""
    path = generated[name]
    legacy = name != "kip-101-safe"
    batches = [row for f in _broker_files(path) if detect(str(f)) == "segment"
               for parsed in parse_path(str(f), "segment") for row in parsed.table.to_pylist()]
    assert batches and {b["magic"] for b in batches} == ({1} if legacy else {2})
    assert all((b["partition_leader_epoch"] is None) == legacy for b in batches)
    parts = [d for d in path.glob("broker-*/*-*") if d.is_dir()]
    assert parts and all((d / "leader-epoch-checkpoint").exists() != legacy for d in parts)
    truth = _truth(path)
    assert all(v["leader_epoch_checkpoint"] is None for b in truth["replicas"].values() for v in b["partitions"].values()) == legacy
    assert ("leader_epoch_conflict" in {f["kind"] for f in truth["expected_findings"]}) is False


def _dumped_segments(path: Path, name: str) -> tuple[list[Path], dict]:
    """The first and last undamaged segment of partition 0 of one broker of ``name``'s first topic,
    and the model's batches of that replica by base offset."""
    damaged = {p["path"] for p in _truth(path)["expected_problems"]}
    cluster, _, _ = simulate(name)
    topic = sorted({t for (_, t, _) in cluster.replicas})[0]
    broker = next(b for b in sorted(cluster.brokers) if (b, topic, 0) in cluster.replicas)
    logs = sorted((path / f"broker-{broker}" / f"{topic}-0").glob("*.log"))
    logs = [f for f in logs if str(f.relative_to(path)) not in damaged and f.stat().st_size]
    return sorted({logs[0], logs[-1]}), {b.base_offset: b for b in cluster.replica(broker, topic, 0).batches}


@pytest.fixture(scope="module")
def dumped(generated, dump_logs) -> dict[str, tuple[list[Path], dict, dict, dict]]:
    """Every scenario's segments (``_dumped_segments``) through kafka-dump-log in one JVM:
    {name: (segments, model batches, {segment: dump text}, {segment: exception})}."""
    picked = {name: _dumped_segments(generated[name], name) for name in NAMES}
    texts, errors = dump_logs([seg for segs, _ in picked.values() for seg in segs])
    return {name: (segs, model, texts, errors) for name, (segs, model) in picked.items()}


@pytest.mark.parametrize("name", NAMES)
def test_kafka_dump_log_reads_the_batches_the_model_meant(dumped, name):
    """kafka-dump-log on the first and last undamaged segment of partition 0 of one broker."""
    segs, model, texts, errors = dumped[name]
    by_offset = {o: b for b in model.values() for o in range(b.base_offset, b.last_offset + 1)}
    for seg in segs:
        assert str(seg) not in errors, errors.get(str(seg))
        kafka = next(iter(parse_dump_text(texts[str(seg)]).values()))
        assert kafka["trailing"] == 0 and kafka["batches"]
        for b in kafka["batches"]:
            assert b["isvalid"] == "true"
            if "baseOffset" not in b:  # a pre-0.11 message (magic 1): its offset, no leader epoch
                meant = by_offset[int(b["offset"])]
                assert b["magic"] == "1" and "partitionLeaderEpoch" not in b
                assert b["compresscodec"] == "none" or int(b["offset"]) == meant.last_offset
                continue
            meant = model[int(b["baseOffset"])]
            assert (int(b["lastOffset"]), int(b["partitionLeaderEpoch"])) == (meant.last_offset, meant.epoch)


def test_demo_generates_and_shows_the_ground_truth(tmp_path):
    import io

    from analyzer import demo

    out = io.StringIO()
    assert demo.run(tmp_path, ["torn-write"], stream=out, analyze=False) == 0  # the parser view only: no Spark here
    text = out.getvalue()
    assert "parser problems: torn_tail 1" in text and "unclean_shutdown" in text
    assert (tmp_path / "torn-write" / "ground_truth.json").is_file()


def test_demo_counts_scenarios_and_closes_with_a_table(tmp_path):
    import io

    from analyzer import demo

    out = io.StringIO()
    assert demo.run(tmp_path, ["torn-write", "clean-failover"], stream=out, analyze=False) == 0
    assert "== 1/2 torn-write" in out.getvalue() and "== 2/2 clean-failover" in out.getvalue()
    (tmp_path / "a.json").write_text(json.dumps({"summary": {"errors": 2, "warnings": 1}}))
    (tmp_path / "b.json").write_text(json.dumps({"summary": {"errors": 0, "warnings": 0, "infos": 0}}))
    (tmp_path / "c.json").write_text(json.dumps({"summary": {"errors": 0, "warnings": 0, "infos": 1}}))
    assert demo.verdict(tmp_path / "a.json") == "2 errors" and demo.verdict(tmp_path / "b.json") == "clean"
    assert demo.verdict(tmp_path / "c.json") == "clean (1 info)"  # benign-mix: its one finding is an unclean_shutdown
    table = demo.closing_table([("torn-write", "2 errors", "yes", "/x/report.html"), ("clean-failover", "clean", "NO", "/y/report.html")])
    lines = table.splitlines()
    assert lines[0].split() == ["scenario", "verdict", "matches", "truth", "report"]
    assert lines[1].split() == ["torn-write", "2", "errors", "yes", "/x/report.html"]
    assert lines[2].index("NO") == lines[1].index("yes"), "columns aligned"


def test_demo_cli_refuses_an_unknown_scenario(tmp_path):
    from typer.testing import CliRunner

    from analyzer.cli import app

    result = CliRunner().invoke(app, ["demo", "--out", str(tmp_path), "--scenario", "no-such-thing"])
    assert result.exit_code == 2


def test_demo_shows_a_range_without_a_record_count_as_offsets_only(tmp_path):
    """txn-marker-lost's transaction_marker_lost has offsets but no record count: the line shows
    the offsets, not '(None records)'."""
    import io

    from analyzer import demo

    out = io.StringIO()
    assert demo.run(tmp_path, ["txn-marker-lost"], stream=out, analyze=False) == 0  # the parser view only: no Spark here
    truth = _truth(tmp_path / "txn-marker-lost")
    [f] = [f for f in truth["expected_findings"] if f["records"] is None and f["last_offset"] is not None]
    [line] = [line for line in out.getvalue().splitlines() if f" {f['kind']} " in line]
    assert line.endswith(f"offsets {f['first_offset']}..{f['last_offset']}")
    assert "None" not in out.getvalue()


def test_the_demo_default_output_folder_is_ignored_by_git():
    """``kafka-forensics demo`` run from a checkout writes its default --out there: git must not offer it."""
    import subprocess

    import typer

    from analyzer.cli import app

    [out] = [p for p in typer.main.get_command(app).commands["demo"].params if p.name == "out"]
    probe = f"{out.default}/some-scenario/broker-1/meta.properties"
    result = subprocess.run(["git", "-C", str(REPO), "check-ignore", "--no-index", "-q", probe], capture_output=True)
    assert result.returncode == 0, f"{out.default}/ is not in .gitignore"


def test_demo_self_check_compares_the_surviving_log_and_salvage_brokers(generated, tmp_path):
    """The demo's check fails a loss that names a surviving broker the files cannot show (the lower
    broker id of three identical replicas), or the wrong salvage brokers; it passes the honest one."""
    import io

    from analyzer import demo

    truth = _truth(generated["unclean-election"])
    [loss] = [f for f in truth["expected_findings"] if f["kind"] == "acked_data_loss"]
    detectable = [f for f in truth["expected_findings"] if demo.detectable(f)]
    honest = {**loss, "brokers": [1, 2, 3], "surviving_broker": None, "salvage_brokers": []}
    cases = {"honest": (honest, True), "guessed": ({**honest, "surviving_broker": 1}, False),
             "salvage": ({**honest, "brokers": [1, 2, 3], "salvage_brokers": [3]}, True),
             "outsider": ({**honest, "brokers": [1, 2, 3, 4], "salvage_brokers": [4]}, False)}
    for label, (finding, ok) in cases.items():
        doc = tmp_path / f"{label}.json"
        doc.write_text(json.dumps({"findings": [f for f in detectable if f is not loss] + [finding]}), encoding="utf-8")
        out = io.StringIO()
        assert demo._compare(truth, doc, out) is ok, (label, out.getvalue())
        assert ("wrong brokers none" in out.getvalue()) is ok


def test_the_demo_lists_an_expected_point_finding_with_its_offset():
    """An unclean election's expected finding has a first offset (where the new leader's epoch
    starts) and no last one: the demo's list showed no offset at all for it."""
    from analyzer.demo import finding_line

    point = {"severity": "error", "kind": "unclean_leader_election", "topic": "clicks", "partition": 0, "brokers": [2],
             "first_offset": 120, "last_offset": None, "records": None}
    assert finding_line(point).endswith("brokers [2] from offset 120")
    span = point | {"kind": "acked_data_loss", "last_offset": 209, "records": 90}
    assert finding_line(span).endswith("brokers [2] offsets 120..209 (90 records)")
    assert finding_line(point | {"topic": None, "first_offset": None}).endswith("broker         brokers [2]")
