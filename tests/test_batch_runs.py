"""Runs of contiguous batches (``jobs.ingest.batch_runs``), and the per-replica jobs that read them
instead of every batch: the same answers as the batch-by-batch computation they replaced, on
random logs with holes, epoch changes, compaction, old message formats, damaged CRCs and
overlapping segments; and the comparison's windows that must not grow with a partition's depth."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.testing import assertDataFrameEqual

from jobs.ingest.batch_runs import digest_parts, runs_of
from jobs.replicas import compare, offset_ranges, replica_logs
from jobs.store.tables import schema_of
from parsers.segment import BATCH_SCHEMA


def random_batches(rng: random.Random, n: int, shuffle: bool = False) -> list[dict]:
    """One file's batches: mostly contiguous, with holes, epoch changes, control batches, v1
    messages (no epoch), record holes (compaction), bad CRCs; in file order unless ``shuffle``."""
    out, offset, pos, epoch = [], rng.randrange(0, 1000), 0, rng.randrange(0, 3)
    for _ in range(n):
        if rng.random() < 0.15:
            offset += rng.randrange(1, 20)  # a hole
        if rng.random() < 0.1:
            epoch += 1
        count = rng.randrange(1, 6)
        span = count + (rng.randrange(0, 3) if rng.random() < 0.1 else 0)
        magic = 1 if rng.random() < 0.05 else 2
        size = rng.randrange(70, 400)
        out.append({"position": pos, "size": size, "magic": magic, "base_offset": offset, "last_offset": offset + span - 1,
                    "record_count": count, "crc": rng.randrange(0, 1 << 32), "crc_valid": rng.random() > 0.05,
                    "partition_leader_epoch": None if magic < 2 else epoch, "is_control": rng.random() < 0.1,
                    "max_timestamp": rng.randrange(0, 10**12)})
        offset += span
        pos += size
    if shuffle:
        rng.shuffle(out)
    return out


def arrow_batches(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in BATCH_SCHEMA} for r in rows], schema=BATCH_SCHEMA)


def reference_runs(rows: list[dict]) -> list[dict]:
    """The runs, one batch at a time in (base offset, position) order, as the module doc says."""
    runs = []
    for b in sorted(rows, key=lambda r: (r["base_offset"], r["position"])):
        ep = b["partition_leader_epoch"]
        r = runs[-1] if runs else None
        if r is None or b["base_offset"] != r["end_offset"] + 1 or ep != r["partition_leader_epoch"]:
            r = {"first_offset": b["base_offset"], "last_offset": b["last_offset"], "partition_leader_epoch": ep,
                 "position": b["position"], "batches": 0, "records": 0, "control_records": 0, "record_count": 0, "bytes": 0,
                 "first_timestamp": b["max_timestamp"], "last_timestamp": b["max_timestamp"], "min_magic": b["magic"],
                 "max_magic": b["magic"], "record_holes": None, "readable": 0, "digest": [0, 0, 0, 0]}
            runs.append(r)
        r["end_offset"], r["last_base_offset"] = b["last_offset"], b["base_offset"]
        r["last_offset"] = max(r["last_offset"], b["last_offset"])
        r["batches"] += 1
        r["records" if not b["is_control"] else "control_records"] += b["record_count"]
        r["record_count"] += b["record_count"]
        r["bytes"] += b["size"]
        r["first_timestamp"] = min(r["first_timestamp"], b["max_timestamp"])
        r["last_timestamp"] = max(r["last_timestamp"], b["max_timestamp"])
        r["min_magic"], r["max_magic"] = min(r["min_magic"], b["magic"]), max(r["max_magic"], b["magic"])
        if b["magic"] == 2:
            r["record_holes"] = bool(r["record_holes"]) or b["last_offset"] - b["base_offset"] + 1 > b["record_count"]
        if b["crc_valid"]:
            r["readable"] += 1
            parts = digest_parts(np.array([b["base_offset"]]), np.array([b["last_offset"]]), np.array([b["crc"]]))
            r["digest"] = [d + int(p[0]) for d, p in zip(r["digest"], parts)]
    for r in runs:
        for i, d in enumerate(r.pop("digest")):
            r[f"digest_{i}"] = d
    return runs


@pytest.mark.parametrize("seed", range(40))
def test_runs_of_a_piece_are_its_batches_summed_one_at_a_time(seed):
    rng = random.Random(seed)
    rows = random_batches(rng, rng.randrange(1, 300), shuffle=seed % 3 == 0)
    assert runs_of(arrow_batches(rows)).to_pylist() == reference_runs(rows)


def _digest(tables: list[pa.Table]) -> list[int]:
    return [sum(sum(t.column(f"digest_{i}").to_pylist()) for t in tables) for i in range(4)]


def test_the_digest_is_order_free_and_tells_other_batches_apart():
    rng = random.Random(1)
    rows = random_batches(rng, 500)
    whole = _digest([runs_of(arrow_batches(rows))])
    assert _digest([runs_of(arrow_batches(rows[250:])), runs_of(arrow_batches(rows[:250]))]) == whole
    changed = [dict(r) for r in rows]
    changed[100]["crc"] ^= 1  # one batch with other content
    assert _digest([runs_of(arrow_batches(changed))]) != whole


def _frames(spark, files: dict[tuple[int, str], list[dict]]):
    """batches and batch_runs tables (their real schemas) of one partition's replicas: files
    keyed by (broker, path), each read as one piece."""
    common = {"log_dir": "d", "topic": "t", "partition": 0, "dir_state": "live", "segment_base_offset": 0, "file_kind": "segment"}
    brows, rrows = [], []
    for (broker, path), rows in files.items():
        own = {**common, "broker": broker, "path": path}
        brows += [{**own, **r} for r in rows]
        rrows += [{**own, **r} for r in runs_of(arrow_batches(rows)).to_pylist()]
    bs, rs = schema_of("batches"), schema_of("batch_runs")
    return (spark.createDataFrame(pa.Table.from_pylist([{f.name: r.get(f.name) for f in bs} for r in brows], schema=bs).to_pandas(),
                                  from_arrow_schema(bs)),
            spark.createDataFrame(pa.Table.from_pylist([{f.name: r.get(f.name) for f in rs} for r in rrows], schema=rs).to_pandas(),
                                  from_arrow_schema(rs)))


def batch_ranges(batches):
    """offset_ranges' data ranges joined batch by batch (what ``offset_ranges.build`` did before
    ``batch_runs``): the reference."""
    b = replica_logs.live_segment_batches(batches).select(
        *replica_logs.REPLICA_KEY, "path", "position", "base_offset", "last_offset", "record_count", "size", "is_control",
        F.coalesce("partition_leader_epoch", F.lit(-1)).alias("leader_epoch"))
    b = offset_ranges.islands(b, replica_logs.REPLICA_KEY, start="base_offset", end="last_offset", order=["base_offset", "position"],
                              same=["leader_epoch"], name="_grp")
    return b.groupBy(*replica_logs.REPLICA_KEY, "_grp").agg(
        F.min("base_offset").alias("first_offset"), F.max("last_offset").alias("last_offset"),
        F.first("leader_epoch").alias("leader_epoch"),
        F.sum(F.when(~F.col("is_control"), F.col("record_count")).otherwise(0)).cast("long").alias("records"),
        F.sum("size").cast("long").alias("bytes"), F.min_by("path", "base_offset").alias("path"),
        F.min_by("position", "base_offset").alias("position")).drop("_grp")


@pytest.mark.parametrize("overlap", [False, True])
def test_offset_ranges_from_runs_equal_those_joined_batch_by_batch(spark, overlap):
    """Segments of three replicas, each file a piece of its own; with ``overlap`` broker 2's
    second segment starts inside its first (a segment overlap): there runs interleave in offset
    order, and that replica's ranges are joined from its batches."""
    rng = random.Random(7)
    files = {}
    for broker in (1, 2, 3):
        first = random_batches(rng, 60)
        start = first[-1]["last_offset"] + 1 - (5 if overlap and broker == 2 else 0)
        second = random_batches(rng, 40)
        shift = start - second[0]["base_offset"]
        second = [{**b, "base_offset": b["base_offset"] + shift, "last_offset": b["last_offset"] + shift} for b in second]
        files[(broker, f"b{broker}/0.log")] = first
        files[(broker, f"b{broker}/1.log")] = second
    batches, runs = _frames(spark, files)
    rl = spark.createDataFrame([("t", 0, b, False, 0) for b in (1, 2, 3)],
                               "topic string, partition int, broker int, compacted boolean, log_start_offset long")
    over = offset_ranges.overlapping_replicas(replica_logs.live_segment_batches(runs)).collect()
    assert [(r["broker"]) for r in over] == ([2] if overlap else [])
    got = offset_ranges.build({"batches": batches, "batch_runs": runs}, rl).where("kind = 'data'").select(
        *replica_logs.REPLICA_KEY, "first_offset", "last_offset", "leader_epoch", "records", "bytes", "path", "position")
    assertDataFrameEqual(got, batch_ranges(batches).select(*got.columns))


def test_replica_logs_from_runs_equal_the_batch_aggregates(spark):
    rng = random.Random(3)
    files = {(b, f"b{b}/{k}.log"): random_batches(rng, 50) for b in (1, 2) for k in range(2)}
    batches, runs = _frames(spark, files)
    empty = {n: spark.createDataFrame([], from_arrow_schema(schema_of(n))) for n in
             ("files", "checkpoints", "leader_epochs", "partition_metadata", "problems", "clean_shutdown")}
    rl = replica_logs.build({"batches": batches, "batch_runs": runs, **empty}).collect()
    b = replica_logs.live_segment_batches(batches)
    want = {r["broker"]: r for r in b.groupBy("broker").agg(
        F.min("base_offset").alias("first_offset"), (F.max("last_offset") + 1).alias("leo"),
        F.sum(F.when(~F.col("is_control"), F.col("record_count")).otherwise(0)).alias("records"),
        F.sum(F.when(F.col("is_control"), F.col("record_count")).otherwise(0)).alias("control_records"),
        F.sum("size").alias("bytes"), F.min_by("partition_leader_epoch", "base_offset").alias("batch_first_epoch"),
        F.max_by("partition_leader_epoch", "base_offset").alias("batch_last_epoch"),
        F.max("partition_leader_epoch").alias("batch_max_epoch"), F.min("magic").alias("min_magic"),
        F.max("magic").alias("max_magic")).collect()}
    assert len(rl) == 2
    for r in rl:
        w = want[r["broker"]]
        assert {k: r[k] for k in w.asDict() if k != "broker"} == {k: v for k, v in w.asDict().items() if k != "broker"}
    assert rl[0]["batch_digest"] != rl[1]["batch_digest"]


def test_replicas_with_the_same_batches_have_one_digest_and_need_no_comparison(spark):
    rng = random.Random(5)
    rows = random_batches(rng, 80)
    files = {(1, "b1/0.log"): rows[:40], (1, "b1/1.log"): rows[40:], (2, "b2/0.log"): rows, (3, "b3/0.log"): rows[:-1]}
    batches, runs = _frames(spark, files)
    empty = {n: spark.createDataFrame([], from_arrow_schema(schema_of(n))) for n in
             ("files", "checkpoints", "leader_epochs", "partition_metadata", "problems", "clean_shutdown")}
    rl = replica_logs.build({"batches": batches, "batch_runs": runs, **empty}).collect()
    digests = {r["broker"]: r["batch_digest"] for r in rl}
    assert digests[1] == digests[2] != digests[3]  # the same batches cut into other segments and pieces
    assert compare.differing_partitions(rl) == [("t", 0)]
    assert compare.differing_partitions([r for r in rl if r["broker"] != 3]) == []


def test_the_transaction_outcome_window_only_grows(spark):
    """The next marker after each transactional batch is a running ``last`` over a frame that
    only grows, never a frame re-aggregated for every row (Spark's unbounded-following frame:
    quadratic in the batches of one producer, and a 100 MB partition never finished); and the
    rule still holds: data before an ABORT is aborted, before a COMMIT not, plain batches never."""
    rows = []
    for i, (txn, control) in enumerate([(True, None), (True, "abort"), (True, None), (True, "commit"), (False, None), (True, None),
                                        (True, "abort")]):
        rows.append({"broker": 1, "log_dir": "d", "topic": "t", "partition": 0, "dir_state": "live", "path": "0.log",
                     "position": i * 100, "base_offset": i, "last_offset": i, "record_count": 1, "producer_id": 7,
                     "is_transactional": txn, "is_control": control is not None, "file_kind": "segment", "_ct": control})
    bs = schema_of("batches")
    batches = spark.createDataFrame(pa.Table.from_pylist([{f.name: r.get(f.name) for f in bs} for r in rows], schema=bs).to_pandas(),
                                    from_arrow_schema(bs))
    rs = schema_of("records")
    recs = [{"broker": 1, "path": "0.log", "batch_position": r["position"], "offset": r["base_offset"], "control_type": r["_ct"],
             "dir_state": "live", "topic": "t", "partition": 0} for r in rows]
    records = spark.createDataFrame(pa.Table.from_pylist([{f.name: r.get(f.name) for f in rs} for r in recs], schema=rs).to_pandas(),
                                    from_arrow_schema(rs))
    out = compare.with_txn_outcome(batches, records)
    plan = out._jdf.queryExecution().executedPlan().toString()
    assert "Window" in plan and "unboundedfollowing" not in plan.lower()
    got = {r["base_offset"]: r["aborted"] for r in out.collect()}
    assert got == {0: True, 1: False, 2: False, 3: False, 4: False, 5: True, 6: False}


def test_records_of_a_diverging_tail_are_read_by_offset_windows_the_files_can_skip(spark):
    """Two replicas differing only past offset 90: the records the comparison reads are bounded
    by literal offset windows, pushed down to Parquet (row groups outside them are never read)."""
    w = [{"topic": "t", "partition": 0, "broker": 1, "first_offset": 90, "last_offset": 99}]
    rs = schema_of("records")
    records = spark.createDataFrame([], from_arrow_schema(rs))
    bs = spark.createDataFrame([], from_arrow_schema(schema_of("batches"))).withColumn("aborted", F.lit(False))
    rl = spark.createDataFrame([("t", 0, 1, "live")], "topic string, partition int, broker int, dir_state string")
    ua = ub = bs.select(*compare.PAIR[:2], F.col("broker").alias("broker_a"), F.col("broker").alias("broker_b"), "base_offset",
                        "last_offset", "crc", *compare.BATCH_COLS)
    d = compare.record_diffs(bs, records, rl, (ua, ub), w)
    plan = d._jdf.queryExecution().optimizedPlan().toString()
    assert "90" in plan and "99" in plan and "offset" in plan


def test_no_job_asks_for_a_frame_reaching_the_end_of_a_partition():
    """Spark re-aggregates an unbounded-following frame for every row: no replica or finding job
    may use one (the transaction outcome's did, and a deep partition never finished)."""
    import inspect
    import pkgutil

    import jobs

    for info in pkgutil.walk_packages(jobs.__path__, "jobs."):
        mod = __import__(info.name, fromlist=["_"])
        assert "unboundedFollowing" not in inspect.getsource(mod), info.name


def test_unmatched_batches_are_those_the_other_side_lacks(spark):
    """Three replicas: 2 holds 1's batches and one more (1 lags behind), 3 diverged after the
    first two batches (other CRCs at the same offsets). Per pair, each side's unmatched batches
    are exactly those with no twin (offsets and CRC) on the other; batches all three hold are no
    one's, and a batch failing its CRC is never compared."""
    def b(broker, base, crc, valid=True):
        return {"broker": broker, "log_dir": "d", "topic": "t", "partition": 0, "dir_state": "live", "path": f"{broker}.log",
                "position": base * 100, "base_offset": base, "last_offset": base, "crc": crc, "crc_valid": valid,
                "is_control": False, "file_kind": "segment"}
    rows = [b(1, 0, 10), b(1, 1, 11), b(1, 2, 12), b(2, 0, 10), b(2, 1, 11), b(2, 2, 12), b(2, 3, 13),
            b(3, 0, 10), b(3, 1, 11), b(3, 2, 99), b(3, 3, 98), b(3, 4, 97, valid=False)]
    bs = schema_of("batches")
    batches = spark.createDataFrame(pa.Table.from_pylist([{f.name: r.get(f.name) for f in bs} for r in rows], schema=bs).to_pandas(),
                                    from_arrow_schema(bs)).withColumn("aborted", F.lit(False))
    rl = spark.createDataFrame([("t", 0, n, "live") for n in (1, 2, 3)], "topic string, partition int, broker int, dir_state string")
    ua, ub = compare.unmatched_batches(batches, rl)
    got = sorted((r["broker_a"], r["broker_b"], "a", r["base_offset"]) for r in ua.collect()) + \
        sorted((r["broker_a"], r["broker_b"], "b", r["base_offset"]) for r in ub.collect())
    want = sorted([(1, 3, "a", 2), (2, 3, "a", 2), (2, 3, "a", 3)]) + sorted([(1, 2, "b", 3), (1, 3, "b", 2), (1, 3, "b", 3),
                                                                            (2, 3, "b", 2), (2, 3, "b", 3)])
    assert got == want


def test_batches_not_everywhere_count_holders_once_and_never_broadcast_the_batches(spark):
    """A batch some replica lacks is found by counting its distinct holders (a replica holding it
    twice, in two segments after an overlap, is one holder), in a window over the batches: the
    batches never become the broadcast side of a join (their compressed Parquet looked small
    enough to broadcast, and the driver built a 72 MiB table of a 100 MB partition's batches)."""
    def b(broker, base, path="0.log"):
        return {"broker": broker, "log_dir": "d", "topic": "t", "partition": 0, "dir_state": "live", "path": f"{broker}/{path}",
                "position": base * 100, "base_offset": base, "last_offset": base, "crc": base, "crc_valid": True,
                "is_control": False, "file_kind": "segment"}
    rows = [b(1, 0), b(1, 0, "1.log"), b(2, 0), b(1, 1), b(1, 1, "1.log"), b(2, 2)]
    bs = schema_of("batches")
    batches = spark.createDataFrame(pa.Table.from_pylist([{f.name: r.get(f.name) for f in bs} for r in rows], schema=bs).to_pandas(),
                                    from_arrow_schema(bs)).withColumn("aborted", F.lit(False))
    rl = spark.createDataFrame([("t", 0, n, "live") for n in (1, 2)], "topic string, partition int, broker int, dir_state string")
    some = compare.not_everywhere(batches, rl)
    assert sorted((r["broker"], r["base_offset"], r["path"]) for r in some.collect()) == [
        (1, 1, "1/0.log"), (1, 1, "1/1.log"), (2, 2, "2/0.log")]
    plan = some._jdf.queryExecution().executedPlan().toString()
    assert "Window" in plan
    for exchange in plan.split("BroadcastExchange")[1:]:  # what each broadcast builds: the replica counts
        assert "_replicas" in exchange.split("\n")[1], exchange.split("\n")[1]
