"""``segment.iter_parse_stream``: a segment read a window at a time (how ``dump`` reads) must give
the rows and problems of the whole file read at once (``iter_parse``), at the file's positions,
while holding no more than one window of it."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import SHARED

from parsers import files, segment
from parsers.common import FileBytes, FileChanged, FileStream

FIXTURES = SHARED / "fixtures"


def _inputs() -> list[Path]:
    """Sound, damaged (every golden variant: torn and zero-filled tails, bad sizes, CRC flips...),
    real and v0/v1 segments."""
    roots = [FIXTURES / "golden", FIXTURES / "real-cluster" / "crash-only", FIXTURES / "found" / "k010-zk-v1-bullshit"]
    found = {p for root in roots for p in root.rglob("*") if p.is_file() and files.detect(str(p)) in files.SEGMENT_KINDS}
    return sorted(p for p in found if p.stat().st_size < (4 << 20))


def _same_pieces(expected: list, got: list, records: bool, path) -> None:
    """Piece by piece: ``dump`` prints a piece's problems after its rows, so where a piece ends shows."""
    assert len(expected) == len(got), path
    for want, have in zip(expected, got):
        assert want.table.equals(have.table) and want.problems.equals(have.problems), path
        assert not records or want.extra["records"].equals(have.extra["records"]), path


def _whole(parts: list, records: bool) -> tuple[pa.Table, pa.Table, pa.Table | None]:
    batches = pa.concat_tables([p.table for p in parts])
    problems = pa.concat_tables([p.problems for p in parts])
    recs = pa.concat_tables([p.extra["records"] for p in parts]) if records else None
    return batches, problems, recs


@pytest.mark.parametrize("records,payloads", [(False, False), (True, True)])
@pytest.mark.parametrize("chunk,slack", [(segment.CHUNK_BYTES, segment.WINDOW_SLACK), (4096, 100), (1, 0)])
def test_windows_read_as_the_whole_file(records, payloads, chunk, slack, monkeypatch):
    """Tiny windows cut batches short (the next window starts at them), and a batch longer than
    a window gets one of its own length; stops and damage are found at the file's positions."""
    monkeypatch.setattr(segment, "WINDOW_SLACK", slack)
    paths = _inputs()
    damaged = 0
    for path in paths:
        data = FileBytes(path).data
        expected = list(segment.iter_parse(data, str(path), records=records, payloads=payloads, chunk_bytes=chunk))
        with FileStream(path) as stream:
            got = list(segment.iter_parse_stream(stream, str(path), records=records, payloads=payloads, chunk_bytes=chunk))
        damaged += _whole(expected, records)[1].num_rows > 0
        _same_pieces(expected, got, records, path)
    assert len(paths) > 40 and damaged >= 8


def _big_segment(tmp_path: Path) -> Path:
    """~3 MiB of sound v2 batches: uncompressed ones, and zstd ones (records decoded from bytes
    decompressed out of the window)."""
    from sample_data.writer import bulk

    path = tmp_path / "00000000000000000000.log"
    plain = bulk.write_segment_file(tmp_path / "plain", bulk.make_templates("none", 10, 100, 12, 3, seed=1), target_bytes=2 << 20)
    packed = bulk.write_segment_file(tmp_path / "packed", bulk.make_templates("zstd", 10, 100, 12, 3, seed=2),
                                     target_bytes=1 << 20, base_offset=plain.records)
    path.write_bytes(Path(plain.path).read_bytes() + Path(packed.path).read_bytes())
    return path


def test_a_window_is_all_that_is_held(tmp_path):
    path = _big_segment(tmp_path)
    size = path.stat().st_size
    chunk = 64 << 10
    with FileStream(path) as stream:
        pieces = list(segment.iter_parse_stream(stream, str(path), records=True, chunk_bytes=chunk))
        held = stream._buf.nbytes
    assert held <= chunk + segment.WINDOW_SLACK < size // 2
    expected = segment.parse(FileBytes(path).data, str(path), records=True)
    assert len(pieces) > 10
    got = _whole(pieces, True)
    assert got[0].equals(expected.table) and got[2].equals(expected.extra["records"])
    assert got[1].num_rows == 0


def test_dump_reads_segments_through_windows(tmp_path, monkeypatch):
    """``files.parse_path`` (dump's reader) streams a segment: the same rows, a window held."""
    path = _big_segment(tmp_path)
    opened: list[FileStream] = []

    class Watched(FileStream):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            opened.append(self)

    monkeypatch.setattr(files, "FileStream", Watched)
    parts = list(files.parse_path(str(path), "segment", records=True))
    expected = segment.parse(FileBytes(path).data, str(path), records=True)
    assert _whole(parts, True)[0].equals(expected.table)
    assert len(opened) == 1 and opened[0]._fd == -1  # closed once read


def test_a_file_that_shrinks_while_read_is_named(tmp_path):
    path = _big_segment(tmp_path)
    size = path.stat().st_size
    with FileStream(path) as stream:
        reader = segment.iter_parse_stream(stream, str(path), chunk_bytes=64 << 10)
        next(reader)
        os.truncate(path, 0)  # (below the window being read, not inside it)
        with pytest.raises(FileChanged, match=f"shrank from {size} to 0 bytes"):
            list(reader)


def _damage(data: bytes, how: str) -> bytes:
    """The damage a disk or a crash leaves, far from the first window."""
    at = len(data) * 2 // 3
    seg = segment.parse(data, "x").table
    pos = seg.column("position").to_numpy()
    batch = int(pos[pos.searchsorted(at)])  # a batch boundary past two thirds of the file
    if how == "torn":
        return data[: batch + 30]
    if how == "zeros":
        return data + bytes(3 << 20)
    if how == "past_eof":  # a batch length pointing past the end of the file
        return data[: batch + 8] + (2**31 - 1).to_bytes(4, "big") + data[batch + 12 :]
    if how == "bad_size":
        return data[: batch + 8] + (3).to_bytes(4, "big") + data[batch + 12 :]
    if how == "crc":
        return data[: batch + 70] + bytes([data[batch + 70] ^ 1]) + data[batch + 71 :]
    raise ValueError(how)


@pytest.mark.parametrize("how", ["torn", "zeros", "past_eof", "bad_size", "crc"])
def test_damage_past_the_first_windows(tmp_path, how):
    data = _damage(_big_segment(tmp_path).read_bytes(), how)
    path = tmp_path / "damaged" / "00000000000000000000.log"
    path.parent.mkdir()
    path.write_bytes(data)
    chunk = 64 << 10
    expected = list(segment.iter_parse(data, str(path), records=True, chunk_bytes=chunk))
    with FileStream(path) as stream:
        got = list(segment.iter_parse_stream(stream, str(path), records=True, chunk_bytes=chunk))
        held = stream._buf.nbytes
    assert _whole(expected, True)[1].num_rows >= 1
    _same_pieces(expected, got, True, path)
    assert held <= chunk + segment.WINDOW_SLACK  # a damaged length, a zero tail: never the rest of the file


def test_a_batch_the_window_cuts_inside_its_chunk_is_read_whole(tmp_path):
    """A batch longer than the window's slack, starting near the end of a chunk: the window grows
    to it, so the pieces are ``iter_parse``'s (the chunk ends after that batch, not before it)."""
    from sample_data.writer import bulk

    small = tmp_path / "small"
    big = tmp_path / "big"
    tail = tmp_path / "tail"
    a = bulk.write_segment_file(small, bulk.make_templates("none", 10, 100, 12, 3, seed=1), target_bytes=60_000)
    huge = bulk.template_from_records([bulk.Record(b"key", bytes(range(256)) * 6000, 0)])  # a 1.5 MB record
    b = bulk.write_segment_file(big, [huge], max_batches=1, base_offset=a.records)
    bulk.write_segment_file(tail, bulk.make_templates("none", 10, 100, 12, 3, seed=3), target_bytes=200_000,
                            base_offset=a.records + b.records)
    path = tmp_path / "00000000000000000000.log"
    data = small.read_bytes() + big.read_bytes() + tail.read_bytes()
    flip = len(data) - 5000  # a CRC mismatch after the big batch: its line's place shows where pieces end
    path.write_bytes(data[:flip] + bytes([data[flip] ^ 1]) + data[flip + 1 :])
    chunk = 64 << 10
    assert a.size < chunk < a.size + b.size and b.size > segment.WINDOW_SLACK
    expected = list(segment.iter_parse(path.read_bytes(), str(path), records=True, chunk_bytes=chunk))
    with FileStream(path) as stream:
        got = list(segment.iter_parse_stream(stream, str(path), records=True, chunk_bytes=chunk))
    _same_pieces(expected, got, True, path)
    assert _whole(got, True)[1].num_rows >= 1
