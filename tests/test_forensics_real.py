"""The forensic jobs on data Kafka itself wrote: no false alarms, and the staged incidents found.

real-cluster: a Kafka 3.6.2 cluster with staged incidents and a ledger of acknowledged records
(../shared/fixtures/real-cluster/*/ground_truth.json). found: real broker dirs from public
repositories with no staged incident, where any error would be a false alarm.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import FOUND, REAL

from analyzer.analyze import build
from jobs.replicas.epoch_lineage import leadership_events, logged_leaders, topic_names
from jobs.store.io import declared_schema, read_table, table_path

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
            outs[name] = out
        return cache[name]

    outs: dict[str, Path] = {}
    run.outs = outs
    return run


def table(out: Path, name: str) -> list[dict]:
    return pq.read_table(out / "tables" / name).to_pylist()


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


# --- history: the metadata log, broker logs, the timeline (issue 10) ---------------------------

def _gt(name: str) -> dict:
    return json.loads((REAL / name / "ground_truth.json").read_text())


def test_rejoined_unclean_election_is_found_in_the_metadata_log(analyzed):
    name = "unclean-election-divergence-rejoined"
    exp = next(a for a in _gt(name)["expected_anomalies"] if a["kind"] == "unclean_leader_election")
    doc = analyzed(REAL, name)
    got = by_kind(doc)["unclean_leader_election"]
    assert len(got) == 1, got
    f = got[0]
    assert (f["topic"], f["partition"], f["leader_epochs"], f["first_offset"]) == (
        exp["topic"], exp["partition"], [exp["leader_epoch"]], exp["epoch_start_offset"])
    assert exp["new_leader"] in f["brokers"] and set(exp["isr_before"]) <= set(f["brokers"])
    assert f["severity"] == "error"
    assert any("__cluster_metadata" in (e["path"] or "") for e in f["evidence"]), f["evidence"]


def test_rejoined_old_leader_truncated_below_its_hw(analyzed):
    name = "unclean-election-divergence-rejoined"
    exp = next(a for a in _gt(name)["expected_anomalies"] if a["kind"] == "truncation_below_hw")
    doc = analyzed(REAL, name)
    got = [f for f in by_kind(doc).get("truncation_below_hw", []) if f["brokers"] == [exp["broker"]]]
    assert len(got) == 1, by_kind(doc).get("truncation_below_hw")
    f = got[0]
    assert (f["topic"], f["partition"]) == (exp["topic"], exp["partition"])
    assert (f["first_offset"], f["last_offset"] + 1, f["records"]) == (exp["truncated_to"], exp["hw_checkpoint_before"], exp["count"])
    # the acked loss is still counted once
    assert doc["summary"]["records_lost"] == exp["count"]


_BROKER_EVENT = {1: "fenced", -1: "unfenced"}  # BrokerRegistrationChangeRecord.fenced


@pytest.mark.parametrize("name", SCENARIOS)
def test_metadata_events_match_the_leadership_history(analyzed, name):
    gt = _gt(name)
    analyzed(REAL, name)
    out = analyzed.outs[name]
    events = {e["meta_offset"]: e for e in table(out, "metadata_events")}
    brokers = {e["meta_offset"]: e for e in table(out, "broker_events")}
    checked = 0
    for h in gt["leadership_history"]:
        if h["type"].startswith("PARTITION"):
            e = events[h["meta_offset"]]
            assert (e["topic"], e["partition"], e["leader"], e["leader_epoch"], e["isr"], e["replicas"], e["partition_epoch"]) == (
                h["topic"], h["partition"], h["leader"], h["leaderEpoch"], h["isr"], h["replicas"], h["partitionEpoch"]), (h, e)
            if "leaderRecoveryState" in h:
                assert e["leader_recovery_state"] == h["leaderRecoveryState"]
                assert e["election"] == ("unclean" if h["leaderRecoveryState"] == 1 else e["election"])
        else:
            b = brokers[h["meta_offset"]]
            assert b["node"] == h["broker"]
            if h["type"] == "REGISTER_BROKER_RECORD":
                assert b["event"] == "registered", (h, b)
            elif h.get("inControlledShutdown") == 1:
                assert b["event"] == "controlled_shutdown", (h, b)
            elif h["fenced"] in _BROKER_EVENT:
                assert b["event"] == _BROKER_EVENT[h["fenced"]], (h, b)
        checked += 1
    assert checked == len(gt["leadership_history"]) > 5
    # clean elections only, except the staged unclean one
    unclean = [e for e in events.values() if e["election"] == "unclean"]
    assert len(unclean) == (1 if name == "unclean-election-divergence-rejoined" else 0)


@pytest.mark.parametrize("name", SCENARIOS)
def test_timeline_tells_each_partition_story_in_order(analyzed, name):
    gt = _gt(name)
    analyzed(REAL, name)
    rows = table(analyzed.outs[name], "timeline")
    assert rows
    by_part: dict[tuple, list[dict]] = {}
    for r in rows:
        by_part.setdefault((r["topic"], r["partition"]), []).append(r)
    for part_rows in by_part.values():
        times = [r["time"] for r in part_rows if r["time"] is not None]
        assert times == sorted(times), "rows are in time order"
    # every partition record of the leadership history is on its partition's timeline, in order
    for (topic, part) in {(h["topic"], h["partition"]) for h in gt["leadership_history"] if h["type"].startswith("PARTITION")}:
        want = [h["meta_offset"] for h in gt["leadership_history"] if h.get("topic") == topic and h.get("partition") == part]
        got = [r["seq"] for r in by_part[(topic, part)] if r["source"] == "metadata" and r["node"] is None]
        assert [o for o in got if o in want] == want
        assert {r["source"] for r in by_part[(topic, part)]} >= {"metadata", "leader_epoch", "broker_log"}
    flagged = [r for r in rows if r["severity"] == "error"]
    if name == "unclean-election-divergence-rejoined":
        assert any(r["election"] == "unclean" and r["leader_epoch"] == 2 and r["source"] == "metadata" for r in flagged)
    else:
        assert flagged == []


@pytest.mark.parametrize("name", [n for n in FOUND_SETS if n.startswith("kraft")])
def test_found_kraft_metadata_decodes_without_parser_errors(analyzed, name):
    analyzed(FOUND, name)
    out = analyzed.outs[name]
    recs = table(out, "metadata_records")
    assert recs, "the metadata log / snapshots decode into rows"
    assert not [p for p in table(out, "problems") if p["kind"] == "parser_error"]
    for r in recs:
        assert r["known"] or r["raw_hex"], "an unknown record is kept raw"


@pytest.mark.parametrize("name", SCENARIOS)
def test_report_shows_each_partition_timeline_in_order(analyzed, name):
    """The report analyze wrote (no Spark to re-render): each partition of the scenario has its
    timeline in time order, and the HTML carries it under the partition."""
    from analyzer.report.data import load

    gt = _gt(name)
    analyzed(REAL, name)
    out = analyzed.outs[name]
    data = load(out)
    parts = {(h["topic"], h["partition"]) for h in gt["leadership_history"] if h["type"].startswith("PARTITION")}
    assert parts and parts <= set(data.timeline)
    for key in parts:
        rows = data.timeline[key]
        times = [r["time"] for r in rows if r["time"] is not None]
        assert times == sorted(times) and len(times) >= 5
        meta = [r["seq"] for r in rows if r["source"] == "metadata" and r["node"] is None]  # partition events, not broker ones
        want = [h["meta_offset"] for h in gt["leadership_history"] if (h.get("topic"), h.get("partition")) == key]
        assert [m for m in meta if m in want] == want
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Timeline" in html
    unclean = [r for rows in data.timeline.values() for r in rows if r["election"] == "unclean" and r["source"] == "metadata"]
    assert len(unclean) == (1 if name == "unclean-election-divergence-rejoined" else 0)


def _history_leaders(gt: dict) -> dict[tuple, int]:
    """(topic, partition, leader epoch) -> leader, from the ground truth's leadership history."""
    return {(h["topic"], h["partition"], h["leaderEpoch"]): h["leader"] for h in gt["leadership_history"]
            if h["type"].startswith("PARTITION") and h["leader"] >= 0}


def test_rejoined_lineage_names_each_epochs_leader_from_the_metadata_log(analyzed):
    """The three replicas hold the same checkpoint (epoch 0 at 0, 2 at 300) and the same batches:
    the files cannot tell who led epoch 2; the metadata log says broker 2 (the unclean election),
    and the surviving log is broker 2's, which leads epoch 4."""
    name = "unclean-election-divergence-rejoined"
    led = _history_leaders(_gt(name))
    doc = analyzed(REAL, name)
    rows = [r for r in table(analyzed.outs[name], "epoch_lineage") if r["topic"] == "ue"]
    assert {r["leader_epoch"] for r in rows} == {0, 2, 4}
    for r in rows:
        assert (r["likely_leader"], r["leader_evidence"]) == (led[("ue", 0, r["leader_epoch"])], "metadata_log"), r
    assert {r["likely_leader"] for r in rows if r["leader_epoch"] == 2} == {2}
    [loss] = by_kind(doc)["acked_data_loss"]
    assert loss["surviving_broker"] == 2 and "metadata log" in loss["explanation"]


def test_rejoined_leaders_from_the_broker_logs_alone(analyzed, spark):
    """Without the metadata log's records, the controller's and the brokers' own lines (``Leader ue-0
    … starts at leader epoch 2``, ``UNCLEAN partition change … leader: -1 -> 2``) name the same
    leaders, for the epochs they cover."""
    name = "unclean-election-divergence-rejoined"
    led = _history_leaders(_gt(name))
    analyzed(REAL, name)
    out = analyzed.outs[name]
    meta, logs = leadership_events(read_table(spark, out, "metadata_events"), read_table(spark, out, "log_events"))
    names = topic_names(meta.collect())  # topic ids -> names only
    got = {(r["topic"], r["partition"], r["leader_epoch"]): (r["leader"], r["leader_evidence"])
           for r in logged_leaders([], logs.collect(), names) if r["topic"] == "ue"}
    # the collected logs end before epoch 4 was elected: they name the leaders of epochs 0 and 2
    assert got == {k: (v, "broker_log") for k, v in led.items() if k[2] in (0, 2)}
    assert got[("ue", 0, 2)] == (2, "broker_log")


# Spark jobs the job tables of the real crash-only collection may take (each is a query's stage:
# planning, code generation, scheduling, ~0.1 s whatever its rows). 47 before the lineage, its
# logged leaders and the timeline's epoch rows were decided on the driver from collected rows;
# 38 before the small frames came back in one query and the small tables were written by pyarrow
# (issue 35 item 3: the tables' two stages took 23, then 9; the timeline takes 10); 19 before
# replica_logs, the epoch starts and offset_ranges were computed on the driver from batch_runs and
# the other small tables (the two stages now take 3: the metadata log's events and the leadership
# rows; the timeline 9).
JOB_TABLE_JOBS = 12
TABLE_STAGES_JOBS = 3  # "jobs: replica logs, metadata log" and "jobs: epoch lineage, offset ranges"
# The replica comparison of crash-only (three partitions whose replicas differ): the runs that
# scope it, the unshared batches with their transaction outcome, the record diffs and their
# divergent ranges, all on the driver (``jobs.replicas.local_diffs``: a scope this small). 28 when
# the scope was joined as broadcasts, the replica pairs read from replica_logs, the offset windows
# collected first and each side joined apart; 7 while the runs were collected by Spark rather than
# read by the driver; 6 while Spark compared the scope.
COMPARISON_JOBS = 0


def spark_jobs_so_far(spark) -> int:
    """The next Spark job id of the session (the status tracker's): how many jobs it ran so far."""
    ids = spark.sparkContext.statusTracker().getJobIdsForGroup(None)
    return max(ids) + 1 if ids else 0


def test_job_tables_of_a_small_collection_take_few_spark_jobs(analyzed, spark):
    """The fixed cost of the jobs phase (issue 35): the job tables of a 0.4 MB collection, counted
    in Spark jobs (the status tracker's job ids; nothing else runs in the session meanwhile)."""
    from jobs.findings.case import Case
    from jobs.history import metadata

    analyzed(REAL, "crash-only")
    out = analyzed.outs["crash-only"]
    next_job = partial(spark_jobs_so_far, spark)

    starts: dict[str, int] = {}
    before = next_job()
    case = Case.open(spark, out, stage=lambda name: starts.setdefault(name, next_job()))  # (the timeline written here too: no pool)
    try:
        jobs = next_job() - before
        before = next_job()
        assert case.differing and case.ranges == []  # (replicas that differ, none diverged)
        comparison = next_job() - before
    finally:
        case.close()
    assert jobs <= JOB_TABLE_JOBS, f"{jobs} Spark jobs for the job tables of crash-only"
    assert comparison <= COMPARISON_JOBS, f"{comparison} Spark jobs for the replica comparison of crash-only"
    tables = starts["jobs: timeline"] - starts["jobs: replica logs, metadata log"]
    assert tables <= TABLE_STAGES_JOBS, f"{tables} Spark jobs for the job tables before the timeline"
    # broker_events, decided on the driver, as the Spark query it replaces describes the records
    spark_rows = metadata.broker_events(read_table(spark, out, "metadata_records")).collect()
    assert sorted(map(tuple, read_table(spark, out, "broker_events").collect()), key=repr) == sorted(map(tuple, spark_rows), key=repr)
    assert len(spark_rows) > 0
    assert {r["kind"] for r in table(out, "offset_ranges")} == {"data"}


def test_job_tables_are_computed_on_the_driver_without_a_spark_job(analyzed, spark):
    """The job tables but the metadata log's and the timeline (replica_logs, epoch_lineage,
    offset_ranges) are computed on the driver from ingest's small tables (batch_runs: a few rows
    per segment), so a collection with no metadata log and no broker log runs no Spark job for
    them, whatever its depth (issue 35: on a deep healthy partition their ~8 Spark jobs over nine
    runs were most of the jobs phase); the tables read back as Spark wrote them."""
    from jobs.findings.case import Case
    from jobs.replicas import offset_ranges, replica_logs

    analyzed(FOUND, "k20-zk-william0423")
    out = analyzed.outs["k20-zk-william0423"]
    next_job = partial(spark_jobs_so_far, spark)
    starts: dict[str, int] = {}
    case = Case.open(spark, out, stage=lambda name: starts.setdefault(name, next_job()))
    try:
        assert starts["jobs: timeline"] - starts["jobs: replica logs, metadata log"] == 0
        for name, schema in (("replica_logs", replica_logs.SCHEMA), ("offset_ranges", offset_ranges.SCHEMA)):
            assert declared_schema(table_path(out, name), name) == schema  # (the Spark schema in the footer, where Spark writes it)
        assert len(case.replicas) == len(table(out, "replica_logs")) > 0
        assert {r["kind"] for r in table(out, "offset_ranges")} >= {"data"}
    finally:
        case.close()


def test_a_collection_without_a_metadata_log_has_its_metadata_tables_empty_in_spark_schema(analyzed, spark):
    """No KRaft metadata log (a ZooKeeper cluster): metadata_events and broker_events are written
    empty without Spark, and read back in the schema the Spark queries give them (as Spark reads
    files back: every column nullable)."""
    from jobs.history import metadata

    analyzed(FOUND, "k20-zk-william0423")
    out = analyzed.outs["k20-zk-william0423"]
    records = read_table(spark, out, "metadata_records")
    for name, df in (("metadata_events", metadata.metadata_events(records, False)), ("broker_events", metadata.broker_events(records))):
        got = read_table(spark, out, name)
        assert table(out, name) == [] and [(f.name, f.dataType.simpleString()) for f in got.schema.fields] == [
            (f.name, f.dataType.simpleString()) for f in df.schema.fields], name


# Spark jobs of every detector but divergence (the replica comparison's room) on crash-only, with
# the findings and restart_preview writes: 45 before the detectors were folded (one aggregate over
# producers' batches for duplicate sequences and pending transactions, one over batch_runs per
# segment and epoch, the history decided on the driver from two queries, no pass over an empty
# input table, small tables and the findings read and written by pyarrow). Loss's 3 are its read
# of the record-level comparison. 13 before the segments' epochs were grouped on the driver; 11
# before the producers' epochs were decided on the driver from ingest's producer_epoch_sums; 10
# before the index entries were read only for indexes whose index_files row points past the segment.
DETECTOR_JOBS = 9


def test_detectors_of_a_small_collection_take_few_spark_jobs(analyzed, spark):
    """The fixed cost of the detectors (issue 35 item 3), counted in Spark jobs as above; the
    comparison the divergence detector computes (and loss reads) is paid before counting."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from jobs.findings import divergence
    from jobs.findings.case import Case
    from jobs.findings.kinds import LOSS_KINDS
    from jobs.findings.model import finalize, to_rows
    from jobs.findings.registry import DETECTORS
    from jobs.replicas import restart_preview
    from jobs.store.io import write_local_table
    from jobs.store.tables import FINDINGS_SCHEMA, RESTART_PREVIEW_SCHEMA

    analyzed(REAL, "crash-only")
    out = analyzed.outs["crash-only"]
    next_job = partial(spark_jobs_so_far, spark)

    case = Case.open(spark, out)
    try:
        found = divergence.find(case)
        before = next_job()
        found += [f for d in DETECTORS if d is not divergence for f in d.find(case)]
        findings = finalize(found)
        write_local_table(out, "findings", to_rows(findings), from_arrow_schema(FINDINGS_SCHEMA))
        write_local_table(out, "restart_preview", restart_preview.build_rows(case, [f for k in LOSS_KINDS for f in findings if f.kind == k]),
                   from_arrow_schema(RESTART_PREVIEW_SCHEMA))
        jobs = next_job() - before
    finally:
        case.close()
    assert jobs <= DETECTOR_JOBS, f"{jobs} Spark jobs for the detectors of crash-only"
    assert [f.kind for f in findings] == ["unclean_shutdown"]
