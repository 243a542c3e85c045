"""KRaft ``__cluster_metadata`` decoding, judged by Kafka: ``kafka-dump-log --cluster-metadata-decoder``
output (Kafka 3.6.2) for every record of every node of the real clusters, the same tool run live on
the found KRaft snapshots and logs, and each node's ``quorum-state`` (written by Kafka's Raft client)
for the LeaderChange control records. Plus the generic message reader on hand-built bytes, and a
seeded fuzz that no damaged value ever raises."""

from __future__ import annotations

import json
import random
import re
import shutil
import struct
import subprocess
import tarfile
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import FOUND, GOLDEN, REAL, TOOLS_TGZ

from parsers import segment
from parsers.kafka_messages import F, Message, MessageError, decode
from parsers.metadata_records import (
    METADATA_RECORDS_SCHEMA,
    PROBLEM_KIND,
    RAW_HEX_CAP,
    decode_control,
    decode_records,
    decode_value,
)

RECORD_LINE = re.compile(r"^\| offset: (\d+) .*? headerKeys: \[[^\]]*\] ?(.*)$")
REAL_DUMPS = sorted(REAL.glob("*/dumps/*-cluster_metadata.txt"))
SNAPSHOTS = sorted(FOUND.glob("kraft-snapshots-duongnvt2110/*/__cluster_metadata-0/*.checkpoint"))
FOUND_FILES = [
    *SNAPSHOTS,
    *sorted(FOUND.glob("kraft-*/*/bootstrap.checkpoint")),
    *sorted(FOUND.glob("kraft-nomanazeem/*/__cluster_metadata-0/*.log")),
]
# fields Kafka added to PartitionChangeRecord after 3.6 as tagged fields (v1 Directories, v2 ELR)
NEWER_TAGGED = {"directories", "eligibleLeaderReplicas", "lastKnownElr"}


def parse_dump(text: str) -> dict[str, dict[int, str]]:
    """``kafka-dump-log`` text -> {dumped file name: {offset: what it printed after headerKeys}}."""
    out: dict[str, dict[int, str]] = {}
    for sec in text.split("Dumping ")[1:]:
        name, _, body = sec.partition("\n")
        entries = {}
        for line in body.splitlines():
            m = RECORD_LINE.match(line)
            if m:
                entries[int(m.group(1))] = m.group(2)
        out[name.strip()] = entries
    return out


def decode_file(path: Path):
    parsed = segment.parse(path.read_bytes(), str(path), records=True, payloads=True)
    table, problems = decode_records(parsed.extra["records"])
    return parsed, table, problems


def compare(printed: str, row: dict) -> str:
    """Check one of our rows against what Kafka printed; returns how Kafka judged it."""
    if printed.startswith("payload: Error at"):
        return "kafka_error"
    if printed.startswith("payload: "):
        want = json.loads(printed[len("payload: ") :])
        got = {"type": row["record_type"], "version": row["version"], "data": json.loads(row["data_json"])}
        if got != want and want["type"] == "PARTITION_CHANGE_RECORD" and want["version"] > 0:
            # 3.6.2 reads newer versions with its v0 schema and drops the tags it does not know
            extra = set(got["data"]) - set(want["data"])
            assert extra <= NEWER_TAGGED, extra
            got["data"] = {k: v for k, v in got["data"].items() if k not in NEWER_TAGGED}
        assert got == want, (row["offset"], printed)
        return "payload"
    for prefix, rtype in (("SnapshotHeader ", "SNAPSHOT_HEADER"), ("SnapshotFooter ", "SNAPSHOT_FOOTER")):
        if printed.startswith(prefix):
            assert row["is_control"] and row["record_type"] == rtype
            assert json.loads(row["data_json"]) == json.loads(printed[len(prefix) :])
            return "control"
    m = re.fullmatch(r"controlType: (\w+)\((\d+)\)", printed)
    assert m, printed
    assert row["is_control"] and row["record_type"] == m.group(1) and row["api_key"] == int(m.group(2)), (row, printed)
    return "control_type"


# ------------------------------------------------------------------ real clusters (Kafka 3.6.2)


@pytest.mark.parametrize("dump", REAL_DUMPS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_real_cluster_records_equal_kafka_dump(dump: Path):
    sections = parse_dump(dump.read_text(encoding="utf-8"))
    assert sections, "no dumped files in the dump"
    for name, expected in sections.items():
        _, table, problems = decode_file(dump.parent.parent / name)
        rows = table.to_pylist()
        assert [r["offset"] for r in rows] == sorted(expected), name
        judged = Counter(compare(expected[r["offset"]], r) for r in rows)
        assert judged["kafka_error"] == 0
        assert all(r["known"] and r["error"] is None and r["raw_hex"] is None for r in rows)
        assert problems == []
        print(f"{dump.parent.parent.name}/{name}: {len(rows)} records equal to Kafka's ({dict(judged)})")


@pytest.mark.parametrize("state", sorted(REAL.glob("*/*/__cluster_metadata-0/quorum-state")), ids=lambda p: f"{p.parts[-4]}/{p.parts[-3]}")
def test_leader_change_agrees_with_quorum_state(state: Path):
    """Kafka's Raft client writes quorum-state; the last LeaderChange names that leader and voters,
    and sits in a batch of the quorum's leader epoch."""
    quorum = json.loads(state.read_text(encoding="utf-8"))
    parsed, table, _ = decode_file(state.parent / "00000000000000000000.log")
    changes = [r for r in table.to_pylist() if r["record_type"] == "LEADER_CHANGE"]
    assert changes
    last = json.loads(changes[-1]["data_json"])
    assert last["leaderId"] == quorum["leaderId"]
    assert sorted(v["voterId"] for v in last["voters"]) == sorted(v["voterId"] for v in quorum["currentVoters"])
    assert {v["voterId"] for v in last["grantingVoters"]} <= {v["voterId"] for v in last["voters"]}
    epochs = dict(zip(parsed.table.column("position").to_pylist(), parsed.table.column("partition_leader_epoch").to_pylist()))
    assert epochs[changes[-1]["batch_position"]] == quorum["leaderEpoch"]


def test_promoted_columns_follow_the_records():
    _, table, _ = decode_file(REAL / "unclean-election-divergence-rejoined/controller-100/__cluster_metadata-0/00000000000000000000.log")
    assert table.schema == METADATA_RECORDS_SCHEMA
    for r in table.to_pylist():
        d = json.loads(r["data_json"])
        t = r["record_type"]
        if t == "TOPIC_RECORD":
            assert (r["topic_name"], r["topic_id"]) == (d["name"], d["topicId"])
        elif t == "PARTITION_RECORD":
            assert (r["partition"], r["leader"], r["isr"], r["replicas"]) == (d["partitionId"], d["leader"], d["isr"], d["replicas"])
        elif t == "PARTITION_CHANGE_RECORD":
            assert r["leader"] == (None if "leader" not in d else d["leader"])
            assert r["isr"] == d.get("isr") and r["topic_id"] == d["topicId"]
        elif t == "BROKER_REGISTRATION_CHANGE_RECORD":
            assert (r["broker_id"], r["fenced"]) == (d["brokerId"], d.get("fenced", 0))
        elif t == "REGISTER_BROKER_RECORD":
            assert (r["broker_id"], r["fenced"]) == (d["brokerId"], 1 if d["fenced"] else -1)
        elif t == "FEATURE_LEVEL_RECORD":
            assert (r["feature_name"], r["feature_level"]) == (d["name"], d["featureLevel"])
        else:
            assert r["partition"] is None and r["broker_id"] is None or t in ("PRODUCER_IDS_RECORD",)


# ------------------------------------------------------------------ found KRaft data, Kafka 3.6.2 run live


@pytest.fixture(scope="session")
def metadata_dump(tmp_path_factory):
    """kafka-dump-log --cluster-metadata-decoder over the found files, in one JVM."""
    if shutil.which("java") is None:
        pytest.fail("Java 17 is required for the kafka-dump-log oracle")
    root = tmp_path_factory.mktemp("kafka-md")
    with tarfile.open(TOOLS_TGZ) as tf:
        tf.extractall(root, filter="data")
    script = next(root.rglob("bin/kafka-dump-log.sh"))
    args = [str(script), "--cluster-metadata-decoder", "--files", ",".join(map(str, FOUND_FILES))]
    out = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return parse_dump(out.stdout)


def test_found_kraft_files_against_kafka(metadata_dump):
    assert len(SNAPSHOTS) == 45
    totals: Counter = Counter()
    unread_by_kafka: Counter = Counter()
    for path in FOUND_FILES:
        expected = metadata_dump[str(path)]
        parsed, table, problems = decode_file(path)
        assert parsed.problems.num_rows == 0
        rows = table.to_pylist()
        assert [r["offset"] for r in rows] == sorted(expected), path
        for r in rows:
            judged = compare(expected[r["offset"]], r)
            totals[judged] += 1
            totals["known" if r["known"] else "unknown"] += 1
            if not r["known"]:
                assert r["raw_hex"] and r["error"]
            if judged == "kafka_error":
                # a record type/version newer than 3.6.2; Kafka names the api key it failed on
                key = int(re.search(r"(?:type|metadata id) (\d+)", expected[r["offset"]]).group(1))
                assert r["api_key"] == key and r["known"], r
                unread_by_kafka[(r["record_type"], r["version"])] += 1
        assert problems == []
    print(f"found KRaft files: {dict(totals)}; records Kafka 3.6.2 cannot read, we decode: {dict(unread_by_kafka)}")
    assert totals["unknown"] == 0 and totals["known"] == sum(totals[k] for k in ("payload", "kafka_error", "control", "control_type"))
    # Kafka 3.6.2 predates RegisterControllerRecord, RegisterBrokerRecord v3 and PartitionRecord v2
    assert {t for t, _ in unread_by_kafka} == {"REGISTER_CONTROLLER_RECORD", "REGISTER_BROKER_RECORD", "PARTITION_RECORD"}


def test_newest_snapshot_says_metadata_version_21():
    """MANIFEST: metadata.version 21 (3.9-IV0) in the newest snapshot; the 4.1 log's level is 29."""
    _, table, _ = decode_file(SNAPSHOTS[-1])
    levels = {r["feature_name"]: r["feature_level"] for r in table.to_pylist() if r["record_type"] == "FEATURE_LEVEL_RECORD"}
    assert levels["metadata.version"] == 21
    _, table, _ = decode_file(next(FOUND.glob("kraft-nomanazeem/*/__cluster_metadata-0/*.log")))
    levels = {r["feature_name"]: r["feature_level"] for r in table.to_pylist() if r["record_type"] == "FEATURE_LEVEL_RECORD"}
    assert levels["metadata.version"] == 29 and {"share.version", "streams.version", "eligible.leader.replicas.version"} <= set(levels)


@pytest.mark.parametrize("logdir", sorted(p.parent for p in FOUND.glob("kraft-*/*/meta.properties")), ids=lambda p: p.parent.name)
def test_directory_ids_agree_with_meta_properties(logdir: Path):
    """uuids (Uuid.toString) judged by Kafka's own meta.properties: the node registers its log dir
    (RegisterBrokerRecord v3 logDirs) and partitions placed on it name it (PartitionRecord v1+)."""
    props = dict(ln.split("=", 1) for ln in (logdir / "meta.properties").read_text(encoding="utf-8").splitlines() if "=" in ln)
    files = sorted((logdir / "__cluster_metadata-0").glob("*.log")) + sorted((logdir / "__cluster_metadata-0").glob("*.checkpoint"))[-1:]
    registered, placed = [], []
    for f in files:
        for r in decode_file(f)[1].to_pylist():
            d = json.loads(r["data_json"]) if r["data_json"] else {}
            if r["record_type"] == "REGISTER_BROKER_RECORD" and r["broker_id"] == int(props["node.id"]):
                registered.append(d["logDirs"])
            if r["record_type"] == "PARTITION_RECORD":
                placed += d["directories"]
    assert registered and all(dirs == [props["directory.id"]] for dirs in registered)
    assert set(placed) <= {props["directory.id"]}


def test_clear_elr_record_of_kafka_4():
    """ClearElrRecord (api key 28, Kafka 4.0): TopicName as a compact string, then no tagged fields."""
    assert decode_value(b"\x01\x1c\x00\x03ab\x00") == ("CLEAR_ELR_RECORD", 28, 0, {"topicName": "ab"}, None)
    assert decode_value(b"\x01\x1c\x00\x01\x00")[3] == {"topicName": ""}


def test_golden_set_has_no_kraft_metadata():
    """The golden set (Kafka 4.0 writer classes) holds no __cluster_metadata or KRaft snapshot to use."""
    assert not list(GOLDEN.rglob("*cluster_metadata*")) and not list(GOLDEN.rglob("*.checkpoint"))
    assert "cluster_metadata" not in (GOLDEN / "MANIFEST.md").read_text(encoding="utf-8")


# ------------------------------------------------------------------ unknown and damaged values


def _real_values() -> list[bytes]:
    parsed = segment.parse(
        (REAL / "clean-failover/controller-100/__cluster_metadata-0/00000000000000000000.log").read_bytes(),
        "x",
        records=True,
        payloads=True,
    )
    recs = parsed.extra["records"].to_pylist()
    seen: dict[bytes, bytes] = {}
    for r in recs:
        if r["control_type"] is None:
            seen.setdefault(r["value"][:3], r["value"])  # one value per (frame, api key, version)
    return list(seen.values())


def _records_table(values: list[bytes | None], control: list[str | None] | None = None) -> pa.Table:
    n = len(values)
    return pa.table(
        {
            "batch_position": pa.array(range(0, 100 * n, 100), pa.int64()),
            "offset": pa.array(range(n), pa.int64()),
            "timestamp": pa.array([1700000000000] * n, pa.int64()),
            "control_type": pa.array(control or [None] * n, pa.string()),
            "key": pa.array([None] * n, pa.binary()),
            "value": pa.array(values, pa.binary()),
        }
    )


def test_unknown_types_and_versions_are_kept_raw_without_problems():
    pcr = next(v for v in _real_values() if v[1] == 5)  # a PartitionChangeRecord (frame 1, key 5, v0)
    newer_key = b"\x01\x63\x00" + pcr[3:]  # api key 99
    newer_version = b"\x01\x05\x07" + pcr[3:]  # PartitionChangeRecord v7
    big = b"\x01\x63\x00" + bytes(5000)
    table, problems = decode_records(_records_table([newer_key, newer_version, big]))
    rows = table.to_pylist()
    assert problems == []
    assert [r["known"] for r in rows] == [False, False, False]
    assert (rows[0]["api_key"], rows[0]["version"]) == (99, 0)
    assert rows[1]["record_type"] == "PARTITION_CHANGE_RECORD" and rows[1]["version"] == 7
    assert rows[0]["raw_hex"] == newer_key.hex() and rows[1]["raw_hex"] == newer_version.hex()
    assert len(rows[2]["raw_hex"]) == RAW_HEX_CAP
    assert all(r["data_json"] is None and r["error"] for r in rows)


def test_damaged_values_are_problems_not_exceptions():
    topic = next(v for v in _real_values() if v[1] == 2)
    cases = [topic[:-3], topic + b"\x00", b"\x00" + topic[1:], b"", None, b"\x01\xff\xff\xff\xff\xff"]
    table, problems = decode_records(_records_table(cases))
    rows = table.to_pylist()
    assert not any(r["known"] for r in rows)
    assert len(problems) == len(cases) and {p.kind for p in problems} == {PROBLEM_KIND}
    assert [p.position for p in problems] == [r["batch_position"] for r in rows]
    assert "garbage" in rows[1]["error"] and "frame version 0" in rows[2]["error"]
    assert rows[0]["raw_hex"] == topic[:-3].hex()


def test_control_records_by_name_or_id():
    header = b"\x00\x00" + struct.pack(">q", 1751896167678) + b"\x00"
    assert decode_control("snapshot_header", header) == decode_control(3, header)
    name, cid, version, data, err = decode_control("SNAPSHOT_HEADER", header)
    assert (name, cid, version, err) == ("SNAPSHOT_HEADER", 3, 0, None)
    assert data == {"version": 0, "lastContainedLogTimestamp": 1751896167678}
    assert decode_control("commit", struct.pack(">hi", 0, 7))[3] == {"version": 0, "coordinatorEpoch": 7}
    assert decode_control(42, b"\x00")[3] is None
    assert decode_control("leader_change", b"\x00")[4] is not None  # truncated: an error, not an exception
    voters = decode_control("kraft_voters", _voters_bytes())
    assert voters[4] is None and voters[3]["voters"][0]["kRaftVersionFeature"] == {"minSupportedVersion": 0, "maxSupportedVersion": 1}
    assert voters[3]["voters"][0]["endpoints"] == [{"name": "CONTROLLER", "host": "h", "port": 9093}]


def _voters_bytes() -> bytes:
    """VotersRecord v0 by hand: Version, Voters[ VoterId, VoterDirectoryId, Endpoints[Name Host Port], KRaftVersionFeature ]."""
    endpoint = bytes([11]) + b"CONTROLLER" + bytes([2]) + b"h" + struct.pack(">H", 9093) + b"\x00"
    feature = struct.pack(">hh", 0, 1) + b"\x00"
    voter = struct.pack(">i", 100) + bytes(range(16)) + bytes([2]) + endpoint + feature + b"\x00"
    return struct.pack(">h", 0) + bytes([2]) + voter + b"\x00"


def test_fuzz_truncations_and_flips_never_raise():
    rng = random.Random(20261122)
    values = _real_values()
    assert len(values) >= 8
    mutated: list[bytes] = []
    for v in values:
        mutated += [v[:i] for i in range(len(v))]
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        v = bytearray(rng.choice(values))
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(v))
            v[i] = rng.randrange(256) if rng.random() < 0.7 else v[i] ^ (1 << rng.randrange(8))
        mutated.append(bytes(v))
        decode_value(bytes(v))
        decode_control(rng.randrange(7), bytes(v)[3:])
    table, problems = decode_records(_records_table(mutated))
    assert table.num_rows == len(mutated)
    unknown = table.filter(pa.compute.invert(table.column("known")))
    assert all(h is not None for h in unknown.column("raw_hex").to_pylist())
    assert len(problems) <= unknown.num_rows


# ------------------------------------------------------------------ the generic reader, hand-built bytes

SPEC = Message(
    "OffsetCommitValue",
    flexible="4+",
    fields=[
        F("offset", "int64"),
        F("leaderEpoch", "int32", versions="3+", default=-1),
        F("metadata", "string"),
        F("expireTimestamp", "int64", versions="1", default=-1),
        F("topics", "[]", versions="0+", fields=[F("name", "string"), F("partitions", "[]int32")]),
        F("isr", "[]int32", nullable="0+", tag=0, tagged="4+", default=None),
        F("blob", "bytes", versions="4+", nullable="4+"),
    ],
)


def test_non_flexible_version_reads_int_lengths_and_omits_absent_fields():
    # v1: offset, metadata (int16 length), expireTimestamp (v1 only), topics (int32 count) [name, partitions],
    # isr inline (tagged only from 4) and null (-1); leaderEpoch (3+) and blob (4+) are not on the wire
    buf = struct.pack(">qh", 5, 2) + b"hi" + struct.pack(">q", -1) + struct.pack(">ih", 1, 1) + b"t" + struct.pack(">iii", 2, 1, 2)
    buf += struct.pack(">i", -1)
    data, end = decode(SPEC, buf + b"tail", 1)
    assert end == len(buf)
    assert data == {"offset": 5, "metadata": "hi", "expireTimestamp": -1, "topics": [{"name": "t", "partitions": [1, 2]}], "isr": None}
    assert list(data) == ["offset", "metadata", "expireTimestamp", "topics", "isr"]


def test_flexible_version_compact_forms_and_tagged_fields():
    # offset, leaderEpoch, metadata "hi" (compact 3), topics (compact 2) [name "t", partitions [7], no tags],
    # blob null (0), then 2 tagged fields: tag 0 isr [1, 2]; unknown tag 9 of 2 bytes (skipped)
    buf = (
        struct.pack(">qi", 5, 3) + b"\x03hi" + b"\x02" + b"\x02t" + b"\x02" + struct.pack(">i", 7) + b"\x00" + b"\x00"
        + b"\x02" + b"\x00\x09\x03" + struct.pack(">ii", 1, 2) + b"\x09\x02zz"
    )  # fmt: skip
    data, end = decode(SPEC, buf, 4)
    assert end == len(buf)
    assert data == {"offset": 5, "leaderEpoch": 3, "metadata": "hi", "topics": [{"name": "t", "partitions": [7]}], "blob": None, "isr": [1, 2]}
    assert list(data)[-2:] == ["isr", "blob"]  # JSON order is field order, not wire order
    # without the tagged field the default (null) is not printed, as Kafka's JSON converter does
    plain = buf[: buf.index(b"\x02\x00\x09")] + b"\x00"
    assert "isr" not in decode(SPEC, plain, 4)[0]


def test_malformed_input_raises_message_error_with_position():
    good = struct.pack(">qi", 5, 3) + b"\x03hi" + b"\x01" + b"\x00" + b"\x00"
    assert decode(SPEC, good, 4)[1] == len(good)
    for cut in range(len(good)):
        with pytest.raises(MessageError):
            decode(SPEC, good[:cut], 4)
    huge_array = struct.pack(">qi", 5, 3) + b"\x03hi" + b"\xff\xff\xff\xff\x07"  # 2^31-1 elements in 0 bytes
    with pytest.raises(MessageError) as e:
        decode(SPEC, huge_array, 4)
    assert e.value.position == 15
    with pytest.raises(MessageError, match="non-nullable"):
        decode(SPEC, struct.pack(">qh", 5, -1), 0)
    with pytest.raises(MessageError, match="too long"):
        decode(SPEC, struct.pack(">qi", 5, 3) + b"\xff" * 6, 4)
    with pytest.raises(MessageError):
        decode(SPEC, good, -1)
    uuid = Message("U", fields=[F("id", "uuid"), F("b", "bytes")])
    data, _ = decode(uuid, bytes(range(16)) + struct.pack(">i", 3) + b"\x00\xff\x10", 0)
    assert data == {"id": "AAECAwQFBgcICQoLDA0ODw", "b": "AP8Q"}
