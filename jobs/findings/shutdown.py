"""A data broker's log dir without the clean-shutdown marker: Kafka recovers it at the next start.

Not reported: a KRaft controller-only node without the marker (it never writes one).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from .model import Evidence, Finding

if TYPE_CHECKING:
    from .case import Case

FINDING_KINDS = {"unclean_shutdown": "info"}


def unclean_shutdown_findings(replicas: list[Row], files: DataFrame, brokers: DataFrame) -> list[Finding]:
    """One finding per data broker with a log dir lacking ``.kafka_cleanshutdown`` (info, not damage).

    Kafka writes the marker into every log dir at a clean stop, so a JBOD broker's dirs lack it
    together: the broker, not each dir, is what stopped uncleanly, and the finding names its dirs.
    Controller-only KRaft nodes never write the marker, so a log dir counts only if it holds a
    partition other than the metadata log or any broker-level offset checkpoint.
    """
    # flags, not a set of kinds: a list or a set has no place in a hash aggregate's buffer, and
    # Spark's interpreted object aggregate costs ~12 µs a file (1.3 s at 90,000 files)
    flags = files.groupBy("broker", "log_dir").agg(
        F.max(F.col("kind") == "clean_shutdown").alias("marker"),
        F.max(F.col("kind").isin("replication_offset", "recovery_point", "log_start")).alias("broker_checkpoints"),
        F.max(F.when((F.col("topic").isNotNull()) & (F.col("topic") != "__cluster_metadata"), 1).otherwise(0)).alias("has_data"),
    )
    # the 0-byte files of a segment rolled just before the stop (evidence, where a dir lacks the
    # marker) come with the flags, in the same query: a Spark job fewer
    empty = files.where((F.col("size") == 0) & F.col("kind").isin("segment", "producer_snapshot")).select("broker", "log_dir", "path")
    rows = flags.unionByName(empty, allowMissingColumns=True).collect()
    kinds = [r for r in rows if r["path"] is None]
    by_dir = defaultdict(list)
    for r in replicas:
        by_dir[(r["broker"], r["log_dir"])].append(r)
    unclean = defaultdict(list)
    for k in sorted(kinds, key=lambda k: (k["broker"], k["log_dir"])):
        if (k["has_data"] or k["broker_checkpoints"]) and not k["marker"]:
            unclean[k["broker"]].append(k)
    empty_files: dict[tuple, list[str]] = defaultdict(list)
    for e in rows:
        if e["path"] is not None:
            empty_files[(e["broker"], e["log_dir"])].append(e["path"])
    out = []
    for broker, dirs in unclean.items():
        names = [k["log_dir"] for k in dirs]
        replicas_here = sorted((r for d in names for r in by_dir[(broker, d)]), key=lambda r: (r["topic"], r["partition"]))
        behind = [r for r in replicas_here if r["recovery_point"] is not None and r["recovery_point"] < r["leo"]]
        padded = [r for r in replicas_here if (r["index_padding_entries"] or 0) > 0]
        ev = [Evidence(broker, d, None, "no .kafka_cleanshutdown marker in this log dir") for d in names]
        for r in behind[:5]:
            ev.append(Evidence(broker, None, None,
                               f"{r['topic']}-{r['partition']}: recovery point {r['recovery_point']} behind LEO {r['leo']}"))
        for r in padded[:5]:
            ev.append(Evidence(broker, None, None,
                               f"{r['topic']}-{r['partition']}: active segment indexes still preallocated "
                               f"({r['index_padding_entries']} zero slots)"))
        for p in [p for k in dirs for p in empty_files[(broker, k["log_dir"])] if p][:5]:
            ev.append(Evidence(broker, p, 0, "0-byte file of a segment rolled just before the stop"))
        where = f"log dir {names[0]}" if len(names) == 1 else f"log dirs {', '.join(names)}"
        out.append(Finding(
            kind="unclean_shutdown", severity=FINDING_KINDS["unclean_shutdown"], brokers=[broker], evidence=ev,
            explanation=f"Broker {broker} did not shut down cleanly (no .kafka_cleanshutdown in {where}): Kafka runs log "
                        f"recovery from the recovery point at the next start; checkpoints on disk may be stale "
                        f"({len(behind)} partitions with recovery point behind LEO).",
        ))
    return out


def find(case: Case) -> list[Finding]:
    return unclean_shutdown_findings(case.replicas, case.tables["files"], case.tables["brokers"])
