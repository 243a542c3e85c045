"""Who led when: the KRaft metadata log replayed into per-partition events and broker events.

Every KRaft node (controller and broker) holds a copy of ``__cluster_metadata``; the committed
part is the same Raft log everywhere, so records are deduplicated by metadata offset and each
event names the nodes whose copy holds it. A ``PartitionChangeRecord`` only carries what changed,
so the state of a partition is rebuilt the way ``PartitionRegistration.merge`` does it: a record
with a leader field (≠ -2) bumps the leader epoch, every record bumps the partition epoch, absent
fields keep their value. Snapshots (``NNNN-EEEE.checkpoint``, ``bootstrap.checkpoint``) restate
the whole state at their end offset; replayed after the log records before that offset they add
nothing, and where the log before them is gone they supply the starting state.

Whether an election was clean, as ``PartitionChangeBuilder`` decides it (``elected_from`` says
from where): a leader from the previous ISR is clean (``isr``); so is one from the eligible leader
replicas when the ISR emptied (``elr``, KIP-966: Kafka 4.x keeps the replicas that left the ISR
below min.insync.replicas without a crash there), and one joining the ISR in the record that
completes a reassignment (``reassignment``). A new leader while ``leaderRecoveryState`` becomes
RECOVERING (1) is unclean: since metadata.version 3.2 the controller sets it exactly then, for
an election outside the ISR and ELR (``outside_isr``) and for KIP-966's unclean recovery, the last
known leader brought back once ISR and ELR are both empty (``last_known_leader``, named by
``LastKnownElr``). A leader in neither the previous ISR nor ELR without it is unclean too (older
metadata versions, and a partition still RECOVERING, which Kafka does not mark again). A leader of
-1 is no election (the partition went offline). ``ClearElrRecord`` (4.x, after a
min.insync.replicas change) empties the ELR and last known ELR of one topic, or of every topic when
it names none.

The replay runs per topic id with ``applyInPandas`` (all of a topic's records carry its id), so it
is distributed like every other job; the metadata log is small next to the data it describes.
"""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.session.memory import gc_frozen
from jobs.store.tables import BROKER_EVENTS_SCHEMA, METADATA_EVENTS_SCHEMA

PARTITION_TYPES = ("TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD", "REMOVE_TOPIC_RECORD")
CLEAR_ELR = "CLEAR_ELR_RECORD"  # names a topic, not a topic id: replayed in every topic's group
BROKER_TYPES = ("REGISTER_BROKER_RECORD", "UNREGISTER_BROKER_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD",
                "FENCE_BROKER_RECORD", "UNFENCE_BROKER_RECORD", "REGISTER_CONTROLLER_RECORD")
NO_LEADER_CHANGE = -2
RECOVERING = 1

METADATA_EVENTS = from_arrow_schema(METADATA_EVENTS_SCHEMA)  # its columns: jobs.store.tables


def _records(meta: DataFrame, types: tuple[str, ...], by_topic_id: bool = False) -> DataFrame:
    """The records of ``types``, one row per metadata offset whatever the number of copies.

    ``by_topic_id``: only records that name a topic id, hashed by it before they are grouped, so
    that the replay's grouping by topic id needs no shuffle of its own (``metadata_events``: one
    Spark stage where there were two). A record's topic id is in its data (``topicId``), so its
    copies all name the same one, and grouping by it as well groups the same copies."""
    m = meta.where(F.col("record_type").isin(*types) & F.col("error").isNull())
    if by_topic_id:
        m = m.where(F.col("topic_id").isNotNull()).repartition("topic_id")
    snap = F.col("file_kind") != "segment"
    m = m.withColumn("source", F.when(snap, "snapshot").otherwise("log"))
    m = m.withColumn("meta_offset", F.when(snap, F.coalesce(F.col("snapshot_end_offset") - 1, F.lit(-1))).otherwise(F.col("offset")))
    m = m.withColumn("seq", F.when(snap, F.col("offset")).otherwise(F.lit(0)))
    return m.groupBy(*(["topic_id"] if by_topic_id else []), "meta_offset", "source", "seq", "record_type", "data_json").agg(
        F.min("timestamp").alias("timestamp_ms"),
        F.sort_array(F.collect_set("broker")).alias("nodes"),
        F.min("path").alias("path"),
        F.min_by("batch_position", "path").alias("batch_position"),
        *([] if by_topic_id else [F.first("topic_id", ignorenulls=True).alias("topic_id")]),
    )


def _ints(v) -> list[int] | None:
    if v is None:
        return None
    return [int(x) for x in v]


_STATE = ("leader", "leader_epoch", "partition_epoch", "isr", "elr", "last_known_elr", "replicas", "leader_recovery_state")
_UNKNOWN = dict.fromkeys(_STATE)


@dataclasses.dataclass
class _TopicImage:
    """What the replay knows of one topic id so far, as Kafka's ``TopicImage``: its name and each
    partition's state (``_STATE`` keys)."""

    name: str | None = None
    partitions: dict[int, dict] = dataclasses.field(default_factory=dict)


def _replay(pdf: pd.DataFrame) -> pd.DataFrame:
    """One topic id's records in metadata order → its partitions' events (see module doc); each
    record is replayed by the function of its type (``_REPLAY``), as ``MetadataDelta.replay``
    dispatches on ``MetadataRecordType``."""
    pdf = pdf.sort_values(["meta_offset", "source", "seq"], kind="stable")
    topic = _TopicImage()
    rows = []
    for r in pdf.itertuples(index=False):
        data = json.loads(r.data_json) if r.data_json else {}
        base = {"topic_id": r.topic_id, "meta_offset": int(r.meta_offset),
                "time": pd.Timestamp(int(r.timestamp_ms), unit="ms") if r.timestamp_ms is not None and r.timestamp_ms >= 0 else None,
                "source": r.source, "nodes": _ints(r.nodes), "path": r.path,
                "batch_position": None if pd.isna(r.batch_position) else int(r.batch_position)}
        rows += _REPLAY[r.record_type](topic, data, base)
    out = pd.DataFrame(rows, columns=[f.name for f in METADATA_EVENTS.fields])
    out["topic"] = topic.name
    return out


def _replay_topic(topic: _TopicImage, data: dict, base: dict) -> list[dict]:
    """TopicRecord: the topic's name (no event)."""
    topic.name = data.get("name", topic.name)
    return []


def _replay_remove_topic(topic: _TopicImage, data: dict, base: dict) -> list[dict]:
    """RemoveTopicRecord: every partition known so far is removed."""
    rows = [_event(base, p, s, "topic_removed", f"topic {topic.name} removed") for p, s in sorted(topic.partitions.items())]
    topic.partitions.clear()
    return rows


def _replay_clear_elr(topic: _TopicImage, data: dict, base: dict) -> list[dict]:
    """ClearElrRecord, when it names this topic or none (replicated into every topic's group: see
    metadata_events)."""
    if data.get("topicName") in ("", topic.name):
        return _clear_elr(base, topic.partitions)
    return []


def _replay_partition(topic: _TopicImage, data: dict, base: dict) -> list[dict]:
    """PartitionRecord: a partition's whole state, new (created, or a snapshot's first word of it)
    or restated by a snapshot (an event only where it differs from the replayed state)."""
    p = data.get("partitionId")
    if p is None:
        return []
    prev = topic.partitions.get(p)
    new = {"leader": data.get("leader"), "leader_epoch": data.get("leaderEpoch"), "partition_epoch": data.get("partitionEpoch"),
           "isr": data.get("isr"), "replicas": data.get("replicas"), "elr": data.get("eligibleLeaderReplicas"),
           "last_known_elr": data.get("lastKnownElr"), "leader_recovery_state": data.get("leaderRecoveryState", 0)}
    topic.partitions[p] = new
    if prev is None:
        event = "partition_created" if base["source"] == "log" else "snapshot_state"
        detail = (f"{'created' if base['source'] == 'log' else 'state from snapshot'}: leader {new['leader']}, "
                  f"epoch {new['leader_epoch']}, ISR {new['isr']}, replicas {new['replicas']}" + _elr_text(new))
    elif _same(prev, new):
        return []
    else:
        event, detail = "snapshot_state", f"state from snapshot: leader {new['leader']}, epoch {new['leader_epoch']}, ISR {new['isr']}" + _elr_text(new)
    return [_event(base, p, new, event, detail, prev=prev)]


def _replay_partition_change(topic: _TopicImage, data: dict, base: dict) -> list[dict]:
    """PartitionChangeRecord: merged into the partition's state (``PartitionRegistration.merge``)."""
    p = data.get("partitionId")
    if p is None:
        return []
    prev = topic.partitions.get(p) or dict(_UNKNOWN)
    return [_change(base, p, prev, data, topic.partitions)]


def _change(base: dict, p: int, prev: dict, data: dict, state: dict) -> dict:
    """The event of one PartitionChangeRecord on partition ``p`` (its state before: ``prev``), the
    partition's new state stored in ``state``."""
    new = dict(prev)
    leader = data.get("leader", NO_LEADER_CHANGE)
    for key, field in (("isr", "isr"), ("replicas", "replicas"), ("elr", "eligibleLeaderReplicas"), ("last_known_elr", "lastKnownElr")):
        if data.get(field) is not None:
            new[key] = data[field]
    lrs = data.get("leaderRecoveryState", -1)
    if lrs is not None and lrs != -1:
        new["leader_recovery_state"] = lrs
    if new["partition_epoch"] is not None:
        new["partition_epoch"] += 1
    election = clean = source = None
    bump = leader != NO_LEADER_CHANGE and leader == prev["leader"]  # an epoch bump, not an election
    if leader != NO_LEADER_CHANGE:
        new["leader"] = leader
        if new["leader_epoch"] is not None:
            new["leader_epoch"] += 1
        if leader == -1 and not bump:
            election = "offline"
        elif not bump:
            source = _elected_from(leader, prev, data, lrs)
            clean = source not in ("outside_isr", "last_known_leader")
            election = "clean" if clean else "unclean"
    state[p] = new
    changes = _changes(prev, new)
    if prev["leader_recovery_state"] == RECOVERING and new["leader_recovery_state"] == 0 and election is None:
        event, detail = "leader_recovered", "leader recovered after an unclean election (RECOVERING → RECOVERED)" + changes
    elif bump:
        event, detail = "leader_epoch_bump", f"leader {leader} kept, epoch bumped to {new['leader_epoch']}" + changes
    elif election is not None:
        event = "leader_change"
        detail = (f"leader {prev['leader']} → {new['leader']} (epoch {new['leader_epoch']})"
                  + (", no leader: partition offline" if election == "offline" else _how(source, leader, prev, lrs)) + changes)
    elif new["isr"] != prev["isr"]:
        event, detail = "isr_change", changes[2:]
    elif (new["elr"] or []) != (prev["elr"] or []) or (new["last_known_elr"] or []) != (prev["last_known_elr"] or []):
        event, detail = "elr_change", changes[2:]
    elif new["replicas"] != prev["replicas"]:
        event, detail = "replicas_change", f"replicas {prev['replicas']} → {new['replicas']}"
    else:
        event, detail = "partition_change", "partition epoch bumped"
    return _event(base, p, new, event, detail, prev=prev, election=election, clean=clean, elected_from=source)


def _elected_from(leader: int, prev: dict, data: dict, lrs: int) -> str | None:
    """Where ``PartitionChangeBuilder`` took a new leader from (module doc); None when the state
    before the record is unknown (the log before it was not collected) and nothing says unclean."""
    isr, elr, last_known = prev["isr"] or [], prev["elr"] or [], prev["last_known_elr"] or []
    if lrs == RECOVERING:
        return "last_known_leader" if not isr and not elr and last_known == [leader] else "outside_isr"
    if leader in isr:
        return "isr"
    if leader in elr:
        return "elr"
    if data.get("replicas") is not None:
        # a finished reassignment elects a replica that joins the ISR in the same record
        # (PartitionReassignmentReplicas), which the previous ISR cannot show
        return "reassignment"
    if prev["isr"] is None:
        return None
    return "outside_isr"


def _how(source: str | None, leader: int, prev: dict, lrs: int) -> str:
    """How a leader change elected its leader, in words (the timeline's detail)."""
    rec = " (leaderRecoveryState RECOVERING)" if lrs == RECOVERING else ""
    if source == "elr":
        return f", elected from ELR {prev['elr']} (ISR {prev['isr']}): clean, KIP-966"
    if source == "reassignment":
        return ", elected from the reassignment's new replicas"
    if source == "last_known_leader":
        return (f", UNCLEAN recovery: last known leader {leader} brought back with ISR {prev['isr'] or []} and ELR "
                f"{prev['elr'] or []} empty (KIP-966){rec}")
    if source == "outside_isr":
        return f", UNCLEAN election: {leader} was not in ISR {prev['isr']}" + (f" nor ELR {prev['elr']}" if prev["elr"] else "") + rec
    return ""


def _changes(prev: dict, new: dict) -> str:
    """", ISR a → b, ELR c → d, ..." for what changed besides the leader."""
    out = ""
    for key, label in (("isr", "ISR"), ("elr", "ELR"), ("last_known_elr", "last known ELR")):
        a, b = prev[key], new[key]
        if a != b and (key == "isr" or (a or []) != (b or [])):
            out += f", {label} {a if key == 'isr' else a or []} → {b if key == 'isr' else b or []}"
    return out


def _elr_text(s: dict) -> str:
    return "".join(f", {label} {s[k]}" for k, label in (("elr", "ELR"), ("last_known_elr", "last known ELR")) if s.get(k))


def _clear_elr(base: dict, state: dict) -> list[dict]:
    """ClearElrRecord on a topic's partitions: each with an ELR or last known ELR loses both and its
    partition epoch moves (``TopicDelta.maybeClearElr`` merges an empty-ELR PartitionChangeRecord)."""
    rows = []
    for p, prev in sorted(state.items()):
        if prev["elr"] or prev["last_known_elr"]:
            new = {**prev, "elr": [], "last_known_elr": []}
            if new["partition_epoch"] is not None:
                new["partition_epoch"] += 1
            state[p] = new
            rows.append(_event(base, p, new, "elr_change", "ELR cleared (ClearElrRecord: min.insync.replicas changed)" + _changes(prev, new),
                               prev=prev))
    return rows


# the replay of each record type metadata_events hands to ``_replay`` (PARTITION_TYPES and CLEAR_ELR)
_REPLAY = {
    "TOPIC_RECORD": _replay_topic,
    "PARTITION_RECORD": _replay_partition,
    "PARTITION_CHANGE_RECORD": _replay_partition_change,
    "REMOVE_TOPIC_RECORD": _replay_remove_topic,
    CLEAR_ELR: _replay_clear_elr,
}


def _event(base: dict, partition: int, state: dict, event: str, detail: str, *, prev: dict | None = None,
           election: str | None = None, clean: bool | None = None, elected_from: str | None = None) -> dict:
    """One METADATA_EVENTS row with every field set, whatever the record. Why one builder: the
    replay is an ``applyInPandas`` function, and a row built without a field (a topic deletion's had
    no election or previous state) leaves NaN in that column, which Arrow cannot write as a list:
    the whole analysis failed on one deleted topic."""
    return {**base, **_state_cols(state), "partition": partition, "event": event, "detail": detail,
            "election": election, "clean": clean, "elected_from": elected_from, **_prev_cols(prev)}


def _same(a: dict, b: dict) -> bool:
    """The same partition state; an ELR or last known ELR left out (a snapshot's PartitionRecord
    writes them only when not empty) is an empty one."""
    return (all(a.get(k) == b.get(k) for k in ("leader", "leader_epoch", "isr", "replicas"))
            and all((a.get(k) or []) == (b.get(k) or []) for k in ("elr", "last_known_elr")))


def _state_cols(s: dict) -> dict:
    return {k: s.get(k) for k in _STATE}


def _prev_cols(prev: dict | None) -> dict:
    if prev is None:
        return {"prev_leader": None, "prev_leader_epoch": None, "prev_isr": None}
    return {"prev_leader": prev.get("leader"), "prev_leader_epoch": prev.get("leader_epoch"), "prev_isr": prev.get("isr")}


def metadata_events(meta: DataFrame, clear_elr: bool | None = None) -> DataFrame:
    """Per-partition events of the metadata log (``METADATA_EVENTS``), in metadata order. A
    ClearElrRecord names a topic (or none: every topic), not a topic id: it is replayed in the
    group of every topic id, which applies it when the name is its own (a few records, in 4.x only).
    ``clear_elr``: whether ``meta`` holds one, when the caller knows (``clear_elr_in``); else asked here."""
    recs = _records(meta, PARTITION_TYPES, by_topic_id=True)
    if clear_elr is None:
        clear_elr = bool(meta.where((F.col("record_type") == CLEAR_ELR) & F.col("error").isNull()).select("offset").collect())
    if clear_elr:  # (a few, 4.x only)
        # (only then: the copies, the topic ids' distinct and the cross join are three Spark
        # stages, where asking whether there is any is one scan)
        recs = recs.unionByName(_records(meta, (CLEAR_ELR,)).drop("topic_id").crossJoin(recs.select("topic_id").distinct()))
    return recs.groupBy("topic_id").applyInPandas(gc_frozen(_replay), METADATA_EVENTS)


def clear_elr_in(records: list[dict]) -> bool:
    """Whether metadata_records rows (``record_type`` and ``error``, read without Spark by the
    caller: ``jobs.store.io.small_table`` filtered on ``CLEAR_ELR``) hold a readable ClearElrRecord."""
    return any(r["record_type"] == CLEAR_ELR and r["error"] is None for r in records)


BROKER_EVENTS = from_arrow_schema(BROKER_EVENTS_SCHEMA)  # its columns: jobs.store.tables


def broker_events(meta: DataFrame) -> DataFrame:
    """Registrations, fencing and controlled shutdowns, one row per metadata record."""
    recs = _records(meta, BROKER_TYPES).where(F.col("source") == "log")
    j = F.col("data_json")
    node = F.coalesce(F.get_json_object(j, "$.brokerId"), F.get_json_object(j, "$.id"), F.get_json_object(j, "$.controllerId")).cast("int")
    fenced = F.get_json_object(j, "$.fenced").cast("int")
    ics = F.get_json_object(j, "$.inControlledShutdown").cast("int")
    rt = F.col("record_type")
    event = (F.when(rt == "REGISTER_BROKER_RECORD", "registered")
             .when(rt == "UNREGISTER_BROKER_RECORD", "unregistered")
             .when(rt == "FENCE_BROKER_RECORD", "fenced")
             .when(rt == "UNFENCE_BROKER_RECORD", "unfenced")
             .when(rt == "REGISTER_CONTROLLER_RECORD", "controller_registered")
             .when(ics == 1, "controlled_shutdown")
             .when(fenced == 1, "fenced")
             .when(fenced == -1, "unfenced")
             .otherwise("registration_change"))
    detail = F.concat(F.lit("node "), node.cast("string"), F.lit(" "), event,
                      F.when((rt == "REGISTER_BROKER_RECORD") & (F.get_json_object(j, "$.fenced") == "true"), F.lit(" (fenced until it catches up)")).otherwise(F.lit("")))
    return recs.select(
        node.alias("node"), "meta_offset",
        F.when(F.col("timestamp_ms") >= 0, F.timestamp_millis("timestamp_ms")).alias("time"),
        event.alias("event"), detail.alias("detail"), "source", "nodes", "path", "batch_position",
    )


def broker_records(meta: DataFrame) -> DataFrame:
    """The metadata log's records ``broker_events`` reads (``BROKER_TYPES``, log segments only),
    one row per record and copy: a few per broker registration, fencing or shutdown, collected
    (``broker_event_rows``)."""
    m = meta.where(F.col("record_type").isin(*BROKER_TYPES) & F.col("error").isNull()
                   & ~F.coalesce(F.col("file_kind") != "segment", F.lit(False)))
    return m.select("broker", "path", "batch_position", "offset", "timestamp", "record_type", "data_json")


def _json_text(data, key: str) -> str | None:
    """``get_json_object(json, '$.key')`` of parsed JSON ``data``: a string as is, any other value as JSON text."""
    v = data.get(key) if isinstance(data, dict) else None
    if v is None or isinstance(v, str):
        return v
    return json.dumps(v, separators=(",", ":"))


def _as_int(text: str | None) -> int | None:
    """A JSON value's text as an int, None where Spark's cast to int has none."""
    try:
        i = int(text)
    except (TypeError, ValueError):
        return None
    return i if -2**31 <= i < 2**31 else None


def broker_event_rows(records: list) -> list[tuple]:
    """broker_events' rows (in ``broker_events``' columns) from the collected ``broker_records``:
    the copies of one record merged as ``_records`` merges them, each described as ``broker_events``
    describes it. Why on the driver: per event, and in Spark the merge was a shuffle and the table a
    write of its own, two Spark jobs for a few rows; the events are the same (``time`` in microseconds)."""
    groups: dict[tuple, list] = {}
    for r in records:
        groups.setdefault((r["offset"], r["record_type"], r["data_json"]), []).append(r)
    out = []
    for (offset, rt, text), rs in groups.items():
        ts = min((r["timestamp"] for r in rs if r["timestamp"] is not None), default=None)
        placed = [r for r in rs if r["path"] is not None]
        first = min(placed, key=lambda r: r["path"]) if placed else None
        try:
            data = json.loads(text) if text is not None else None
        except ValueError:
            data = None
        node = _as_int(next((v for v in (_json_text(data, k) for k in ("brokerId", "id", "controllerId")) if v is not None), None))
        fenced, ics = _as_int(_json_text(data, "fenced")), _as_int(_json_text(data, "inControlledShutdown"))
        event = {"REGISTER_BROKER_RECORD": "registered", "UNREGISTER_BROKER_RECORD": "unregistered", "FENCE_BROKER_RECORD": "fenced",
                 "UNFENCE_BROKER_RECORD": "unfenced", "REGISTER_CONTROLLER_RECORD": "controller_registered"}.get(rt)
        if event is None:
            event = ("controlled_shutdown" if ics == 1 else "fenced" if fenced == 1 else "unfenced" if fenced == -1
                     else "registration_change")
        note = " (fenced until it catches up)" if rt == "REGISTER_BROKER_RECORD" and _json_text(data, "fenced") == "true" else ""
        out.append((node, offset, ts * 1000 if ts is not None and ts >= 0 else None, event,
                    None if node is None else f"node {node} {event}{note}", "log", sorted({r["broker"] for r in rs if r["broker"] is not None}),
                    None if first is None else first["path"], None if first is None else first["batch_position"]))
    return out
