"""The JIT kernels against Python's own implementations, on random data: CRC-32C, CRC-32 and both
SHA-256 paths (OpenSSL through ctypes, and the portable JIT fallback)."""

from __future__ import annotations

import hashlib
import zlib

import crc32c
import numpy as np
import pytest

from parsers import _kernels as K

RNG = np.random.default_rng(7)
DATA = RNG.integers(0, 256, 70_000).astype(np.uint8)
LENGTHS = [0, 1, 7, 8, 55, 56, 63, 64, 65, 119, 120, 1000, 65_000]


@pytest.mark.parametrize("n", LENGTHS)
def test_crcs(n):
    assert K.crc_update(K.CRC32C_TABLE, DATA, 3, 3 + n) == crc32c.crc32c(DATA[3 : 3 + n].tobytes())
    assert K.crc_update(K.CRC32_TABLE, DATA, 5, 5 + n) == zlib.crc32(DATA[5 : 5 + n].tobytes())


@pytest.mark.parametrize("fn", [K.sha256_many, K.sha256_many_jit], ids=["dispatch", "jit"])
def test_sha256_many(fn):
    pos = np.array([11 + i for i in range(len(LENGTHS))] + [0], np.int64)
    length = np.array(LENGTHS + [-1], np.int64)
    out = np.zeros((len(pos), 32), np.uint8)
    fn(DATA, pos, length, out)
    for i, n in enumerate(LENGTHS):
        assert out[i].tobytes() == hashlib.sha256(DATA[pos[i] : pos[i] + n].tobytes()).digest(), n
    assert not out[-1].any()  # null (length -1) is left untouched


def test_the_lazy_kernels_module_retries_an_interrupted_import(tmp_path, monkeypatch):
    """The parsers load the kernels on first use (``lazy_module``). An import cut short (a fuzz
    input's alarm, Ctrl-C) must leave nothing half-initialised: the next access imports again."""
    from parsers.common import lazy_module

    (tmp_path / "kf_flaky_kernels.py").write_text(
        "import os\nif os.environ.get('KF_FLAKY') == '1':\n    raise KeyboardInterrupt\nVALUE = 7\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("KF_FLAKY", "1")
    m = lazy_module("kf_flaky_kernels")
    with pytest.raises(KeyboardInterrupt):
        _ = m.VALUE
    monkeypatch.setenv("KF_FLAKY", "0")
    assert m.VALUE == 7


def test_hardware_crc32c_ranges_are_the_packages():
    """Batches over ``segment.BIG_CRC`` get their CRC-32C from the package's hardware function,
    called from a compiled loop; where it is not used the package says its CRC is not hardware."""
    rng = np.random.default_rng(3)
    buf = rng.integers(0, 256, 300_000, dtype=np.uint8)
    start = rng.integers(0, 150_000, 200)
    length = rng.integers(0, 150_000, 200)
    length[:3] = [0, 1, 8193]
    got = K.crc32c_ranges(buf, start, length)
    if got is None:
        assert not crc32c.hardware_based
        return
    assert got.tolist() == [crc32c.crc32c(buf[s : s + n].tobytes()) for s, n in zip(start, length)]


def test_a_flipped_byte_in_a_big_batch_is_its_crc_mismatch_alone():
    from conftest import REAL

    from parsers import segment

    path = REAL / "crash-only" / "broker-1" / "tc-0" / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    sound = segment.parse(bytes(data), "x.log").table
    positions, sizes = sound.column("position").to_pylist(), sound.column("size").to_pylist()
    assert all(sound.column("crc_valid").to_pylist()) and min(sizes) > segment.BIG_CRC
    flipped = positions[1::3]
    for p, s in zip(positions[1::3], sizes[1::3]):
        data[p + s - 5] ^= 0x40  # a byte of the last record
    got = segment.parse(bytes(data), "x.log")
    assert [p for p, ok in zip(positions, got.table.column("crc_valid").to_pylist()) if not ok] == flipped
    assert [r["position"] for r in got.problems.to_pylist() if r["kind"] == "crc_mismatch"] == flipped


def test_hardware_crc32c_takes_only_contiguous_bytes():
    """The hardware function reads memory from the buffer's address: a strided view would be
    read as the bytes beside it (a false crc_mismatch), so it is left to the package."""
    buf = np.random.default_rng(5).integers(0, 256, 4000, dtype=np.uint8)
    strided = np.repeat(buf, 2)[::2]
    assert K.crc32c_ranges(strided, np.array([0]), np.array([3000])) is None
    assert K.crc32c_ranges(buf.view(np.int8), np.array([0]), np.array([3000])) is None
