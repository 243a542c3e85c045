"""Message formats v0 and v1: LegacyRecord and its compressed wrapper messages (Kafka < 0.11).

    Message (a "batch" of one, or a wrapper of many) =>
      Offset => Int64
      MessageSize => Int32
      CRC => Uint32              (CRC-32 of Magic .. end of message)
      Magic => Int8              (0 or 1)
      Attributes => Int8         (bits 0-2 codec; v1: bit 3 timestampType)
      Timestamp => Int64         (v1 only; -1 = NO_TIMESTAMP)
      Key => Int32 length + bytes   (-1 = null)
      Value => Int32 length + bytes (-1 = null); for a wrapper: the compressed inner messages

Inner-offset rules (AbstractLegacyRecordBatch.DeepRecordsIterator): a wrapper's own offset is
its LAST inner offset. Inner v0 messages carry absolute offsets; inner v1 messages carry
relative ones (0..n-1), made absolute as ``wrapper_offset - last_inner_relative + inner``.
A v1 wrapper with LOG_APPEND_TIME stamps every inner message with its own timestamp.
Magic-0 lz4 wrappers carry the pre-KAFKA-3160 frame checksum (handled in codecs.py).
The header layout as NumPy dtypes (``LEGACY_RECORD_V0`` / ``_V1``, offsets and overheads derived):
``headers.py``, a leaf module the kernels compile against.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .codecs import CODEC_MASK, CODEC_NONE, CodecError, decompress
from .common import Problem, lazy_module
from .headers import HEADER_COLUMNS, KEY_LENGTH_OFFSET, LOG_OVERHEAD, RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1, H

K = lazy_module("parsers._kernels")  # numba: loaded by the first parse, not by a schema lookup

TIMESTAMP_TYPE_MASK = 0x08
NO_TIMESTAMP = -1


def batch_columns(buf, h, positions, sizes, problems, want_records=False) -> dict:
    """Columns for v0/v1 messages (rows of other formats are left at defaults).

    Compressed wrappers are always opened: without the inner messages Kafka itself cannot say a
    wrapper's base offset, and legacy data is small and rare.
    """
    n = positions.shape[0]
    magic = h[:, H.MAGIC]
    legacy = magic < 2
    attrs = h[:, H.ATTRIBUTES]
    codec = attrs & CODEC_MASK
    ts_type = np.where(magic == 1, (attrs & TIMESTAMP_TYPE_MASK) != 0, -1).astype(np.int64)
    base = h[:, H.BASE_OFFSET].copy()
    count = np.ones(n, np.int64)
    max_ts = h[:, H.MAX_TIMESTAMP].copy()
    pieces = []
    bad_shape = legacy & ((magic < 0) | (h[:, H.KEY_LENGTH] == -2) | (h[:, H.VALUE_LENGTH] <= -2) | (sizes < LOG_OVERHEAD + np.where(magic == 1, RECORD_OVERHEAD_V1, RECORD_OVERHEAD_V0)))
    for i in np.nonzero(bad_shape)[0]:
        problems.append(
            Problem(int(positions[i]), "invalid_batch", f"malformed v{int(magic[i])} message: key/value lengths do not fit its size {int(sizes[i])}" if magic[i] >= 0 else f"magic {int(magic[i])} is not a known message format")
        )
    good = legacy & ~bad_shape
    plain = np.nonzero(good & (codec == CODEC_NONE))[0]
    if want_records and plain.size:
        pieces.append(_piece(buf, plain, positions[plain], magic[plain], h[plain, H.BASE_OFFSET], h[plain, H.BASE_TIMESTAMP], h[plain, H.KEY_LENGTH], h[plain, H.VALUE_POSITION], h[plain, H.VALUE_LENGTH]))
    for i in np.nonzero(good & (codec != CODEC_NONE))[0]:
        p = int(positions[i])
        try:
            inner = decompress(int(codec[i]), buf[int(h[i, H.VALUE_POSITION]) : int(h[i, H.VALUE_POSITION]) + int(h[i, H.VALUE_LENGTH])], legacy_lz4=magic[i] == 0)
        except CodecError as exc:
            problems.append(Problem(p, "invalid_batch", str(exc)))
            continue
        got = _inner(inner, int(i), h[i], int(magic[i]), int(ts_type[i]), p, problems)
        if got is None:
            continue
        base[i] = got["offset"][0]
        count[i] = len(got["offset"])
        if want_records:
            pieces.append(got)
    return {
        "base_offset": base,
        "last_offset": h[:, H.BASE_OFFSET],
        "record_count": count,
        "codec_id": codec,
        "producer_id": np.full(n, -1, np.int64),
        "producer_epoch": np.full(n, -1, np.int64),
        "base_sequence": np.full(n, -1, np.int64),
        "last_sequence": np.full(n, -1, np.int64),
        "is_transactional": np.zeros(n, bool),
        "is_control": np.zeros(n, bool),
        "timestamp_type_id": ts_type,
        "base_timestamp": h[:, H.BASE_TIMESTAMP],
        "max_timestamp": max_ts,
        "attributes": attrs,
        "records": pieces,
    }


def _piece(src, batch_index, msg_pos, magic, offsets, timestamps, klen, vpos, vlen, in_file=True):
    kpos = msg_pos + np.where(magic == 1, KEY_LENGTH_OFFSET[1], KEY_LENGTH_OFFSET[0]) + 4
    m = batch_index.shape[0]
    return {
        "buf": src,
        "batch_index": batch_index,
        "offset": offsets,
        "timestamp": timestamps,
        "key_pos": kpos,
        "key_len": klen,
        "value_pos": vpos,
        "value_len": vlen,
        "headers": np.zeros(m, np.int64),
        "header_pos": np.zeros(m, np.int64),  # v0/v1 messages have no headers
        "header_len": np.zeros(m, np.int64),
        "control_type": pa.nulls(m, pa.string()),
        "coordinator_epoch": pa.nulls(m, pa.int32()),
        "position": pa.array(msg_pos, mask=np.full(m, not in_file)),
    }


def _inner(data: bytes, wrapper_index: int, wh: np.ndarray, wmagic: int, wts_type: int, wpos: int, problems) -> dict | None:
    """Read the message set inside a compressed wrapper and apply Kafka's inner-offset rules."""
    src = np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8)
    cap = len(data) // (LOG_OVERHEAD + RECORD_OVERHEAD_V0) + 1
    pos = np.empty(cap, np.int64)
    size = np.empty(cap, np.int64)
    n, nxt, stop = K.scan(src, 0, src.shape[0], src.shape[0], cap, pos, size)
    if n == 0:
        problems.append(Problem(wpos, "invalid_batch", "compressed wrapper holds no readable inner message"))
        return None
    if stop != K.STOP_END:
        problems.append(Problem(wpos, "invalid_batch", f"compressed wrapper: inner message set unreadable after {nxt} of {len(data)} bytes"))
    pos, size = pos[:n], size[:n]
    ih = np.zeros((n, HEADER_COLUMNS), np.int64)
    K.read_headers(src, pos, size, 1 << 62, K.CRC32C_TABLE, K.CRC32_TABLE, ih)
    for j in np.nonzero(ih[:, H.COMPUTED_CRC] != ih[:, H.CRC])[0]:
        problems.append(Problem(wpos, "crc_mismatch", f"inner message {j} of the compressed wrapper: stored crc 0x{int(ih[j, H.CRC]):08x}, computed 0x{int(ih[j, H.COMPUTED_CRC]):08x} (CRC-32)"))
    inner_magic = ih[:, H.MAGIC]
    rel = ih[:, H.BASE_OFFSET]
    offsets = wh[H.BASE_OFFSET] - rel[-1] + rel if wmagic > 0 else rel
    if wts_type == 1:
        ts = np.full(n, wh[H.BASE_TIMESTAMP], np.int64)
    else:
        ts = np.where(inner_magic == 1, ih[:, H.BASE_TIMESTAMP], NO_TIMESTAMP)
    return _piece(src, np.full(n, wrapper_index, np.int64), pos, inner_magic, offsets, ts, ih[:, H.KEY_LENGTH], ih[:, H.VALUE_POSITION], ih[:, H.VALUE_LENGTH], in_file=False)
