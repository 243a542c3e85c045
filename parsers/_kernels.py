"""JIT-compiled loops over segment bytes: the batch hop, CRCs, varint record decoding, SHA-256.

Why numba: a segment is a chain (each batch's length gives the next batch's position), so the hop
cannot be vectorised, and a Python loop over batches or records runs at ~0.25 M/s. These kernels
run the same loops as machine code and hand back plain numpy arrays that become Arrow columns.
Every read is bounds-checked against ``end``: hostile bytes produce error codes, never a crash.

All multi-byte integers in Kafka's formats are big-endian; varints are zig-zag LEB128
(``ByteUtils.readVarint`` / ``readVarlong``).
"""

from __future__ import annotations

from functools import cache

import numpy as np
from numba import njit, types

from .headers import (  # layouts, header-matrix columns and error codes: one leaf module
    ERR_BOUNDS,
    ERR_COUNT,
    ERR_NEGATIVE,
    ERR_NONE,
    ERR_RECORD_SIZE,
    ERR_TOO_MANY,
    ERR_VARINT,
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY_ATTRIBUTES,
    LEGACY_CRC,
    LEGACY_TIMESTAMP,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_OVERHEAD_V0,
    SIZE_OFFSET,
    STOP_BAD_SIZE,
    STOP_END,
    STOP_LIMIT,
    STOP_PAST_EOF,
    STOP_SHORT,
    V2_ATTRIBUTES,
    V2_BASE_SEQUENCE,
    V2_BASE_TIMESTAMP,
    V2_CRC,
    V2_HEADER_SIZE,
    V2_LAST_OFFSET_DELTA,
    V2_MAX_TIMESTAMP,
    V2_PARTITION_LEADER_EPOCH,
    V2_PRODUCER_EPOCH,
    V2_PRODUCER_ID,
    V2_RECORDS_COUNT,
    H,
    R,
)


@njit(cache=True, inline="always")
def _i64(b, p):
    v = np.int64(0)
    for i in range(8):
        v = (v << 8) | np.int64(b[p + i])
    return v


@njit(cache=True, inline="always")
def _i32(b, p):
    v = (np.int64(b[p]) << 24) | (np.int64(b[p + 1]) << 16) | (np.int64(b[p + 2]) << 8) | np.int64(b[p + 3])
    if v >= 0x80000000:
        v -= 0x100000000
    return v


@njit(cache=True, inline="always")
def _u32(b, p):
    return (np.int64(b[p]) << 24) | (np.int64(b[p + 1]) << 16) | (np.int64(b[p + 2]) << 8) | np.int64(b[p + 3])


@njit(cache=True, inline="always")
def _i16(b, p):
    v = (np.int64(b[p]) << 8) | np.int64(b[p + 1])
    if v >= 0x8000:
        v -= 0x10000
    return v


@njit(cache=True)
def scan(buf, start, end, limit, max_batches, out_pos, out_size):
    """Hop from batch to batch exactly as ``FileLogInputStream.nextBatch`` does.

    Returns (count, next position, stop code). ``out_size`` receives the whole batch size
    (LOG_OVERHEAD + batchLength). Stops before a batch that starts at or after ``limit`` (chunking).
    """
    pos = np.int64(start)
    n = 0
    while True:
        if pos >= end:
            return n, pos, STOP_END
        if pos >= end - HEADER_SIZE_UP_TO_MAGIC:
            return n, pos, STOP_SHORT
        if pos >= limit or n >= max_batches:
            return n, pos, STOP_LIMIT
        size = _i32(buf, pos + SIZE_OFFSET)
        if size < RECORD_OVERHEAD_V0:
            return n, pos, STOP_BAD_SIZE
        if pos > end - LOG_OVERHEAD - size:
            return n, pos, STOP_PAST_EOF
        out_pos[n] = pos
        out_size[n] = size + LOG_OVERHEAD
        pos += size + LOG_OVERHEAD
        n += 1


# ---------------------------------------------------------------------------- CRCs


def _crc_tables(poly: int) -> np.ndarray:
    """Slicing-by-8 tables for a reflected CRC-32 polynomial."""
    t = np.zeros((8, 256), dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (poly if c & 1 else 0)
        t[0, i] = c
    for i in range(256):
        c = int(t[0, i])
        for k in range(1, 8):
            c = (c >> 8) ^ int(t[0, c & 0xFF])
            t[k, i] = c
    return t


CRC32C_TABLE = _crc_tables(0x82F63B78)  # Castagnoli, used by v2 batches and producer snapshots
CRC32_TABLE = _crc_tables(0xEDB88320)  # IEEE (zlib), used by v0/v1 messages


@njit(cache=True)
def crc_update(table, buf, start, stop):
    """Reflected CRC-32 of buf[start:stop] with the given slicing-by-8 tables."""
    crc = np.uint32(0xFFFFFFFF)
    p = start
    while p + 8 <= stop:
        lo = crc ^ (np.uint32(buf[p]) | (np.uint32(buf[p + 1]) << 8) | (np.uint32(buf[p + 2]) << 16) | (np.uint32(buf[p + 3]) << 24))
        crc = (
            table[7, lo & 0xFF]
            ^ table[6, (lo >> 8) & 0xFF]
            ^ table[5, (lo >> 16) & 0xFF]
            ^ table[4, lo >> 24]
            ^ table[3, buf[p + 4]]
            ^ table[2, buf[p + 5]]
            ^ table[1, buf[p + 6]]
            ^ table[0, buf[p + 7]]
        )
        p += 8
    while p < stop:
        crc = table[0, (crc ^ np.uint32(buf[p])) & 0xFF] ^ (crc >> 8)
        p += 1
    return crc ^ np.uint32(0xFFFFFFFF)


# ---------------------------------------------------------------------------- batch headers



@njit(cache=True)
def read_headers(buf, pos, size, big_crc, crcc_table, crc32_table, h):
    """Decode every batch/message header at ``pos``/``size`` into the int64 matrix ``h``.

    Columns of ``h``: ``headers.H`` (Kafka's header fields, then the computed CRC and, for v0/v1,
    the key length and the value's position and length).
    The CRC is computed here unless the batch is larger than ``big_crc`` (then -1: the caller
    uses the hardware CRC library, which wins on big buffers).
    """
    for i in range(pos.shape[0]):
        p = pos[i]
        s = size[i]
        e = p + s
        magic = np.int64(buf[p + MAGIC_OFFSET])
        if magic >= 128:
            magic -= 256
        h[i, H.BASE_OFFSET] = _i64(buf, p)
        h[i, H.MAGIC] = magic
        h[i, H.CRC] = _u32(buf, p + V2_CRC) if magic >= 2 else _u32(buf, p + LEGACY_CRC)
        h[i, H.COMPUTED_CRC] = -1
        if magic >= 2:
            h[i, H.PARTITION_LEADER_EPOCH] = _i32(buf, p + V2_PARTITION_LEADER_EPOCH)
            if s >= V2_HEADER_SIZE:
                h[i, H.ATTRIBUTES] = _i16(buf, p + V2_ATTRIBUTES)
                h[i, H.LAST_OFFSET_DELTA] = _i32(buf, p + V2_LAST_OFFSET_DELTA)
                h[i, H.BASE_TIMESTAMP] = _i64(buf, p + V2_BASE_TIMESTAMP)
                h[i, H.MAX_TIMESTAMP] = _i64(buf, p + V2_MAX_TIMESTAMP)
                h[i, H.PRODUCER_ID] = _i64(buf, p + V2_PRODUCER_ID)
                h[i, H.PRODUCER_EPOCH] = _i16(buf, p + V2_PRODUCER_EPOCH)
                h[i, H.BASE_SEQUENCE] = _i32(buf, p + V2_BASE_SEQUENCE)
                h[i, H.RECORDS_COUNT] = _i32(buf, p + V2_RECORDS_COUNT)
                if s <= big_crc:
                    h[i, H.COMPUTED_CRC] = crc_update(crcc_table, buf, p + V2_ATTRIBUTES, e)
            else:
                for c in range(H.ATTRIBUTES, H.COMPUTED_CRC):
                    h[i, c] = -1
                h[i, H.ATTRIBUTES] = 0
            h[i, H.KEY_LENGTH] = -1
            h[i, H.VALUE_POSITION] = p + V2_HEADER_SIZE
            h[i, H.VALUE_LENGTH] = e - (p + V2_HEADER_SIZE)
        else:
            # LegacyRecord: crc(4) magic(1) attributes(1) [timestamp(8) if v1] key_len(4) key value_len(4) value
            h[i, H.PARTITION_LEADER_EPOCH] = -1
            h[i, H.ATTRIBUTES] = np.int64(buf[p + LEGACY_ATTRIBUTES])
            h[i, H.LAST_OFFSET_DELTA] = 0
            q = p + LEGACY_TIMESTAMP  # v0: the key length is here
            ts = np.int64(-1)
            if magic == 1:
                if q + 8 <= e:
                    ts = _i64(buf, q)
                q += 8
            h[i, H.BASE_TIMESTAMP] = ts
            h[i, H.MAX_TIMESTAMP] = ts
            h[i, H.PRODUCER_ID] = -1
            h[i, H.PRODUCER_EPOCH] = -1
            h[i, H.BASE_SEQUENCE] = -1
            h[i, H.RECORDS_COUNT] = 1
            if s <= big_crc:
                h[i, H.COMPUTED_CRC] = crc_update(crc32_table, buf, p + MAGIC_OFFSET, e)
            klen = np.int64(-2)
            vpos = np.int64(-1)
            vlen = np.int64(-2)
            if q + 4 <= e:
                klen = _i32(buf, q)
                q += 4
                if klen > 0:
                    q += klen
                if klen >= -1 and q + 4 <= e:
                    vlen = _i32(buf, q)
                    q += 4
                    vpos = q
                    if vlen > e - q or vlen < -1:
                        vlen = -2
                    elif q + max(vlen, 0) != e:
                        vlen = -3  # trailing bytes after the value
                else:
                    klen = -2
            h[i, H.KEY_LENGTH] = klen
            h[i, H.VALUE_POSITION] = vpos
            h[i, H.VALUE_LENGTH] = vlen


# ---------------------------------------------------------------------------- v2 records

# the ERR_* codes decode_v2 reports per batch live in headers.py (default_records names them)


@njit(cache=True, inline="always")
def _varlong(buf, p, end, maxbytes):
    """Zig-zag LEB128; returns (value, new position, ok)."""
    raw = np.uint64(0)
    shift = np.uint64(0)
    for _ in range(maxbytes):
        if p >= end:
            return np.int64(0), p, False
        b = np.uint64(buf[p])
        p += 1
        raw |= (b & np.uint64(0x7F)) << shift
        if b < 0x80:
            v = np.int64(raw >> np.uint64(1)) ^ -np.int64(raw & np.uint64(1))
            return v, p, True
        shift += np.uint64(7)
    return np.int64(0), p, False


@njit(cache=True)
def decode_v2(buf, starts, ends, counts, base_offsets, base_ts, log_append, max_ts, out_i64, batch_err, batch_nrec):
    """Decode the records of v2 batches whose record bytes are buf[starts[j]:ends[j]].

    ``out_i64`` rows: one per record, its columns ``headers.R``.
    Returns the number of records written. Per batch, ``batch_err`` gets an ERR_* code (and
    decoding of that batch stops there, as Kafka's iterator would throw).
    """
    n = 0
    cap = out_i64.shape[0]
    for j in range(starts.shape[0]):
        p = starts[j]
        end = ends[j]
        err = ERR_NONE
        k = 0
        while k < counts[j]:
            if n >= cap:
                err = ERR_TOO_MANY
                break
            rec_pos = p
            length, p, ok = _varlong(buf, p, end, 5)
            if not ok:
                err = ERR_VARINT
                break
            if length < 0 or p + length > end:
                err = ERR_BOUNDS
                break
            rend = p + length
            p += 1  # attributes (unused)
            tsd, p, ok = _varlong(buf, p, rend, 10)
            if not ok:
                err = ERR_VARINT
                break
            od, p, ok = _varlong(buf, p, rend, 5)
            if not ok:
                err = ERR_VARINT
                break
            klen, p, ok = _varlong(buf, p, rend, 5)
            if not ok:
                err = ERR_VARINT
                break
            kpos = p
            if klen > 0:
                p += klen
            if p > rend:
                err = ERR_BOUNDS
                break
            vlen, p, ok = _varlong(buf, p, rend, 5)
            if not ok:
                err = ERR_VARINT
                break
            vpos = p
            if vlen > 0:
                p += vlen
            if p > rend:
                err = ERR_BOUNDS
                break
            nh, p, ok = _varlong(buf, p, rend, 5)
            if not ok:
                err = ERR_VARINT
                break
            if nh < 0:
                err = ERR_NEGATIVE
                break
            hpos = p
            for _ in range(nh):
                hk, p, ok = _varlong(buf, p, rend, 5)
                if not ok or hk < 0:
                    err = ERR_NEGATIVE if ok else ERR_VARINT
                    break
                p += hk
                hv, p, ok = _varlong(buf, p, rend, 5)
                if not ok:
                    err = ERR_VARINT
                    break
                if hv > 0:
                    p += hv
                if p > rend:
                    err = ERR_BOUNDS
                    break
            if err != ERR_NONE:
                break
            if p != rend:
                err = ERR_RECORD_SIZE
                break
            out_i64[n, R.BATCH] = j
            out_i64[n, R.OFFSET] = base_offsets[j] + od
            out_i64[n, R.TIMESTAMP] = max_ts[j] if log_append[j] else base_ts[j] + tsd
            out_i64[n, R.POSITION] = rec_pos
            out_i64[n, R.KEY_POSITION] = kpos
            out_i64[n, R.KEY_LENGTH] = klen if klen >= 0 else -1
            out_i64[n, R.VALUE_POSITION] = vpos
            out_i64[n, R.VALUE_LENGTH] = vlen if vlen >= 0 else -1
            out_i64[n, R.HEADERS] = nh
            out_i64[n, R.HEADERS_POSITION] = hpos
            out_i64[n, R.HEADERS_LENGTH] = rend - hpos
            n += 1
            k += 1
        if err == ERR_NONE and p != end:
            err = ERR_COUNT
        batch_err[j] = err
        batch_nrec[j] = k
    return n


# ---------------------------------------------------------------------------- SHA-256

_K256 = np.array(
    [
        0x428A2F98, 0x71374491, 0xB5C0FBCF, 0xE9B5DBA5, 0x3956C25B, 0x59F111F1, 0x923F82A4, 0xAB1C5ED5,
        0xD807AA98, 0x12835B01, 0x243185BE, 0x550C7DC3, 0x72BE5D74, 0x80DEB1FE, 0x9BDC06A7, 0xC19BF174,
        0xE49B69C1, 0xEFBE4786, 0x0FC19DC6, 0x240CA1CC, 0x2DE92C6F, 0x4A7484AA, 0x5CB0A9DC, 0x76F988DA,
        0x983E5152, 0xA831C66D, 0xB00327C8, 0xBF597FC7, 0xC6E00BF3, 0xD5A79147, 0x06CA6351, 0x14292967,
        0x27B70A85, 0x2E1B2138, 0x4D2C6DFC, 0x53380D13, 0x650A7354, 0x766A0ABB, 0x81C2C92E, 0x92722C85,
        0xA2BFE8A1, 0xA81A664B, 0xC24B8B70, 0xC76C51A3, 0xD192E819, 0xD6990624, 0xF40E3585, 0x106AA070,
        0x19A4C116, 0x1E376C08, 0x2748774C, 0x34B0BCB5, 0x391C0CB3, 0x4ED8AA4A, 0x5B9CCA4F, 0x682E6FF3,
        0x748F82EE, 0x78A5636F, 0x84C87814, 0x8CC70208, 0x90BEFFFA, 0xA4506CEB, 0xBEF9A3F7, 0xC67178F2,
    ],
    dtype=np.uint32,
)  # fmt: skip
_H256 = np.array(
    [0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19], dtype=np.uint32
)


_M32 = np.uint64(0xFFFFFFFF)


@njit(cache=True, inline="always")
def _rotr(x, n):
    x = np.uint64(x) & _M32
    return np.uint32(((x >> np.uint64(n)) | (x << np.uint64(32 - n))) & _M32)


@njit(cache=True)
def _compress(state, block, w, k):
    for t in range(16):
        w[t] = (
            (np.uint32(block[4 * t]) << np.uint32(24))
            | (np.uint32(block[4 * t + 1]) << np.uint32(16))
            | (np.uint32(block[4 * t + 2]) << np.uint32(8))
            | np.uint32(block[4 * t + 3])
        )
    for t in range(16, 64):
        x = w[t - 15]
        y = w[t - 2]
        s0 = _rotr(x, 7) ^ _rotr(x, 18) ^ (x >> np.uint32(3))
        s1 = _rotr(y, 17) ^ _rotr(y, 19) ^ (y >> np.uint32(10))
        w[t] = np.uint32((np.uint64(w[t - 16]) + s0 + w[t - 7] + s1) & _M32)
    a, b, c, d = state[0], state[1], state[2], state[3]
    e, f, g, hh = state[4], state[5], state[6], state[7]
    for t in range(64):
        s1 = _rotr(e, 6) ^ _rotr(e, 11) ^ _rotr(e, 25)
        ch = (e & f) ^ (np.uint32(~e) & g)
        t1 = np.uint32((np.uint64(hh) + s1 + ch + k[t] + w[t]) & _M32)
        s0 = _rotr(a, 2) ^ _rotr(a, 13) ^ _rotr(a, 22)
        mj = (a & b) ^ (a & c) ^ (b & c)
        t2 = np.uint32((np.uint64(s0) + mj) & _M32)
        hh = g
        g = f
        f = e
        e = np.uint32((np.uint64(d) + t1) & _M32)
        d = c
        c = b
        b = a
        a = np.uint32((np.uint64(t1) + t2) & _M32)
    state[0] = np.uint32((np.uint64(state[0]) + a) & _M32)
    state[1] = np.uint32((np.uint64(state[1]) + b) & _M32)
    state[2] = np.uint32((np.uint64(state[2]) + c) & _M32)
    state[3] = np.uint32((np.uint64(state[3]) + d) & _M32)
    state[4] = np.uint32((np.uint64(state[4]) + e) & _M32)
    state[5] = np.uint32((np.uint64(state[5]) + f) & _M32)
    state[6] = np.uint32((np.uint64(state[6]) + g) & _M32)
    state[7] = np.uint32((np.uint64(state[7]) + hh) & _M32)


@njit(cache=True)
def sha256_many_jit(buf, pos, length, out):
    """SHA-256 of buf[pos[i]:pos[i]+length[i]] into out[i] (32 bytes); skipped where length < 0.

    Portable fallback; ``sha256_many`` prefers OpenSSL's SHA-NI code when it can be reached.
    """
    state = np.empty(8, np.uint32)
    w = np.empty(64, np.uint32)
    tail = np.empty(128, np.uint8)
    for i in range(pos.shape[0]):
        n = length[i]
        if n < 0:
            continue
        p = pos[i]
        for t in range(8):
            state[t] = _H256[t]
        full = n // 64
        for blk in range(full):
            _compress(state, buf[p + 64 * blk : p + 64 * blk + 64], w, _K256)
        rem = n - full * 64
        for t in range(128):
            tail[t] = 0
        for t in range(rem):
            tail[t] = buf[p + full * 64 + t]
        tail[rem] = 0x80
        nblk = 1 if rem < 56 else 2
        bits = np.uint64(n) * np.uint64(8)
        last = nblk * 64
        for t in range(8):
            tail[last - 1 - t] = np.uint8((bits >> np.uint64(8 * t)) & np.uint64(0xFF))
        _compress(state, tail[0:64], w, _K256)
        if nblk == 2:
            _compress(state, tail[64:128], w, _K256)
        for t in range(8):
            s = state[t]
            out[i, 4 * t] = np.uint8(s >> np.uint32(24))
            out[i, 4 * t + 1] = np.uint8((s >> np.uint32(16)) & np.uint32(0xFF))
            out[i, 4 * t + 2] = np.uint8((s >> np.uint32(8)) & np.uint32(0xFF))
            out[i, 4 * t + 3] = np.uint8(s & np.uint32(0xFF))


# ---------------------------------------------------------------------------- SHA-256 via OpenSSL
#
# Hashing every key and value dominates record-level decoding. OpenSSL (already loaded by
# Python's hashlib) uses the CPU's SHA extensions: ~3x faster than the JIT kernel above. It is
# called from a JIT loop through ctypes, so there is still no Python call per record. The three
# OpenSSL functions reach the loop as first-class function arguments (numba's
# WrapperAddressProtocol), not as constants baked into it, so the loop is compiled once and
# cached on disk like every other kernel here (a baked address differs in every process).


class _CFunction(types.WrapperAddressProtocol):
    """A ctypes C function as a numba first-class function argument."""

    def __init__(self, fn, signature):
        self._fn, self._signature = fn, signature
        self._type = None

    def __wrapper_address__(self) -> int:
        import ctypes

        return ctypes.cast(self._fn, ctypes.c_void_p).value

    def signature(self):
        return self._signature


@njit(cache=True)
def _sha256_openssl(init, update, final, buf, pos, length, out, ctx):
    base = np.uint64(buf.ctypes.data)
    c = np.uint64(ctx.ctypes.data)
    for i in range(pos.shape[0]):
        if length[i] < 0:
            continue
        init(c)
        update(c, base + np.uint64(pos[i]), length[i])
        final(np.uint64(out[i].ctypes.data), c)


_CFUNCTIONS_TYPED = False


def _type_cfunctions() -> None:
    """Let numba take ``_CFunction`` arguments, typed once each."""
    global _CFUNCTIONS_TYPED
    if _CFUNCTIONS_TYPED:
        return
    import numba.experimental.function_type  # noqa: F401  (lets numba take _CFunction arguments)
    from numba.extending import typeof_impl

    @typeof_impl.register(_CFunction)
    def _typeof_cfunction(val, c):
        """numba's own typing of a first-class function builds its FunctionType on every call
        (~25 µs per argument, three per call: most of hashing a small segment's records)."""
        if val._type is None:
            val._type = types.FunctionType(val.signature())
        return val._type

    _CFUNCTIONS_TYPED = True  # (only now: a thread seeing it sooner would find no typing yet)


@cache  # (probed once a process)
def _openssl_sha256():
    import ctypes
    import ctypes.util

    try:
        import _hashlib  # noqa: F401  (makes sure the same libcrypto is loaded)

        name = ctypes.util.find_library("crypto")
        if not name:
            return None
        lib = ctypes.CDLL(name)
        init, update, final = lib.SHA256_Init, lib.SHA256_Update, lib.SHA256_Final
    except (OSError, AttributeError, ImportError):
        return None
    _type_cfunctions()
    functions = (
        _CFunction(init, types.int32(types.uintp)),
        _CFunction(update, types.int32(types.uintp, types.uintp, types.intp)),
        _CFunction(final, types.int32(types.uintp, types.uintp)),
    )

    def many(buf, pos, length, out, ctx):
        _sha256_openssl(*functions, buf, pos, length, out, ctx)

    probe = np.frombuffer(b"abc", np.uint8)
    got = np.zeros((1, 32), np.uint8)
    try:
        many(probe, np.zeros(1, np.int64), np.full(1, 3, np.int64), got, np.zeros(256, np.uint8))
    except Exception:
        return None
    import hashlib

    if got.tobytes() != hashlib.sha256(b"abc").digest():
        return None
    return many


def sha256_many(buf, pos, length, out):
    """SHA-256 of each buf[pos[i]:pos[i]+length[i]] into out[i]; OpenSSL if available, else JIT."""
    many = _openssl_sha256()
    if many is None or buf.shape[0] == 0:
        sha256_many_jit(buf, pos, length, out)
    else:
        many(buf, pos.astype(np.int64), length.astype(np.int64), out, np.zeros(256, np.uint8))


# ---------------------------------------------------------------------------- CRC-32C in hardware
#
# A batch larger than ``segment.BIG_CRC`` has its CRC-32C computed by the CPU's crc32 instruction
# (the ``crc32c`` package, ~10 GB/s) rather than the table loop above (~1 GB/s). Called once per
# batch from Python that cost ~0.6 µs a batch, more than the CRC of a 1 KiB batch itself: here a
# JIT loop calls the package's hardware function through its address, as SHA-256 calls OpenSSL.
# That function is not the package's documented API, so it is used only where the package says
# its CRC is hardware-based and only once it gave the package's own answers on a probe; else
# ``crc32c_ranges`` returns None and the caller calls the package per batch, as before.


@njit(cache=True)
def _crc32c_hw(fn, buf, start, length, out):
    base = np.uint64(buf.ctypes.data)
    for i in range(start.shape[0]):
        out[i] = fn(np.uint32(0xFFFFFFFF), base + np.uint64(start[i]), np.uint64(length[i])) ^ np.uint32(0xFFFFFFFF)


@cache  # (probed once a process)
def _hardware_crc32c():
    import ctypes

    try:
        import crc32c

        if not getattr(crc32c, "hardware_based", False):
            return None
        fn = ctypes.CDLL(crc32c._crc32c.__file__)._crc32c_hw_adler
    except (OSError, AttributeError, ImportError):
        return None
    _type_cfunctions()
    function = _CFunction(fn, types.uint32(types.uint32, types.uintp, types.uintp))

    def ranges(buf, start, length):
        out = np.empty(start.shape[0], np.int64)
        _crc32c_hw(function, buf, start.astype(np.int64), length.astype(np.int64), out)
        return out

    rng = np.random.default_rng(17)
    lengths = [0, 1, 7, 8, 63, 255, 256, 1000, 8191, 8192, 8193, 24577, 100003]
    probe = rng.integers(0, 256, sum(lengths) + 3, dtype=np.uint8)
    starts = np.cumsum([3] + lengths[:-1])
    try:
        got = ranges(probe, starts, np.array(lengths))
    except Exception:
        return None
    want = [crc32c.crc32c(probe[s : s + n].tobytes()) for s, n in zip(starts, lengths)]
    return ranges if got.tolist() == want else None


def crc32c_ranges(buf, start, length):
    """CRC-32C of each buf[start[i]:start[i]+length[i]] (int64 array), in hardware; None where
    the hardware function is not there (the caller then uses the ``crc32c`` package per range),
    or ``buf`` is not one contiguous run of bytes (the function reads memory from its address)."""
    if start.shape[0] == 0 or buf.dtype != np.uint8 or not buf.flags.c_contiguous:
        return None
    ranges = _hardware_crc32c()
    return None if ranges is None else ranges(buf, start, length)


# ------------------------------------------------------------------------------- hex of digests

# each byte's two lowercase hex digits, read as one uint16 (so written back as the same two bytes)
_HEX_PAIRS = np.frombuffer(b"".join(f"{b:02x}".encode() for b in range(256)), np.uint16).copy()


@njit(cache=True)
def hex_rows(digests, out):
    """Lowercase hex of each row of ``digests`` ((n, w) uint8) into ``out`` ((n * w) uint16: two
    ASCII digits a byte), as ``binascii.hexlify`` of the rows laid end to end writes them; one
    table lookup a byte rather than hexlify's two nibbles (~25 -> ~5 ns a SHA-256 digest)."""
    flat = digests.reshape(-1)
    pairs = _HEX_PAIRS
    for i in range(flat.shape[0]):
        out[i] = pairs[flat[i]]
