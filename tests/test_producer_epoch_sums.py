"""Per producer epoch sums of sequence numbers (``jobs.ingest.producer_epoch_sums``), summed per
piece at ingest, and the producers detector's look-up that reads them instead of every batch
(``producers.local_producer_epochs``): the same answers as the per-batch Spark aggregate
(``producers.producer_epochs``) on random logs of idempotent and transactional producers with
duplicates, gaps, markers, old message formats and damaged CRCs, split into pieces anywhere."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.findings.producers import SUM_COLUMNS, local_producer_epochs, producer_epochs
from jobs.ingest.producer_epoch_sums import sums_of
from jobs.store.tables import schema_of
from parsers.segment import BATCH_SCHEMA

KEY = ["topic", "partition", "broker", "producer_id", "producer_epoch"]


def random_producer_batches(rng: random.Random, n: int) -> list[dict]:
    """One replica's batches of a few producers: sequences that chain, restart (new epoch), repeat
    (a retry appended twice), skip (compaction) or wrap; markers and transactional data; v1
    messages (no producer id), plain batches (producer id -1), null flags (damage)."""
    out, offset = [], 0
    state: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, next sequence)
    for _ in range(n):
        pid = rng.choice([-1, 3, 4, 5, 6])
        epoch, seq = state.get(pid, (rng.randrange(0, 3), 0))
        r = rng.random()
        if r < 0.05:
            epoch, seq = epoch + 1, 0
        elif r < 0.1 and seq > 0:
            seq -= rng.randrange(1, 4)  # written twice (or overlapping)
        elif r < 0.13:
            seq += rng.randrange(1, 5)  # a gap
        elif r < 0.14:
            seq = 2**31 - 2  # about to wrap
        seq = min(max(seq, 0), 2**31 - 1)
        count = rng.randrange(1, 5)
        control = rng.random() < 0.1
        magic = 1 if rng.random() < 0.03 else 2
        b = {"position": offset * 50, "size": 50, "magic": magic, "base_offset": offset, "last_offset": offset + count - 1,
             "record_count": count, "crc": rng.randrange(0, 1 << 32), "crc_valid": rng.random() > 0.05,
             "partition_leader_epoch": 0, "producer_id": pid, "producer_epoch": epoch if pid >= 0 else -1,
             "base_sequence": -1 if control or pid < 0 else seq, "last_sequence": -1 if control or pid < 0 else min(seq + count - 1, 2**31 - 1),
             "is_transactional": rng.random() < 0.3 or control, "is_control": control, "max_timestamp": 0}
        if magic < 2:
            b.update(producer_id=None, producer_epoch=None, base_sequence=None, last_sequence=None, is_transactional=None,
                     is_control=None, partition_leader_epoch=None)
        elif rng.random() < 0.02:
            b[rng.choice(["is_control", "is_transactional", "producer_epoch"])] = None
        if not control and pid >= 0:
            seq = (seq + count) % 2**31
        state[pid] = (epoch, seq)
        out.append(b)
        offset += count
    return out


def _tables(files: dict[tuple, list[dict]]) -> tuple[pa.Table, pa.Table]:
    """batches and producer_epoch_sums (real schemas) of ``files`` ((topic, partition, broker,
    path, dir_state) -> batches), each file cut into pieces where a task might cut it."""
    bs, ss = schema_of("batches"), schema_of("producer_epoch_sums")
    brows, srows = [], []
    rng = random.Random(0)
    for (topic, partition, broker, path, state), rows in files.items():
        own = {"log_dir": "d", "topic": topic, "partition": partition, "broker": broker, "path": path, "dir_state": state,
               "segment_base_offset": 0, "file_kind": "segment"}
        brows += [{**own, **r} for r in rows]
        cuts = sorted({0, len(rows), *(rng.randrange(0, len(rows) + 1) for _ in range(3))})
        for a, b in zip(cuts, cuts[1:]):
            piece = pa.Table.from_pylist([{f.name: r.get(f.name) for f in BATCH_SCHEMA} for r in rows[a:b]], schema=BATCH_SCHEMA)
            srows += [{**own, **s} for s in sums_of(piece).to_pylist()]
    return (pa.Table.from_pylist([{f.name: r.get(f.name) for f in bs} for r in brows], schema=bs),
            pa.Table.from_pylist([{f.name: r.get(f.name) for f in ss} for r in srows], schema=ss))


@pytest.mark.parametrize("seed", range(3))
def test_the_sums_of_pieces_give_what_the_per_batch_aggregate_gives(spark, seed):
    """Each replica of 24 partitions (two brokers, a few files each, one a ``-delete`` dir that
    must not count) decided once from every batch in Spark and once from the pieces' sums on the
    driver: the same suspects, last markers and last transactional data, row for row."""
    rng = random.Random(seed)
    files = {}
    for p in range(24):
        for broker in (1, 2):
            for i in range(rng.randrange(1, 4)):
                files[("t", p, broker, f"t-{p}/{i:020d}.log", "live" if i or p % 7 else "delete")] = random_producer_batches(rng, rng.randrange(1, 120))
    batches, sums = _tables(files)
    want = producer_epochs(spark.createDataFrame(batches.to_pandas(), from_arrow_schema(batches.schema))).collect()
    got = local_producer_epochs(sums.select(SUM_COLUMNS))
    assert sorted(map(tuple, got), key=repr) == sorted(map(tuple, want), key=repr)
    assert any(r["suspect"] for r in got) and not all(r["suspect"] for r in got)
    assert any(r["last_marker"] is not None for r in got) and any(r["last_txn_data"] is not None for r in got)


def test_a_piece_without_producer_ids_has_no_row():
    rows = [{"position": 0, "size": 50, "magic": 2, "base_offset": 0, "last_offset": 0, "record_count": 1, "producer_id": -1,
             "producer_epoch": -1, "base_sequence": -1, "last_sequence": -1, "is_transactional": False, "is_control": False}]
    assert sums_of(pa.Table.from_pylist([{f.name: r.get(f.name) for f in BATCH_SCHEMA} for r in rows], schema=BATCH_SCHEMA)).num_rows == 0


def test_a_piece_of_one_producer_epoch_sums_as_a_mixed_piece_does():
    """(a piece of one producer epoch is not sorted: the same row as among other producers')"""
    rng = random.Random(5)
    rows = [r for r in random_producer_batches(rng, 400) if r["producer_id"] == 4 and r["producer_epoch"] is not None]
    epoch = rows[0]["producer_epoch"]
    one = [r for r in rows if r["producer_epoch"] == epoch]
    other = {**one[0], "producer_id": 3, "base_offset": 10**6, "last_offset": 10**6}

    def table(rs):
        return pa.Table.from_pylist([{f.name: r.get(f.name) for f in BATCH_SCHEMA} for r in rs], schema=BATCH_SCHEMA)

    alone = sums_of(table(one)).to_pylist()
    assert len(one) > 10 and len(alone) == 1
    assert [r for r in sums_of(table([other, *one])).to_pylist() if r["producer_id"] == 4] == alone
