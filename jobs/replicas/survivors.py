"""The surviving log of each partition: the replica the others will follow.

It is the current leader's replica: the one the KRaft metadata log names leader of its latest
epoch when collected, else the replica carrying the latest leader epoch (checkpoint or stamped
batches), of several the leader of that epoch by the evidence order of ``epoch_lineage`` (logs,
earliest checkpoint start, first batch at that start). Under KIP-101/279 every other replica
truncates to its lineage when it next fetches, so whatever it lacks is lost to the cluster even if
another replica still has it on disk (that replica is where it can be salvaged). When the evidence
cannot single it out, it is *undetermined*: the replicas it may be are the candidates, and only
what every candidate lacks is reported lost. Never a guess by broker id.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.store.io import local_frame

from .epoch_lineage import LeaderEpoch

SURVIVORS_SCHEMA = T.StructType([
    T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()), T.StructField("survivor", T.IntegerType()),
    T.StructField("s_log_start", T.LongType()), T.StructField("s_compacted", T.BooleanType()),
    T.StructField("s_candidates", T.IntegerType()),
])

# how epoch_lineage.leader_evidence reads in an explanation
LEADER_EVIDENCE = {
    "metadata_log": "per the KRaft metadata log",
    "broker_log": "per the brokers' logs",
    "leader_epoch_checkpoint": "its leader-epoch-checkpoint starts that epoch earliest",
    "first_batch": "it alone holds that epoch's first batch at the epoch's start offset",
}


def last_epoch(r) -> int:
    vals = [v for v in (r["last_epoch"], r["batch_max_epoch"]) if v is not None]
    return max(vals) if vals else -1


def brokers_text(brokers) -> str:
    return ", ".join(map(str, sorted(brokers)))


@dataclass(frozen=True)
class Survivor:
    """A partition's surviving log (module doc): the replica the others will follow, or the
    replicas it may be when the evidence cannot single one out."""

    broker: int | None  # its broker; None when undetermined
    candidates: list[Row]  # replica_logs rows: that replica, or every replica it may be
    epoch: int  # the latest leader epoch the partition's replicas carry (-1: none)
    why: str  # the evidence that decides it (or why nothing does), in words


def survivors(replicas: list[Row], lineage: list[Row], current: dict[tuple[str, int], LeaderEpoch]) -> dict[tuple[str, int], Survivor]:
    """Per partition, the replica whose log the others will follow (module doc). ``replicas``:
    replica_logs rows; ``lineage``: epoch_lineage rows; ``current``: ``epoch_lineage.current_leaders``."""
    live: dict[tuple[str, int], list] = defaultdict(list)
    for r in replicas:
        if r["dir_state"] == "live":
            live[(r["topic"], r["partition"])].append(r)
    leaders = {(row["topic"], row["partition"], row["leader_epoch"]): (row["likely_leader"], row["leader_evidence"])
               for row in lineage if row["likely_leader"] is not None}
    out: dict[tuple[str, int], Survivor] = {}
    for key, rs in live.items():
        top = max(last_epoch(r) for r in rs)
        carriers = [r for r in rs if last_epoch(r) == top]
        here = {r["broker"]: r for r in rs}
        leading = current.get(key)
        lead = leaders.get((*key, top))
        if leading is not None and leading.epoch >= top and leading.leader in here:
            pick, why = here[leading.leader], f"broker {leading.leader} leads epoch {leading.epoch} per the KRaft metadata log"
        elif len(carriers) == 1:
            pick, why = carriers[0], f"broker {carriers[0]['broker']} alone carries the latest leader epoch {top}"
        elif lead is not None and lead[0] in {r["broker"] for r in carriers}:
            pick, why = here[lead[0]], f"broker {lead[0]} led the latest epoch {top}: {LEADER_EVIDENCE[lead[1]]}"
        else:
            pick = None
            carry = (f"all carry the latest leader epoch {top}" if top >= 0 else
                     "carry no leader epochs (message format before v2, pre-0.11 Kafka)")
            why = (f"brokers {brokers_text(r['broker'] for r in carriers)} {carry} and "
                   + (f"broker {lead[0]}, which led it ({LEADER_EVIDENCE[lead[1]]}), was not collected" if lead is not None
                      else "nothing collected tells which one leads it (the KRaft metadata log or the brokers' logs would)"))
        out[key] = Survivor(broker=None if pick is None else pick["broker"], candidates=carriers if pick is None else [pick],
                            epoch=top, why=why)
    return out


def surviving_log_text(survivor: Survivor) -> str:
    """The surviving log in words, with the evidence that decides it (or why nothing does)."""
    if survivor.broker is not None:
        return f"the surviving log on broker {survivor.broker} ({survivor.why})"
    return f"the surviving log, which is undetermined ({survivor.why})"


def survivors_frame(spark: SparkSession, survivors: dict[tuple[str, int], Survivor]) -> DataFrame:
    """``survivors`` as a small DataFrame to join record-level frames with: one row per partition and
    surviving-log candidate, ``survivor, s_log_start, s_compacted`` and ``s_candidates`` (how many
    there are: an offset is lost only when it is lost on each, ``lost_on_every_candidate``)."""
    rows = [(t, p, c["broker"], c["log_start_offset"], bool(c["compacted"]), len(s.candidates))
            for (t, p), s in survivors.items() for c in s.candidates]
    return local_frame(spark, rows, SURVIVORS_SCHEMA)


def lost_on_every_candidate(lost: DataFrame) -> DataFrame:
    """Rows of lost offsets (one per surviving-log candidate and holder) kept where the offset loses
    a committed record on every candidate: whichever of them leads, the cluster lost a record
    there (two candidates holding different committed records at one offset lose one of them)."""
    w = Window.partitionBy("topic", "partition", "offset")
    return lost.withColumn("_on", F.size(F.collect_set("survivor").over(w))).where(F.col("_on") == F.col("s_candidates")).drop(
        "_on", "s_candidates")
