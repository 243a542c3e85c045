"""Tiered storage (KIP-405) through a real ``analyze``: one writer-built collection, one Spark run.

Each tiered partition has its log start (log-start-offset-checkpoint) below its first local
segment, the high watermark at 900 and ``__remote_log_metadata-0`` records (built by our writer,
judged by Kafka's RemoteLogMetadataSerde in test_remote_log_metadata.py) saying which ranges
remote storage holds:

  * ``tiered``: log start 100; [0,99] copied then DELETE_SEGMENT_FINISHED (below the log start,
    gone by design), [100,299] and [300,499] COPY_SEGMENT_FINISHED, local 500..999: nothing to report;
  * ``tiered-gap``: log start 0; [0,299] COPY_SEGMENT_FINISHED, [300,499] only COPY_SEGMENT_STARTED
    (a copy that never finished holds nothing), local 500..999: ``remote_log_gap`` 300..499;
  * ``plain``: an untiered partition with the same shape (log start 0, local from 500): what it
    always was, not excused by anyone's remote segments.
"""

from __future__ import annotations

import json

import pytest

from analyzer.analyze import build
from jobs.findings import tiered as tiered_rule
from parsers import remote_log_metadata
from sample_data.writer import remote_log_metadata as rlm
from sample_data.writer.log import PartitionSpec, write_broker_dir
from sample_data.writer.records import BatchSpec, Record

T0 = 1_700_000_000_000
HW = 900
LOCAL_START = 500
TOPIC_IDS = {"tiered": bytes(range(16)), "tiered-gap": bytes(range(16, 32)), "plain": bytes(range(32, 48))}


def batches(first: int, last: int, per: int = 10) -> list[BatchSpec]:
    return [
        BatchSpec(base, tuple(Record(f"k{o}".encode(), f"v{o}".encode(), T0 + o) for o in range(base, min(base + per, last + 1))))
        for base in range(first, last + 1, per)
    ]


def seg_id(n: int) -> bytes:
    return bytes([n]) * 16


def remote_records() -> list[bytes]:
    tiered = rlm.TopicIdPartition("tiered", TOPIC_IDS["tiered"], 0)
    gap = rlm.TopicIdPartition("tiered-gap", TOPIC_IDS["tiered-gap"], 0)
    return [
        *rlm.copied_segment(tiered, seg_id(1), 0, 99, broker=1, event_ms=T0),
        *rlm.copied_segment(tiered, seg_id(2), 100, 299, broker=1, event_ms=T0 + 10),
        *rlm.copied_segment(tiered, seg_id(3), 300, 499, broker=1, event_ms=T0 + 20),
        rlm.segment_update(tiered, seg_id(1), rlm.DELETE_SEGMENT_STARTED, broker=1, event_ms=T0 + 30),
        rlm.segment_update(tiered, seg_id(1), rlm.DELETE_SEGMENT_FINISHED, broker=1, event_ms=T0 + 31),
        *rlm.copied_segment(gap, seg_id(4), 0, 299, broker=1, event_ms=T0 + 40),
        rlm.segment_metadata(gap, seg_id(5), 300, 499, broker=1, event_ms=T0 + 50, max_timestamp_ms=T0,
                             leader_epochs=[(0, 300)], size=1),
    ]  # fmt: skip


def uuid_str(raw: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def tiered(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("tiered")
    data = root / "data"
    parts: dict[tuple[str, int], PartitionSpec] = {
        (t, 0): PartitionSpec(batches(LOCAL_START, 999), topic_id=uuid_str(tid), leader_epochs=[(0, 0)]) for t, tid in TOPIC_IDS.items()
    }
    meta = [BatchSpec(i, (Record(None, v, T0 + i),)) for i, v in enumerate(remote_records())]
    parts[("__remote_log_metadata", 0)] = PartitionSpec(meta)
    starts = {("tiered", 0): 100, ("tiered-gap", 0): 0, ("plain", 0): 0, ("__remote_log_metadata", 0): 0}
    hw = {k: HW for k in starts}
    hw[("__remote_log_metadata", 0)] = len(meta)
    write_broker_dir(data / "broker-1", 1, "TieredClusterAAAAAAAAA", directory_id=None, partitions=parts, hw=hw,
                     recovery_points=hw, log_starts=starts, clean_shutdown=True)  # fmt: skip
    # every offset of the tiered topics was acknowledged: the remote ones are not acked_data_loss
    ledger = root / "acked.jsonl"
    ledger.write_text("".join(json.dumps({"topic": t, "partition": 0, "offset": o}) + "\n" for t in ("tiered", "tiered-gap") for o in range(1000)))
    return build([data], root / "out", ledger=ledger, spark=spark, progress=False, register_catalog=False), root / "out"


def test_only_the_unfinished_remote_range_is_a_gap(tiered):
    """``tiered``'s remote copies close the span from its log start to its local start; the
    deleted segment below its log start is not missed; ``plain`` is not judged; on ``tiered-gap``
    the segment whose copy never finished leaves 300..499 held by no one. Acknowledged records in
    the remote span are neither ``acked_data_loss`` nor ``offset_gap``: the gap is said once."""
    doc, _ = tiered
    got = [(f["kind"], f["topic"], f["partition"], f["first_offset"], f["last_offset"], f["records"]) for f in doc["findings"]]
    assert got == [("remote_log_gap", "tiered-gap", 0, 300, LOCAL_START - 1, LOCAL_START - 300)]
    [f] = doc["findings"]
    assert f["severity"] == "error" and f["brokers"] == [1]
    remote = [e for e in f["evidence"] if e["path"]]
    assert [e["path"] for e in remote] == ["broker-1/__remote_log_metadata-0/00000000000000000000.log"]
    assert "COPY_SEGMENT_STARTED" in remote[0]["detail"] and "[300, 499]" in remote[0]["detail"]


def test_remote_segments_table_holds_every_metadata_record(tiered):
    import pyarrow.parquet as pq

    _, out = tiered
    table = pq.read_table(out / "tables" / "remote_segments").to_pylist()
    assert len(table) == len(remote_records())
    assert {(r["topic"], r["partition"], r["broker"]) for r in table} == {("tiered", 0, 1), ("tiered-gap", 0, 1)}
    assert all(r["error"] is None for r in table)


# ---------------------------------------------------------------- the rule, without Spark


def replica(broker: int, first: int | None, leo: int, log_start: int | None, hw: int | None) -> dict:
    return {"topic": "t", "partition": 0, "broker": broker, "first_offset": first, "leo": leo,
            "log_start_checkpoint": log_start, "hw_checkpoint": hw}  # fmt: skip


def segment(start: int, end: int, state: str = remote_log_metadata.COPY_SEGMENT_FINISHED) -> dict:
    return {"start_offset": start, "end_offset": end, "state": state}


@pytest.mark.parametrize(
    ("replicas", "segments", "gaps"),
    [
        ([replica(1, 500, 1000, 0, 900)], [segment(0, 299), segment(300, 499)], []),
        ([replica(1, 500, 1000, 0, 900)], [segment(0, 299)], [(300, 499)]),
        ([replica(1, 500, 1000, 0, 900)], [segment(0, 199), segment(300, 499)], [(200, 299)]),
        ([replica(1, 500, 1000, 0, 900)], [segment(0, 499, "DELETE_SEGMENT_FINISHED")], [(0, 499)]),
        # below the log start nothing is owed; at or above the HW nothing was committed
        ([replica(1, 500, 1000, 300, 900)], [segment(0, 299, "DELETE_SEGMENT_FINISHED"), segment(300, 499)], []),
        ([replica(1, 500, 520, 0, 400)], [segment(0, 199)], [(200, 399)]),
        # another replica's local log covers what remote storage lacks
        ([replica(1, 500, 1000, 0, 900), replica(2, 250, 1000, 0, 900)], [segment(0, 299)], []),
        # nothing said about the log start or the HW: nothing judged
        ([replica(1, 500, 1000, None, 900)], [], []),
        ([replica(1, 500, 1000, 0, None)], [], []),
        # a replica with no local records at all
        ([replica(1, None, 0, 0, 900)], [segment(0, 599)], [(600, 899)]),
    ],
)
def test_remote_gaps(replicas, segments, gaps):
    assert tiered_rule.remote_gaps(replicas, segments) == gaps


def test_a_segments_latest_event_is_its_state_and_each_record_counts_once():
    """Two replicas of __remote_log_metadata hold the same records; an update decides the state."""

    def row(offset, broker, record_type, state, start=None, end=None, segment_id="s1", error=None):
        return {"offset": offset, "broker": broker, "record_type": record_type, "state_name": state, "segment_id": segment_id,
                "start_offset": start, "end_offset": end, "topic": "t", "partition": 0, "path": f"b{broker}", "batch_position": offset,
                "error": error}  # fmt: skip

    seg, upd = remote_log_metadata.SEGMENT_RECORD, "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD"
    rows = [
        row(1, 2, upd, "COPY_SEGMENT_FINISHED"), row(0, 1, seg, "COPY_SEGMENT_STARTED", 0, 9), row(1, 1, upd, "COPY_SEGMENT_FINISHED"),
        row(0, 2, seg, "COPY_SEGMENT_STARTED", 0, 9), row(2, 1, upd, "DELETE_SEGMENT_STARTED", segment_id="s2"),
        row(3, 1, upd, "DELETE_SEGMENT_FINISHED", error="damaged"),
    ]  # fmt: skip
    [s] = remote_log_metadata.latest_segments(rows)[("t", 0)]
    assert (s["segment_id"], s["start_offset"], s["end_offset"], s["state"]) == ("s1", 0, 9, "COPY_SEGMENT_FINISHED")


def test_the_report_shows_the_remote_span_on_its_own_lane(tiered):
    """The remote segments get a lane below the replicas: the finished copies, the unfinished
    one (the gap) and the deleted one, each a bar over its offsets."""
    import plotly.graph_objects as go

    from analyzer.report.data import load
    from analyzer.report.figures import REMOTE_LANE, timeline
    from analyzer.report.html import _groups

    _, out = tiered
    data = load(out)
    replicas, remote = _groups(data.table("replica_logs")), _groups(data.table("remote_segments"))
    bars = {}
    for topic in ("tiered", "tiered-gap"):
        fig = timeline(replicas[(topic, 0)], None, [], None, remote[(topic, 0)])
        go.Figure(fig)  # raises on an invalid property
        assert fig["layout"]["yaxis"]["categoryarray"][0] == REMOTE_LANE
        bars[topic] = {t["name"]: sorted((b, b + n - 1) for b, n in zip(t["base"], t["x"], strict=True)) for t in fig["data"] if t.get("y") == [REMOTE_LANE] * len(t["y"])}
    assert bars["tiered"] == {"remote: copied": [(100, 299), (300, 499)], "remote: deleted": [(0, 99)]}
    assert bars["tiered-gap"] == {"remote: copied": [(0, 299)], "remote: copy unfinished": [(300, 499)]}
    assert REMOTE_LANE in (out / "report.html").read_text(encoding="utf-8")
    assert (("plain", 0) not in remote) and ("plain", 0) in replicas
