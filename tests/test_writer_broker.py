"""write_broker_dir / write_partition as a whole: every file a broker leaves, read back by our
parsers (whose readers are themselves checked against Kafka's in the golden tests), and the
broker behaviours the layout must follow (rolls, log start, snapshots, clean vs killed)."""

from __future__ import annotations

import pytest

from parsers import segment
from parsers.files import detect, parse_path
from sample_data.writer.log import LogConfig, PartitionSpec, write_broker_dir, write_partition
from sample_data.writer.properties import clean_shutdown_bytes
from sample_data.writer.records import BatchSpec, Record, encode_batch

T0 = 1_735_689_600_000


def batches(n: int, per_batch: int = 5, epochs: dict[int, int] | None = None, start: int = 0) -> list[BatchSpec]:
    """n batches of ``per_batch`` records; ``epochs`` maps a batch index to the leader epoch from then on."""
    out, epoch, offset = [], 0, start
    for i in range(n):
        epoch = (epochs or {}).get(i, epoch)
        recs = tuple(
            Record(b"key-%04d" % (offset + j), b"value-%04d " % (offset + j) + b"x" * 50, T0 + offset + j)
            for j in range(per_batch)
        )
        out.append(BatchSpec(offset, recs, partition_leader_epoch=epoch))
        offset += per_batch
    return out


def rows(path, kind=None):
    kind = kind or detect(str(path))
    parts = list(parse_path(str(path), kind))
    assert all(p.problems.num_rows == 0 for p in parts), [p.problems.to_pylist() for p in parts]
    return [r for p in parts for r in p.table.to_pylist()]


def test_broker_dir_files_read_back(tmp_path):
    tp0, tp1 = ("orders", 0), ("orders", 1)
    layouts = write_broker_dir(
        tmp_path / "broker-1",
        1,
        "Q2x1c3RlcklkMDAwMDAwMA",
        directory_id="TG9nRGlySWQwMDAwMDAwMA",
        partitions={tp0: batches(20, epochs={10: 3}), tp1: PartitionSpec(batches(4), topic_id="T3JkZXJzVG9waWNJZDAwMA")},
        hw={tp0: 95, tp1: 20},
        recovery_points={tp0: 50, tp1: 20},
        log_starts={tp0: 0, tp1: 0},
        cleaner={tp0: 10},
        clean_shutdown=True,
        broker_epoch=42,
    )
    root = tmp_path / "broker-1"
    meta = rows(root / "meta.properties")
    assert meta == [
        {
            "path": str(root / "meta.properties"),
            "version": 1,
            "node_id": 1,
            "cluster_id": "Q2x1c3RlcklkMDAwMDAwMA",
            "directory_id": "TG9nRGlySWQwMDAwMDAwMA",
        }
    ]
    hw = rows(root / "replication-offset-checkpoint")
    assert {(r["topic"], r["partition"]): r["offset"] for r in hw} == {tp0: 95, tp1: 20}
    assert [r["offset"] for r in rows(root / "cleaner-offset-checkpoint")] == [10]
    assert {r["offset"] for r in rows(root / "recovery-point-offset-checkpoint")} == {50, 20}
    assert (root / ".kafka_cleanshutdown").read_bytes() == clean_shutdown_bytes(42)
    assert rows(root / ".kafka_cleanshutdown")[0]["broker_epoch"] == 42
    epochs = rows(root / "orders-0" / "leader-epoch-checkpoint")
    assert [(r["epoch"], r["start_offset"]) for r in epochs] == [(0, 0), (3, 50)]
    assert rows(root / "orders-1" / "partition.metadata")[0]["topic_id"] == "T3JkZXJzVG9waWNJZDAwMA"
    assert not (root / "orders-0" / "partition.metadata").exists()
    # every batch is where the layout says, with the offsets it says
    for layout in layouts.values():
        for b in layout.batches:
            data = b.path.read_bytes()[b.position : b.position + b.size]
            (row,) = segment.parse(data, "x").table.to_pylist()
            assert (row["base_offset"], row["last_offset"], row["crc_valid"]) == (b.base_offset, b.last_offset, True)


def test_killed_broker_has_no_marker_and_padded_indexes(tmp_path):
    cfg = LogConfig(segment_bytes=2000, index_interval_bytes=300, max_index_bytes=1 << 20)
    write_broker_dir(
        tmp_path / "b",
        2,
        "Q2x1c3RlcklkMDAwMDAwMA",
        directory_id=None,
        partitions={("t", 0): PartitionSpec(batches(30), config=cfg)},
        hw={("t", 0): 100},
        recovery_points={("t", 0): 0},
        log_starts={("t", 0): 0},
        clean_shutdown=False,
    )
    part = tmp_path / "b" / "t-0"
    assert not (tmp_path / "b" / ".kafka_cleanshutdown").exists()
    assert not (tmp_path / "b" / "cleaner-offset-checkpoint").exists()
    indexes = sorted(part.glob("*.index"))
    assert len(indexes) > 2
    assert [p.stat().st_size for p in indexes[:-1]] == [len(rows(p)) * 8 for p in indexes[:-1]]
    assert indexes[-1].stat().st_size == 1 << 20
    assert sorted(part.glob("*.timeindex"))[-1].stat().st_size == (1 << 20) - (1 << 20) % 12  # rounded down to whole entries
    assert indexes[-1].stat().st_blocks * 512 < 1 << 16  # sparse: the padding is a hole


def test_rolls_follow_segment_bytes_and_index_rules(tmp_path):
    specs = batches(40)
    size = len(encode_batch(specs[0]))
    cfg = LogConfig(segment_bytes=size * 7 + 10, index_interval_bytes=size * 2, max_index_bytes=1 << 20)
    layout = write_partition(tmp_path / "p-0", specs, cfg)
    # 7 batches fit (7*size <= segment_bytes), the 8th rolls
    assert [s.base_offset for s in layout.segments] == [i * 35 for i in range(6)]
    for seg in layout.segments:
        assert seg.size <= cfg.segment_bytes
        # the first batch of a segment is never indexed; then every 3rd batch (> 2 batches' bytes since the last entry)
        positions = [p for _, p in seg.index_entries]
        assert positions == [size * k for k in (3, 6) if size * k < seg.size]
        assert [o for o, _ in seg.index_entries] == [seg.base_offset + 5 * k + 4 for k in (3, 6) if size * k < seg.size]
    assert sorted(p.name for p in layout.dir.glob("*.snapshot")) == [f"{o:020d}.snapshot" for o in (35, 70, 105, 140, 175, 200)]


def test_log_start_offset_deletes_whole_segments_only(tmp_path):
    specs = batches(12, epochs={3: 1, 9: 4})
    size = len(encode_batch(specs[0]))
    cfg = LogConfig(segment_bytes=size * 4, index_interval_bytes=4096)
    layout = write_partition(tmp_path / "p-0", specs, cfg, log_start_offset=22)
    assert [s.base_offset for s in layout.segments] == [0, 20, 40]
    assert [s.deleted for s in layout.segments] == [True, False, False]
    assert not (tmp_path / "p-0" / "00000000000000000000.log").exists()
    assert layout.batches[0].path is None and layout.batches[4].path is not None
    assert layout.leader_epochs == [(1, 22), (4, 45)]


def test_refuses_non_empty_dir_and_backwards_offsets(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("")
    with pytest.raises(FileExistsError):
        write_partition(tmp_path / "x", batches(1))
    with pytest.raises(ValueError):
        write_partition(tmp_path / "y", [*batches(2), *batches(1)])
