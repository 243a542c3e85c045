"""Loading an output DIR for the report: tolerant of missing tables, Hive folders, era guess.

Also home of ``make_out_dir``, the small hand-built DIR (documented columns, written with pyarrow)
that the renderer tests share: an unclean election on orders-0 (812 acknowledged records lost,
still on broker 1), an unclean shutdown on orders-1, a malformed broker-level checkpoint, clean
partitions orders-2 and payments-0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analyzer.report import ReportError, exit_code, load
from analyzer.report.data import all_partitions, findings_by_partition, overview
from analyzer.report.era import guess_era

EPOCH_ENTRY = pa.struct([("epoch", pa.int32()), ("start_offset", pa.int64())])


def _finding(fid, kind, severity, topic, partition, brokers, first=None, last=None, records=None, epochs=(), salvage=(), evidence=(), explanation=""):
    return {
        "id": fid, "kind": kind, "severity": severity, "topic": topic, "partition": partition, "brokers": list(brokers),
        "first_offset": first, "last_offset": last, "records": records, "bytes": None if records is None else records * 128,
        "leader_epochs": list(epochs), "producers": [], "first_timestamp": None, "last_timestamp": None,
        "evidence": [{"broker": b, "path": p, "position": pos, "detail": d} for b, p, pos, d in evidence],
        "explanation": explanation, "salvage_brokers": list(salvage),
    }


FINDINGS = [
    _finding("f-loss", "acked_data_loss", "error", "orders", 0, [1, 2, 3], 1000, 1811, 812, [1, 2], salvage=[1],
             evidence=[(1, "broker-1/orders-0/00000000000000000000.log", 131072, "epoch 1 batches 1000–1811 only on broker 1"),
                       (2, "broker-2/orders-0/leader-epoch-checkpoint", 0, "epoch 2 starts at 1000"),
                       (1, "broker-1/replication-offset-checkpoint", 0, "HW 1812 checkpointed")],
             explanation="Records acknowledged below broker 1's checkpointed high watermark are not in the surviving log (epoch 2 lineage)."),
    _finding("f-div", "replica_divergence", "error", "orders", 0, [1, 2], 1000, 1399, 400, [1, 2],
             evidence=[(1, "broker-1/orders-0/00000000000000000000.log", 131072, "batch crc 0x1234abcd"),
                       (2, "broker-2/orders-0/00000000000000000000.log", 131072, "batch crc 0x9f00ee01")],
             explanation="Brokers 1 and 2 hold different records at the same offsets."),
    _finding("f-ule", "unclean_leader_election", "warning", "orders", 0, [2], 1000, 1000, None, [2],
             explanation="Epoch 2 starts at 1000, below epoch 1's committed end 1812."),
    _finding("f-crash", "unclean_shutdown", "info", "orders", 1, [1],
             evidence=[(1, "broker-1/orders-1/00000000000000000300.index", 0, "10485760 bytes, 0 real entries")],
             explanation="Broker 1 stopped without a clean-shutdown marker; recovery point 0 behind LEO 300."),
    _finding("f-ckpt", "checkpoint_malformed", "warning", None, None, [2],
             evidence=[(2, "broker-2/recovery-point-offset-checkpoint", 0, "line 3: expected 3 fields")],
             explanation="Broker 2's recovery-point checkpoint cannot be parsed."),
]

# (topic, partition, broker) -> (log_start, hw, recovery, leo, epoch entries, ranges [(first, last, epoch, kind, reason)])
REPLICAS = {
    ("orders", 0, 1): (0, 1812, 1812, 1812, [(0, 0), (1, 1000)], [(0, 999, 0, "data", None), (1000, 1811, 1, "data", None)]),
    ("orders", 0, 2): (0, 1400, 1400, 1400, [(0, 0), (2, 1000)], [(0, 999, 0, "data", None), (1000, 1399, 2, "data", None)]),
    ("orders", 0, 3): (0, 1400, 1400, 1400, [(0, 0), (2, 1000)], [(0, 999, 0, "data", None), (1000, 1399, 2, "data", None)]),
    ("orders", 1, 1): (0, 300, 0, 300, [(0, 0)], [(0, 149, 0, "data", None), (150, 159, None, "hole", "transaction_marker"), (160, 299, 0, "data", None)]),
    ("orders", 1, 2): (0, 600, 600, 600, [(0, 0), (1, 300)], [(0, 299, 0, "data", None), (300, 599, 1, "data", None)]),
    ("orders", 2, 2): (0, 50, 50, 50, [(0, 0)], [(0, 49, 0, "data", None)]),
    ("orders", 2, 3): (0, 50, 50, 50, [(0, 0)], [(0, 49, 0, "data", None)]),
    ("payments", 0, 3): (100, 120, 120, 120, [(0, 0)], [(100, 119, 0, "data", None)]),
}


def _write(out: Path, name: str, rows: list[dict], schema: pa.Schema | None = None, hive: tuple[str, ...] = ()) -> None:
    table = pa.Table.from_pylist(rows, schema=schema)
    folder = out / "tables" / name
    folder.mkdir(parents=True, exist_ok=True)
    if hive:
        pq.write_to_dataset(table, folder, partition_cols=list(hive))
    else:
        pq.write_table(table, folder / "part-00000.parquet")
    (folder / "_SUCCESS").write_text("")  # as Spark leaves it; must be ignored


def make_out_dir(out: Path, *, findings: list[dict] | None = None, tables: tuple[str, ...] | None = None, run: bool = True) -> Path:
    """A small analyze output DIR. ``tables`` limits which tables exist (default: all)."""
    out.mkdir(parents=True, exist_ok=True)
    findings = FINDINGS if findings is None else findings
    want = set(tables) if tables is not None else {"brokers", "files", "replica_logs", "offset_ranges", "epoch_lineage", "problems"}
    brokers = sorted({b for (_, _, b) in REPLICAS})
    files = []
    for (topic, part, b) in REPLICAS:
        for name, kind, size in (("00000000000000000000.log", "segment", 131072 + part), ("00000000000000000000.index", "offset_index", 80),
                                 ("leader-epoch-checkpoint", "leader_epoch", 24), ("partition.metadata", "partition_metadata", 40)):
            files.append({"broker": b, "log_dir": f"broker-{b}", "topic": topic, "partition": part, "dir_state": "live",
                          "path": f"broker-{b}/{topic}-{part}/{name}", "kind": kind, "size": size, "sha256": f"{b:02x}{part:02x}" + "ab" * 30,
                          "mtime": None, "archive": None})
    for b in brokers:
        files.append({"broker": b, "log_dir": f"broker-{b}", "topic": "__cluster_metadata", "partition": 0, "dir_state": "live",
                      "path": f"broker-{b}/__cluster_metadata-0/00000000000000000000.log", "kind": "segment", "size": 4096,
                      "sha256": "cd" * 32, "mtime": None, "archive": None})
        files.append({"broker": b, "log_dir": f"broker-{b}", "topic": None, "partition": None, "dir_state": None,
                      "path": f"broker-{b}/meta.properties", "kind": "meta_properties", "size": 120, "sha256": "ef" * 32, "mtime": None, "archive": None})
    if "brokers" in want:
        _write(out, "brokers", [{"broker": b, "cluster_id": "q1Sh-9_ISia_zwGINzRvyQ", "directory_ids": [f"dir-{b}"], "log_dirs": [f"broker-{b}"],
                                 "id_source": "meta.properties", "roles": "broker", "files": sum(f["broker"] == b for f in files),
                                 "bytes": sum(f["size"] for f in files if f["broker"] == b)} for b in brokers])
    if "files" in want:
        _write(out, "files", files)
    if "replica_logs" in want:
        rows = []
        for (topic, part, b), (ls, hw, rp, leo, entries, _ranges) in REPLICAS.items():
            rows.append({"topic": topic, "partition": part, "broker": b, "log_dir": f"broker-{b}", "dir_state": "live", "topic_id": "t" * 22,
                         "segments": 1, "log_start_offset": ls, "leo": leo, "hw_checkpoint": hw, "recovery_point": rp,
                         "epoch_entries": [{"epoch": e, "start_offset": s} for e, s in entries], "first_epoch": entries[0][0], "last_epoch": entries[-1][0],
                         "records": leo - ls, "bytes": (leo - ls) * 128, "clean_shutdown": (topic, part, b) != ("orders", 1, 1), "compacted": False})
        schema = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("broker", pa.int32()), ("log_dir", pa.string()), ("dir_state", pa.string()),
                            ("topic_id", pa.string()), ("segments", pa.int32()), ("log_start_offset", pa.int64()), ("leo", pa.int64()),
                            ("hw_checkpoint", pa.int64()), ("recovery_point", pa.int64()), ("epoch_entries", pa.list_(EPOCH_ENTRY)),
                            ("first_epoch", pa.int32()), ("last_epoch", pa.int32()), ("records", pa.int64()), ("bytes", pa.int64()),
                            ("clean_shutdown", pa.bool_()), ("compacted", pa.bool_())])
        _write(out, "replica_logs", rows, schema)
    if "offset_ranges" in want:
        rows = [{"topic": t, "partition": p, "broker": b, "range": i, "first_offset": f, "last_offset": la, "leader_epoch": e, "kind": k, "reason": r,
                 "records": 0 if k == "hole" else la - f + 1, "bytes": 0 if k == "hole" else (la - f + 1) * 128,
                 "path": f"broker-{b}/{t}-{p}/00000000000000000000.log", "position": f * 128}
                for (t, p, b), v in REPLICAS.items() for i, (f, la, e, k, r) in enumerate(v[5])]
        _write(out, "offset_ranges", rows, hive=("topic",))
    if "epoch_lineage" in want:
        rows = []
        for (t, p, b), v in REPLICAS.items():
            for e, s in v[4]:
                data = [r for r in v[5] if r[2] == e]
                rows.append({"topic": t, "partition": p, "leader_epoch": e, "broker": b, "checkpoint_start_offset": s,
                             "batch_start_offset": data[0][0] if data else None, "batch_end_offset": data[-1][1] if data else None,
                             "likely_leader": {0: 1, 1: 1, 2: 2}[e] if t == "orders" else 3})
        _write(out, "epoch_lineage", rows)
    if "problems" in want:
        _write(out, "problems", [{"broker": 2, "log_dir": "broker-2", "topic": None, "partition": None, "dir_state": None,
                                  "path": "broker-2/recovery-point-offset-checkpoint", "position": 0, "kind": "checkpoint_malformed", "detail": "line 3"}])
    summary = {"errors": sum(f["severity"] == "error" for f in findings), "warnings": sum(f["severity"] == "warning" for f in findings),
               "infos": sum(f["severity"] == "info" for f in findings),
               "records_lost": sum(f["records"] or 0 for f in findings if f["kind"] == "acked_data_loss")}
    doc = {"version": 1, "generated_at": "2026-11-22T21:00:00Z", "input": {"paths": ["/evidence/incident-42"], "brokers": [1, 2, 3]}, "summary": summary, "findings": findings}
    (out / "findings.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    if run:
        (out / "run.json").write_text(json.dumps({"input": {"paths": ["/evidence/incident-42"]}, "master": "local[*]", "seconds": {"ingest": 12.5, "jobs": 8.1}}))
    return out


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    return make_out_dir(tmp_path / "out")


def test_load_reads_every_table_and_hive_columns_are_plain(out_dir):
    data = load(out_dir)
    assert data.missing_tables == []
    ranges = data.table("offset_ranges")
    assert ranges["topic"].dtype == object and set(ranges["topic"]) == {"orders", "payments"}
    assert all_partitions(data) == [("orders", 0), ("orders", 1), ("orders", 2), ("payments", 0)]


def test_overview_counts(out_dir):
    ov = overview(load(out_dir))
    assert ov["brokers"] == [1, 2, 3]
    assert ov["log_dirs"] == 3
    assert ov["topics"] == ["orders", "payments"]
    assert ov["partitions"] == 4
    assert ov["counts"] == {"error": 2, "warning": 2, "info": 1}
    assert ov["records_lost"] == 812
    assert ov["inputs"] == ["/evidence/incident-42"]


def test_findings_grouped_worst_partition_first(out_dir):
    groups = findings_by_partition(load(out_dir).findings)
    assert list(groups) == [("orders", 0), None, ("orders", 1)]
    assert [f["id"] for f in groups[("orders", 0)]] == ["f-loss", "f-div", "f-ule"]


def test_missing_tables_and_findings_are_tolerated(tmp_path):
    out = make_out_dir(tmp_path / "out", tables=())
    data = load(out)
    assert data.missing_tables == ["brokers", "files", "replica_logs", "offset_ranges", "epoch_lineage", "problems"]
    assert all_partitions(data) == [("orders", 0), ("orders", 1)]
    (out / "findings.json").unlink()
    (tmp_path / "out" / "tables" / "files").mkdir(parents=True)
    with pytest.raises(ReportError):
        load(out)


def test_unreadable_inputs_become_notes(tmp_path):
    out = make_out_dir(tmp_path / "out")
    (out / "tables" / "brokers" / "part-00000.parquet").write_bytes(b"not parquet at all")
    (out / "run.json").write_text("{truncated")
    data = load(out)
    assert data.table("brokers") is None
    assert any("brokers" in n for n in data.notes) and any("run.json" in n for n in data.notes)


def test_not_a_directory(tmp_path):
    with pytest.raises(ReportError):
        load(tmp_path / "nope")


def test_empty_findings_file_only(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "findings.json").write_text(json.dumps({"version": 1, "findings": []}))
    data = load(out)
    assert data.findings == [] and data.era.label.startswith("unknown")


@pytest.mark.parametrize(
    ("kinds", "topics", "directory", "magics", "expected"),
    [
        ({"segment"}, set(), False, {0, 1}, "before 0.11 (guessed)"),
        ({"segment", "leader_epoch", "meta_properties"}, set(), False, {2}, "Kafka ≥ 0.11, ZooKeeper (guessed)"),
        ({"segment", "leader_epoch", "partition_metadata", "meta_properties"}, set(), False, {2}, "Kafka ≥ 2.8, ZooKeeper (guessed)"),
        ({"segment", "leader_epoch", "partition_metadata"}, {"__cluster_metadata"}, False, {2}, "Kafka ≥ 2.8, KRaft (guessed)"),
        ({"segment", "leader_epoch", "partition_metadata"}, {"__cluster_metadata"}, True, {2}, "Kafka ≥ 3.7, KRaft (guessed)"),
    ],
)
def test_era_guess(kinds, topics, directory, magics, expected):
    import pandas as pd

    files = pd.DataFrame({"kind": sorted(kinds), "topic": (sorted(topics) + ["t"] * len(kinds))[: len(kinds)], "path": ["x"] * len(kinds)})
    brokers = pd.DataFrame({"broker": [1], "directory_ids": [["d"] if directory else []]})
    assert guess_era(files, brokers, None, magics).label == expected


def test_era_of_sample_dir_is_kraft_37(out_dir):
    era = load(out_dir).era
    assert era.label == "Kafka ≥ 3.7, KRaft (guessed)" and era.kraft


@pytest.mark.parametrize(("fail_on", "expected"), [("error", 1), ("warning", 1), ("info", 1)])
def test_exit_code_thresholds(fail_on, expected):
    assert exit_code(FINDINGS, fail_on) == expected


def test_exit_code_below_threshold():
    infos = [f for f in FINDINGS if f["severity"] == "info"]
    assert exit_code(infos, "error") == 0 and exit_code(infos, "warning") == 0 and exit_code(infos, "info") == 1
    assert exit_code({"findings": []}, "info") == 0
