"""A tiny v2 batch builder for tests of framing variants that Kafka's Java client never writes
(librdkafka's raw snappy, lz4/zstd frames without content size, kafka-python's gzip headers).
Kafka's own kafka-dump-log judges the bytes it makes (test_codec_variants.py), so this builder
is never the only judge of the parser."""

from __future__ import annotations

import struct

import crc32c


def varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = b"\x00" + varint(ts_delta) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(0)
    return varint(len(body)) + body


def batch(base_offset: int, records: list[tuple[bytes | None, bytes | None]], codec: int = 0, compress=None, base_ts: int = 1735689600000, epoch: int = 0) -> bytes:
    recs = b"".join(record(i, i, k, v) for i, (k, v) in enumerate(records))
    payload = compress(recs) if compress else recs
    n = len(records)
    after_crc = struct.pack(">hiqqqhii", codec, n - 1, base_ts, base_ts + n - 1, -1, -1, -1, n) + payload
    crc = crc32c.crc32c(after_crc)
    body = struct.pack(">ibI", epoch, 2, crc) + after_crc
    return struct.pack(">qi", base_offset, len(body)) + body
