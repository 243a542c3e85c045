"""A short run of fuzz/fuzz_parsers.py in CI: every parser kind gets a few hundred mutants of its
seeds (deterministic: a fixed seed and a fixed count, no clock), and none may crash (raise, or
break the contract: schema, problem vocabulary, positions). The long run is the script itself."""

from __future__ import annotations

import sys

import pytest
from conftest import REPO

from parsers import files

sys.path.insert(0, str(REPO / "fuzz"))
import fuzz_parsers  # noqa: E402

INPUTS = 300


@pytest.fixture(scope="module")
def seeds():
    return fuzz_parsers.load_seeds()


@pytest.mark.parametrize("kind", sorted(files.KINDS))
def test_short_fuzz_finds_no_crash(kind, seeds, tmp_path, monkeypatch):
    monkeypatch.setattr(fuzz_parsers, "CRASHES", tmp_path / "crashes")
    assert fuzz_parsers.VOCABULARY, "the finding vocabulary (jobs.findings.registry) must load"
    assert len(seeds[kind]) >= 2, f"{kind} has too few seeds to mutate"
    got = fuzz_parsers.fuzz_kind(kind, INPUTS, None, seed=9, seeds=seeds[kind], log=lambda _: None)
    crashes = [p.with_suffix(".txt").read_text() for p in got["crashes"]]
    assert not crashes, "\n\n".join(crashes)
    assert got["inputs"] == INPUTS and INPUTS - len(seeds[kind]) >= 200  # mostly mutants, not just the seeds


def test_mutations_change_the_input():
    import random

    seeds = fuzz_parsers.writer_seeds()["segment"]
    rng = random.Random(1)
    outs = [fuzz_parsers.mutate(rng, seeds[0], seeds, "segment") for _ in range(50)]
    assert sum(o != seeds[0] for o in outs) >= 45
