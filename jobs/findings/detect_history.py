"""Findings only the history proves: the metadata log, broker logs, consumer offsets, the
transaction log. The segments say what each replica holds now; after an unclean election and a
rejoin the replicas are identical again and only these sources still show what happened.

- ``unclean_leader_election``: a PartitionChangeRecord that elected a leader outside the ISR
  (leaderRecoveryState RECOVERING, or a leader in neither ISR nor ELR), or a logged unclean
  election (controller log; ZooKeeper-era controllers log it too). A clean election after which
  a former leader's unreplicated tail was truncated is *not* one: that is acks=1 loss.
- ``truncation_below_hw`` (happened): a broker logged a truncation to an offset below a high
  watermark it had logged for that partition earlier (state-change lines, or loaded at start-up;
  a log loaded later, after a clean truncation, logs its new HW and resets the comparison);
  or, with a ledger, a leader that acknowledged records while its high watermark covered them
  (acks=all, or it was alone in the ISR) no longer holds them.
- consumer commits beyond every replica's log end: consumers only read below the HW, so those
  offsets were committed data that is gone (``acked_data_loss``, counted apart from HW evidence).
- ``hanging_transaction`` from ``__transaction_state``: a transaction the coordinator still has
  open (Ongoing / Prepare*) long after its timeout, by the coordinator's own clock (its newest
  write to the transaction log; producers' CreateTime may be skewed).

All inputs here are small per partition (events, not records): they are collected.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from jobs.findings.model import Evidence, Finding

OPEN_TXN = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


def _ms(t: datetime | None) -> int | None:
    return None if t is None else int(t.timestamp() * 1000)


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
        t = _ms(e["time"])
        for line in by_part.get(key, []):
            lt = _ms(line["time"])
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
                first_timestamp=_ms(line["time"]), last_timestamp=_ms(line["time"]),
                evidence=[Evidence(line["node"], line["path"], line["line_no"], f"line {line['line_no']}: {line['text'][:200]}")],
                explanation=f"The controller logged an unclean leader election for {key[0]}-{key[1]}"
                            + (f" (new leader {line['leader']})" if line["leader"] is not None else "") + ".",
            ))
    return out


def logged_truncation_findings(log_rows: list) -> list[Finding]:
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
                    kind="truncation_below_hw", topic=topic, partition=part, brokers=[node],
                    first_offset=r["offset"], last_offset=hw - 1, records=hw - r["offset"],
                    leader_epochs=[r["leader_epoch"]] if r["leader_epoch"] is not None else [],
                    first_timestamp=_ms(r["time"]), last_timestamp=_ms(r["time"]),
                    evidence=[Evidence(node, r["path"], r["line_no"], f"line {r['line_no']}: {r['text'][:200]}"),
                              Evidence(node, hw_row["path"], hw_row["line_no"], f"line {hw_row['line_no']}: high watermark {hw}")],
                    explanation=f"Broker {node} truncated {topic}-{part} to offset {r['offset']}, below the high watermark {hw} "
                                "it had logged: committed records were removed from this replica.",
                ))
                hw = r["offset"]
    return out


def ledger_truncation_findings(acks: list, events: list, rl: list, loss: list) -> list[Finding]:
    """With a ledger and the metadata log: records acknowledged by a leader whose high watermark
    already covered them (acks=all, or the leader alone in the ISR), lost from that leader's own
    log, prove the leader truncated below its HW (the server log line may be gone with a restart).

    ``acks``: per (topic, partition) lost ledger offsets grouped by (acks) with min/max offset and
    ack times; ``events``: metadata_events rows (leader_change / partition_created / isr_change);
    ``loss``: acked_data_loss findings (what is lost for the cluster)."""
    hist = defaultdict(list)
    for e in events:
        if e["time"] is not None and e["source"] == "log":
            hist[(e["topic"], e["partition"])].append(e)
    for v in hist.values():
        v.sort(key=lambda e: e["meta_offset"])
    have = {(r["topic"], r["partition"], r["broker"]) for r in rl if r["dir_state"] == "live"}
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
            kind="truncation_below_hw", topic=key[0], partition=key[1], brokers=[leader],
            first_offset=first, last_offset=last, records=last - first + 1, leader_epochs=[state["leader_epoch"]],
            first_timestamp=_ms(t0), last_timestamp=_ms(t1),
            evidence=[Evidence(None, state["path"], state["batch_position"],
                               f"__cluster_metadata offset {state['meta_offset']}: leader {leader} (epoch {state['leader_epoch']}), ISR {isr} "
                               f"when offsets {a['first_offset']}-{a['last_offset']} were acknowledged (acks={a['acks']})"),
                      Evidence(leader, None, None, f"broker {leader}'s log no longer holds offsets {first}-{last}")],
            explanation=f"Broker {leader} led {key[0]}-{key[1]} with ISR {isr} when it acknowledged offsets {first}-{last}, so its "
                        f"high watermark covered them (at least {last + 1}); its log no longer holds them: it truncated below "
                        "its high watermark (after an unclean election elsewhere).",
        ))
    return out


def consumer_loss_findings(commits: list, rl: list, loss: list[Finding]) -> list[Finding]:
    """Committed consumer offsets beyond every replica's log end. ``commits``: latest commit per
    (group, topic, partition) with path/offset evidence. Existing loss findings that cover the
    same offsets get the commit as evidence instead of a second count."""
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
        ev = [Evidence(c["broker"], c["path"], c["batch_position"],
                       f"__consumer_offsets: group {c['group']} committed offset {c['committed_offset']}") for c in cs[:5]]
        hit = [f for f in loss if f.topic == k[0] and f.partition == k[1] and f.first_offset is not None
               and f.first_offset <= last and f.last_offset >= first]
        if hit:
            hit[0].evidence.extend(ev)
            continue
        out.append(Finding(
            kind="acked_data_loss", topic=k[0], partition=k[1], brokers=[],
            first_offset=first, last_offset=last, records=last - first + 1, evidence=ev,
            explanation=f"Consumer group(s) {', '.join(sorted({c['group'] for c in cs}))} committed offsets up to {top} on "
                        f"{k[0]}-{k[1]} but no replica's log reaches beyond {first}: offsets {first}-{last} were read (so committed) "
                        "and are gone.",
        ))
    return out


def transaction_state_findings(txns: list, collected_ms: int | None) -> list[Finding]:
    """Transactions the coordinator still holds open long past their timeout when collected."""
    if collected_ms is None:
        return []
    out = []
    for t in txns:
        if t["status_name"] not in OPEN_TXN or t["last_update_ms"] is None or t["timeout_ms"] is None:
            continue
        overdue = collected_ms - (t["last_update_ms"] + t["timeout_ms"])
        if overdue <= 60_000:  # the coordinator aborts expired transactions every 10 s: give it a minute
            continue
        out.append(Finding(
            kind="hanging_transaction", severity="warning", brokers=[t["broker"]],
            first_timestamp=t["start_ms"], last_timestamp=t["last_update_ms"],
            producers=[{"producer_id": t["producer_id"], "producer_epoch": t["producer_epoch"]}],
            evidence=[Evidence(t["broker"], t["path"], t["batch_position"],
                               f"__transaction_state: {t['transactional_id']} {t['status_name']} since {t['last_update_ms']} "
                               f"(timeout {t['timeout_ms']} ms) over {t['partitions']}")],
            explanation=f"Transactional id {t['transactional_id']} (producer {t['producer_id']}) was still {t['status_name']} in the "
                        f"transaction log {overdue // 1000} s after its timeout when the data was collected: consumers reading "
                        "read_committed are blocked behind it.",
        ))
    return out
