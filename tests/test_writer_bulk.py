"""The bulk generator: its CRC algebra, its layout (byte-identical to ``write_partition``, which
the golden and kafka-dump-log tests judge), and Kafka reading its batches."""

from __future__ import annotations

import random

import crc32c
import numpy as np
import pytest
from kafka_dump_log import parse_dump_text

from parsers import segment
from parsers.files import detect, parse_path
from sample_data.writer import bulk
from sample_data.writer.log import LogConfig, write_partition
from sample_data.writer.records import BatchSpec, Record

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def test_crc_combine_equals_crc_of_concatenation():
    rng = random.Random(5)
    for n in (0, 1, 7, 40, 1000, 70_000):
        a, b = rng.randbytes(rng.randrange(1, 64)), rng.randbytes(n)
        assert bulk.crc32c_combine(crc32c.crc32c(a), crc32c.crc32c(b), len(b)) == crc32c.crc32c(a + b)


def _reference_specs(templates, n_batches, seed, producer_id):
    """The same batches as BatchSpecs for write_partition, each carrying its template's payload."""
    choice = np.random.default_rng(seed).integers(0, len(templates), n_batches)
    specs, off = [], 0
    for i, k in enumerate(choice):
        t = templates[k]
        specs.append(
            BatchSpec(
                off,
                tuple(Record(None, None, 0) for _ in range(t.count)),
                codec=t.codec,
                producer_id=producer_id,
                producer_epoch=0 if producer_id >= 0 else -1,
                base_sequence=off if producer_id >= 0 else -1,
                base_timestamp=bulk.T0 + i,
                max_timestamp=bulk.T0 + i + t.max_timestamp_delta,
                stored_payload=t.payload,
            )
        )
        off += t.count
    return specs


@pytest.mark.parametrize(("codec", "producer_id"), [("none", 77), ("lz4", -1), ("zstd", 5)])
def test_bulk_partition_equals_write_partition(tmp_path, codec, producer_id):
    templates = bulk.make_templates(codec, 10, 60, 12, 4, seed=1)
    cfg = LogConfig(segment_bytes=8000, index_interval_bytes=900, max_index_bytes=1 << 20)
    stats = bulk.write_bulk_partition(
        tmp_path / "bulk", templates, 300, cfg, seed=3, producer_id=producer_id, topic_id="QmVuY2hUb3BpY0lkMDAwMA"
    )
    write_partition(tmp_path / "ref", _reference_specs(templates, 300, 3, producer_id), cfg, topic_id="QmVuY2hUb3BpY0lkMDAwMA")
    names = sorted(p.name for p in (tmp_path / "ref").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "bulk").iterdir())
    assert len(stats.segments) > 3 and stats.records == sum(s.records for s in stats.segments) == sum(
        spec.record_count for spec in _reference_specs(templates, 300, 3, producer_id)
    )
    for name in names:
        assert (tmp_path / "bulk" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name


def test_kafka_reads_bulk_segments_of_every_codec(tmp_path, dump_log):
    paths, expect = [], {}
    for codec in CODECS:
        templates = bulk.make_templates(codec, 20, 100, 12, 3, seed=2)
        path = tmp_path / codec / "00000000000000000000.log"  # kafka-dump-log wants a segment name
        path.parent.mkdir()
        stats = bulk.write_segment_file(path, templates, max_batches=30, producer_id=9, producer_epoch=1)
        paths.append(path)
        expect[str(path)] = stats
    rc, out = dump_log(",".join(str(p) for p in paths))
    assert rc == 0
    dumps = parse_dump_text(out)
    for path, stats in expect.items():
        d = dumps[path]
        assert len(d["batches"]) == stats.batches == 30
        assert len(d["records"]) == stats.records == 600
        assert all(b["isvalid"] == "true" and b["compresscodec"] == stats.codec for b in d["batches"])
        assert [int(b["baseOffset"]) for b in d["batches"]] == [20 * i for i in range(30)]
        assert [int(b["baseSequence"]) for b in d["batches"]] == [20 * i for i in range(30)]
        assert [int(r["offset"]) for r in d["records"]] == list(range(600))
        assert sum(int(b["size"]) for b in d["batches"]) == stats.size


def test_generate_writes_consistent_brokers(tmp_path):
    r = bulk.generate(
        tmp_path / "out", brokers=2, partitions=2, records=5000, codec="snappy", segment_bytes=100_000, records_per_batch=50
    )
    assert [p.name for p in r.brokers] == ["broker-1", "broker-2"]
    for broker in r.brokers:
        hw = {}
        for part in parse_path(str(broker / "replication-offset-checkpoint"), "replication_offset"):
            hw.update({(row["topic"], row["partition"]): row["offset"] for row in part.table.to_pylist()})
        assert hw == {("bench", 0): 5000, ("bench", 1): 5000}
        assert (broker / ".kafka_cleanshutdown").exists()
        for p in range(2):
            logs = sorted((broker / f"bench-{p}").glob("*.log"))
            assert len(logs) > 1
            n = 0
            for log in logs:
                parsed = segment.parse(log.read_bytes(), str(log))
                assert parsed.problems.num_rows == 0 and all(parsed.table["crc_valid"].to_pylist())
                n += sum(parsed.table["record_count"].to_pylist())
            assert n == 5000
            for idx in (broker / f"bench-{p}").glob("*.index"):
                for piece in parse_path(str(idx), detect(str(idx))):
                    assert piece.problems.num_rows == 0
    assert r.bytes == 2 * sum(s.bytes for s in r.partitions.values())
