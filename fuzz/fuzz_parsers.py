"""Fuzz every parser kind and the internal-topic decoders: no bytes may raise or hang, and every
result must keep the contract.

    python fuzz/fuzz_parsers.py [--kind K] [--inputs N] [--seconds S] [--seed X] [--engine mutate|atheris]

Seeds: the golden files (good and damaged), the found fixtures, and files the writer makes here
(v2 segments of every codec, transactional and control batches, v0/v1 message sets of every
legacy codec, indexes, checkpoints, producer snapshots, properties); segment seeds are cut to a
few KB of whole batches (a parse costs per byte). The ``__consumer_offsets``,
``__transaction_state``, ``__share_group_state``, ``__cluster_metadata`` and ``__remote_log_metadata``
decoders get one record per input (control type, key and value, ``encode_record``) through their ``decode_records``. A mutant is a seed put
through a few structure-aware mutations (bit flips, byte sets, truncations, splices, length-field
edits, zero fills, number swaps in text) and, half the time, its batch CRCs recomputed so the
mutant gets past the CRC into record decoding and decompression.

Engines: ``mutate`` (default; deterministic for a seed, ``random.Random(seed)``) and ``atheris``
(coverage-guided libFuzzer, ``pip install -e .[fuzz]``, the same mutator as its custom mutator,
one child process per kind). A crash (an uncaught exception, or a result that breaks the
contract: problem kind outside the vocabulary, schema other than the declared one, a batch or
problem outside the file, chunked reading disagreeing with whole-file reading) saves the input
under fuzz/crashes/ and makes the run exit 1.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import random
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zlib
from collections.abc import Callable
from pathlib import Path

import crc32c
import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from parsers import files, segment  # noqa: E402
from parsers.common import PROBLEM_SCHEMA  # noqa: E402

SHARED = Path(os.environ.get("KF_SHARED", REPO.parent / "shared"))
CRASHES = HERE / "crashes"
DEFAULT_INPUTS = 1_000_000
MAX_SEED_BYTES = 16 << 10
SEGMENT_SEED_BYTES = 4 << 10  # small segment seeds: a parse costs per byte, and a few batches reach every path
MAX_SEEDS = 48
MAX_RECORD_SEEDS = 64
# The internal-topic decoders are fuzzed on one record at a time (key and value), not on whole
# segments: the segment parser has its own kinds, and a segment parse per input would cost 10x more.
DECODER_TOPICS = {
    "consumer_offsets": "__consumer_offsets",
    "transaction_state": "__transaction_state",
    "share_group_state": "__share_group_state",
    "metadata_records": "__cluster_metadata",
    "remote_log_metadata": "__remote_log_metadata",
}
# TransactionLogKey/Value records (v0; v1 flexible; v1 with tagged fields) made by
# tests/test_internal_topics.py's encoders: no fixture holds __transaction_state.
TXN_RECORDS = [
    ("0000000a74782d6f6e676f696e67", "000000000000000003e900030000ea60010000000200066f72646572730000000200000000000000020005"
     "61756469740000000100000005000001941f297c01000001941f297c00"),
    ("0000000574782d7631", "000100000000000007d0000400007530010205666c657803000000070000000800000001941f297c09000001941f297c0900"),
    ("0000000c74782d76312d746167676564", "000100000000000007d10005000075300401000001941f297c0a000001941f297c0903000800000000000007cf01"
     "0800000000000007d202020002"),
]

# every kind a parser may report: the contract's vocabulary plus the project's additions
try:
    from jobs.findings.registry import FINDING_KINDS

    VOCABULARY = frozenset(FINDING_KINDS)
except ImportError:  # pragma: no cover - jobs needs pyspark; the parsers do not
    VOCABULARY = frozenset()

FILE_NAMES = {
    "segment": "00000000000000000100.log",
    "kraft_snapshot": "00000000000000000100-0000000001.checkpoint",
    "bootstrap_checkpoint": "bootstrap.checkpoint",
    "offset_index": "00000000000000000100.index",
    "time_index": "00000000000000000100.timeindex",
    "txn_index": "00000000000000000100.txnindex",
    "producer_snapshot": "00000000000000000100.snapshot",
    "replication_offset": "replication-offset-checkpoint",
    "recovery_point": "recovery-point-offset-checkpoint",
    "log_start": "log-start-offset-checkpoint",
    "cleaner": "cleaner-offset-checkpoint",
    "leader_epoch": "leader-epoch-checkpoint",
    "partition_metadata": "partition.metadata",
    "meta_properties": "meta.properties",
    "clean_shutdown": ".kafka_cleanshutdown",
    "broker_log": "server.log.gz",
    "quorum_state": "quorum-state",
}
FILE_KINDS = list(files.DUMP_KINDS)  # every file kind, quorum-state (read by dump only) too
KINDS = FILE_KINDS + list(DECODER_TOPICS)
TEXT_KINDS = {
    "replication_offset",
    "recovery_point",
    "log_start",
    "cleaner",
    "leader_epoch",
    "partition_metadata",
    "meta_properties",
    "clean_shutdown",
}
SEED_FAMILY = {k: ("segment" if k in files.SEGMENT_KINDS else k) for k in FILE_KINDS}
SEED_FAMILY.update({k: "offset_checkpoint" for k in ("replication_offset", "recovery_point", "log_start", "cleaner")})


class ContractBreak(AssertionError):
    """A result that parsed without raising but breaks the parser's contract."""


class Hang(Exception):
    """An input that took longer than HANG_SECONDS: a parser must be linear in its input."""


HANG_SECONDS = 10.0  # one input is at most a few KB: even on a loaded machine it takes milliseconds


def _on_alarm(signum, frame):
    raise Hang(f"no answer after {HANG_SECONDS:.0f} s")


# ------------------------------------------------------------------ seeds


def _family(kind: str | None) -> str | None:
    return SEED_FAMILY.get(kind) if kind else None


def writer_seeds() -> dict[str, list[bytes]]:
    """Files the project's writer makes: every magic and codec, markers, every small kind."""
    from sample_data.writer import checkpoints, indexes, producer_snapshot, properties
    from sample_data.writer.records import BatchSpec, Record, encode_batches, encode_legacy_message_set

    out: dict[str, list[bytes]] = {}
    t0 = 1735689600000
    recs = tuple(
        Record(f"k{i}".encode() if i % 3 else None, (f"value {i} " * (i + 1)).encode(), t0 + i, ((("h", b"v"),) if i % 2 else ()))
        for i in range(6)
    )
    segs = []
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        specs = [
            BatchSpec(0, recs, codec=codec),
            BatchSpec(6, recs[:3], codec=codec, producer_id=7, producer_epoch=0, base_sequence=0, partition_leader_epoch=1),
            BatchSpec(9, recs[:2], codec=codec, producer_id=8, producer_epoch=1, base_sequence=0, is_transactional=True),
            BatchSpec(11, (), control="commit", producer_id=8, producer_epoch=1, is_transactional=True, max_timestamp=t0 + 9),
            BatchSpec(12, recs[:1], codec=codec, timestamp_type="log_append", log_append_time=t0 + 99),
        ]
        segs.append(encode_batches(specs))
    for magic in (0, 1):
        for codec in ("none", "gzip", "snappy", "lz4"):
            segs.append(
                encode_legacy_message_set(0, recs, magic=magic, codec=codec) + encode_legacy_message_set(6, recs[:2], magic=magic)
            )
    segs.append(encode_legacy_message_set(0, recs[:3], magic=1) + encode_batches([BatchSpec(3, recs[:3], codec="lz4")]))
    out["segment"] = segs
    out["offset_index"] = [
        indexes.offset_index_bytes(100, [(110, 0), (120, 4000), (130, 9000)]),
        indexes.offset_index_bytes(100, [(101, 64)], preallocate_to=64),
    ]
    out["time_index"] = [
        indexes.time_index_bytes(100, [(t0, 110), (t0 + 5, 120)]),
        indexes.time_index_bytes(100, [(t0, 101)], preallocate_to=48),
    ]
    out["txn_index"] = [indexes.txn_index_bytes([(7, 100, 120, 100), (8, 121, 125, 121)])]
    out["offset_checkpoint"] = [checkpoints.offset_checkpoint_bytes({("orders", 0): 42, ("a.b-c_d", 12): 2**62})]
    out["leader_epoch"] = [checkpoints.leader_epoch_checkpoint_bytes([(0, 0), (2, 40), (5, 99)])]
    out["partition_metadata"] = [properties.partition_metadata_text("AAAAAAAAAAAAAAAAAAAAAA").encode()]
    out["meta_properties"] = [properties.meta_properties_text(**_meta_kwargs(properties)).encode()]
    out["clean_shutdown"] = [properties.clean_shutdown_bytes(12), properties.clean_shutdown_bytes(None)]
    try:
        entry = producer_snapshot.ProducerEntry  # type: ignore[attr-defined]
        out["producer_snapshot"] = [producer_snapshot.producer_snapshot_bytes([_producer_entry(entry, i) for i in range(3)])]
    except Exception:  # noqa: BLE001 - the golden snapshots still seed this kind
        pass
    return out


def _meta_kwargs(properties) -> dict:
    import inspect

    params = inspect.signature(properties.meta_properties_text).parameters
    guess = {
        "version": 1,
        "node_id": 3,
        "cluster_id": "MkU3OEVBNTcwNTJENDM2Qk",
        "directory_id": "AAAAAAAAAAAAAAAAAAAAAA",
        "broker_id": 3,
    }
    return {k: v for k, v in guess.items() if k in params}


def _producer_entry(entry, i: int):
    import dataclasses
    import inspect

    names = (
        [f.name for f in dataclasses.fields(entry)]
        if dataclasses.is_dataclass(entry)
        else list(inspect.signature(entry).parameters)
    )
    return entry(**{n: (i + 1) * 3 for n in names})


def _whole_batches(data: bytes, limit: int) -> bytes:
    """The longest prefix of a segment made of whole batches that fits in ``limit`` bytes (at least
    the first ``limit`` bytes when its first batch is bigger): a small seed that still parses clean."""
    pos = 0
    while pos + 12 <= len(data):
        end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
        if end <= pos + 12 or end > min(len(data), limit):
            break
        pos = end
    return data[:pos] if pos else data[:limit]


def encode_record(control_type: str | None, key: bytes | None, value: bytes | None) -> bytes:
    """One record as a decoder-kind input: [int16 len, control type][int32 len, key][int32 len,
    value], length -1 for null, so the mutators reach the key, the value and the control type."""

    def field(b: bytes | None, fmt: str) -> bytes:
        return struct.pack(fmt, -1) if b is None else struct.pack(fmt, len(b)) + b

    return field(control_type.encode() if control_type is not None else None, ">h") + field(key, ">i") + field(value, ">i")


def decode_record_input(data: bytes) -> tuple[str | None, bytes | None, bytes | None]:
    """The inverse of ``encode_record`` for any bytes: short or lying lengths read what is there."""
    out, pos = [], 0
    for size in (2, 4, 4):
        if pos + size > len(data):
            out.append(None)
            continue
        n = int.from_bytes(data[pos : pos + size], "big", signed=True)
        pos += size
        out.append(None if n < 0 else data[pos : pos + n])
        pos += max(n, 0)
    ctl, key, value = out
    return (ctl.decode("utf-8", "replace") if ctl is not None else None), key, value


def record_seeds(topic: str) -> list[bytes]:
    """Records of the fixtures' ``topic`` partitions (every file of the topic), as decoder inputs."""
    out: list[bytes] = []
    for root in (SHARED / "fixtures" / "golden", SHARED / "fixtures" / "found", SHARED / "fixtures" / "real-cluster"):
        for p in sorted(root.rglob(f"{topic}-*/*.log")):
            recs = segment.parse(p.read_bytes()[: 1 << 20], p.name, records=True, payloads=True).extra["records"]
            for ctl, key, value in zip(*(recs.column(c).to_pylist() for c in ("control_type", "key", "value"))):
                out.append(encode_record(ctl, key, value))
    if topic == "__transaction_state":
        out += [encode_record(None, bytes.fromhex(k), bytes.fromhex(v)) for k, v in TXN_RECORDS]
        out.append(encode_record(None, bytes.fromhex(TXN_RECORDS[0][0]), None))  # a tombstone
    if topic == "__remote_log_metadata":
        from sample_data.writer.remote_log_metadata import every_kind  # no fixture holds tiered storage

        out += [encode_record(None, None, v) for v in every_kind(1)]
    if topic in ("__consumer_offsets", "__share_group_state"):  # Kafka 4's group records: no fixture holds them
        from sample_data.writer.coordinator_records import every_offsets_kind, every_share_state_kind

        made = every_offsets_kind(1) if topic == "__consumer_offsets" else every_share_state_kind(1)
        out += [encode_record(None, r.key, r.value) for r in made]
    out = list(dict.fromkeys(out))
    return random.Random(topic).sample(out, MAX_RECORD_SEEDS) if len(out) > MAX_RECORD_SEEDS else out


def load_seeds() -> dict[str, list[bytes]]:
    """Seed inputs per parser kind (segment kinds share the segment seeds; segment seeds are cut to
    whole batches within SEGMENT_SEED_BYTES, so an input costs little and still parses deep)."""
    fam: dict[str, list[bytes]] = {}
    roots = [SHARED / "fixtures" / "golden", SHARED / "fixtures" / "found", SHARED / "fixtures" / "real-cluster"]
    for root in roots:
        for p in sorted(root.rglob("*")):
            if not p.is_file() or p.is_symlink():
                continue
            f = _family(files.detect(p.name))
            if f in ("segment", "offset_index", "time_index", "producer_snapshot") and root.name == "real-cluster":
                continue  # golden and found hold plenty of these; the real cluster adds its broker logs
            if f is None:
                continue
            data = p.read_bytes()[:MAX_SEED_BYTES]
            fam.setdefault(f, []).append(_whole_batches(data, SEGMENT_SEED_BYTES) if f == "segment" else data)
    for f, seeds in writer_seeds().items():
        fam.setdefault(f, []).extend(seeds)
    out = {}
    for kind in FILE_KINDS:
        seeds = list(dict.fromkeys(fam.get(SEED_FAMILY[kind], [])))  # dedupe, keep order
        if len(seeds) > MAX_SEEDS:  # keep the writer's (last) and a spread of the rest
            rng = random.Random(kind)
            seeds = rng.sample(seeds[:-16], MAX_SEEDS - 16) + seeds[-16:]
        out[kind] = seeds or [b""]
    for kind, topic in DECODER_TOPICS.items():
        out[kind] = record_seeds(topic) or [b""]
    return out


# ------------------------------------------------------------------ mutations

INTERESTING8 = [0, 1, 2, 0x7F, 0x80, 0xFF, 0x0A, 0x20, 0x2D, 0x30, 0x39]
INTERESTING32 = [0, 1, -1, 2, 12, 17, 49, 61, 0x7FFFFFFF, -0x80000000, 0xFFFF, 0x10000, 1 << 24]
NUMBERS = [
    b"0",
    b"-1",
    b"1",
    b"2147483647",
    b"2147483648",
    b"-2147483649",
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775809",
    b"99999999999999999999999",
    b"",
    b"1e3",
    b"0x10",
    b"+5",
    b"\xd9\xa3",
    b" 1",
]


def _be32_positions(data: bytes) -> list[int]:
    """Where length fields sit if ``data`` is a segment: each batch's size, a v2 batch's record count."""
    out, pos = [], 0
    while pos + 12 <= len(data) and len(out) < 64:
        size = struct.unpack_from(">i", data, pos + 8)[0]
        out.append(pos + 8)
        if pos + 61 <= len(data) and data[pos + 16] >= 2:
            out.append(pos + 57)  # record count
            out.append(pos + 23)  # lastOffsetDelta
        if size < 12:
            break
        pos += 12 + size
    return out


def fix_crcs(data: bytearray) -> None:
    """Recompute every readable batch's CRC (v2: CRC-32C from byte 21; v0/v1: CRC-32 from 16)."""
    pos = 0
    while pos + 17 <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0]
        end = pos + 12 + size
        if size < 5 or end > len(data):
            return
        if data[pos + 16] >= 2:
            if size >= 49:
                struct.pack_into(">I", data, pos + 17, crc32c.crc32c(bytes(data[pos + 21 : end])))
        else:
            struct.pack_into(">I", data, pos + 12, zlib.crc32(bytes(data[pos + 16 : end])))
        pos = end


def mutate_compressed(rng: random.Random, b: bytearray) -> bytearray:
    """Mutate the records inside one compressed v2 batch, recompress them and fix its length and
    CRC, so record decoding behind a decompressor gets bad input (not just a failed decompression)."""
    from parsers.codecs import CODEC_NAMES, decompress
    from sample_data.writer.compression import compress

    pos, found = 0, []
    while pos + 61 <= len(b):
        size = struct.unpack_from(">i", b, pos + 8)[0]
        if size < 49 or pos + 12 + size > len(b):
            break
        if b[pos + 16] == 2 and b[pos + 22] & 7 in (1, 2, 3, 4):
            found.append((pos, size))
        pos += 12 + size
    if not found:
        return b
    pos, size = rng.choice(found)
    codec = b[pos + 22] & 7
    try:
        raw = bytearray(decompress(codec, bytes(b[pos + 61 : pos + 12 + size])))
    except Exception:  # noqa: BLE001 - already damaged; leave it
        return b
    for _ in range(rng.randint(1, 3)):
        if not raw:
            break
        i = rng.randrange(len(raw))
        r = rng.random()
        if r < 0.4:
            raw[i] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE, rng.randrange(256)))
        elif r < 0.7:
            del raw[i:]
        else:
            raw[i:i] = rng.randbytes(rng.randint(1, 8))
    payload = compress(CODEC_NAMES[codec], bytes(raw))
    batch = b[pos : pos + 61] + payload
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return b[:pos] + batch + b[pos + 12 + size :]


def mutate(rng: random.Random, data: bytes, seeds: list[bytes], kind: str, max_size: int = 1 << 20) -> bytes:
    b = bytearray(data)
    if kind in files.SEGMENT_KINDS and rng.random() < 0.2:
        b = mutate_compressed(rng, b)
        if rng.random() < 0.5:
            return bytes(b[:max_size])
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 5))):
        op = rng.randrange(12)
        n = len(b)
        if op == 0 and n:  # bit flip
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and n:  # byte set
            b[rng.randrange(n)] = rng.choice(INTERESTING8) if rng.random() < 0.6 else rng.randrange(256)
        elif op == 2 and n:  # truncation
            del b[rng.randrange(n + 1) :]
        elif op == 3:  # splice with another seed (or itself)
            other = rng.choice(seeds)
            a, c = rng.randrange(n + 1), rng.randrange(len(other) + 1)
            b = b[:a] + other[c : c + rng.randrange(1, 4096)] if rng.random() < 0.5 else b[:a] + other[c:]
        elif op == 4 and n >= 4:  # length-field edit
            cands = _be32_positions(bytes(b)) if kind in files.SEGMENT_KINDS else []
            i = rng.choice(cands) if cands and rng.random() < 0.8 else rng.randrange(n - 3)
            if i + 4 <= n:
                old = struct.unpack_from(">i", b, i)[0]
                new = rng.choice(INTERESTING32) if rng.random() < 0.5 else old + rng.randint(-16, 16)
                struct.pack_into(">i", b, i, max(-(2**31), min(2**31 - 1, new)))
        elif op == 5 and n:  # zero fill
            a = rng.randrange(n)
            ln = rng.randint(1, max(1, min(n - a, 4096)))
            b[a : a + ln] = bytes(ln)
        elif op == 6:  # zero tail (preallocation)
            b += bytes(rng.choice((1, 7, 8, 12, 61, 512, 4096)))
        elif op == 7 and n:  # delete a range
            a = rng.randrange(n)
            del b[a : a + rng.randint(1, 64)]
        elif op == 8 and n:  # duplicate a range
            a = rng.randrange(n)
            b[a:a] = b[a : a + rng.randint(1, 256)]
        elif op == 9 and n:  # random bytes
            a = rng.randrange(n + 1)
            b[a:a] = rng.randbytes(rng.randint(1, 16))
        elif op == 10 and n:  # text: swap a number
            text = bytes(b)
            nums = [m.span() for m in re.finditer(rb"-?\d+", text[:8192])]
            if nums:
                s, e = rng.choice(nums)
                b = bytearray(text[:s] + rng.choice(NUMBERS) + text[e:])
        elif op == 11 and n:  # text: break a line / field separator
            a = rng.randrange(n)
            b[a:a] = rng.choice((b"\n", b" ", b"=", b"\r\n", b"\t", b"#", b"\\", b"\x00", b"\xff"))
    if kind in files.SEGMENT_KINDS and rng.random() < 0.5:
        fix_crcs(b)
    return bytes(b[:max_size])


# ------------------------------------------------------------------ the check


def _schemas(kind: str) -> pa.Schema:
    return files.module_for(kind).SCHEMA if kind not in files.SEGMENT_KINDS else segment.BATCH_SCHEMA


def _check_common(kind: str, got, n: int) -> None:
    if got.table.schema != _schemas(kind):
        raise ContractBreak(f"table schema differs from the declared one:\n{got.table.schema}")
    if got.problems.schema != PROBLEM_SCHEMA:
        raise ContractBreak(f"problems schema differs:\n{got.problems.schema}")
    bad = set(got.problems.column("kind").to_pylist()) - VOCABULARY
    if VOCABULARY and bad:
        raise ContractBreak(f"problem kinds outside the vocabulary: {sorted(bad)}")
    pos = got.problems.column("position").to_pylist()
    limit = n + 1 if kind not in TEXT_KINDS else max(n, 1) + 1  # text: 1-based line numbers
    if any(p is None or p < 0 or p > limit for p in pos):
        raise ContractBreak(f"problem position outside the file ({n} bytes): {pos}")
    if any(v is None for v in got.problems.column("detail").to_pylist()):
        raise ContractBreak("a problem without detail")
    for name, t in got.extra.items():
        if not isinstance(t, pa.Table):
            raise ContractBreak(f"extra[{name!r}] is not a table")


@functools.cache
def _decoder(kind: str) -> tuple[Callable, pa.Schema]:
    """A topic's ``decode_records`` and the schema it declares."""
    import importlib

    mod = importlib.import_module(f"parsers.{kind}")
    schema = {
        "consumer_offsets": "CONSUMER_OFFSETS_SCHEMA",
        "transaction_state": "TRANSACTIONS_SCHEMA",
        "share_group_state": "SHARE_GROUP_STATE_SCHEMA",
        "metadata_records": "METADATA_RECORDS_SCHEMA",
        "remote_log_metadata": "REMOTE_SEGMENTS_SCHEMA",
    }[kind]
    return mod.decode_records, getattr(mod, schema)


def check_record(kind: str, data: bytes) -> None:
    """Decode one record as the ``kind`` topic's decoder does (through ``decode_records``, so the
    row must also fit the declared schema); raise on an exception or a contract break."""
    decode_records, schema = _decoder(kind)
    ctl, key, value = decode_record_input(data)
    row = {"batch_position": 0, "offset": 7, "timestamp": 0, "control_type": ctl, "key": key, "value": value, "position": 0}
    row["key_size"] = -1 if key is None else len(key)
    row["value_size"] = -1 if value is None else len(value)
    table, problems = decode_records(pa.Table.from_pylist([row], schema=segment.record_schema(True)))
    if table.schema != schema:
        raise ContractBreak(f"decoded schema differs from the declared one:\n{table.schema}")
    bad = {p.kind for p in problems} - VOCABULARY
    if VOCABULARY and bad:
        raise ContractBreak(f"problem kinds outside the vocabulary: {sorted(bad)}")
    if any(p.position != 0 or not p.detail for p in problems):
        raise ContractBreak(f"a problem away from the record or without detail: {problems}")


def check_spans_read_as_whole(data: bytes, path: str, whole, rng: random.Random) -> None:
    """Read ``data`` in spans cut at some of its batch positions (where an index points) and at
    a random byte or two (a stale index), keep what ``pipeline.check_spans`` keeps, and compare
    with the whole reading: the driver of ``ingest`` does exactly this with the spans' tables."""
    from jobs.ingest.pipeline import check_spans

    bpos = whole.table.column("position").to_pylist()
    cuts = set(rng.sample(bpos[1:], min(len(bpos) - 1, rng.randint(1, 4))))
    if rng.random() < 0.3:
        cuts.add(rng.randint(1, len(data) - 1))
    bounds = [0, *sorted(cuts), len(data)]
    reports, parts = [], {}
    for task, (start, stop) in enumerate(zip(bounds, bounds[1:])):
        span = segment.Span()
        parts[task] = list(segment.iter_parse(data, path, records=True, start=start, stop=stop, span=span))
        reports.append({"path": path, "span_start": start, "span_next": span.next, "span_code": span.stop,
                        "first_base": span.first_base, "last_offset": span.last_offset})
    discard, rerun, between = check_spans({path: [(start, task) for task, start in enumerate(bounds[:-1])]}, reports)
    if rerun:
        if all(c in bpos for c in cuts):
            raise ContractBreak(f"spans cut at batch positions {sorted(cuts)} did not chain")
        return
    kept = [p for task, ps in parts.items() if task not in discard for p in ps]
    batches = pa.concat_tables([p.table for p in kept])
    problems = [(r["position"], r["kind"], r["detail"]) for p in kept for r in p.problems.to_pylist()]
    problems += [(position, "offset_regression", detail) for _, position, detail in between]
    want = [(r["position"], r["kind"], r["detail"]) for r in whole.problems.to_pylist()]
    if not batches.equals(whole.table) or sorted(problems) != sorted(want):
        raise ContractBreak(f"reading in spans cut at {sorted(cuts)} differs from reading the whole file")


def check(kind: str, data: bytes, rng: random.Random | None = None) -> None:
    """Parse ``data`` as ``kind``; raise on an uncaught exception or a contract break."""
    if kind in DECODER_TOPICS:
        check_record(kind, data)
        return
    path = FILE_NAMES[kind]
    if kind in files.SEGMENT_KINDS:
        payloads = bool(rng and rng.random() < 0.25)
        got = segment.parse(data, path, records=True, payloads=payloads)
        _check_common(kind, got, len(data))
        recs = got.extra["records"]
        if recs.schema != segment.record_schema(payloads):
            raise ContractBreak(f"records schema differs:\n{recs.schema}")
        bpos = got.table.column("position").to_numpy()
        bsize = got.table.column("size").to_numpy()
        if bpos.size and ((np.diff(bpos) <= 0).any() or (bpos + bsize > len(data)).any() or (bsize < 12).any()):
            raise ContractBreak("batches overlap, go backwards or run past the end of the file")
        if rng is not None and rng.random() < 0.03 and len(data) > 64:  # chunked == whole (three parses: rarely)
            chunk = rng.randint(1, len(data))
            parts = list(segment.iter_parse(data, path, records=False, chunk_bytes=chunk))
            whole = segment.parse(data, path)
            a = pa.concat_tables([p.table for p in parts])
            pa_ = pa.concat_tables([p.problems for p in parts])
            if not a.equals(whole.table) or sorted(pa_.to_pylist(), key=str) != sorted(whole.problems.to_pylist(), key=str):
                raise ContractBreak(f"reading in chunks of {chunk} bytes differs from reading the whole file")
        if rng is not None and rng.random() < 0.03 and bpos.size > 1:  # spans == whole, when they chained
            check_spans_read_as_whole(data, path, got, rng)
    else:
        got = files.small_parser(kind)(data, path)
        _check_common(kind, got, len(data))
        if rng is None or rng.random() >= 0.1:
            return
        mv = files.small_parser(kind)(memoryview(data), path)
        if not (mv.table.equals(got.table) and mv.problems.equals(got.problems)):
            raise ContractBreak("memoryview input parses differently from bytes")


# ------------------------------------------------------------------ running


def save_crash(kind: str, data: bytes, err: str) -> Path:
    CRASHES.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha1(data).hexdigest()[:16]
    p = CRASHES / f"{kind}-{h}.bin"
    p.write_bytes(data)
    p.with_suffix(".txt").write_text(err, encoding="utf-8")
    return p


def _signature(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    last = tb[-1] if tb else None
    return f"{type(exc).__name__}@{last.filename}:{last.lineno}" if last else type(exc).__name__


def fuzz_kind(
    kind: str, inputs: int, seconds: float | None, seed: int, seeds: list[bytes], log: Callable[[str], None] = print
) -> dict:
    """Mutation engine: ``inputs`` mutants (or until ``seconds``), deterministic for ``seed``."""
    rng = random.Random(f"{seed}:{kind}")
    crashes: dict[str, Path] = {}
    t0 = time.perf_counter()
    deadline = t0 + seconds if seconds else None
    done = 0
    # the seeds themselves first, then mutants
    queue = list(seeds)
    alarm = threading.current_thread() is threading.main_thread()  # signals reach the main thread only
    if alarm:
        old = signal.signal(signal.SIGALRM, _on_alarm)
    while done < inputs:
        if deadline is not None and (done & 15) == 0 and time.perf_counter() >= deadline:
            break
        data = queue.pop() if queue else mutate(rng, rng.choice(seeds), seeds, kind)
        started = time.perf_counter()
        try:
            try:
                if alarm:  # a loop in Python is interrupted; a JIT kernel is caught when it returns
                    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
                check(kind, data, rng)
            finally:
                if alarm:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            if time.perf_counter() - started > HANG_SECONDS:
                raise Hang(f"took {time.perf_counter() - started:.1f} s")
        except Exception as exc:  # noqa: BLE001 - that is what we are looking for
            sig = _signature(exc)
            if sig not in crashes:
                crashes[sig] = save_crash(kind, data, "".join(traceback.format_exception(exc)))
                log(f"  CRASH {kind}: {sig}: {str(exc)[:200]} -> {crashes[sig]}")
        done += 1
    if alarm:
        signal.signal(signal.SIGALRM, old)
    dt = time.perf_counter() - t0
    return {"kind": kind, "inputs": done, "seconds": dt, "rate": done / dt if dt else 0.0, "crashes": list(crashes.values())}


def _atheris_child(kind: str, inputs: int, seconds: float | None, seed: int) -> None:
    import atheris

    seeds = load_seeds()[kind]
    for s in seeds:  # warm the JIT before instrumenting
        try:
            check(kind, s)
        except Exception:  # noqa: BLE001
            pass
    corpus = Path(tempfile.mkdtemp(prefix=f"fuzz-{kind}-"))
    for i, s in enumerate(seeds):
        (corpus / f"seed{i}").write_bytes(s)
    CRASHES.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)

    counter = os.environ.get("KF_FUZZ_COUNT")
    runs = [0, 0.0]

    def one(data: bytes) -> None:
        runs[0] += 1
        if runs[0] == 1:
            runs[1] = time.time()
        if counter and runs[0] % 256 == 0:  # inputs run and seconds spent fuzzing, for the parent
            Path(counter).write_text(f"{runs[0]} {time.time() - runs[1]}")
        check(kind, data, rng)

    def custom(data: bytes, max_size: int, s: int) -> bytes:
        r = random.Random(s)
        if r.random() < 0.3:
            return atheris.Mutate(data, max_size)
        return mutate(r, data, seeds, kind, max_size)

    argv = [
        sys.argv[0],
        str(corpus),
        f"-runs={inputs}",
        f"-seed={seed or 1}",
        f"-artifact_prefix={CRASHES}/{kind}-",
        "-max_len=131072",
        "-rss_limit_mb=4096",
    ]
    if seconds:
        argv.append(f"-max_total_time={int(max(1, seconds))}")
    atheris.instrument_all()  # Python coverage for libFuzzer (numba kernels are compiled already)
    atheris.Setup(argv, one, custom_mutator=custom)
    atheris.Fuzz()


def run_atheris(kind: str, inputs: int, seconds: float | None, seed: int) -> dict:
    t0 = time.perf_counter()
    cmd = [sys.executable, __file__, "--_atheris-child", kind, "--inputs", str(inputs), "--seed", str(seed)]
    if seconds:
        cmd += ["--seconds", str(seconds)]
    with tempfile.TemporaryDirectory() as tmp:
        count = Path(tmp) / "runs"
        out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "KF_FUZZ_COUNT": str(count)})
        dt = time.perf_counter() - t0
        m = re.findall(r"Done (\d+) runs|#(\d+)\s", out.stderr)
        n, secs = count.read_text().split() if count.exists() else ("0", "0")
        runs = max([int(a or b) for a, b in m] + [int(n)])
        dt = float(secs) or dt  # the rate of fuzzing, not of instrumenting
    crashes = [] if out.returncode == 0 else [p for p in CRASHES.glob(f"{kind}-*") if p.stat().st_mtime >= time.time() - dt - 1]
    if out.returncode != 0:
        print(out.stderr[-3000:], file=sys.stderr)
        crashes = crashes or [Path(f"(exit {out.returncode})")]
    return {"kind": kind, "inputs": runs, "seconds": dt, "rate": runs / dt if dt else 0.0, "crashes": crashes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", action="append", choices=sorted(KINDS), help="fuzz only this kind (repeatable)")
    ap.add_argument("--inputs", type=int, default=DEFAULT_INPUTS, help="inputs per parser (default %(default)s)")
    ap.add_argument("--seconds", type=float, default=None, help="time limit per parser")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engine", choices=("mutate", "atheris"), default="mutate")
    ap.add_argument("--_atheris-child", dest="child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _atheris_child(args.child, args.inputs, args.seconds, args.seed)
        return 0
    kinds = args.kind or KINDS
    seeds = load_seeds() if args.engine == "mutate" else {}
    total_crashes = 0
    print(f"{'parser':22} {'inputs':>10} {'seconds':>8} {'inputs/s':>10} {'crashes':>8}", flush=True)
    for kind in kinds:
        if args.engine == "atheris":
            r = run_atheris(kind, args.inputs, args.seconds, args.seed)
        else:
            r = fuzz_kind(kind, args.inputs, args.seconds, args.seed, seeds[kind])
        total_crashes += len(r["crashes"])
        print(f"{kind:22} {r['inputs']:>10} {r['seconds']:>8.0f} {r['rate']:>10.0f} {len(r['crashes']):>8}", flush=True)
        for c in r["crashes"]:
            print(f"  crash input: {c}", flush=True)
    return 1 if total_crashes else 0


if __name__ == "__main__":
    sys.exit(main())
