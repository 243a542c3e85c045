"""``segment.parse_many``: several small segments read in one pass must give, file by file, what
reading each alone gives (``iter_parse``), or leave the file to that reading."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED

from parsers import segment

FIXTURES = SHARED / "fixtures"
STOPS = {"torn_tail", "zero_filled_tail"}


def _segments() -> list[Path]:
    roots = [FIXTURES / "golden" / "logdir", FIXTURES / "golden" / "corrupt", FIXTURES / "real-cluster" / "crash-only",
             FIXTURES / "found" / "k010-zk-v1-bullshit"]
    return sorted(p for root in roots for p in root.rglob("*.log") if p.is_file() and p.stat().st_size < (1 << 20))


@pytest.mark.parametrize("records,payloads", [(False, False), (True, False), (True, True)])
def test_each_file_reads_as_alone(records, payloads):
    paths = _segments()
    datas = [p.read_bytes() for p in paths]
    many = segment.parse_many(datas, [str(p) for p in paths], records=records, payloads=payloads)
    together = 0
    for path, data, got in zip(paths, datas, many):
        alone = list(segment.iter_parse(data, str(path), records=records, payloads=payloads))
        if got is None:  # left to a reading of its own: it stops early or holds v0/v1 messages
            kinds = {k for piece in alone for k in piece.problems.column("kind").to_pylist()}
            magics = {m for piece in alone for m in piece.table.column("magic").to_pylist()}
            assert kinds & (STOPS | {"invalid_batch"}) or magics & {0, 1}, path
            continue
        together += 1
        assert len(alone) == 1, path
        assert got.table.equals(alone[0].table), path
        assert got.problems.equals(alone[0].problems), path
        if records:
            assert got.extra["records"].equals(alone[0].extra["records"]), path
    assert together > 20


def test_files_side_by_side_keep_their_own_positions_and_offsets():
    """The same segment twice: the second's batches start at position 0 again, and its first
    batch (offset 0 after the first file's last) is no offset regression: each file is its own log."""
    path = FIXTURES / "real-cluster" / "crash-only"
    seg = next(p for p in sorted(path.rglob("*.log")) if p.stat().st_size > 1000 and "__" not in str(p))
    data = seg.read_bytes()
    alone = segment.parse(data, str(seg), records=True)
    a, b = segment.parse_many([data, data], ["a", "b"], records=True)
    for got in (a, b):
        assert got.table.column("position").to_pylist() == alone.table.column("position").to_pylist()
        assert got.extra["records"].column("position").to_pylist() == alone.extra["records"].column("position").to_pylist()
        assert got.problems.num_rows == alone.problems.num_rows == 0


def test_a_damaged_file_is_left_alone_and_its_neighbours_are_not():
    seg = FIXTURES / "golden" / "logdir" / "golden-topic-0" / "00000000000000000000.log"
    data = seg.read_bytes()
    torn = data[:-7]  # a torn tail: reading stops before the end
    first, second, third = segment.parse_many([data, torn, data], ["a", "b", "c"])
    assert second is None
    assert first is not None and third is not None
    assert first.table.equals(third.table) and first.table.num_rows > 0
