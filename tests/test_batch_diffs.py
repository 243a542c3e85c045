"""Deep partitions compared in spans (``jobs.replicas.batch_diffs``, issue 35 item 2): where replicas
differ in whole batches, no record is compared record by record, and the divergent ranges and the
lost committed ranges are the ones the record comparison gives; where they differ in part of a
batch, or a bound falls inside a span, the records decide as before."""

from __future__ import annotations

import pytest

from analyzer.analyze import build
from sample_data.writer.log import PartitionSpec, write_broker_dir
from sample_data.writer.records import BatchSpec, Record

T0 = 1_700_000_000_000
TOPIC = "deep"
BATCHES = 30  # of 10 records; broker 3's last 6 differ
FORK = 24
CLUSTER = "QmVuY2hDbHVzdGVySWQwMA"


def batches(first: int, last: int, tag: str, same: range = range(0), pid: bool = False, epoch: int = 0) -> list[BatchSpec]:
    """Batches ``first``..``last`` of 10 records whose values say ``tag`` (``old`` at ``same``)."""
    def rec(o: int) -> Record:
        return Record(b"k%d" % o, f"{'old' if o in same else tag}-{o}".encode() * (1 + o % 3), T0 + o)
    return [BatchSpec(i * 10, tuple(rec(o) for o in range(i * 10, i * 10 + 10)), producer_id=1000 if pid else -1,
                      producer_epoch=epoch if pid else -1, base_sequence=i * 10 if pid else -1) for i in range(first, last + 1)]


@pytest.fixture(scope="module")
def ingested(spark, tmp_path_factory):
    """Four partitions of 3 replicas: broker 3's tail holds other records at the same offsets in
    whole batches (0, with producer ids), in batches partly the same (1), not at all (2: behind),
    and in whole batches under a high watermark that falls inside one (3)."""
    data = tmp_path_factory.mktemp("batch-diffs") / "data"
    top = BATCHES * 10
    for b in (1, 2, 3):
        head = batches(0, FORK - 1, "old")
        forked = b == 3
        parts = {
            0: batches(0, FORK - 1, "old", pid=True) + batches(FORK, BATCHES - 1, "new" if forked else "old", pid=True, epoch=1 if forked else 0),
            1: head + batches(FORK, BATCHES - 1, "new" if forked else "old", same=range(262, 266) if forked else range(0)),
            2: head + ([] if forked else batches(FORK, BATCHES - 1, "old")),
            3: head + batches(FORK, BATCHES - 1, "new" if forked else "old"),
        }
        hw = {(TOPIC, 0): top, (TOPIC, 1): top, (TOPIC, 2): FORK * 10 if forked else top, (TOPIC, 3): top if forked else 255}
        write_broker_dir(data / f"broker-{b}", b, CLUSTER, directory_id=None,
                         partitions={(TOPIC, p): PartitionSpec(bs) for p, bs in parts.items()}, hw=hw, recovery_points=hw,
                         log_starts={k: 0 for k in hw}, clean_shutdown=True)
    out = data.parent / "out"
    build([data], out, spark=spark, progress=False, register_catalog=False)
    return out


def compared(spark, out, min_records: int, monkeypatch):
    """The case of ``out`` as the detectors read it (job tables already written), its comparison
    made in Spark, in spans from ``min_records`` records in scope."""
    from jobs.findings import case as case_module
    from jobs.findings.committed import committed_ranges
    from jobs.store.io import read_table

    monkeypatch.setattr(case_module, "MIN_SPAN_RECORDS", min_records)
    monkeypatch.setattr(case_module, "LOCAL_SCOPE_RECORDS", -1)  # (Spark's comparison: test_local_diffs holds the driver's to it)
    case = case_module.Case(spark, out, {n: case_module.input_table(spark, out, n) for n in case_module.INPUT_TABLES})
    for name in ("replica_logs", "metadata_events", "epoch_lineage", "offset_ranges"):
        setattr(case, name, read_table(spark, out, name))

    def rows(rs):
        return sorted(tuple(sorted((k, repr(v)) for k, v in r.asDict().items() if k != "_island")) for r in rs)

    return case, rows(case.ranges), rows(committed_ranges(case))


def anywhere(row: tuple) -> tuple:
    """A lost range without the file of the holder that names it, but which holder's file it is."""
    d = dict(row)
    holder = int(d["path"].strip("'").split("/")[0].removeprefix("broker-"))
    assert str(holder) in d["holders"]
    return tuple((k, v) for k, v in row if k not in ("path", "position"))


def test_whole_batches_that_differ_are_compared_in_spans_with_the_ranges_the_records_give(spark, ingested, monkeypatch):
    record_case, record_ranges, record_lost = compared(spark, ingested, 1 << 62, monkeypatch)
    try:
        assert record_case.span_partitions == [] and record_case.diffs.count() > 0
        # (the data forked in 0, 1 and 3, and lost committed records in 0, 1 and 3's fallback)
        assert sorted({dict(r)["partition"] for r in record_ranges}) == ["0", "1", "3"]
        assert sorted({dict(r)["partition"] for r in record_lost}) == ["0", "1", "3"]
    finally:
        record_case.close()
    case, ranges, lost = compared(spark, ingested, 0, monkeypatch)
    try:
        # 0, 2 and 3 differ in whole batches only: no record of theirs is compared record by record
        assert case.span_partitions == [(TOPIC, 0), (TOPIC, 2), (TOPIC, 3)]
        assert case.record_partitions == [(TOPIC, 1)]
        assert {r["partition"] for r in case.diffs.select("partition").distinct().collect()} == {1}
        spans = case.spans.collect()
        assert sorted((r["partition"], r["broker_a"], r["broker_b"], r["status"]) for r in spans if r["first_offset"] == FORK * 10) == [
            (0, 1, 3, "divergent"), (0, 2, 3, "divergent"), (2, 1, 3, "only_a"), (2, 2, 3, "only_a"), (3, 1, 3, "divergent"),
            (3, 2, 3, "divergent")]
        assert len(spans) == 6 * (BATCHES - FORK)  # one a pair of batches, not one a record
        assert ranges == record_ranges
        # a lost range's path and position are one holder's record's at its first offset: the
        # record comparison takes the first row's of each offset, whichever holder's it is (so
        # for 1 and 3, compared record by record in both, they may name another holder's copy)
        assert [anywhere(r) for r in lost] == [anywhere(r) for r in record_lost]
        assert [r for r in lost if dict(r)["partition"] in ("0", "2")] == [r for r in record_lost if dict(r)["partition"] in ("0", "2")]
    finally:
        case.close()
