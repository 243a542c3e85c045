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
