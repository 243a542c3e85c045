"""Replicas or brokers that cannot belong together: different topic ids or cluster ids."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from pyspark.sql import Row

from jobs.store.io import small_table

from .model import Evidence, Finding

if TYPE_CHECKING:
    from .case import Case

FINDING_KINDS = {"topic_id_mismatch": "error", "cluster_id_mismatch": "error"}


def topic_id_findings(replicas: list[Row]) -> list[Finding]:
    """Replicas of one partition whose partition.metadata names different topic ids."""
    by = defaultdict(dict)
    for r in replicas:
        if r["dir_state"] == "live" and r["topic_id"]:
            by[(r["topic"], r["partition"])][r["broker"]] = r["topic_id"]
    out = []
    for (topic, part), ids in by.items():
        if len(set(ids.values())) > 1:
            out.append(Finding(
                kind="topic_id_mismatch", severity=FINDING_KINDS["topic_id_mismatch"], topic=topic, partition=part, brokers=list(ids),
                evidence=[Evidence(b, None, None, f"partition.metadata topic_id {i}") for b, i in sorted(ids.items())],
                explanation=f"Replicas of {topic}-{part} carry different topic ids: one holds data of a deleted and re-created "
                            "topic of the same name, which Kafka will not mix.",
            ))
    return out


def cluster_id_findings(brokers: list[Row]) -> list[Finding]:
    """Collected brokers whose meta.properties name different cluster ids."""
    ids = {b["broker"]: b["cluster_id"] for b in brokers if b["cluster_id"]}
    if len(set(ids.values())) <= 1:
        return []
    return [Finding(
        kind="cluster_id_mismatch", severity=FINDING_KINDS["cluster_id_mismatch"], brokers=list(ids),
        evidence=[Evidence(b, None, None, f"meta.properties cluster.id {c}") for b, c in sorted(ids.items())],
        explanation="The collected brokers belong to different clusters (meta.properties cluster.id differs): "
                    "either the collection mixes clusters or a broker was re-formatted.",
    )]


def find(case: Case) -> list[Finding]:
    return topic_id_findings(case.replicas) + cluster_id_findings(small_table(case.out, "brokers", ["broker", "cluster_id"]))
