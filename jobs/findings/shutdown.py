"""A data broker's log dir without the clean-shutdown marker: Kafka recovers it at the next start.

Not reported: a KRaft controller-only node without the marker (it never writes one).
"""

from __future__ import annotations

from collections import defaultdict

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .model import Evidence, Finding

KINDS = {"unclean_shutdown": "info"}


def unclean_shutdown_findings(rl: list, files: DataFrame, brokers: DataFrame) -> list[Finding]:
    """A data broker's log dir without ``.kafka_cleanshutdown`` (info, not damage).

    Controller-only KRaft nodes never write the marker, so a log dir counts only if it holds a
    partition other than the metadata log or any broker-level offset checkpoint.
    """
    kinds = files.groupBy("broker", "log_dir").agg(
        F.collect_set("kind").alias("kinds"),
        F.max(F.when((F.col("topic").isNotNull()) & (F.col("topic") != "__cluster_metadata"), 1).otherwise(0)).alias("has_data"),
        F.collect_list(F.when((F.col("size") == 0) & F.col("kind").isin("segment", "producer_snapshot"), F.col("path"))).alias(
            "empty_files"),
    ).collect()
    by_dir = defaultdict(list)
    for r in rl:
        by_dir[(r["broker"], r["log_dir"])].append(r)
    out = []
    for k in kinds:
        data_dir = k["has_data"] or bool({"replication_offset", "recovery_point", "log_start"} & set(k["kinds"]))
        if not data_dir or "clean_shutdown" in k["kinds"]:
            continue
        reps = sorted(by_dir.get((k["broker"], k["log_dir"]), []), key=lambda r: (r["topic"], r["partition"]))
        behind = [r for r in reps if r["recovery_point"] is not None and r["recovery_point"] < r["leo"]]
        padded = [r for r in reps if (r["index_padding_entries"] or 0) > 0]
        ev = [Evidence(k["broker"], k["log_dir"], None, "no .kafka_cleanshutdown marker in this log dir")]
        for r in behind[:5]:
            ev.append(Evidence(k["broker"], None, None,
                               f"{r['topic']}-{r['partition']}: recovery point {r['recovery_point']} behind LEO {r['leo']}"))
        for r in padded[:5]:
            ev.append(Evidence(k["broker"], None, None,
                               f"{r['topic']}-{r['partition']}: active segment indexes still preallocated "
                               f"({r['index_padding_entries']} zero slots)"))
        for p in [p for p in k["empty_files"] if p][:5]:
            ev.append(Evidence(k["broker"], p, 0, "0-byte file of a segment rolled just before the stop"))
        out.append(Finding(
            kind="unclean_shutdown", brokers=[k["broker"]], evidence=ev,
            explanation=f"Broker {k['broker']} did not shut down cleanly (no .kafka_cleanshutdown): Kafka runs log recovery "
                        f"from the recovery point at the next start; checkpoints on disk may be stale "
                        f"({len(behind)} partitions with recovery point behind LEO).",
        ))
    return out


def find(case) -> list[Finding]:
    return unclean_shutdown_findings(case.rl, case.tables["files"], case.tables["brokers"])
