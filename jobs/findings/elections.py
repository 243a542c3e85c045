"""Leader elections gone wrong: unclean ones and replicas disagreeing where an epoch starts.

``unclean_leader_election`` is not inferred from segments alone: a new epoch starting below another
replica's committed data looks the same after an unclean election and after a KAFKA-1211
truncation to a stale HW by a leader elected cleanly from the ISR. The KRaft metadata log
(PartitionChangeRecord, leaderRecoveryState) tells them apart: a leader outside the ISR
(leaderRecoveryState RECOVERING, or a leader in neither ISR nor ELR), or a logged unclean election
(controller log; ZooKeeper-era controllers log it too). A clean election after which a former
leader's unreplicated tail was truncated is *not* one: that is acks=1 loss.
"""

from __future__ import annotations

from collections import defaultdict

from .model import Evidence, Finding, ms

KINDS = {"unclean_leader_election": "error", "leader_epoch_conflict": "warning"}


def _epoch_starts(lineage: list) -> dict[tuple, int]:
    starts: dict[tuple, int] = {}
    for r in lineage:
        s = r["batch_start_offset"] if r["batch_start_offset"] is not None else r["checkpoint_start_offset"]
        if s is None:
            continue
        k = (r["topic"], r["partition"], r["leader_epoch"])
        starts[k] = min(starts.get(k, s), s)
    return starts


def unclean_election_findings(elections: list, log_unclean: list, lineage: list) -> list[Finding]:
    """``elections``: metadata_events rows with election = 'unclean'; ``log_unclean``: log_events
    rows with event = 'unclean_election' (topic resolved where possible)."""
    starts = _epoch_starts(lineage)
    out: list[Finding] = []
    covered: set[tuple] = set()
    by_part = defaultdict(list)
    for e in log_unclean:
        by_part[(e["topic"], e["partition"])].append(e)
    for e in elections:
        key = (e["topic"], e["partition"])
        start = starts.get((*key, e["leader_epoch"]))
        ev = [Evidence(min(e["nodes"] or [None], key=lambda x: (x is None, x)), e["path"], e["batch_position"],
                       f"__cluster_metadata offset {e['meta_offset']}: PartitionChangeRecord elected leader {e['leader']} "
                       f"(epoch {e['leader_epoch']}) while the ISR was {list(e['prev_isr'] or [])}"
                       + ("; leaderRecoveryState RECOVERING" if e["leader_recovery_state"] == 1 else ""))]
        t = ms(e["time"])
        for line in by_part.get(key, []):
            lt = ms(line["time"])
            # the same election: its epoch or new leader (log4j times are local, maybe not UTC);
            # time only when the line says neither
            same = (line["leader_epoch"] == e["leader_epoch"] if line["leader_epoch"] is not None
                    else line["leader"] == e["leader"] if line["leader"] is not None
                    else t is None or lt is None or abs(lt - t) < 60_000)
            if same:
                ev.append(Evidence(line["node"], line["path"], line["line_no"], f"line {line['line_no']}: {line['text'][:200]}"))
                covered.add((*key, line["path"], line["line_no"]))
        where = f" at offset {start}" if start is not None else ""
        out.append(Finding(
            kind="unclean_leader_election", topic=e["topic"], partition=e["partition"],
            brokers=[e["leader"], *(e["prev_isr"] or [])], first_offset=start, leader_epochs=[e["leader_epoch"]],
            first_timestamp=t, last_timestamp=t, evidence=ev,
            explanation=f"Broker {e['leader']} was elected leader of {e['topic']}-{e['partition']} from outside the ISR "
                        f"{list(e['prev_isr'] or [])} (unclean election, leader epoch {e['leader_epoch']}{where}): records the "
                        "previous leader had acknowledged beyond what this broker held are lost, and the old leader will "
                        "truncate to the new epoch when it returns.",
        ))
    for key, lines in by_part.items():
        for line in lines:
            if (*key, line["path"], line["line_no"]) in covered or key[0] is None:
                continue
            out.append(Finding(
                kind="unclean_leader_election", topic=key[0], partition=key[1], brokers=[line["leader"]],
                leader_epochs=[line["leader_epoch"]] if line["leader_epoch"] is not None else [],
                first_timestamp=ms(line["time"]), last_timestamp=ms(line["time"]),
                evidence=[Evidence(line["node"], line["path"], line["line_no"], f"line {line['line_no']}: {line['text'][:200]}")],
                explanation=f"The controller logged an unclean leader election for {key[0]}-{key[1]}"
                            + (f" (new leader {line['leader']})" if line["leader"] is not None else "") + ".",
            ))
    return out


def epoch_conflict_findings(lineage: list, rl: list) -> list[Finding]:
    """Replicas that hold records of an epoch but disagree where it starts (beyond their log start)."""
    reps = {(r["topic"], r["partition"], r["broker"]): r for r in rl}
    by = defaultdict(list)
    for row in lineage:
        if row["batch_start_offset"] is None:
            continue
        rep = reps.get((row["topic"], row["partition"], row["broker"]))
        if rep is None or row["batch_start_offset"] <= rep["log_start_offset"] or (rep["first_offset"] is not None and row["batch_start_offset"] <= rep["first_offset"]):
            continue  # the epoch's start may have been deleted by retention on this replica
        by[(row["topic"], row["partition"], row["leader_epoch"])].append(row)
    out = []
    for (topic, part, epoch), rows in by.items():
        starts = {row["batch_start_offset"] for row in rows}
        if len(starts) > 1:
            out.append(Finding(
                kind="leader_epoch_conflict", topic=topic, partition=part, brokers=[row["broker"] for row in rows],
                first_offset=min(starts), last_offset=max(starts) - 1, leader_epochs=[epoch],
                evidence=[Evidence(row["broker"], None, None, f"epoch {epoch} starts at {row['batch_start_offset']}") for row in rows],
                explanation=f"Replicas disagree on where leader epoch {epoch} of {topic}-{part} starts "
                            f"({sorted(starts)}): their logs were written by different leaders for the same epoch.",
            ))
    return out


def find(case) -> list[Finding]:
    h = case.history
    return (unclean_election_findings(h["elections"], h["log_unclean"], case.lineage)
            + epoch_conflict_findings(case.lineage, case.rl))
