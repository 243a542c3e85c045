"""The surviving log of each partition: the replica the others will follow.

It is the replica carrying the latest leader epoch (checkpoint or stamped batches; ties go to the
longer log): under KIP-101/279 every other replica truncates to its lineage when it next fetches,
so whatever it lacks is lost to the cluster even if another replica still has it on disk.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

SURVIVORS_SCHEMA = "topic string, partition int, survivor int, s_log_start long, s_compacted boolean"


def last_epoch(r) -> int:
    vals = [v for v in (r["last_epoch"], r["batch_max_epoch"]) if v is not None]
    return max(vals) if vals else -1


def _epoch_start(r, epoch: int) -> int:
    """Where ``epoch`` starts on this replica's checkpoint; 0 (neutral) when it does not say."""
    starts = [e["start_offset"] for e in (r["epoch_entries"] or []) if e["epoch"] == epoch]
    return min(starts) if starts else 0


def survivors(rl: list) -> dict[tuple[str, int], dict]:
    """Per partition, the replica whose log the others will follow."""
    best: dict[tuple[str, int], dict] = {}
    for r in rl:
        if r["dir_state"] != "live":
            continue
        key = (r["topic"], r["partition"])
        # Same latest epoch on several replicas: the leader's copy starts it earliest (a follower
        # that kept records of the old epoch starts the new one later: KAFKA-1211), then the longest.
        rank = (last_epoch(r), -_epoch_start(r, last_epoch(r)), r["leo"], r["clean_shutdown"], -r["broker"])
        if key not in best or rank > best[key]["_rank"]:
            best[key] = dict(r.asDict(), _rank=rank)
    return best


def survivors_frame(spark: SparkSession, surv: dict) -> DataFrame:
    """``survivors`` as a small DataFrame (one row per partition) to join record-level frames with."""
    rows = [(t, p, s["broker"], s["log_start_offset"], bool(s["compacted"])) for (t, p), s in surv.items()]
    return spark.createDataFrame(rows, SURVIVORS_SCHEMA)
