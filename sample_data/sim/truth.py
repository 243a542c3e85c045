"""Ground truth for a simulated incident, derived from the event log and the final model state.

The findings are what an ideal analyzer reports, in the contract's shape (``kind, severity,
topic, partition, brokers, first_offset, last_offset, records, ...``), plus helper fields
for whoever writes detection jobs: ``evidence_sources`` (``files`` = visible in the broker
dirs alone, ``ledger`` = needs ledger.jsonl, ``event_log`` = only the simulator knows it, like
a server log line) and, for losses, ``salvage_brokers``, ``surviving_broker`` and
``surviving_candidates`` (the replicas the broker dirs cannot tell from the surviving one: just
it when they show which replica survives, several when only the metadata log would tell).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from .cluster import Cluster
from .materialize import writes_leader_epochs
from .model import Replica, epochs_from_start

MARKER = ("control", "control")


def _content_map(rep: Replica) -> dict[int, tuple]:
    """{offset: content} of the offsets a replica holds at or above its log start."""
    out = {}
    for off, (b, r) in rep.record_at().items():
        if off >= rep.log_start:
            out[off] = (MARKER[0], b.control) if r is None else r.content
    return out


def _ranges(offsets: Iterable[int]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for o in sorted(set(offsets)):
        if out and o == out[-1][1] + 1:
            out[-1][1] = o
        else:
            out.append([o, o])
    return [(a, b) for a, b in out]


def surviving_replica(cluster: Cluster, topic: str, partition: int) -> Replica:
    """The replica carrying the latest leader epoch: the lineage every other replica will truncate to."""
    part = cluster.part(topic, partition)
    reps = [cluster.replica(b, topic, partition) for b in part.replicas]
    return max(reps, key=lambda r: (r.latest_epoch, r.broker == part.leader, r.leo))


def _epoch_start(rep: Replica, epoch: int) -> int | None:
    """Where ``epoch`` starts in this replica's files: its leader-epoch-checkpoint entry, else its
    first batch stamped with it."""
    starts = [s for e, s in epochs_from_start(rep.epochs, rep.log_start) if e == epoch]
    starts = starts or [b.base_offset for b in rep.batches if b.epoch == epoch]
    return min(starts) if starts else None


def survivor_candidates(cluster: Cluster, topic: str, partition: int) -> list[int]:
    """The replicas the broker dirs alone cannot tell from the surviving one (itself included): those
    carrying the same latest leader epoch without starting it later (a follower starts an epoch
    where it fetched its first batch, never before the leader did). More than one: only the event
    log (the metadata log, the brokers' logs) says which survives. Logs without leader epochs
    (pre-0.11) tell no replica from another: every replica is a candidate."""
    if not writes_leader_epochs(cluster):
        return sorted(cluster.part(topic, partition).replicas)
    surv = surviving_replica(cluster, topic, partition)
    mine = _epoch_start(surv, surv.latest_epoch)
    out = [surv.broker]
    for b in cluster.part(topic, partition).replicas:
        r = cluster.replica(b, topic, partition)
        if b != surv.broker and r.latest_epoch == surv.latest_epoch:
            start = _epoch_start(r, r.latest_epoch)
            if mine is None or start is None or start <= mine:
                out.append(b)
    return sorted(out)


def _finding(kind: str, severity: str, topic, partition, brokers, first, last, records, explanation: str, **extra) -> dict:
    return {
        "kind": kind,
        "severity": severity,
        "topic": topic,
        "partition": partition,
        "brokers": sorted(brokers),
        "first_offset": first,
        "last_offset": last,
        "records": records,
        **extra,
        "explanation": explanation,
    }


def unclean_shutdowns(cluster: Cluster) -> list[dict]:
    return [
        _finding(
            "unclean_shutdown",
            "info",
            None,
            None,
            [b],
            None,
            None,
            None,
            f"broker {b} was killed (kill -9) and not restarted: no .kafka_cleanshutdown, checkpoints as last flushed, "
            "active-segment indexes left at their preallocated size",
            evidence_sources=["files"],
        )
        for b, br in sorted(cluster.brokers.items())
        if br.crashed
    ]


def unclean_elections(cluster: Cluster) -> list[dict]:
    out = []
    for e in cluster.events:
        if e["action"] != "leader" or not e["unclean"]:
            continue
        if "elected_from" in e:  # KRaft: the metadata log records it (sample_data.sim.controller)
            out.append(recorded_unclean_election(cluster, e))
            continue
        start, committed = e["epoch_start_offset"], e["committed_before"]
        lost = max(0, committed - start)
        sources = ["event_log"]
        if lost and any(
            r["topic"] == e["topic"] and r["partition"] == e["partition"] and start <= r["offset"] < committed
            for r in cluster.ledger
        ):
            sources.append("ledger")  # acked offsets at or after the new epoch's start
        hw = _old_lineage_hw_above(cluster, e) if lost else None
        leaders = [e["leader"]]
        if hw is not None and not _shows_crash(cluster, e, hw):
            # a replica of the old lineage still has a HW checkpoint above the epoch start: with leader epochs
            # the files alone prove the election unclean (a crash that lost data would show on the new leader);
            # they name the leader, or every replica they cannot tell from it
            sources = ["files", *sources[1:]]
            leaders = leader_candidates(cluster, e)
        out.append(
            _finding(
                "unclean_leader_election",
                "error" if lost else "warning",
                e["topic"],
                e["partition"],
                leaders,
                start,
                committed - 1 if lost else None,
                lost,
                f"broker {e['leader']} was elected leader for epoch {e['epoch']} from outside the ISR; its log ended at {start}, "
                f"below the committed offset {committed}"
                if lost
                else f"broker {e['leader']} was elected from outside the ISR",
                leader_epochs=[e["epoch"]],
                time_ms=e["t_ms"],
                evidence_sources=sources,
            )
        )
    return out


def recorded_unclean_election(cluster: Cluster, e: dict) -> dict:
    """An unclean election the KRaft metadata log records (leaderRecoveryState RECOVERING): the
    record names the new leader and the ISR it was elected from, and the new leader's files where
    its epoch starts; what it lost is told by the loss or divergence findings of that range. An
    error whatever was lost: the record alone says that records acknowledged by the ISR may be gone."""
    start = _epoch_start(cluster.replica(e["leader"], e["topic"], e["partition"]), e["epoch"])
    return _finding("unclean_leader_election", "error", e["topic"], e["partition"], [e["leader"], *e["prev_isr"]], start, None, None,
                    f"broker {e['leader']} was elected leader for epoch {e['epoch']} from outside the ISR {e['prev_isr']} (the "
                    "metadata log's PartitionChangeRecord, leaderRecoveryState RECOVERING)",
                    leader_epochs=[e["epoch"]], time_ms=e["t_ms"], evidence_sources=["files"])


def _old_lineage_hw_above(cluster: Cluster, e: dict) -> int | None:
    """The highest HW checkpoint above the election's epoch start that a replica still on the lineage
    before that epoch keeps (the files then show the epoch starting below committed records), or None."""
    reps = [cluster.replica(b, e["topic"], e["partition"]) for b in cluster.part(e["topic"], e["partition"]).replicas]
    hws = [r.ckpt_hw for r in reps if r.ckpt_hw is not None and r.ckpt_hw > e["epoch_start_offset"] and r.latest_epoch < e["epoch"]]
    return max(hws) if hws else None


def leader_candidates(cluster: Cluster, e: dict) -> list[int]:
    """The replicas the files cannot tell from the leader of the election's epoch: those starting the
    epoch at the same offset (followers that fetched its first batch without a gap look alike)."""
    mine = _epoch_start(cluster.replica(e["leader"], e["topic"], e["partition"]), e["epoch"])
    return sorted(b for b in cluster.part(e["topic"], e["partition"]).replicas
                  if _epoch_start(cluster.replica(b, e["topic"], e["partition"]), e["epoch"]) == mine)


def _shows_crash(cluster: Cluster, e: dict, hw: int) -> bool:
    """Whether the new leader's files show a crash that lost data below ``hw``: no clean-shutdown
    marker and a recovery point below it."""
    rep = cluster.replica(e["leader"], e["topic"], e["partition"])
    return not cluster.brokers[e["leader"]].clean_marker and rep.ckpt_recovery is not None and rep.ckpt_recovery < hw


def crash_losses(cluster: Cluster) -> list[dict]:
    """Clean elections of a leader whose log starts the epoch below the committed end because a power
    loss took its unflushed records (KIP-966's last replica standing): committed_data_lost_in_crash."""
    out = []
    lost_power: set[int] = set()
    for e in cluster.events:
        if e["action"] == "power_loss":
            lost_power.add(int(e["actor"].split("-")[1]))
        if e["action"] != "leader" or e["unclean"] or e["leader"] not in lost_power:
            continue
        start, committed = e["epoch_start_offset"], e["committed_before"]
        if start >= committed:
            continue
        seen = _old_lineage_hw_above(cluster, e) is not None
        out.append(
            _finding(
                "committed_data_lost_in_crash",
                "error",
                e["topic"],
                e["partition"],
                leader_candidates(cluster, e) if seen else [e["leader"]],
                start,
                committed - 1,
                committed - start,
                f"broker {e['leader']} lost its unflushed records in a power cut and was then elected cleanly for epoch "
                f"{e['epoch']}; its log ended at {start}, below the committed offset {committed}",
                leader_epochs=[e["epoch"]],
                time_ms=e["t_ms"],
                evidence_sources=["files"] if seen else ["event_log"],
            )
        )
    return out


def lost_markers(cluster: Cluster) -> list[dict]:
    """A transaction open in the surviving log (data after its producer's last marker) whose
    COMMIT/ABORT marker another replica holds after its first offset: transaction_marker_lost, at the
    pinned last stable offset (its first offset) to the end of its data there."""
    out = []
    for (topic, p), part in sorted(cluster.partitions.items()):
        surv = surviving_replica(cluster, topic, p)
        pids = {b.producer_id for b in surv.batches if b.transactional and not b.control}
        for pid in sorted(pids):
            start = Cluster._txn_start(surv, pid)
            data = [b for b in surv.batches if b.producer_id == pid and b.transactional and not b.control and b.base_offset >= start]
            if not data:
                continue
            holders = sorted(
                b for b in part.replicas if b != surv.broker
                and any(m.producer_id == pid and m.control and m.base_offset > data[0].base_offset
                        for m in cluster.replica(b, topic, p).batches)
            )
            if holders:
                out.append(
                    _finding(
                        "transaction_marker_lost",
                        "error",
                        topic,
                        p,
                        [surv.broker, *holders],
                        data[0].base_offset,
                        data[-1].last_offset,
                        None,
                        f"producer {pid}'s transaction is open in the surviving log (broker {surv.broker}) from offset "
                        f"{data[0].base_offset}; broker(s) {holders} hold its marker",
                        producers=[{"producer_id": pid, "producer_epoch": data[0].producer_epoch}],
                        evidence_sources=["files"],
                    )
                )
    return out


def acked_data_loss(cluster: Cluster) -> list[dict]:
    """Acked (ledger) or committed (once below a leader's HW) records the surviving log does not hold
    with their content; below-log-start, compacted and aborted offsets are not losses. When the
    files cannot single out the surviving log (``survivor_candidates``), an offset is a loss the
    files show only if it loses a record whichever candidate leads: not where one candidate holds
    every record wanted there (two candidates holding different acked records lose one of them)."""
    out = []
    by_tp: dict[tuple[str, int], set[tuple[int, tuple, str]]] = defaultdict(set)
    for row in cluster.ledger:
        by_tp[(row["topic"], row["partition"])].add((row["offset"], (row["key_sha256"], row["value_sha256"]), row["acks"]))
    for tp, done in cluster.committed.items():
        for off, content in done.items():
            by_tp[tp].add((off, content, "committed"))
    for (topic, p), wanted in sorted(by_tp.items()):
        surv = surviving_replica(cluster, topic, p)
        held = _content_map(surv)
        candidates = [_content_map(cluster.replica(b, topic, p)) for b in survivor_candidates(cluster, topic, p)]
        wanted_at: dict[int, set[tuple]] = defaultdict(set)
        for off, content, _ in wanted:
            wanted_at[off].add(content)
        excluded = cluster.compacted_away.get((topic, p), set()) | cluster.aborted.get((topic, p), set())
        lost: dict[tuple[int, tuple], set[str]] = defaultdict(set)
        for off, content, acks in wanted:
            if off < surv.log_start or off in excluded or held.get(off) == content:
                continue
            if any(all(m.get(off) == c for c in wanted_at[off]) for m in candidates):
                continue  # that candidate may be the surviving log, and loses nothing here
            lost[(off, content)].add(acks)
        if not lost:
            continue
        others = {r.broker: _content_map(r) for r in (cluster.replica(b, topic, p) for b in cluster.part(topic, p).replicas)}
        for first, last in _ranges(off for off, _ in lost):
            keys = [k for k in lost if first <= k[0] <= last]
            salvage = sorted(b for b, m in others.items() if b != surv.broker and all(m.get(o) == c for o, c in keys))
            acks = sorted({a for k in keys for a in lost[k]} - {"committed"}) or ["committed"]
            out.append(
                _finding(
                    "acked_data_loss",
                    "error",
                    topic,
                    p,
                    [surv.broker, *salvage],
                    first,
                    last,
                    len(keys),
                    f"{len(keys)} acknowledged/committed records at offsets {first}..{last} are not in the surviving log "
                    f"(broker {surv.broker}, latest leader epoch {surv.latest_epoch})"
                    + (
                        f"; still readable on broker(s) {salvage}, which will truncate them"
                        if salvage
                        else "; no replica holds them"
                    ),
                    acks=acks,
                    salvage_brokers=salvage,
                    surviving_broker=surv.broker,
                    surviving_candidates=survivor_candidates(cluster, topic, p),
                    evidence_sources=["ledger", "files"] if salvage else ["ledger"],
                )
            )
    return out


def replica_divergence(cluster: Cluster) -> list[dict]:
    """Offsets held by several replicas with different content, as contiguous ranges."""
    out = []
    for (topic, p), part in sorted(cluster.partitions.items()):
        maps = {b: _content_map(cluster.replica(b, topic, p)) for b in part.replicas}
        epochs = {b: {o: bt.epoch for o, (bt, _) in cluster.replica(b, topic, p).record_at().items()} for b in part.replicas}
        diverged: dict[int, frozenset[int]] = {}
        for off in sorted(set().union(*maps.values())):
            holders = {b: m[off] for b, m in maps.items() if off in m}
            if len(set(holders.values())) > 1:
                diverged[off] = frozenset(holders)
        runs: list[list] = []
        for off, who in diverged.items():
            if runs and off == runs[-1][1] + 1 and who == runs[-1][2]:
                runs[-1][1] = off
            else:
                runs.append([off, off, who])
        for first, last, who in runs:
            eps = sorted({epochs[b][o] for b in who for o in range(first, last + 1)}) if writes_leader_epochs(cluster) else []
            out.append(
                _finding(
                    "replica_divergence",
                    "error",
                    topic,
                    p,
                    who,
                    first,
                    last,
                    last - first + 1,
                    f"brokers {sorted(who)} hold different records at offsets {first}..{last}"
                    + (f" (leader epochs {eps})" if eps else " (the logs carry no leader epochs: KAFKA-1211)"),
                    leader_epochs=eps,
                    evidence_sources=["files"],
                )
            )
    return out


def leader_epoch_conflicts(cluster: Cluster) -> list[dict]:
    """Replicas whose leader-epoch caches give different start offsets to an epoch that holds
    records on each of them (an epoch holding no records may differ: benign). Pre-0.11 logs have
    no leader-epoch caches to disagree."""
    out = []
    if not writes_leader_epochs(cluster):
        return out
    for (topic, p), part in sorted(cluster.partitions.items()):
        starts: dict[int, dict[int, int]] = defaultdict(dict)
        for b in part.replicas:
            rep = cluster.replica(b, topic, p)
            held = {bt.epoch for bt in rep.batches}
            for e, start in epochs_from_start(rep.epochs, rep.log_start):
                if e in held:
                    starts[e][b] = start
        for e, by_broker in sorted(starts.items()):
            if len(set(by_broker.values())) > 1:
                lo, hi = min(by_broker.values()), max(by_broker.values())
                out.append(
                    _finding(
                        "leader_epoch_conflict",
                        "warning",
                        topic,
                        p,
                        list(by_broker),
                        lo,
                        hi - 1,
                        None,
                        f"brokers disagree on where leader epoch {e} starts: "
                        + ", ".join(f"broker {b} at {s}" for b, s in sorted(by_broker.items())),
                        leader_epochs=[e],
                        evidence_sources=["files"],
                    )
                )
    return out


def truncations_below_hw(cluster: Cluster) -> list[dict]:
    out = []
    for e in cluster.events:
        if e["action"] == "truncate" and e["to"] < e["hw_bound"]:
            last = min(e["from_leo"], e["hw_bound"]) - 1
            out.append(
                _finding(
                    "truncation_below_hw",
                    "warning",
                    e["topic"],
                    e["partition"],
                    [int(e["actor"].split("-")[1])],
                    e["to"],
                    last,
                    last - e["to"] + 1,
                    f"{e['actor']} truncated its log from {e['from_leo']} to {e['to']}, below the high watermark {e['hw_bound']} "
                    f"it knew or a replica had checkpointed ({e['reason']})",
                    time_ms=e["t_ms"],
                    status="happened",
                    evidence_sources=["event_log"],
                )
            )
    return out


def pending_truncations(cluster: Cluster) -> list[dict]:
    """Replicas that have not rejoined the surviving log and will truncate below the HW they
    checkpointed when they follow it (the cluster's own truncation rule, ``_truncation_offset``,
    then the leader's LEO for a fetch beyond it): the truncation is pending. Where the broker dirs
    cannot tell the surviving log (several candidates), which lineage a replica follows is what is
    not known: no pending truncation is told there (the restart preview leaves them out too)."""
    out = []
    for (topic, p), part in sorted(cluster.partitions.items()):
        if len(survivor_candidates(cluster, topic, p)) > 1:
            continue
        leader = surviving_replica(cluster, topic, p)
        for b in part.replicas:
            rep = cluster.replica(b, topic, p)
            if b == leader.broker or rep.ckpt_hw is None:
                continue
            target = min(cluster._truncation_offset(rep, leader), leader.leo)
            if target < min(rep.ckpt_hw, rep.leo):
                out.append(
                    _finding(
                        "truncation_below_hw",
                        "warning",
                        topic,
                        p,
                        [b],
                        target,
                        rep.ckpt_hw - 1,
                        rep.ckpt_hw - target,
                        f"broker-{b} has not rejoined: following broker-{leader.broker} it will truncate from {rep.leo} to {target}, "
                        f"below the high watermark {rep.ckpt_hw} it checkpointed",
                        status="pending",
                        evidence_sources=["files"],
                    )
                )
    return out


def damage_findings(problems: list[dict]) -> list[dict]:
    out = []
    for pr in problems:
        broker = int(pr["path"].split("/")[0].split("-")[1])
        topic, _, part = pr["path"].split("/")[1].rpartition("-")
        out.append(
            _finding(
                pr["kind"],
                "error",
                topic,
                int(part),
                [broker],
                None,
                None,
                None,
                pr["detail"],
                evidence=[{"broker": broker, "path": pr["path"], "position": pr["position"], "detail": pr["detail"]}],
                evidence_sources=["files"],
            )
        )
    return out


def consumer_reads(cluster: Cluster, found: list[dict]) -> list[dict]:
    """Groups whose latest progress (a consumer group's commit, a share group's start offset: the
    coordinators' ``group_progress`` events) lies past the first offset of a lost or divergent
    range of ``found``: consumer_read_lost_data over the offsets read past (ranges merged), an
    error when some of them no replica holds. Its brokers are the ranges' as the analyzer can name
    them (a loss whose surviving log the files cannot single out: every candidate and salvage broker)."""
    progress: dict[tuple, int] = {}
    for e in cluster.events:
        if e["action"] == "group_progress":
            progress[(e["share"], e["group"], e["topic"], e["partition"])] = e["offset"]
    ranges = [f for f in found if f["kind"] in ("acked_data_loss", "replica_divergence") and f["first_offset"] is not None]
    out = []
    for (share, group, topic, p), c in sorted(progress.items()):
        hit = [f for f in ranges if (f["topic"], f["partition"]) == (topic, p) and c > f["first_offset"]]
        if not hit:
            continue
        spans = _ranges(o for f in hit for o in range(f["first_offset"], min(f["last_offset"], c - 1) + 1))
        gone = any(f["kind"] == "acked_data_loss" and not f.get("salvage_brokers") for f in hit)
        brokers = set()
        for f in hit:
            cands = f.get("surviving_candidates") or []
            brokers |= set(cands) | set(f.get("salvage_brokers") or []) if len(cands) > 1 else set(f["brokers"])
        who = f"share group {group}'s start offset" if share else f"group {group}'s committed offset"
        out.append(_finding(
            "consumer_read_lost_data", "error" if gone else "warning", topic, p, brokers, spans[0][0], spans[-1][1],
            sum(b - a + 1 for a, b in spans),
            f"{who} on {topic}-{p} is {c}, past offsets {', '.join(f'{a}-{b}' for a, b in spans)} that were lost or diverged",
            evidence_sources=sorted({"files", *(s for f in hit for s in f["evidence_sources"])}),
        ))  # fmt: skip
    return out


def metadata_log_divergences(cluster: Cluster) -> list[dict]:
    """Committed metadata the quorum's leader lacks (``ControllerQuorum.committed_lost``)."""
    quorum = getattr(cluster, "quorum", None)
    if quorum is None:
        return []
    return [_finding("metadata_log_divergence", "error", "__cluster_metadata", 0, lost["brokers"], lost["first_offset"],
                     lost["last_offset"], lost["records"] or None,
                     f"committed metadata records on nodes {lost['holders']} that the leader's log (node {lost['leader_copy']}) lacks",
                     evidence_sources=["files"], salvage_brokers=lost["holders"])
            for lost in quorum.committed_lost()]


def expected_findings(cluster: Cluster, problems: list[dict]) -> list[dict]:
    """Every finding, each with a stable ``id`` (kind, where, first offset, brokers)."""
    found = (
        damage_findings(problems)
        + replica_divergence(cluster)
        + leader_epoch_conflicts(cluster)
        + acked_data_loss(cluster)
        + truncations_below_hw(cluster)
        + pending_truncations(cluster)
        + unclean_elections(cluster)
        + crash_losses(cluster)
        + lost_markers(cluster)
        + unclean_shutdowns(cluster)
    )
    found += consumer_reads(cluster, found)
    found += metadata_log_divergences(cluster)
    for f in found:
        f["id"] = f"{f['kind']}:{f['topic']}-{f['partition']}:{f['first_offset']}:{'-'.join(map(str, f['brokers']))}"
    return found


def must_not_report(cluster: Cluster, findings: list[dict]) -> list[dict]:
    """The benign differences present in this data set, each with why it is not a finding."""
    kinds = {(f["kind"], f["topic"], f["partition"]) for f in findings}
    out = []

    def add(kind, topic, p, why):
        if (kind, topic, p) not in kinds and {"kind": kind, "topic": topic, "partition": p, "why": why} not in out:
            out.append({"kind": kind, "topic": topic, "partition": p, "why": why})

    quorum = getattr(cluster, "quorum", None)
    if quorum is not None and not quorum.committed_lost():
        add("metadata_log_divergence", "__cluster_metadata", 0, "a copy of the metadata log that parts from the leader's holds only "
            "records never committed (a failover's uncommitted tail): Raft truncates them when that node next fetches")
    for e in cluster.events:
        if e["action"] == "leader" and e.get("elected_from") == "elr":
            add("unclean_leader_election", e["topic"], e["partition"], f"broker {e['leader']} was elected from the eligible leader "
                f"replicas {sorted([e['leader'], *e['elr']])} with the ISR empty (KIP-966): a clean election")
    for (topic, p), part in sorted(cluster.partitions.items()):
        reps = [cluster.replica(b, topic, p) for b in part.replicas]
        if any(r.ckpt_hw is not None and r.ckpt_hw < r.leo for r in reps):
            add(
                "checkpoint_inconsistent",
                topic,
                p,
                "a HW checkpoint below the LEO lags by design (flushed every 5 s, followers learn the HW a fetch late)",
            )
        lossy = {("truncation_below_hw", topic, p), ("acked_data_loss", topic, p)} & kinds
        if len({r.leo for r in reps}) > 1 and not lossy:
            add(
                "truncation_below_hw",
                topic,
                p,
                "a follower's LEO behind the leader's above the HW is replication lag, not truncation",
            )
        if len({tuple(r.epochs) for r in reps}) > 1:
            add(
                "leader_epoch_conflict",
                topic,
                p,
                "leader-epoch-checkpoint entries differ only for epochs that hold no records (a leader assigns its epoch before appending)",
            )
        if cluster.compacted_away.get((topic, p)):
            add("offset_gap", topic, p, "offsets removed by the log cleaner in a compacted topic")
            add("acked_data_loss", topic, p, "acked records removed by compaction (a later record has the same key)")
        if cluster.aborted.get((topic, p)):
            add("acked_data_loss", topic, p, "records inside an aborted transaction, though the producer saw them acked")
            add("hanging_transaction", topic, p, "every transaction ends with a COMMIT or ABORT marker")
        if any(b.control for r in reps for b in r.batches):
            add("offset_gap", topic, p, "offsets taken by transaction markers hold no data records")
            add("transaction_marker_lost", topic, p, "no transaction open in the surviving log has its marker on another replica")
        epochs: dict[int, set[int]] = {}
        for b in (b for r in reps for b in r.batches if b.producer_id >= 0 and not b.control):
            epochs.setdefault(b.producer_id, set()).add(b.producer_epoch)
        if any(len(e) > 1 for e in epochs.values()):
            add("duplicate_sequence", topic, p, "sequences start again at 0 with every producer epoch (transactions v2 "
                "bump it at each commit and abort): the same sequence at another epoch is no duplicate")
        if any(r.log_start > 0 for r in reps):
            add("acked_data_loss", topic, p, "records below the log start offset were removed by retention or deleteRecords")
            add("log_start_divergence", topic, p, "log start moved by retention or deleteRecords, consistently across replicas")
        if any(r.batches and r.batches[0].base_offset < r.log_start for r in reps):
            add("segment_gap", topic, p, "records still on disk below the log start offset (deleteRecords) are not live data")
        if not any(f["kind"] == "replica_divergence" and f["topic"] == topic and f["partition"] == p for f in findings):
            add("replica_divergence", topic, p, "replicas hold the same records wherever they overlap")
        if any(cluster.brokers[b].crashed for b in part.replicas):
            add(
                "index_mismatch",
                topic,
                p,
                "a crashed broker's active-segment indexes are preallocated and zero-padded: part of unclean_shutdown",
            )
    for d in cluster.damage:
        if d["kind"] == "rolled_before_kill":
            for kind in ("torn_tail", "segment_gap", "invalid_batch"):
                add(
                    kind,
                    d["topic"],
                    d["partition"],
                    f"broker {d['broker']} was killed right after a roll: a 0-byte active "
                    "segment and a 0-byte producer snapshot are crash artifacts (part of unclean_shutdown)",
                )
    failed = {(r["topic"], r["partition"]) for r in cluster.ledger_failed}
    for topic, p in sorted(failed):
        add("acked_data_loss", topic, p, "unacknowledged sends (ledger_failed.jsonl) are never lost data")
    retried = {(e["topic"], e["partition"]) for e in cluster.events if e["action"] == "retry"}
    for topic, p in sorted(retried):
        add(
            "duplicate_sequence",
            topic,
            p,
            "a non-idempotent producer's retry after a failover wrote records twice (no producer id or sequence to compare); acked once",
        )
    crashed = [b for b, br in sorted(cluster.brokers.items()) if br.crashed]
    if not crashed:
        add("unclean_shutdown", None, None, "every broker stopped cleanly (.kafka_cleanshutdown present)")
    else:
        for b, br in sorted(cluster.brokers.items()):
            if not br.crashed:
                out.append(
                    {
                        "kind": "unclean_shutdown",
                        "topic": None,
                        "partition": None,
                        "broker": b,
                        "why": f"broker {b} stopped cleanly (.kafka_cleanshutdown present)",
                    }
                )
    return out


def replica_summary(cluster: Cluster) -> dict:
    """Each replica as its files show it: without leader epochs (pre-0.11) every batch is in epoch
    -1 (no epoch) and there is no leader-epoch-checkpoint."""
    out: dict[str, dict] = {}
    epochs = writes_leader_epochs(cluster)
    for (b, topic, p), r in sorted(cluster.replicas.items()):
        by_epoch: dict[int, list[int]] = {}
        for bt in r.batches:
            lo_hi = by_epoch.setdefault(bt.epoch if epochs else -1, [bt.base_offset, bt.last_offset])
            lo_hi[1] = bt.last_offset
        out.setdefault(f"broker-{b}", {"clean_shutdown_marker": cluster.brokers[b].clean_marker, "partitions": {}})["partitions"][
            f"{topic}-{p}"
        ] = {
            "leo": r.leo,
            "hw": r.hw,
            "hw_checkpoint": r.ckpt_hw,
            "recovery_point": r.ckpt_recovery,
            "log_start": r.log_start,
            "log_start_checkpoint": r.ckpt_log_start,
            "cleaner_offset": r.cleaner_offset,
            "first_offset": r.batches[0].base_offset if r.batches else None,
            "leader_epoch_checkpoint": [list(e) for e in epochs_from_start(r.epochs, r.log_start)] if epochs else None,
            "batch_epoch_ranges": {str(k): v for k, v in by_epoch.items()},
            "records": sum(bt.count for bt in r.batches),
        }
    return out
