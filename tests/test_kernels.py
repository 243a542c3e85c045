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
