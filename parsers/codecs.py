"""Decompression of record-batch payloads, for every codec as real producers write it.

Kafka's attributes bits 0-2 name the codec (CompressionType): 0 none, 1 gzip, 2 snappy, 3 lz4,
4 zstd. One library, cramjam, does the work; this module only undoes the framing quirks that
producers and Kafka's own history left behind:

* snappy: the Java client writes xerial framing (``\\x82SNAPPY\\x00`` + version + compat, then
  blocks of ``int32 length`` + raw snappy); librdkafka writes a bare raw snappy block. We accept
  both, and the official snappy *stream* format too.
* lz4: v2 batches (and v1 wrappers) hold a standard LZ4 frame. Magic-0 wrappers were written by
  Kafka's pre-0.10 ``KafkaLZ4BlockOutputStream``, whose frame-header checksum covered the magic
  bytes as well (KAFKA-3160); a strict frame reader rejects those, so we re-compute the header
  checksum before decoding. librdkafka omits the content size: fine for a frame reader.
* zstd: frames with or without a content size (librdkafka streams them without).
* gzip: any RFC 1952 stream, whatever optional header fields the producer chose (kafka-python
  writes its own), including concatenated members.
"""

from __future__ import annotations

import struct

import cramjam

CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_MASK = 0x07

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = 16  # magic(8) + version(int32) + compatible version(int32)
SNAPPY_STREAM_MAGIC = b"\xff\x06\x00\x00sNaPpY"
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"  # 0x184D2204 little-endian

_INT32 = struct.Struct(">i")


class CodecError(Exception):
    """The payload could not be decompressed; the message says why, for a problem row."""


def codec_name(codec_id: int) -> str:
    return CODEC_NAMES[codec_id] if 0 <= codec_id < len(CODEC_NAMES) else f"unknown({codec_id})"


def decompress(codec_id: int, payload: bytes | memoryview, legacy_lz4: bool = False) -> bytes:
    """Return the decompressed payload, or raise CodecError (never anything else)."""
    try:
        if codec_id == CODEC_GZIP:
            return bytes(cramjam.gzip.decompress(payload))
        if codec_id == CODEC_SNAPPY:
            return _snappy(bytes(payload))
        if codec_id == CODEC_LZ4:
            return _lz4(bytes(payload), legacy_lz4)
        if codec_id == CODEC_ZSTD:
            return bytes(cramjam.zstd.decompress(payload))
    except CodecError:
        raise
    except Exception as exc:  # cramjam raises its own error types; all mean "bad payload"
        raise CodecError(f"{codec_name(codec_id)} decompression failed: {exc}") from None
    raise CodecError(f"unknown compression codec id {codec_id}")


def _snappy(data: bytes) -> bytes:
    if data.startswith(XERIAL_MAGIC):
        return _xerial(data)
    if data.startswith(SNAPPY_STREAM_MAGIC):
        return bytes(cramjam.snappy.decompress(data))
    return bytes(cramjam.snappy.decompress_raw(data))


def _xerial(data: bytes) -> bytes:
    """Undo xerial snappy-java framing: a 16-byte header, then (int32 length, raw block)*."""
    out = []
    pos = XERIAL_HEADER_SIZE
    end = len(data)
    while pos < end:
        if pos + 4 > end:
            raise CodecError(f"snappy (xerial) block header torn at byte {pos} of {end}")
        (n,) = _INT32.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CodecError(f"snappy (xerial) block length {n} at byte {pos - 4} exceeds the payload ({end} bytes)")
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + n])))
        pos += n
    return b"".join(out)


def _lz4(data: bytes, legacy: bool) -> bytes:
    if legacy:
        data = _fix_legacy_lz4_header(data)
    try:
        return bytes(cramjam.lz4.decompress(data))
    except Exception:
        if legacy:
            raise
        # Some old clients wrote the broken checksum even in v1 wrappers: try the fix once.
        return bytes(cramjam.lz4.decompress(_fix_legacy_lz4_header(data)))


def _fix_legacy_lz4_header(data: bytes) -> bytes:
    """Recompute the LZ4 frame-descriptor checksum as the spec (not KAFKA-3160) defines it."""
    if len(data) < 7 or not data.startswith(LZ4_FRAME_MAGIC):
        return data
    flg = data[4]
    desc_len = 2 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    hc_pos = 4 + desc_len
    if hc_pos >= len(data):
        return data
    hc = (xxh32(data[4:hc_pos]) >> 8) & 0xFF
    return data[:hc_pos] + bytes([hc]) + data[hc_pos + 1 :]


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of a few bytes (an LZ4 frame descriptor is 2-14 bytes; speed is irrelevant)."""
    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for k in range(4):
                lane = int.from_bytes(data[i : i + 4], "little")
                v[k] = (_rotl((v[k] + lane * _P2) & _M32, 13) * _P1) & _M32
                i += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        h = (_rotl((h + int.from_bytes(data[i : i + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
