"""Leader elections gone wrong: unclean ones, committed data a crash took from the next leader, and
replicas disagreeing where an epoch starts.

Who decides whether an election was unclean, per election (topic, partition, leader epoch), in this
order:

1. The KRaft metadata log: the ``PartitionChangeRecord`` that elected the leader (``metadata_events``,
   replayed as ``PartitionRegistration.merge`` does): ``leaderRecoveryState`` RECOVERING, which the
   controller sets exactly for an unclean election since metadata.version 3.2 (KIP-704), or a leader
   in neither the ISR nor the ELR it was elected from (older metadata versions). A leader from the
   ISR, from the ELR (KIP-966) or joining the ISR in the record completing a reassignment is clean.
2. A line that states the partition's state for that election: the ZooKeeper-mode controller's
   ``Changed partition T-P from OfflinePartition to OnlinePartition with state LeaderAndIsr(...,
   leaderRecoveryState=RECOVERING, ...)`` (3.2+), and the new leader's ``The topic partition T-P was
   marked as RECOVERING`` (``Partition.makeLeader``, tied to the epoch it starts next). Only an
   unclean election sets RECOVERING, so these decide "unclean" (``evidence_basis`` "broker_log").
3. The files (below), for every election neither of those records. A log that only names the
   leader of an epoch (``Leader T-P starts at leader epoch E``) does not decide it.

A controller's sentence is corroboration, never the sole evidence: 3.0-3.9's ``UNCLEAN partition
change for T-P`` means only that the new leader was not in the *previous* ISR, which a clean
reassignment also logs (the new leader joins the ISR in the same record); 3.6+'s ``Setting new leader
... using an unclean election``, 0.8-1.0's ``No broker in ISR is alive ... There's potential data
loss`` and 3.9+'s ``Triggering unclean leader election`` are added as evidence to the finding of the
same election (same epoch, else same new leader, else within a minute), whatever decided it.

The files decide when the logs carry leader epochs (message format v2, KIP-101): a follower no
longer truncates to its high watermark, so a leader elected cleanly from the ISR (its LEO at least
the HW) cannot start its epoch below a high watermark the previous leader checkpointed. An epoch of
the surviving log that starts below such a HW has one of two causes: an election from outside the
ISR (``unclean_leader_election``, ``evidence_basis`` "files"), or a clean election of a replica that
had lost unflushed data in a crash (``committed_data_lost_in_crash``: the new leader shows no
``.kafka_cleanshutdown`` and a recovery point below that HW, the "last replica standing" case of
KIP-966). Where the metadata log records the election as clean, only the second cause remains (the
record wins over the files). Logs without leader epochs keep KAFKA-1211 (truncation to a stale HW
by a cleanly elected leader) as a third cause, so they get no such finding. A clean election after
which a former leader's unreplicated tail was truncated is *not* one: the HW never covered that
tail (acks=1 loss).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from pyspark.sql import Row

from jobs.history.views import History
from jobs.replicas.survivors import Survivor, last_epoch

from .model import Evidence, Finding, ms

if TYPE_CHECKING:
    from .case import Case

FINDING_KINDS = {"unclean_leader_election": "error", "committed_data_lost_in_crash": "error", "leader_epoch_conflict": "warning"}
SAME_ELECTION_MS = 60_000  # a sentence naming neither epoch nor leader belongs to an election this close in time
RECOVERING = 1


def _epoch_starts(lineage: list[Row]) -> dict[tuple, int]:
    starts: dict[tuple, int] = {}
    for r in lineage:
        s = r["batch_start_offset"] if r["batch_start_offset"] is not None else r["checkpoint_start_offset"]
        if s is None:
            continue
        k = (r["topic"], r["partition"], r["leader_epoch"])
        starts[k] = min(starts.get(k, s), s)
    return starts


def states_election(line: dict) -> bool:
    """A log line that states an election's RECOVERING state (module doc, 2), not a sentence about it."""
    return line["leader_recovery_state"] == RECOVERING


def recorded_elections(events: list) -> dict[tuple, dict]:
    """(topic, partition, leader epoch) -> the metadata_events row of the record that elected that
    epoch's leader, clean or unclean (a topic created again restarts its epochs: the latest wins)."""
    out: dict[tuple, dict] = {}
    for e in sorted(events, key=lambda e: e["meta_offset"]):
        if e["election"] in ("clean", "unclean") and e["leader_epoch"] is not None:
            out[(e["topic"], e["partition"], e["leader_epoch"])] = e
    return out


def _line_evidence(line: dict) -> Evidence:
    return Evidence(line["node"], line["path"], line["line_no"], f"line {line['line_no']}: {line['text'][:200]}")


def _same_election(line: dict, epoch: int | None, leaders: set, t: int | None) -> bool:
    """Whether a log line is about the election of ``epoch`` (its new leader one of ``leaders``, at
    time ``t``): by the epoch the line names, else its new leader, else its time (log4j times are
    local, maybe not UTC: a minute's slack)."""
    if line["leader_epoch"] is not None and epoch is not None:
        return line["leader_epoch"] == epoch
    if line["leader"] is not None and leaders:
        return line["leader"] in leaders
    lt = ms(line["time"])
    return t is None or lt is None or abs(lt - t) < SAME_ELECTION_MS


def _corroborate(f: Finding, lines: list, used: set, t: int | None, leaders: set) -> None:
    """Add to ``f`` the log lines of its partition about the same election (``_same_election``;
    ``leaders``: the brokers that may be its new leader)."""
    epoch = f.leader_epochs[0] if f.leader_epochs else None
    for line in lines:
        key = (line["path"], line["line_no"])
        if key not in used and _same_election(line, epoch, leaders, t):
            f.evidence.append(_line_evidence(line))
            used.add(key)


def unclean_election_findings(elections: list[Row], log_unclean: list[Row], lineage: list[Row]) -> list[Finding]:
    """One ``unclean_leader_election`` per election the metadata log (``elections``: metadata_events
    rows with election 'unclean') or a line stating RECOVERING (``log_unclean``: log_events rows of
    unclean_election / leader_recovery, topic resolved where possible) records as unclean; the
    controllers' sentences about the same election are added as evidence. A sentence alone makes
    no finding (module doc)."""
    starts = _epoch_starts(lineage)
    by_part = defaultdict(list)
    for line in log_unclean:
        if line["topic"] is not None and line["partition"] is not None:
            by_part[(line["topic"], line["partition"])].append(line)
    out: list[Finding] = []
    used: set = set()
    recorded = set()
    for e in elections:
        key = (e["topic"], e["partition"])
        recorded.add((*key, e["leader_epoch"]))
        start = starts.get((*key, e["leader_epoch"]))
        how = ("the last known leader brought back with the ISR and ELR empty (KIP-966's unclean recovery)"
               if e["elected_from"] == "last_known_leader" else f"from outside the ISR {list(e['prev_isr'] or [])}")
        ev = [Evidence(min(e["nodes"] or [None], key=lambda x: (x is None, x)), e["path"], e["batch_position"],
                       f"__cluster_metadata offset {e['meta_offset']}: PartitionChangeRecord elected leader {e['leader']} "
                       f"(epoch {e['leader_epoch']}) while the ISR was {list(e['prev_isr'] or [])}"
                       + ("; leaderRecoveryState RECOVERING" if e["leader_recovery_state"] == RECOVERING else ""))]
        t = ms(e["time"])
        where = f" at offset {start}" if start is not None else ""
        kind_of = "unclean recovery" if e["elected_from"] == "last_known_leader" else "unclean election"
        f = Finding(
            kind="unclean_leader_election", severity=FINDING_KINDS["unclean_leader_election"], topic=e["topic"], partition=e["partition"],
            brokers=[e["leader"], *(e["prev_isr"] or [])], first_offset=start, leader_epochs=[e["leader_epoch"]],
            first_timestamp=t, last_timestamp=t, evidence=ev, evidence_basis="metadata_log",
            explanation=f"Broker {e['leader']} was elected leader of {e['topic']}-{e['partition']} {how} ({kind_of}, leader epoch "
                        f"{e['leader_epoch']}{where}): records the previous leader had acknowledged beyond what this broker held "
                        "are lost, and the old leader will truncate to the new epoch when it returns.",
        )
        _corroborate(f, by_part.get(key, []), used, t, {e["leader"]})
        out.append(f)
    # RECOVERING stated by a log line, for the elections the metadata log does not record
    stated = defaultdict(list)
    for key, lines in by_part.items():
        for line in lines:
            if states_election(line) and (*key, line["leader_epoch"]) not in recorded:
                stated[(*key, line["leader_epoch"], line["leader"])].append(line)
    with_epoch = {(t, p, leader) for t, p, epoch, leader in stated if epoch is not None}
    for (topic, part, epoch, leader), lines in sorted(stated.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] is None, kv[0][2] or 0)):
        if epoch is None and (topic, part, leader) in with_epoch:
            continue  # the new leader's line with no epoch, of an election another line names the epoch of: evidence there
        lines.sort(key=lambda r: (r["path"], r["line_no"]))
        start = starts.get((topic, part, epoch))
        t = min((ms(r["time"]) for r in lines if r["time"] is not None), default=None)
        f = Finding(
            kind="unclean_leader_election", severity=FINDING_KINDS["unclean_leader_election"], topic=topic, partition=part, brokers=[leader],
            first_offset=start, leader_epochs=[epoch] if epoch is not None else [], first_timestamp=t, last_timestamp=t,
            evidence=[_line_evidence(r) for r in lines], evidence_basis="broker_log",
            explanation=f"Broker {leader} was elected leader of {topic}-{part}"
                        + (f" for leader epoch {epoch}" if epoch is not None else "")
                        + (f" (the epoch starts at offset {start})" if start is not None else "")
                        + " with leaderRecoveryState RECOVERING, which Kafka sets only for a leader from outside the ISR "
                          "(unclean election, KIP-704): records the previous leader had acknowledged beyond what it held are lost.",
        )
        used.update((r["path"], r["line_no"]) for r in lines)
        _corroborate(f, by_part[(topic, part)], used, t, {leader})
        out.append(f)
    return _merge_kept_state(out)


def _merge_kept_state(findings: list[Finding]) -> list[Finding]:
    """A leader re-elected from the ISR while its partition was still RECOVERING keeps the state
    (ZooKeeper mode's ``newLeaderAndIsr``), so consecutive RECOVERING elections of the same leader,
    told by log lines alone, are one unclean election: one finding with every epoch and line."""
    out: list[Finding] = []
    for f in findings:
        prev = out[-1] if out else None
        if (prev is not None and f.evidence_basis == prev.evidence_basis == "broker_log" and (f.topic, f.partition) == (prev.topic, prev.partition)
                and f.brokers == prev.brokers and f.leader_epochs and prev.leader_epochs
                and min(f.leader_epochs) - max(prev.leader_epochs) <= 2):
            prev.leader_epochs = sorted({*prev.leader_epochs, *f.leader_epochs})
            prev.evidence += f.evidence
            prev.last_timestamp = f.last_timestamp
            continue
        out.append(f)
    return out


def _replica_epoch_starts(lineage: list[Row]) -> dict[tuple, dict[int, int]]:
    """Per replica, {epoch: start offset}: its leader-epoch-checkpoint entry, else its first batch
    stamped with that epoch."""
    out: dict[tuple, dict[int, int]] = defaultdict(dict)
    for r in lineage:
        s = r["checkpoint_start_offset"] if r["checkpoint_start_offset"] is not None else r["batch_start_offset"]
        if s is not None:
            out[(r["topic"], r["partition"], r["broker"])][r["leader_epoch"]] = s
    return out


def epoch_below_hw(new: dict[int, int], new_log_start: int, old_epoch: int, old_hw: int) -> tuple[int, int] | None:
    """(epoch, start) of the first epoch of ``new`` (a replica's {epoch: start}) after ``old_epoch``
    (the latest epoch of a replica still on the old lineage), when it starts below ``old_hw``, the
    high watermark that replica checkpointed; None otherwise. A start at or below a trimmed log's
    start is no evidence (retention moves the first epoch's start)."""
    later = sorted(e for e in new if e > old_epoch)
    if not later:
        return None
    start = new[later[0]]
    if start >= old_hw or (new_log_start > 0 and start <= new_log_start):
        return None
    return later[0], start


def crash_lost_data(leader: dict | None, hw: int) -> bool:
    """Whether the new leader's files show a crash that lost data below ``hw``: no clean-shutdown
    marker in its log dir and a recovery point (the last offset flushed to disk) below that HW."""
    return (leader is not None and not leader["clean_shutdown"] and leader["recovery_point"] is not None
            and leader["recovery_point"] < hw)


def _cause_at(topic: str, part: int, survivor: Survivor, live: dict, starts: dict, decided: dict, keys: list) -> tuple | None:
    """(epoch, start, old replica) of the highest HW checkpoint an old-lineage replica of the partition
    keeps above the start of the surviving log's next epoch, the same on every surviving-log
    candidate, of an election no record or line already decides unclean (``decided``); None when
    there is none or the candidates disagree. ``live``: live replica_logs rows by (topic, partition, broker); ``keys``:
    the partition's keys of ``live``."""
    candidates = {c["broker"] for c in survivor.candidates}
    best = None
    for t, p, b in keys:
        old = live[(t, p, b)]
        if b in candidates or old["hw_checkpoint"] is None or last_epoch(old) < 0:
            continue
        hits = {epoch_below_hw(starts.get((t, p, c), {}), live[(t, p, c)]["log_start_offset"] or 0, last_epoch(old),
                               old["hw_checkpoint"]) for c in candidates}
        if len(hits) != 1 or None in hits:
            continue  # a candidate without leader epochs (KAFKA-1211 stays possible), or candidates that disagree
        epoch, start = hits.pop()
        if decided.get((topic, part, epoch)) == "unclean":
            continue  # its finding is the record's (or the line's)
        if best is None or old["hw_checkpoint"] > best[2]["hw_checkpoint"]:
            best = (epoch, start, old)
    return best


def files_election_findings(replicas: list[Row], lineage: list[Row], survivors: dict[tuple[str, int], Survivor],
                            decided: dict | None = None, recorded: dict | None = None) -> list[Finding]:
    """The cause of an epoch of the surviving log that starts below a high watermark another replica
    checkpointed for an earlier epoch (module doc), for elections neither the metadata log nor a
    line stating RECOVERING decides unclean (``decided``: (topic, partition, epoch) -> 'clean' or
    'unclean', ``election_verdicts``; ``recorded``: the metadata_events rows of the recorded ones;
    ``survivors``: ``survivors.survivors``). One finding per partition, on the highest such HW. Its
    ``brokers`` are the epoch's leader, or every replica the files cannot tell from it (those
    starting the epoch at the same offset); a crash is the cause only when each of them shows one.
    An election the metadata log records as clean can only be the crash."""
    decided, recorded = decided or {}, recorded or {}
    live = {(r["topic"], r["partition"], r["broker"]): r for r in replicas if r["dir_state"] == "live"}
    keys_of = defaultdict(list)  # (topic, partition) -> its keys of live: a scan of all per partition was quadratic
    for key in live:
        keys_of[key[:2]].append(key)
    starts = _replica_epoch_starts(lineage)
    epochs_of = defaultdict(list)  # (topic, partition) -> (broker, its epoch starts), every replica in the lineage
    for (t, p, b), e in starts.items():
        epochs_of[(t, p)].append((b, e))
    leaders = {(r["topic"], r["partition"], r["leader_epoch"]): (r["likely_leader"], r["leader_evidence"]) for r in lineage}
    out = []
    for (topic, part), survivor in sorted(survivors.items()):
        hit = _cause_at(topic, part, survivor, live, starts, decided, keys_of[(topic, part)])
        if hit is None:
            continue
        epoch, start, old = hit
        hw = old["hw_checkpoint"]
        lead = leaders.get((topic, part, epoch), (None, None))[0]
        who = sorted([lead] if lead is not None else
                     [b for b, e in epochs_of[(topic, part)] if e.get(epoch) == start])
        crashed = [crash_lost_data(live.get((topic, part, b)), hw) for b in who]
        if any(crashed) and not all(crashed):
            continue  # one possible leader lost data in a crash, another did not: the files cannot tell the cause
        clean = decided.get((topic, part, epoch)) == "clean"
        if clean and not all(crashed):
            continue  # the record says clean and no crash explains the start: the record wins (module doc)
        ev = [Evidence(old["broker"], f"{old['log_dir']}/replication-offset-checkpoint", None,
                       f"high watermark {hw} checkpointed for {topic}-{part}; this replica's latest leader epoch is {last_epoch(old)}")]
        for r in filter(None, (live.get((topic, part, b)) for b in who)):
            b = r["broker"]
            ev.append(Evidence(b, f"{r['log_dir']}/{topic}-{part}/leader-epoch-checkpoint", None, f"leader epoch {epoch} starts at offset {start}"))
            ev.append(Evidence(b, f"{r['log_dir']}/recovery-point-offset-checkpoint", None,
                               f"recovery point {r['recovery_point']}; "
                               + ("no .kafka_cleanshutdown in this log dir" if not r["clean_shutdown"] else ".kafka_cleanshutdown present")))
        if clean and (rec := recorded.get((topic, part, epoch))) is not None:
            ev.append(Evidence(min(rec["nodes"] or [None], key=lambda x: (x is None, x)), rec["path"], rec["batch_position"],
                               f"__cluster_metadata offset {rec['meta_offset']}: PartitionChangeRecord elected leader {rec['leader']} "
                               f"(epoch {epoch}) cleanly, from {rec['elected_from'] or 'the ISR'} ({list(rec['prev_isr'] or [])})"))
        named = f"broker {who[0]}" if len(who) == 1 else f"one of brokers {', '.join(map(str, who))} (the files cannot tell which)"
        where = (f"Leader epoch {epoch} of {topic}-{part} starts at offset {start}, below the high watermark {hw} broker "
                 f"{old['broker']} checkpointed in epoch {last_epoch(old)}")
        common = dict(topic=topic, partition=part, brokers=who, first_offset=start, last_offset=hw - 1, records=hw - start,
                      leader_epochs=[epoch], evidence=ev, evidence_basis="files")
        if all(crashed) and crashed:
            out.append(Finding(kind="committed_data_lost_in_crash", severity=FINDING_KINDS["committed_data_lost_in_crash"], **common, explanation=(
                f"{where}; its leader, {named}, shows an unclean shutdown with its recovery point below that HW: it lost "
                "committed records it had not flushed in a crash and was then elected "
                + ("cleanly (the metadata log records the election), as the last replica standing"
                   if clean else "(cleanly, as the last replica standing, or from outside the ISR: the files cannot tell)")
                + f", so offsets {start}-{hw - 1} were lost or overwritten.")))
        else:
            out.append(Finding(kind="unclean_leader_election", severity=FINDING_KINDS["unclean_leader_election"], **common, explanation=(
                f"{where}; with leader epochs (KIP-101) a leader elected from the ISR starts at or above the HW, and its leader, "
                f"{named}, shows no crash that lost data: it was elected from outside the ISR (unclean election, decided from the "
                f"files), and committed offsets {start}-{hw - 1} are lost.")))
    return out


def election_verdicts(history: History, lineage: list[Row]) -> dict[tuple, str]:
    """(topic, partition, leader epoch) -> 'clean' or 'unclean' for the elections the metadata log
    records or a line stating RECOVERING names (module doc, 1 and 2; the record wins). A new
    leader's RECOVERING line whose epoch could not be told decides each epoch the lineage names
    that broker leader of."""
    out = {k: e["election"] for k, e in recorded_elections(history.events).items()}
    led = defaultdict(list)
    for r in lineage:
        if r["likely_leader"] is not None:
            led[(r["topic"], r["partition"], r["likely_leader"])].append(r["leader_epoch"])
    for line in history.log_unclean:
        if not states_election(line) or line["topic"] is None or line["partition"] is None:
            continue
        key = (line["topic"], line["partition"])
        for epoch in [line["leader_epoch"]] if line["leader_epoch"] is not None else led.get((*key, line["leader"]), []):
            out.setdefault((*key, epoch), "unclean")
    return out


def election_findings(history: History, lineage: list[Row], replicas: list[Row],
                      survivors: dict[tuple[str, int], Survivor]) -> list[Finding]:
    """Every election finding: the recorded and stated unclean elections, then the files' causes of
    the others, each with the controllers' sentences about the same election as evidence."""
    out = unclean_election_findings([e for e in history.events if e["election"] == "unclean"], history.log_unclean, lineage)
    used = {(e.path, e.position) for f in out for e in f.evidence}
    files = files_election_findings(replicas, lineage, survivors, election_verdicts(history, lineage), recorded_elections(history.events))
    by_part = defaultdict(list)
    for line in history.log_unclean:
        by_part[(line["topic"], line["partition"])].append(line)
    for f in files:
        _corroborate(f, by_part.get((f.topic, f.partition), []), used, None, set(f.brokers))
    return out + files


def epoch_conflict_findings(lineage: list[Row], replicas: list[Row]) -> list[Finding]:
    """Replicas that hold records of an epoch but disagree where it starts (beyond their log start)."""
    by_key = {(r["topic"], r["partition"], r["broker"]): r for r in replicas}
    by = defaultdict(list)
    for row in lineage:
        if row["batch_start_offset"] is None:
            continue
        rep = by_key.get((row["topic"], row["partition"], row["broker"]))
        if rep is None or row["batch_start_offset"] <= rep["log_start_offset"] or (rep["first_offset"] is not None and row["batch_start_offset"] <= rep["first_offset"]):
            continue  # the epoch's start may have been deleted by retention on this replica
        by[(row["topic"], row["partition"], row["leader_epoch"])].append(row)
    out = []
    for (topic, part, epoch), rows in by.items():
        starts = {row["batch_start_offset"] for row in rows}
        if len(starts) > 1:
            out.append(Finding(
                kind="leader_epoch_conflict", severity=FINDING_KINDS["leader_epoch_conflict"], topic=topic, partition=part, brokers=[row["broker"] for row in rows],
                first_offset=min(starts), last_offset=max(starts) - 1, leader_epochs=[epoch],
                evidence=[Evidence(row["broker"], None, None, f"epoch {epoch} starts at {row['batch_start_offset']}") for row in rows],
                explanation=f"Replicas disagree on where leader epoch {epoch} of {topic}-{part} starts "
                            f"({sorted(starts)}): their logs were written by different leaders for the same epoch.",
            ))
    return out


def find(case: Case) -> list[Finding]:
    return (election_findings(case.history, case.lineage, case.replicas, case.survivors)
            + epoch_conflict_findings(case.lineage, case.replicas))
