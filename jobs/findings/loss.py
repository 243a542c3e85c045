"""Committed data the cluster lost: offsets below a replica's checkpointed HW, or acknowledged in the
producer ledger, that the surviving log lacks; and consumer commits beyond every replica's log end
(consumers only read below the HW, so those offsets were committed data that is gone); and the
consumer groups whose latest commit lies inside or beyond a lost or divergent range
(``consumer_read_lost``): they processed records the cluster no longer has, or will read others at
the same offsets.

The surviving log is the current leader's replica, decided by evidence (``jobs.replicas.survivors``):
whatever it lacks is lost to the cluster even if another replica still has it on disk (that
replica is where it can be salvaged). When the evidence cannot single it out (undetermined), only
what every candidate lacks is lost, and the finding's ``surviving_broker`` is null.
"""

from __future__ import annotations

import base64
import uuid
from collections import defaultdict
from typing import TYPE_CHECKING

from pyspark.sql import Row

from jobs.replicas.survivors import Survivor, brokers_text, surviving_log_text

from .committed import committed_ranges
from .divergence import divergences
from .evidence import producer_entries, survivor_evidence
from .kinds import ACKED_DATA_LOSS, CONSUMER_READ_LOST_DATA
from .model import Evidence, Finding
from .ranges import interval_union

if TYPE_CHECKING:
    from .case import Case

FINDING_KINDS = {
    ACKED_DATA_LOSS: "error",
    # error when the group read past records no replica holds any more (``consumer_read_lost``)
    CONSUMER_READ_LOST_DATA: "warning",
}


def loss_findings(ranges: list[Row], survivors: dict[tuple[str, int], Survivor]) -> list[Finding]:
    """One ``acked_data_loss`` per range of committed offsets the surviving log lacks (``ranges``:
    ``committed.committed_ranges``), the replicas still holding it named for salvage."""
    out = []
    for g in ranges:
        survivor = survivors[(g["topic"], g["partition"])]
        holders = [h for h in (g["holders"] or []) if h is not None]
        sources = set(g["sources"] or [])
        why = []
        if "hw" in sources:
            why.append(f"below a checkpointed high watermark ({g['holder_hw']})")
        if "ledger" in sources:
            why.append("acknowledged in the producer ledger")
        where = (f"still held by broker {', '.join(map(str, holders))} (salvageable; it will truncate them when it follows the leader)"
                 if holders else "held by no replica")
        ev = [Evidence(h, g["path"], g["position"], "holds the committed copy") for h in holders[:3]]
        ev.append(survivor_evidence(survivor, "holds other records" if g["overwritten"] else "lacks them"))
        out.append(Finding(
            kind="acked_data_loss", severity=FINDING_KINDS["acked_data_loss"], topic=g["topic"], partition=g["partition"],
            brokers=[*(c["broker"] for c in survivor.candidates), *holders],
            first_offset=g["first_offset"], last_offset=g["last_offset"], records=g["records"], bytes=g["bytes"],
            leader_epochs=list(g["epochs"] or []),
            producers=producer_entries(g["pkeys"], g["min_seq"], g["max_seq"]),
            first_timestamp=g["first_ts"], last_timestamp=g["last_ts"], evidence=ev, salvage_brokers=holders,
            surviving_broker=survivor.broker,
            explanation=f"{g['records']} committed records ({' and '.join(why)}) at offsets {g['first_offset']}-{g['last_offset']} "
                        f"of {g['topic']}-{g['partition']} are not in {surviving_log_text(survivor)}; {where}.",
        ))
    return out


def progress_text(c) -> str:
    """The evidence line of a group's progress: its commit, or its share-partition start offset."""
    if _is_share(c):
        acked = f", acknowledged or archived up to {c['committed_offset'] - 1}" if c["committed_offset"] > c["start_offset"] else ""
        return f"__share_group_state: share group {c['group']} start offset {c['start_offset']}{acked}"
    return f"__consumer_offsets: group {c['group']} committed offset {c['committed_offset']}"


def _is_share(c) -> bool:
    return isinstance(c, dict) and bool(c.get("share"))


def share_progress(starts: list[dict], replicas: list[Row]) -> list[dict]:
    """Share groups' progress (``views.share_starts`` rows) as rows shaped like commits
    (``committed_offset`` = the first offset not acknowledged: the start offset moved over the
    acknowledged batches after it, as SharePartition loads it; ``share`` True), on the topic that
    partition.metadata names by the record's topic id. A topic id no collected replica carries
    (a deleted topic, or one re-created under a new id) names nothing and is left out."""
    if not starts:
        return []
    names = {r["topic_id"]: r["topic"] for r in replicas if r["topic_id"]}  # replica_logs: the id as a UUID string
    out = []
    for s in starts:
        topic = names.get(_uuid_text(s["topic_id"]))
        if topic is not None:
            out.append({"group": s["group"], "topic": topic, "partition": s["partition"], "committed_offset": s["acknowledged_to"],
                        "start_offset": s["start_offset"], "broker": s["broker"], "path": s["path"],
                        "batch_position": s["batch_position"], "share": True})
    return out


def _uuid_text(topic_id: str) -> str | None:
    """Kafka's ``Uuid.toString()`` (base64url, as coordinator records are decoded) as the UUID
    string ``replica_logs`` carries; None when it is not 16 bytes."""
    try:
        raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    except (ValueError, TypeError):
        return None
    return str(uuid.UUID(bytes=raw)) if len(raw) == 16 else None


def consumer_loss_findings(commits: list, replicas: list[Row], loss: list[Finding]) -> list[Finding]:
    """Committed consumer offsets (and share-partition start offsets) beyond every replica's log
    end. ``commits``: latest commit per (group, topic, partition) with path/offset evidence;
    ``replicas``: replica_logs rows of the partitions whose every assigned replica was collected.
    Existing loss findings that cover the same offsets get the commit as evidence instead of a
    second count."""
    leo: dict[tuple, int] = {}
    for r in replicas:
        if r["dir_state"] == "live" and r["leo"] is not None:
            k = (r["topic"], r["partition"])
            leo[k] = max(leo.get(k, r["leo"]), r["leo"])
    out = []
    by = defaultdict(list)
    for c in commits:
        k = (c["topic"], c["partition"])
        if k in leo and c["committed_offset"] is not None and c["committed_offset"] > leo[k]:
            by[k].append(c)
    for k, cs in by.items():
        top = max(c["committed_offset"] for c in cs)
        first, last = leo[k], top - 1
        ev = [Evidence(c["broker"], c["path"], c["batch_position"], progress_text(c)) for c in cs[:5]]
        hit = [f for f in loss if f.topic == k[0] and f.partition == k[1] and f.first_offset is not None
               and f.first_offset <= last and f.last_offset >= first]
        if hit:
            hit[0].evidence.extend(ev)
            continue
        out.append(Finding(
            kind="acked_data_loss", severity=FINDING_KINDS["acked_data_loss"], topic=k[0], partition=k[1], brokers=[],
            first_offset=first, last_offset=last, records=last - first + 1, evidence=ev,
            explanation=f"Consumer group(s) {', '.join(sorted({c['group'] for c in cs}))} committed offsets up to {top} on "
                        f"{k[0]}-{k[1]} but no replica's log reaches beyond {first}: offsets {first}-{last} were read (so committed) "
                        "and are gone.",
        ))
    return out


def _next_fetch(committed: int, hit: list[Finding], leo: int | None, share: bool = False) -> str:
    """What the group's next fetch from ``committed`` (its committed offset) does against the
    surviving log (its LEO ``leo``). A share group past the end does not reset: the leader answers its share fetches
    OFFSET_OUT_OF_RANGE, ``SharePartition.updateCacheAndOffsets`` refuses to move the start offset
    back to the log start, and the fetch is retried (``ShareFetchUtils``) until the log reaches it."""
    if leo is not None and committed > leo and share:
        return (f"Its share fetches, at {committed}, are beyond the surviving log's end ({leo}): Kafka does not move a share-partition's "
                f"start offset back, so the records the surviving log writes at offsets {leo}-{committed - 1} are never delivered to "
                "the group.")
    if leo is not None and committed > leo:
        return (f"Its next fetch, at {committed}, is beyond the surviving log's end ({leo}): OFFSET_OUT_OF_RANGE, and the group resets "
                "by its auto.offset.reset (earliest re-reads from the log start, latest skips what is written until then).")
    ends = [f.last_offset if f.kind == "replica_divergence" else min(f.last_offset, leo - 1) for f in hit
            if f.kind == "replica_divergence" or leo is not None]
    if ends and max(ends) >= committed:
        return (f"From offset {committed} on it silently reads other records than the ones that were at offsets {committed}-{max(ends)}: "
                "the surviving log re-used those offsets.")
    if leo is not None and any(leo > f.first_offset for f in hit):
        return "It will never read the records the surviving log now holds at the offsets it committed past."
    return ""


def consumer_read_lost(commits: list, ranges: list[Finding], leo: dict[tuple[str, int], int | None]) -> list[Finding]:
    """One ``consumer_read_lost_data`` per group and partition whose latest commit (``commits``: rows of
    ``views.collect``, and ``share_progress`` rows: a share group's start offset, below which every
    record was acknowledged or archived) lies past the first offset of a lost (``acked_data_loss``)
    or divergent (``replica_divergence``) range of ``ranges``: it has read records there. ``leo``:
    the surviving log's LEO per partition (None when undetermined). Error when some of those records
    are held by no replica any more (a loss range with no salvage broker), else warning. A commit at
    or below a range's first offset (a group behind, or on a healthy partition) is nothing."""
    by_part: dict[tuple, list[Finding]] = defaultdict(list)
    for f in ranges:
        if f.kind in ("acked_data_loss", "replica_divergence") and f.first_offset is not None and f.last_offset is not None:
            by_part[(f.topic, f.partition)].append(f)
    out = []
    for commit in sorted(commits, key=lambda r: (r["topic"], r["partition"], r["group"])):
        key, committed = (commit["topic"], commit["partition"]), commit["committed_offset"]
        hit = [f for f in by_part.get(key, []) if committed is not None and committed > f.first_offset]
        if not hit:
            continue
        spans = interval_union([(f.first_offset, min(f.last_offset, committed - 1)) for f in hit])
        gone = [f for f in hit if f.kind == "acked_data_loss" and not f.salvage_brokers]
        salvage = sorted({b for f in hit for b in f.salvage_brokers})
        lost_salvage = sorted({b for f in hit if f.kind == "acked_data_loss" for b in f.salvage_brokers})
        survivor = next((f.surviving_broker for f in hit if f.surviving_broker is not None), None)
        what = ("records no replica holds any more" if gone else
                f"records the surviving log lacks, still held by broker {brokers_text(lost_salvage)} (salvageable)" if lost_salvage else
                f"offsets where replicas {brokers_text({b for f in hit for b in f.brokers})} hold different records "
                "(it read whichever the broker it fetched from held" + (
                    f"; the surviving log is broker {survivor}'s, broker {brokers_text(salvage)}'s are salvageable)"
                    if salvage and survivor is not None else ")"))
        read = ", ".join(f"{lo}-{hi}" for lo, hi in spans)
        share = _is_share(commit)
        ev = [Evidence(commit["broker"], commit["path"], commit["batch_position"], progress_text(commit))]
        ev += [Evidence(None, None, None, f"{f.kind} at offsets {f.first_offset}-{f.last_offset}: {f.explanation}") for f in hit[:3]]
        out.append(Finding(
            kind="consumer_read_lost_data", severity="error" if gone else FINDING_KINDS["consumer_read_lost_data"], topic=key[0], partition=key[1],
            brokers=[b for f in hit for b in f.brokers], first_offset=spans[0][0], last_offset=spans[-1][1],
            records=sum(hi - lo + 1 for lo, hi in spans), leader_epochs=[e for f in hit for e in f.leader_epochs],
            evidence=ev, salvage_brokers=salvage,
            surviving_broker=survivor,
            explanation=(f"Share group {commit['group']} acknowledged or archived every record of {key[0]}-{key[1]} below offset {committed} "
                         f"(its share-partition start offset {commit['start_offset']}"
                         + (", and the acknowledged state batches after it" if committed > commit["start_offset"] else "")
                         + f"): it consumed past offsets {read}, " if share else
                         f"Consumer group {commit['group']} committed offset {committed} on {key[0]}-{key[1]}: it read past offsets {read}, ")
                        + f"{what}. {_next_fetch(committed, hit, leo.get(key), share)}".rstrip(),
        ))
    return out


def _hw_loss(case: Case) -> list[Finding]:
    return loss_findings(committed_ranges(case), case.survivors)


def hw_loss(case: Case) -> list[Finding]:
    """The acked_data_loss findings of the surviving logs, once per case (truncation weighs them)."""
    return case.shared(_hw_loss)


def find(case: Case) -> list[Finding]:
    loss = hw_loss(case)
    history = case.history
    complete = [r for r in case.replicas if (r["topic"], r["partition"]) in history.complete]
    progress = list(history.commits) + share_progress(history.share_starts, case.replicas)
    loss = loss + consumer_loss_findings(progress, complete, loss)
    leo_of = {(r["topic"], r["partition"], r["broker"]): r["leo"] for r in case.replicas}
    leo = {key: None if survivor.broker is None else leo_of.get((*key, survivor.broker)) for key, survivor in case.survivors.items()}
    return loss + consumer_read_lost(progress, loss + divergences(case), leo)
