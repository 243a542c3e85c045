"""``__remote_log_metadata`` decoder (tiered storage, KIP-405), judged by Kafka 3.6.2.

Kafka 3.6.2's kafka-dump-log has no ``--remote-log-metadata-decoder`` (3.8 added it), so the judge
is a small Java driver that reads every record of a segment with Kafka's own
``RemoteLogMetadataSerde.deserialize`` (the frame, the generated message classes and the
transforms into RemoteLogSegmentMetadata / …Update / RemotePartitionDeleteMetadata) and prints
what they hold. The segments are written by our writer (``sample_data.writer.remote_log_metadata``)
from Kafka's message definitions: no fixture holds tiered storage.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from parsers import remote_log_metadata, segment
from sample_data.writer import remote_log_metadata as w
from sample_data.writer.records import BatchSpec, Record, encode_batches

T0 = 1_735_689_600_000
ORDERS = w.TopicIdPartition("orders", bytes(range(16)), 3)
SEG_A, SEG_B = bytes(range(1, 17)), bytes(range(31, 47))

ORACLE_JAVA = r"""
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.nio.ByteBuffer;
import java.util.Map;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.server.log.remote.metadata.storage.serialization.RemoteLogMetadataSerde;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteMetadata;

/** Per record, one JSON line of what Kafka's RemoteLogMetadataSerde read. */
public class RemoteOracle {
    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        RemoteLogMetadataSerde serde = new RemoteLogMetadataSerde();
        for (String p : args) {
            try (FileRecords fr = FileRecords.open(new File(p))) {
                for (RecordBatch b : fr.batches()) {
                    for (Record r : b) {
                        ObjectNode o = mapper.createObjectNode();
                        o.put("path", p).put("recordOffset", r.offset());
                        try {
                            ByteBuffer v = r.value();
                            byte[] bytes = new byte[v.remaining()];
                            v.get(bytes);
                            RemoteLogMetadata m = serde.deserialize(bytes);
                            TopicIdPartition tp = m.topicIdPartition();
                            o.put("brokerId", m.brokerId()).put("eventTimestampMs", m.eventTimestampMs())
                             .put("topic", tp.topic()).put("topicId", tp.topicId().toString()).put("partition", tp.partition());
                            if (m instanceof RemoteLogSegmentMetadata s) {
                                o.put("type", "segment").put("segmentId", s.remoteLogSegmentId().id().toString())
                                 .put("startOffset", s.startOffset()).put("endOffset", s.endOffset())
                                 .put("maxTimestampMs", s.maxTimestampMs()).put("size", s.segmentSizeInBytes())
                                 .put("state", s.state().name());
                                ArrayNode es = o.putArray("epochs");
                                for (Map.Entry<Integer, Long> e : s.segmentLeaderEpochs().entrySet())
                                    es.addArray().add(e.getKey()).add(e.getValue());
                                s.customMetadata().ifPresent(c -> o.put("customSize", c.value().length));
                            } else if (m instanceof RemoteLogSegmentMetadataUpdate u) {
                                o.put("type", "update").put("segmentId", u.remoteLogSegmentId().id().toString())
                                 .put("state", u.state().name());
                                u.customMetadata().ifPresent(c -> o.put("customSize", c.value().length));
                            } else if (m instanceof RemotePartitionDeleteMetadata d) {
                                o.put("type", "delete").put("state", d.state().name());
                            }
                        } catch (Throwable t) {
                            o.put("error", t.toString());
                        }
                        System.out.println(mapper.writeValueAsString(o));
                    }
                }
            }
        }
    }
}
"""


@pytest.fixture(scope="module")
def oracle(dump_log, tmp_path_factory):
    """``oracle(paths) -> {(path, offset): dict}`` from Kafka's RemoteLogMetadataSerde."""
    libs = dump_log.script.parent.parent / "libs"
    src = tmp_path_factory.mktemp("remote_oracle") / "RemoteOracle.java"
    src.write_text(ORACLE_JAVA, encoding="utf-8")

    def run(paths) -> dict[tuple[str, int], dict]:
        args = ["java", "-Xmx256m", "-cp", f"{libs}/*", str(src), *map(str, paths)]
        out = subprocess.run(args, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        recs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        return {(r["path"], r["recordOffset"]): r for r in recs}

    return run


def write_segment(directory: Path, values: list[bytes]) -> Path:
    """One null-keyed record per batch, as RLMM's producer sends them."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "00000000000000000000.log"
    path.write_bytes(encode_batches([BatchSpec(i, (Record(None, v, T0 + i),)) for i, v in enumerate(values)]))
    return path


def built_values() -> list[bytes]:
    """Every record type, every state Kafka defines, null and present custom metadata, no, one and
    several leader epochs, a non-ASCII topic (the writer's ``every_kind``)."""
    return w.every_kind(T0)


def ours(path: Path) -> tuple[list[dict], list]:
    recs = segment.parse(path.read_bytes(), str(path), records=True, payloads=True).extra["records"]
    table, problems = remote_log_metadata.decode_records(recs)
    return table.to_pylist(), problems


def assert_row_equals_kafka(row: dict, k: dict) -> None:
    """Every field Kafka's RemoteLogMetadata objects expose against our row."""
    where = (k["path"], k["recordOffset"])
    assert "error" not in k, (where, k["error"])
    assert row["error"] is None and row["raw_hex"] is None, (where, row["error"])
    assert (row["topic"], row["topic_id"], row["partition"]) == (k["topic"], k["topicId"], k["partition"]), where
    assert (row["event_broker"], row["event_timestamp_ms"], row["state_name"]) == (k["brokerId"], k["eventTimestampMs"], k["state"]), where
    assert row["record_type"] == {
        "segment": "REMOTE_LOG_SEGMENT_METADATA_RECORD",
        "update": "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD",
        "delete": "REMOTE_PARTITION_DELETE_METADATA_RECORD",
    }[k["type"]], where
    assert row["segment_id"] == k.get("segmentId") and row["custom_metadata_size"] == k.get("customSize"), where
    if k["type"] == "segment":
        got = (row["start_offset"], row["end_offset"], row["max_timestamp_ms"], row["segment_size_bytes"])
        assert got == (k["startOffset"], k["endOffset"], k["maxTimestampMs"], k["size"]), where
        assert [[e["leader_epoch"], e["offset"]] for e in row["segment_leader_epochs"]] == k["epochs"], where
    else:
        assert row["start_offset"] is None and row["segment_leader_epochs"] is None, where


def test_built_records_of_every_type_and_state_equal_kafkas_reading(tmp_path, oracle):
    values = built_values()
    path = write_segment(tmp_path / "__remote_log_metadata-0", values)
    kafka = oracle([path])
    rows, problems = ours(path)
    assert problems == []
    assert len(rows) == len(kafka) == len(values)
    assert {r["state_name"] for r in rows} == {*remote_log_metadata.SEGMENT_STATES, *remote_log_metadata.PARTITION_DELETE_STATES}
    for row in rows:
        assert_row_equals_kafka(row, kafka[(str(path), row["offset"])])


def damaged_values() -> list[bytes]:
    """Values Kafka's serde must refuse: we must refuse the same ones, with a problem each."""
    seg = w.segment_metadata
    good = w.segment_update(ORDERS, SEG_A, w.COPY_SEGMENT_FINISHED, broker=1, event_ms=T0)
    return [
        good[:-3],  # truncated
        good + b"\x00",  # garbage after the message
        w.uvarint(0) + good[1:],  # frame version 0
        w.segment_update(ORDERS, SEG_A, 9, broker=1, event_ms=T0),  # no such RemoteLogSegmentState
        w.partition_delete(ORDERS, 3, broker=1, event_ms=T0),  # no such RemotePartitionDeleteState
        w.frame(9, good[3:]),  # no such apiKey
        w.frame(0x10000 + 1, good[3:]),  # an apiKey past a short (the fuzzer's first find: it crashed the decoder)
        w.frame(1, good[3:], version=0x8000),  # a version past a short
        # RemoteLogSegmentMetadata's constructor checks
        seg(ORDERS, SEG_B, 5, 5, broker=1, event_ms=T0, max_timestamp_ms=T0, leader_epochs=[], size=1),
        seg(ORDERS, SEG_B, -1, 5, broker=1, event_ms=T0, max_timestamp_ms=T0, leader_epochs=[(0, 0)], size=1),
        seg(ORDERS, SEG_B, 6, 5, broker=1, event_ms=T0, max_timestamp_ms=T0, leader_epochs=[(0, 6)], size=1),
    ]


def test_damaged_records_are_refused_where_kafka_refuses_them(tmp_path, oracle):
    values = damaged_values()
    path = write_segment(tmp_path / "__remote_log_metadata-1", values)
    kafka = oracle([path])
    rows, problems = ours(path)
    assert len(rows) == len(values)
    for row in rows:
        assert "error" in kafka[(str(path), row["offset"])], row
        assert row["error"] and row["raw_hex"], row
    assert len(problems) == len(values) and {p.kind for p in problems} == {"invalid_record"}


def test_a_newer_version_is_kept_raw_without_a_problem():
    """A record version this reader does not know is a newer Kafka's, not damage."""
    newer = w.frame(w.SEGMENT_UPDATE_API_KEY, b"\x00", version=1)
    row, damage = remote_log_metadata.decode_record(None, newer)
    assert damage is None and "newer than known" in row["error"] and row["raw_hex"].startswith("null|01")


# ---------------------------------------------------------------- remote-log-index-cache/

INDEX_ORACLE_JAVA = r"""
import java.io.File;
import org.apache.kafka.storage.internals.log.AbortedTxn;
import org.apache.kafka.storage.internals.log.OffsetIndex;
import org.apache.kafka.storage.internals.log.OffsetPosition;
import org.apache.kafka.storage.internals.log.TimeIndex;
import org.apache.kafka.storage.internals.log.TimestampOffset;
import org.apache.kafka.storage.internals.log.TransactionIndex;

/** Each cached remote index read as RemoteIndexCache.init reads it: base offset from the name. */
public class RemoteIndexOracle {
    public static void main(String[] args) throws Exception {
        for (String p : args) {
            File f = new File(p);
            String name = f.getName();
            long base = Long.parseLong(name.substring(0, name.indexOf('_')));  // offsetFromRemoteIndexFileName
            if (name.endsWith(".timeindex")) {
                TimeIndex i = new TimeIndex(f, base, Integer.MAX_VALUE, false);
                i.sanityCheck();
                for (int n = 0; n < i.entries(); n++) {
                    TimestampOffset e = i.entry(n);
                    System.out.println("time " + e.timestamp + " " + e.offset);
                }
            } else if (name.endsWith(".txnindex")) {
                TransactionIndex i = new TransactionIndex(base, f);
                i.sanityCheck();
                for (AbortedTxn t : i.allAbortedTxns())
                    System.out.println("txn " + t.producerId() + " " + t.firstOffset() + " " + t.lastOffset() + " " + t.lastStableOffset());
            } else {
                OffsetIndex i = new OffsetIndex(f, base, Integer.MAX_VALUE, false);
                i.sanityCheck();
                for (int n = 0; n < i.entries(); n++) {
                    OffsetPosition e = i.entry(n);
                    System.out.println("offset " + e.offset + " " + e.position);
                }
            }
        }
    }
}
"""


def test_cached_remote_indexes_are_read_as_kafkas_remote_index_cache_reads_them(tmp_path, dump_log):
    """``remote-log-index-cache/<start offset>_<segment id>.index`` (and .timeindex, .txnindex):
    discovered as index kinds with the remote segment's start offset as their base, and their
    entries equal what Kafka's OffsetIndex / TimeIndex / TransactionIndex read from them."""
    from dataclasses import asdict

    from jobs.ingest.discover import Root, discover
    from jobs.ingest.tasks import parse_file
    from parsers.kafka_messages import uuid_str
    from sample_data.writer.indexes import offset_index_bytes, time_index_bytes, txn_index_bytes
    from sample_data.writer.log import write_broker_files

    log_dir = tmp_path / "broker-1"
    write_broker_files(log_dir, 1, "TieredClusterAAAAAAAAA", directory_id=None, hw={}, recovery_points={}, log_starts={}, clean_shutdown=True)
    cache = log_dir / "remote-log-index-cache"
    cache.mkdir()
    prefix = f"300_{uuid_str(SEG_B)}"
    (cache / f"{prefix}.index").write_bytes(offset_index_bytes(300, [(310, 4096), (350, 9000), (499, 70000)]))
    (cache / f"{prefix}.timeindex").write_bytes(time_index_bytes(300, [(T0 + 10, 310), (T0 + 99, 499)]))
    (cache / f"{prefix}.txnindex").write_bytes(txn_index_bytes([(7, 320, 330, 320)]))
    files = [f for f in discover([Root(tmp_path, "")]).files if "remote-log-index-cache" in f.path]
    assert sorted(f.kind for f in files) == ["offset_index", "time_index", "txn_index"]

    libs = dump_log.script.parent.parent / "libs"
    src = tmp_path / "RemoteIndexOracle.java"
    src.write_text(INDEX_ORACLE_JAVA, encoding="utf-8")
    out = subprocess.run(["java", "-Xmx256m", "-cp", f"{libs}/*", str(src), *(f.abs_path for f in files)],
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    kafka = sorted(out.stdout.split("\n")[:-1])

    ours = []
    for f in files:
        pieces = dict(parse_file(asdict(f)))
        assert "problems" not in pieces, pieces.get("problems")
        if "index_entries" in pieces:
            ours += [f"offset {r['offset']} {r['position']}" for r in pieces["index_entries"].to_pylist()]
        if "time_index_entries" in pieces:
            ours += [f"time {r['timestamp']} {r['offset']}" for r in pieces["time_index_entries"].to_pylist()]
        if "txn_index_entries" in pieces:
            ours += [" ".join(map(str, ("txn", r["producer_id"], r["first_offset"], r["last_offset"], r["last_stable_offset"])))
                     for r in pieces["txn_index_entries"].to_pylist()]  # fmt: skip
    assert sorted(ours) == kafka and len(kafka) == 6
    assert "offset 499 70000" in kafka
