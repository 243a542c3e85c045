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


def test_every_parser_kind_and_decoder_is_fuzzed():
    """quorum-state (read by dump) and the internal-topic decoders are fuzzed like the file kinds."""
    assert set(fuzz_parsers.KINDS) == set(files.DUMP_KINDS) | {"consumer_offsets", "transaction_state", "share_group_state",
                                                                   "metadata_records", "remote_log_metadata"}


@pytest.mark.parametrize("kind", fuzz_parsers.KINDS)
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


def test_a_record_input_round_trips_and_any_bytes_decode():
    rec = (None, b"key", b"\x00\x01value")
    assert fuzz_parsers.decode_record_input(fuzz_parsers.encode_record(*rec)) == rec
    assert fuzz_parsers.decode_record_input(fuzz_parsers.encode_record("leader_change", None, None)) == ("leader_change", None, None)
    assert fuzz_parsers.decode_record_input(b"\x00\x09ab") == ("ab", None, None)  # lying lengths read what is there


def test_decoder_seeds_hold_real_records():
    seeds = fuzz_parsers.load_seeds()
    for kind in ("consumer_offsets", "transaction_state", "metadata_records", "remote_log_metadata"):
        keys = [fuzz_parsers.decode_record_input(s)[2] for s in seeds[kind]]
        assert sum(v is not None and len(v) > 8 for v in keys) >= 3, kind


def test_segment_seeds_are_small_whole_batches():
    from parsers import segment

    for data in fuzz_parsers.load_seeds()["segment"]:
        assert len(data) <= 16 << 10
        if len(data) <= fuzz_parsers.SEGMENT_SEED_BYTES:
            kinds = set(segment.parse(data, "s.log").problems.column("kind").to_pylist())
            assert "torn_tail" not in kinds


def test_an_input_over_the_time_cap_is_a_crash(seeds, tmp_path, monkeypatch):
    """A hang is a crash: with the per-input cap at a microsecond every input overruns it."""
    monkeypatch.setattr(fuzz_parsers, "CRASHES", tmp_path / "crashes")
    monkeypatch.setattr(fuzz_parsers, "HANG_SECONDS", 1e-6)
    got = fuzz_parsers.fuzz_kind("segment", 3, None, seed=1, seeds=seeds["segment"], log=lambda _: None)
    assert got["crashes"] and all("Hang" in p.with_suffix(".txt").read_text() for p in got["crashes"])
