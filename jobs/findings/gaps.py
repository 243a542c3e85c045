"""Offsets missing inside one replica's log, or held twice by two of its segments.

Not reported: holes in compacted logs, below the log start, or left by transaction markers
(``jobs.replicas.offset_ranges`` explains those).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Row

from .model import Evidence, Finding

if TYPE_CHECKING:
    from .case import Case

FINDING_KINDS = {"segment_overlap": "error", "segment_gap": "warning", "offset_gap": "warning"}


def gap_findings(holes: list[Row]) -> list[Finding]:
    """One finding per unexplained hole of a replica's log (``Case.holes``): at a segment boundary
    (``segment_gap``) or inside a segment (``offset_gap``)."""
    out = []
    for hole in holes:
        kind = "segment_gap" if hole["at_segment_boundary"] else "offset_gap"
        n = hole["last_offset"] - hole["first_offset"] + 1
        out.append(Finding(
            kind=kind, severity=FINDING_KINDS[kind], topic=hole["topic"], partition=hole["partition"], brokers=[hole["broker"]],
            first_offset=hole["first_offset"], last_offset=hole["last_offset"], records=n,
            evidence=[Evidence(hole["broker"], hole["path"], hole["position"], f"offsets {hole['first_offset']}-{hole['last_offset']} missing before this batch")],
            explanation=f"{n} offsets are missing inside the log of a non-compacted topic; no transaction marker, "
                        "compaction or log-start move explains them.",
        ))
    return out


def segment_overlap_findings(segment_epochs: list[Row]) -> list[Finding]:
    """Two segments of one replica whose offsets overlap. ``segment_epochs``: ``Case.segment_epochs``
    (each segment's first and last offset are its runs' lowest and highest)."""
    spans: dict[tuple, list] = {}
    for r in segment_epochs:
        k = (r["topic"], r["partition"], r["broker"], r["path"])
        lo, hi = spans.get(k, (r["first_offset"], r["last_offset"]))
        spans[k] = (min(lo, r["first_offset"]), max(hi, r["last_offset"]))
    logs: dict[tuple, list] = {}
    for (topic, part, broker, path), (first, last) in spans.items():
        logs.setdefault((topic, part, broker), []).append((first, path, last))
    out = []
    for (topic, part, broker), segs in logs.items():
        segs.sort()
        for (_, path, last), (next_first, next_path, _) in zip(segs, segs[1:]):
            if next_first > last:
                continue
            out.append(Finding(
                kind="segment_overlap", severity=FINDING_KINDS["segment_overlap"], topic=topic, partition=part, brokers=[broker],
                first_offset=next_first, last_offset=last, records=last - next_first + 1,
                evidence=[Evidence(broker, next_path, 0, f"starts at {next_first}, before the end {last} of {path}")],
                explanation="Two segments of the same log hold the same offsets: a fetch or recovery went wrong and consumers "
                            "may read the same offsets twice with different content.",
            ))
    return out


def find(case: Case) -> list[Finding]:
    return gap_findings(case.holes) + segment_overlap_findings(case.segment_epochs)
