"""Transactions left open: in the partitions' own logs (data with no marker, no producer state
holding it open) or in ``__transaction_state`` (a transaction the coordinator still has open long
after its timeout, by the coordinator's own clock: producers' CreateTime may be skewed).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.replicas.replica_logs import live_segment_batches

from .model import Evidence, Finding

KINDS = {
    "hanging_transaction": "warning",
    "transaction_marker_lost": "error",  # reserved (the contract's vocabulary): no detector yet
}


# Transaction timeout Kafka allows at most by default (transaction.max.timeout.ms): a transaction
# open longer than this against the partition's newest data should have been aborted.
TXN_MAX_TIMEOUT_MS = 15 * 60 * 1000


def hanging_transaction_findings(batches: DataFrame, producer_states: DataFrame) -> list[Finding]:
    """Transactional data after the producer's last marker, that no producer state holds open,
    and older than the longest transaction Kafka allows against the partition's newest data."""
    all_batches = live_segment_batches(batches)
    b = all_batches.where(F.col("producer_id") >= 0)
    per = b.groupBy("topic", "partition", "broker", "producer_id").agg(
        F.max(F.when(F.col("is_control"), F.col("base_offset"))).alias("last_marker"),
        F.collect_list(F.when(F.col("is_transactional") & ~F.col("is_control"),
                              F.struct("base_offset", "last_offset", "max_timestamp", "path", "position",
                                       "producer_epoch"))).alias("data"),
    )
    newest = all_batches.groupBy("topic", "partition", "broker").agg(F.max("max_timestamp").alias("newest_ts"))
    ps = producer_states.where(F.col("current_txn_first_offset").isNotNull()).select(
        "topic", "partition", "broker", "producer_id", F.col("current_txn_first_offset").alias("open_first")
    ).groupBy("topic", "partition", "broker", "producer_id").agg(F.collect_set("open_first").alias("open_firsts"))
    rows = per.join(newest, ["topic", "partition", "broker"]).join(ps, ["topic", "partition", "broker", "producer_id"], "left").collect()
    out = []
    for r in rows:
        pending = [d for d in r["data"] if r["last_marker"] is None or d["base_offset"] > r["last_marker"]]
        if not pending:
            continue
        first = min(pending, key=lambda d: d["base_offset"])
        if r["open_firsts"] and first["base_offset"] in r["open_firsts"]:
            continue
        if r["newest_ts"] is None or first["max_timestamp"] is None or r["newest_ts"] - first["max_timestamp"] < TXN_MAX_TIMEOUT_MS:
            continue
        last = max(pending, key=lambda d: d["last_offset"])
        out.append(Finding(
            kind="hanging_transaction", topic=r["topic"], partition=r["partition"], brokers=[r["broker"]],
            first_offset=first["base_offset"], last_offset=last["last_offset"],
            producers=[{"producer_id": r["producer_id"], "producer_epoch": first["producer_epoch"]}],
            first_timestamp=first["max_timestamp"], last_timestamp=last["max_timestamp"],
            evidence=[Evidence(r["broker"], first["path"], first["position"], "transactional data with no later commit/abort marker")],
            explanation=f"Producer {r['producer_id']} has transactional data from offset {first['base_offset']} with no commit or "
                        "abort marker, older than transaction.max.timeout.ms: the last stable offset is stuck there and "
                        "read_committed consumers stall.",
        ))
    return out


OPEN_TXN = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


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


def find(case) -> list[Finding]:
    t, h = case.tables, case.history
    return (hanging_transaction_findings(t["batches"], t["producer_states"])
            + transaction_state_findings(h["txns"], h["collected_ms"]))
