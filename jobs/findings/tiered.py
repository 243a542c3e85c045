"""Tiered storage (KIP-405): committed offsets that neither a replica's local log nor a finished
remote segment holds (``remote_log_gap``).

With tiered storage a partition's log start (log-start-offset-checkpoint) lies below its local log
start (the first local segment): the offsets between live in remote storage, and
``__remote_log_metadata`` (the ``remote_segments`` table) is the only account of which ranges a
copy finished (``COPY_SEGMENT_FINISHED``). A segment whose copy only started holds nothing a
consumer can fetch; one being deleted (DELETE_SEGMENT_*) is gone unless it lies below the log start,
where retention deleted it by design.

Only partitions that appear in ``__remote_log_metadata`` are judged: an untiered log whose first
segment lies above its checkpointed log start just had its log start moved (Kafka takes the larger
of the two on load), which is not a finding.

How sure: the remote storage itself is not collected, so a finished copy is taken at its word;
a gap is certain when the metadata topic was collected whole (every replica of its partition,
read up to its end). Offsets at or above the HW are never judged (they were not committed).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from pyspark.sql import Row
from pyspark.sql import functions as F

from jobs.replicas.survivors import brokers_text
from parsers.remote_log_metadata import COPY_SEGMENT_FINISHED, latest_segments

from .model import Evidence, Finding
from .ranges import interval_union

if TYPE_CHECKING:
    from .case import Case

FINDING_KINDS = {"remote_log_gap": "error"}

EVIDENCE_CAP = 5


def remote_gaps(replicas: list[Row], segments: list[dict]) -> list[tuple[int, int]]:
    """The offsets from the partition's log start up to its HW - 1 that no replica holds locally
    and no finished remote segment holds. ``replicas``: the partition's live replica_logs rows."""
    starts = [r["log_start_checkpoint"] for r in replicas if r["log_start_checkpoint"] is not None]
    hws = [r["hw_checkpoint"] for r in replicas if r["hw_checkpoint"] is not None]
    if not starts or not hws:
        return []
    lo, hi = max(starts), max(hws) - 1
    held = [(r["first_offset"], r["leo"] - 1) for r in replicas if r["first_offset"] is not None and r["leo"] > r["first_offset"]]
    held += [(s["start_offset"], s["end_offset"]) for s in segments if s["state"] == COPY_SEGMENT_FINISHED]
    gaps, at = [], lo
    for a, b in interval_union(held):
        if b < at:
            continue
        if a > at:
            gaps.append((at, min(a - 1, hi)))
        at = max(at, b + 1)
        if at > hi:
            break
    if at <= hi:
        gaps.append((at, hi))
    return [(a, b) for a, b in gaps if a <= b]


def gap_findings(replicas: list[Row], segments: list[dict], gaps: list[tuple[int, int]]) -> list[Finding]:
    """One finding per gap, naming the replicas' local starts and the remote segments in it."""
    out = []
    for lo, hi in gaps:
        inside = sorted((s for s in segments if s["start_offset"] <= hi and s["end_offset"] >= lo), key=lambda s: s["start_offset"])
        evidence = [Evidence(s["broker"], s["path"], s["position"],
                             f"__remote_log_metadata: remote segment {s['segment_id']} [{s['start_offset']}, {s['end_offset']}] "
                             f"is {s['state']}, not COPY_SEGMENT_FINISHED") for s in inside[:EVIDENCE_CAP]]
        evidence += [Evidence(r["broker"], None, None,
                              f"local log starts at {r['first_offset']}; log start checkpoint {r['log_start_checkpoint']}, "
                              f"HW checkpoint {r['hw_checkpoint']}") for r in replicas]  # fmt: skip
        brokers = sorted({r["broker"] for r in replicas})
        out.append(Finding(
            kind="remote_log_gap", severity=FINDING_KINDS["remote_log_gap"], topic=replicas[0]["topic"], partition=replicas[0]["partition"], brokers=brokers,
            first_offset=lo, last_offset=hi, records=hi - lo + 1, evidence=evidence,
            explanation=f"Offsets {lo}-{hi} lie between the log start and the high watermark (committed) but no replica "
                        f"({brokers_text(brokers)}) holds them locally and __remote_log_metadata records no finished copy of "
                        "them to remote storage: consumers fetching them get OFFSET_OUT_OF_RANGE or an error from the "
                        "remote storage manager.",
        ))  # fmt: skip
    return out


def find(case: Case) -> list[Finding]:
    rows = case.tables["remote_segments"].where(F.col("segment_id").isNotNull()).collect()
    if not rows:
        return []
    by_partition = latest_segments(rows)
    live: dict[tuple[str, int], list] = defaultdict(list)  # the tiered partitions' live replicas
    for r in case.replicas:
        if r["dir_state"] == "live" and (r["topic"], r["partition"]) in by_partition:
            live[(r["topic"], r["partition"])].append(r)
    out = []
    for key, replicas in sorted(live.items()):
        out += gap_findings(replicas, by_partition[key], remote_gaps(replicas, by_partition[key]))
    return out
