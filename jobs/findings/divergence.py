"""Replicas of a partition holding different records at the same offsets (the logs forked).

Not findings (the contract's benign list): a follower behind the leader (offsets above its LEO),
records below a replica's log start, replicas' HW checkpoints lagging each other, leader-epoch
entries of empty epochs differing between replicas, holes in compacted logs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Row

from jobs.replicas.survivors import Survivor

from .evidence import producer_entries
from .kinds import REPLICA_DIVERGENCE
from .model import Evidence, Finding

if TYPE_CHECKING:
    from .case import Case

FINDING_KINDS = {
    REPLICA_DIVERGENCE: "error",
    # the log start moved consistently across replicas (retention, deleteRecords): context only
    "log_start_divergence": "info",
}


def fork_cause(has_leader_epochs: bool) -> str:
    """What can fork two logs. With leader epochs (message format v2, KIP-101) a follower no longer
    truncates to its high watermark, so KAFKA-1211 is out: only a leader whose epoch starts below
    committed records (an unclean election, or a crash that lost unflushed data, named by the
    election findings) forks them. Without leader epochs a cleanly elected leader's truncation to a
    stale HW can too."""
    if has_leader_epochs:
        return ("as when a leader starts its epoch below records another replica committed (an unclean election, or a "
                "crash that lost the new leader's unflushed data)")
    return "as after an unclean election or a truncation to a stale high watermark (KAFKA-1211: the logs carry no leader epochs)"


def divergence_findings(ranges: list[Row], survivors: dict[tuple[str, int], Survivor] | None = None) -> list[Finding]:
    """One finding per divergent offset range (``ranges``: ``Case.ranges``), merging replica pairs
    that diverge over the same range.

    ``survivors`` (``jobs.replicas.survivors.survivors``) names each partition's surviving log: the
    finding carries it as ``surviving_broker`` and the other replicas as ``salvage_brokers``, whose
    versions of the range the cluster will lose (``salvage`` exports them). Undetermined: only the
    replicas that are no candidate and differ from one are named for salvage."""
    merged: dict[tuple, dict] = {}
    for g in ranges:
        if g["status"] != "divergent":
            continue
        key = (g["topic"], g["partition"], g["first_offset"], g["last_offset"])
        m = merged.setdefault(key, {"brokers": set(), "epochs": set(), "ev": [], "bytes": 0, "records": g["offsets"],
                                    "producers": [], "ts": [], "pairs": []})
        m["brokers"] |= {g["broker_a"], g["broker_b"]}
        m["pairs"].append((g["broker_a"], g["broker_b"]))
        m["epochs"] |= set(g["epochs_a"] or []) | set(g["epochs_b"] or [])
        m["bytes"] = max(m["bytes"], (g["bytes_a"] or 0), (g["bytes_b"] or 0))
        for side in ("a", "b"):
            ev = Evidence(g[f"broker_{side}"], g[f"path_{side}"], g[f"position_{side}"],
                          f"leader epochs {sorted(g[f'epochs_{side}'] or [])} at offsets {g['first_offset']}-{g['last_offset']}")
            if all((e.broker, e.path) != (ev.broker, ev.path) for e in m["ev"]):
                m["ev"].append(ev)
            m["producers"] += producer_entries(g[f"producer_keys_{side}"], g[f"min_seq_{side}"], g[f"max_seq_{side}"])
            m["ts"] += [g[f"first_ts_{side}"], g[f"last_ts_{side}"]]
    out = []
    for (topic, part, first, last), m in merged.items():
        ts = [t for t in m["ts"] if t is not None]
        survivor = (survivors or {}).get((topic, part))
        candidates = {c["broker"] for c in survivor.candidates} if survivor else set(m["brokers"])
        # salvage: a replica whose records here differ from a candidate's (one that holds the
        # survivor's records, e.g. a follower on its lineage, differs only from the forked replica)
        salvage = {b for pair in m["pairs"] for b, other in (pair, pair[::-1]) if b not in candidates and other in candidates}
        out.append(Finding(
            kind="replica_divergence", severity=FINDING_KINDS["replica_divergence"], topic=topic, partition=part, brokers=sorted(m["brokers"]),
            first_offset=first, last_offset=last, records=m["records"], bytes=m["bytes"], leader_epochs=sorted(m["epochs"]),
            producers=_dedupe(m["producers"]), first_timestamp=min(ts) if ts else None, last_timestamp=max(ts) if ts else None,
            evidence=m["ev"], surviving_broker=survivor.broker if survivor else None,
            salvage_brokers=sorted(salvage),
            explanation=f"Brokers {', '.join(map(str, sorted(m['brokers'])))} hold different records at offsets {first}-{last} of "
                        f"{topic}-{part} (leader epochs {sorted(m['epochs'])}): the logs forked, {fork_cause(bool(m['epochs']))}; "
                        "the replica with the latest epoch is what survives.",
        ))
    return out


def _dedupe(producers: list[dict]) -> list[dict]:
    seen, out = set(), []
    for p in producers:
        k = (p["producer_id"], p["producer_epoch"])
        if k not in seen:
            seen.add(k)
            out.append(p)
    return out


def _divergences(case: Case) -> list[Finding]:
    return divergence_findings(case.ranges, case.survivors)


def divergences(case: Case) -> list[Finding]:
    """The replica_divergence findings with their surviving and salvage brokers, once per case: the
    consumer-impact rule (``loss``) names the same ranges and brokers as this detector reports."""
    return case.shared(_divergences)


def find(case: Case) -> list[Finding]:
    return divergences(case)
