"""report.html: sections, self-contained (nothing fetched), findings list equals findings.json,
figures valid for Plotly, data from disk escaped, clean partitions lazy, atomic write, scale."""

from __future__ import annotations

import json
import re
import time
from html.parser import HTMLParser
from pathlib import Path

import plotly.graph_objects as go
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_report_data import FINDINGS, make_out_dir

from analyzer.report import load, write_html
from analyzer.report.figures import compact, expand, timeline


class Page(HTMLParser):
    """Tags with attributes, the id -> tag map, and the text of every <script>."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._script: dict[str, str | None] | None = None
        self._buf: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "script":
            self._script, self._buf = a, []

    def handle_data(self, data):
        if self._script is not None:
            self._buf.append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script, "".join(self._buf)))
            self._script = None

    def by_id(self, ident: str) -> tuple[str, dict[str, str | None]] | None:
        return next(((t, a) for t, a in self.tags if a.get("id") == ident), None)

    def with_class(self, cls: str) -> list[tuple[str, dict[str, str | None]]]:
        return [(t, a) for t, a in self.tags if cls in (a.get("class") or "").split()]

    def raw_payload(self) -> dict:
        return json.loads(next(text for a, text in self.scripts if a.get("id") == "report-data"))

    def payload(self) -> dict:
        """The report's data as the page sees it once the clean partitions are unpacked."""
        from analyzer.report.html import unpack

        data = self.raw_payload()
        data["partitions"] = {**data["partitions"], **unpack(data.get("packed"))}
        return data


@pytest.fixture
def page(tmp_path) -> tuple[Path, Page]:
    out = make_out_dir(tmp_path / "out")
    path = write_html(load(out))
    return out, Page(path.read_text(encoding="utf-8"))


def test_sections_present(page):
    _, p = page
    for ident in ("verdict", "overview", "brokers-table", "findings", "findings-list", "filter-kind", "filter-topic", "partitions",
                  "clean-partitions", "manifest", "manifest-table", "report-data"):
        assert p.by_id(ident) is not None, ident


def test_self_contained(page):
    out, p = page
    for tag, attrs in p.tags:
        for attr in ("src", "href", "action", "data"):
            value = (attrs.get(attr) or "").strip().lower()
            assert not value.startswith(("http:", "https:", "//", "ftp:")), (tag, attr, value)
        if tag == "script":
            assert "src" not in attrs, "scripts must be inlined"
        if tag == "link":
            assert attrs.get("rel") == "icon" and attrs.get("href", "").startswith("data:")
    assert any("Plotly" in text and len(text) > 1_000_000 for _, text in p.scripts), "plotly.js inlined once"
    assert sum("Plotly" in text and len(text) > 1_000_000 for _, text in p.scripts) == 1
    assert "<style>" in (out / "report.html").read_text(encoding="utf-8")


def test_findings_list_equals_findings_json(page):
    out, p = page
    doc = json.loads((out / "findings.json").read_text())
    shown = [a for _, a in p.with_class("finding") if a.get("data-finding-id") is not None]
    assert sorted(a["data-finding-id"] for a in shown) == sorted(f["id"] for f in doc["findings"])
    by_id = {a["data-finding-id"]: a for a in shown}
    for f in doc["findings"]:
        assert by_id[f["id"]]["data-severity"] == f["severity"] and by_id[f["id"]]["data-kind"] == f["kind"]
        assert by_id[f["id"]]["data-topic"] == (f["topic"] or "")
    kinds = [a.get("value") for t, a in p.tags if t == "option"]
    assert {f["kind"] for f in FINDINGS} <= set(kinds) and "orders" in kinds


def test_findings_link_to_partition_sections(page):
    _, p = page
    targets = {a["data-target"] for _, a in p.with_class("partition-link")}
    assert targets == {"p-orders-0", "p-orders-1", "p-cluster-wide"}
    for t in targets:
        assert p.by_id(t) is not None


def test_partitions_with_findings_first_clean_collapsed(page):
    _, p = page
    parts = [(a["id"], "open" in a, a.get("class")) for t, a in p.tags if t == "details" and "partition" in (a.get("class") or "").split()]
    ids = [i for i, _, _ in parts]
    assert ids == ["p-cluster-wide", "p-orders-0", "p-orders-1", "p-orders-2", "p-payments-0"]
    assert [o for _, o, _ in parts] == [True, True, True, False, False]
    assert "open" not in p.by_id("clean-partitions")[1]


def test_payload_figures_are_valid_plotly(page):
    _, p = page
    partitions = p.payload()["partitions"]
    assert set(partitions) == {"orders-0", "orders-1", "orders-2", "payments-0"}
    for name, entry in partitions.items():
        fig = go.Figure(expand(entry["timeline"]))  # raises on an invalid property
        lanes = set(fig.layout.yaxis.categoryarray)
        assert lanes == {f"broker {r['broker']}" for r in entry["replicas"]}, name
        assert entry["lineage"]["source"] == "epoch_lineage"
    assert len(json.dumps(partitions["orders-2"])) < 2_000  # a clean partition is small JSON
    names = [t["name"] for t in partitions["orders-0"]["timeline"]["data"]]
    assert names[:3] == ["epoch 0", "epoch 1", "epoch 2"]
    assert {"lost range", "divergent / suspect range", "log start", "HW checkpoint", "recovery point", "LEO"} <= set(names)
    lost = next(t for t in partitions["orders-0"]["timeline"]["data"] if t["name"] == "lost range")
    assert lost["base"][0] == 1000 and lost["x"][0] == 812 and "812 records" in lost["hovertext"][0]
    assert "hole" in [t["name"] for t in partitions["orders-1"]["timeline"]["data"]]
    lineage = partitions["orders-0"]["lineage"]
    assert lineage["brokers"] == [1, 2, 3] and [r["epoch"] for r in lineage["rows"]] == [0, 1, 2]
    assert lineage["rows"][2]["cells"][1] == {"cp": 1000, "first": 1000, "last": 1399, "leader": True}


def test_compact_round_trip():
    from test_report_data import REPLICAS

    rows = [{"broker": b, "leo": v[3], "hw_checkpoint": v[1], "recovery_point": v[2], "log_start_offset": v[0]}
            for (t, p, b), v in REPLICAS.items() if (t, p) == ("orders", 0)]
    fig = timeline(rows, None, FINDINGS[:2])
    assert expand(compact(fig)) == fig
    go.Figure(fig)


def test_manifest_lists_hashes_not_payloads(page):
    out, p = page
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "broker-1/orders-0/00000000000000000000.log" in html and "0100" + "ab" * 30 in html
    assert html.count("<tr>") >= 38


def test_missing_tables_are_sentences(tmp_path):
    out = make_out_dir(tmp_path / "out", tables=(), run=False)
    p = Page(write_html(load(out)).read_text(encoding="utf-8"))
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "offset_ranges is missing" in html and "No files table" in html
    entry = p.payload()["partitions"]["orders-0"]
    assert entry["timeline"] is None and entry["lineage"] is None and entry["replicas"] == []


def test_fallback_timeline_without_offset_ranges(tmp_path):
    out = make_out_dir(tmp_path / "out", tables=("replica_logs",))
    entry = Page(write_html(load(out)).read_text(encoding="utf-8")).payload()["partitions"]["orders-0"]
    go.Figure(expand(entry["timeline"]))
    assert entry["timeline"]["data"][0]["name"] == "log (no offset_ranges table)"
    assert entry["lineage"]["source"].startswith("replica_logs")


def test_hostile_strings_are_escaped(tmp_path):
    evil = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"
    finding = dict(FINDINGS[0], explanation=evil, evidence=[{"broker": 1, "path": evil, "position": 0, "detail": evil}])
    out = make_out_dir(tmp_path / "out", findings=[finding])
    html = write_html(load(out)).read_text(encoding="utf-8")
    assert evil not in html and "alert(1)" in html  # present, but only escaped
    p = Page(html)
    assert not any(t == "img" for t, _ in p.tags)
    assert p.payload()  # the JSON block still parses
    fig = timeline(None, None, [finding])
    assert fig is None


def test_atomic_write_leaves_no_temp_files(tmp_path):
    out = make_out_dir(tmp_path / "out")
    write_html(load(out))
    write_html(load(out))
    assert sorted(x.name for x in out.iterdir()) == ["findings.json", "report.html", "run.json", "tables"]
    assert (out / "report.html").stat().st_mode & 0o644 == 0o644


def test_thousands_of_partitions_stay_light(tmp_path):
    """3000 partitions × 3 replicas: clean ones are small JSON, not a figure each in the DOM."""
    out = make_out_dir(tmp_path / "out", tables=())
    n = 3000
    rows = [{"topic": f"t{p // 100}", "partition": p % 100, "broker": b, "log_start_offset": 0, "leo": 1000 + p, "hw_checkpoint": 1000 + p,
             "recovery_point": 1000 + p, "clean_shutdown": True} for p in range(n) for b in (1, 2, 3)]
    (out / "tables" / "replica_logs").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), out / "tables" / "replica_logs" / "part-0.parquet")
    ranges = [{"topic": r["topic"], "partition": r["partition"], "broker": r["broker"], "range": 0, "first_offset": 0, "last_offset": r["leo"] - 1,
               "leader_epoch": 0, "kind": "data", "reason": None, "records": r["leo"], "bytes": r["leo"] * 100, "path": "x.log", "position": 0} for r in rows]
    (out / "tables" / "offset_ranges").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(ranges), out / "tables" / "offset_ranges" / "part-0.parquet")
    start = time.perf_counter()
    path = write_html(load(out))
    elapsed = time.perf_counter() - start
    size = path.stat().st_size
    p = Page(path.read_text(encoding="utf-8"))
    clean = [a for _, a in p.with_class("clean")]
    assert len([a for t, a in p.tags if t == "details" and "clean" in (a.get("class") or "").split()]) == n
    assert len(clean) >= n
    assert not any(t == "div" and "plotly" in (a.get("class") or "") for t, a in p.tags)  # nothing drawn eagerly
    assert elapsed < 60, elapsed
    assert size < 5_000_000 + n * 2_000, size


def _badges(html: str) -> list[str]:
    return re.findall(r'<span class="badge sev-[a-z]+">([^<]*)</span>', html)


def test_badges_count_in_words(tmp_path):
    """'2 errors', '1 warning', 'no warnings': not '2 error' / '0 warning'."""
    full = _badges(write_html(load(make_out_dir(tmp_path / "full"))).read_text(encoding="utf-8"))
    assert full[:4] == ["2 errors", "2 warnings", "1 info", "812 records lost"]  # the overview
    assert {"2 errors", "1 warning", "1 info"} <= set(full[4:])  # partition sections: orders-0, cluster-wide, orders-1
    infos = make_out_dir(tmp_path / "infos", findings=[f for f in FINDINGS if f["severity"] == "info"])
    assert _badges(write_html(load(infos)).read_text(encoding="utf-8"))[:3] == ["no errors", "no warnings", "1 info"]
