"""Job transforms alone: small createDataFrame inputs, whole expected frames (schema included)
compared with pyspark.testing.assertDataFrameEqual (row order ignored). The end-to-end tests
(test_forensics_*) run the same transforms on real Kafka bytes."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.testing import assertDataFrameEqual

from jobs.replicas import offset_ranges
from jobs.replicas.ledger import lost_ledger_rows
from jobs.replicas.survivors import SURVIVORS_SCHEMA, Survivor, survivors_frame
from jobs.store.tables import schema_of


def batches(spark, rows: list[dict]):
    """A batches table (its real schema) with only the columns a test cares about filled."""
    schema = from_arrow_schema(schema_of("batches"))
    base = {"dir_state": "live", "file_kind": "segment", "is_control": False, "size": 100}
    return spark.createDataFrame([{**{f.name: None for f in schema.fields}, **base, **r} for r in rows], schema)


def batch_runs(spark, b):
    """The batch_runs table of a batches frame, each file one piece (as ingest sums them)."""
    from jobs.ingest.batch_runs import runs_of
    from parsers.segment import BATCH_SCHEMA

    rows = [r.asDict() for r in b.collect()]
    own = ("broker", "log_dir", "topic", "partition", "dir_state", "path", "segment_base_offset", "file_kind")
    files: dict[tuple, list[dict]] = {}
    for r in rows:
        files.setdefault(tuple(r[c] for c in own), []).append(r)
    out = []
    for key, rs in files.items():
        t = pa.Table.from_pylist([{f.name: r[f.name] for f in BATCH_SCHEMA} for r in rs], schema=BATCH_SCHEMA)
        out += [{**dict(zip(own, key)), **run} for run in runs_of(t).to_pylist()]
    schema = schema_of("batch_runs")
    return spark.createDataFrame(pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in out], schema=schema).to_pandas(),
                                 from_arrow_schema(schema))


def test_islands_number_runs_of_consecutive_offsets(spark):
    df = spark.createDataFrame([("t", 0, o) for o in (0, 1, 2, 5, 6, 9)] + [("t", 1, o) for o in (3, 4)],
                               "topic string, partition int, offset long")
    want = spark.createDataFrame([("t", 0, 0, 1), ("t", 0, 1, 1), ("t", 0, 2, 1), ("t", 0, 5, 2), ("t", 0, 6, 2), ("t", 0, 9, 3),
                                  ("t", 1, 3, 1), ("t", 1, 4, 1)], "topic string, partition int, offset long, _island long")
    assertDataFrameEqual(offset_ranges.islands(df, ["topic", "partition"]), want)


def test_islands_of_ranges_also_break_where_a_column_changes(spark):
    df = spark.createDataFrame([(0, 4, 0), (5, 9, 0), (10, 14, 1), (20, 24, 1)], "first long, last long, epoch int")
    got = offset_ranges.islands(df, [], start="first", end="last", same=["epoch"], name="run")
    want = spark.createDataFrame([(0, 4, 0, 1), (5, 9, 0, 1), (10, 14, 1, 2), (20, 24, 1, 3)],
                                 "first long, last long, epoch int, run long")
    assertDataFrameEqual(got, want)


def test_offset_ranges_split_by_epoch_and_explain_holes(spark):
    b = batches(spark, [
        {"topic": "t", "partition": 0, "broker": 1, "path": "a.log", "position": 0, "base_offset": 0, "last_offset": 9,
         "record_count": 10, "partition_leader_epoch": 0},
        {"topic": "t", "partition": 0, "broker": 1, "path": "a.log", "position": 100, "base_offset": 10, "last_offset": 19,
         "record_count": 10, "partition_leader_epoch": 1},
        {"topic": "t", "partition": 0, "broker": 1, "path": "b.log", "position": 0, "base_offset": 25, "last_offset": 29,
         "record_count": 5, "partition_leader_epoch": 1},
        {"topic": "t", "partition": 0, "broker": 1, "path": "b.log", "position": 100, "base_offset": 30, "last_offset": 30,
         "record_count": 1, "partition_leader_epoch": 1, "is_control": True},
        # not part of a replica's log: a -delete dir
        {"topic": "t", "partition": 0, "broker": 1, "path": "c.log", "position": 0, "base_offset": 40, "last_offset": 49,
         "record_count": 10, "partition_leader_epoch": 1, "dir_state": "deleted"},
    ])
    rl = spark.createDataFrame([("t", 0, 1, False, 0)], "topic string, partition int, broker int, compacted boolean, log_start_offset long")
    runs = batch_runs(spark, b)
    on_driver = offset_ranges.local_build(runs.toArrow(), rl.toArrow())  # what a run computes where no runs overlap
    got = offset_ranges.build({"batches": b, "batch_runs": runs}, rl, [])  # (the Spark path, no replica's runs overlapping)
    schema = ("topic string, partition int, broker int, first_offset long, last_offset long, leader_epoch int, kind string, "
              "reason string, at_segment_boundary boolean, records long, bytes long, path string, position long")
    want = spark.createDataFrame([
        ("t", 0, 1, 0, 9, 0, "data", None, None, 10, 100, "a.log", 0),
        ("t", 0, 1, 10, 19, 1, "data", None, None, 10, 100, "a.log", 100),
        ("t", 0, 1, 25, 30, 1, "data", None, None, 5, 200, "b.log", 0),  # control records hold an offset, not data
        ("t", 0, 1, 20, 24, None, "hole", "unexplained", True, 0, 0, "b.log", 0),
    ], schema)
    assertDataFrameEqual(got, want)
    assertDataFrameEqual(spark.createDataFrame(on_driver.to_pandas(), schema), want)


def test_ledger_rows_the_surviving_log_lacks_or_holds_otherwise(spark):
    replica = {"broker": 2, "log_start_offset": 1, "compacted": False}
    survivors = {("t", 0): Survivor(broker=2, candidates=[replica], epoch=1, why="test")}
    survivors_df = survivors_frame(spark, survivors)
    assertDataFrameEqual(survivors_df, spark.createDataFrame([("t", 0, 2, 1, False, 1)], SURVIVORS_SCHEMA))
    ledger = spark.createDataFrame([("t", 0, o, "k", v) for o, v in ((0, "v0"), (1, "v1"), (2, "v2"), (3, "v3"))],
                                   "topic string, partition int, offset long, key_sha256 string, value_sha256 string")
    held = spark.createDataFrame([("t", 0, 2, 1, "k", "v1"), ("t", 0, 2, 2, "k", "other"), ("t", 0, 1, 3, "k", "v3")],
                                 "topic string, partition int, broker int, offset long, key_sha256 string, value_sha256 string")
    got = lost_ledger_rows(ledger, held, survivors_df).select("topic", "partition", "offset", "survivor", "status")
    # offset 0: below the survivor's log start (retention), never lost; 1: held as acknowledged;
    # 2: held with another value; 3: only broker 1 (not the survivor) holds it
    want = spark.createDataFrame([("t", 0, 2, 2, "divergent"), ("t", 0, 3, 2, "missing")],
                                 "topic string, partition int, offset long, survivor int, status string")
    assertDataFrameEqual(got, want)


def test_each_finding_kind_is_declared_once_with_a_known_severity():
    from jobs.findings.registry import DETECTORS, FINDING_KINDS
    from jobs.findings.severity import SEVERITIES

    declared = [kind for d in DETECTORS for kind in d.FINDING_KINDS]
    assert len(declared) == len(set(declared)) == len(FINDING_KINDS), sorted(k for k in declared if declared.count(k) > 1)
    assert set(FINDING_KINDS.values()) <= set(SEVERITIES)
    assert all(callable(d.find) for d in DETECTORS)


def test_timeline_keeps_each_log_line_whole(spark):
    """The controller's real "UNCLEAN partition change" line (over 300 characters) reaches the
    timeline whole, down to the class that logged it; it used to end mid-sentence."""
    import gzip

    from conftest import REAL

    from jobs.history.timeline import _log_rows
    from parsers.broker_log import parse_file

    log = REAL / "unclean-election-divergence-rejoined" / "server-logs" / "node-100-controller.log.gz"
    table = parse_file(str(log)).table
    table = table.append_column("path", pa.array([log.name] * table.num_rows, pa.string()))
    lines = gzip.open(log, "rt", encoding="utf-8").read().splitlines()
    rows = _log_rows(spark.createDataFrame(table.to_pandas())).where("event = 'unclean_election'").collect()
    long = [r for r in rows if len(lines[r["position"] - 1]) > 300]
    assert long, "the controller logs its unclean partition change in a line over 300 characters"
    for r in rows:
        assert r["detail"] == lines[r["position"] - 1].rstrip()


def test_collected_rows_do_not_depend_on_how_a_table_was_split(spark):
    """A table read back from its files comes biggest file first, not in the order it was written:
    the rows the detectors build evidence and finding ids from are sorted by value."""
    from jobs.store.io import collected

    rows = [(3, "c", [1]), (1, None, None), (2, "b", [2, 1]), (1, "a", [0])]
    a = spark.createDataFrame(rows, "n int, s string, l array<int>").repartition(3)
    b = spark.createDataFrame(list(reversed(rows)), "n int, s string, l array<int>").coalesce(1)
    assert [tuple(r) for r in collected(a)] == [tuple(r) for r in collected(b)] == [
        (1, "a", [0]), (1, None, None), (2, "b", [2, 1]), (3, "c", [1])]


def test_share_start_offsets_replay_snapshots_updates_and_tombstones(spark):
    """``views.share_starts`` is ShareCoordinatorShard.replay: a snapshot replaces the state, an
    update moves the start offset unless it says -1 (null) and its batches override the offsets
    they cover, a tombstone forgets the share-partition; then, as SharePartition loads it, the
    start moves over the acknowledged (2) or archived (4) batches that follow it without a gap."""
    from jobs.history.views import share_starts

    schema = from_arrow_schema(schema_of("share_group_state"))
    acked, archived, available = 2, 4, 0
    rows = [  # (partition, offset, type, start offset, tombstone, broker, state batches)
        (0, 0, "share_snapshot", None, False, 1, []), (0, 1, "share_update", 40, False, 1, []),
        (0, 2, "share_update", None, False, 1, []),  # -1: unchanged, 40 stays
        (1, 3, "share_snapshot", 10, False, 1, []), (1, 4, "share_update", 30, False, 1, []),
        (1, 5, "share_snapshot", 20, False, 1, []),  # a new snapshot: 20, whatever came before
        (2, 6, "share_snapshot", 50, False, 1, []), (2, 7, "share_snapshot", None, True, 1, []),  # deleted
        (3, 8, "share_snapshot", None, False, 1, []),  # initialized, not started
        (4, 9, "share_snapshot", 70, False, 2, []), (4, 9, "share_snapshot", 70, False, 1, []),  # two replicas
        # what real Kafka 4.1.1 wrote for 60 records consumed: start 0, one acknowledged batch 0-59
        (5, 10, "share_snapshot", None, False, 1, []), (5, 11, "share_update", 0, False, 1, [(0, 59, acked)]),
        # acknowledged, then archived, then a later update releasing 105-109: done up to 105
        (6, 12, "share_snapshot", 100, False, 1, [(100, 104, acked), (105, 119, archived), (121, 130, acked)]),
        (6, 13, "share_update", None, False, 1, [(105, 109, available)]),
        # a gap after the acknowledged batch: the start stops at the gap
        (7, 14, "share_snapshot", 200, False, 1, [(200, 209, acked), (215, 220, acked)]),
    ]
    df = spark.createDataFrame([{**{f.name: None for f in schema.fields}, "group": "g", "topic_id": "T", "partition": p,
                                 "offset": o, "record_type": t, "start_offset": s, "tombstone": d, "broker": b,
                                 "path": f"broker-{b}/__share_group_state-0/00000000000000000000.log", "batch_position": o * 100,
                                 "state_batches": [{"first_offset": a, "last_offset": z, "delivery_state": st, "delivery_count": 1}
                                                   for a, z, st in bs]}
                                for p, o, t, s, d, b, bs in rows], schema)
    got = {(r["partition"], r["start_offset"], r["acknowledged_to"], r["batch_position"], r["broker"]) for r in share_starts(df)}
    assert got == {(0, 40, 40, 200, 1), (1, 20, 20, 500, 1), (4, 70, 70, 900, 1), (5, 0, 60, 1100, 1), (6, 100, 105, 1300, 1),
                   (7, 200, 210, 1400, 1)}


def _txn_batches():
    """Transactions v2 on one replica: producer 7's sequences start at 0 in every epoch (each marker
    one epoch above its data), at 32766 its COMMIT carries 32767 and producer 8 goes on from epoch 0;
    producer 8's first transaction is aborted, its second has no marker (lost); producer 3 (v0) keeps
    epoch 0 and its sequences run on; and producer 9 really wrote one batch twice."""
    def data(o, pid, epoch, seq, n=10):
        return {"topic": "t", "partition": 0, "broker": 1, "base_offset": o, "last_offset": o + n - 1, "producer_id": pid,
                "producer_epoch": epoch, "base_sequence": seq, "last_sequence": seq + n - 1, "is_transactional": True,
                "record_count": n, "path": "p", "position": o}

    def marker(o, pid, epoch, control):
        return {**data(o, pid, epoch, -1, 1), "base_sequence": -1, "last_sequence": -1, "is_control": True, "control": control}

    return [data(0, 7, 32765, 0), data(10, 3, 0, 0), marker(20, 7, 32766, "commit"), marker(21, 3, 0, "commit"),
            data(22, 7, 32766, 0), data(32, 3, 0, 10), marker(42, 7, 32767, "commit"), marker(43, 3, 0, "abort"),
            data(44, 8, 0, 0), marker(54, 8, 1, "abort"), data(55, 8, 1, 0), data(65, 9, 4, 0), data(75, 9, 4, 0)]


def test_sequences_restarting_at_every_transactions_v2_epoch_are_no_duplicate_sequence(spark):
    from jobs.findings.producers import duplicate_sequence_findings

    rows = [{k: v for k, v in r.items() if k != "control"} for r in _txn_batches()]
    [f] = duplicate_sequence_findings(batches(spark, rows))
    assert (f.producers[0]["producer_id"], f.producers[0]["producer_epoch"], f.first_offset, f.last_offset) == (9, 4, 65, 75)


def test_one_aggregate_per_producer_epoch_names_the_suspect_sequences_and_the_pending_transactions(spark):
    """``producers.producer_epochs``: only producer 9's epoch, which wrote a batch twice, and
    producer 5's, whose sequences skip 10-19 (compaction: looked at batch by batch, no finding),
    are suspect; the sequences restarting at every transactions v2 epoch chain. Producers 8 and 9
    have transactional data after their last marker (8's markers one epoch above their data; 9 has
    none), 7 and 3 none (7's markers too are one epoch above its data)."""
    from jobs.findings.producers import duplicate_sequence_findings, producer_epochs
    from jobs.findings.transactions import pending_producers

    gap = [{"topic": "t", "partition": 0, "broker": 1, "base_offset": o, "last_offset": o + 9, "producer_id": 5, "producer_epoch": 0,
            "base_sequence": seq, "last_sequence": seq + 9, "is_transactional": False, "record_count": 10, "path": "p", "position": o}
           for o, seq in ((80, 0), (90, 20))]
    rows = [{k: v for k, v in r.items() if k != "control"} for r in _txn_batches()] + gap
    got = producer_epochs(batches(spark, rows)).collect()
    assert {(r["producer_id"], r["producer_epoch"]) for r in got if r["suspect"]} == {(9, 4), (5, 0)}
    assert sorted(pending_producers(got)) == [("t", 0, 1, 8), ("t", 0, 1, 9)]
    assert duplicate_sequence_findings(batches(spark, gap)) == []


def test_aborted_data_under_transactions_v2_is_the_data_before_its_producers_next_abort(spark):
    """The marker's epoch (the data's + 1, 32767 at an exhausted epoch) does not matter, only the
    producer id's next marker on the replica: producer 8's first transaction is aborted; its second,
    whose marker is lost, is not; producer 3's v0 abort covers its data since its last marker."""
    from jobs.replicas.compare import with_txn_outcome

    rows = _txn_batches()
    b = batches(spark, [{k: v for k, v in r.items() if k != "control"} for r in rows])
    recs = spark.createDataFrame([("t", 0, 1, "live", "p", r["base_offset"], r["control"]) for r in rows if r.get("control")],
                                 "topic string, partition int, broker int, dir_state string, path string, batch_position long, "
                                 "control_type string")
    aborted = {r["base_offset"] for r in with_txn_outcome(b, recs).where("aborted").collect()}
    assert aborted == {32, 44}
