"""Before you restart: what each replica that is not the surviving log will truncate when it
rejoins as a follower of the current leader, the records that destroys, and who else holds them.

The rule is Kafka's own, replayed on the files (``AbstractFetcherThread.getOffsetTruncationState``
with ``LeaderEpochFileCache.endOffsetFor`` on both sides):

- ``leader_epoch`` (KIP-101/KIP-279): the follower asks the leader for the end offset of its latest
  epoch; the leader answers (largest epoch <= asked, start of its next epoch or its LEO). When the
  follower knows that epoch it truncates to min(leader's end, its own end of that epoch, its LEO)
  and is done; when it does not (its lineage diverged), it truncates to its own end of the largest
  epoch below the answer and asks again with what is left. So a latest epoch the leader never had
  falls back to the end of the leader's previous epoch.
- ``high_watermark``: a log without leader epochs (message format v0/v1, before 0.11) or a leader
  that cannot answer (``UNDEFINED_EPOCH_OFFSET``) truncates to the follower's HW checkpoint (0 when
  there is none, as ``Partition.createLogIfNotExists`` starts it).

Either way a fetch offset above the leader's LEO is then out of range and truncates to it
(``ReplicaFetcherThread`` OFFSET_OUT_OF_RANGE handling). The epochs a replica starts with are its
leader-epoch-checkpoint, plus what recovery re-assigns from the batches above it (``LogLoader``
calls ``assign`` for every recovered batch): a crashed broker's checkpoint can miss its last epoch.

``preview`` is pure (collected rows in, plain rows out, testable without Spark); ``build`` is the
thin Spark wrapper that counts the destroyed records and who else holds the same batches.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.store.io import local_frame
from jobs.store.tables import RESTART_PREVIEW_SCHEMA

from .compare import BATCH_KEY
from .replica_logs import live_segment_batches
from .survivors import Survivor

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
LEADER_EPOCH, HIGH_WATERMARK = "leader_epoch", "high_watermark"

Epochs = list[tuple[int, int]]  # (epoch, start offset), as in leader-epoch-checkpoint

# (topic, partition, broker, truncate_to) of each replica a restart would truncate (``destroyed``)
CUTS = T.StructType([T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
                     T.StructField("broker", T.IntegerType()), T.StructField("truncate_to", T.LongType())])


@dataclass(frozen=True)
class Truncation:
    truncate_to: int
    rule: str
    epochs_asked: tuple[int, ...] = ()


def end_offset_for(epochs: Epochs, leo: int, requested: int) -> tuple[int, int]:
    """``LeaderEpochFileCache.endOffsetFor``: (largest epoch <= ``requested``, the start of the
    first epoch above it, or the LEO for the latest epoch); a requested epoch below every entry
    answers itself with the first entry's start; UNDEFINED when nothing above it is known."""
    if requested == UNDEFINED_EPOCH or not epochs:
        return UNDEFINED
    if epochs[-1][0] == requested:
        return requested, leo
    higher = next((start for epoch, start in epochs if epoch > requested), None)
    if higher is None:
        return UNDEFINED
    floor = [epoch for epoch, _ in epochs if epoch <= requested]
    return (floor[-1] if floor else requested), higher


def truncate_from_end(epochs: Epochs, offset: int) -> Epochs:
    """``LeaderEpochFileCache.truncateFromEnd``: entries starting at or after ``offset`` go."""
    return [(e, s) for e, s in epochs if s < offset]


def recovered_epochs(checkpoint: Epochs, batch_starts: Epochs) -> Epochs:
    """The epoch cache after log recovery: the checkpoint, then ``assign`` of every later epoch the
    batches carry (a newer epoch starting at or after the latest entry is appended)."""
    epochs = sorted(checkpoint, key=lambda x: x[1])
    for epoch, start in sorted(batch_starts, key=lambda x: (x[1], x[0])):
        if epoch >= 0 and (not epochs or (epoch > epochs[-1][0] and start >= epochs[-1][1])):
            epochs.append((epoch, start))
    return epochs


def truncation(follower: Epochs, leo: int, hw: int | None, leader: Epochs, leader_leo: int) -> Truncation:
    """Where a follower (its epochs, LEO and HW checkpoint) truncates when it follows ``leader``
    (its epochs and LEO), by the module doc's rule."""
    hw_offset = min(hw or 0, leo)
    if not follower or not leader:
        return Truncation(min(hw_offset, leader_leo), HIGH_WATERMARK)
    epochs, end, asked = list(follower), leo, []
    while epochs:
        ask = epochs[-1][0]
        asked.append(ask)
        l_epoch, l_end = end_offset_for(leader, leader_leo, ask)
        if l_end == UNDEFINED_EPOCH_OFFSET:
            return Truncation(min(hw_offset, end, leader_leo), HIGH_WATERMARK, tuple(asked))
        f_epoch, f_end = end_offset_for(epochs, end, l_epoch)
        if f_end == UNDEFINED_EPOCH_OFFSET:  # the follower tracks no epoch that old: the leader's offset
            return Truncation(min(l_end, end, leader_leo), LEADER_EPOCH, tuple(asked))
        if f_epoch == l_epoch:
            return Truncation(min(f_end, l_end, end, leader_leo), LEADER_EPOCH, tuple(asked))
        end = min(f_end, end)  # diverged: truncate to the end of its epoch below the answer, ask again
        epochs = truncate_from_end(epochs, end)
    return Truncation(min(end, leader_leo), LEADER_EPOCH, tuple(asked))


def preview(replicas: list[Row], survivors: dict[tuple[str, int], Survivor], batch_epochs: dict | None = None) -> list[dict]:
    """One row per live replica that is not its partition's surviving log (``survivors``), with the
    truncation it would do. ``replicas``: replica_logs rows; ``batch_epochs``: (topic, partition, broker)
    -> [(epoch, first base offset)] from the batches. Partitions whose surviving log is undetermined
    are left out: which lineage wins is exactly what is not known there."""
    batch_epochs = batch_epochs or {}
    by_key = {(r["topic"], r["partition"], r["broker"]): r for r in replicas if r["dir_state"] == "live"}

    def epochs_of(r) -> Epochs:
        cp = [(int(e["epoch"]), int(e["start_offset"])) for e in (r["epoch_entries"] or [])]
        return recovered_epochs(cp, batch_epochs.get((r["topic"], r["partition"], r["broker"]), []))

    out = []
    for (topic, part, broker), r in sorted(by_key.items()):
        survivor = survivors.get((topic, part))
        if survivor is None or survivor.broker is None or survivor.broker == broker:
            continue
        lead = by_key[(topic, part, survivor.broker)]
        t = truncation(epochs_of(r), r["leo"], r["hw_checkpoint"], epochs_of(lead), lead["leo"])
        out.append({"topic": topic, "partition": part, "broker": broker, "leader": survivor.broker, "leo": r["leo"],
                    "truncate_to": t.truncate_to, "rule": t.rule, "epochs_asked": list(t.epochs_asked)})
    return out


def sentence(row: dict) -> str | None:
    """What an operator reads before restarting the broker; None when nothing would be destroyed."""
    n = row["records_destroyed"]
    if not n:
        return None
    head = (f"Restarting broker {row['broker']} truncates {row['topic']}-{row['partition']} from {row['leo']} to "
            f"{row['truncate_to']} (rule {row['rule']}): {n} record{'s' if n != 1 else ''}")
    held = [b for b in row["held_elsewhere"] if b != row["leader"]]
    if row["records_nowhere_else"] == n:
        return f"{head} that no other replica holds — run salvage first."
    if row["records_nowhere_else"]:
        return f"{head}, {row['records_nowhere_else']} of which no other replica holds — run salvage first."
    if row["leader"] in row["held_elsewhere"]:
        return f"{head} that leader broker {row['leader']} holds too: it fetches them again, nothing is lost."
    return (f"{head} that only broker{'s' if len(held) > 1 else ''} {', '.join(map(str, held))} also "
            "hold{} (not the leader's log) — run salvage first.".format("" if len(held) > 1 else "s"))


def finding_for(row: dict, lossy: list) -> str | None:
    """The id of the first of ``lossy`` (the loss findings first, then the divergences: see
    ``build``) on the partition whose offsets overlap what this truncation destroys."""
    lo, hi = row["truncate_to"], row["leo"] - 1
    for f in lossy:
        if ((f.topic, f.partition) == (row["topic"], row["partition"]) and f.first_offset is not None
                and f.first_offset <= hi and (f.last_offset if f.last_offset is not None else f.first_offset) >= lo):
            return f.id
    return None


def batch_epoch_starts(segment_epochs: list) -> dict:
    """(topic, partition, broker) -> [(epoch, first base offset)] of the live segments' batches
    (``segment_epochs``: ``jobs.findings.case.Case.segment_epochs``, per segment and epoch)."""
    starts: dict = {}
    for r in segment_epochs:
        epoch = r["partition_leader_epoch"]
        if epoch is not None and epoch >= 0:
            k = (r["topic"], r["partition"], r["broker"], epoch)
            starts[k] = min(starts.get(k, r["first_offset"]), r["first_offset"])
    out: dict = {}
    for (topic, part, broker, epoch), start in starts.items():
        out.setdefault((topic, part, broker), []).append((epoch, start))
    return out


def destroyed(spark, batches: DataFrame, rows: list[dict]) -> dict:
    """Per (topic, partition, broker) of ``rows``: data records at or above ``truncate_to`` and the
    brokers holding each such batch as it is (same offsets and CRC: a follower appends the leader's
    batches unchanged, ``jobs.replicas.compare``). Returns records, held_elsewhere, nowhere_else."""
    cut = [(r["topic"], r["partition"], r["broker"], r["truncate_to"]) for r in rows if r["truncate_to"] < r["leo"]]
    if not cut:
        return {}
    b = live_segment_batches(batches).where(~F.col("is_control")).select(
        "topic", "partition", "broker", "base_offset", "last_offset", "crc", "record_count")
    cuts = local_frame(spark, cut, CUTS)
    mine = b.join(cuts, ["topic", "partition", "broker"]).where(F.col("last_offset") >= F.col("truncate_to"))
    n = F.least(F.col("record_count"), F.col("last_offset") - F.greatest("base_offset", "truncate_to") + 1)
    others = b.select("topic", "partition", F.col("broker").alias("holder"), "base_offset", "last_offset", "crc")
    per_batch = mine.withColumn("n", n).join(others, BATCH_KEY, "left").groupBy(
        "topic", "partition", "broker", "base_offset").agg(
        F.first("n").alias("n"), F.collect_set(F.when(F.col("holder") != F.col("broker"), F.col("holder"))).alias("holders"))
    agg = per_batch.groupBy("topic", "partition", "broker").agg(
        F.sum("n").alias("records"), F.count("*").alias("batches"),
        F.sum(F.when(F.size("holders") == 0, F.col("n")).otherwise(0)).alias("nowhere_else"),
        F.flatten(F.collect_list("holders")).alias("holders"))
    out = {}
    for r in agg.collect():
        counts: dict[int, int] = {}
        for h in r["holders"]:
            counts[h] = counts.get(h, 0) + 1
        out[(r["topic"], r["partition"], r["broker"])] = {
            "records": int(r["records"]), "nowhere_else": int(r["nowhere_else"]),
            "held_elsewhere": sorted(h for h, c in counts.items() if c == r["batches"])}
    return out


def _planned(case) -> list[dict]:
    return preview(case.replicas, case.survivors, batch_epoch_starts(case.segment_epochs))


def planned(case) -> list[dict]:
    """``preview`` of a case, once: the pending truncations (``truncation_below_hw``) read the same
    rows the restart_preview table is built from, so the two cannot disagree."""
    return case.shared(_planned)


def build_rows(case, lossy: list) -> list[tuple]:
    """The restart_preview table of a case as rows (tuples in ``RESTART_PREVIEW_SCHEMA``'s field
    order), ``finding_id`` linking the findings it destroys: ``lossy``, the findings whose offsets
    name lost or diverged records, in the order one is named (``jobs.findings.kinds.LOSS_KINDS``:
    the findings room hands them down, this room knows no kind)."""
    rows = [dict(r) for r in planned(case)]
    lost = destroyed(case.spark, case.tables["batches"], rows)
    for row in rows:
        d = lost.get((row["topic"], row["partition"], row["broker"]), {"records": 0, "nowhere_else": 0, "held_elsewhere": []})
        row.update(records_destroyed=d["records"], held_elsewhere=d["held_elsewhere"], records_nowhere_else=d["nowhere_else"])
        row["finding_id"] = finding_for(row, lossy) if d["records"] else None
        row["sentence"] = sentence(row)
    return [tuple(r[f.name] for f in RESTART_PREVIEW_SCHEMA) for r in rows]


def build(case, lossy: list) -> DataFrame:
    """``build_rows`` as a DataFrame."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return local_frame(case.spark, build_rows(case, lossy), from_arrow_schema(RESTART_PREVIEW_SCHEMA))
