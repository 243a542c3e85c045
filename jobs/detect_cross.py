"""Findings across the replicas of a partition: divergence, committed data lost, unclean elections.

The partition's *surviving log* is the current leader's replica: the one the KRaft metadata log
names leader of its latest epoch when collected, else the replica carrying the latest leader
epoch (checkpoint or stamped batches), of several the leader of that epoch by the evidence order
of ``epoch_lineage`` (logs, earliest checkpoint start, first batch at that start). Under
KIP-101/279 every other replica truncates to its lineage when it next fetches, so whatever it
lacks is lost to the cluster even if another replica still has it on disk (that replica is where
it can be salvaged). When the evidence cannot single it out, it is *undetermined*: the replicas
it may be are the candidates, and only what every candidate lacks is reported lost.

Not findings (the contract's benign list): a follower behind the leader (offsets above its LEO),
records below a replica's log start, replicas' HW checkpoints lagging each other, leader-epoch
entries of empty epochs differing between replicas, holes in compacted logs.
"""

from __future__ import annotations

from collections import defaultdict

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .findings import Evidence, Finding


def last_epoch(r) -> int:
    vals = [v for v in (r["last_epoch"], r["batch_max_epoch"]) if v is not None]
    return max(vals) if vals else -1


# how epoch_lineage.leader_evidence reads in an explanation
LEADER_EVIDENCE = {
    "metadata_log": "per the KRaft metadata log",
    "broker_log": "per the brokers' logs",
    "leader_epoch_checkpoint": "its leader-epoch-checkpoint starts that epoch earliest",
    "first_batch": "it alone holds that epoch's first batch at the epoch's start offset",
}


def _brokers_text(brokers) -> str:
    return ", ".join(map(str, sorted(brokers)))


def survivors(rl: list, lineage: list, current: dict[tuple[str, int], tuple[int, int]]) -> dict[tuple[str, int], dict]:
    """Per partition, the replica whose log the others will follow (module doc): ``broker`` (None
    when undetermined), ``candidates`` (replica_logs rows: that replica, or every replica it may
    be) and ``why`` (the evidence, in words). ``current``: ``epoch_lineage.current_leaders``."""
    reps: dict[tuple[str, int], list] = defaultdict(list)
    for r in rl:
        if r["dir_state"] == "live":
            reps[(r["topic"], r["partition"])].append(r)
    leaders = {(row["topic"], row["partition"], row["leader_epoch"]): (row["likely_leader"], row["leader_evidence"])
               for row in lineage if row["likely_leader"] is not None}
    out: dict[tuple[str, int], dict] = {}
    for key, rs in reps.items():
        top = max(last_epoch(r) for r in rs)
        carriers = [r for r in rs if last_epoch(r) == top]
        here = {r["broker"]: r for r in rs}
        cur = current.get(key)
        lead = leaders.get((*key, top))
        if cur is not None and cur[1] >= top and cur[0] in here:
            pick, why = here[cur[0]], f"broker {cur[0]} leads epoch {cur[1]} per the KRaft metadata log"
        elif len(carriers) == 1:
            pick, why = carriers[0], f"broker {carriers[0]['broker']} alone carries the latest leader epoch {top}"
        elif lead is not None and lead[0] in {r["broker"] for r in carriers}:
            pick, why = here[lead[0]], f"broker {lead[0]} led the latest epoch {top}: {LEADER_EVIDENCE[lead[1]]}"
        else:
            pick = None
            why = (f"brokers {_brokers_text(r['broker'] for r in carriers)} all carry the latest leader epoch {top} and "
                   + (f"broker {lead[0]}, which led it ({LEADER_EVIDENCE[lead[1]]}), was not collected" if lead is not None
                      else "nothing collected tells which one leads it (the KRaft metadata log or the brokers' logs would)"))
        out[key] = {"broker": None if pick is None else pick["broker"], "candidates": carriers if pick is None else [pick],
                    "epoch": top, "why": why}
    return out


def survivor_frame(spark, surv: dict) -> DataFrame:
    """One row per partition and surviving-log candidate: ``survivor, s_log_start, s_compacted`` and
    ``s_candidates`` (how many there are: an offset is lost only when it is lost on each)."""
    rows = [(t, p, c["broker"], c["log_start_offset"], bool(c["compacted"]), len(s["candidates"]))
            for (t, p), s in surv.items() for c in s["candidates"]]
    return spark.createDataFrame(
        rows, "topic string, partition int, survivor int, s_log_start long, s_compacted boolean, s_candidates int")


def lost_on_every_candidate(lost: DataFrame) -> DataFrame:
    """Rows of lost offsets (one per surviving-log candidate and holder) kept where the offset loses
    a committed record on every candidate: whichever of them leads, the cluster lost a record
    there (two candidates holding different committed records at one offset lose one of them)."""
    w = Window.partitionBy("topic", "partition", "offset")
    return lost.withColumn("_on", F.size(F.collect_set("survivor").over(w))).where(F.col("_on") == F.col("s_candidates")).drop(
        "_on", "s_candidates")


def surviving_log_text(s: dict) -> str:
    """The surviving log in words, with the evidence that decides it (or why nothing does)."""
    if s["broker"] is not None:
        return f"the surviving log on broker {s['broker']} ({s['why']})"
    return f"the surviving log, which is undetermined ({s['why']})"


def _producers(keys, lo, hi) -> list[dict]:
    return [{"producer_id": k["producer_id"], "producer_epoch": k["producer_epoch"], "first_sequence": lo, "last_sequence": hi}
            for k in (keys or [])][:10]


def divergence_findings(ranges: list) -> list[Finding]:
    """One finding per divergent offset range, merging replica pairs that diverge over the same range."""
    merged: dict[tuple, dict] = {}
    for g in ranges:
        if g["status"] != "divergent":
            continue
        key = (g["topic"], g["partition"], g["first_offset"], g["last_offset"])
        m = merged.setdefault(key, {"brokers": set(), "epochs": set(), "ev": [], "bytes": 0, "records": g["offsets"],
                                    "producers": [], "ts": []})
        m["brokers"] |= {g["broker_a"], g["broker_b"]}
        m["epochs"] |= set(g["epochs_a"] or []) | set(g["epochs_b"] or [])
        m["bytes"] = max(m["bytes"], (g["bytes_a"] or 0), (g["bytes_b"] or 0))
        for side in ("a", "b"):
            ev = Evidence(g[f"broker_{side}"], g[f"path_{side}"], g[f"position_{side}"],
                          f"leader epochs {sorted(g[f'epochs_{side}'] or [])} at offsets {g['first_offset']}-{g['last_offset']}")
            if all((e.broker, e.path) != (ev.broker, ev.path) for e in m["ev"]):
                m["ev"].append(ev)
            m["producers"] += _producers(g[f"producer_keys_{side}"], g[f"min_seq_{side}"], g[f"max_seq_{side}"])
            m["ts"] += [g[f"first_ts_{side}"], g[f"last_ts_{side}"]]
    out = []
    for (topic, part, first, last), m in merged.items():
        ts = [t for t in m["ts"] if t is not None]
        out.append(Finding(
            kind="replica_divergence", topic=topic, partition=part, brokers=sorted(m["brokers"]),
            first_offset=first, last_offset=last, records=m["records"], bytes=m["bytes"], leader_epochs=sorted(m["epochs"]),
            producers=_dedupe(m["producers"]), first_timestamp=min(ts) if ts else None, last_timestamp=max(ts) if ts else None,
            evidence=m["ev"],
            explanation=f"Brokers {', '.join(map(str, sorted(m['brokers'])))} hold different records at offsets {first}-{last} of "
                        f"{topic}-{part} (leader epochs {sorted(m['epochs'])}): the logs forked, as after an unclean election or a "
                        "truncation to a stale high watermark (KAFKA-1211); the replica with the latest epoch is what survives.",
        ))
    return out


def _dedupe(producers: list[dict]) -> list[dict]:
    seen, out = set(), []
    for p in producers:
        k = (p["producer_id"], p["producer_epoch"])
        if k not in seen:
            seen.add(k)
            out.append(p)
    return out


def hw_lost_offsets(diffs: DataFrame, sv: DataFrame) -> DataFrame:
    """Offsets some replica checkpointed as committed (below its HW) that the surviving log lacks
    or holds with other content, with the holder's record details (record level, stays in Spark).
    ``sv``: ``survivor_frame``: one row per candidate it is lost on (``committed_loss`` keeps what
    every candidate lacks)."""
    d = diffs.join(sv, ["topic", "partition"])
    parts = []
    for other, me in (("a", "b"), ("b", "a")):
        # survivor is side `me`; the holder is side `other`
        sel = d.where(F.col(f"broker_{me}") == F.col("survivor")).where(F.col(other).isNotNull())
        sel = sel.where(
            (F.col("status") == "divergent") | ((F.col("status") == f"only_{other}") & ~F.col("s_compacted"))
        ).where(F.col("offset") >= F.col("s_log_start")).where(
            ~F.col(f"{other}.is_control") & ~F.coalesce(F.col(f"{other}.aborted"), F.lit(False))
        )
        parts.append(sel.select(
            "topic", "partition", "offset", "survivor", "s_candidates", "status",
            F.col(f"broker_{other}").alias("holder"), F.col(other).alias("rec"), F.lit("hw").alias("source"),
        ))
    return parts[0].unionByName(parts[1])


def committed_loss(lost: DataFrame, replica_logs: DataFrame) -> DataFrame:
    """Keep offsets below the holder's own HW checkpoint (those were committed) that every
    surviving-log candidate lacks."""
    hw = replica_logs.select("topic", "partition", F.col("broker").alias("holder"), F.col("hw_checkpoint").alias("holder_hw"))
    return lost_on_every_candidate(lost.join(hw, ["topic", "partition", "holder"]).where(F.col("offset") < F.col("holder_hw")))


def islands(df: DataFrame, keys: list[str]) -> DataFrame:
    w = Window.partitionBy(*keys).orderBy("offset")
    df = df.withColumn("_prev", F.lag("offset").over(w))
    df = df.withColumn("_brk", (F.col("_prev").isNull() | (F.col("offset") > F.col("_prev") + 1)).cast("int"))
    return df.withColumn("_island", F.sum("_brk").over(w.rowsBetween(Window.unboundedPreceding, 0)))


def loss_ranges(lost: DataFrame) -> list:
    """Group lost offsets (one row per offset and holder) into ranges per partition."""
    per_offset = lost.groupBy("topic", "partition", "offset").agg(
        F.sort_array(F.collect_set("holder")).alias("holders"),
        F.max("rec.size").alias("size"),
        F.first("rec.epoch").alias("epoch"),
        F.first("rec.producer_id").alias("producer_id"),
        F.first("rec.producer_epoch").alias("producer_epoch"),
        F.first("rec.base_sequence").alias("seq"),
        F.first("rec.timestamp_ms").alias("ts"),
        F.first("rec.path").alias("path"),
        F.first("rec.position").alias("position"),
        F.max(F.col("status") == "divergent").alias("overwritten"),
        F.max("holder_hw").alias("holder_hw"),
        F.max("source").alias("source"),
    )
    g = islands(per_offset, ["topic", "partition"]).groupBy("topic", "partition", "_island").agg(
        F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"), F.count("*").alias("records"),
        F.sum("size").cast("long").alias("bytes"),
        F.array_distinct(F.flatten(F.collect_list("holders"))).alias("holders"),
        F.collect_set("epoch").alias("epochs"),
        F.collect_set(F.when(F.col("producer_id") >= 0, F.struct("producer_id", F.col("producer_epoch").cast("int").alias("producer_epoch")))).alias("pkeys"),
        F.min(F.when(F.col("producer_id") >= 0, F.col("seq"))).alias("min_seq"),
        F.max(F.when(F.col("producer_id") >= 0, F.col("seq"))).alias("max_seq"),
        F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"),
        F.min_by("path", "offset").alias("path"), F.min_by("position", "offset").alias("position"),
        F.max("overwritten").alias("overwritten"), F.max("holder_hw").alias("holder_hw"),
        F.collect_set("source").alias("sources"),
    )
    return g.collect()


def _survivor_evidence(s: dict, detail: str) -> Evidence:
    """What the surviving log shows, on its broker; undetermined: on none, naming the candidates."""
    if s["broker"] is not None:
        return Evidence(s["broker"], None, None, f"surviving log ({s['why']}) {detail}")
    return Evidence(None, None, None, f"surviving log undetermined ({s['why']}); each of brokers "
                                      f"{_brokers_text(c['broker'] for c in s['candidates'])} {detail}")


def loss_findings(ranges: list, surv: dict) -> list[Finding]:
    out = []
    for g in ranges:
        s = surv[(g["topic"], g["partition"])]
        holders = [h for h in (g["holders"] or []) if h is not None]
        sources = set(g["sources"] or [])
        why = []
        if "hw" in sources:
            why.append(f"below a checkpointed high watermark ({g['holder_hw']})")
        if "ledger" in sources:
            why.append("acknowledged in the producer ledger")
        where = (f"still held by broker {', '.join(map(str, holders))} (salvageable; it will truncate them when it follows the leader)"
                 if holders else "held by no replica")
        ev = [Evidence(h, g["path"], g["position"], "holds the committed copy") for h in holders[:3]]
        ev.append(_survivor_evidence(s, "holds other records" if g["overwritten"] else "lacks them"))
        out.append(Finding(
            kind="acked_data_loss", topic=g["topic"], partition=g["partition"],
            brokers=[*(c["broker"] for c in s["candidates"]), *holders],
            first_offset=g["first_offset"], last_offset=g["last_offset"], records=g["records"], bytes=g["bytes"],
            leader_epochs=list(g["epochs"] or []),
            producers=_producers(g["pkeys"], g["min_seq"], g["max_seq"]),
            first_timestamp=g["first_ts"], last_timestamp=g["last_ts"], evidence=ev, salvage_brokers=holders,
            surviving_broker=s["broker"],
            explanation=f"{g['records']} committed records ({' and '.join(why)}) at offsets {g['first_offset']}-{g['last_offset']} "
                        f"of {g['topic']}-{g['partition']} are not in {surviving_log_text(s)}; {where}.",
        ))
    return out


def truncation_findings(rl: list, surv: dict, hw_ranges: list) -> list[Finding]:
    """A replica lacking offsets below a high watermark: its own (HW checkpoint > LEO), or another
    replica's when it is the surviving log (what it lacks is gone for everyone)."""
    out = []
    for r in rl:
        if r["dir_state"] == "live" and r["hw_checkpoint"] is not None and r["segments"] and r["hw_checkpoint"] > r["leo"]:
            out.append(Finding(
                kind="truncation_below_hw", topic=r["topic"], partition=r["partition"], brokers=[r["broker"]],
                first_offset=r["leo"], last_offset=r["hw_checkpoint"] - 1, records=r["hw_checkpoint"] - r["leo"],
                evidence=[Evidence(r["broker"], r["log_dir"], None,
                                   f"replication-offset-checkpoint HW {r['hw_checkpoint']} > LEO {r['leo']}")],
                explanation=f"Broker {r['broker']} checkpointed a high watermark of {r['hw_checkpoint']} for {r['topic']}-{r['partition']} "
                            f"but its log ends at {r['leo']}: it lost committed offsets (truncation or lost writes).",
            ))
    for g in hw_ranges:
        if "hw" not in set(g["sources"] or []) or g["overwritten"]:
            continue
        s = surv[(g["topic"], g["partition"])]
        holders = [h for h in (g["holders"] or []) if h is not None]
        out.append(Finding(
            kind="truncation_below_hw", topic=g["topic"], partition=g["partition"],
            brokers=[*(c["broker"] for c in s["candidates"]), *holders],
            first_offset=g["first_offset"], last_offset=g["last_offset"], records=g["records"],
            leader_epochs=list(g["epochs"] or []), surviving_broker=s["broker"],
            evidence=[_survivor_evidence(s, f"ends below HW {g['holder_hw']} checkpointed by broker {', '.join(map(str, holders))}")],
            explanation=f"In {g['topic']}-{g['partition']}, {surviving_log_text(s)} lacks offsets "
                        f"{g['first_offset']}-{g['last_offset']}, below the high watermark another replica checkpointed: "
                        "the other replicas will truncate them away.",
        ))
    return out


def epoch_conflict_findings(lineage: list, rl: list) -> list[Finding]:
    """Replicas that hold records of an epoch but disagree where it starts (beyond their log start)."""
    reps = {(r["topic"], r["partition"], r["broker"]): r for r in rl}
    by = defaultdict(list)
    for row in lineage:
        if row["batch_start_offset"] is None:
            continue
        rep = reps.get((row["topic"], row["partition"], row["broker"]))
        if rep is None or row["batch_start_offset"] <= rep["log_start_offset"] or (rep["first_offset"] is not None and row["batch_start_offset"] <= rep["first_offset"]):
            continue  # the epoch's start may have been deleted by retention on this replica
        by[(row["topic"], row["partition"], row["leader_epoch"])].append(row)
    out = []
    for (topic, part, epoch), rows in by.items():
        starts = {row["batch_start_offset"] for row in rows}
        if len(starts) > 1:
            out.append(Finding(
                kind="leader_epoch_conflict", topic=topic, partition=part, brokers=[row["broker"] for row in rows],
                first_offset=min(starts), last_offset=max(starts) - 1, leader_epochs=[epoch],
                evidence=[Evidence(row["broker"], None, None, f"epoch {epoch} starts at {row['batch_start_offset']}") for row in rows],
                explanation=f"Replicas disagree on where leader epoch {epoch} of {topic}-{part} starts "
                            f"({sorted(starts)}): their logs were written by different leaders for the same epoch.",
            ))
    return out


def topic_id_findings(rl: list) -> list[Finding]:
    by = defaultdict(dict)
    for r in rl:
        if r["dir_state"] == "live" and r["topic_id"]:
            by[(r["topic"], r["partition"])][r["broker"]] = r["topic_id"]
    out = []
    for (topic, part), ids in by.items():
        if len(set(ids.values())) > 1:
            out.append(Finding(
                kind="topic_id_mismatch", topic=topic, partition=part, brokers=list(ids),
                evidence=[Evidence(b, None, None, f"partition.metadata topic_id {i}") for b, i in sorted(ids.items())],
                explanation=f"Replicas of {topic}-{part} carry different topic ids: one holds data of a deleted and re-created "
                            "topic of the same name, which Kafka will not mix.",
            ))
    return out


def cluster_id_findings(brokers: list) -> list[Finding]:
    ids = {b["broker"]: b["cluster_id"] for b in brokers if b["cluster_id"]}
    if len(set(ids.values())) <= 1:
        return []
    return [Finding(
        kind="cluster_id_mismatch", brokers=list(ids),
        evidence=[Evidence(b, None, None, f"meta.properties cluster.id {c}") for b, c in sorted(ids.items())],
        explanation="The collected brokers belong to different clusters (meta.properties cluster.id differs): "
                    "either the collection mixes clusters or a broker was re-formatted.",
    )]
