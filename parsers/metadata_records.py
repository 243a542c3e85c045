"""``__cluster_metadata`` records (KRaft's metadata log and its ``.checkpoint`` snapshots).

A metadata record's value is a small frame (AbstractApiMessageSerde.read) around a generated
message::

    frameVersion:uvarint (must be 1)  apiKey:uvarint  version:uvarint  message bytes (nothing after)

The message specs below are written from Kafka's ``metadata/src/main/resources/common/metadata``
definitions (every version up to Kafka 4.1.1, ClearElrRecord included); ``kafka_messages`` reads them. Control batches of the same log carry
KRaft control records, keyed by ControlRecordType and read by ControlRecordUtils at version 0
(whatever their own ``version`` field says): LeaderChangeMessage, SnapshotHeaderRecord,
SnapshotFooterRecord, KRaftVersionRecord, VotersRecord.

Why decode it at all: the metadata log is the cluster's own account of who led which partition with
which ISR and when brokers were fenced, the ground truth to hold the data logs against. A record we
cannot read (an apiKey or version newer than we know, or damaged bytes) is kept as hex with the
reason, never dropped and never an exception.
"""

from __future__ import annotations

import re

import pyarrow as pa

from .common import Problem
from .kafka_messages import F, Message, MessageError, decode, read_uvarint, to_json

RAW_HEX_CAP = 4096  # hex characters kept of an unknown or undecodable value
PROBLEM_KIND = "metadata_record_undecodable"


def _m(name: str, valid: str, fields: list[F]) -> Message:
    # every metadata record and KRaft control record is flexible from version 0
    return Message(name, flexible="0+", fields=fields, valid=valid)


def _type_name(name: str) -> str:
    """MetadataRecordType's enum name: PartitionChangeRecord -> PARTITION_CHANGE_RECORD."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


_ENDPOINT = [F("Name", "string"), F("Host", "string"), F("Port", "uint16"), F("SecurityProtocol", "int16")]
_FEATURE = [F("Name", "string"), F("MinSupportedVersion", "int16"), F("MaxSupportedVersion", "int16")]


def _elr(tag: int, last_known: bool = False) -> F:
    """EligibleLeaderReplicas / LastKnownElr (KIP-966): nullable tagged int32 arrays from v2."""
    name = "LastKnownElr" if last_known else "EligibleLeaderReplicas"
    return F(name, "[]int32", versions="2+", nullable="2+", tagged="2+", tag=tag, default=None)


# apiKey -> spec. Field names, order, versions, defaults and tags as in Kafka's definitions.
RECORDS: dict[int, Message] = {
    0: _m("RegisterBrokerRecord", "0-3", [
        F("BrokerId", "int32"),
        F("IsMigratingZkBroker", "bool", versions="2+", default=False),
        F("IncarnationId", "uuid"),
        F("BrokerEpoch", "int64"),
        F("EndPoints", "[]", fields=_ENDPOINT),
        F("Features", "[]", fields=_FEATURE),
        F("Rack", "string", nullable="0+"),
        F("Fenced", "bool", default=True),
        F("InControlledShutdown", "bool", versions="1+", default=False),
        F("LogDirs", "[]uuid", versions="3+", tagged="3+", tag=0),
    ]),
    1: _m("UnregisterBrokerRecord", "0", [F("BrokerId", "int32"), F("BrokerEpoch", "int64")]),
    2: _m("TopicRecord", "0", [F("Name", "string"), F("TopicId", "uuid")]),
    3: _m("PartitionRecord", "0-2", [
        F("PartitionId", "int32", default=-1),
        F("TopicId", "uuid"),
        F("Replicas", "[]int32"),
        F("Isr", "[]int32"),
        F("RemovingReplicas", "[]int32"),
        F("AddingReplicas", "[]int32"),
        F("Leader", "int32", default=-1),
        F("LeaderRecoveryState", "int8", default=0, tagged="0+", tag=0),
        F("LeaderEpoch", "int32", default=-1),
        F("PartitionEpoch", "int32", default=-1),
        F("Directories", "[]uuid", versions="1+"),
        _elr(1),
        _elr(2, last_known=True),
    ]),
    4: _m("ConfigRecord", "0", [
        F("ResourceType", "int8"), F("ResourceName", "string"), F("Name", "string"), F("Value", "string", nullable="0+"),
    ]),
    5: _m("PartitionChangeRecord", "0-2", [
        F("PartitionId", "int32", default=-1),
        F("TopicId", "uuid"),
        F("Isr", "[]int32", nullable="0+", tagged="0+", tag=0, default=None),
        F("Leader", "int32", tagged="0+", tag=1, default=-2),
        F("Replicas", "[]int32", nullable="0+", tagged="0+", tag=2, default=None),
        F("RemovingReplicas", "[]int32", nullable="0+", tagged="0+", tag=3, default=None),
        F("AddingReplicas", "[]int32", nullable="0+", tagged="0+", tag=4, default=None),
        F("LeaderRecoveryState", "int8", tagged="0+", tag=5, default=-1),
        F("Directories", "[]uuid", versions="1+", nullable="1+", tagged="1+", tag=8, default=None),
        _elr(6),
        _elr(7, last_known=True),
    ]),
    7: _m("FenceBrokerRecord", "0", [F("Id", "int32"), F("Epoch", "int64")]),
    8: _m("UnfenceBrokerRecord", "0", [F("Id", "int32"), F("Epoch", "int64")]),
    9: _m("RemoveTopicRecord", "0", [F("TopicId", "uuid")]),
    10: _m("DelegationTokenRecord", "0", [
        F("Owner", "string"), F("Requester", "string"), F("Renewers", "[]string"), F("IssueTimestamp", "int64"),
        F("MaxTimestamp", "int64"), F("ExpirationTimestamp", "int64"), F("TokenId", "string"),
    ]),
    11: _m("UserScramCredentialRecord", "0", [
        F("Name", "string"), F("Mechanism", "int8"), F("Salt", "bytes"), F("StoredKey", "bytes"),
        F("ServerKey", "bytes"), F("Iterations", "int32"),
    ]),
    12: _m("FeatureLevelRecord", "0", [F("Name", "string"), F("FeatureLevel", "int16")]),
    14: _m("ClientQuotaRecord", "0", [
        F("Entity", "[]", fields=[F("EntityType", "string"), F("EntityName", "string", nullable="0+")]),
        F("Key", "string"), F("Value", "float64"), F("Remove", "bool"),
    ]),
    15: _m("ProducerIdsRecord", "0", [F("BrokerId", "int32"), F("BrokerEpoch", "int64", default=-1), F("NextProducerId", "int64")]),
    17: _m("BrokerRegistrationChangeRecord", "0-2", [
        F("BrokerId", "int32"),
        F("BrokerEpoch", "int64"),
        F("Fenced", "int8", tagged="0+", tag=0),
        F("InControlledShutdown", "int8", versions="1+", tagged="1+", tag=1),
        F("LogDirs", "[]uuid", versions="2+", tagged="2+", tag=2),
    ]),
    18: _m("AccessControlEntryRecord", "0", [
        F("Id", "uuid"), F("ResourceType", "int8"), F("ResourceName", "string"), F("PatternType", "int8"),
        F("Principal", "string"), F("Host", "string"), F("Operation", "int8"), F("PermissionType", "int8"),
    ]),
    19: _m("RemoveAccessControlEntryRecord", "0", [F("Id", "uuid")]),
    20: _m("NoOpRecord", "0", []),
    21: _m("ZkMigrationStateRecord", "0", [F("ZkMigrationState", "int8")]),
    22: _m("RemoveUserScramCredentialRecord", "0", [F("Name", "string"), F("Mechanism", "int8")]),
    23: _m("BeginTransactionRecord", "0", [F("Name", "string", nullable="0+", tagged="0+", tag=0, default=None)]),
    24: _m("EndTransactionRecord", "0", []),
    25: _m("AbortTransactionRecord", "0", [F("Reason", "string", nullable="0+", tagged="0+", tag=0, default=None)]),
    26: _m("RemoveDelegationTokenRecord", "0", [F("TokenId", "string")]),
    27: _m("RegisterControllerRecord", "0", [
        F("ControllerId", "int32"),
        F("IncarnationId", "uuid"),
        F("ZkMigrationReady", "bool"),
        F("EndPoints", "[]", fields=_ENDPOINT),
        F("Features", "[]", fields=_FEATURE),
    ]),
    28: _m("ClearElrRecord", "0", [F("TopicName", "string")]),  # Kafka 4.0 (KIP-966): "" clears every topic's ELR
}  # fmt: skip
TYPE_NAMES: dict[int, str] = {k: _type_name(m.name) for k, m in RECORDS.items()}
MAX_VERSIONS: dict[int, int] = {k: int(m.valid.split("-")[-1]) for k, m in RECORDS.items()}

_VOTER = [F("VoterId", "int32"), F("VoterDirectoryId", "uuid", versions="1+")]
# ControlRecordType id -> (enum name, spec); read at version 0 like ControlRecordUtils
CONTROL: dict[int, tuple[str, Message | None]] = {
    0: ("ABORT", None),
    1: ("COMMIT", None),
    2: ("LEADER_CHANGE", _m("LeaderChangeMessage", "0-1", [
        F("Version", "int16"), F("LeaderId", "int32"), F("Voters", "[]", fields=_VOTER), F("GrantingVoters", "[]", fields=_VOTER),
    ])),
    3: ("SNAPSHOT_HEADER", _m("SnapshotHeaderRecord", "0", [F("Version", "int16"), F("LastContainedLogTimestamp", "int64")])),
    4: ("SNAPSHOT_FOOTER", _m("SnapshotFooterRecord", "0", [F("Version", "int16")])),
    5: ("KRAFT_VERSION", _m("KRaftVersionRecord", "0", [F("Version", "int16"), F("KRaftVersion", "int16")])),
    6: ("KRAFT_VOTERS", _m("VotersRecord", "0", [
        F("Version", "int16"),
        F("Voters", "[]", fields=[
            F("VoterId", "int32"),
            F("VoterDirectoryId", "uuid"),
            F("Endpoints", "[]", fields=[F("Name", "string"), F("Host", "string"), F("Port", "uint16")]),
            F("KRaftVersionFeature", "KRaftVersionFeature", fields=[F("MinSupportedVersion", "int16"), F("MaxSupportedVersion", "int16")]),
        ]),
    ])),
}  # fmt: skip
CONTROL_IDS: dict[str, int] = {name: i for i, (name, _) in CONTROL.items()}
_END_TXN = Message("EndTransactionMarker", fields=[F("Version", "int16"), F("CoordinatorEpoch", "int32")])

Decoded = tuple[str, int, int, dict | None, str | None]  # (type name, api key or control id, version, data, error)


def decode_value(value: bytes | None) -> Decoded:
    """Decode one metadata record value: (type name, api key, version, data or None, error or None).

    ``data`` is what ``kafka-dump-log --cluster-metadata-decoder`` prints under ``data``. Unknown
    api keys or versions give ``data=None`` and say so in the error; so does damaged input.
    """
    return decode_framed(value, RECORDS, TYPE_NAMES, MAX_VERSIONS)


def decode_framed(value: bytes | None, records: dict[int, Message], names: dict[int, str], max_versions: dict[int, int]) -> Decoded:
    """AbstractApiMessageSerde.read over ``records`` (apiKey -> spec): the frame every
    ApiMessage-in-a-record serde shares (KRaft's metadata log, tiered storage's
    ``__remote_log_metadata``). Never raises."""
    if value is None:
        return "UNKNOWN", -1, -1, None, "null value"
    n = len(value)
    api_key = version = -1
    try:
        frame, pos = read_uvarint(value, 0, n)
        if frame != 1:
            return "UNKNOWN", -1, -1, None, f"unknown frame version {frame} (only frame version 1 is supported)"
        api_key, pos = read_uvarint(value, pos, n)
        version, pos = read_uvarint(value, pos, n)
    except MessageError as e:
        return "UNKNOWN", api_key, version, None, f"bad record frame: {e}"
    if api_key > 0x7FFF or version > 0x7FFF:
        return "UNKNOWN", api_key, version, None, f"apiKey {api_key} / version {version} do not fit a short"
    spec = records.get(api_key)
    if spec is None:
        return f"UNKNOWN_{api_key}", api_key, version, None, f"unknown metadata record type {api_key}"
    name = names[api_key]
    if version > max_versions[api_key]:
        return name, api_key, version, None, f"{spec.name} version {version} is newer than known (up to {max_versions[api_key]})"
    try:
        data, end = decode(spec, value, version, pos)
    except MessageError as e:
        return name, api_key, version, None, f"failed to deserialize {spec.name} v{version}: {e}"
    if end != n:
        return name, api_key, version, None, f"found {n - end} byte(s) of garbage after {spec.name}"
    return name, api_key, version, data, None


def decode_control(control_type: str | int, value: bytes | None) -> Decoded:
    """Decode a KRaft control record's value by its ControlRecordType (name or id).

    Returns (enum name, type id, the record's own ``version`` field, data, error). Like
    ControlRecordUtils, the message is read at version 0 and trailing bytes are not checked.
    """
    if isinstance(control_type, str):
        cid = CONTROL_IDS.get(control_type.strip().upper(), -1)
    else:
        cid = int(control_type)
    name, spec = CONTROL.get(cid, (f"UNKNOWN_CONTROL_{cid}" if cid >= 0 else "UNKNOWN_CONTROL", None))
    if value is None:
        return name, cid, -1, None, "null value"
    if cid in (0, 1):
        spec = _END_TXN
    if spec is None:
        return name, cid, -1, None, f"unknown control record type {control_type}"
    try:
        data, _ = decode(spec, value, 0)
    except MessageError as e:
        return name, cid, -1, None, f"failed to deserialize {spec.name}: {e}"
    return name, cid, int(data.get("version", 0)), data, None


METADATA_RECORDS_SCHEMA = pa.schema(
    [
        pa.field("batch_position", pa.int64()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.int64()),
        pa.field("is_control", pa.bool_()),
        pa.field("record_type", pa.string()),
        pa.field("api_key", pa.int16()),
        pa.field("version", pa.int16()),
        pa.field("data_json", pa.string()),
        pa.field("known", pa.bool_()),
        pa.field("error", pa.string()),
        pa.field("raw_hex", pa.string()),
        pa.field("topic_id", pa.string()),
        pa.field("topic_name", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("leader", pa.int32()),
        pa.field("isr", pa.list_(pa.int32())),
        pa.field("replicas", pa.list_(pa.int32())),
        pa.field("elr", pa.list_(pa.int32())),
        pa.field("leader_recovery_state", pa.int8()),
        pa.field("broker_id", pa.int32()),  # the node a broker/controller record is about
        pa.field("fenced", pa.int8()),  # 1 fenced, -1 unfenced, 0 unchanged
        pa.field("in_controlled_shutdown", pa.int8()),  # 1 in controlled shutdown, 0 not / unchanged
        pa.field("feature_name", pa.string()),
        pa.field("feature_level", pa.int16()),
    ]
)
_PROMOTED = [f.name for f in METADATA_RECORDS_SCHEMA][11:]


def _short(v: int) -> int | None:
    return v if -0x8000 <= v <= 0x7FFF else None


def _promote(api_key: int, d: dict) -> dict:
    """The columns downstream joins on, from one decoded metadata record (api key known)."""
    p: dict = {}
    if api_key in (2, 3, 5, 9):  # topic, partition, partition change, remove topic
        p["topic_id"] = d.get("topicId")
    if api_key == 2:
        p["topic_name"] = d.get("name")
    elif api_key == 3:
        p.update(partition=d["partitionId"], leader=d["leader"], isr=d["isr"], replicas=d["replicas"])
        p.update(elr=d.get("eligibleLeaderReplicas"), leader_recovery_state=d.get("leaderRecoveryState", 0))
    elif api_key == 5:
        leader = d.get("leader", -2)
        p.update(partition=d["partitionId"], leader=None if leader == -2 else leader, isr=d.get("isr"))
        p.update(replicas=d.get("replicas"), elr=d.get("eligibleLeaderReplicas"))
        lrs = d.get("leaderRecoveryState", -1)
        p["leader_recovery_state"] = None if lrs == -1 else lrs
    elif api_key == 0:
        p.update(broker_id=d["brokerId"], fenced=1 if d["fenced"] else -1)
        if "inControlledShutdown" in d:
            p["in_controlled_shutdown"] = 1 if d["inControlledShutdown"] else 0
    elif api_key == 17:
        p.update(broker_id=d["brokerId"], fenced=d.get("fenced", 0), in_controlled_shutdown=d.get("inControlledShutdown", 0))
    elif api_key in (7, 8):
        p.update(broker_id=d["id"], fenced=1 if api_key == 7 else -1)
    elif api_key in (1, 15):
        p["broker_id"] = d["brokerId"]
    elif api_key == 27:
        p["broker_id"] = d["controllerId"]
    elif api_key == 12:
        p.update(feature_name=d["name"], feature_level=d["featureLevel"])
    return p


def _damaged(is_control: bool, name: str, key: int, version: int) -> bool:
    """A failed decode of bytes we should read (vs. a record type or version newer than our specs)."""
    if is_control:
        return key in CONTROL
    if name == "UNKNOWN":  # no value, or its frame is unreadable
        return True
    return key in RECORDS and version <= MAX_VERSIONS[key]


def decode_records(records: pa.Table) -> tuple[pa.Table, list[Problem]]:
    """One METADATA_RECORDS_SCHEMA row per record of a ``__cluster_metadata`` segment or snapshot.

    ``records`` is ``segment.parse(..., records=True, payloads=True).extra["records"]``. Problems
    (kind ``metadata_record_undecodable``, at the batch position) only for damaged values; records
    of a newer Kafka (unknown api key or version) are rows with ``known`` false and their hex.
    """
    n = records.num_rows
    bpos = records.column("batch_position").to_pylist()
    offs = records.column("offset").to_pylist()
    ctl = records.column("control_type").to_pylist()
    vals = records.column("value").to_pylist()
    names, keys, versions, jsons, knowns, errors, raws = [], [], [], [], [], [], []
    promoted = {c: [None] * n for c in _PROMOTED}
    problems: list[Problem] = []
    for i, (ctype, value) in enumerate(zip(ctl, vals)):
        if ctype is not None:
            name, key, version, data, err = decode_control(ctype, value)
        else:
            name, key, version, data, err = decode_value(value)
            if data is not None:
                for c, v in _promote(key, data).items():
                    promoted[c][i] = v
        if err is not None and _damaged(ctype is not None, name, key, version):
            bp = bpos[i]
            problems.append(Problem(-1 if bp is None else int(bp), PROBLEM_KIND, f"offset {offs[i]}: {name}: {err}"))
        names.append(name)
        keys.append(_short(key))
        versions.append(_short(version))
        knowns.append(data is not None)
        jsons.append(None if data is None else to_json(data))
        errors.append(err)
        raws.append(None if data is not None or value is None else bytes(value[: RAW_HEX_CAP // 2]).hex())
    columns = {
        "batch_position": records.column("batch_position"),
        "offset": records.column("offset"),
        "timestamp": records.column("timestamp"),
        "is_control": pa.array([c is not None for c in ctl], pa.bool_()),
        "record_type": names,
        "api_key": keys,
        "version": versions,
        "data_json": jsons,
        "known": knowns,
        "error": errors,
        "raw_hex": raws,
        **promoted,
    }
    arrays = [pa.array(columns[f.name], f.type) if isinstance(columns[f.name], list) else columns[f.name].cast(f.type) for f in METADATA_RECORDS_SCHEMA]
    table = pa.Table.from_arrays(arrays, schema=METADATA_RECORDS_SCHEMA)
    return table, problems
