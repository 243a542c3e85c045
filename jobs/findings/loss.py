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

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.replicas.ledger import ledger_lost_offsets, lost_acks, lost_ledger_rows, record_view
from jobs.replicas.offset_ranges import islands
from jobs.replicas.survivors import brokers_text, lost_on_every_candidate, surviving_log_text

from .divergence import divergences, producer_entries
from .kinds import ACKED_DATA_LOSS, CONSUMER_READ_LOST_DATA
from .model import Evidence, Finding

KINDS = {
    ACKED_DATA_LOSS: "error",
    # error when the group read past records no replica holds any more (``consumer_read_lost``)
    CONSUMER_READ_LOST_DATA: "warning",
}


def hw_lost_offsets(diffs: DataFrame, sv: DataFrame) -> DataFrame:
    """Offsets some replica checkpointed as committed (below its HW) that the surviving log lacks
    or holds with other content, with the holder's record details (record level, stays in Spark).
    ``sv``: ``jobs.replicas.survivors.survivors_frame``: one row per candidate it is lost on
    (``committed_loss`` keeps what every candidate lacks)."""
    d = diffs.join(sv, ["topic", "partition"])
    parts = []
    for other, me in (("a", "b"), ("b", "a")):
        # survivor is side `me`; the holder is side `other`
        sel = d.where(F.col(f"broker_{me}") == F.col("survivor")).where(F.col(other).isNotNull())
        sel = sel.where(
            (F.col("status") == "divergent") | ((F.col("status") == f"only_{other}") & ~F.col("s_compacted"))
        ).where(F.col("offset") >= F.col("s_log_start")).where(
            ~F.col(f"{other}.is_control") & ~F.coalesce(F.col(f"{other}.aborted"), F.lit(False))
        )
        parts.append(sel.select(
            "topic", "partition", "offset", "survivor", "s_candidates", "status",
            F.col(f"broker_{other}").alias("holder"), F.col(other).alias("rec"), F.lit("hw").alias("source"),
        ))
    return parts[0].unionByName(parts[1])


def committed_loss(lost: DataFrame, replica_logs: DataFrame) -> DataFrame:
    """Keep offsets below the holder's own HW checkpoint (those were committed) that every
    surviving-log candidate lacks."""
    hw = replica_logs.select("topic", "partition", F.col("broker").alias("holder"), F.col("hw_checkpoint").alias("holder_hw"))
    return lost_on_every_candidate(lost.join(hw, ["topic", "partition", "holder"]).where(F.col("offset") < F.col("holder_hw")))


def loss_ranges(lost: DataFrame) -> list:
    """Group lost offsets (one row per offset and holder) into ranges per partition."""
    per_offset = lost.groupBy("topic", "partition", "offset").agg(
        F.sort_array(F.collect_set("holder")).alias("holders"),
        F.max("rec.size").alias("size"),
        F.first("rec.epoch").alias("epoch"),
        F.first("rec.producer_id").alias("producer_id"),
        F.first("rec.producer_epoch").alias("producer_epoch"),
        F.first("rec.base_sequence").alias("seq"),
        F.first("rec.timestamp_ms").alias("ts"),
        F.first("rec.path").alias("path"),
        F.first("rec.position").alias("position"),
        F.max(F.col("status") == "divergent").alias("overwritten"),
        F.max("holder_hw").alias("holder_hw"),
        F.max("source").alias("source"),
    )
    g = islands(per_offset, ["topic", "partition"]).groupBy("topic", "partition", "_island").agg(
        F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"), F.count("*").alias("records"),
        F.sum("size").cast("long").alias("bytes"),
        F.array_distinct(F.flatten(F.collect_list("holders"))).alias("holders"),
        F.collect_set("epoch").alias("epochs"),
        F.collect_set(F.when(F.col("producer_id") >= 0, F.struct("producer_id", F.col("producer_epoch").cast("int").alias("producer_epoch")))).alias("pkeys"),
        F.min(F.when(F.col("producer_id") >= 0, F.col("seq"))).alias("min_seq"),
        F.max(F.when(F.col("producer_id") >= 0, F.col("seq"))).alias("max_seq"),
        F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"),
        F.min_by("path", "offset").alias("path"), F.min_by("position", "offset").alias("position"),
        F.max("overwritten").alias("overwritten"), F.max("holder_hw").alias("holder_hw"),
        F.collect_set("source").alias("sources"),
    )
    return g.collect()


def survivor_evidence(s: dict, detail: str) -> Evidence:
    """What the surviving log shows, on its broker; undetermined: on none, naming the candidates."""
    if s["broker"] is not None:
        return Evidence(s["broker"], None, None, f"surviving log ({s['why']}) {detail}")
    return Evidence(None, None, None, f"surviving log undetermined ({s['why']}); each of brokers "
                                      f"{brokers_text(c['broker'] for c in s['candidates'])} {detail}")


def loss_findings(ranges: list, surv: dict) -> list[Finding]:
    out = []
    for g in ranges:
        s = surv[(g["topic"], g["partition"])]
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
        ev.append(survivor_evidence(s, "holds other records" if g["overwritten"] else "lacks them"))
        out.append(Finding(
            kind="acked_data_loss", severity=KINDS["acked_data_loss"], topic=g["topic"], partition=g["partition"],
            brokers=[*(c["broker"] for c in s["candidates"]), *holders],
            first_offset=g["first_offset"], last_offset=g["last_offset"], records=g["records"], bytes=g["bytes"],
            leader_epochs=list(g["epochs"] or []),
            producers=producer_entries(g["pkeys"], g["min_seq"], g["max_seq"]),
            first_timestamp=g["first_ts"], last_timestamp=g["last_ts"], evidence=ev, salvage_brokers=holders,
            surviving_broker=s["broker"],
            explanation=f"{g['records']} committed records ({' and '.join(why)}) at offsets {g['first_offset']}-{g['last_offset']} "
                        f"of {g['topic']}-{g['partition']} are not in {surviving_log_text(s)}; {where}.",
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


def share_progress(starts: list, rl: list) -> list[dict]:
    """Share groups' progress (``views.share_starts`` rows) as rows shaped like commits
    (``committed_offset`` = the first offset not acknowledged: the start offset moved over the
    acknowledged batches after it, as SharePartition loads it; ``share`` True), on the topic that
    partition.metadata names by the record's topic id. A topic id no collected replica carries
    (a deleted topic, or one re-created under a new id) names nothing and is left out."""
    if not starts:
        return []
    names = {r["topic_id"]: r["topic"] for r in rl if r["topic_id"]}  # replica_logs: the id as a UUID string
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


def consumer_loss_findings(commits: list, rl: list, loss: list[Finding]) -> list[Finding]:
    """Committed consumer offsets (and share-partition start offsets) beyond every replica's log
    end. ``commits``: latest commit per (group, topic, partition) with path/offset evidence.
    Existing loss findings that cover the same offsets get the commit as evidence instead of a
    second count."""
    leo: dict[tuple, int] = {}
    for r in rl:
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
            kind="acked_data_loss", severity=KINDS["acked_data_loss"], topic=k[0], partition=k[1], brokers=[],
            first_offset=first, last_offset=last, records=last - first + 1, evidence=ev,
            explanation=f"Consumer group(s) {', '.join(sorted({c['group'] for c in cs}))} committed offsets up to {top} on "
                        f"{k[0]}-{k[1]} but no replica's log reaches beyond {first}: offsets {first}-{last} were read (so committed) "
                        "and are gone.",
        ))
    return out


def interval_union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive offset spans merged where they overlap or touch, in order."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _next_fetch(c: int, hit: list[Finding], leo: int | None, share: bool = False) -> str:
    """What the group's next fetch from ``c`` does against the surviving log (its LEO ``leo``).
    A share group past the end does not reset: the leader answers its share fetches
    OFFSET_OUT_OF_RANGE, ``SharePartition.updateCacheAndOffsets`` refuses to move the start offset
    back to the log start, and the fetch is retried (``ShareFetchUtils``) until the log reaches it."""
    if leo is not None and c > leo and share:
        return (f"Its share fetches, at {c}, are beyond the surviving log's end ({leo}): Kafka does not move a share-partition's "
                f"start offset back, so the records the surviving log writes at offsets {leo}-{c - 1} are never delivered to "
                "the group.")
    if leo is not None and c > leo:
        return (f"Its next fetch, at {c}, is beyond the surviving log's end ({leo}): OFFSET_OUT_OF_RANGE, and the group resets "
                "by its auto.offset.reset (earliest re-reads from the log start, latest skips what is written until then).")
    ends = [f.last_offset if f.kind == "replica_divergence" else min(f.last_offset, leo - 1) for f in hit
            if f.kind == "replica_divergence" or leo is not None]
    if ends and max(ends) >= c:
        return (f"From offset {c} on it silently reads other records than the ones that were at offsets {c}-{max(ends)}: "
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
    for cm in sorted(commits, key=lambda r: (r["topic"], r["partition"], r["group"])):
        key, c = (cm["topic"], cm["partition"]), cm["committed_offset"]
        hit = [f for f in by_part.get(key, []) if c is not None and c > f.first_offset]
        if not hit:
            continue
        spans = interval_union([(f.first_offset, min(f.last_offset, c - 1)) for f in hit])
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
        share = _is_share(cm)
        ev = [Evidence(cm["broker"], cm["path"], cm["batch_position"], progress_text(cm))]
        ev += [Evidence(None, None, None, f"{f.kind} at offsets {f.first_offset}-{f.last_offset}: {f.explanation}") for f in hit[:3]]
        out.append(Finding(
            kind="consumer_read_lost_data", severity="error" if gone else KINDS["consumer_read_lost_data"], topic=key[0], partition=key[1],
            brokers=[b for f in hit for b in f.brokers], first_offset=spans[0][0], last_offset=spans[-1][1],
            records=sum(hi - lo + 1 for lo, hi in spans), leader_epochs=[e for f in hit for e in f.leader_epochs],
            evidence=ev, salvage_brokers=salvage,
            surviving_broker=survivor,
            explanation=(f"Share group {cm['group']} acknowledged or archived every record of {key[0]}-{key[1]} below offset {c} "
                         f"(its share-partition start offset {cm['start_offset']}"
                         + (", and the acknowledged state batches after it" if c > cm["start_offset"] else "")
                         + f"): it consumed past offsets {read}, " if share else
                         f"Consumer group {cm['group']} committed offset {c} on {key[0]}-{key[1]}: it read past offsets {read}, ")
                        + f"{what}. {_next_fetch(c, hit, leo.get(key), share)}".rstrip(),
        ))
    return out


def _committed_ranges(case) -> list:
    if not case.survivors:
        return []
    # (replicas that agree batch for batch lose nothing to each other: no record-level diffs to read)
    parts = [] if case.replicas_agree else [committed_loss(hw_lost_offsets(case.diffs, case.survivors_df), case.replica_logs)]
    if case.ledger_records is not None:
        parts.append(ledger_lost_offsets(case.ledger_records, case.tables["records"], case.batches, case.survivors_df))
    if not parts:
        return []
    lost = parts[0] if len(parts) == 1 else parts[0].select(*parts[1].columns).unionByName(parts[1])
    return loss_ranges(lost)


def committed_ranges(case) -> list:
    """Lost committed offsets in ranges (HW evidence, and the ledger's when given), once per case:
    truncation reads them too."""
    return case.shared(_committed_ranges)


def _lost_acks(case) -> list:
    if not case.survivors or case.ledger_records is None:
        return []
    rv = record_view(case.tables["records"], case.batches)
    return lost_acks(lost_ledger_rows(case.ledger_records, rv, case.survivors_df))


def ledger_acks(case) -> list:
    """Lost ledger records per partition and acks setting, with their acknowledgement times (a few rows)."""
    return case.shared(_lost_acks)


def _hw_loss(case) -> list[Finding]:
    return loss_findings(committed_ranges(case), case.survivors)


def hw_loss(case) -> list[Finding]:
    """The acked_data_loss findings of the surviving logs, once per case (truncation weighs them)."""
    return case.shared(_hw_loss)


def find(case) -> list[Finding]:
    loss = hw_loss(case)
    h = case.history
    complete = [r for r in case.rl if (r["topic"], r["partition"]) in h["complete"]]
    progress = list(h["commits"]) + share_progress(h.get("share_starts", []), case.rl)
    loss = loss + consumer_loss_findings(progress, complete, loss)
    by_key = {(r["topic"], r["partition"], r["broker"]): r["leo"] for r in case.rl}
    leo = {k: None if s["broker"] is None else by_key.get((*k, s["broker"])) for k, s in case.survivors.items()}
    return loss + consumer_read_lost(progress, loss + divergences(case), leo)
