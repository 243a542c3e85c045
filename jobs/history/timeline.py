"""One incident timeline per partition: who led when, what each broker logged, what was read.

Four sources, each already a table, joined by topic and partition and ordered by time:
``metadata_events`` (elections, ISR changes, from the KRaft metadata log), ``epoch_lineage``
(where each leader epoch starts, timed by its first batch), ``log_events`` (truncations, log
loads and leadership lines of server/state-change/controller logs) and ``consumer_offsets`` (the
last commit of each group). Broker-level facts (registration, fencing, start-ups and shutdowns)
are copied into the timeline of every partition the broker holds a replica of, because "broker 1
was down" is what explains the partition's story.

KRaft log lines name a partition by topic id (``topicId …, partition 0``); the metadata log's
TopicRecords give the name. Times are UTC (log4j times are taken as UTC: the broker's zone is
not in the line).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.store.tables import TIMELINE_SCHEMA

TIMELINE = from_arrow_schema(TIMELINE_SCHEMA)  # its columns: jobs.store.tables
COLUMNS = [f.name for f in TIMELINE.fields]

# log lines worth a place in a partition's story
PARTITION_LOG_EVENTS = ("truncation", "log_recovery", "log_loaded", "become_leader", "become_follower", "leader_change",
                        "isr_change", "unclean_election", "leader_recovery", "log_start_moved")
NODE_LOG_EVENTS = ("startup", "shutdown", "controlled_shutdown")
NODE_META_EVENTS = ("registered", "unregistered", "fenced", "unfenced", "controlled_shutdown")


def _select(df: DataFrame, **cols) -> DataFrame:
    return df.select(*[(cols[c] if c in cols else F.lit(None).cast(TIMELINE[c].dataType)).cast(TIMELINE[c].dataType).alias(c)
                       for c in COLUMNS])


# (topic_id, id_topic): the names the metadata log gives topic ids (``epoch_lineage.topic_names``)
TOPIC_NAMES = from_arrow_schema(pa.schema([("topic_id", pa.string()), ("id_topic", pa.string())]))


def named_log_events(log_events: DataFrame, names: DataFrame) -> DataFrame:
    """Log events with a topic name even where the line only had the topic id."""
    j = log_events.join(F.broadcast(names), "topic_id", "left")
    return j.withColumn("topic", F.coalesce("topic", "id_topic")).drop("id_topic")


EPOCHS = from_arrow_schema(pa.schema([  # one row per partition and leader epoch (``epoch_starts``)
    ("topic", pa.string()), ("partition", pa.int32()), ("leader_epoch", pa.int32()), ("start", pa.int64()), ("ts", pa.int64()),
    ("leader", pa.int32()), ("on", pa.list_(pa.int32())),
]))


def epoch_starts(lineage: list) -> list[tuple]:
    """Per partition and leader epoch (rows of ``EPOCHS``), from the epoch_lineage rows (one per
    epoch and replica, collected): where the epoch starts (its first batch, else its checkpoint
    entry), its first timestamp, its leader and the brokers that hold it. Per epoch, so it is
    folded on the driver from the rows the detectors collect anyway, not by a Spark aggregate
    (a stage of its own for a few rows)."""
    by: dict[tuple, list] = {}
    for r in lineage:
        by.setdefault((r["topic"], r["partition"], r["leader_epoch"]), []).append(r)
    out = []
    for key, rows in by.items():
        starts = [r["batch_start_offset"] if r["batch_start_offset"] is not None else r["checkpoint_start_offset"] for r in rows]
        ts = [r["first_timestamp"] for r in rows if r["first_timestamp"] is not None]
        leader = next((r["likely_leader"] for r in rows if r["likely_leader"] is not None), None)
        out.append((*key, min((v for v in starts if v is not None), default=None), min(ts, default=None), leader,
                    sorted({r["broker"] for r in rows if r["broker"] is not None})))
    return out


def build(meta_events: DataFrame, broker_events: DataFrame, epochs: DataFrame, log_events: DataFrame,
          consumer: DataFrame, replicas: DataFrame, quorum: DataFrame | None = None) -> DataFrame:
    """``epochs``: ``EPOCHS`` rows (``epoch_starts``); ``replicas``: (topic, partition, broker) of every replica
    collected, once each; ``quorum``: the
    controller quorum's rows of ``__cluster_metadata`` partition 0 (``jobs.history.quorum``), in TIMELINE's shape."""
    parts = [] if quorum is None else [quorum.select(*COLUMNS)]
    parts.append(_select(
        meta_events, topic=F.col("topic"), partition=F.col("partition"), time=F.col("time"), source=F.lit("metadata"),
        event=F.col("event"), leader=F.col("leader"), leader_epoch=F.col("leader_epoch"), isr=F.col("isr"),
        election=F.col("election"),
        severity=F.when(F.col("election") == "unclean", "error").when(F.col("election") == "offline", "warning"),
        detail=F.col("detail"), path=F.col("path"), position=F.col("batch_position"), seq=F.col("meta_offset"),
    ))
    parts.append(_select(
        epochs, topic=F.col("topic"), partition=F.col("partition"),
        time=F.when(F.col("ts") >= 0, F.timestamp_millis("ts")), source=F.lit("leader_epoch"), event=F.lit("epoch_start"),
        leader=F.col("leader"), leader_epoch=F.col("leader_epoch"), offset=F.col("start"),
        detail=F.concat(F.lit("leader epoch "), F.col("leader_epoch").cast("string"), F.lit(" starts at offset "),
                        F.coalesce(F.col("start").cast("string"), F.lit("?")), F.lit(" (leader-epoch-checkpoint / batches of brokers "),
                        F.array_join(F.col("on").cast("array<string>"), ", "), F.lit(")")),
        seq=F.col("start"),
    ))
    le = log_events.where(F.col("event").isin(*PARTITION_LOG_EVENTS) & F.col("topic").isNotNull() & F.col("partition").isNotNull())
    parts.append(_log_rows(le))
    # node-level facts, copied to each partition the node holds a replica of: the log lines and the
    # metadata records as rows first, then one join for both
    reps = replicas.select("topic", "partition", F.col("broker").alias("node"))
    nle = log_events.where(F.col("event").isin(*NODE_LOG_EVENTS)).withColumn("node", F.coalesce("node", "broker"))
    nme = broker_events.where(F.col("event").isin(*NODE_META_EVENTS))
    node_rows = _log_rows(nle.withColumn("topic", F.lit(None)).withColumn("partition", F.lit(None))).unionByName(_select(
        nme, time=F.col("time"), source=F.lit("metadata"), node=F.col("node"),
        event=F.col("event"), detail=F.col("detail"), path=F.col("path"), position=F.col("batch_position"), seq=F.col("meta_offset"),
    ))
    parts.append(node_rows.drop("topic", "partition").join(reps, "node").select(*COLUMNS))
    last = consumer.where(F.col("record_type") == "offset_commit")
    last = last.groupBy("group", "topic", "partition").agg(
        F.max_by(F.struct("committed_offset", "commit_timestamp", "path", "offset", "broker", "tombstone"), "offset").alias("c")
    ).where(~F.col("c.tombstone") & F.col("c.committed_offset").isNotNull())
    parts.append(_select(
        last, topic=F.col("topic"), partition=F.col("partition"),
        time=F.when(F.col("c.commit_timestamp") >= 0, F.timestamp_millis("c.commit_timestamp")), source=F.lit("consumer_offsets"),
        node=F.col("c.broker"), event=F.lit("consumer_commit"), offset=F.col("c.committed_offset"),
        detail=F.concat(F.lit("consumer group "), F.col("group"), F.lit(" last committed offset "), F.col("c.committed_offset").cast("string")),
        path=F.col("c.path"), seq=F.col("c.offset"),
    ))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def _log_rows(df: DataFrame) -> DataFrame:
    """Log events as timeline rows; the detail is the whole log line (as broker_log kept it): a
    line cut at a fixed width lost its end mid-sentence, often the class or the offsets that
    say what happened."""
    below = (F.col("event") == "truncation") & F.col("hw").isNotNull() & (F.col("offset") < F.col("hw"))
    # a line stating an election's RECOVERING state decides it; a controller's sentence about one
    # only corroborates (jobs/findings/elections.py): a warning on the timeline, not an error
    unclean = F.col("event") == "unclean_election"
    stated = unclean & F.coalesce(F.col("leader_recovery_state") == 1, F.lit(False))
    return _select(
        df, topic=F.col("topic"), partition=F.col("partition"), time=F.col("time"), source=F.lit("broker_log"),
        node=F.coalesce("node", "broker"), event=F.col("event"), leader=F.col("leader"), leader_epoch=F.col("leader_epoch"),
        offset=F.col("offset"), isr=F.col("isr"),
        election=F.when(stated, "unclean"),
        severity=F.when(stated, "error").when(unclean, "warning").when(below, "error"),
        detail=F.col("text"), path=F.col("path"), position=F.col("line_no"), seq=F.col("line_no"),
    )
