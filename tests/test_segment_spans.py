"""A big segment read in spans, one task each, gives exactly the tables one reading gives.

The spans are cut where the segment's offset index points; the driver checks that they chained
(``pipeline.check_spans``). Each damaged variant below takes another of its branches: a stale
index entry (read again whole), a corrupt length mid-file (the reading ends there, as Kafka's
does), a base offset below the previous batch's across a cut (a problem no task alone can see).
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from jobs.ingest import discover as disc
from jobs.ingest.pipeline import check_spans, ingest, plan_tasks, planned_spans, span_cuts
from jobs.ingest.tasks import run_task
from jobs.store.io import read_table
from parsers.headers import STOP_LIMIT
from sample_data.writer.bulk import generate

SPAN = 2 << 20
SEGMENT = "broker-1/bench-0/00000000000000000000.log"
TABLES = ("batches", "records", "problems", "files")


@pytest.fixture(scope="module")
def bulk(tmp_path_factory) -> Path:
    """One broker, one partition, one ~10 MB segment of 1.2 KiB batches with its offset index."""
    out = tmp_path_factory.mktemp("spans") / "clean"
    generate(out, brokers=1, partitions=1, records=60_000, records_per_batch=10, segment_bytes=1 << 30)
    return out


def cuts_of(root: Path) -> list[int]:
    log = root / SEGMENT
    return span_cuts(log.with_suffix(".index").read_bytes(), log.stat().st_size, -(-log.stat().st_size // SPAN))


def index_positions(root: Path) -> np.ndarray:
    return np.frombuffer((root / SEGMENT).with_suffix(".index").read_bytes(), ">i4").reshape(-1, 2)[:, 1]


def variant(bulk: Path, tmp_path: Path, damage) -> Path:
    root = tmp_path / "in"
    shutil.copytree(bulk, root)
    damage(root, cuts_of(bulk))
    return root


def poke(path: Path, position: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(position)
        fh.write(data)


def stale_index(root: Path, cuts: list[int]) -> None:
    """The index entry behind the second cut names the byte before it: inside a batch, not its start."""
    index = root / Path(SEGMENT).with_suffix(".index")
    i = int(np.nonzero(index_positions(root) == cuts[1])[0][0])
    poke(index, i * 8 + 4, struct.pack(">i", cuts[1] - 1))


def corrupt_length(root: Path, cuts: list[int]) -> None:
    """A batch strictly inside the second span says its length is 1: Kafka's reading stops there."""
    inside = [int(p) for p in index_positions(root) if cuts[0] < p < cuts[1]]
    poke(root / SEGMENT, inside[len(inside) // 2] + 8, struct.pack(">i", 1))


def zeros_across_a_cut(root: Path, cuts: list[int]) -> None:
    """Zeros from inside the second span's last batch to past the third span's end: the third
    span's reading stops at once (length 0), and says why as a whole reading would, from the
    whole rest of the file (not a zero-filled tail: bytes follow the zeros)."""
    poke(root / SEGMENT, cuts[1] - 100, bytes(cuts[2] - cuts[1] + 200))


def offset_regression(root: Path, cuts: list[int]) -> None:
    """The first batch of the third span says base offset 0 (the field no CRC covers)."""
    poke(root / SEGMENT, cuts[1], struct.pack(">q", 0))


def verdict(root: Path, work: Path):
    """What ``check_spans`` says of ``root``'s spans, each task run here without Spark."""
    found = disc.discover_inputs([root], work)
    tasks = plan_tasks(found.files, 1 << 20, SPAN)
    spans: list[dict] = []
    for t in tasks:
        list(run_task(t["files"], spans=spans))
    planned = planned_spans(tasks)
    return planned[SEGMENT], check_spans(planned, spans)


def rows(spark, out: Path, name: str) -> list[tuple]:
    df = read_table(spark, out, name)
    return sorted((tuple(r) for r in df.collect()), key=repr)


def assert_same_tables(spark, root: Path, tmp_path: Path, payloads: bool = False, tables=TABLES) -> None:
    whole = ingest(spark, [root], tmp_path / "whole", payloads=payloads, progress=False, span_bytes=1 << 40)
    split = ingest(spark, [root], tmp_path / "split", payloads=payloads, progress=False, span_bytes=SPAN)
    assert split.tasks > whole.tasks  # the segment was read in spans
    for name in tables:
        assert rows(spark, tmp_path / "split", name) == rows(spark, tmp_path / "whole", name), name
    # a run of batches (a producer epoch's sums) never spans two pieces, and spans cut pieces
    # elsewhere: the runs (sums) differ, what they add up to per replica (producer epoch) does not
    per_piece = ("batch_runs", "producer_epoch_sums")
    assert {k: v for k, v in split.rows.items() if k not in per_piece} == {k: v for k, v in whole.rows.items() if k not in per_piece}
    assert run_sums(spark, tmp_path / "split") == run_sums(spark, tmp_path / "whole")
    epochs = producer_epochs(tmp_path / "whole")
    assert epochs and producer_epochs(tmp_path / "split") == epochs


def producer_epochs(out: Path) -> list:
    """Per replica and producer epoch, what the producers detector decides from its sums."""
    from jobs.findings.producers import SUM_COLUMNS, local_producer_epochs
    from jobs.store.io import arrow_table

    return local_producer_epochs(arrow_table(out, "producer_epoch_sums", SUM_COLUMNS))


def run_sums(spark, out: Path) -> list[tuple]:
    """Per replica, what its batch_runs sum to (batches, records, bytes, offsets, digests)."""
    from pyspark.sql import functions as F

    sums = ["batches", "records", "control_records", "record_count", "bytes", "readable", *[f"digest_{i}" for i in range(4)]]
    df = read_table(spark, out, "batch_runs").groupBy("topic", "partition", "broker").agg(
        *[F.sum(c).alias(c) for c in sums], F.min("first_offset"), F.max("last_offset"))
    return sorted(tuple(r) for r in df.collect())


def test_cuts_are_batch_positions_the_index_names(bulk):
    cuts = cuts_of(bulk)
    assert len(cuts) >= 3
    assert set(cuts) <= set(index_positions(bulk).tolist())
    assert cuts == sorted(set(cuts))


def test_an_index_gives_no_cut_past_its_zero_filled_tail():
    """A preallocated index ends in zero entries; a position that does not rise is not used."""
    entries = struct.pack(">8i", 10, 4096, 20, 8192, 0, 0, 0, 0)
    assert span_cuts(entries, 100_000, 4) == [8192]
    assert span_cuts(b"", 100_000, 4) == []


def test_spans_of_a_sound_segment_chain(bulk, tmp_path):
    parts, (discard, rerun, between) = verdict(bulk, tmp_path / "work")
    assert len(parts) >= 4
    assert (discard, rerun, between) == (set(), {}, [])


def test_a_split_segment_ingests_to_the_same_tables(spark, bulk, tmp_path):
    assert_same_tables(spark, bulk, tmp_path)


def test_a_split_segment_keeps_its_payloads(spark, bulk, tmp_path):
    assert_same_tables(spark, bulk, tmp_path, payloads=True)


def test_a_split_internal_topic_decodes_to_the_same_rows(spark, tmp_path):
    """An internal topic's records are decoded piece by piece, and its pieces are cut elsewhere in
    spans: the decoded rows and their problems are still the same."""
    root = tmp_path / "in"
    generate(root, brokers=1, partitions=1, records=60_000, records_per_batch=10, segment_bytes=1 << 30, topic="__consumer_offsets")
    assert_same_tables(spark, root, tmp_path, tables=(*TABLES, "consumer_offsets"))


def test_a_span_that_reports_nothing_has_its_file_read_again_whole():
    """A span task that failed (a parser or decoder error, the file changed) hands back no span
    row: all the file's spans go, and the file is read once more, whole."""
    planned = {"a.log": [(0, 3), (100, 4), (200, 5)]}
    reported = [{"path": "a.log", "span_start": 0, "span_next": 100, "span_code": STOP_LIMIT, "first_base": 0, "last_offset": 9},
                {"path": "a.log", "span_start": 200, "span_next": 300, "span_code": 0, "first_base": 20, "last_offset": 29}]
    assert check_spans(planned, reported) == ({3, 4, 5}, {"a.log": 3}, [])


@pytest.mark.parametrize("damage", [stale_index, corrupt_length, zeros_across_a_cut, offset_regression], ids=lambda d: d.__name__)
def test_a_damaged_split_segment_ingests_to_the_same_tables(spark, bulk, tmp_path, damage):
    root = variant(bulk, tmp_path, damage)
    parts, (discard, rerun, between) = verdict(root, tmp_path / "work")
    tasks = [task for _, task in sorted(parts)]
    if damage is stale_index:
        assert rerun == {SEGMENT: tasks[0]} and discard == set(tasks)
    elif damage is corrupt_length:
        assert discard == set(tasks[2:]) and not rerun
    elif damage is zeros_across_a_cut:
        assert discard == set(tasks[3:]) and not rerun
    else:
        assert [(p, pos) for p, pos, _ in between] == [(SEGMENT, cuts_of(bulk)[1])] and not discard
    assert_same_tables(spark, root, tmp_path)
