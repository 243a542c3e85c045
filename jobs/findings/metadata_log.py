"""The KRaft metadata log's copies: committed records a node holds that the quorum's leader does
not (``metadata_log_divergence``).

``jobs.replicas.metadata_log`` compares every node's ``__cluster_metadata-0`` with the leader's
log and replays Raft's fetch truncation on it. What Raft will truncate is normal after a
controller failover (an uncommitted tail: the timeline tells it, no finding). What it will
truncate although it had been committed (a snapshot past the cut, or a majority of the epoch's
voters holding it), and bytes that differ within one epoch, are metadata the quorum lost or
forked: one finding per range, naming every node that holds it and the leader's copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.replicas.metadata_log import CopyVerdict, EpochStart, MetadataLogComparison, RaftLogCopy
from jobs.replicas.replica_logs import METADATA_TOPIC

from .model import Evidence, Finding

if TYPE_CHECKING:
    from .case import Case

KIND = "metadata_log_divergence"
FINDING_KINDS = {KIND: "error"}


def _where(v: CopyVerdict, node: int) -> tuple[str | None, int | None]:
    for u in [*v.tail, *v.conflict]:
        for n, path, position in u.evidence:
            if n == node:
                return path, position
    return None, None


def _leader_story(cmp: MetadataLogComparison, ref: RaftLogCopy | None, offset: int) -> tuple[str, EpochStart | None]:
    """Which epoch of the leader's log holds ``offset`` instead, and its LeaderChangeMessage."""
    if ref is None:
        return "", None
    epochs = [e for e, s in ref.epochs if s <= offset]
    epoch = epochs[-1] if epochs else None
    start = next((s for s in cmp.starts if s.epoch == epoch), None)
    if epoch is None:
        return f"node {ref.node}'s copy, the leader's log, does not reach offset {offset}", None
    told = f"node {ref.node}'s copy, the leader's log, holds epoch {epoch} there"
    if start is not None:
        told += (f" (epoch {epoch} began at offset {start.offset}: node {start.leader} elected by voters "
                 f"{list(start.granting) or '?'} of {list(start.voters)})")
    return told, start


def divergence_findings(cmp: MetadataLogComparison) -> list[Finding]:
    """One finding per committed range some copies hold and the leader's lacks, and per range of
    same-epoch conflicting bytes (pure: plain dataclasses in, findings out)."""
    ref = next((c for c in cmp.copies if c.node == cmp.leader_copy), None)
    out: list[Finding] = []
    committed = sorted((v for v in cmp.verdicts if v.committed_end is not None), key=lambda v: (v.truncate_to, v.node))
    groups: list[list[CopyVerdict]] = []
    for v in committed:  # copies holding overlapping committed ranges make one finding
        if groups and v.truncate_to < max(g.committed_end for g in groups[-1]):
            groups[-1].append(v)
        else:
            groups.append([v])
    for g in groups:
        first, end = min(v.truncate_to for v in g), max(v.committed_end for v in g)
        runs = [u for v in g for u in v.tail if u.first_offset < end]
        holders = sorted({n for v in g for n in (v.node, *(h for u in v.tail if u.first_offset < end for h in u.holders))})
        told, start = _leader_story(cmp, ref, first)
        evidence = []
        for v in g:
            path, position = _where(v, v.node)
            held = ", ".join(f"{u.first_offset}-{u.last_offset} (epoch {u.epoch}, {u.records} records)" for u in v.tail if u.first_offset < end)
            evidence.append(Evidence(v.node, path, position, f"node {v.node} holds {held or 'no batch of them (only its snapshot)'}; "
                                                             f"committed: {'; '.join(v.committed_by)}; Raft truncates node {v.node} "
                                                             f"to {v.truncate_to} when it next fetches"))
        path, position = start.where(cmp.leader_copy) if start else (ref.path if ref else None, None)
        evidence.append(Evidence(cmp.leader_copy, path, position, told + "; its copy lacks them"))
        unique = {(u.first_offset, u.last_offset, u.epoch): u for u in runs}
        epochs = {u.epoch for u in runs} | ({start.epoch} if start else set())
        out.append(Finding(
            KIND, FINDING_KINDS[KIND], METADATA_TOPIC, 0, brokers=[*holders, cmp.leader_copy], first_offset=first, last_offset=end - 1,
            records=sum(u.records for u in unique.values()) or None, leader_epochs=sorted(epochs),
            first_timestamp=min((u.first_timestamp for u in runs if u.first_timestamp is not None), default=None),
            last_timestamp=max((u.last_timestamp for u in runs if u.last_timestamp is not None), default=None),
            evidence=evidence, salvage_brokers=holders,
            explanation=(f"Committed KRaft metadata lost: offsets {first}-{end - 1} of __cluster_metadata-0 had been committed "
                         f"(node {', node '.join(str(v.node) for v in g)}: {g[0].committed_by[0]}) but the leader's log (node "
                         f"{cmp.leader_copy}) holds other records there: a leader was elected without them (a voter that lost its log, "
                         "a replaced disk, votes as if empty while kraft.version is 0; KIP-853). When node "
                         f"{', node '.join(str(v.node) for v in g)} next fetch{'es' if len(g) == 1 else ''}, Raft truncates "
                         "them and the cluster forgets that metadata: copy their __cluster_metadata-0 first."),
        ))
    seen = set()
    for v in cmp.verdicts:
        for u in v.conflict:
            if u in seen:  # (every holder's verdict names the same run)
                continue
            seen.add(u)
            path, position = _where(v, v.node)
            out.append(Finding(
                KIND, FINDING_KINDS[KIND], METADATA_TOPIC, 0, brokers=[*u.holders, cmp.leader_copy], first_offset=u.first_offset, last_offset=u.last_offset,
                records=u.records or None, leader_epochs=[u.epoch], first_timestamp=u.first_timestamp, last_timestamp=u.last_timestamp,
                evidence=[Evidence(v.node, path, position, f"node {v.node}: {u.batches} batch(es) of epoch {u.epoch} at "
                                                           f"{u.first_offset}-{u.last_offset} that the leader's log holds with other bytes")],
                salvage_brokers=list(u.holders),
                explanation=(f"Two histories under one Raft epoch: nodes {list(u.holders)} hold offsets {u.first_offset}-{u.last_offset} of "
                             f"epoch {u.epoch} with other bytes than the leader's log (node {cmp.leader_copy}). One leader per epoch "
                             "writes once and followers copy its bytes, so this is two leaders in one epoch (a voter that lost its "
                             "quorum-state voted twice) or damage; no fetch repairs it."),
            ))
    return out


def find(case: Case) -> list[Finding]:
    return divergence_findings(case.metadata_log)
