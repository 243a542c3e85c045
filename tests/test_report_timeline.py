"""The incident timeline in the report: a ``timeline`` table (as ``analyze`` writes it) shown under
its partition's offset figure in report.html and quoted, when alarming, in the terminal summary.

The story is the real cluster's ``unclean-election-divergence-rejoined``: the rows are built here
from its ground_truth.json (leadership_history replayed from the controller's metadata log, the
broker-1 truncation it records), from the broker server logs' own "Truncating partition" lines and
from each replica's leader-epoch-checkpoint bytes, then written with pyarrow in shuffled order
over two files, into the shared hand-built DIR of the other report tests. No Spark.
"""

from __future__ import annotations

import base64
import gzip
import html
import io
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import plotly.graph_objects as go
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import test_report_browser
from conftest import REAL
from test_report_data import FINDINGS, make_out_dir
from test_report_html import Page

from analyzer.report import load, render, write_html
from analyzer.report.figures import expand
from analyzer.report.html import EVENT_FIELDS, MAX_EVENTS_EMBEDDED, events_view
from analyzer.report.timeline import normalise, order_key, settle_final_shutdown

SCENARIO = REAL / "unclean-election-divergence-rejoined"
TOPIC, PART = "ue", 0
SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("time", pa.timestamp("us", tz="UTC")), ("source", pa.string()), ("node", pa.int32()),
    ("event", pa.string()), ("leader", pa.int32()), ("leader_epoch", pa.int32()), ("offset", pa.int64()), ("isr", pa.list_(pa.int32())),
    ("election", pa.string()), ("severity", pa.string()), ("detail", pa.string()), ("path", pa.string()), ("position", pa.int64()),
    ("seq", pa.int64()),
])
LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")
TRUNCATING = re.compile(r"Truncating partition (\S+)-(\d+) with TruncationState\(offset=(\d+)")
NO_EFFECT = re.compile(r"UnifiedLog partition=(\S+)-(\d+),.*Truncating to (\d+) has no effect")


def _iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _ms(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def _row(**kw) -> dict:
    return {"topic": TOPIC, "partition": PART, **{f.name: kw.get(f.name) for f in SCHEMA if f.name not in ("topic", "partition")}, **kw}


def _metadata_rows(gt: dict) -> list[dict]:
    """leadership_history as the timeline job would turn it into rows: partition changes become
    created / leader_change / unclean_election / leader_recovered / isr_change, and the broker
    records of ue-0's replicas become registered / fenced / unfenced / controlled_shutdown."""
    controller = next(int(p.name.split("-")[1]) for p in SCENARIO.glob("controller-*"))
    path = f"controller-{controller}/__cluster_metadata-0/00000000000000000000.log"
    rows, prev = [], None
    for rec in gt["leadership_history"]:
        t, seq = _iso(rec["time"]), rec["meta_offset"]
        base = {"time": t, "source": "metadata", "node": controller, "path": path, "seq": seq}
        if rec["type"] in ("PARTITION_RECORD", "PARTITION_CHANGE_RECORD"):
            if (rec["topic"], rec["partition"]) != (TOPIC, PART):
                continue
            leader, epoch, isr = rec["leader"], rec["leaderEpoch"], rec["isr"]
            election = severity = None
            if prev is None:
                event, detail = "partition_created", f"created with leader {leader} (epoch {epoch}), ISR {isr}"
            elif leader != prev["leader"] and leader >= 0 and leader not in prev["isr"]:
                event, election, severity = "unclean_election", "unclean", "error"
                detail = f"leader {prev['leader']} → {leader} (epoch {epoch}), UNCLEAN election: {leader} was not in ISR {prev['isr']}"
            elif leader != prev["leader"]:  # (severity and wording of an offline change as jobs/history writes them)
                event, election, severity = "leader_change", "offline" if leader < 0 else "clean", "warning" if leader < 0 else None
                detail = f"leader {prev['leader']} → {leader} (epoch {epoch})" + (", no leader: partition offline" if leader < 0 else "")
            elif rec.get("leaderRecoveryState") == 0 and prev.get("leaderRecoveryState") == 1:
                event, detail = "leader_recovered", f"leader {leader} recovered; ISR {prev['isr']} → {isr}"
            else:
                event, detail = "isr_change", f"ISR {prev['isr']} → {isr}"
            rows.append(_row(**base, event=event, leader=leader, leader_epoch=epoch, isr=isr, election=election, severity=severity, detail=detail))
            prev = rec
        elif rec["type"] == "REGISTER_BROKER_RECORD":
            rows.append(_row(**{**base, "node": rec["broker"]}, event="registered", detail=f"broker {rec['broker']} registered (fenced)"))
        elif rec["type"] == "BROKER_REGISTRATION_CHANGE_RECORD":  # (node: the broker the record is about, as in the job)
            event = "controlled_shutdown" if rec["inControlledShutdown"] == 1 else "fenced" if rec["fenced"] == 1 else "unfenced"
            rows.append(_row(**{**base, "node": rec["broker"]}, event=event, detail=f"broker {rec['broker']} {event.replace('_', ' ')}"))
    return rows


def _log_rows() -> list[dict]:
    """The brokers' own "Truncating partition ue-0 …" lines, whole (line number as position and seq)."""
    rows = []
    for log in sorted((SCENARIO / "server-logs").glob("node-*-server.log.gz")):
        node = int(log.name.split("-")[1])
        with gzip.open(log, "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                m, stamp = TRUNCATING.search(line) or NO_EFFECT.search(line), LOG_TIME.match(line)
                if m is None or stamp is None or (m.group(1), int(m.group(2))) != (TOPIC, PART):
                    continue
                t = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
                event = "truncation_noop" if "no effect" in line else "truncation"
                rows.append(_row(time=t, source="broker_log", node=node, event=event, offset=int(m.group(3)), detail=line.strip(),
                                 path=f"server-logs/{log.name}", position=n, seq=n))
    return rows


def _truncation_below_hw_rows(gt: dict) -> list[dict]:
    """Broker 1's truncation 500 → 300 on rejoin, as ground_truth records it (its log line is not in
    the collected server log, so no line number: position null)."""
    rows = []
    for a in gt["expected_anomalies"]:
        if a["kind"] == "truncation_below_hw":
            rows.append(_row(time=_iso(a["time"]), source="broker_log", node=a["broker"], event="truncation", offset=a["truncated_to"],
                             severity="error", path=f"server-logs/node-{a['broker']}-server.log.gz", seq=0,
                             detail=f"truncated {a['hw_checkpoint_before']} → {a['truncated_to']}, below its checkpointed HW {a['hw_checkpoint_before']}"))
    return rows


def _epoch_rows() -> list[dict]:
    """Each replica's leader-epoch-checkpoint entries: epoch starts with no time (sorted last)."""
    rows = []
    for ckpt in sorted(SCENARIO.glob(f"broker-*/{TOPIC}-{PART}/leader-epoch-checkpoint")):
        node = int(ckpt.parent.parent.name.split("-")[1])
        for n, line in enumerate(ckpt.read_text().splitlines()[2:], 3):
            epoch, start = map(int, line.split())
            rows.append(_row(source="leader_epoch", node=node, event="epoch_start", leader_epoch=epoch, offset=start,
                             detail=f"epoch {epoch} starts at {start}", path=str(ckpt.relative_to(SCENARIO)), position=n, seq=n))
    return rows


@pytest.fixture(scope="module")
def ground_truth() -> dict:
    return json.loads((SCENARIO / "ground_truth.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def story(ground_truth) -> list[dict]:
    rows = _metadata_rows(ground_truth) + _log_rows() + _truncation_below_hw_rows(ground_truth) + _epoch_rows()
    assert any(r["event"] == "unclean_election" for r in rows) and any(r["source"] == "broker_log" and r["position"] for r in rows)
    return rows


def _ue_findings(gt: dict) -> list[dict]:
    out = []
    for i, a in enumerate(gt["expected_anomalies"]):
        first = a.get("epoch_start_offset", a.get("truncated_to", (a.get("offsets") or [None])[0]))
        out.append({"id": f"ue-{i}", "kind": a["kind"], "severity": "error", "topic": a["topic"], "partition": a["partition"],
                    "brokers": [a.get("broker", a.get("new_leader", 1))], "first_offset": first, "last_offset": (a.get("offsets") or [first])[-1],
                    "records": a.get("count"), "leader_epochs": [a["leader_epoch"]] if "leader_epoch" in a else [], "producers": [],
                    "evidence": [], "explanation": a.get("detail") or a.get("evidence") or "", "salvage_brokers": []})
    return out


def _add_ue_replicas(out: Path, gt: dict) -> None:
    """ue-0's three replicas (replicas_at_collection) appended to the DIR's replica_logs, so its
    offset figure has lanes the truncation tick can sit on."""
    folder = out / "tables" / "replica_logs"
    schema = pq.read_schema(next(folder.glob("*.parquet")))
    rows = []
    for name, node in gt["replicas_at_collection"].items():
        rep = node["partitions"].get(f"{TOPIC}-{PART}")
        if rep is None:
            continue
        entries = [{"epoch": e, "start_offset": s} for e, s in rep["leader-epoch-checkpoint"]]
        rows.append({"topic": TOPIC, "partition": PART, "broker": int(name.split("-")[1]), "log_dir": name, "dir_state": "live",
                     "log_start_offset": rep["first_offset_in_log"], "leo": rep["LEO"], "hw_checkpoint": rep["HW_checkpoint"],
                     "recovery_point": rep["recovery_point"], "epoch_entries": entries, "first_epoch": entries[0]["epoch"],
                     "last_epoch": entries[-1]["epoch"], "records": rep["record_count"], "clean_shutdown": node["clean_shutdown_marker_present"]})
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), folder / "part-00001.parquet")


def write_timeline(out: Path, rows: list[dict]) -> None:
    """The rows in reverse over two Parquet files (every tie of equal times inverted too): the
    report must restore the order itself."""
    rows = rows[::-1]
    folder = out / "tables" / "timeline"
    folder.mkdir(parents=True, exist_ok=True)
    half = len(rows) // 2
    for i, chunk in enumerate((rows[:half], rows[half:])):
        pq.write_table(pa.Table.from_pylist(chunk, schema=SCHEMA), folder / f"part-{i:05d}.parquet")
    (folder / "_SUCCESS").write_text("")


@pytest.fixture(scope="module")
def story_dir(tmp_path_factory, ground_truth, story) -> Path:
    out = make_out_dir(tmp_path_factory.mktemp("timeline") / "out", findings=FINDINGS + _ue_findings(ground_truth))
    _add_ue_replicas(out, ground_truth)
    write_timeline(out, story)
    write_html(load(out))
    return out


@pytest.fixture(scope="module")
def page(story_dir) -> Page:
    return Page((story_dir / "report.html").read_text(encoding="utf-8"))


def _shown(page: Page, name: str) -> list[dict]:
    payload = page.payload()
    fields = payload["event_fields"]
    rows = [dict(zip(fields, r)) for r in payload["partitions"][name]["events"]["rows"]]
    for r in rows:
        r["path"] = None if r["path"] is None else payload["paths"][r["path"]]
    return rows


def _as_written(detail: str) -> str:
    """A shown detail as the table has it: the final clean stop's is reworded by the report."""
    head, final, _ = detail.partition(", no leader after broker")
    return head + ", no leader: partition offline" if final else detail

def test_timeline_is_under_its_partition_only(story_dir, page, story):
    partitions = page.payload()["partitions"]
    assert "events" in partitions["ue-0"]
    assert [k for k, v in partitions.items() if "events" in v] == ["ue-0"]
    assert partitions["ue-0"]["events"]["total"] == len(story) == len(partitions["ue-0"]["events"]["rows"])
    # ue-0 has findings, so its section is open and drawn (with the events table) when scrolled to
    assert "Under each figure, the partition's incident timeline" in (story_dir / "report.html").read_text(encoding="utf-8")
    section = page.by_id("p-ue-0")
    assert section is not None and section[0] == "details" and "open" in section[1] and section[1]["data-key"] == "ue-0"


def test_rows_in_time_order_unknown_times_last(page, story):
    rows = _shown(page, "ue-0")
    timed = [r for r in rows if r["time"]]
    assert [r["time"] for r in timed] == sorted(r["time"] for r in timed)
    assert rows[: len(timed)] == timed, "rows without a time come after every timed row"
    assert {r["event"] for r in rows[len(timed):]} == {"epoch_start"}
    assert len(timed) == sum(r["time"] is not None for r in story)
    assert rows[0]["event"] == "registered" and rows[0]["time"] == _ms(min(r["time"] for r in story if r["time"]))
    # equal times follow the metadata-log order (seq), whatever the files' order
    meta = [r for r in story if r["source"] == "metadata"]
    shown_meta = [r for r in rows if r["source"] == "metadata"]
    assert [_as_written(r["detail"]) for r in shown_meta] == [r["detail"] for r in sorted(meta, key=lambda r: r["seq"])]


def test_written_order_was_not_the_answer(story_dir, page):
    """Guard for the test above: the files hold the rows shuffled, so the order is the report's."""
    written = [r["detail"] for f in sorted((story_dir / "tables" / "timeline").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    shown = [_as_written(r["detail"]) for r in _shown(page, "ue-0")]
    assert sorted(written) == sorted(shown) and written != shown
    times = [r["time"] for r in _shown(page, "ue-0") if r["source"] == "metadata"]
    assert len(set(times)) < len(times), "some metadata records share a millisecond: only seq orders them"


def test_unclean_election_row_highlighted(story_dir, page, ground_truth):
    rows = _shown(page, "ue-0")
    anomaly = next(a for a in ground_truth["expected_anomalies"] if a["kind"] == "unclean_leader_election")
    unclean = [r for r in rows if r["event"].startswith("unclean_election")]
    assert len(unclean) == 1
    row = unclean[0]
    assert row["highlight"] == "error" and row["time"] == _ms(_iso(anomaly["time"]))
    assert row["leader_epoch"] == f"{anomaly['new_leader']} / e{anomaly['leader_epoch']}" and row["isr"] == str(anomaly["isr_after"])
    assert row["path"].startswith("controller-") and row["node"] == int(row["path"].split("/")[0].split("-")[1])
    # clean elections and routine rows are not highlighted; the HW truncation is
    assert all(r["highlight"] is None for r in rows if r["event"].startswith(("leader_change (clean)", "leader_change (final shutdown)",
                                                                                "isr_change", "epoch_start", "truncation_noop")))
    below = [r for r in rows if r["highlight"] == "error" and r["event"] == "truncation"]
    assert [(r["node"], r["offset"]) for r in below] == [(a["broker"], a["truncated_to"]) for a in ground_truth["expected_anomalies"]
                                                         if a["kind"] == "truncation_below_hw"]
    # the page colours highlighted rows with the severity colours, and the script applies the class
    html = (story_dir / "report.html").read_text(encoding="utf-8")
    assert "table.events tr.sev-error td" in html and "var(--error)" in html
    assert '"ev sev-" + hl' in html



def _offline_changes(gt: dict) -> list[datetime]:
    """When ue-0 lost its leader (PartitionChangeRecords with leader -1), from the metadata log."""
    return [_iso(r["time"]) for r in gt["leadership_history"]
            if r["type"] == "PARTITION_CHANGE_RECORD" and (r["topic"], r["partition"]) == (TOPIC, PART) and r["leader"] == -1]


def test_final_clean_shutdown_is_not_an_offline_alarm(page, ground_truth):
    """ue-0 lost its leader three times: broker 1 killed (an outage), broker 2's controlled shutdown
    with the partition back 8 s later (an outage too), and broker 2's controlled shutdown when the
    cluster was stopped for collection (nothing after it: not an outage)."""
    offline = _offline_changes(ground_truth)
    assert len(offline) == 3
    rows = {r["time"]: r for r in _shown(page, "ue-0") if r["event"].startswith("leader_change") and r["source"] == "metadata"}
    *outages, final = (rows[_ms(t)] for t in offline)
    for r in outages:
        assert r["event"] == "leader_change (offline)" and r["highlight"] == "warning" and "partition offline" in r["detail"]
    assert final["event"] == "leader_change (final shutdown)" and final["highlight"] is None
    assert "offline" not in final["detail"] and "broker 2's controlled shutdown" in final["detail"]
    assert final["detail"].startswith("leader 2 → -1 (epoch 5)")


def test_final_offline_without_a_clean_shutdown_stays_an_alarm(story, ground_truth):
    """The same story with broker 2's last controlled-shutdown record gone (as if it was killed):
    the partition's final leaderless state is an outage, and stays highlighted."""
    final = _offline_changes(ground_truth)[-1]
    killed = [r for r in story if not (r["event"] == "controlled_shutdown" and r["time"] == final)]
    assert len(killed) == len(story) - 1
    events = sorted((normalise(r) for r in killed), key=order_key)
    settle_final_shutdown(events)
    last = next(e for e in events if e["time"] == final and e["source"] == "metadata" and e["election"])
    assert last["election"] == "offline" and last["highlight"] == "warning"
    events = sorted((normalise(r) for r in story), key=order_key)
    settle_final_shutdown(events)
    last = next(e for e in events if e["time"] == final and e["source"] == "metadata" and e["election"])
    assert last["election"] == "final shutdown" and last["highlight"] is None

def test_evidence_names_real_log_lines(page):
    rows = _shown(page, "ue-0")
    logged = [r for r in rows if r["source"] == "broker_log" and r["position"] is not None]
    assert logged, "the brokers' server logs have Truncating lines for ue-0"
    for r in logged:
        with gzip.open(SCENARIO / r["path"], "rt", encoding="utf-8") as fh:
            line = next(line for n, line in enumerate(fh, 1) if n == r["position"])
        assert "Truncating" in line and f"ue-{PART}" in line and line.startswith("[" + r["time"][:19])


def test_figure_marks_the_truncation_on_the_replica_lane(page, ground_truth):
    fig = page.payload()["partitions"]["ue-0"]["timeline"]
    go.Figure(expand(fig))  # still a valid Plotly figure
    ticks = {t["name"]: t for t in fig["data"] if t["name"] in ("truncation", "alarming truncation")}
    routine = {(f"broker {r['node']}", r["offset"]) for r in _log_rows() if r["event"] == "truncation"}
    below = {(f"broker {r['node']}", r["offset"]) for r in _truncation_below_hw_rows(ground_truth)}
    assert routine and below == {("broker 1", 300)}
    assert set(zip(ticks["truncation"]["y"], ticks["truncation"]["x"])) == routine
    alarm = ticks["alarming truncation"]
    assert set(zip(alarm["y"], alarm["x"])) == below and alarm["marker"]["color"] != ticks["truncation"]["marker"]["color"]
    assert "broker 1 truncated to 300" in alarm["hovertext"][0] and "below its checkpointed HW 500" in alarm["hovertext"][0]
    # the hover holds each whole log line, broken into lines (Plotly's hover box never wraps)
    wrapped = [hover.split("<br>")[2:-1] for hover in ticks["truncation"]["hovertext"]]  # (between the time and the path)
    assert max(len(line) for lines in wrapped for line in lines) <= 100
    assert sorted(html.unescape(" ".join(lines)) for lines in wrapped) == sorted(r["detail"] for r in _log_rows() if r["event"] == "truncation")
    others = [t for k, p in page.payload()["partitions"].items() if k != "ue-0" and p["timeline"] for t in p["timeline"]["data"]]
    assert not any("truncation" in t["name"] for t in others)


def test_dir_without_timeline_renders_as_before(tmp_path):
    out = make_out_dir(tmp_path / "out")
    data = load(out)
    assert data.timeline == {} and not any("timeline" in n for n in data.notes)
    p = Page(write_html(load(out)).read_text(encoding="utf-8"))
    assert not any("events" in v for v in p.payload()["partitions"].values()) and p.payload()["paths"] == []
    assert "Under each figure, the partition's incident timeline" not in (out / "report.html").read_text(encoding="utf-8")
    buf = io.StringIO()
    render(load(out), "text", buf)
    assert "Timeline (" not in buf.getvalue() and "812 acknowledged records lost" in buf.getvalue()


def test_unreadable_timeline_is_a_note_not_an_error(tmp_path):
    out = make_out_dir(tmp_path / "out")
    (out / "tables" / "timeline").mkdir()
    (out / "tables" / "timeline" / "part-00000.parquet").write_bytes(b"PAR1 not parquet")
    data = load(out)
    assert data.timeline == {} and any("timeline could not be read" in n for n in data.notes)
    assert "timeline could not be read" in write_html(load(out)).read_text(encoding="utf-8")


def test_text_report_quotes_alarming_rows_under_the_partition(story_dir, ground_truth, story):
    buf = io.StringIO()
    render(load(story_dir), "text", buf)
    out = buf.getvalue()
    final = _offline_changes(ground_truth)[-1]
    alarming = sorted((r for r in story if r["severity"] and r["time"] != final), key=lambda r: r["time"])
    assert len(alarming) == 4  # the unclean election, the truncation below the HW and two real offline periods
    head = out.index(f"\n{TOPIC}-{PART} ")
    block = out[head:out.index("\n\n", out.index("Timeline (", head))]
    assert f"Timeline ({len(alarming)} alarming of {len(story)} events):" in block
    lines = [line.strip() for line in block.splitlines() if line.strip().startswith("⏱")]
    assert len(lines) == len(alarming)
    for line, row in zip(lines, alarming):
        assert line.startswith(f"⏱ {_ms(row['time'])}  {row['event']}")
    assert "UNCLEAN election: 2 was not in ISR [1]" in " ".join(block.split())
    assert "node 1 broker_log" in block and "500 → 300" in block
    assert out.index("ERROR   unclean_leader_election") < out.index("Timeline (")  # under the findings, not above
    assert max(len(line) for line in out.splitlines()) <= 100


def test_text_report_caps_the_timeline(tmp_path):
    out = make_out_dir(tmp_path / "out", findings=FINDINGS)
    t0 = datetime(2026, 11, 22, 19, 0, tzinfo=UTC)
    rows = [{"topic": "orders", "partition": 0, "time": t0.replace(second=i), "source": "broker_log", "node": 1, "event": "truncation",
             "offset": 1000 - i, "severity": "error", "detail": f"cut {i}", "seq": i} for i in range(12)]
    write_timeline(out, rows)
    buf = io.StringIO()
    render(load(out), "text", buf)
    text = buf.getvalue()
    assert "Timeline (12 alarming of 12 events):" in text and "… 4 more alarming events in report.html" in text
    shown = [int(m) for m in re.findall(r"cut (\d+)", text)]
    assert shown == list(range(8))


def test_events_view_keeps_alarming_rows_past_the_embedding_cap():
    t0 = datetime(2026, 11, 22, tzinfo=UTC)
    n = MAX_EVENTS_EMBEDDED + 500
    events = [normalise({"topic": "t", "partition": 0, "time": t0, "event": "consumer_commit", "offset": i, "seq": i,
                         "severity": "error" if i == n - 1 else None, "path": f"p{i % 3}", "position": i}) for i in range(n)]
    paths: dict[str, int] = {}
    view = events_view(events, paths)
    assert view["total"] == n and view["omitted"] == 499 and len(view["rows"]) == MAX_EVENTS_EMBEDDED + 1
    last = dict(zip(EVENT_FIELDS, view["rows"][-1]))
    assert last["offset"] == n - 1 and last["highlight"] == "error"
    assert sorted(paths) == ["p0", "p1", "p2"]
    assert events_view([], paths) is None


def test_three_thousand_partitions_with_timelines_stay_light(tmp_path):
    out = make_out_dir(tmp_path / "out", tables=())
    t0 = datetime(2026, 11, 22, 19, 0, tzinfo=UTC)
    rows = [{"topic": f"t{p // 100}", "partition": p % 100, "time": t0.replace(second=i * 10), "source": "metadata", "node": 100,
             "event": ev, "leader": 1 + i % 3, "leader_epoch": i, "isr": [1, 2, 3], "detail": f"leader {i % 3} → {1 + i % 3} (epoch {i})",
             "path": "controller-100/__cluster_metadata-0/00000000000000000000.log", "position": p * 10 + i, "seq": p * 10 + i}
            for p in range(3000) for i, ev in enumerate(("partition_created", "isr_change", "leader_change", "isr_change", "leader_change"))]
    write_timeline(out, rows)
    html = write_html(load(out)).read_text(encoding="utf-8")
    p = Page(html)
    parts = {k: v for k, v in p.payload()["partitions"].items() if not k.startswith("orders-")}  # orders-*: from the findings
    assert len(parts) == 3000 and all(len(v["events"]["rows"]) == 5 for v in parts.values())
    assert p.payload()["paths"] == ["controller-100/__cluster_metadata-0/00000000000000000000.log"]
    payload_bytes = len(next(text for a, text in p.scripts if a.get("id") == "report-data"))
    assert payload_bytes / len(rows) < 40, payload_bytes / len(rows)  # per event, all partitions' JSON included
    # the clean partitions travel packed (gzip, unpacked by the page when one is opened): only
    # the partitions with findings are plain JSON in the page
    assert set(p.raw_payload()["partitions"]) == {"orders-0", "orders-1"}


browser = test_report_browser.browser  # the headless-Chromium fixture (skips when Chromium is absent)


def _long_story(n: int = 120, alarm_at: int = 100) -> list[dict]:
    """A long, synthetic timeline for orders-2 (a clean partition): collapse and show-all."""
    t0 = datetime(2026, 11, 22, 19, 0, tzinfo=UTC)
    return [{"topic": "orders", "partition": 2, "time": t0.replace(minute=i // 60, second=i % 60), "source": "consumer_offsets", "node": 2,
             "event": "consumer_commit", "offset": i, "severity": "warning" if i == alarm_at else None, "detail": f"group g committed {i}",
             "path": "broker-2/__consumer_offsets-7/00000000000000000000.log", "position": 100 * i, "seq": i} for i in range(n)]


# Every bar of the epoch traces in a drawn figure: its trace name, its fill and its box inside the
# figure, shrunk by 3 px so that outlines and anti-aliased edges are not counted.
EPOCH_BARS_JS = """
const fig = arguments[0], at = fig.getBoundingClientRect(), out = [];
fig.querySelectorAll('g.barlayer g.trace').forEach(g => {
  const name = g.__data__[0].trace.name;
  if (!name.startsWith('epoch ')) return;
  g.querySelectorAll('path').forEach(p => {
    const r = p.getBoundingClientRect();
    if (r.width < 10) return;
    out.push({name: name, fill: getComputedStyle(p).fill, box: [r.left - at.left + 3, r.top - at.top + 3, r.width - 6, r.height - 6]});
  });
});
return out;
"""
# The share of a box's pixels in a PNG (base64) that are exactly an ``rgb(r, g, b)`` colour.
COLOUR_SHARE_JS = """
const [b64, box, fill, done] = arguments;
const want = fill.match(/\\d+/g).map(Number), img = new Image();
img.onload = () => {
  const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
  const ctx = c.getContext('2d'); ctx.drawImage(img, 0, 0);
  const px = ctx.getImageData(Math.round(box[0]), Math.round(box[1]), Math.round(box[2]), Math.round(box[3])).data;
  let same = 0;
  for (let i = 0; i < px.length; i += 4) if (px[i] === want[0] && px[i + 1] === want[1] && px[i + 2] === want[2]) same++;
  done(same / (px.length / 4));
};
img.onerror = () => done(null);
img.src = 'data:image/png;base64,' + b64;
"""

def test_timeline_in_headless_chromium(browser, story, tmp_path, monkeypatch):
    from selenium.webdriver.support.ui import WebDriverWait

    from analyzer.report import html as html_mod

    monkeypatch.setattr(html_mod, "PACK_ABOVE", 0)  # the clean partitions below travel packed: the page unpacks them

    gt = json.loads((SCENARIO / "ground_truth.json").read_text(encoding="utf-8"))
    out = make_out_dir(tmp_path / "out", findings=FINDINGS + _ue_findings(gt))
    _add_ue_replicas(out, gt)
    write_timeline(out, story + _long_story())
    html = write_html(load(out))
    assert Page(html.read_text(encoding="utf-8")).raw_payload()["packed"]
    embedded = Page(html.read_text(encoding="utf-8")).payload()["partitions"]["ue-0"]["events"]["rows"]
    expected = sum(i < 50 or r[EVENT_FIELDS.index("highlight")] is not None for i, r in enumerate(embedded))
    browser.get(html.resolve().as_uri() + "#p-ue-0")
    WebDriverWait(browser, 60).until(lambda d: d.execute_script("return document.querySelector('#p-ue-0 table.events') !== null"))
    rows = browser.execute_script("return Array.from(document.querySelectorAll('#p-ue-0 table.events tr.ev')).map(tr => "
                                  "[tr.className, tr.cells[3].textContent, getComputedStyle(tr.cells[0]).backgroundColor])")
    assert len(rows) == expected and len(embedded) == len(story) > 50
    unclean = [r for r in rows if r[1].startswith("unclean_election")]
    assert len(unclean) == 1 and unclean[0][0] == "ev sev-error" and unclean[0][2] == "rgb(253, 241, 241)"
    assert all(r[2] != "rgb(253, 241, 241)" for r in rows if "sev-" not in r[0])
    # the table sits right under the offset figure, which carries the truncation tick
    order = browser.execute_script("return Array.from(document.querySelector('#p-ue-0 .partition-body').children).map(c => c.className)")
    assert "timeline" in order[0].split() and order[1] == "events"
    names = browser.execute_script("return document.querySelector('#p-ue-0 .timeline').data.map(t => t.name)")
    assert "truncation" in names
    # each log line whole, wrapped inside its cell (nothing overflows) and whole again on hover
    details = browser.execute_script("return Array.from(document.querySelectorAll('#p-ue-0 table.events tr.ev td.detail')).map(td => "
                                     "[td.textContent, td.title, td.scrollWidth <= td.clientWidth, getComputedStyle(td).whiteSpace])")
    lines = {r["detail"] for r in story if r["source"] == "broker_log" and r["position"]}
    shown_lines = [d for d in details if d[0] in lines]
    assert {d[0] for d in shown_lines} == lines and max(len(d[0]) for d in shown_lines) > 200
    assert all(title == text and fits and ws == "normal" for text, title, fits, ws in details)
    # the final clean stop is not an alarming row; the real outages are
    final = [r for r in rows if r[1] == "leader_change (final shutdown)"]
    assert len(final) == 1 and "sev-" not in final[0][0]
    assert len([r for r in rows if r[1] == "leader_change (offline)" and r[0] == "ev sev-warning"]) == 2
    shot = tmp_path / "timeline-ue-0.png"
    browser.find_element("css selector", "#p-ue-0").screenshot(str(shot))
    assert shot.stat().st_size > 10_000

    # lost and divergent overlays leave each lane's epoch colour as it is under them (hatched, not tinted)
    browser.execute_script("document.getElementById('p-orders-0').scrollIntoView()")  # (drawn when scrolled to)
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.querySelector('#p-orders-0 .timeline .main-svg') !== null"))
    figure = browser.find_element("css selector", "#p-orders-0 .timeline")
    browser.execute_script("arguments[0].scrollIntoView()", figure)
    bars = browser.execute_script(EPOCH_BARS_JS, figure)
    png = figure.screenshot_as_png
    (tmp_path / "overlays-orders-0.png").write_bytes(png)
    under = [b for b in bars if b["name"] in ("epoch 1", "epoch 2")]  # the ranges the loss and divergence findings cover
    clear = [b for b in bars if b["name"] == "epoch 0"]
    assert len(under) == 3 and len(clear) == 3
    for bar in under + clear:
        share = browser.execute_async_script(COLOUR_SHARE_JS, base64.b64encode(png).decode("ascii"), bar["box"], bar["fill"])
        assert share > (0.35 if bar in under else 0.95), (bar, share)  # (hatch lines and their anti-aliasing take the rest)

    # a long timeline (clean partition, drawn when opened): 50 rows + the highlighted one, then show all
    browser.execute_script("document.getElementById('clean-partitions').open = true; document.getElementById('p-orders-2').open = true")
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.querySelector('#p-orders-2 table.events') !== null"))
    count = "return document.querySelectorAll('#p-orders-2 table.events tr.ev').length"
    assert browser.execute_script(count) == 51
    assert browser.execute_script("return document.querySelectorAll('#p-orders-2 table.events tr.gap').length") == 2
    assert browser.execute_script("return document.querySelector('#p-orders-2 tr.sev-warning').cells[6].textContent") == "100"
    browser.execute_script("document.querySelector('#p-orders-2 button.show-all').click()")
    assert browser.execute_script(count) == 120
    browser.execute_script("document.querySelector('#p-orders-2 button.show-all').click()")
    assert browser.execute_script(count) == 51
    # a partition without timeline rows draws as before, with no empty Timeline heading
    browser.execute_script("document.getElementById('p-payments-0').open = true")
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.getElementById('p-payments-0').hasAttribute('data-drawn')"))
    assert browser.execute_script("return document.querySelector('#p-payments-0 .events') === null")
    assert test_report_browser.severe_logs(browser) == []
