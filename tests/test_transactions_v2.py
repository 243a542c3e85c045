"""Transactions v2 (KIP-890 part 2) as Kafka 4.1.1 writes and reads them, judged by Kafka 4.1.1 itself.

  * ``__transaction_state`` values of every version and every tag (v0; v1 as 4.0-4.3 write it, with
    the client's transaction version; v1 as 4.4 writes it, with the previous and next producer ids;
    NextProducerEpoch), and the coordinator records of the txn-v2 scenarios, against what
    ``kafka-dump-log --transaction-log-decoder`` (4.1.1: every field as JSON) prints;
  * ``EndTransactionMarker`` values of any version, read as ``deserializeValue`` does (a later
    version as the highest it knows: the coordinator epoch);
  * the producer state a broker rebuilds from a log of transactions v2 producers (epoch bumped by
    every marker, a producer id handed over at an exhausted epoch): Kafka's own
    ``ProducerStateManager`` replays our segments as ``LogSegment.recover`` does, and its snapshot
    and aborted transactions must equal the ones our writer wrote.
"""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import SHARED

from parsers import producer_snapshot, segment, transaction_index, transaction_state
from sample_data.scenarios import generate
from sample_data.writer.records import BatchSpec, Record, encode_batches
from sample_data.writer.transaction_state import transaction_log_key, transaction_log_value

KAFKA_4 = SHARED / "tools" / "kafka_2.13-4.1.1.tgz"
T0 = 1_767_225_600_000

PRODUCER_STATE_ORACLE = r"""
import java.io.File;
import java.util.Optional;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.storage.internals.log.AppendOrigin;
import org.apache.kafka.storage.internals.log.CompletedTxn;
import org.apache.kafka.storage.internals.log.ProducerAppendInfo;
import org.apache.kafka.storage.internals.log.ProducerStateManager;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;

/** args: groups of (snapshot dir, then one partition's segments in offset order), each group ended
 *  by "--". Per group: LogSegment.updateProducerState per batch (what recovery does), a snapshot
 *  where each next segment starts (UnifiedLog.roll) and at the end; each aborted transaction is
 *  printed to <snapshot dir>/aborted.txt. */
public class ProducerStateOracle {
    public static void main(String[] args) throws Exception {
        int i = 0;
        while (i < args.length) {
            File dir = new File(args[i++]);
            ProducerStateManager psm = new ProducerStateManager(new TopicPartition("t", 0), dir, 900000,
                new ProducerStateManagerConfig(Integer.MAX_VALUE, false), Time.SYSTEM);
            StringBuilder aborted = new StringBuilder();
            boolean first = true;
            for (; !args[i].equals("--"); i++) {
                if (!first) psm.takeSnapshot();
                first = false;
                try (FileRecords fr = FileRecords.open(new File(args[i]))) {
                    for (RecordBatch batch : fr.batches()) {
                        if (batch.hasProducerId()) {
                            ProducerAppendInfo info = psm.prepareUpdate(batch.producerId(), AppendOrigin.REPLICATION);
                            Optional<CompletedTxn> done = info.append(batch, Optional.empty());
                            psm.update(info);
                            if (done.isPresent()) {
                                CompletedTxn t = done.get();
                                if (t.isAborted)
                                    aborted.append(t.producerId + " " + t.firstOffset + " " + t.lastOffset + " "
                                        + psm.lastStableOffset(t) + "\n");
                                psm.completeTxn(t);
                            }
                        }
                        psm.updateMapEndOffset(batch.lastOffset() + 1);
                    }
                }
            }
            i++;
            psm.takeSnapshot();
            java.nio.file.Files.writeString(new File(dir, "aborted.txt").toPath(), aborted.toString());
        }
    }
}
"""
REBUILT = [("txn-v2-upgrade", 1, "payments-0"), ("txn-v2-marker-lost", 1, "orders-0"), ("txn-v2-marker-lost", 2, "orders-0")]


@pytest.fixture(scope="module")
def kafka4(tmp_path_factory) -> Path:
    """Kafka 4.1.1 from ../shared/tools, extracted once: its root (bin/, libs/)."""
    root = tmp_path_factory.mktemp("kafka4")
    with tarfile.open(KAFKA_4) as tf:
        tf.extractall(root, filter="data")
    return next(root.glob("kafka_*"))


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("txn-v2")
    return {name: generate(name, root) for name in ("txn-v2-upgrade", "txn-v2-marker-lost")}


DUMPED = re.compile(r"^\| offset: (\d+) .*? key: (\{.*?\}) payload: (.*)$")


def transaction_log_dump(kafka4: Path, paths: list[Path]) -> dict[tuple[str, int], tuple[dict, dict | None]]:
    """{(path, offset): (key JSON, value JSON or None for a tombstone)} as 4.1.1 prints them."""
    out = subprocess.run([str(kafka4 / "bin" / "kafka-dump-log.sh"), "--transaction-log-decoder", "--files",
                          ",".join(map(str, paths))], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows, path = {}, None
    for line in out.stdout.splitlines():
        if line.startswith("Dumping "):
            path = line[len("Dumping "):].strip()
        elif line.startswith("| offset: "):
            m = DUMPED.match(line)
            assert m, line
            payload = m.group(3)
            rows[(path, int(m.group(1)))] = (json.loads(m.group(2)), None if payload == "<DELETE>" else json.loads(payload))
    return rows


def write_segment(directory: Path, records: list[tuple[bytes, bytes | None]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "00000000000000000000.log"
    path.write_bytes(encode_batches([BatchSpec(i, (Record(k, v, T0 + i),)) for i, (k, v) in enumerate(records)]))
    return path


def every_version() -> list[tuple[bytes, bytes | None]]:
    """TransactionLogValue as each Kafka writes it, through a transactions v2 producer's epoch overflow."""
    def v(tid, **kw):
        base = {"timeout_ms": 60_000, "last_update_ms": T0, "start_ms": T0}
        return transaction_log_key(tid), transaction_log_value(**(base | kw))

    return [
        # transaction.version 0: v0, no tags whatever the client
        v("tv0", version=0, producer_id=10, producer_epoch=0, state="Empty", partitions=None, start_ms=-1),
        v("tv0", version=0, producer_id=10, producer_epoch=0, state="Ongoing", partitions=[("a", [0, 1]), ("b", [2])]),
        v("tv0", version=0, producer_id=10, producer_epoch=0, state="PrepareAbort", partitions=[("a", [0, 1]), ("b", [2])]),
        v("tv0", version=0, producer_id=10, producer_epoch=0, state="CompleteAbort", partitions=[]),
        # 4.0-4.3 at transaction.version 2: v1, only the client's transaction version (2; 0 is not written)
        v("old-client", version=1, producer_id=11, producer_epoch=4, state="Ongoing", partitions=[("a", [3])]),
        v("java", version=1, producer_id=12, producer_epoch=32766, state="Ongoing", partitions=[("a", [0])],
          client_transaction_version=2),
        v("java", version=1, producer_id=12, producer_epoch=32767, state="PrepareCommit", partitions=[("a", [0])],
          client_transaction_version=2),  # the exhausted epoch: 4.1.1 does not persist the next id
        v("java", version=1, producer_id=13, producer_epoch=0, state="CompleteCommit", partitions=[],
          client_transaction_version=2),
        # 4.4 (KAFKA-20310): the previous and next producer ids too
        v("java44", version=1, producer_id=14, producer_epoch=32767, state="PrepareCommit", partitions=[("a", [0])],
          client_transaction_version=2, previous_producer_id=14, next_producer_id=15),
        v("java44", version=1, producer_id=15, producer_epoch=0, state="CompleteCommit", partitions=[],
          client_transaction_version=2, previous_producer_id=14),
        v("java44", version=1, producer_id=15, producer_epoch=0, state="Empty", partitions=None, start_ms=-1,
          previous_producer_id=15),
        # NextProducerEpoch (tag 3, KIP-939): defined, written by no Kafka yet
        v("2pc", version=1, producer_id=16, producer_epoch=3, state="Ongoing", partitions=[("c", [9])],
          client_transaction_version=2, previous_producer_id=16, next_producer_id=17, next_producer_epoch=0),
        (transaction_log_key("expired"), None),
    ]


COLUMNS = {  # TransactionLogValue JSON field -> (our column, Kafka's default when a tag is absent)
    "producerId": ("producer_id", None), "producerEpoch": ("producer_epoch", None),
    "previousProducerId": ("previous_producer_id", -1), "nextProducerId": ("next_producer_id", -1),
    "nextProducerEpoch": ("next_producer_epoch", -1), "transactionTimeoutMs": ("timeout_ms", None),
    "transactionStatus": ("status", None), "transactionLastUpdateTimestampMs": ("last_update_ms", None),
    "transactionStartTimestampMs": ("start_ms", None), "clientTransactionVersion": ("client_transaction_version", 0),
}


def test_transaction_log_values_of_every_version_read_as_kafka_4_1_1_reads_them(tmp_path, kafka4, scenarios):
    """Every field and tag of every value: our ``transactions`` rows equal 4.1.1's decoder, for the
    values above and for every record the scenarios' coordinators wrote (v0 before the
    transaction.version upgrade, v1 after; 4.1.1's tags and 4.4's)."""
    paths = [write_segment(tmp_path / "__transaction_state-0", every_version())]
    paths += sorted(p for d in scenarios.values() for p in d.glob("broker-*/__transaction_state-*/*.log") if p.stat().st_size)
    kafka = transaction_log_dump(kafka4, paths)
    seen_versions, seen_tags = set(), set()
    ours = {}
    for p in paths:
        recs = segment.parse(p.read_bytes(), str(p), records=True, payloads=True).extra["records"]
        table, problems = transaction_state.decode_records(recs)
        assert problems == []
        ours.update({(str(p), r["offset"]): r for r in table.to_pylist()})
    assert ours.keys() == kafka.keys()
    for where, row in ours.items():
        key, value = kafka[where]
        assert (row["key_version"], row["transactional_id"]) == (int(key["type"]), key["data"]["transactionalId"])
        assert row["error"] is None and row["raw_hex"] is None
        if value is None:
            assert row["tombstone"]
            continue
        data = value["data"]
        assert row["value_version"] == int(value["version"])
        seen_versions.add(row["value_version"])
        for field, (column, default) in COLUMNS.items():
            got = row[column] if row[column] is not None else default
            assert got == data.get(field, default), (where, field)
            if default is not None and field in data:
                seen_tags.add(field)
        parts = data["transactionPartitions"]
        assert row["partitions"] == (None if parts is None else [{"topic": x["topic"], "partitions": x["partitionIds"]}
                                                                  for x in parts])
        assert row["status_name"] is not None
    assert seen_versions == {0, 1}
    assert seen_tags == {"previousProducerId", "nextProducerId", "nextProducerEpoch", "clientTransactionVersion"}


def test_the_scenarios_coordinators_write_what_transactions_v2_means(scenarios):
    """The txn-v2-upgrade coordinator's log: v0 before the upgrade, v1 after; the transactions v2
    client's Prepare records one epoch above its Ongoing ones; the exhausted epoch's PrepareCommit at
    32767 and the old id, then CompleteCommit of the new id at epoch 0 (4.1.1 persists no ids)."""
    rows = []
    for p in sorted(scenarios["txn-v2-upgrade"].glob("broker-1/__transaction_state-*/*.log")):
        recs = segment.parse(p.read_bytes(), str(p), records=True, payloads=True).extra["records"]
        rows += transaction_state.decode_records(recs)[0].to_pylist()
    sink = [r for r in rows if r["transactional_id"] == "payments-sink"]
    assert {r["value_version"] for r in sink} == {0, 1}
    assert all(r["previous_producer_id"] is None and r["next_producer_id"] is None for r in rows)
    [exhausted] = [r for r in sink if r["producer_epoch"] == 32767]
    after = sink[sink.index(exhausted) + 1]
    assert (exhausted["status_name"], exhausted["producer_id"], exhausted["client_transaction_version"]) == ("PrepareCommit", 5000, 2)
    assert (after["status_name"], after["producer_id"], after["producer_epoch"]) == ("CompleteCommit", 5003, 0)
    rdkafka = [r for r in rows if r["transactional_id"] == "payments-rdkafka"]
    assert {r["producer_epoch"] for r in rdkafka} == {0} and {r["client_transaction_version"] for r in rdkafka} == {None}


def test_end_transaction_marker_values_of_any_version_read_as_kafka_reads_them(tmp_path, kafka4):
    """Kafka up to 4.4 writes EndTxnMarker v0 only (KIP-1228 puts the transaction version in the
    WriteTxnMarkers request, not in the marker); a later version is read as v0 by
    ``EndTransactionMarker.deserializeValue``: the coordinator epoch, the rest ignored."""
    txn = {"producer_id": 7, "is_transactional": True}
    specs = [
        BatchSpec(0, (Record(b"k", b"v", T0),), producer_epoch=2, base_sequence=0, **txn),
        BatchSpec(1, (), producer_epoch=3, control="commit", coordinator_epoch=5, max_timestamp=T0 + 1, **txn),
        BatchSpec(2, (Record(b"k", b"v", T0 + 2),), producer_epoch=3, base_sequence=0, **txn),
        BatchSpec(3, (), producer_epoch=4, control="abort", coordinator_epoch=6, marker_version=1, marker_tail=b"\x02\x00",
                  max_timestamp=T0 + 3, **txn),
        BatchSpec(4, (), producer_epoch=4, control="commit", coordinator_epoch=-8, marker_version=32767, marker_tail=b"\xff" * 9,
                  max_timestamp=T0 + 4, **txn),
    ]
    path = tmp_path / "t-0" / "00000000000000000000.log"
    path.parent.mkdir()
    path.write_bytes(encode_batches(specs))
    out = subprocess.run([str(kafka4 / "bin" / "kafka-dump-log.sh"), "--deep-iteration", "--files", str(path)],
                         capture_output=True, text=True, timeout=120)
    kafka = {int(m.group(1)): (m.group(2).lower(), int(m.group(3)))
             for m in re.finditer(r"\| offset: (\d+) .*endTxnMarker: (\w+) coordinatorEpoch: (-?\d+)", out.stdout)}
    recs = segment.parse(path.read_bytes(), str(path), records=True).extra["records"].to_pylist()
    ours = {r["offset"]: (r["control_type"], r["coordinator_epoch"]) for r in recs if r["control_type"]}
    assert ours == kafka == {1: ("commit", 5), 3: ("abort", 6), 4: ("commit", -8)}


@pytest.fixture(scope="module")
def rebuilt(kafka4, scenarios, tmp_path_factory) -> dict[tuple, Path]:
    """What Kafka's ProducerStateManager rebuilds from each partition of ``REBUILT``, in one JVM:
    {(scenario, broker, partition): its snapshot dir (snapshots, aborted.txt)}."""
    root = tmp_path_factory.mktemp("rebuilt")
    src = root / "ProducerStateOracle.java"
    src.write_text(PRODUCER_STATE_ORACLE, encoding="utf-8")
    dirs, args = {}, []
    for n, (scenario, broker, partition) in enumerate(REBUILT):
        dirs[(scenario, broker, partition)] = d = root / str(n)
        d.mkdir()
        args += [str(d), *map(str, sorted((scenarios[scenario] / f"broker-{broker}" / partition).glob("*.log"))), "--"]
    out = subprocess.run(["java", "-Xmx256m", "-cp", f"{kafka4 / 'libs'}/*", str(src), *args],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return dirs


@pytest.mark.parametrize(("scenario", "broker", "partition"), REBUILT)
def test_producer_state_after_transactions_v2_is_what_kafka_rebuilds(rebuilt, scenarios, scenario, broker, partition):
    """A marker one epoch above its data clears the producer's de-duplication batches
    (``ProducerStateEntry.maybeUpdateProducerEpoch``): its snapshot entry has no last sequence or
    offset. Kafka's ProducerStateManager, fed our segments, writes the snapshots our writer wrote
    (at each roll, and at the log end of a broker stopped cleanly) byte for byte, and names the
    aborted transactions our .txnindex files hold (the new producer id's, after an exhausted epoch,
    on the dead leader of txn-v2-marker-lost)."""
    part = scenarios[scenario] / f"broker-{broker}" / partition
    theirs = rebuilt[(scenario, broker, partition)]
    mine = sorted(part.glob("*.snapshot"))
    assert {p.name for p in mine} <= {p.name for p in theirs.glob("*.snapshot")}
    entries = []
    for p in mine:
        assert p.read_bytes() == (theirs / p.name).read_bytes(), p.name
        entries += producer_snapshot.parse(p.read_bytes(), str(p)).table.to_pylist()
    aborted = sorted(tuple(map(int, line.split())) for line in (theirs / "aborted.txt").read_text().splitlines())
    ours = []
    for idx in sorted(part.glob("*.txnindex")):
        ours += [(r["producer_id"], r["first_offset"], r["last_offset"], r["last_stable_offset"])
                 for r in transaction_index.parse(idx.read_bytes(), str(idx)).table.to_pylist()]
    assert sorted(ours) == aborted
    if (scenario, broker) == ("txn-v2-upgrade", 1):  # stopped cleanly: a snapshot at its log end
        assert any(e["producer_epoch"] > 0 and e["last_sequence"] == -1 and e["last_offset"] == -1 for e in entries)
        assert {e["producer_id"] for e in entries} == {5000, 5001, 5002, 5003} and aborted
    elif broker == 1:  # killed, one segment: no snapshot; the new producer id's aborted transaction
        assert not mine and [a[0] for a in aborted] == [6001]
    else:  # the survivor: the old id's transaction still open at its first offset
        [e] = [e for e in entries if e["producer_id"] == 6000 and e["snapshot_offset"] == max(x["snapshot_offset"] for x in entries)]
        assert (e["producer_epoch"], e["current_txn_first_offset"]) == (32766, 102)
