"""Kafka 3.6.2's own kafka-dump-log judges what the writer writes: every batch, record, index
entry, producer snapshot and aborted transaction must read back exactly as specified.

Expected dump lines are built from the specs (what we meant to write), never from our parser.
All partitions go through a handful of kafka-dump-log calls (``--files a,b,c``): each JVM start
costs about a second on a shared 2-core machine.
"""

from __future__ import annotations

import random
import shutil
import string
import subprocess
from pathlib import Path

import pytest

from parsers import offset_index, time_index
from sample_data.writer.indexes import offset_index_bytes
from sample_data.writer.log import LogConfig, PartitionLayout, write_partition
from sample_data.writer.records import BatchSpec, Record, encode_legacy_message_set, increment_sequence

T0 = 1_735_689_600_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CONFIG = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=60, max_index_bytes=1024)


def _text(rng: random.Random, n: int) -> bytes:
    return "".join(rng.choices(string.ascii_letters + string.digits, k=n)).encode()


def codec_batches(codec: str) -> list[BatchSpec]:
    """Headers, null key/value, big values (several snappy/lz4 blocks), log append time,
    out-of-order timestamps, compaction holes, a new leader epoch."""
    rng = random.Random(codec)
    big = 40_000  # 3 records = 120 kB: 4 xerial blocks of 32 KiB, 2 lz4 blocks of 64 KiB
    return [
        BatchSpec(
            0,
            (
                Record(b"k0", b"v0 " + codec.encode(), T0),
                Record(b"k1", b"v1", T0 + 1, (("h1", b"x"), ("null-header", None))),
                Record(None, b"null key", T0 + 2, (("trace-id", b"abc"),)),
            ),
            codec=codec,
        ),
        BatchSpec(3, (Record(b"tombstone", None, T0 + 3), Record(None, None, T0 + 4)), codec=codec),
        BatchSpec(5, tuple(Record(b"big%d" % i, _text(rng, big), T0 + 5 + i) for i in range(3)), codec=codec),
        BatchSpec(
            8,
            (Record(b"lat-0", b"append time", T0 + 10), Record(b"lat-1", b"append time", T0 + 11)),
            codec=codec,
            timestamp_type="log_append",
            log_append_time=T0 + 300_000,
        ),
        BatchSpec(
            10,
            (Record(b"o0", b"a", T0 + 20), Record(b"o1", b"b", T0 + 90), Record(b"o2", b"c", T0 + 30)),
            codec=codec,
            partition_leader_epoch=2,
        ),
        BatchSpec(
            13,
            (
                Record(b"c0", b"kept", T0 + 100, offset_delta=0),
                Record(b"c2", b"kept", T0 + 102, offset_delta=2),
                Record(b"c5", b"kept", T0 + 105, offset_delta=5),
            ),
            codec=codec,
            partition_leader_epoch=2,
        ),
        BatchSpec(
            19,
            tuple(Record(b"tail%d" % i, b"tail value %d" % i, T0 + 200 + i) for i in range(4)),
            codec=codec,
            partition_leader_epoch=2,
        ),
    ]


def txn_batches() -> list[BatchSpec]:
    """Idempotent, transactional (commit, abort, open), control markers and the cleaner's empty batch."""
    ts = T0 + 1000

    def rec(k: str, i: int) -> Record:
        return Record(k.encode(), f"{k} value".encode(), ts + i)

    return [
        BatchSpec(
            31, (rec("idem-0", 0), rec("idem-1", 1), rec("idem-2", 2)), 1, producer_id=1000, producer_epoch=0, base_sequence=0
        ),
        BatchSpec(
            34,
            (rec("idem-3", 3), rec("idem-4", 4), rec("idem-5", 5)),
            1,
            "lz4",
            producer_id=1000,
            producer_epoch=0,
            base_sequence=3,
        ),
        BatchSpec(
            37,
            (rec("txc-0", 10), rec("txc-1", 11)),
            1,
            producer_id=2000,
            producer_epoch=5,
            base_sequence=0,
            is_transactional=True,
        ),
        BatchSpec(
            39,
            (rec("txa-0", 12), rec("txa-1", 13)),
            1,
            "zstd",
            producer_id=3000,
            producer_epoch=1,
            base_sequence=0,
            is_transactional=True,
        ),
        BatchSpec(41, (rec("txc-2", 14),), 1, "gzip", producer_id=2000, producer_epoch=5, base_sequence=2, is_transactional=True),
        BatchSpec(42, (), 1, producer_id=2000, producer_epoch=5, control="commit", coordinator_epoch=7, max_timestamp=ts + 20),
        BatchSpec(43, (rec("txa-2", 21),), 1, producer_id=3000, producer_epoch=1, base_sequence=2, is_transactional=True),
        BatchSpec(44, (), 1, producer_id=3000, producer_epoch=1, control="abort", coordinator_epoch=7, max_timestamp=ts + 22),
        BatchSpec(
            45,
            (),
            1,
            producer_id=1000,
            producer_epoch=0,
            base_sequence=6,
            last_offset_delta=1,
            base_timestamp=-1,
            max_timestamp=ts + 30,
        ),
        BatchSpec(
            47,
            (rec("open-0", 40), rec("open-1", 41)),
            3,
            "snappy",
            producer_id=4000,
            producer_epoch=2,
            base_sequence=0,
            is_transactional=True,
        ),
        BatchSpec(49, (rec("wrap", 50),), 3, producer_id=5000, producer_epoch=0, base_sequence=(1 << 31) - 1),
    ]


# ------------------------------------------------------------------------------ kafka-dump-log


@pytest.fixture(scope="session")
def dump_tool(dump_log, tmp_path_factory):
    """kafka-dump-log with any flags: ``run(flags, paths) -> (rc, {path: [lines]}, stderr)``."""
    script = next(tmp_path_factory.getbasetemp().glob("kafka*/**/bin/kafka-dump-log.sh"))

    def run(flags: list[str], paths: list[Path]) -> tuple[int, dict[str, list[str]], str]:
        cmd = [str(script), *flags, "--files", ",".join(str(p) for p in paths)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        sections: dict[str, list[str]] = {}
        cur: list[str] = []
        for line in out.stdout.splitlines():
            if line.startswith("Dumping "):
                cur = sections.setdefault(line[len("Dumping ") :].strip(), [])
            else:
                cur.append(line)
        return out.returncode, sections, out.stderr

    return run


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, tuple[list[BatchSpec], PartitionLayout]]:
    root = tmp_path_factory.mktemp("writer-dump")
    out = {}
    for codec in CODECS:
        specs = codec_batches(codec)
        out[codec] = (specs, write_partition(root / f"codec-{codec}-0", specs, CONFIG, topic_id="V3JpdGVyVG9waWNJZDAwMA"))
    specs = txn_batches()
    out["txn"] = (specs, write_partition(root / "txn-0", specs, CONFIG, roll_at=[41, 47]))
    specs = codec_batches("zstd")
    out["crashed"] = (specs, write_partition(root / "crashed-0", specs, CONFIG, clean=False))
    return out


@pytest.fixture(scope="module")
def segment_dump(dump_tool, written):
    logs = [s.log_path for _, lay in written.values() for s in lay.segments]
    rc, sections, err = dump_tool(["--deep-iteration", "--print-data-log"], logs)
    assert rc == 0, err
    return sections


def expected_segment_lines(specs: list[BatchSpec], layout: PartitionLayout, base_offset: int) -> list[str]:
    """The lines kafka-dump-log should print for one segment, from the specs alone."""
    lines = [f"Log starting offset: {base_offset}"]
    for spec, loc in zip(specs, layout.batches):
        if loc.segment_base_offset != base_offset:
            continue
        data = loc.path.read_bytes()[loc.position : loc.position + loc.size]
        ts_type = "LogAppendTime" if spec.timestamp_type == "log_append" else "CreateTime"
        max_ts = spec.log_append_time if spec.timestamp_type == "log_append" else spec.computed_max_timestamp
        last_seq = -1 if spec.base_sequence < 0 else increment_sequence(spec.base_sequence, spec.last_offset - spec.base_offset)
        lines.append(
            f"baseOffset: {spec.base_offset} lastOffset: {spec.last_offset} count: {spec.record_count} "
            f"baseSequence: {spec.base_sequence} lastSequence: {last_seq} producerId: {spec.producer_id} "
            f"producerEpoch: {spec.producer_epoch} partitionLeaderEpoch: {spec.partition_leader_epoch} "
            f"isTransactional: {str(spec.is_transactional or spec.control is not None).lower()} "
            f"isControl: {str(spec.control is not None).lower()} deleteHorizonMs: OptionalLong.empty position: {loc.position} "
            f"{ts_type}: {max_ts} size: {loc.size} magic: 2 compresscodec: {spec.codec} crc: {int.from_bytes(data[17:21], 'big')} isvalid: true"
        )
        if spec.control is not None:
            lines.append(
                f"| offset: {spec.base_offset} CreateTime: {spec.max_timestamp} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
                f"endTxnMarker: {spec.control.upper()} coordinatorEpoch: {spec.coordinator_epoch}"
            )
            continue
        for i, r in enumerate(spec.records):
            delta = i if r.offset_delta is None else r.offset_delta
            seq = -1 if spec.base_sequence < 0 else increment_sequence(spec.base_sequence, delta)
            ts = spec.log_append_time if spec.timestamp_type == "log_append" else r.timestamp
            line = (
                f"| offset: {spec.base_offset + delta} {ts_type}: {ts} keySize: {-1 if r.key is None else len(r.key)} "
                f"valueSize: {-1 if r.value is None else len(r.value)} sequence: {seq} headerKeys: [{','.join(k for k, _ in r.headers)}]"
            )
            if r.key is not None:
                line += f" key: {r.key.decode()}"
            if r.value is not None:
                line += f" payload: {r.value.decode()}"
            lines.append(line)
    return lines


@pytest.mark.parametrize("name", [*CODECS, "txn", "crashed"])
def test_kafka_reads_every_batch_and_record_as_specified(name, written, segment_dump):
    specs, layout = written[name]
    assert len({s.base_offset for s in layout.segments}) == len(layout.segments)
    for seg in layout.segments:
        got = [line for line in segment_dump[str(seg.log_path)] if line]
        assert got == expected_segment_lines(specs, layout, seg.base_offset), seg.log_path
    n_batches = sum(
        1 for line in (ln for seg in layout.segments for ln in segment_dump[str(seg.log_path)]) if line.startswith("baseOffset: ")
    )
    assert n_batches == len(specs)


def test_big_batches_span_several_compression_blocks(written):
    """The 120 kB batch must really exercise multi-block framing (xerial 32 KiB, lz4 64 KiB)."""
    for codec in ("snappy", "lz4"):
        specs, layout = written[codec]
        assert sum(len(r.value) for r in specs[2].records) > 64 * 1024
        assert layout.batches[2].size > 64 * 1024 // 10


def test_segments_roll_at_segment_bytes(written):
    _, layout = written["none"]
    assert len(layout.segments) >= 2  # the 120 kB batch cannot share a 64 kB segment
    for a, b in zip(layout.segments, layout.segments[1:]):
        assert b.base_offset == a.next_offset or b.base_offset > a.base_offset
        assert a.log_path.stat().st_size == a.size


def test_kafka_reads_our_indexes_snapshots_and_txn_index(dump_tool, written, tmp_path):
    files, expected = [], {}
    for name, (_, layout) in written.items():
        for seg in layout.segments:
            if name == "crashed" and seg is layout.active_segment:
                continue
            files += [seg.index_path, seg.time_index_path]
            expected[str(seg.index_path)] = [f"offset: {o} position: {p}" for o, p in seg.index_entries] or [
                f"{seg.index_path} is empty."
            ]
            expected[str(seg.time_index_path)] = [f"timestamp: {t} offset: {o}" for t, o in seg.time_index_entries] or [
                f"{seg.time_index_path} is empty."
            ]
            if seg.txn_index_path:
                files.append(seg.txn_index_path)
                expected[str(seg.txn_index_path)] = [
                    f"version: 0 producerId: {p} firstOffset: {f} lastOffset: {la} lastStableOffset: {ls}"
                    for p, f, la, ls in seg.aborted_txns
                ]
        for offset, entries in layout.producer_snapshots.items():
            path = layout.dir / f"{offset:020d}.snapshot"
            files.append(path)
            expected[str(path)] = [
                f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: {e.coordinator_epoch} "
                f"currentTxnFirstOffset: {'OptionalLong.empty' if e.current_txn_first_offset < 0 else f'OptionalLong[{e.current_txn_first_offset}]'} "
                f"lastTimestamp: {e.timestamp} firstSequence: {increment_sequence(e.last_sequence, -e.offset_delta) if e.last_sequence >= 0 else -1} "
                f"lastSequence: {e.last_sequence} lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} timestamp: {e.timestamp}"
                for e in entries
            ]
    rc, sections, err = dump_tool([], files)
    assert rc == 0, err
    for path, lines in expected.items():
        assert [ln for ln in sections[path] if ln] == lines, path
    # the scenarios really cover what they claim
    _, txn = written["txn"]
    assert [a for s in txn.segments for a in s.aborted_txns] == [(3000, 39, 44, 45)]
    assert any(e.current_txn_first_offset == 47 for e in txn.producer_snapshots[txn.log_end_offset])
    assert sum(len(s.index_entries) for s in written["none"][1].segments) >= 3

    # negative control: the same check must catch an index entry pointing at the wrong batch
    seg = next(s for s in written["none"][1].segments if len(s.index_entries) >= 2)
    bad = tmp_path / "corrupt-0"
    bad.mkdir()
    for p in (seg.log_path, seg.index_path, seg.time_index_path):
        shutil.copy(p, bad / p.name)
    (o0, _), (_, p1) = seg.index_entries[:2]
    entries = [(o0, p1), *seg.index_entries[1:]]
    (bad / seg.index_path.name).write_bytes(offset_index_bytes(seg.base_offset, entries))

    rc, sections, err = dump_tool(["--verify-index-only"], [*files, bad / seg.index_path.name])
    assert rc == 0, err
    # kafka-dump-log reports index problems on stderr, after all files: "Mismatches in :<path>",
    # "Found timestamp mismatch in :<path>", "Found out of order timestamp in :<path>"
    report = err + "\n".join(ln for lines in sections.values() for ln in lines)
    flagged = {ln.split(" in :", 1)[1].strip() for ln in report.splitlines() if " in :" in ln}
    # A quirk of kafka-dump-log, not of our files: it takes a batch's timestamp as the max over its
    # records, so a time-index entry on the cleaner's empty batch (header maxTimestamp set, no
    # records) "mismatches" with log timestamp -1. The broker (LogSegment.append/recover) uses the
    # header's maxTimestamp, as we do.
    quirks = set()
    for specs, layout in written.values():
        for s in layout.segments:
            for ts, off in s.time_index_entries:
                holder = next(b for b in specs if b.base_offset <= off <= b.last_offset)
                if holder.record_count == 0:
                    quirks.add(str(s.time_index_path))
                    assert f"Index timestamp: {ts}, log timestamp: -1" in report
    assert quirks, "the txn scenario is meant to put a time-index entry on the empty batch"
    assert flagged == {str(bad / seg.index_path.name)} | quirks, report[-2000:]
    assert f"Index offset: {o0}, log offset: {seg.index_entries[1][0]}" in report
    rc, sections, err = dump_tool(["--index-sanity-check"], [f for f in files if f.suffix in (".index", ".timeindex")])
    assert rc == 0, err
    for f in files:
        if f.suffix in (".index", ".timeindex"):
            assert sections[str(f)][0] == f"{f} " + ("passed sanity check." if f.stat().st_size else "is empty."), f


def test_crashed_active_indexes_read_like_the_golden_crashed_ones(dump_tool, written):
    """As in golden-topic-0's segment 49: the offset index is preallocated and passes the sanity
    check (kafka-dump-log prints only the real entries); the time index fails it."""
    _, layout = written["crashed"]
    seg = layout.active_segment
    assert seg.index_path.stat().st_size == 1024 and seg.time_index_path.stat().st_size == 1020
    assert seg.index_entries and seg.time_index_entries
    rc, sections, err = dump_tool([], [seg.index_path, seg.time_index_path])
    assert rc == 0, err
    assert [ln for ln in sections[str(seg.index_path)] if ln] == [f"offset: {o} position: {p}" for o, p in seg.index_entries]
    rc, sections, err = dump_tool(["--index-sanity-check"], [seg.index_path])
    assert rc == 0 and "passed sanity check" in sections[str(seg.index_path)][0]
    rc, _, err = dump_tool(["--index-sanity-check"], [seg.time_index_path])
    assert rc != 0 and "last timestamp is 0 which is less than the first timestamp" in err
    # our parsers see the same: real entries, then preallocated slots
    parsed = offset_index.parse(seg.index_path.read_bytes(), str(seg.index_path))
    assert parsed.table.num_rows >= len(seg.index_entries)
    assert parsed.table.slice(0, len(seg.index_entries))["offset"].to_pylist() == [o for o, _ in seg.index_entries]
    parsed_t = time_index.parse(seg.time_index_path.read_bytes(), str(seg.time_index_path))
    assert parsed_t.table.slice(0, len(seg.time_index_entries))["timestamp"].to_pylist() == [t for t, _ in seg.time_index_entries]
    assert layout.log_end_offset not in layout.producer_snapshots  # no snapshot at the LEO after a crash


@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_reads_legacy_message_sets(tmp_path, dump_tool, magic):
    records = [Record(b"k%d" % i, b"legacy value %d" % i, T0 + i) for i in range(3)]
    parts, expected, offset = [], [], 0
    for codec in ("none", "gzip", "snappy", "lz4"):
        data = encode_legacy_message_set(offset, records, magic=magic, codec=codec)
        parts.append(data)
        expected.append((codec, offset, offset + 2))
        offset += 3
    if magic == 1:
        data = encode_legacy_message_set(
            offset, records, magic=1, codec="gzip", timestamp_type="log_append", log_append_time=T0 + 9999
        )
        parts.append(data)
        expected.append(("gzip", offset, offset + 2))
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(parts))
    rc, sections, err = dump_tool(["--deep-iteration", "--print-data-log"], [path])
    assert rc == 0, err
    lines = sections[str(path)]
    shallow = [ln for ln in lines if ln.startswith("offset: ")]
    deep = [ln for ln in lines if ln.startswith("| offset: ")]
    assert all("isvalid: true" in ln and f"magic: {magic}" in ln for ln in shallow)
    assert len(deep) == 3 * len(expected)
    assert all("isValid: true" in ln for ln in deep)
    assert [int(ln.split()[2]) for ln in deep] == list(range(3 * len(expected)))
    wrappers = [ln for ln in shallow if "compresscodec: none" not in ln]
    assert [int(ln.split()[1]) for ln in wrappers] == [last for c, _, last in expected if c != "none"]
    assert [ln.split("payload: ")[1] for ln in deep[:3]] == [r.value.decode() for r in records]
    if magic == 1:
        assert f"LogAppendTime: {T0 + 9999}" in shallow[-1]


def test_a_pre_0_11_partition_is_message_sets_without_leader_epochs(tmp_path, dump_tool):
    """A magic 1 partition as 0.10 wrote it: Kafka reads v1 messages (no leader epoch field), no
    leader-epoch-checkpoint, and each offset-index entry names the message at its position."""
    specs, offset = [], 0
    for i, codec in enumerate(("none", "none", "gzip", "none", "lz4", "none")):
        recs = tuple(Record(b"k%d" % j, b"old value %d" % j, T0 + 10 * i + (j * 7) % 3) for j in range(3))
        specs.append(BatchSpec(offset, recs, partition_leader_epoch=-1, codec=codec, magic=1))
        offset += 3
    layout = write_partition(tmp_path / "old-0", specs, CONFIG, epoch_cache=False)
    assert not (tmp_path / "old-0" / "leader-epoch-checkpoint").exists() and layout.leader_epochs == []
    seg = layout.segments[0]
    rc, sections, err = dump_tool(["--deep-iteration"], [seg.log_path, seg.index_path])
    assert rc == 0, err
    shallow = [ln for ln in sections[str(seg.log_path)] if ln.startswith("offset: ")]
    assert shallow and all("magic: 1" in ln and "isvalid: true" in ln for ln in shallow)
    assert [int(ln.split()[1]) for ln in shallow] == [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 14, 15, 16, 17]  # wrappers: last offset
    deep = [ln for ln in sections[str(seg.log_path)] if ln.startswith("| offset: ")]
    assert [int(ln.split()[2]) for ln in deep] == list(range(offset))
    at = {int(ln.split("position: ")[1].split()[0]): int(ln.split()[1]) for ln in shallow}
    entries = [ln for ln in sections[str(seg.index_path)] if ln.startswith("offset: ")]
    assert [tuple(int(x) for x in ln.split()[1::2]) for ln in entries] == seg.index_entries and len(entries) >= 2
    for o, pos in seg.index_entries:  # a message starts there, holding the entry's offset (first of its append)
        assert pos in at and at[pos] >= o
    with pytest.raises(ValueError, match="cannot hold a partition leader epoch"):
        BatchSpec(0, specs[0].records, magic=1)
    with pytest.raises(ValueError, match="producer id"):
        BatchSpec(0, specs[0].records, partition_leader_epoch=-1, producer_id=5, producer_epoch=0, magic=0)
