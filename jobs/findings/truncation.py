"""Truncation below a high watermark: a replica lacking offsets below a HW (its own checkpoint, or
another replica's when it is the surviving log); a broker that logged a truncation below a HW it
had logged earlier (state-change lines, or loaded at start-up; a log loaded later, after a clean
truncation, logs its new HW and resets the comparison); with a ledger and the metadata log, a
leader that acknowledged records while its high watermark covered them (acks=all, or it was alone
in the ISR) and no longer holds them; or, pending, a replica that has not rejoined yet and will
truncate below its own HW checkpoint when it follows the surviving log (the restart preview's rule:
its HW above the start of the surviving log's next epoch, as after an unclean election). A follower
lagging behind is none of these: a clean leader's epoch starts at or above every ISR member's HW.

One truncation is one finding: what the rules say of the same replica's truncation of the same
offsets (the ledger and its server.log line after it rejoined; the surviving log lacking what it
holds, and its pending cut) is merged, with every piece of evidence (``merged``).

A truncation below the HW is the mechanism (warning); the records it lost are ``acked_data_loss``.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import TYPE_CHECKING

from pyspark.sql import Row

from jobs.replicas import restart_preview
from jobs.replicas.survivors import Survivor, surviving_log_text

from .committed import committed_ranges, ledger_acks
from .evidence import survivor_evidence
from .kinds import TRUNCATION_BELOW_HW
from .loss import hw_loss
from .model import Evidence, Finding, ms

if TYPE_CHECKING:
    from .case import Case

FINDING_KINDS = {TRUNCATION_BELOW_HW: "warning"}


def truncation_findings(replicas: list[Row], survivors: dict[tuple[str, int], Survivor], hw_ranges: list[Row]) -> list[Finding]:
    """A replica lacking offsets below a high watermark: its own (HW checkpoint > LEO), or another
    replica's when it is the surviving log (what it lacks is gone for everyone; ``hw_ranges``:
    ``committed.committed_ranges``)."""
    out = []
    for r in replicas:
        if r["dir_state"] == "live" and r["hw_checkpoint"] is not None and r["segments"] and r["hw_checkpoint"] > r["leo"]:
            out.append(Finding(
                kind="truncation_below_hw", severity=FINDING_KINDS["truncation_below_hw"], topic=r["topic"], partition=r["partition"], brokers=[r["broker"]],
                first_offset=r["leo"], last_offset=r["hw_checkpoint"] - 1, records=r["hw_checkpoint"] - r["leo"],
                evidence=[Evidence(r["broker"], r["log_dir"], None,
                                   f"replication-offset-checkpoint HW {r['hw_checkpoint']} > LEO {r['leo']}")],
                explanation=f"Broker {r['broker']} checkpointed a high watermark of {r['hw_checkpoint']} for {r['topic']}-{r['partition']} "
                            f"but its log ends at {r['leo']}: it lost committed offsets (truncation or lost writes).",
            ))
    for g in hw_ranges:
        if "hw" not in set(g["sources"] or []) or g["overwritten"]:
            continue
        survivor = survivors[(g["topic"], g["partition"])]
        holders = [h for h in (g["holders"] or []) if h is not None]
        out.append(Finding(
            kind="truncation_below_hw", severity=FINDING_KINDS["truncation_below_hw"], topic=g["topic"], partition=g["partition"],
            brokers=[*(c["broker"] for c in survivor.candidates), *holders],
            first_offset=g["first_offset"], last_offset=g["last_offset"], records=g["records"],
            leader_epochs=list(g["epochs"] or []), surviving_broker=survivor.broker,
            evidence=[survivor_evidence(survivor, f"ends below HW {g['holder_hw']} checkpointed by broker {', '.join(map(str, holders))}")],
            explanation=f"In {g['topic']}-{g['partition']}, {surviving_log_text(survivor)} lacks offsets "
                        f"{g['first_offset']}-{g['last_offset']}, below the high watermark another replica checkpointed: "
                        "the other replicas will truncate them away.",
        ))
    return out


def logged_truncation_findings(log_rows: list[Row]) -> list[Finding]:
    """A truncation below a HW the same broker logged earlier for the partition. ``log_rows``:
    log_events of one kind or another with topic, partition, node, time, line_no, event, offset, hw."""
    seq = defaultdict(list)
    for r in log_rows:
        seq[(r["node"], r["topic"], r["partition"])].append(r)
    out = []
    for (node, topic, part), rows in seq.items():
        rows.sort(key=lambda r: (r["time"] is None, r["time"] or datetime.min, r["path"], r["line_no"]))
        hw = hw_row = None
        for r in rows:
            if r["event"] == "startup":
                continue
            if r["hw"] is not None and r["event"] != "truncation":
                hw, hw_row = r["hw"], r
            if r["event"] == "truncation" and r["offset"] is not None and hw is not None and r["offset"] < hw:
                out.append(Finding(
                    kind="truncation_below_hw", severity=FINDING_KINDS["truncation_below_hw"], topic=topic, partition=part, brokers=[node],
                    first_offset=r["offset"], last_offset=hw - 1, records=hw - r["offset"],
                    leader_epochs=[r["leader_epoch"]] if r["leader_epoch"] is not None else [],
                    first_timestamp=ms(r["time"]), last_timestamp=ms(r["time"]),
                    evidence=[Evidence(node, r["path"], r["line_no"], f"line {r['line_no']}: {r['text'][:200]}"),
                              Evidence(node, hw_row["path"], hw_row["line_no"], f"line {hw_row['line_no']}: high watermark {hw}")],
                    explanation=f"Broker {node} truncated {topic}-{part} to offset {r['offset']}, below the high watermark {hw} "
                                "it had logged: committed records were removed from this replica.",
                ))
                hw = r["offset"]
    return out


def ledger_truncation_findings(acks: list[Row], events: list[Row], replicas: list[Row], loss: list[Finding]) -> list[Finding]:
    """With a ledger and the metadata log: records acknowledged by a leader whose high watermark
    already covered them (acks=all, or the leader alone in the ISR), lost from that leader's own
    log, prove the leader truncated below its HW (the server log line may be gone with a restart).

    ``acks``: per (topic, partition) lost ledger offsets grouped by (acks) with min/max offset and
    ack times; ``events``: metadata_events rows (leader_change / partition_created / isr_change);
    ``replicas``: replica_logs rows; ``loss``: acked_data_loss findings (what is lost for the cluster)."""
    hist = defaultdict(list)
    for e in events:
        if e["time"] is not None and e["source"] == "log":
            hist[(e["topic"], e["partition"])].append(e)
    for v in hist.values():
        v.sort(key=lambda e: e["meta_offset"])
    have = {(r["topic"], r["partition"], r["broker"]) for r in replicas if r["dir_state"] == "live"}
    out = []
    for a in acks:
        key = (a["topic"], a["partition"])
        ev = hist.get(key)
        if not ev or a["first_ack"] is None:
            continue
        t0, t1 = a["first_ack"], a["last_ack"]
        before = [e for e in ev if e["time"] <= t0]
        during = [e for e in ev if t0 < e["time"] <= t1]
        if not before:
            continue
        state = before[-1]
        leader, isr = state["leader"], list(state["isr"] or [])
        if leader is None or leader < 0 or (a["acks"] not in ("all", "-1") and isr != [leader]):
            continue
        if any(e["leader"] != leader or list(e["isr"] or []) != isr for e in during):
            continue
        if key + (leader,) not in have:
            continue
        lost_here = [f for f in loss if f.topic == key[0] and f.partition == key[1] and leader not in f.salvage_brokers
                     and f.first_offset is not None and f.first_offset <= a["last_offset"] and f.last_offset >= a["first_offset"]]
        if not lost_here:
            continue
        first = max(a["first_offset"], min(f.first_offset for f in lost_here))
        last = min(a["last_offset"], max(f.last_offset for f in lost_here))
        out.append(Finding(
            kind="truncation_below_hw", severity=FINDING_KINDS["truncation_below_hw"], topic=key[0], partition=key[1], brokers=[leader],
            first_offset=first, last_offset=last, records=last - first + 1, leader_epochs=[state["leader_epoch"]],
            first_timestamp=ms(t0), last_timestamp=ms(t1),
            evidence=[Evidence(None, state["path"], state["batch_position"],
                               f"__cluster_metadata offset {state['meta_offset']}: leader {leader} (epoch {state['leader_epoch']}), ISR {isr} "
                               f"when offsets {a['first_offset']}-{a['last_offset']} were acknowledged (acks={a['acks']})"),
                      Evidence(leader, None, None, f"broker {leader}'s log no longer holds offsets {first}-{last}")],
            explanation=f"Broker {leader} led {key[0]}-{key[1]} with ISR {isr} when it acknowledged offsets {first}-{last}, so its "
                        f"high watermark covered them (at least {last + 1}); its log no longer holds them: it truncated below "
                        "its high watermark (after an unclean election elsewhere).",
        ))
    return out


def pending_truncation_findings(planned: list[dict], replicas: list[Row]) -> list[Finding]:
    """The truncations a restart would do below the replica's own HW checkpoint (``planned``:
    ``restart_preview.preview`` rows): the replica has not rejoined yet, and when it follows the
    surviving log it cuts committed offsets ``truncate_to``..HW-1 (pending)."""
    live = {(r["topic"], r["partition"], r["broker"]): r for r in replicas if r["dir_state"] == "live"}
    out = []
    for row in planned:
        r = live.get((row["topic"], row["partition"], row["broker"]))
        if r is None or r["hw_checkpoint"] is None or row["truncate_to"] >= min(r["hw_checkpoint"], row["leo"]):
            continue
        hw, cut = r["hw_checkpoint"], row["truncate_to"]
        lead = live.get((row["topic"], row["partition"], row["leader"]))
        ev = [Evidence(r["broker"], f"{r['log_dir']}/replication-offset-checkpoint", None,
                       f"high watermark {hw} checkpointed for {row['topic']}-{row['partition']}; log end {row['leo']}")]
        if lead is not None:
            ev.append(Evidence(lead["broker"], f"{lead['log_dir']}/{row['topic']}-{row['partition']}/leader-epoch-checkpoint", None,
                               f"the surviving log's epochs answer the follower's OffsetsForLeaderEpoch {row['epochs_asked']} "
                               f"with {cut} (rule {row['rule']})"))
        out.append(Finding(
            kind="truncation_below_hw", severity=FINDING_KINDS["truncation_below_hw"], topic=row["topic"], partition=row["partition"],
            brokers=[r["broker"]],
            first_offset=cut, last_offset=hw - 1, records=hw - cut, leader_epochs=list(row["epochs_asked"] or []), evidence=ev,
            explanation=f"Pending: broker {r['broker']} has not rejoined {row['topic']}-{row['partition']} since the surviving log "
                        f"(broker {row['leader']}) moved on; when it follows it, it truncates from {row['leo']} to {cut} (rule "
                        f"{row['rule']}, as the restart preview says), below the high watermark {hw} it checkpointed: committed "
                        f"offsets {cut}-{hw - 1} leave this replica.",
        ))
    return out


def merged(found: list[tuple[Finding, set]]) -> list[Finding]:
    """One finding per truncation: ``found`` pairs each truncation finding with the brokers that
    truncate (or will) in it; findings of one partition that share such a broker and whose offsets
    overlap or touch are one truncation, told by several rules: merged into the first (the rules
    that saw it happen come first), with every broker, offset, epoch and piece of evidence."""
    out: list[tuple[Finding, set]] = []
    for f, who in found:
        same = next((g for g in out if (g[0].topic, g[0].partition) == (f.topic, f.partition) and g[1] & who
                     and g[0].first_offset is not None and f.first_offset is not None
                     and f.first_offset <= g[0].last_offset + 1 and g[0].first_offset <= f.last_offset + 1), None)
        if same is None:
            out.append((f, set(who)))
            continue
        g, gwho = same
        gwho |= who
        g.brokers = sorted({*g.brokers, *f.brokers})
        g.first_offset, g.last_offset = min(g.first_offset, f.first_offset), max(g.last_offset, f.last_offset)
        g.records = g.last_offset - g.first_offset + 1
        g.leader_epochs = sorted({*g.leader_epochs, *f.leader_epochs})
        times = [t for t in (g.first_timestamp, f.first_timestamp) if t is not None]
        g.first_timestamp = min(times, default=None)
        times = [t for t in (g.last_timestamp, f.last_timestamp) if t is not None]
        g.last_timestamp = max(times, default=None)
        g.evidence += [e for e in f.evidence if e not in g.evidence]
        g.surviving_broker = g.surviving_broker if g.surviving_broker is not None else f.surviving_broker
        if f.explanation not in g.explanation:
            g.explanation += " " + f.explanation
    return [f for f, _ in out]


def find(case: Case) -> list[Finding]:
    history = case.history
    found: list[tuple[Finding, set]] = []
    acks = ledger_acks(case)
    if acks and history.events:
        found += [(f, set(f.brokers)) for f in ledger_truncation_findings(acks, history.events, case.replicas, hw_loss(case))]
    found += [(f, set(f.brokers)) for f in logged_truncation_findings(history.log_rows)]
    ranges = committed_ranges(case)
    for f in truncation_findings(case.replicas, case.survivors, ranges):
        # a replica lacking offsets below its own HW truncated them; below another's, the holders will
        holders = {b for g in ranges for b in (g["holders"] or []) if b is not None
                   and (g["topic"], g["partition"], g["first_offset"], g["last_offset"]) == (f.topic, f.partition, f.first_offset, f.last_offset)}
        found.append((f, holders or set(f.brokers)))
    found += [(f, set(f.brokers)) for f in pending_truncation_findings(restart_preview.planned(case), case.replicas)]
    return merged(found)
