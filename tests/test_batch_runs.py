"""Runs of contiguous batches (``jobs.ingest.batch_runs``), and the per-replica jobs that read them
instead of every batch: the same answers as the batch-by-batch computation they replaced, on
random logs with holes, epoch changes, compaction, old message formats, damaged CRCs and
overlapping segments; and the comparison's windows that must not grow with a partition's depth."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.testing import assertDataFrameEqual

from jobs.ingest.batch_runs import digest_parts, runs_of
from jobs.replicas import compare, epoch_lineage, offset_ranges, replica_logs
from jobs.store.io import local_frame
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


def _arrow_runs(files: dict[tuple[int, str], list[dict]]) -> pa.Table:
    """The batch_runs table of ``_frames``, as the driver reads it (Arrow)."""
    common = {"log_dir": "d", "topic": "t", "partition": 0, "dir_state": "live", "segment_base_offset": 0, "file_kind": "segment"}
    rows = [{**common, "broker": broker, "path": path, **r} for (broker, path), rs in files.items() for r in runs_of(arrow_batches(rs)).to_pylist()]
    rs = schema_of("batch_runs")
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in rs} for r in rows], schema=rs)


def _local_replica_logs(runs: pa.Table) -> pa.Table:
    """replica_logs (``replica_logs.local_build``) of runs alone: every other input table empty."""
    empty = {n: schema_of(n).empty_table().select(cols) for n, cols in replica_logs.LOCAL_INPUTS.items() if n != "batch_runs"}
    return replica_logs.local_build({"batch_runs": runs, **empty}, [])


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
    arrow_runs = _arrow_runs(files)
    rl = spark.createDataFrame([("t", 0, b, False, 0) for b in (1, 2, 3)],
                               "topic string, partition int, broker int, compacted boolean, log_start_offset long")
    starts = epoch_lineage.local_epoch_starts({"batch_runs": arrow_runs, "leader_epochs": schema_of("leader_epochs").empty_table()})
    over = epoch_lineage.overlapping(starts)
    assert [(r["broker"]) for r in over] == ([2] if overlap else [])
    columns = [*replica_logs.REPLICA_KEY, "first_offset", "last_offset", "leader_epoch", "records", "bytes", "path", "position"]
    want = batch_ranges(batches)
    if overlap:  # (in Spark: that replica's batches are joined)
        got = offset_ranges.build({"batches": batches, "batch_runs": runs}, rl, over).where("kind = 'data'").select(*columns)
    else:  # (on the driver, from the runs)
        rows = offset_ranges.local_build(arrow_runs, rl.toArrow()).filter(pc.equal(pc.field("kind"), "data")).select(columns)
        got = local_frame(spark, [tuple(r.values()) for r in rows.to_pylist()], want.select(*columns).schema)
    assertDataFrameEqual(got, want.select(*got.columns))


def test_offset_ranges_on_the_driver_give_holes_and_their_reasons_as_spark_did(spark):
    """Holes between ranges (and their reasons, from the replica's log start and compaction),
    from ``offset_ranges.local_build``, equal those of the Spark query (``build``) it replaces
    where no runs overlap."""
    rng = random.Random(11)
    files = {(b, f"b{b}/{k}.log"): random_batches(rng, 40) for b in (1, 2, 3) for k in range(2)}
    _, runs = _frames(spark, files)
    arrow_runs = _arrow_runs(files)
    rows = [("t", 0, 1, False, 0), ("t", 0, 2, True, 0), ("t", 0, 3, False, 10**9)]
    rl = spark.createDataFrame(rows, "topic string, partition int, broker int, compacted boolean, log_start_offset long")
    want = offset_ranges.build({"batches": None, "batch_runs": runs}, rl, [])
    local = offset_ranges.local_build(arrow_runs, rl.toArrow())
    got = local_frame(spark, [tuple(r.values()) for r in local.to_pylist()], offset_ranges.SCHEMA)
    assert {r["reason"] for r in want.collect() if r["kind"] == "hole"} == {"unexplained", "compaction", "log_start"}
    assertDataFrameEqual(got, want.select(*got.columns))


def test_replica_logs_from_runs_equal_the_batch_aggregates(spark):
    rng = random.Random(3)
    files = {(b, f"b{b}/{k}.log"): random_batches(rng, 50) for b in (1, 2) for k in range(2)}
    batches, _ = _frames(spark, files)
    rl = replica_logs.rows_of(_local_replica_logs(_arrow_runs(files)))
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
    rl = replica_logs.rows_of(_local_replica_logs(_arrow_runs(files)))
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


def test_records_of_a_diverging_tail_are_read_above_a_literal_offset_the_files_can_skip(spark, tmp_path):
    """Two replicas agreeing up to offset 89: the records the comparison reads are bounded by a
    literal offset predicate, pushed down to Parquet (row groups below it are never read), and
    no job broadcasts the scope (each broadcast, even of driver rows, is a Spark job)."""
    pq.write_table(schema_of("records").empty_table(), tmp_path / "records.parquet")
    records = spark.read.schema(from_arrow_schema(schema_of("records"))).parquet(str(tmp_path))
    d = compare.in_scope(records, None, [("t", 0, 90, [1, 2])], "offset")
    plan = d._jdf.queryExecution().executedPlan()
    pushed = plan.collectLeaves().head().metadata().apply("PushedFilters")
    assert "GreaterThanOrEqual(offset,90)" in pushed, pushed
    assert "Broadcast" not in plan.toString()


def test_no_job_asks_for_a_frame_reaching_the_end_of_a_partition():
    """Spark re-aggregates an unbounded-following frame for every row: no replica or finding job
    may use one (the transaction outcome's did, and a deep partition never finished)."""
    import inspect
    import pkgutil

    import jobs

    for info in pkgutil.walk_packages(jobs.__path__, "jobs."):
        mod = __import__(info.name, fromlist=["_"])
        assert "unboundedFollowing" not in inspect.getsource(mod), info.name


def _replica(rng: random.Random, rows: list[dict], crc_change: float = 0.0, content_change: float = 1.0) -> list[dict]:
    """``rows`` as another replica holds them: each batch, with probability ``crc_change``, with
    another CRC (and then, with probability ``content_change``, other records)."""
    out = []
    for r in rows:
        r = dict(r)
        if rng.random() < crc_change:
            r["crc"] ^= 0x5A5A
            r["_content"] = rng.random() < content_change
        out.append(r)
    return out


def _records(files: dict[tuple[int, str], list[dict]]) -> list[dict]:
    """The records of ``files``' batches: their content a function of the batch's CRC (or of its
    offset alone where a changed CRC kept the content), so identical batches hold the same."""
    out = []
    for (broker, path), rows in files.items():
        for b in rows:
            for o in range(b["base_offset"], b["base_offset"] + b["record_count"]):
                key = f"k{o}-{b['crc'] if b.get('_content', True) else 'same'}"
                out.append({"broker": broker, "log_dir": "d", "topic": "t", "partition": 0, "dir_state": "live", "path": path,
                            "batch_position": b["position"], "offset": o, "key_sha256": key, "value_sha256": "v", "key_size": 1,
                            "value_size": 1, "timestamp_ms": 0})
    return out


def _reference_diffs(files: dict[tuple[int, str], list[dict]]) -> list[tuple]:
    """(broker_a, broker_b, offset, status, path_a, path_b) of every pair of replicas, told one
    record at a time over the whole logs: per pair, the records of each side's readable batches
    that the other lacks (same offsets and CRC), joined by offset (a full outer join)."""
    recs = _records(files)
    batches: dict[int, list] = {}
    for (broker, path), rows in files.items():
        batches.setdefault(broker, []).extend((path, r) for r in rows)
    keys = {br: {(r["base_offset"], r["last_offset"], r["crc"]) for _, r in bs if r["crc_valid"]} for br, bs in batches.items()}
    out = []
    for a in sorted(batches):
        for b in sorted(batches):
            if a >= b:
                continue
            side = {}
            for me, other in ((a, "a"), (b, "b")):
                lacks = keys[b if me == a else a]
                kept = {(path, r["position"]) for path, r in batches[me]
                        if r["crc_valid"] and (r["base_offset"], r["last_offset"], r["crc"]) not in lacks}
                side[other] = [x for x in recs if x["broker"] == me and (x["path"], x["batch_position"]) in kept]
            for o in sorted({x["offset"] for s in side.values() for x in s}):
                xs = [x for x in side["a"] if x["offset"] == o] or [None]
                ys = [y for y in side["b"] if y["offset"] == o] or [None]
                for x in xs:
                    for y in ys:
                        st = "only_b" if x is None else "only_a" if y is None else "divergent" if x["key_sha256"] != y["key_sha256"] else None
                        if st:
                            out.append((a, b, o, st, x and x["path"], y and y["path"]))
    return sorted(out, key=str)


@pytest.mark.parametrize("seed", range(3))
def test_the_comparison_above_where_replicas_agree_finds_every_difference_of_the_whole_logs(spark, seed):
    """Four replicas of one partition, on random logs (holes, epochs, damaged CRCs, control
    batches): 1 the leader; 2 lags behind it and holds one batch twice (an overlap); 3 forked in
    the tail (other CRCs, mostly other records, some the same records); 4 holds 1's batches cut
    into other segment files. Read only above where all agree (``agreed_prefixes``, from their
    runs), the unshared batches joined record by record give exactly the differences a
    comparison of the whole logs finds, pair by pair."""
    rng = random.Random(seed)
    log = random_batches(rng, 80)
    cut = 50
    files = {
        (1, "1/0.log"): log,
        (2, "2/0.log"): log[:70], (2, "2/1.log"): [log[60]],
        (3, "3/0.log"): log[:cut] + _replica(rng, log[cut:], crc_change=0.6, content_change=0.7),
        (4, "4/0.log"): log[:20], (4, "4/1.log"): log[20:],
    }
    batches, runs = _frames(spark, files)
    rs = schema_of("records")
    records = spark.createDataFrame(pa.Table.from_pylist([{f.name: r.get(f.name) for f in rs} for r in _records(files)], schema=rs)
                                    .to_pandas(), from_arrow_schema(rs))
    replicas = [{"topic": "t", "partition": 0, "broker": b, "dir_state": "live"} for b in (1, 2, 3, 4)]
    prefix = compare.agreed_prefixes(runs.collect(), replicas)[("t", 0)]
    assert 0 <= prefix < log[cut]["base_offset"] or not any(b["crc_valid"] for b in log[:cut])
    scope = compare.comparison_scope({("t", 0): prefix}, replicas)
    want = _reference_diffs(files)
    # by literal predicates, and (seed 0) by the join that many partitions take
    for frame in [None, local_frame(spark, scope, compare.SCOPE_SCHEMA)][:2 if seed == 0 else 1]:
        some = compare.unshared_batches(compare.in_scope(batches, frame, scope, "base_offset").withColumn("aborted", F.lit(False)))
        d = compare.scoped_record_diffs(compare.in_scope(records, frame, scope, "offset"), some)
        got = sorted(((r["broker_a"], r["broker_b"], r["offset"], r["status"], r["a"] and r["a"]["path"], r["b"] and r["b"]["path"])
                      for r in d.collect()), key=str)
        assert got == want


def _run(broker, first, last, digest, readable=1):
    return {"topic": "t", "partition": 0, "broker": broker, "first_offset": first, "last_offset": last, "readable": readable,
            "digest_0": digest, "digest_1": 0, "digest_2": 0, "digest_3": 0}


def test_replicas_agree_up_to_the_last_run_end_where_every_one_sums_alike():
    """The offset below which the comparison reads nothing: the last offset that splits every
    live replica's runs (none spans it) with equal sums below. Runs cut at other points (other
    segment files, other pieces) still agree where their sums meet; a run spanning an offset,
    an overlap, or a replica without runs (an empty log) stops the agreement."""
    replicas = [{"topic": "t", "partition": 0, "broker": b, "dir_state": "live"} for b in (1, 2, 3)] + [
        {"topic": "t", "partition": 0, "broker": 9, "dir_state": "deleted"}]
    same = [_run(b, 0, 99, 5, 10) for b in (1, 2)] + [_run(3, 0, 49, 2, 5), _run(3, 50, 99, 3, 5)]
    # 3's tail forked after 99; 2 lags at 149 (its run ends inside 1's)
    runs = same + [_run(1, 100, 199, 7), _run(2, 100, 149, 4), _run(3, 100, 199, 8)]
    assert compare.agreed_prefixes(runs, replicas) == {("t", 0): 99}
    # the same tail everywhere but 2's, cut at 149 where 1 and 3 have no run end: agreement stops at 99
    runs = same + [_run(1, 100, 199, 7), _run(2, 100, 149, 4), _run(3, 100, 149, 4), _run(3, 150, 199, 3)]
    assert compare.agreed_prefixes(runs, replicas) == {("t", 0): 99}
    # 3 holds 100-149 again (overlapping its own run): no cut inside the overlap
    runs = same + [_run(1, 100, 199, 7), _run(2, 100, 199, 7), _run(3, 100, 199, 7), _run(3, 120, 149, 1)]
    assert compare.agreed_prefixes(runs, replicas) == {("t", 0): 99}
    # a live replica without any run agrees with the others nowhere above nothing
    assert compare.agreed_prefixes(same, replicas + [{"topic": "t", "partition": 0, "broker": 4, "dir_state": "live"}]) == {("t", 0): -1}
    # runs of a non-live dir are not asked of (9's would differ)
    assert compare.agreed_prefixes([r for r in same if r["broker"] != 3] + [_run(1, 100, 109, 1), _run(2, 100, 109, 2)], replicas[:2]) == {
        ("t", 0): 99}
