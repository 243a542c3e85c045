"""Payload compression framed the way Kafka's Java client frames it (``CompressionType``).

    gzip   => any RFC 1952 stream (Java's GZIPInputStream reads every header variant)
    snappy => xerial snappy-java framing: "\\x82SNAPPY\\x00" version:int32=1 compat:int32=1,
              then (length:int32, raw snappy block of <= 32 KiB input)*        (SnappyOutputStream)
    lz4    => an LZ4 frame as ``Lz4BlockOutputStream`` writes it: FLG = version 1 + independent
              blocks, BD = 64 KiB blocks, no content size, no checksums; each block is
              length:int32 little-endian (high bit set = stored uncompressed) + data; end mark 0.
              Magic-0 wrappers get the broken header checksum of KAFKA-3160 (xxh32 over the
              magic bytes too), as ``useBrokenFlagDescriptorChecksum`` does.
    zstd   => one zstd frame

Why build the LZ4 frame by hand: a generic frame writer links blocks (each block may refer to
the previous one) and Kafka's reader decompresses every block on its own, so linked blocks over
64 KiB would not read back in Kafka.
"""

from __future__ import annotations

import struct

import cramjam

from parsers.codecs import CODEC_NAMES, XERIAL_MAGIC, xxh32

CODEC_IDS = {name: i for i, name in enumerate(CODEC_NAMES)}
XERIAL_VERSION = 1
XERIAL_COMPATIBLE_VERSION = 1
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", XERIAL_VERSION, XERIAL_COMPATIBLE_VERSION)
XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default block size
LZ4_MAGIC = struct.pack("<I", 0x184D2204)
LZ4_FLG = 0x60  # version 01, block independence; no block checksum, content size or content checksum
LZ4_BD = 0x40  # block maximum size 4 = 64 KiB (Kafka's default)
LZ4_BLOCK_SIZE = 64 * 1024
LZ4_UNCOMPRESSED_BIT = 0x80000000
_LE_INT32 = struct.Struct("<I")
_BE_INT32 = struct.Struct(">i")


def codec_id(codec: str) -> int:
    try:
        return CODEC_IDS[codec]
    except KeyError:
        raise ValueError(f"unknown codec {codec!r}; expected one of {CODEC_NAMES}") from None


def compress(codec: str, raw: bytes, *, legacy_lz4: bool = False) -> bytes:
    """``raw`` compressed and framed as Kafka's producer would store it in a batch payload."""
    if codec == "none":
        return raw
    if codec == "gzip":
        return bytes(cramjam.gzip.compress(raw))
    if codec == "snappy":
        return xerial_snappy(raw)
    if codec == "lz4":
        return kafka_lz4_frame(raw, broken_header_checksum=legacy_lz4)
    if codec == "zstd":
        return bytes(cramjam.zstd.compress(raw))
    raise ValueError(f"unknown codec {codec!r}")


def xerial_snappy(raw: bytes) -> bytes:
    parts = [XERIAL_HEADER]
    for i in range(0, len(raw), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(raw[i : i + XERIAL_BLOCK_SIZE]))
        parts += (_BE_INT32.pack(len(block)), block)
    return b"".join(parts)


def kafka_lz4_frame(raw: bytes, *, broken_header_checksum: bool = False) -> bytes:
    descriptor = bytes((LZ4_FLG, LZ4_BD))
    hashed = LZ4_MAGIC + descriptor if broken_header_checksum else descriptor
    parts = [LZ4_MAGIC, descriptor, bytes(((xxh32(hashed) >> 8) & 0xFF,))]
    for i in range(0, len(raw), LZ4_BLOCK_SIZE):
        chunk = raw[i : i + LZ4_BLOCK_SIZE]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):
            parts += (_LE_INT32.pack(len(chunk) | LZ4_UNCOMPRESSED_BIT), chunk)
        else:
            parts += (_LE_INT32.pack(len(block)), block)
    parts.append(_LE_INT32.pack(0))  # end mark
    return b"".join(parts)
