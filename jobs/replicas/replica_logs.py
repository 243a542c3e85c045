"""One row per replica (topic, partition, broker): what its log and checkpoints say.

This is Kafka's own view of a log at start-up (``LogLoader``), rebuilt from the files:
- log start offset = max(log-start-offset-checkpoint entry, first segment's base offset);
- LEO = end of the last valid batch, or the active segment's base offset when it is empty
  (a freshly rolled segment, or a log truncated to its start);
- HW, recovery point, log start and cleaner offsets as last checkpointed, which may be stale
  after a crash (Kafka flushes them periodically, not on every write).
Only live partition directories count: ``-delete``/``-future``/``-stray`` dirs are not the replica.
The KRaft metadata log is a Raft log, not a replicated partition: it is left to the timeline job.
Computed on the driver from ingest's summaries (``local_build``: a few rows per segment and file).
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.store.io import collected_rows

from .grouped import Groups, stack

METADATA_TOPIC = "__cluster_metadata"
# Topics Kafka always compacts: holes in their offsets are the cleaner's doing.
COMPACTED_INTERNAL = ("__consumer_offsets", "__transaction_state")

REPLICA_KEY = ["topic", "partition", "broker"]


def live_segment_batches(batches: DataFrame) -> DataFrame:
    """Batches that belong to a replica's log (live dir, segment files, not the metadata log);
    the same filter keeps the ``batch_runs`` of those batches."""
    return batches.where(
        (F.col("dir_state") == "live") & (F.col("file_kind") == "segment") & (F.col("topic") != METADATA_TOPIC)
        & F.col("topic").isNotNull()
    )


DIGEST_PARTS = [f"digest_{i}" for i in range(4)]


# checkpoint file kind (``checkpoints.file_kind``) -> the replica_logs column of its offset
CHECKPOINT_COLUMNS = {"replication_offset": "hw_checkpoint", "recovery_point": "recovery_point",
                      "log_start": "log_start_checkpoint", "cleaner": "cleaner_offset"}


# The table's Spark schema, as Spark wrote it when it computed the table (before ``local_build``).
SCHEMA = T.StructType.fromJson({"type": "struct", "fields": [
    {"name": n, "type": t, "nullable": null, "metadata": {}} for n, t, null in (
        ("topic", "string", True), ("partition", "integer", True), ("broker", "integer", True), ("log_dir", "string", True),
        ("dir_state", "string", False), ("topic_id", "string", True), ("segments", "long", False),
        ("first_segment_offset", "long", True), ("log_start_checkpoint", "long", True), ("log_start_offset", "long", False),
        ("first_offset", "long", True), ("leo", "long", False), ("hw_checkpoint", "long", True), ("recovery_point", "long", True),
        ("cleaner_offset", "long", True),
        ("epoch_entries", {"type": "array", "containsNull": False, "elementType": {"type": "struct", "fields": [
            {"name": "epoch", "type": "integer", "nullable": True, "metadata": {}},
            {"name": "start_offset", "type": "long", "nullable": True, "metadata": {}}]}}, True),
        ("first_epoch", "integer", True), ("last_epoch", "integer", True), ("batch_first_epoch", "integer", True),
        ("batch_last_epoch", "integer", True), ("batch_max_epoch", "integer", True), ("records", "long", False),
        ("control_records", "long", False), ("bytes", "long", False), ("clean_shutdown", "boolean", False),
        ("compacted", "boolean", True), ("min_magic", "byte", True), ("max_magic", "byte", True), ("problems", "long", False),
        ("index_padding_entries", "long", False), ("batch_digest", "string", True))]})
COLUMNS = SCHEMA.fieldNames()

# the input tables' columns ``local_build`` reads (all of them small: per run, file or entry)
LOCAL_INPUTS = {
    "batch_runs": ["topic", "partition", "broker", "log_dir", "dir_state", "file_kind", "batches", "first_offset", "last_offset",
                   "last_base_offset", "records", "control_records", "bytes", "partition_leader_epoch", "min_magic", "max_magic",
                   "record_holes", "readable", *DIGEST_PARTS],
    "files": ["topic", "partition", "broker", "log_dir", "dir_state", "kind", "path"],
    "checkpoints": ["topic", "partition", "broker", "log_dir", "file_kind", "offset"],
    "leader_epochs": ["topic", "partition", "broker", "log_dir", "dir_state", "line", "epoch", "start_offset"],
    "partition_metadata": ["topic", "partition", "broker", "log_dir", "dir_state", "topic_uuid"],
    "problems": ["topic", "partition", "broker", "log_dir"],
    "index_files": ["topic", "partition", "broker", "log_dir", "dir_state", "padding_entries"],
}
_KEY = [*REPLICA_KEY, "log_dir"]


def _is(col, value: str) -> pa.Array:
    """``col == value`` with a null taken as false (a Spark filter drops the rows whose test is null)."""
    return pc.fill_null(pc.equal(col, value), False)


def _whole_key(t: pa.Table) -> pa.Array:
    ok = None
    for c in _KEY:
        v = pc.is_valid(t.column(c))
        ok = v if ok is None else pc.and_(ok, v)
    return ok


def live_segment_runs(runs: pa.Table) -> pa.Table:
    """``live_segment_batches`` of an Arrow table of ``batch_runs``."""
    topic = runs.column("topic")
    keep = pc.and_(pc.and_(_is(runs.column("dir_state"), "live"), _is(runs.column("file_kind"), "segment")),
                   pc.fill_null(pc.not_equal(topic, METADATA_TOPIC), False))
    return runs.filter(keep)


def local_build(t: dict[str, pa.Table], markers: list) -> pa.Table:
    """The replica_logs table (``SCHEMA``, as Arrow), computed on the driver from the input
    tables' ``LOCAL_INPUTS`` columns (Arrow tables) and the clean-shutdown markers' (broker,
    log_dir) rows.

    Why on the driver: every input is a few rows per segment, file or checkpoint entry (the
    batches come as their ``batch_runs``, summed at ingest), so a replica's row costs its
    segments, never its batches; and the Spark query that aggregated them, whatever its rows,
    cost ~2 s of planning, code generation and scheduling (three Spark jobs, cold: a third of a
    deep partition's jobs phase). What Spark did is done the same way here: every kind's rows are
    stacked (one row shape, a column set per kind) and grouped once per replica and log dir
    (``jobs.replicas.grouped``). A replica is one whose log dir has batches or segment files of
    it; the other kinds' rows count only with a whole key, as in a join (which never matches a
    null). ``batch_digest`` hashes the sums of the runs' digests: replicas with equal digests hold
    the same readable batches, so the comparison leaves their partition alone
    (``compare.differing_partitions``)."""
    b = live_segment_runs(t["batch_runs"])
    b = b.select([c for c in LOCAL_INPUTS["batch_runs"] if c not in ("dir_state", "file_kind")]).append_column(
        "_batch", pa.array(np.ones(b.num_rows, dtype=bool)))
    f = t["files"]
    base = pc.extract_regex(f.column("path"), r"(?P<b>\d{20})\.log$")
    keep = pc.and_(pc.and_(_is(f.column("kind"), "segment"), _is(f.column("dir_state"), "live")),
                   pc.and_(pc.fill_null(pc.not_equal(f.column("topic"), METADATA_TOPIC), False), pc.is_valid(base)))
    f = f.append_column("_b", base).filter(keep)
    digits = pc.struct_field(f.column("_b"), [0])
    # (twenty digits past a long's range name no Kafka segment: a null base offset, not a failed cast)
    digits = pc.if_else(pc.less_equal(digits, "09223372036854775807"), digits, pa.scalar(None, pa.string()))
    segs = pa.table({**{c: f.column(c) for c in _KEY}, "_segment": pa.array(np.ones(f.num_rows, dtype=bool)),
                     "segment_base_offset": pc.cast(digits, pa.int64()) if f.num_rows else pa.array([], pa.int64())})
    cp = t["checkpoints"]
    cp = cp.filter(pc.and_(pc.is_in(cp.column("file_kind"), pa.array(list(CHECKPOINT_COLUMNS))), _whole_key(cp)))
    cp = pa.table({**{c: cp.column(c) for c in _KEY}, "_checkpoint": cp.column("file_kind"), "_checkpoint_offset": cp.column("offset")})
    probs = t["problems"]
    probs = probs.filter(pc.and_(pc.is_valid(probs.column("topic")), _whole_key(probs)))
    probs = pa.table({**{c: probs.column(c) for c in _KEY}, "_problem": pa.array(np.ones(probs.num_rows, dtype=bool))})
    ix = t["index_files"]
    ix = ix.filter(pc.and_(_is(ix.column("dir_state"), "live"), _whole_key(ix)))
    ix = pa.table({**{c: ix.column(c) for c in _KEY}, "_padding": pc.fill_null(ix.column("padding_entries"), 0)})
    rows = stack([b, segs, cp, probs, ix])
    g = Groups(rows, _KEY)
    col = rows.column

    def ones(name: str) -> np.ndarray:
        return np.asarray(col(name).is_valid().to_numpy(zero_copy_only=False), dtype=bool)

    segments = g.count(ones("_segment"))
    batches = g.sum(col("batches"))
    kept = (segments > 0) | (pc.fill_null(batches, 0).to_numpy(zero_copy_only=False) > 0)
    key = dict(zip(_KEY, g.keys(rows, _KEY), strict=True))
    checkpoint = {name: g.max(col("_checkpoint_offset"), where=_is(col("_checkpoint"), kind).to_numpy(zero_copy_only=False))
                  for kind, name in CHECKPOINT_COLUMNS.items()}
    epoch = col("partition_leader_epoch")
    r = {
        **key,
        "segments": pa.array(segments),
        "first_segment_offset": g.min(col("segment_base_offset")),
        "active_segment_offset": g.max(col("segment_base_offset")),
        "first_offset": g.min(col("first_offset")),
        "batch_leo": pc.add(g.max(col("last_offset")), 1),
        "records": g.sum(col("records")),
        "control_records": g.sum(col("control_records")),
        "bytes": g.sum(col("bytes")),
        "batch_first_epoch": g.pick(epoch, col("first_offset"), highest=False),
        "batch_last_epoch": g.pick(epoch, col("last_base_offset"), highest=True),
        "batch_max_epoch": pc.cast(g.max(epoch, np.int32), pa.int32()),
        "record_holes": g.any(col("record_holes")),
        "min_magic": pc.cast(g.min(col("min_magic"), np.int8), pa.int8()),
        "max_magic": pc.cast(g.max(col("max_magic"), np.int8), pa.int8()),
        **checkpoint,
        "problems": pa.array(g.count(ones("_problem"))),
        "index_padding_entries": pc.fill_null(g.sum(col("_padding")), 0),
        **{c: g.sum(col(c)) for c in DIGEST_PARTS},
        "_readable": g.sum(col("readable")),
    }
    r = pa.table(r).filter(pa.array(kept))
    lists = _epoch_lists(t["leader_epochs"], t["partition_metadata"])
    whole = [tuple(k) for k in zip(*(r.column(c).to_pylist() for c in _KEY), strict=True)]
    found = [lists.get(k) if None not in k else None for k in whole]
    entries = [x[0] if x else None for x in found]
    topic_id = [x[1] if x else None for x in found]
    dirs = {(m["broker"], m["log_dir"]) for m in markers if m["broker"] is not None and m["log_dir"] is not None}
    broker, log_dir = r.column("broker").to_pylist(), r.column("log_dir").to_pylist()

    def zero(name: str) -> pa.Array:
        return pc.fill_null(r.column(name), 0)

    lsc, fso = r.column("log_start_checkpoint"), r.column("first_segment_offset")
    topic = r.column("topic")
    compacted = pc.or_(pc.or_(pc.is_valid(r.column("cleaner_offset")), pc.is_in(topic, pa.array(COMPACTED_INTERNAL))),
                       pc.fill_null(r.column("record_holes"), False))
    readable = r.column("_readable").to_pylist()
    digests = list(zip(*(r.column(c).to_pylist() for c in DIGEST_PARTS), strict=True)) if r.num_rows else []
    digest = [hashlib.sha256(":".join(str(v) for v in (n, *d) if v is not None).encode()).hexdigest() if n is not None and n > 0 else None
              for n, d in zip(readable, digests, strict=True)]
    entry_type = pa.list_(pa.field("element", pa.struct([pa.field("epoch", pa.int32()), pa.field("start_offset", pa.int64())]), False))
    out = {
        **{c: r.column(c) for c in _KEY},
        "dir_state": pa.array(["live"] * r.num_rows, pa.string()),
        "topic_id": pa.array(topic_id, pa.string()),
        "segments": r.column("segments"),
        "first_segment_offset": fso,
        "log_start_checkpoint": lsc,
        "log_start_offset": pc.max_element_wise(pc.fill_null(lsc, 0), pc.fill_null(fso, 0)),
        "first_offset": r.column("first_offset"),
        "leo": pc.max_element_wise(pc.fill_null(r.column("batch_leo"), 0), pc.fill_null(r.column("active_segment_offset"), 0)),
        "hw_checkpoint": r.column("hw_checkpoint"),
        "recovery_point": r.column("recovery_point"),
        "cleaner_offset": r.column("cleaner_offset"),
        "epoch_entries": pa.array(entries, entry_type),
        "first_epoch": pa.array([e[0]["epoch"] if e else None for e in entries], pa.int32()),
        "last_epoch": pa.array([e[-1]["epoch"] if e else None for e in entries], pa.int32()),
        "batch_first_epoch": r.column("batch_first_epoch"),
        "batch_last_epoch": r.column("batch_last_epoch"),
        "batch_max_epoch": r.column("batch_max_epoch"),
        "records": zero("records"),
        "control_records": zero("control_records"),
        "bytes": zero("bytes"),
        "clean_shutdown": pa.array([(b, d) in dirs for b, d in zip(broker, log_dir, strict=True)], pa.bool_()),
        "compacted": compacted,
        "min_magic": r.column("min_magic"),
        "max_magic": r.column("max_magic"),
        "problems": r.column("problems"),
        "index_padding_entries": zero("index_padding_entries"),
        "batch_digest": pa.array(digest, pa.string()),
    }
    return pa.table(out)


def _epoch_lists(leader_epochs: pa.Table, partition_metadata: pa.Table) -> dict[tuple, tuple]:
    """Per whole key: (its leader-epoch entries as ``build`` lists them, sorted by line, epoch and
    start offset; None without one; the topic id of its first partition.metadata row). A few rows
    per replica, so in Python."""
    out: dict[tuple, list] = {}
    le = leader_epochs.filter(pc.and_(_is(leader_epochs.column("dir_state"), "live"), _whole_key(leader_epochs)))
    for r in le.select([*_KEY, "line", "epoch", "start_offset"]).to_pylist():
        out.setdefault(tuple(r[c] for c in _KEY), [[], False, None])[0].append((r["line"], r["epoch"], r["start_offset"]))
    pm = partition_metadata.filter(pc.and_(_is(partition_metadata.column("dir_state"), "live"), _whole_key(partition_metadata)))
    for r in pm.select([*_KEY, "topic_uuid"]).to_pylist():
        got = out.setdefault(tuple(r[c] for c in _KEY), [[], False, None])
        if not got[1]:
            got[1], got[2] = True, r["topic_uuid"]

    def order(e: tuple) -> tuple:  # (Spark sorts a null first)
        return tuple((v is not None, v or 0) for v in e)

    return {k: ([{"epoch": e, "start_offset": s} for _, e, s in sorted(v[0], key=order)] or None, v[2]) for k, v in out.items()}


def rows_of(table: pa.Table) -> list[Row]:
    """``local_build``'s rows as ``collected`` gives a read-back table's: Rows (its epoch entries
    Rows too), sorted by their values."""
    out = []
    for r in table.select(COLUMNS).to_pylist():
        if r["epoch_entries"] is not None:
            r["epoch_entries"] = [Row(epoch=e["epoch"], start_offset=e["start_offset"]) for e in r["epoch_entries"]]
        out.append(Row(**r))
    return collected_rows(out)
