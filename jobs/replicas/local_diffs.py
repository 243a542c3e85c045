"""Where the replicas of a small scope differ, told on the driver: the divergent ranges and the
committed ranges the surviving log lacks, from the scope's batches and records read by pyarrow.

Why: the comparison in Spark (``compare``, ``batch_diffs``, ``jobs.findings.committed``) is a dozen
Spark jobs — the unshared batches' window, the records' join and shuffle, the ranges' windows,
the losses' joins — each a fixed ~0.3-0.6 s whatever its rows. When the replicas of a 100 MB
partition differ in their last tenth, the scope (what ``compare.agreed_prefixes`` leaves to
compare) is ~10^5 records, which pandas aligns in a fraction of one such job: told in Spark, the
divergence cost twice the healthy case's whole jobs phase. So a scope of at most
``Case``'s ``LOCAL_SCOPE_RECORDS`` records (summed over its replicas, told by their runs: the
driver's memory stays bounded: ~2.4 KB a record at its peak) is compared here, a bigger one in Spark.

The rules are the Spark code's, step by step (each function names the one it mirrors), and the
tests hold both to the same rows on every fixture and scenario. Content is compared as
``compare.record_details``' ``content`` (key and value hashes and control type), by dictionary
codes: equal codes, equal content. Sets (epochs, producers) come sorted.
"""

from __future__ import annotations

import operator
from functools import reduce
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Row

from jobs.store.io import arrow_table

from .replica_logs import live_segment_runs
from .survivors import Survivor

PAIR = ["topic", "partition", "broker_a", "broker_b"]
NO_BROKER = np.iinfo(np.int64).min
# up to this many partitions in scope, Parquet's reader is given each one's offset bound (``_scope_filter``)
MAX_LITERAL_PARTITIONS = 256
# what a record side carries (``compare.record_details``; ``content`` as its code)
SIDE = ["path", "position", "epoch", "producer_id", "producer_epoch", "base_sequence", "is_transactional", "is_control", "aborted",
        "timestamp_ms", "content", "size"]
BATCH_COLUMNS = ["topic", "partition", "broker", "path", "position", "base_offset", "last_offset", "crc", "crc_valid",
                 "partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence", "is_transactional", "is_control",
                 "dir_state", "file_kind"]
RECORD_COLUMNS = ["topic", "partition", "broker", "dir_state", "path", "batch_position", "offset", "timestamp_ms", "key_size",
                  "value_size", "key_sha256", "value_sha256", "control_type"]
# nullable integers and booleans stay so in pandas (never floats), as Spark's nulls stay null
_NULLABLE = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype(),
             pa.bool_(): pd.BooleanDtype()}


def compare_scope(out: Path, scope: list[tuple], replicas: list, survivors: dict[tuple[str, int], Survivor],
                  markers: bool, lost: bool = True) -> tuple[list[Row], list[Row]]:
    """The scope's (``compare.SCOPE_SCHEMA`` rows) divergent ranges (``compare.diff_ranges`` rows)
    and lost committed ranges (``committed.loss_ranges`` rows, HW evidence; none unless
    ``lost``). ``replicas``: replica_logs rows; ``markers``: some replica of the scope holds a
    control batch."""
    if not scope:
        return [], []
    batches, records, names = read_scope(out, scope, markers)
    brokers = Brokers(scope, names["topic"])
    diffs = record_diffs(unshared(batches, brokers), records, brokers)
    ranges = _named(diff_ranges(diffs), names, ["path_a", "path_b"])
    gone = committed_ranges(diffs, survivors, replicas, names) if survivors and lost else []
    return ranges, _named(gone, names, ["path"])


class Brokers:
    """The scope's live replicas per partition, for rows that carry a topic's code: ``table``, a
    row per partition of its brokers (``NO_BROKER`` past its last: a broker id may be negative,
    ``jobs.ingest.discover`` numbers unnamed log dirs -1, -2, …), ``count`` of them, ``width``
    the table's columns, ``of`` a row's partition in it."""

    def __init__(self, scope: list[tuple], topics: list[str]) -> None:
        code = {t: i for i, t in enumerate(topics)}
        rows = sorted(((code[t] << 32) | p, bs) for t, p, _, bs in scope if t in code)  # (``_key``'s)
        self.keys = np.array([k for k, _ in rows], dtype=np.int64)
        self.width = max((len(bs) for _, bs in rows), default=0)
        self.table = np.full((len(rows), max(self.width, 1)), NO_BROKER, dtype=np.int64)
        self.count = np.array([len(bs) for _, bs in rows], dtype=np.int64)
        for i, (_, bs) in enumerate(rows):
            self.table[i, :len(bs)] = bs

    def of(self, df: pd.DataFrame) -> np.ndarray:
        """Each row's partition as an index into ``table``."""
        return np.searchsorted(self.keys, _key(df["topic"].to_numpy(np.int64), df["partition"].to_numpy(np.int64)))


def _key(topic: np.ndarray, partition: np.ndarray) -> np.ndarray:
    return (topic.astype(np.int64) << 32) | partition.astype(np.int64)


def _named(rows: list[dict], names: dict[str, list], paths: list[str]) -> list[Row]:
    """Rows of codes as Rows of names: the topic's and the ``paths`` columns'."""
    out = []
    for r in rows:
        r["topic"] = names["topic"][r["topic"]]
        for c in paths:
            r[c] = None if r[c] is None else names["path"][r[c]]
        out.append(Row(**r))
    return out


def _pandas(t: pa.Table) -> pd.DataFrame:
    return t.to_pandas(types_mapper=_NULLABLE.get)


def _flag(s: pd.Series, null: bool = False) -> np.ndarray:
    """A nullable boolean Series as numpy, its nulls as ``null``."""
    return s.astype("boolean").fillna(null).to_numpy(bool)


def _scoped(t: pa.Table, scope: list[tuple], offset: str) -> pa.Table:
    """The rows of ``t`` in the scope's partitions at or above their ``from_offset`` (``compare.in_scope``),
    where ``_scope_filter`` did not already keep only those."""
    if len(scope) <= MAX_LITERAL_PARTITIONS:
        return t
    start = pa.table({"topic": pa.array([r[0] for r in scope], pa.string()), "partition": pa.array([r[1] for r in scope], pa.int32()),
                      "_from": pa.array([r[2] for r in scope], pa.int64())})
    j = t.join(start, ["topic", "partition"], join_type="inner")
    return j.filter(pc.greater_equal(j.column(offset), j.column("_from"))).drop_columns(["_from"])


def _scope_filter(scope: list[tuple], offset: str) -> pc.Expression:
    """What Parquet's reader keeps of a table for the scope: up to ``MAX_LITERAL_PARTITIONS``
    partitions, exactly (the rest of a row group is dropped as it is read, not held); past it, the
    scope's topics from its lowest offset (``_scoped`` then keeps the scope's rows)."""
    if len(scope) <= MAX_LITERAL_PARTITIONS:
        return reduce(operator.or_, [(pc.field("topic") == t) & (pc.field("partition") == p) & (pc.field(offset) >= start)
                                     for t, p, start, _ in scope])
    return (pc.field("topic").isin(sorted({r[0] for r in scope})) & pc.field("partition").isin(sorted({r[1] for r in scope}))
            & (pc.field(offset) >= min(r[2] for r in scope)))


def records_read(scope: list[tuple], runs: list[dict]) -> int:
    """How many records ``read_scope`` holds for ``scope``, told by the live runs of its partitions
    (``batch_runs`` rows, ``Case.scope_runs``): from each partition's ``from_offset``, or past
    ``MAX_LITERAL_PARTITIONS`` from the scope's lowest; a run across that bound counts whole. What
    bounds the driver's memory (``Case.local_comparison``)."""
    literal = len(scope) <= MAX_LITERAL_PARTITIONS
    low = min((r[2] for r in scope), default=0)
    start = {(t, p): (first if literal else low) for t, p, first, _ in scope}
    return sum(r["record_count"] or 0 for r in runs
               if (r["topic"], r["partition"]) in start and r["last_offset"] >= start[(r["topic"], r["partition"])])


def _coded(tables: list[pa.Table], column: str) -> tuple[list[pa.Table], list]:
    """``column`` of ``tables`` (strings) as codes into one dictionary of its values, and that dictionary:
    pandas joins and copies numbers far faster than Python strings."""
    values = pa.chunked_array([c for t in tables for c in t.column(column).chunks], pa.string()).unique()
    out = []
    for t in tables:
        i = t.schema.get_field_index(column)
        out.append(t.set_column(i, column, pc.index_in(t.column(column), value_set=values)))
    return out, values.to_pylist()


def _content(r: pa.Table) -> pa.Array:
    """Per record, a code of its content: key hash, value hash and control type, null as
    ``record_details`` makes them ("-", "-", ""), each dictionary-coded and the three codes
    combined: equal codes, equal content (no string of the three is built)."""
    code = np.zeros(len(r), np.int64)
    for column, null in (("key_sha256", "-"), ("value_sha256", "-"), ("control_type", "")):
        coded = pc.dictionary_encode(pc.fill_null(r.column(column), null)).combine_chunks()
        code = code * (len(coded.dictionary) + 1) + coded.indices.to_numpy(zero_copy_only=False)
    return pa.array(code)


def read_scope(out: Path, scope: list[tuple], markers: bool) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, list]]:
    """The scope's input tables, read by pyarrow (``BATCH_COLUMNS`` of batches, ``RECORD_COLUMNS``
    of records), as ``prepared`` gives them."""
    live = pc.field("dir_state") == "live"
    b = _scoped(arrow_table(out, "batches", BATCH_COLUMNS, _scope_filter(scope, "base_offset") & live
                            & (pc.field("file_kind") == "segment")), scope, "base_offset")
    r = _scoped(arrow_table(out, "records", RECORD_COLUMNS, _scope_filter(scope, "offset") & live), scope, "offset")
    return prepared(b, r, markers)


def prepared(b: pa.Table, r: pa.Table, markers: bool) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, list]]:
    """The scope's readable live segment batches with ``aborted`` (``Case.not_everywhere``'s
    input), its live records with ``content`` (a code) and ``size`` (``record_diffs``'), and the
    dictionaries of their ``topic`` and ``path`` codes; from the scope's rows of batches and
    records (``markers``: some replica holds a control batch)."""
    b = live_segment_runs(b)
    size = pc.add(pc.max_element_wise(r.column("key_size"), 0), pc.max_element_wise(r.column("value_size"), 0))
    r = r.drop_columns(["key_sha256", "value_sha256", "key_size", "value_size"]).append_column("content", _content(r)).append_column(
        "size", pc.cast(size, pa.int64()))
    r = r.filter(pc.equal(r.column("dir_state"), "live")).drop_columns(["dir_state"])
    (b, r), topic_names = _coded([b.select(BATCH_COLUMNS).drop_columns(["dir_state", "file_kind"]), r.select(
        [c for c in r.column_names if c in {*RECORD_COLUMNS, "content", "size"}])], "topic")
    (b, r), path_names = _coded([b, r], "path")
    marks = _pandas(r.filter(pc.is_in(r.column("control_type"), pa.array(["commit", "abort"])))) if markers else None
    # (a marker ends its transaction even in a batch whose CRC fails: only the readable are compared)
    batches = with_txn_outcome(_pandas(b), marks)
    batches = batches[_flag(batches["crc_valid"], True)]
    return batches, _pandas(r.drop_columns(["control_type"])), {"topic": topic_names, "path": path_names}


def with_txn_outcome(batches: pd.DataFrame, records: pd.DataFrame | None) -> pd.DataFrame:
    """``batches`` with ``aborted`` (``compare.aborted_batches``): transactional data whose
    producer's next marker on its replica is an abort. ``records``: the scope's records (None: no
    marker anywhere, nothing aborted; only its commit and abort markers are read)."""
    aborted = np.zeros(len(batches), bool)
    txn = _flag(batches["is_transactional"]) if len(batches) and records is not None else aborted
    if txn.any():
        t = batches[txn].assign(_row=np.flatnonzero(txn))
        markers = records[records["control_type"].isin(["commit", "abort"])][["broker", "path", "batch_position", "control_type"]]
        t = t.merge(markers.rename(columns={"batch_position": "position"}), on=["broker", "path", "position"], how="left")
        keys = ["topic", "partition", "broker", "producer_id"]
        t = t.sort_values([*keys, "base_offset"], kind="stable", na_position="first")
        by = [t[k] for k in keys]
        mark = t["control_type"].where(_flag(t["is_control"]))
        nxt = mark.groupby(by, dropna=False).shift(-1)
        nxt = nxt.groupby(by, dropna=False).bfill()
        hit = ~_flag(t["is_control"], True) & (nxt == "abort").fillna(False).to_numpy(bool)
        aborted[t["_row"].to_numpy()[hit]] = True
    return batches.assign(aborted=pd.array(aborted, dtype="boolean"))


def unshared(batches: pd.DataFrame, brokers: Brokers) -> pd.DataFrame:
    """``compare.unshared_batches``: the batches some live replica of their partition lacks, with
    ``_holders`` (bit i: ``brokers``' i-th of the partition holds the same batch, by
    ``compare.BATCH_KEY``) and ``_part`` (the partition's row in ``brokers.table``)."""
    part = brokers.of(batches)
    table = brokers.table[part] if len(batches) else np.zeros((0, 1), np.int64)
    me = batches["broker"].to_numpy(np.int64)
    slot = np.argmax(table == me[:, None], axis=1) if len(batches) else np.zeros(0, np.int64)
    present = (table == me[:, None]).any(axis=1) if len(batches) else np.zeros(0, bool)
    bit = np.where(present, np.left_shift(np.int64(1), slot.astype(np.int64)), 0)
    everyone = np.left_shift(np.int64(1), brokers.count[part] if len(batches) else np.zeros(0, np.int64)) - 1
    b = batches.assign(_bit=bit, _everyone=everyone, _part=part, _crc=batches["crc"].fillna(-1).to_numpy(np.int64))
    key = ["topic", "partition", "base_offset", "last_offset", "_crc"]
    holders = b.drop_duplicates([*key, "broker"]).groupby(key, dropna=False)["_bit"].sum().rename("_holders").reset_index()
    b = b.merge(holders, on=key, how="left")
    return b[b["_holders"].to_numpy(np.int64) != b["_everyone"].to_numpy(np.int64)].drop(columns=["_bit", "_crc", "_everyone"])


def record_diffs(some: pd.DataFrame, records: pd.DataFrame, brokers: Brokers) -> pd.DataFrame:
    """``compare.scoped_record_diffs``: per (pair, offset) where two replicas differ, ``status``
    and each side's ``SIDE`` columns (suffixed ``_a``, ``_b``; null where the side lacks the
    offset). Each record of an unshared batch goes to every live replica lacking its batch. The
    sides are aligned as row numbers (narrow frames), and the columns gathered once, for the rows
    that differ: the driver holds the scope's records about once, not once per copy."""
    key = ["topic", "partition", "broker", "path", "position"]
    some = some.reset_index(drop=True)
    j = some[key].assign(_b=np.arange(len(some))).merge(records.rename(columns={"batch_position": "position"}), on=key)
    me = j["broker"].to_numpy(np.int64)
    holders, part = some["_holders"].to_numpy(np.int64)[j["_b"].to_numpy()], some["_part"].to_numpy(np.int64)[j["_b"].to_numpy()]
    rows, others = [], []
    for i in range(brokers.width):
        other = brokers.table[part, i]
        keep = (other != NO_BROKER) & (other != me) & (((holders >> i) & 1) == 0)
        rows.append(np.flatnonzero(keep))
        others.append(other[keep])
    row, other = np.concatenate(rows or [np.zeros(0, np.int64)]), np.concatenate(others or [np.zeros(0, np.int64)])
    mine = me[row]
    x = pd.DataFrame({"topic": j["topic"].to_numpy()[row], "partition": j["partition"].to_numpy()[row],
                      "broker_a": np.minimum(mine, other), "broker_b": np.maximum(mine, other), "offset": j["offset"].to_numpy()[row],
                      "_r": row})
    is_a = mine < other
    keys = [*PAIR, "offset"]
    m = x[is_a].merge(x[~is_a], on=keys, how="outer", suffixes=("_a", "_b"))
    ra, rb = (m[f"_r_{s}"].fillna(-1).to_numpy(np.int64) for s in "ab")
    content = j["content"].to_numpy(np.int64)
    differ = (ra >= 0) & (rb >= 0) & (content[np.maximum(ra, 0)] != content[np.maximum(rb, 0)])
    status = np.where(ra < 0, "only_b", np.where(rb < 0, "only_a", np.where(differ, "divergent", "")))
    kept = status != ""
    out = m.loc[kept, keys].reset_index(drop=True)
    out["status"] = status[kept]
    batch = some.rename(columns={"partition_leader_epoch": "epoch"})
    for s, r in (("a", ra[kept]), ("b", rb[kept])):
        b = np.where(r >= 0, j["_b"].to_numpy()[np.maximum(r, 0)], -1)
        for c in SIDE:
            source, at = (j[c], r) if c in ("timestamp_ms", "content", "size") else (batch[c], b)
            out[f"{c}_{s}"] = pd.Series(pd.array(source).take(at, allow_fill=True))
    return out


def _islands(df: pd.DataFrame, keys: list[str], offset: str = "offset") -> np.ndarray:
    """``offset_ranges.islands`` of ``df`` sorted by ``keys`` and ``offset``: a run number per row
    (a row opens a run where its keys change or its offset does not follow the previous one)."""
    if not len(df):
        return np.zeros(0, np.int64)
    same = np.ones(len(df), bool)
    for k in keys:
        v = df[k].to_numpy()
        same[1:] &= v[1:] == v[:-1]
    same[0] = False
    o = df[offset].to_numpy(np.int64)
    follows = np.zeros(len(df), bool)
    follows[1:] = o[1:] == o[:-1] + 1
    return np.cumsum(~(same & follows))


def _py(v):
    """A pandas or numpy scalar as Python's (None for a null): rows go to JSON."""
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    return v.item() if isinstance(v, np.generic) else v


def _sets(df: pd.DataFrame, group: np.ndarray, cols: list[str], n: int, where: np.ndarray | None = None) -> list[list]:
    """Per group 0..n-1, the distinct non-null values of ``cols`` (one: values; several: tuples), sorted."""
    sub = df[cols].assign(_g=group)
    if where is not None:
        sub = sub[where]
    sub = sub.dropna(subset=cols[:1]).drop_duplicates()
    out: list[list] = [[] for _ in range(n)]
    for g, *vals in zip(sub["_g"], *[sub[c] for c in cols], strict=True):
        out[g].append(_py(vals[0]) if len(cols) == 1 else tuple(_py(v) for v in vals))
    return [sorted(v, key=lambda x: tuple(-1 if y is None else y for y in x) if isinstance(x, tuple) else x) for v in out]


def _aggs(df: pd.DataFrame, group: np.ndarray):
    return df.assign(_g=group).groupby("_g", sort=True)


def _col(series: pd.Series) -> list:
    return [_py(v) for v in series.tolist()]


def diff_ranges(diffs: pd.DataFrame) -> list[dict]:
    """``compare.diff_ranges`` of the divergent rows: contiguous runs per pair (``Case.ranges`` rows)."""
    d = diffs[diffs["status"] == "divergent"].sort_values([*PAIR, "offset"], kind="stable")
    group = _islands(d, PAIR) - 1
    n = int(group[-1]) + 1 if len(group) else 0
    if not n:
        return []
    g = _aggs(d, group)
    first = g.head(1).reset_index(drop=True)
    cols: dict[str, list] = {c: _col(first[c]) for c in PAIR}
    cols["status"] = ["divergent"] * n
    cols["first_offset"], cols["last_offset"] = _col(g["offset"].min()), _col(g["offset"].max())
    cols["offsets"] = _col(g.size())
    for s in "ab":
        producer = (d[f"producer_id_{s}"] >= 0).fillna(False).to_numpy(bool)
        seq = d[f"base_sequence_{s}"].where(producer)
        cols.update({
            f"records_{s}": _col(g[f"content_{s}"].count()),
            f"bytes_{s}": _col(g[f"size_{s}"].sum(min_count=1)),
            f"epochs_{s}": _sets(d, group, [f"epoch_{s}"], n),
            f"path_{s}": _col(first[f"path_{s}"]),
            f"position_{s}": _col(first[f"position_{s}"]),
            f"first_ts_{s}": _col(g[f"timestamp_ms_{s}"].min()),
            f"last_ts_{s}": _col(g[f"timestamp_ms_{s}"].max()),
            f"producer_keys_{s}": [[Row(producer_id=p, producer_epoch=e) for p, e in keys]
                                   for keys in _sets(d, group, [f"producer_id_{s}", f"producer_epoch_{s}"], n, producer)],
            f"min_seq_{s}": _col(seq.groupby(group).min()),
            f"max_seq_{s}": _col(seq.groupby(group).max()),
            f"control_{s}": _col(d[f"is_control_{s}"].fillna(False).astype(int).groupby(group).sum()),
        })
    return [dict(zip(cols, vals, strict=True)) for vals in zip(*cols.values(), strict=True)]


def committed_ranges(diffs: pd.DataFrame, survivors: dict[tuple[str, int], Survivor], replicas: list,
                     names: dict[str, list]) -> list[dict]:
    """``committed.loss_ranges`` of ``committed.committed_loss(committed.hw_lost_offsets(…))``:
    offsets a holder checkpointed below its HW that every surviving-log candidate lacks or holds
    with other content (not control, not aborted), in ranges per partition."""
    code = {t: i for i, t in enumerate(names["topic"])}
    rows = [(code.get(t, -1), p, c["broker"], c["log_start_offset"], bool(c["compacted"]), len(s.candidates))
            for (t, p), s in survivors.items() for c in s.candidates]
    cand = pd.DataFrame({name: pd.array([r[i] for r in rows], dtype=dtype) for i, (name, dtype) in enumerate(
        [("topic", "int64"), ("partition", "int64"), ("survivor", "int64"), ("s_log_start", "Int64"), ("s_compacted", "bool"),
         ("s_candidates", "int64")])})
    d = diffs.merge(cand, on=["topic", "partition"])
    parts = []
    for holder, survivor in (("a", "b"), ("b", "a")):
        st = d["status"].to_numpy()
        keep = ((d[f"broker_{survivor}"].to_numpy(np.int64) == d["survivor"].to_numpy(np.int64)) & d[f"content_{holder}"].notna().to_numpy()
                & ((st == "divergent") | ((st == f"only_{holder}") & ~d["s_compacted"].to_numpy(bool)))
                & (d["offset"] >= d["s_log_start"]).fillna(False).to_numpy(bool)
                & ~_flag(d[f"is_control_{holder}"], True) & ~_flag(d[f"aborted_{holder}"]))
        sel = d[keep]
        parts.append(pd.DataFrame({
            "topic": sel["topic"], "partition": sel["partition"], "offset": sel["offset"], "survivor": sel["survivor"],
            "s_candidates": sel["s_candidates"], "status": sel["status"], "holder": sel[f"broker_{holder}"],
            **{c: sel[f"{c}_{holder}"] for c in SIDE}}))
    lost = pd.concat(parts, ignore_index=True)
    hw = pd.DataFrame({"topic": [code.get(r["topic"], -1) for r in replicas], "partition": [r["partition"] for r in replicas],
                       "holder": [r["broker"] for r in replicas],
                       "holder_hw": pd.array([r["hw_checkpoint"] for r in replicas], dtype="Int64")})
    lost["holder"] = lost["holder"].astype("int64")
    hw["holder"] = hw["holder"].astype("int64")
    lost = lost.merge(hw, on=["topic", "partition", "holder"])
    lost = lost[(lost["offset"] < lost["holder_hw"]).fillna(False).to_numpy(bool)]
    # (lost_on_every_candidate)
    on = lost.groupby(["topic", "partition", "offset"])["survivor"].transform("nunique")
    lost = lost[on.to_numpy(np.int64) == lost["s_candidates"].to_numpy(np.int64)]
    if not len(lost):
        return []
    return loss_ranges(lost)


def loss_ranges(lost: pd.DataFrame) -> list[dict]:
    """``committed.loss_ranges``: lost offsets (a row per offset, holder and candidate) per offset,
    then in contiguous ranges per partition. An offset's record facts are its smallest holder's;
    a range's holders are its offsets' in offset order, each once (as Spark flattens them)."""
    lost = lost.sort_values(["topic", "partition", "offset", "holder"], kind="stable").reset_index(drop=True)
    t, p, o = (lost[c].to_numpy(np.int64) for c in ("topic", "partition", "offset"))
    starts = np.ones(len(lost), bool)
    starts[1:] = (t[1:] != t[:-1]) | (p[1:] != p[:-1]) | (o[1:] != o[:-1])
    at = np.cumsum(starts) - 1  # each row's offset
    per = lost[starts][["topic", "partition", "offset", "epoch", "producer_id", "producer_epoch", "base_sequence", "timestamp_ms",
                        "path", "position"]].reset_index(drop=True)
    per["size"] = lost["size"].groupby(at).max().to_numpy()
    per["overwritten"] = (lost["status"] == "divergent").groupby(at).any().to_numpy()
    per["holder_hw"] = lost["holder_hw"].groupby(at).max().to_numpy()
    group = _islands(per, ["topic", "partition"]) - 1
    n = int(group[-1]) + 1
    # (``islands`` numbers a partition's ranges from 1: the island's number less its partition's first one's)
    opens = np.ones(n, bool)
    key = _key(per["topic"].to_numpy(np.int64), per["partition"].to_numpy(np.int64))[np.searchsorted(group, np.arange(n))]
    opens[1:] = key[1:] != key[:-1]
    number = np.arange(n) - np.maximum.accumulate(np.where(opens, np.arange(n), 0)) + 1
    held = pd.DataFrame({"i": group[at], "h": lost["holder"].to_numpy(np.int64)}).drop_duplicates()
    island_holders = np.split(held["h"].to_numpy(), np.flatnonzero(np.diff(held["i"].to_numpy())) + 1)
    g = _aggs(per, group)
    first = g.head(1).reset_index(drop=True)
    producer = (per["producer_id"] >= 0).fillna(False).to_numpy(bool)
    seq = per["base_sequence"].where(producer)
    cols = {
        "topic": _col(first["topic"]), "partition": _col(first["partition"]), "_island": number.tolist(),
        "first_offset": _col(g["offset"].min()), "last_offset": _col(g["offset"].max()), "records": _col(g.size()),
        "bytes": _col(g["size"].sum(min_count=1)),
        "holders": [hs.tolist() for hs in island_holders],
        "epochs": _sets(per, group, ["epoch"], n),
        "pkeys": [[Row(producer_id=p, producer_epoch=e) for p, e in keys]
                  for keys in _sets(per, group, ["producer_id", "producer_epoch"], n, producer)],
        "min_seq": _col(seq.groupby(group).min()), "max_seq": _col(seq.groupby(group).max()),
        "first_ts": _col(g["timestamp_ms"].min()), "last_ts": _col(g["timestamp_ms"].max()),
        "path": _col(first["path"]), "position": _col(first["position"]),
        "overwritten": _col(g["overwritten"].max()), "holder_hw": _col(g["holder_hw"].max()),
        "sources": [["hw"] for _ in range(n)],
    }
    return [dict(zip(cols, vals, strict=True)) for vals in zip(*cols.values(), strict=True)]
