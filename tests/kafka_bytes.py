"""A v2 batch builder for tests of framing variants that Kafka's Java client never writes
(librdkafka's raw snappy, lz4/zstd frames without content size, kafka-python's gzip headers):
the writer (``sample_data.writer.records``) encodes the records and the header, and the caller's
``compress`` supplies the payload framing under test. Kafka's own kafka-dump-log judges the bytes
it makes (test_codec_variants.py), so this builder is never the only judge of the parser."""

from __future__ import annotations

import struct
from collections.abc import Callable

from parsers.codecs import CODEC_NAMES
from sample_data.writer.records import BatchSpec, Record, assemble_batch, encode_record, encode_records, varint

__all__ = ["batch", "offset_commit", "record", "varint"]


def record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    """One v2 record (no headers), timestamps relative to a base of 0."""
    return encode_record(Record(key, value, ts_delta), offset_delta, 0)


def batch(
    base_offset: int,
    records: list[tuple[bytes | None, bytes | None]],
    codec: int = 0,
    compress: Callable[[bytes], bytes] | None = None,
    base_ts: int = 1735689600000,
    epoch: int = 0,
) -> bytes:
    """Record i gets offset delta i and timestamp base_ts + i; ``compress`` frames the records
    section (None: stored as is, whatever ``codec`` the attributes claim)."""
    spec = BatchSpec(
        base_offset,
        tuple(Record(k, v, base_ts + i) for i, (k, v) in enumerate(records)),
        partition_leader_epoch=epoch,
        codec=CODEC_NAMES[codec],
    )
    raw = encode_records(spec)
    return assemble_batch(spec, compress(raw) if compress else raw)


def _short_string(text: str) -> bytes:
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def offset_commit(group: str, topic: str, partition: int, offset: int, ts: int) -> Record:
    """A ``__consumer_offsets`` commit: OffsetCommitKey v1 and OffsetCommitValue v1, byte by byte
    from Kafka's message definitions (expiry a day after the commit)."""
    key = struct.pack(">h", 1) + _short_string(group) + _short_string(topic) + struct.pack(">i", partition)
    value = struct.pack(">h", 1) + struct.pack(">q", offset) + _short_string("") + struct.pack(">qq", ts, ts + 86_400_000)
    return Record(key, value, ts)
