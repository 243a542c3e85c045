"""The controller quorum's story, for the timeline of ``__cluster_metadata-0``: who led each Raft
epoch and who voted for it, when the voter set and ``kraft.version`` changed, and what each
node's copy of the metadata log holds that the leader's does not.

Sources, all control records of the metadata log (``KafkaRaftClient`` writes them, never the
controller's state machine): the ``LeaderChangeMessage`` a leader writes first in its epoch
(``LeaderState.appendStartOfEpochControlRecords``: its id, the voters, the voters that granted
it), KIP-853's ``VotersRecord`` (the whole voter set after an add, remove or update of a voter,
or the upgrade to ``kraft.version`` 1) and ``KRaftVersionRecord``; snapshots and
``bootstrap.checkpoint`` state them as of their end offset. Then the comparison of the copies
(``jobs.replicas.metadata_log``): a tail Raft will truncate is normal after a failover and is
told as such; a committed one is an error row, as its finding is.

Rows only, few: one per epoch, reconfiguration and diverged copy.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from jobs.replicas.metadata_log import CopyVerdict, MetadataLogComparison, UnmatchedRun
from jobs.replicas.replica_logs import METADATA_TOPIC


def _time(ms: int | None) -> datetime | None:
    return None if ms is None or ms < 0 else datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None)


def _row(event: str, detail: str, *, offset: int | None, ms: int | None = None, node: int | None = None, leader: int | None = None,
         epoch: int | None = None, severity: str | None = None, path: str | None = None, position: int | None = None) -> dict:
    return {"topic": METADATA_TOPIC, "partition": 0, "time": _time(ms), "source": "metadata", "node": node, "event": event,
            "leader": leader, "leader_epoch": epoch, "offset": offset, "isr": None, "election": None, "severity": severity,
            "detail": detail, "path": path, "position": position, "seq": offset}


def _voters_detail(data: dict, before: list[int] | None) -> str:
    ids = [v["voterId"] for v in data.get("voters", [])]
    change = ""
    if before is not None:
        added, removed = sorted(set(ids) - set(before)), sorted(set(before) - set(ids))
        change = "".join([f", +{added}" if added else "", f", -{removed}" if removed else ""]) or ", unchanged ids (an endpoint or directory updated)"
    return f"voter set (VotersRecord, KIP-853): {ids}{change}"


def quorum_rows(cmp: MetadataLogComparison) -> list[dict]:
    """The quorum's events (see the module doc) as TIMELINE rows of ``__cluster_metadata`` partition 0."""
    rows = []
    for s in cmp.starts:
        granted = f", granted by {list(s.granting)}" if s.granting else ""
        rows.append(_row("quorum_leader", f"Raft epoch {s.epoch}: node {s.leader} leads the controller quorum from offset {s.offset} "
                                          f"(voters {list(s.voters)}{granted}; LeaderChangeMessage held by nodes {list(s.nodes)})",
                         offset=s.offset, ms=s.timestamp, node=s.leader, leader=s.leader, epoch=s.epoch, path=s.path, position=s.position))
    seen: dict[tuple, dict] = {}
    for r in cmp.control_records:
        if r["record_type"] == "LEADER_CHANGE":
            continue
        snap = r["file_kind"] != "segment"
        offset = (r["snapshot_end_offset"] or 0) - 1 if snap else r["offset"]
        key = (offset, snap, r["record_type"], r["data_json"])
        got = seen.setdefault(key, {"r": r, "nodes": set()})
        got["nodes"].add(r["broker"])
    voters: list[int] | None = None
    for (offset, snap, rtype, _), g in sorted(seen.items(), key=lambda kv: (kv[0][0], not kv[0][1])):
        r, data = g["r"], json.loads(g["r"]["data_json"])
        where = f"{'snapshot' if snap else 'record'} held by nodes {sorted(g['nodes'])}"
        if rtype == "KRAFT_VERSION":
            detail = f"kraft.version {data.get('kRaftVersion')} (KRaftVersionRecord; {where})"
            event = "kraft_version"
        else:
            detail = f"{_voters_detail(data, voters)} ({where})"
            voters = [v["voterId"] for v in data.get("voters", [])]
            event = "quorum_voters"
        rows.append(_row(event, detail, offset=max(offset, 0), ms=r["timestamp"], path=r["path"], position=r["batch_position"]))
    for v in cmp.verdicts:
        rows += _verdict_rows(v)
    return rows


def _span(runs: list[UnmatchedRun]) -> str:
    return ", ".join(f"{u.first_offset}-{u.last_offset} (epoch {u.epoch})" for u in runs)


def _verdict_rows(v: CopyVerdict) -> list[dict]:
    rows = []
    if v.tail and v.committed_end is None:
        first = v.tail[0]
        where = next((w for w in first.evidence if w[0] == v.node), (v.node, None, None))
        rows.append(_row("uncommitted_tail", f"node {v.node} holds offsets {_span(v.tail)} that the leader's log (node {v.leader_copy}) does "
                                             f"not: never committed; Raft truncates them to {v.truncate_to} when node {v.node} next fetches "
                                             "(a controller failover leaves this; nothing is lost)",
                         offset=v.truncate_to, ms=first.first_timestamp, node=v.node, leader=v.leader_copy, epoch=first.epoch,
                         path=where[1], position=where[2]))
    if v.committed_end is not None:
        first = v.tail[0] if v.tail else None
        where = next((w for w in first.evidence if w[0] == v.node), (v.node, None, None)) if first else (v.node, None, None)
        rows.append(_row("committed_metadata_lost", f"node {v.node} holds committed offsets {v.truncate_to}-{v.committed_end - 1} "
                                                    f"({'; '.join(v.committed_by)}) that the leader's log (node {v.leader_copy}) does not",
                         offset=v.truncate_to, ms=first.first_timestamp if first else None, node=v.node, leader=v.leader_copy,
                         epoch=first.epoch if first else None, severity="error", path=where[1], position=where[2]))
    for u in v.conflict:
        where = next((w for w in u.evidence if w[0] == v.node), (v.node, None, None))
        rows.append(_row("metadata_log_conflict", f"node {v.node} holds other bytes than the leader's log (node {v.leader_copy}) at "
                                                  f"{u.first_offset}-{u.last_offset} in the same epoch {u.epoch}",
                         offset=u.first_offset, ms=u.first_timestamp, node=v.node, leader=v.leader_copy, epoch=u.epoch,
                         severity="error", path=where[1], position=where[2]))
    return rows
