"""Leader elections gone wrong: unclean ones, committed data a crash took from the next leader, and
replicas disagreeing where an epoch starts.

The KRaft metadata log (PartitionChangeRecord, leaderRecoveryState) decides an election when it was
collected: a leader outside the ISR (leaderRecoveryState RECOVERING, or a leader in neither ISR nor
ELR); else a logged unclean election (controller log; ZooKeeper-era controllers log it too).

Without either, the files decide when the logs carry leader epochs (message format v2, KIP-101): a
follower no longer truncates to its high watermark, so a leader elected cleanly from the ISR (its
LEO at least the HW) cannot start its epoch below a high watermark the previous leader
checkpointed. An epoch of the surviving log that starts below such a HW has one of two causes: an
election from outside the ISR (``unclean_leader_election``, ``evidence_basis`` "files"), or a clean
election of a replica that had lost unflushed data in a crash (``committed_data_lost_in_crash``: the
new leader shows no ``.kafka_cleanshutdown`` and a recovery point below that HW, the "last replica
standing" case of KIP-966). Logs without leader epochs keep KAFKA-1211 (truncation to a stale HW by
a cleanly elected leader) as a third cause, so they get no such finding. A clean election after
which a former leader's unreplicated tail was truncated is *not* one: the HW never covered that
tail (acks=1 loss).
"""

from __future__ import annotations

from collections import defaultdict

from jobs.replicas.survivors import last_epoch

from .model import Evidence, Finding, ms

KINDS = {"unclean_leader_election": "error", "committed_data_lost_in_crash": "error", "leader_epoch_conflict": "warning"}
# leader evidence (epoch_lineage.leader_evidence) that decides an election: the files then do not
DECIDING_EVIDENCE = ("metadata_log", "broker_log")


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
            kind="unclean_leader_election", severity=KINDS["unclean_leader_election"], topic=e["topic"], partition=e["partition"],
            brokers=[e["leader"], *(e["prev_isr"] or [])], first_offset=start, leader_epochs=[e["leader_epoch"]],
            first_timestamp=t, last_timestamp=t, evidence=ev, evidence_basis="metadata_log",
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
                kind="unclean_leader_election", severity=KINDS["unclean_leader_election"], topic=key[0], partition=key[1], brokers=[line["leader"]],
                leader_epochs=[line["leader_epoch"]] if line["leader_epoch"] is not None else [],
                first_timestamp=ms(line["time"]), last_timestamp=ms(line["time"]),
                evidence=[Evidence(line["node"], line["path"], line["line_no"], f"line {line['line_no']}: {line['text'][:200]}")],
                evidence_basis="broker_log",
                explanation=f"The controller logged an unclean leader election for {key[0]}-{key[1]}"
                            + (f" (new leader {line['leader']})" if line["leader"] is not None else "") + ".",
            ))
    return out


def _replica_epoch_starts(lineage: list) -> dict[tuple, dict[int, int]]:
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


def _cause_at(topic: str, part: int, s: dict, reps: dict, starts: dict, leaders: dict, replicas: list) -> tuple | None:
    """(epoch, start, old replica) of the highest HW checkpoint an old-lineage replica of the partition
    keeps above the start of the surviving log's next epoch, the same on every surviving-log
    candidate; None when there is none or the candidates disagree. ``replicas``: the partition's
    (topic, partition, broker) keys of ``reps``."""
    cands = {c["broker"] for c in s["candidates"]}
    best = None
    for t, p, b in replicas:
        old = reps[(t, p, b)]
        if b in cands or old["hw_checkpoint"] is None or last_epoch(old) < 0:
            continue
        hits = {epoch_below_hw(starts.get((t, p, c), {}), reps[(t, p, c)]["log_start_offset"] or 0, last_epoch(old),
                               old["hw_checkpoint"]) for c in cands}
        if len(hits) != 1 or None in hits:
            continue  # a candidate without leader epochs (KAFKA-1211 stays possible), or candidates that disagree
        epoch, start = hits.pop()
        if leaders.get((topic, part, epoch), (None, None))[1] in DECIDING_EVIDENCE:
            continue
        if best is None or old["hw_checkpoint"] > best[2]["hw_checkpoint"]:
            best = (epoch, start, old)
    return best


def files_election_findings(rl: list, lineage: list, surv: dict, decided: set) -> list[Finding]:
    """The cause of an epoch of the surviving log that starts below a high watermark another replica
    checkpointed for an earlier epoch (module doc), for partitions whose elections neither the
    metadata log nor a controller/broker log decides (``decided``: (topic, partition) keys they do;
    ``surv``: ``survivors.survivors``). One finding per partition, on the highest such HW. Its
    ``brokers`` are the epoch's leader, or every replica the files cannot tell from it (those
    starting the epoch at the same offset); a crash is the cause only when each of them shows one."""
    reps = {(r["topic"], r["partition"], r["broker"]): r for r in rl if r["dir_state"] == "live"}
    replicas = defaultdict(list)  # (topic, partition) -> its keys of reps: a scan of all per partition was quadratic
    for key in reps:
        replicas[key[:2]].append(key)
    starts = _replica_epoch_starts(lineage)
    epochs_of = defaultdict(list)  # (topic, partition) -> (broker, its epoch starts), every replica in the lineage
    for (t, p, b), e in starts.items():
        epochs_of[(t, p)].append((b, e))
    leaders = {(r["topic"], r["partition"], r["leader_epoch"]): (r["likely_leader"], r["leader_evidence"]) for r in lineage}
    out = []
    for (topic, part), s in sorted(surv.items()):
        hit = None if (topic, part) in decided else _cause_at(topic, part, s, reps, starts, leaders, replicas[(topic, part)])
        if hit is None:
            continue
        epoch, start, old = hit
        hw = old["hw_checkpoint"]
        lead = leaders.get((topic, part, epoch), (None, None))[0]
        who = sorted([lead] if lead is not None else
                     [b for b, e in epochs_of[(topic, part)] if e.get(epoch) == start])
        crashed = [crash_lost_data(reps.get((topic, part, b)), hw) for b in who]
        if any(crashed) and not all(crashed):
            continue  # one possible leader lost data in a crash, another did not: the files cannot tell the cause
        ev = [Evidence(old["broker"], f"{old['log_dir']}/replication-offset-checkpoint", None,
                       f"high watermark {hw} checkpointed for {topic}-{part}; this replica's latest leader epoch is {last_epoch(old)}")]
        for r in filter(None, (reps.get((topic, part, b)) for b in who)):
            b = r["broker"]
            ev.append(Evidence(b, f"{r['log_dir']}/{topic}-{part}/leader-epoch-checkpoint", None, f"leader epoch {epoch} starts at offset {start}"))
            ev.append(Evidence(b, f"{r['log_dir']}/recovery-point-offset-checkpoint", None,
                               f"recovery point {r['recovery_point']}; "
                               + ("no .kafka_cleanshutdown in this log dir" if not r["clean_shutdown"] else ".kafka_cleanshutdown present")))
        named = f"broker {who[0]}" if len(who) == 1 else f"one of brokers {', '.join(map(str, who))} (the files cannot tell which)"
        where = (f"Leader epoch {epoch} of {topic}-{part} starts at offset {start}, below the high watermark {hw} broker "
                 f"{old['broker']} checkpointed in epoch {last_epoch(old)}")
        common = dict(topic=topic, partition=part, brokers=who, first_offset=start, last_offset=hw - 1, records=hw - start,
                      leader_epochs=[epoch], evidence=ev, evidence_basis="files")
        if all(crashed) and crashed:
            out.append(Finding(kind="committed_data_lost_in_crash", severity=KINDS["committed_data_lost_in_crash"], **common, explanation=(
                f"{where}; its leader, {named}, shows an unclean shutdown with its recovery point below that HW: it lost "
                "committed records it had not flushed in a crash and was then elected (cleanly, as the last replica standing, "
                f"or from outside the ISR: the files cannot tell), so offsets {start}-{hw - 1} were lost or overwritten.")))
        else:
            out.append(Finding(kind="unclean_leader_election", severity=KINDS["unclean_leader_election"], **common, explanation=(
                f"{where}; with leader epochs (KIP-101) a leader elected from the ISR starts at or above the HW, and its leader, "
                f"{named}, shows no crash that lost data: it was elected from outside the ISR (unclean election, decided from the "
                f"files), and committed offsets {start}-{hw - 1} are lost.")))
    return out


def decided_partitions(history: dict, current: dict) -> set:
    """(topic, partition) whose elections the metadata log or a controller/broker log decides."""
    return ({(e["topic"], e["partition"]) for e in history["elections"]}
            | {(e["topic"], e["partition"]) for e in history["log_unclean"]} | set(current))


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
                kind="leader_epoch_conflict", severity=KINDS["leader_epoch_conflict"], topic=topic, partition=part, brokers=[row["broker"] for row in rows],
                first_offset=min(starts), last_offset=max(starts) - 1, leader_epochs=[epoch],
                evidence=[Evidence(row["broker"], None, None, f"epoch {epoch} starts at {row['batch_start_offset']}") for row in rows],
                explanation=f"Replicas disagree on where leader epoch {epoch} of {topic}-{part} starts "
                            f"({sorted(starts)}): their logs were written by different leaders for the same epoch.",
            ))
    return out


def find(case) -> list[Finding]:
    h = case.history
    return (unclean_election_findings(h["elections"], h["log_unclean"], case.lineage)
            + files_election_findings(case.rl, case.lineage, case.survivors, decided_partitions(h, case.current))
            + epoch_conflict_findings(case.lineage, case.rl))
