"""A small scope compared on the driver (``jobs.replicas.local_diffs``, issue 35's diverging case):
the divergent ranges and the lost committed ranges are the rows the Spark comparison gives, on
every scenario where replicas differ and on every shape of difference the writer makes (whole batches forked, batches
partly the same, a follower behind, a high watermark inside a batch, aborted transactions, logs
without leader epochs), and telling them runs no Spark job."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_batch_diffs import ingested  # noqa: F401 (the deep partitions' fixture)

from analyzer.analyze import build
from sample_data.scenarios import generate

# (every scenario whose replicas differ: forked by a crash, an aborted transaction's lost marker, a
# double failover, KAFKA-1211 without leader epochs, acks=all with min.insync.replicas=1, Kafka 4's incident)
SCENARIOS = ["crash-lost-unflushed", "txn-marker-lost", "double-failover-kip-279", "kafka-1211-divergence", "acks-all-min-isr-1",
             "kafka4-incident"]


@pytest.fixture(scope="module")
def analyzed(spark, tmp_path_factory):
    """Each input analyzed once, without its ledger (the HW's evidence alone: what the driver tells)."""
    outs: dict[str, Path] = {}

    def run(name: str) -> Path:
        if name not in outs:
            root = tmp_path_factory.mktemp(name)
            data = generate(name, root / "data")
            build([data], root / "out", spark=spark, progress=False, register_catalog=False)
            outs[name] = root / "out"
        return outs[name]

    return run


def case_of(spark, out: Path, monkeypatch, local: int):
    """The case of ``out`` as the detectors read it, compared on the driver up to ``local`` records in scope."""
    from jobs.findings import case as case_module
    from jobs.store.io import read_table

    monkeypatch.setattr(case_module, "LOCAL_SCOPE_RECORDS", local)
    case = case_module.Case(spark, out, {n: case_module.input_table(spark, out, n) for n in case_module.INPUT_TABLES})
    for name in ("replica_logs", "metadata_events", "epoch_lineage", "offset_ranges"):
        setattr(case, name, read_table(spark, out, name))
    return case


def plain(row, lost: bool) -> dict:
    """A range as comparable values: sets sorted (Spark's come in its hash order), and for a lost
    range held by several replicas, which holder's file names it left out (Spark's names the first
    row's, the driver's the smallest holder's)."""
    d = {k: v for k, v in row.asDict(recursive=True).items() if k != "_island"}
    for k, v in d.items():
        if isinstance(v, list):
            d[k] = sorted(v, key=repr)
    if lost and len(d["holders"]) > 1:
        d.pop("path"), d.pop("position")
    return d


def both_ways(spark, out: Path, monkeypatch) -> tuple[list, list, list, list]:
    from jobs.findings.committed import committed_ranges

    rows = []
    for local in (1 << 62, -1):
        case = case_of(spark, out, monkeypatch, local)
        try:
            assert (case.local_comparison is not None) == (local > 0)
            rows.append(([plain(r, False) for r in case.ranges], sorted((plain(r, True) for r in committed_ranges(case)), key=repr)))
        finally:
            case.close()
    (ranges, lost), (spark_ranges, spark_lost) = rows
    return ranges, lost, spark_ranges, spark_lost


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_driver_tells_the_ranges_spark_tells(spark, analyzed, monkeypatch, name):
    ranges, lost, spark_ranges, spark_lost = both_ways(spark, analyzed(name), monkeypatch)
    assert ranges or lost, f"{name}: nothing differs, so nothing is compared"
    assert ranges == spark_ranges
    assert lost == spark_lost


def test_the_driver_tells_whole_and_partial_batches_and_a_follower_behind_as_spark(spark, ingested, monkeypatch):  # noqa: F811
    ranges, lost, spark_ranges, spark_lost = both_ways(spark, ingested, monkeypatch)
    # (forked in 0, 1 and 3; 2's follower is behind; committed records lost in 0, 1 and 3)
    assert sorted({r["partition"] for r in ranges}) == [0, 1, 3]
    assert sorted({r["partition"] for r in lost}) == [0, 1, 3]
    assert ranges == spark_ranges
    assert lost == spark_lost


def test_a_small_scope_is_compared_with_no_spark_job(spark, analyzed, monkeypatch):
    from jobs.findings.committed import committed_ranges

    case = case_of(spark, analyzed("crash-lost-unflushed"), monkeypatch, 1 << 62)
    try:
        assert case.survivors and case.scope  # (the surviving logs read the metadata log: jobs of their own)
        tracker = spark.sparkContext.statusTracker()
        before = tracker.getJobIdsForGroup(None)
        assert case.ranges and committed_ranges(case) is not None
        assert tracker.getJobIdsForGroup(None) == before
    finally:
        case.close()


def test_a_scope_past_the_bound_is_left_to_spark(spark, analyzed, monkeypatch):
    case = case_of(spark, analyzed("crash-lost-unflushed"), monkeypatch, 0)
    try:
        assert sum(case.scope_records.values()) > 0
        assert case.local_comparison is None and case.ranges
    finally:
        case.close()


def test_a_ranges_producers_read_in_id_and_epoch_order_whatever_order_the_set_came_in():
    from pyspark.sql import Row

    from jobs.findings.divergence import divergence_findings

    keys = [Row(producer_id=6001, producer_epoch=0), Row(producer_id=6001, producer_epoch=1), Row(producer_id=6000, producer_epoch=32767)]

    def finding(order: list) -> list[tuple]:
        side = {"epochs": [3], "bytes": 10, "path": "p", "position": 0, "first_ts": 1, "last_ts": 2, "producer_keys": order, "min_seq": 0,
                "max_seq": 5}
        row = Row(topic="t", partition=0, broker_a=1, broker_b=2, status="divergent", first_offset=0, last_offset=9, offsets=10,
                  **{f"{k}_{s}": v for s in "ab" for k, v in side.items()})
        return [(p["producer_id"], p["producer_epoch"]) for p in divergence_findings([row])[0].producers]

    assert finding(keys) == finding(keys[::-1]) == [(6000, 32767), (6001, 0), (6001, 1)]


@pytest.mark.parametrize("seed", range(12))
def test_the_driver_finds_every_difference_of_random_logs_above_where_they_agree(seed):
    """Four replicas of random logs (``test_batch_runs``' comparison of the whole logs, told one
    record at a time): 1 leads, 2 lags and holds a batch twice, 3 forked in its tail, 4 holds 1's
    batches in other files. Above where all agree, the driver's unshared batches and record diffs
    give exactly every difference of the whole logs, pair by pair. Odd seeds give the replicas
    negative broker ids too (the ids discovery gives unnamed log dirs: -1, -2, …)."""
    import random

    import pyarrow as pa
    from test_batch_runs import _arrow_runs, _records, _reference_diffs, _replica, random_batches

    from jobs.replicas import compare, local_diffs
    from jobs.store.tables import schema_of

    rng = random.Random(seed)
    log = random_batches(rng, 80)
    one, two, three, four = (1, 2, 3, 4) if seed % 2 == 0 else (-1, 5, -3, 2)
    files = {(one, "1/0.log"): log, (two, "2/0.log"): log[:70], (two, "2/1.log"): [log[60]],
             (three, "3/0.log"): log[:50] + _replica(rng, log[50:], crc_change=0.6, content_change=0.7),
             (four, "4/0.log"): log[:20], (four, "4/1.log"): log[20:]}
    common = {"log_dir": "d", "topic": "t", "partition": 0, "dir_state": "live", "segment_base_offset": 0, "file_kind": "segment"}
    bs, rs = schema_of("batches"), schema_of("records")
    batches = pa.Table.from_pylist([{f.name: {**common, "broker": b, "path": p, **r}.get(f.name) for f in bs}
                                    for (b, p), rows in files.items() for r in rows], schema=bs)
    records = pa.Table.from_pylist([{f.name: r.get(f.name) for f in rs} for r in _records(files)], schema=rs)
    replicas = [{"topic": "t", "partition": 0, "broker": b, "dir_state": "live"} for b in (one, two, three, four)]
    scope = compare.comparison_scope(compare.agreed_prefixes(_arrow_runs(files).to_pylist(), replicas), replicas)
    some, recs, names = local_diffs.prepared(batches.filter(local_diffs._scope_filter(scope, "base_offset")),
                                             records.filter(local_diffs._scope_filter(scope, "offset")), markers=False)
    brokers = local_diffs.Brokers(scope, names["topic"])
    d = local_diffs.record_diffs(local_diffs.unshared(some, brokers), recs, brokers)

    def path(code):
        return None if code is pd.NA else names["path"][code]

    got = sorted(zip(d["broker_a"], d["broker_b"], d["offset"], d["status"], map(path, d["path_a"]), map(path, d["path_b"]), strict=True),
                 key=str)
    assert [tuple(int(v) if isinstance(v, np.integer) else v for v in row) for row in got] == _reference_diffs(files)


def test_lost_ranges_are_numbered_per_partition_and_take_any_hw_checkpoint():
    """The lost ranges' ``_island`` counts from 1 in each partition, as ``offset_ranges.islands``
    numbers them; a replica without an HW checkpoint (None) beside one of 2^62 reads as Spark's
    long column (no float, no error)."""
    from jobs.replicas import local_diffs
    from jobs.replicas.survivors import Survivor

    def diff(partition: int, offset: int) -> dict:
        side = {"path": 0, "position": 0, "epoch": 1, "producer_id": -1, "producer_epoch": -1, "base_sequence": -1,
                "is_transactional": False, "is_control": False, "aborted": False, "timestamp_ms": 5, "content": 1, "size": 10}
        return {"topic": 0, "partition": partition, "broker_a": 1, "broker_b": 2, "offset": offset, "status": "only_a",
                **{f"{k}_a": v for k, v in side.items()}, **{f"{k}_b": None for k in side}}

    diffs = pd.DataFrame([diff(0, 7), diff(0, 9), diff(1, 3)])
    for c in diffs.columns:
        if c.endswith("_b") and c != "broker_b":
            diffs[c] = pd.array(diffs[c], dtype="Int64" if c not in ("is_transactional_b", "is_control_b", "aborted_b") else "boolean")
    survivor = {"broker": 2, "log_start_offset": 0, "compacted": False}
    survivors = {("t", p): Survivor(broker=2, candidates=[survivor], epoch=1, why="") for p in (0, 1)}
    replicas = [{"topic": "t", "partition": p, "broker": b, "hw_checkpoint": hw} for p in (0, 1) for b, hw in ((1, 1 << 62), (2, None))]
    rows = local_diffs.committed_ranges(diffs, survivors, replicas, {"topic": ["t"], "path": ["p"]})
    assert [(r["partition"], r["first_offset"], r["last_offset"], r["_island"], r["holder_hw"]) for r in rows] == [
        (0, 7, 7, 1, 1 << 62), (0, 9, 9, 2, 1 << 62), (1, 3, 3, 1, 1 << 62)]
