"""Kafka 4 group records: ``__consumer_offsets`` (classic, KIP-848 consumer, KIP-932 share and
KIP-1071 streams groups) and ``__share_group_state``, judged by Kafka 4.1.1's kafka-dump-log.

The writer (``sample_data.writer.coordinator_records``) lays out one record of every type Kafka
4.1.1 defines; Kafka's ``--offsets-decoder`` / ``--share-group-state-decoder`` print every field
of what its own ``CoordinatorRecordSerde`` reads (key ``{"type", "data"}``, value ``{"version",
"data"}``): our rows must say the same, field by field. Mutants of those records then check the
other direction: wherever Kafka's reader fails on a record ("Error at offset ..."), ours reports
``invalid_record``; wherever it reads one, so do we, with no problem; an unknown record type is
skipped by both.
"""

from __future__ import annotations

import base64
import json
import random
import re
import struct
import subprocess
from pathlib import Path

import pytest

from parsers import consumer_offsets, segment, share_group_state
from parsers.group_coordinator_records import RECORD_TYPES
from sample_data.writer.coordinator_records import (
    coordinator_record,
    every_offsets_kind,
    every_share_state_kind,
    offset_commit,
    share_snapshot,
)
from sample_data.writer.records import BatchSpec, Record, encode_batches

T0 = 1_767_225_600_000
DUMP_RECORD = re.compile(r"^\| offset: (\d+) .*? key: (.*?)(?: payload: (.*))?$")


def write_segment(directory: Path, records: list[Record]) -> Path:
    """One record per batch, so that Kafka's reader, which gives up a batch at its first bad
    record, judges every record."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "00000000000000000000.log"
    path.write_bytes(encode_batches([BatchSpec(i, (r,)) for i, r in enumerate(records)]))
    return path


def kafka_reading(kafka41_bin: Path, flag: str, path: Path) -> dict[int, tuple[str, str | None]]:
    """{offset: (key text, payload text or None)} as kafka-dump-log 4.1.1 prints them."""
    out = subprocess.run([str(kafka41_bin / "kafka-dump-log.sh"), flag, "--files", str(path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = {}
    for line in out.stdout.splitlines():
        if line.startswith("| offset: "):
            m = DUMP_RECORD.match(line)
            assert m, line
            lines[int(m.group(1))] = (m.group(2), m.group(3))
    return lines


def ours(module, path: Path) -> tuple[dict[int, dict], set[int]]:
    """Our rows by offset, and the offsets of the records we call damaged."""
    recs = segment.parse(path.read_bytes(), str(path), records=True, payloads=True).extra["records"]
    table, problems = module.decode_records(recs)
    rows = {r["offset"]: r for r in table.to_pylist()}
    damaged = {int(p.detail.split(" at offset ")[1].split(":")[0]) for p in problems}
    assert all(p.kind == "invalid_record" for p in problems)
    return rows, damaged


def none_if(v, sentinel=-1):
    return None if v is None or v == sentinel else v


def size_of(b64: str) -> int:
    return len(base64.b64decode(b64))


def assert_offsets_row_is_kafkas(row: dict, key_text: str, payload: str | None) -> None:
    key = json.loads(key_text)
    assert row["key_version"] == int(key["type"]) and row["error"] is None, row
    k = key["data"]
    assert (row["group"], row["member_id"], row["topic"], row["partition"], row["regular_expression"]) == (
        k.get("group", k.get("groupId")), k.get("memberId"), k.get("topic"), k.get("partition"), k.get("regularExpression"))
    if payload == "<DELETE>":
        assert row["tombstone"] and row["value_version"] is None
        return
    value = json.loads(payload)
    v = value["data"]
    assert row["value_version"] == int(value["version"]) and not row["tombstone"]
    if row["record_type"] == "offset_commit":
        assert (row["committed_offset"], row["committed_leader_epoch"], row["metadata"], row["commit_timestamp"],
                row["expire_timestamp"], row["topic_id"]) == (
            v["offset"], none_if(v.get("leaderEpoch")), v["metadata"], v["commitTimestamp"], none_if(v.get("expireTimestamp")),
            v.get("topicId"))
    elif row["record_type"] == "group_metadata":
        assert (row["protocol_type"], row["generation"], row["protocol"], row["leader"], row["current_state_timestamp"]) == (
            v["protocolType"], v["generation"], v["protocol"], v["leader"], none_if(v.get("currentStateTimestamp")))
        # a consumer-protocol subscription Kafka could parse is printed as its JSON: no size to compare then
        assert [(m["member_id"], m["client_id"], m["client_host"], m["session_timeout_ms"],
                 m["subscription_size"] if isinstance(k["subscription"], str) else None)
                for m, k in zip(row["member_details"], v["members"], strict=True)] == [
            (m["memberId"], m["clientId"], m["clientHost"], m["sessionTimeout"],
             size_of(m["subscription"]) if isinstance(m["subscription"], str) else None) for m in v["members"]]
    else:
        classic = v.get("classicMemberMetadata")
        for p in (classic or {}).get("supportedProtocols", []):  # kept as sizes: a classic subscription
            p["metadataSize"] = size_of(p.pop("metadata"))
        assert json.loads(row["data_json"]) == v, row["record_type"]
        epoch = next((v[f] for f in ("epoch", "assignmentEpoch", "memberEpoch") if f in v), None)
        assert row["epoch"] == epoch
        if "clientId" in v:
            [m] = row["member_details"]
            assert (m["member_id"], m["client_id"], m["client_host"], m["group_instance_id"]) == (
                k["memberId"], v["clientId"], v["clientHost"], v.get("instanceId"))


def assert_share_row_is_kafkas(row: dict, key_text: str, payload: str | None) -> None:
    key = json.loads(key_text)
    k = key["data"]
    assert row["error"] is None and row["key_version"] == int(key["type"])
    assert row["record_type"] == {"0": "share_snapshot", "1": "share_update"}[key["type"]]
    assert (row["group"], row["topic_id"], row["partition"], row["topic"]) == (k["groupId"], k["topicId"], k["partition"], None)
    if payload == "<DELETE>":
        assert row["tombstone"]
        return
    v = json.loads(payload)["data"]
    assert (row["snapshot_epoch"], row["state_epoch"], row["leader_epoch"], row["start_offset"], row["create_timestamp"],
            row["write_timestamp"]) == (v["snapshotEpoch"], v.get("stateEpoch"), v["leaderEpoch"], none_if(v["startOffset"]),
                                        v.get("createTimestamp"), v.get("writeTimestamp"))
    assert [tuple(b.values()) for b in row["state_batches"]] == [
        (b["firstOffset"], b["lastOffset"], b["deliveryState"], b["deliveryCount"]) for b in v["stateBatches"]]


def test_every_consumer_offsets_record_type_equals_kafkas_reading(tmp_path, kafka41_bin):
    path = write_segment(tmp_path / "__consumer_offsets-0", every_offsets_kind(T0))
    kafka = kafka_reading(kafka41_bin, "--offsets-decoder", path)
    rows, damaged = ours(consumer_offsets, path)
    assert damaged == set() and sorted(rows) == sorted(kafka)
    for off, (key_text, payload) in kafka.items():
        assert_offsets_row_is_kafkas(rows[off], key_text, payload)
    assert {r["key_version"] for r in rows.values()} == set(RECORD_TYPES)  # every type 4.1.1 defines
    assert {r["group_type"] for r in rows.values()} == {None, "classic", "consumer", "share", "streams"}


def test_every_share_group_state_record_equals_kafkas_reading(tmp_path, kafka41_bin):
    path = write_segment(tmp_path / "__share_group_state-0", every_share_state_kind(T0))
    kafka = kafka_reading(kafka41_bin, "--share-group-state-decoder", path)
    rows, damaged = ours(share_group_state, path)
    assert damaged == set() and sorted(rows) == sorted(kafka)
    for off, (key_text, payload) in kafka.items():
        assert_share_row_is_kafkas(rows[off], key_text, payload)


def _mutants(rng: random.Random, r: Record, n: int) -> list[Record]:
    """Truncations and byte flips of a record's value (and, less often, its key)."""
    out = []
    for _ in range(n):
        key, value = bytearray(r.key), bytearray(r.value) if r.value is not None else None
        target = key if value is None or rng.random() < 0.2 else value
        if rng.random() < 0.5 and len(target) > 3:
            del target[rng.randrange(2, len(target)):]
        else:
            i = rng.randrange(2, len(target)) if len(target) > 2 else 0
            target[i] = rng.choice([0x00, 0xFF, 0x7F, 0x80, target[i] ^ 0x01])
        out.append(Record(bytes(key), None if value is None else bytes(value), r.timestamp))
    return out


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__share_group_state"])
def test_damage_is_what_kafkas_reader_fails_on(tmp_path, kafka41_bin, topic):
    """Kafka's loader fails on a record it cannot read (CoordinatorLoaderImpl rethrows) and skips an
    unknown record type: the first is ``invalid_record`` here, the second a row with no problem."""
    rng = random.Random(848)
    if topic == "__consumer_offsets":
        base, module, flag = every_offsets_kind(T0), consumer_offsets, "--offsets-decoder"
        extra = [coordinator_record(1, {"group": "g", "topic": "t", "partition": 0}, None, ts=T0)]
        unknown = [Record(struct.pack(">h", t) + b"\x00\x01g", b"\x00\x00\x00", T0) for t in (9, 18, 24, -1)]
    else:
        base, module, flag = every_share_state_kind(T0), share_group_state, "--share-group-state-decoder"
        extra = [share_snapshot("g", bytes(16), 0, start_offset=5, ts=T0)]
        unknown = [Record(struct.pack(">h", t) + b"\x00\x01g", b"\x00\x00\x00", T0) for t in (2, 7)]
    mutants = [m for r in base for m in _mutants(rng, r, 12)]
    path = write_segment(tmp_path / f"{topic}-0", mutants + extra + unknown)
    kafka = kafka_reading(kafka41_bin, flag, path)
    rows, damaged = ours(module, path)
    kafka_failed = {o for o, (key, _) in kafka.items() if key.startswith("Error at offset")}
    kafka_skipped = {o for o, (key, _) in kafka.items() if key.startswith("Unknown record type")}
    assert damaged == kafka_failed, (sorted(damaged - kafka_failed)[:5], sorted(kafka_failed - damaged)[:5])
    first_unknown = len(mutants) + len(extra)
    assert set(range(first_unknown, first_unknown + len(unknown))) <= kafka_skipped
    for o in kafka_skipped:
        assert o not in damaged and rows[o]["record_type"] == "unknown" and "unknown record type" in rows[o]["error"]
    assert 20 < len(kafka_failed) < len(mutants) - 20  # the mutants exercise both outcomes


def test_kip_848_commit_and_member_columns():
    """A KIP-848 group commits with OffsetCommitValue v4 and the committed topic's id; its member
    record gives client and epoch columns (what the timeline and findings read)."""
    commit = offset_commit("g", "orders", 3, 4200, ts=T0, leader_epoch=7, topic_id=bytes(range(16)))
    row, damage = consumer_offsets.decode_record(commit.key, commit.value)
    assert damage is None and (row["record_type"], row["value_version"], row["committed_offset"], row["committed_leader_epoch"]) == (
        "offset_commit", 4, 4200, 7)
    assert row["topic_id"] == "AAECAwQFBgcICQoLDA0ODw" and row["group_type"] is None
    member = coordinator_record(5, {"groupId": "g", "memberId": "m"}, {
        "instanceId": None, "clientId": "c", "clientHost": "/h", "subscribedTopicNames": ["orders"], "rebalanceTimeoutMs": 1,
        "classicMemberMetadata": {"sessionTimeoutMs": 45_000, "supportedProtocols": [{"name": "range", "metadata": b"12345"}]}}, ts=T0)
    row, damage = consumer_offsets.decode_record(member.key, member.value)
    assert damage is None and row["group_type"] == "consumer" and row["member_details"] == [{
        "member_id": "m", "group_instance_id": None, "client_id": "c", "client_host": "/h", "rebalance_timeout_ms": 1,
        "session_timeout_ms": 45_000}]
    assert json.loads(row["data_json"])["classicMemberMetadata"]["supportedProtocols"] == [{"name": "range", "metadataSize": 5}]


REAL = Path(__file__).parent / "data" / "kafka-4.1.1-groups"


def _stored_dump(path: Path) -> dict[int, tuple[str, str | None]]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        off, rest = line.split(" key: ", 1)
        key, _, payload = rest.partition(" payload: ")
        out[int(off)] = (key, payload or None)
    return out


def test_real_kafka_4_records_read_as_kafka_read_them():
    """A real Kafka 4.1.1 broker's KIP-848, classic and share groups (tests/data/kafka-4.1.1-groups,
    with what its kafka-dump-log printed): every record as Kafka read it, and the groups' progress
    as the analyzer takes it (the KIP-848 group committed 60 on orders-1; the share group
    acknowledged 0-59 there, its stored start offset still 0)."""
    from jobs.history.views import replay_share_state

    offsets = REAL / "__consumer_offsets-0"
    rows, damaged = ours(consumer_offsets, offsets / "00000000000000000000.log")
    kafka = _stored_dump(offsets / "dump-offsets-decoder.txt")
    assert damaged == set() and sorted(rows) == sorted(kafka)
    for off, (key_text, payload) in kafka.items():
        assert_offsets_row_is_kafkas(rows[off], key_text, payload)
    commits = {(r["group"], r["partition"]): r["committed_offset"] for r in rows.values() if r["record_type"] == "offset_commit"}
    assert commits == {("kip848", 0): 0, ("kip848", 1): 60, ("classic", 0): 0, ("classic", 1): 60}
    assert {r["group_type"] for r in rows.values() if r["group"] == "share1"} == {"share"}

    state = REAL / "__share_group_state-0"
    rows, damaged = ours(share_group_state, state / "00000000000000000000.log")
    kafka = _stored_dump(state / "dump-share-group-state-decoder.txt")
    assert damaged == set() and sorted(rows) == sorted(kafka)
    for off, (key_text, payload) in kafka.items():
        assert_share_row_is_kafkas(rows[off], key_text, payload)
    by_partition = {p: replay_share_state([r | {"broker": 1, "path": "p"} for _, r in sorted(rows.items()) if r["partition"] == p])
                    for p in (0, 1)}
    assert by_partition[0] is None  # initialized at -1, nothing consumed
    assert (by_partition[1]["start_offset"], by_partition[1]["acknowledged_to"]) == (0, 60)
