"""Offsets missing inside one replica's log, or held twice by two of its segments.

Not reported: holes in compacted logs, below the log start, or left by transaction markers
(``jobs.replicas.offset_ranges`` explains those).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Row, Window
from pyspark.sql import functions as F

from jobs.replicas.replica_logs import live_segment_batches

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


def segment_overlap_findings(runs: DataFrame) -> list[Finding]:
    """Two segments of one replica whose offsets overlap. ``runs``: the ``batch_runs`` table (each
    segment's first and last offset are its runs' lowest and highest)."""
    b = live_segment_batches(runs)
    seg = b.groupBy("topic", "partition", "broker", "path").agg(
        F.min("first_offset").alias("first"), F.max("last_offset").alias("last"),
    )
    w = Window.partitionBy("topic", "partition", "broker").orderBy("first", "path")
    seg = seg.withColumn("next_first", F.lead("first").over(w)).withColumn("next_path", F.lead("path").over(w))
    out = []
    for r in seg.where(F.col("next_first") <= F.col("last")).collect():
        out.append(Finding(
            kind="segment_overlap", severity=FINDING_KINDS["segment_overlap"], topic=r["topic"], partition=r["partition"], brokers=[r["broker"]],
            first_offset=r["next_first"], last_offset=r["last"], records=r["last"] - r["next_first"] + 1,
            evidence=[Evidence(r["broker"], r["next_path"], 0, f"starts at {r['next_first']}, before the end {r['last']} of {r['path']}")],
            explanation="Two segments of the same log hold the same offsets: a fetch or recovery went wrong and consumers "
                        "may read the same offsets twice with different content.",
        ))
    return out


def find(case: Case) -> list[Finding]:
    return gap_findings(case.holes) + segment_overlap_findings(case.tables["batch_runs"])
