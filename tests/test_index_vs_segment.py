"""Every real index entry points into its own segment: Kafka 0.10-4.1 (found/), Kafka 3.6.2
(real-cluster/, including a killed broker's preallocated indexes) and the golden files."""

from __future__ import annotations

import pytest
from conftest import FOUND, GOLDEN, REAL

from parsers import offset_index, segment, time_index
from parsers.common import FileBytes


def _missing(ds):
    f = ds / "MISSING.tsv"
    if not f.exists():
        return set()
    return {ds / line.split("\t")[0] for line in f.read_text().splitlines() if line and not line.startswith("#")}


def _pairs(root, missing=frozenset()):
    for log in sorted(root.rglob("*.log")):
        if log in missing or "__cluster_metadata" in str(log.parent.name):
            continue
        for suffix, mod in ((".index", offset_index), (".timeindex", time_index)):
            idx = log.with_suffix(suffix)
            if idx.exists() and idx not in missing:
                yield log, idx, mod


ROOTS = [(d, _missing(d)) for d in sorted(FOUND.iterdir()) if d.is_dir()] + [(d, set()) for d in sorted(REAL.iterdir()) if d.is_dir()]
ROOTS += [(GOLDEN / "logdir", set())]


@pytest.mark.parametrize("root,missing", ROOTS, ids=lambda v: v.name if hasattr(v, "name") else "")
def test_index_entries_point_at_batches(root, missing):
    checked = 0
    for log, idx, mod in _pairs(root, missing):
        with FileBytes(log) as fb:
            batches = segment.parse(fb.data, str(log)).table
            size = len(fb.data)
        with FileBytes(idx) as fb:
            parsed = mod.parse(fb.data, str(idx))
        assert parsed.problems.num_rows == 0, (idx, parsed.problems.to_pylist())
        if mod is offset_index:
            probs = mod.verify_against_batches(parsed.table, batches, str(idx), segment_size=size)
            top = parsed.extra["index_info"]["max_position"][0].as_py()
            assert top is None or 0 < top < size, (idx, top)
        else:
            probs = mod.verify_against_batches(parsed.table, batches, str(idx))
        assert probs.num_rows == 0, (idx, probs.to_pylist())
        checked += parsed.table.num_rows
    if root.name in ("k20-zk-william0423", "k31-zk-aryanjadon", "logdir"):
        assert checked > 0


def test_index_past_eof_is_caught():
    case = GOLDEN / "corrupt" / "index-entry-past-eof"
    with FileBytes(case / "00000000000000000000.log") as fb:
        batches = segment.parse(fb.data, "x").table
        size = len(fb.data)
    with FileBytes(case / "00000000000000000000.index") as fb:
        parsed = offset_index.parse(fb.data, "i")
    probs = offset_index.verify_against_batches(parsed.table, batches, "i", segment_size=size).to_pylist()
    assert [p["kind"] for p in probs] == ["index_mismatch"]
    assert probs[0]["position"] == 24  # the 4th 8-byte entry


def test_the_index_files_row_says_which_index_points_past_its_segment():
    """``index_files.max_position`` (the highest real entry position) against the segment's size
    names the index with an entry past the end, and only it (``damage.indexes_past_eof``: the
    detector reads those indexes' entries alone, where it read every entry of every index)."""
    import pyarrow as pa

    from jobs.findings.damage import indexes_past_eof

    case = GOLDEN / "corrupt" / "index-entry-past-eof"
    size = (case / "00000000000000000000.log").stat().st_size
    with FileBytes(case / "00000000000000000000.index") as fb:
        info = offset_index.parse(fb.data, "d/t-0/00000000000000000000.index").extra["index_info"]
    top = info["max_position"][0].as_py()
    assert top >= size and top == max(p for p in offset_index.parse(
        (case / "00000000000000000000.index").read_bytes(), "i").table["position"].to_pylist())
    healthy = {"path": "d/t-1/00000000000000000000.index", "index_kind": "offset_index", "max_position": size - 1}
    time = {"path": "d/t-0/00000000000000000000.timeindex", "index_kind": "time_index", "max_position": None}
    no_segment = {"path": "d/t-2/00000000000000000000.index", "index_kind": "offset_index", "max_position": 10**9}
    index_files = pa.Table.from_pylist([{"path": info["path"][0].as_py(), "index_kind": "offset_index", "max_position": top},
                                        healthy, time, no_segment])
    files = pa.Table.from_pylist([{"path": "d/t-0/00000000000000000000.log", "kind": "segment", "size": size},
                                  {"path": "d/t-1/00000000000000000000.log", "kind": "segment", "size": size},
                                  {"path": "d/t-0/00000000000000000000.index", "kind": "offset_index", "size": 80}])
    assert indexes_past_eof(index_files, files) == ["d/t-0/00000000000000000000.index"]
