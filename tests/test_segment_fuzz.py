"""The segment parser never raises, whatever the bytes: mutations of Kafka's own files and noise."""

from __future__ import annotations

import numpy as np
from conftest import GOLDEN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import segment

SEEDS = [p.read_bytes() for p in sorted((GOLDEN / "logdir").rglob("*.log"))]
KINDS = {"crc_mismatch", "torn_tail", "zero_filled_tail", "invalid_batch", "offset_regression"}


def _check(data: bytes) -> None:
    got = segment.parse(data, "fuzz.log", records=True)
    assert set(got.problems.column("kind").to_pylist()) <= KINDS
    pos = got.table.column("position").to_numpy()
    assert (np.diff(pos) > 0).all()
    assert all(0 <= p <= len(data) for p in got.problems.column("position").to_pylist())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(SEEDS), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=8), cut=st.integers(0, 10**6))
def test_mutated_golden_segments_never_raise(seed, flips, cut):
    data = bytearray(seed)
    for where, val in flips:
        data[where % len(data)] = val
    _check(bytes(data[: cut % (len(data) + 1)]))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096))
def test_noise_never_raises(data):
    _check(data)


def test_a_flipped_byte_is_a_crc_mismatch_not_a_crash():
    data = bytearray(SEEDS[0])
    data[100] ^= 0xFF
    kinds = set(segment.parse(bytes(data), "x.log", records=True).problems.column("kind").to_pylist())
    assert "crc_mismatch" in kinds
