"""Message format v2: DefaultRecordBatch and DefaultRecord (Kafka >= 0.11).

    RecordBatch =>
      BaseOffset => Int64
      Length => Int32                    (bytes after this field)
      PartitionLeaderEpoch => Int32
      Magic => Int8                      (2)
      CRC => Uint32                      (CRC-32C of Attributes .. end of batch)
      Attributes => Int16                (bits 0-2 codec, 3 timestampType, 4 transactional,
                                          5 control, 6 delete horizon set)
      LastOffsetDelta => Int32
      BaseTimestamp => Int64
      MaxTimestamp => Int64
      ProducerId => Int64
      ProducerEpoch => Int16
      BaseSequence => Int32
      Records => [Record]                (Int32 count, then records; compressed as a whole)

    Record =>
      Length => Varint
      Attributes => Int8
      TimestampDelta => Varlong
      OffsetDelta => Varint
      Key => Varint length + bytes       (-1 = null)
      Value => Varint length + bytes     (-1 = null)
      Headers => [Varint key length, key, Varint value length, value]

    ControlRecord key => Version:Int16 Type:Int16 (0 ABORT, 1 COMMIT);
                 value => Version:Int16 CoordinatorEpoch:Int32   (EndTransactionMarker)

LOG_APPEND_TIME batches: every record's timestamp is the batch's max timestamp, whatever the
producer wrote (DefaultRecordBatch: ``timestampType == LOG_APPEND_TIME ? maxTimestamp : base + delta``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .codecs import CODEC_MASK, CODEC_NONE, CodecError, decompress
from .common import Problem, lazy_module
from .headers import (
    ERR_BOUNDS,
    ERR_COUNT,
    ERR_NEGATIVE,
    ERR_RECORD_SIZE,
    ERR_TOO_MANY,
    ERR_VARINT,
    RECORD_COLUMNS,
    V2_HEADER_SIZE,
    H,
    R,
)
from .kafka_messages import MessageError, read_uvarint

K = lazy_module("parsers._kernels")  # numba: loaded by the first parse, not by a schema lookup

TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
NO_SEQUENCE = -1
NO_PRODUCER_ID = -1
RECORD_BATCH_OVERHEAD = V2_HEADER_SIZE
MIN_RECORD_SIZE = 7  # length, attributes, ts delta, offset delta, key len, value len, header count
# ControlRecordType: transaction markers (0, 1) and KRaft's metadata-log control records (2..6)
CONTROL_TYPE_NAMES = np.array(
    ["abort", "commit", "leader_change", "snapshot_header", "snapshot_footer", "kraft_version", "kraft_voters", "unknown"]
)
UNKNOWN_CONTROL = len(CONTROL_TYPE_NAMES) - 1
_CONTROL_TYPE_ARRAY = pa.array(CONTROL_TYPE_NAMES.tolist(), pa.string())

_ERRORS = {
    ERR_VARINT: "varint longer than Kafka allows",
    ERR_BOUNDS: "a length runs past the end of the batch",
    ERR_RECORD_SIZE: "record length disagrees with the fields read (Invalid record size)",
    ERR_NEGATIVE: "negative header count or header key size",
    ERR_COUNT: "record count disagrees with the batch's bytes (Incorrect declared batch size)",
    ERR_TOO_MANY: "record count larger than the batch's bytes can hold",
}


def batch_columns(h: np.ndarray, positions: np.ndarray, sizes: np.ndarray, problems: list[Problem]) -> dict:
    """Derive the v2 batch columns from the raw header matrix (rows of other formats are ignored)."""
    magic = h[:, H.MAGIC]
    is_v2 = magic >= 2
    attrs = h[:, H.ATTRIBUTES]
    base = h[:, H.BASE_OFFSET]
    last_delta = h[:, H.LAST_OFFSET_DELTA]
    count = h[:, H.RECORDS_COUNT]
    base_seq = h[:, H.BASE_SEQUENCE]
    # DefaultRecordBatch.lastSequence: wraps at Int32.MAX_VALUE
    last_seq = np.where(base_seq == NO_SEQUENCE, NO_SEQUENCE, base_seq + last_delta)
    last_seq = np.where(last_seq > 0x7FFFFFFF, last_seq - 0x80000000, last_seq)
    for i in np.nonzero(is_v2 & (magic != 2))[0]:
        problems.append(
            Problem(int(positions[i]), "invalid_batch", f"magic {int(magic[i])} is not a known message format; Kafka reads it as v2 and its CRC does not cover the magic byte")
        )
    for i in np.nonzero(is_v2 & (sizes < RECORD_BATCH_OVERHEAD))[0]:
        problems.append(
            Problem(int(positions[i]), "invalid_batch", f"Record batch is corrupt (the size {int(sizes[i])} is smaller than the minimum allowed overhead {RECORD_BATCH_OVERHEAD})")
        )
    bad = is_v2 & (sizes >= RECORD_BATCH_OVERHEAD) & ((last_delta < 0) | (count < 0) | ((attrs & CODEC_MASK) > 4))
    for i in np.nonzero(bad)[0]:
        problems.append(
            Problem(
                int(positions[i]),
                "invalid_batch",
                f"impossible header: lastOffsetDelta {int(last_delta[i])}, record count {int(count[i])}, codec id {int(attrs[i]) & CODEC_MASK}",
            )
        )
    return {
        "base_offset": base,
        "last_offset": base + np.maximum(last_delta, 0),
        "record_count": count,
        "codec_id": attrs & CODEC_MASK,
        "producer_id": h[:, H.PRODUCER_ID],
        "producer_epoch": h[:, H.PRODUCER_EPOCH],
        "base_sequence": base_seq,
        "last_sequence": last_seq,
        "is_transactional": (attrs & TRANSACTIONAL_MASK) != 0,
        "is_control": (attrs & CONTROL_MASK) != 0,
        "timestamp_type_id": ((attrs & TIMESTAMP_TYPE_MASK) != 0).astype(np.int64),
        "base_timestamp": h[:, H.BASE_TIMESTAMP],
        "max_timestamp": h[:, H.MAX_TIMESTAMP],
        "attributes": attrs,
    }


def records(buf, h, positions, sizes, is_v2, cols, problems) -> list[dict]:
    """Record-level pieces for the v2 batches: one over the file bytes, one over decompressed bytes."""
    ok = is_v2 & (sizes >= RECORD_BATCH_OVERHEAD) & (h[:, H.RECORDS_COUNT] >= 0)
    codec = cols["codec_id"]
    plain = np.nonzero(ok & (codec == CODEC_NONE))[0]
    packed = np.nonzero(ok & (codec != CODEC_NONE) & (codec <= 4))[0]
    pieces = []
    if plain.size:
        starts = positions[plain] + RECORD_BATCH_OVERHEAD
        ends = positions[plain] + sizes[plain]
        pieces.append(_decode(buf, plain, starts, ends, h, cols, positions, problems, in_file=True))
    if packed.size:
        blobs, idx = [], []
        for i in packed:  # one decompression call per compressed batch: the codec dominates
            p, s = int(positions[i]), int(sizes[i])
            try:
                blobs.append(decompress(int(codec[i]), buf[p + RECORD_BATCH_OVERHEAD : p + s]))
                idx.append(i)
            except CodecError as exc:
                problems.append(Problem(p, "invalid_batch", str(exc)))
        if idx:
            lens = np.fromiter((len(b) for b in blobs), np.int64, len(blobs))
            ends = np.cumsum(lens)
            dbuf = np.frombuffer(b"".join(blobs), np.uint8) if ends[-1] else np.zeros(1, np.uint8)
            idx_a = np.array(idx, np.int64)
            pieces.append(_decode(dbuf, idx_a, ends - lens, ends, h, cols, positions, problems, in_file=False))
    return pieces


def _decode(src, bidx, starts, ends, h, cols, positions, problems, in_file):
    counts = h[bidx, H.RECORDS_COUNT]
    cap = int(np.minimum(counts, (ends - starts) // MIN_RECORD_SIZE + 1).sum())
    out = np.zeros((cap, RECORD_COLUMNS), np.int64)
    err = np.zeros(bidx.shape[0], np.int64)
    nrec = np.zeros(bidx.shape[0], np.int64)
    log_append = cols["timestamp_type_id"][bidx] == 1
    n = K.decode_v2(src, starts, ends, counts, h[bidx, H.BASE_OFFSET], h[bidx, H.BASE_TIMESTAMP], log_append, h[bidx, H.MAX_TIMESTAMP], out, err, nrec)
    for j in np.nonzero(err)[0]:
        problems.append(
            Problem(
                int(positions[bidx[j]]),
                "invalid_batch",
                f"record {int(nrec[j])} of {int(counts[j])}: {_ERRORS.get(int(err[j]), 'undecodable record')}",
            )
        )
    out = out[:n]
    local = out[:, R.BATCH]
    batch_index = bidx[local]
    kpos, klen, vpos, vlen = out[:, R.KEY_POSITION], out[:, R.KEY_LENGTH], out[:, R.VALUE_POSITION], out[:, R.VALUE_LENGTH]
    if cols["is_control"][bidx].any():
        ctype_name, coordinator_epoch = _control_columns(src, cols["is_control"][batch_index], kpos, klen, vpos, vlen)
    else:  # (no control batch: the common case, two columns of nulls made without a pass over the records)
        ctype_name, coordinator_epoch = pa.nulls(n, pa.string()), pa.nulls(n, pa.int32())
    return {
        "buf": src,
        "batch_index": batch_index,
        "offset": out[:, R.OFFSET],
        "timestamp": out[:, R.TIMESTAMP],
        "key_pos": kpos,
        "key_len": klen,
        "value_pos": vpos,
        "value_len": vlen,
        "headers": out[:, R.HEADERS],
        "header_pos": out[:, R.HEADERS_POSITION],
        "header_len": out[:, R.HEADERS_LENGTH],
        "control_type": ctype_name,
        "coordinator_epoch": coordinator_epoch,
        "position": pa.array(out[:, R.POSITION]) if in_file else pa.nulls(n, pa.int64()),
    }


def _control_columns(src, is_control, kpos, klen, vpos, vlen) -> tuple[pa.Array, pa.Array]:
    """``control_type`` and ``coordinator_epoch`` of records some of which are control records."""
    n = is_control.shape[0]
    # ControlRecordType: key = version(int16) type(int16); EndTransactionMarker value = version(int16) epoch(int32)
    ctl = is_control & (klen >= 4)
    ctype = np.full(n, -1, np.int64)
    if ctl.any():
        kp = kpos[ctl]
        ctype[ctl] = (src[kp + 2].astype(np.int64) << 8) | src[kp + 3]
    cval = is_control & (vlen >= 6) & ((ctype == 0) | (ctype == 1))
    cepoch = np.zeros(n, np.int64)
    if cval.any():
        vp = vpos[cval]
        raw = (
            (src[vp + 2].astype(np.int64) << 24) | (src[vp + 3].astype(np.int64) << 16) | (src[vp + 4].astype(np.int64) << 8) | src[vp + 5]
        )
        cepoch[cval] = np.where(raw >= 0x80000000, raw - 0x100000000, raw)
    known = np.where((ctype < 0) | (ctype >= UNKNOWN_CONTROL), UNKNOWN_CONTROL, ctype)
    ctype_name = _CONTROL_TYPE_ARRAY.take(pa.array(known, mask=~is_control))  # (not numpy strings: ~15 ns a record)
    return ctype_name, pa.array(cepoch.astype(np.int32), mask=~cval)


def record_headers(data: bytes, count: int) -> list[tuple[str, bytes | None]]:
    """The ``count`` headers of one record from its header bytes (``segment.HEADER_BYTES_FIELD``),
    as ``DefaultRecord.readHeaders`` reads them: a Varint key length and UTF-8 key, then a Varint
    value length (-1 = null) and the value. The kernel already checked the bounds when it decoded
    the record; a short or negative length still raises ``MessageError`` rather than guess."""
    out: list[tuple[str, bytes | None]] = []
    pos, n = 0, len(data)
    for _ in range(count):
        klen, pos = _varint(data, pos, n)
        if klen < 0 or pos + klen > n:
            raise MessageError(f"header key length {klen} at byte {pos} of {n}", pos)
        key = bytes(data[pos : pos + klen]).decode("utf-8", errors="replace")
        pos += klen
        vlen, pos = _varint(data, pos, n)
        if vlen > 0 and pos + vlen > n:
            raise MessageError(f"header value length {vlen} at byte {pos} of {n}", pos)
        out.append((key, None if vlen < 0 else bytes(data[pos : pos + vlen])))
        pos += max(vlen, 0)
    return out


def _varint(data, pos: int, n: int) -> tuple[int, int]:
    """ByteUtils.readVarint: a zig-zag encoded signed 32-bit int."""
    raw, pos = read_uvarint(data, pos, n)
    return (raw >> 1) ^ -(raw & 1), pos
