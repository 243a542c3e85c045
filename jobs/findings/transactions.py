"""Transactions left open: in the partitions' own logs (data with no marker, no producer state
holding it open) or in ``__transaction_state`` (a transaction the coordinator still has open long
after its timeout, by the coordinator's own clock: producers' CreateTime may be skewed); and
transactions whose marker was lost (open in the surviving log, ended per another replica or the
coordinator), which win over ``hanging_transaction`` for the same transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from jobs.replicas.replica_logs import live_segment_batches
from jobs.replicas.survivors import Survivor

from .model import Evidence, Finding
from .producers import of_keys, suspects

if TYPE_CHECKING:
    from .case import Case

FINDING_KINDS = {
    "hanging_transaction": "warning",
    "transaction_marker_lost": "error",
}


# Transaction timeout Kafka allows at most by default (transaction.max.timeout.ms): a transaction
# open longer than this against the partition's newest data should have been aborted.
TXN_MAX_TIMEOUT_MS = 15 * 60 * 1000
PENDING_FIELDS = ("base_offset", "last_offset", "max_timestamp", "path", "position", "producer_epoch")


def pending_transactions(batches: DataFrame, producer_states: DataFrame, runs: DataFrame) -> list[dict]:
    """Per replica and producer id, the transactional data after the producer's last marker in that
    replica's log (``pending``: base/last offset, max timestamp, path, position, producer epoch), with
    the partition's newest batch time and the open first offsets its producer snapshots hold.

    Only pending batches reach the driver: each producer's last marker is a hash aggregate, and
    the transactional batches past it a join. (Gathered into a list per producer, every batch of
    an idempotent producer, the default since Kafka 3.0, went through Spark's interpreted object
    aggregate, and every transactional batch to the driver.)"""
    key = ["topic", "partition", "broker", "producer_id"]
    all_batches = live_segment_batches(batches)
    b = all_batches.where(F.col("producer_id") >= 0)
    last_marker = b.where(F.col("is_control")).groupBy(*key).agg(F.max("base_offset").alias("last_marker"))
    data = b.where(F.col("is_transactional") & ~F.col("is_control")).select(
        *key, *PENDING_FIELDS).join(last_marker, key, "left").where(
        F.col("last_marker").isNull() | (F.col("base_offset") > F.col("last_marker")))
    newest = live_segment_batches(runs).groupBy("topic", "partition", "broker").agg(F.max("last_timestamp").alias("newest_ts"))
    ps = producer_states.where(F.col("current_txn_first_offset").isNotNull()).select(
        *key, F.col("current_txn_first_offset").alias("open_first")).groupBy(*key).agg(F.collect_set("open_first").alias("open_firsts"))
    rows = data.join(newest, ["topic", "partition", "broker"]).join(ps, key, "left").collect()
    groups: dict[tuple, dict] = {}
    for r in rows:
        g = groups.setdefault(tuple(r[k] for k in key), {
            "topic": r["topic"], "partition": r["partition"], "broker": r["broker"], "producer_id": r["producer_id"],
            "pending": [], "newest_ts": r["newest_ts"], "open_firsts": r["open_firsts"] or []})
        g["pending"].append({f: r[f] for f in PENDING_FIELDS})
    out = []
    for g in groups.values():
        g["pending"].sort(key=lambda d: d["base_offset"])
        out.append(g)
    return out


def hanging_transaction_findings(pending: list[dict], lost_markers: list[Finding] = ()) -> list[Finding]:
    """Transactional data after the producer's last marker, that no producer state holds open,
    and older than the longest transaction Kafka allows against the partition's newest data.
    ``pending``: ``pending_transactions``. A transaction ``transaction_marker_lost`` already names
    (its marker is known elsewhere: the stronger, more precise finding) is not reported again."""
    named = {(f.topic, f.partition, b, f.first_offset) for f in lost_markers for b in f.brokers}
    out = []
    for r in pending:
        first, last = r["pending"][0], max(r["pending"], key=lambda d: d["last_offset"])
        if first["base_offset"] in r["open_firsts"] or (r["topic"], r["partition"], r["broker"], first["base_offset"]) in named:
            continue
        if r["newest_ts"] is None or first["max_timestamp"] is None or r["newest_ts"] - first["max_timestamp"] < TXN_MAX_TIMEOUT_MS:
            continue
        out.append(Finding(
            kind="hanging_transaction", severity=FINDING_KINDS["hanging_transaction"], topic=r["topic"], partition=r["partition"], brokers=[r["broker"]],
            first_offset=first["base_offset"], last_offset=last["last_offset"],
            producers=[{"producer_id": r["producer_id"], "producer_epoch": first["producer_epoch"]}],
            first_timestamp=first["max_timestamp"], last_timestamp=last["max_timestamp"],
            evidence=[Evidence(r["broker"], first["path"], first["position"], "transactional data with no later commit/abort marker")],
            explanation=f"Producer {r['producer_id']} has transactional data from offset {first['base_offset']} with no commit or "
                        "abort marker, older than transaction.max.timeout.ms: the last stable offset is stuck there and "
                        "read_committed consumers stall.",
        ))
    return out


COMPLETE_TXN = ("CompleteCommit", "CompleteAbort")


def control_batches(batches: DataFrame, records: DataFrame) -> list[Row]:
    """Every live COMMIT/ABORT marker batch with its control type (a few rows per transaction)."""
    ctl = live_segment_batches(batches).where(F.col("is_control") & (F.col("producer_id") >= 0)).select(
        "topic", "partition", "broker", "producer_id", "producer_epoch", "base_offset", "path", "position")
    types = records.where(F.col("control_type").isNotNull()).select("path", F.col("batch_position").alias("position"), "control_type")
    return ctl.join(types, ["path", "position"], "left").collect()


def lost_marker_findings(pending: list[dict], markers: list[Row], txns: list[Row],
                         survivors: dict[tuple[str, int], Survivor]) -> list[Finding]:
    """``transaction_marker_lost``: a transaction open in the surviving log (data after the producer's
    last marker) whose COMMIT/ABORT marker a replica off the surviving lineage holds after its first
    offset, or that ``__transaction_state`` records complete (CompleteCommit/CompleteAbort of that
    producer id, at its epoch or a later one, written after the data), or handed over: the latest
    record of the transactional id that used this producer id (an earlier record of it, or the
    latest's PreviousProducerId, Kafka 4.4+, KAFKA-20310) is under another producer id, written
    after the data. The coordinator moves a transactional id to a new producer id only once every
    transaction of the old one has its markers: at an exhausted epoch, when a transactions v2
    transaction completes (``TransactionMetadata.prepareComplete``) or InitProducerId rotates it
    after aborting what was open. Such a transaction never ends on its own: the coordinator has
    nothing left to send, so the last stable offset stays pinned at its first offset. Transactions
    v2 needs nothing else: its marker carries the data's epoch + 1, which "at its epoch or a later
    one" takes. ``pending``: ``pending_transactions``; ``markers``: ``control_batches``; ``txns``:
    the latest ``__transaction_state`` record per transactional id, with ``producer_ids``, every
    producer id its records name; ``survivors``: ``survivors.survivors``."""
    by_pid: dict[int, list] = {}
    handed: dict[int, list] = {}  # producer id -> the latest record of its transactional id, now under another id
    for t in txns:
        if t["producer_id"] is not None:
            by_pid.setdefault(t["producer_id"], []).append(t)
        for old in {*(t["producer_ids"] or []), t["previous_producer_id"]} - {None, t["producer_id"]}:
            if old >= 0:
                handed.setdefault(old, []).append(t)
    out = []
    for r in pending:
        survivor = survivors.get((r["topic"], r["partition"]))
        candidates = {c["broker"] for c in survivor.candidates} if survivor else set()
        if r["broker"] not in candidates:
            continue  # open in a producer snapshot too: the broker believes it open, which is what pins the LSO
        first, last = r["pending"][0], max(r["pending"], key=lambda d: d["last_offset"])
        epoch = first["producer_epoch"]
        held = sorted((m for m in markers if (m["topic"], m["partition"], m["producer_id"]) == (r["topic"], r["partition"], r["producer_id"])
                       and m["broker"] not in candidates and m["base_offset"] > first["base_offset"] and m["producer_epoch"] >= epoch),
                      key=lambda m: (m["base_offset"], m["broker"]))
        after = [t for t in by_pid.get(r["producer_id"], []) + handed.get(r["producer_id"], [])
                 if t["last_update_ms"] is None or last["max_timestamp"] is None or t["last_update_ms"] >= last["max_timestamp"]]
        done = [t for t in after if t["producer_id"] != r["producer_id"] or (
            t["status_name"] in COMPLETE_TXN and t["producer_epoch"] is not None and t["producer_epoch"] >= epoch)]
        if not held and not done:
            continue
        tid = next((t["transactional_id"] for t in by_pid.get(r["producer_id"], []) + handed.get(r["producer_id"], [])), None)
        ev = [Evidence(r["broker"], first["path"], first["position"],
                       f"transactional data from offset {first['base_offset']} with no later COMMIT/ABORT marker in the surviving log")]
        ev += [Evidence(m["broker"], m["path"], m["position"], f"{(m['control_type'] or 'control').upper()} marker of producer "
                        f"{m['producer_id']} (epoch {m['producer_epoch']}) at offset {m['base_offset']}") for m in held[:3]]
        ev += [Evidence(t["broker"], t["path"], t["batch_position"], f"__transaction_state: {t['transactional_id']} {t['status_name']} "
                        f"(producer {t['producer_id']}, epoch {t['producer_epoch']}"
                        + (f", which took over from producer {r['producer_id']}" if t["producer_id"] != r["producer_id"] else "")
                        + f") at {t['last_update_ms']}") for t in done[:1]]
        if held:
            where = (f"broker {held[0]['broker']} holds its {(held[0]['control_type'] or 'control').upper()} marker at offset "
                     f"{held[0]['base_offset']}")
        elif done[0]["producer_id"] != r["producer_id"]:
            where = (f"__transaction_state records its transactional id {done[0]['status_name']} under producer id "
                     f"{done[0]['producer_id']}, which took over from {r['producer_id']} once its transactions had ended")
        else:
            where = f"__transaction_state records it {done[0]['status_name']}"
        tp = f"{r['topic']}-{r['partition']}"
        out.append(Finding(
            kind="transaction_marker_lost", severity=FINDING_KINDS["transaction_marker_lost"], topic=r["topic"], partition=r["partition"],
            brokers=[r["broker"], *(m["broker"] for m in held)], first_offset=first["base_offset"], last_offset=last["last_offset"],
            producers=[{"producer_id": r["producer_id"], "producer_epoch": epoch}],
            first_timestamp=first["max_timestamp"], last_timestamp=last["max_timestamp"], evidence=ev,
            explanation=f"The transaction of producer {r['producer_id']} (epoch {epoch}"
                        + (f", transactional id {tid}" if tid else "") + f") is open in the surviving log of {tp} on broker "
                        f"{r['broker']} from offset {first['base_offset']}, but {where}: the marker was lost (as after an unclean "
                        f"election), the last stable offset is pinned at {first['base_offset']} and read_committed consumers stop "
                        "there. Copy out what must be kept, then end it with: kafka-transactions.sh --bootstrap-server <broker> "
                        f"abort --topic {r['topic']} --partition {r['partition']} --start-offset {first['base_offset']}",
        ))
    return out


OPEN_TXN = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


def transaction_state_findings(txns: list[Row], collected_ms: int | None) -> list[Finding]:
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
            kind="hanging_transaction", severity=FINDING_KINDS["hanging_transaction"], brokers=[t["broker"]],
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


PRODUCER = ["topic", "partition", "broker", "producer_id"]


def pending_producers(rows: list[Row]) -> list[tuple]:
    """The (topic, partition, broker, producer id) keys with transactional data after their last
    marker, from ``producers.suspects`` rows (per producer epoch: a producer id's last marker may
    be in a later epoch than its data, as transactions v2 writes it)."""
    data: dict[tuple, int] = {}
    marker: dict[tuple, int] = {}
    for r in rows:
        k = tuple(r[c] for c in PRODUCER)
        if r["last_txn_data"] is not None:
            data[k] = max(data.get(k, r["last_txn_data"]), r["last_txn_data"])
        if r["last_marker"] is not None:
            marker[k] = max(marker.get(k, r["last_marker"]), r["last_marker"])
    return [k for k, last in data.items() if k not in marker or last > marker[k]]


def find(case: Case) -> list[Finding]:
    tables, history = case.tables, case.history
    # only the producers with data after their last marker are read batch by batch (none, in
    # most logs: the one aggregate over producers' batches said so)
    keys = pending_producers(suspects(case))
    pending = pending_transactions(of_keys(tables["batches"], case.spark, keys, PRODUCER), tables["producer_states"],
                                   tables["batch_runs"]) if keys else []
    lost = (lost_marker_findings(pending, control_batches(tables["batches"], tables["records"]), history.txns, case.survivors)
            if pending else [])
    return lost + hanging_transaction_findings(pending, lost) + transaction_state_findings(history.txns, history.collected_ms)
