"""Self-contained report.html: Jinja2 template, inlined CSS/JS and one shared plotly.js.

Why this shape: the report is evidence handed between people, often offline, so it is one file
with nothing fetched from the network. Partitions with findings come first and are drawn when
scrolled into view; clean partitions are collapsed and drawn only when opened, from a small JSON
payload per partition, so a report over thousands of partitions stays light in the browser.
Over ``PACK_ABOVE`` bytes, the clean partitions' payloads are one gzip blob (``packed``, base64),
unpacked by the browser (``DecompressionStream``) the first time one is opened: their figures
repeat the same structure thousands of times, so the file shrinks several-fold and the page
parses only what has findings.

Every value the template shows is passed through ``jobs.terminal.escape`` (the environment's
``finalize``) before HTML escaping: a control character from the evidence is shown as ``\x1b``,
and the file holds none raw (it is read with ``less`` and ``grep`` too, not only in a browser).
"""

from __future__ import annotations

import base64
import gzip
import json
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

import jinja2
import markupsafe
import pandas as pd

from jobs.ingest.discover import changes_text
from jobs.terminal import escape

from . import figures
from .data import (
    SEVERITIES,
    PartitionKey,
    ReportData,
    all_partitions,
    findings_by_partition,
    human_bytes,
    overview,
    partition_key,
    partition_name,
    severity_of,
)
from .figures import cell_text, num
from .summary import consumer_lines, counted, evidence_line, finding_headline, problems_text, restart_lines, verdict
from .timeline import Event, event_text, leader_epoch_text, time_text

MAX_MANIFEST_ROWS = 20_000
MAX_EVIDENCE_SHOWN = 20
MAX_EVENTS_EMBEDDED = 2_000  # per partition; alarming rows beyond it are always kept
# Column order of one timeline row in the payload (arrays, not dicts: thousands of partitions).
EVENT_FIELDS = ("time", "source", "node", "event", "leader_epoch", "isr", "offset", "detail", "path", "position", "highlight")


def _shown(value: Any) -> Any:
    """What a ``{{ value }}`` shows: strings with their control characters escaped; our own
    markup (``|safe``: the CSS, scripts and the JSON payload, whose strings JSON escapes) as is."""
    return escape(value) if isinstance(value, str) and not isinstance(value, markupsafe.Markup) else value


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("analyzer.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
        finalize=_shown,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["counted"] = counted  # {{ n|counted('error') }}: 'no errors', '1 error', '2 errors'
    return env


def _static(name: str) -> str:
    return resources.files("analyzer.report").joinpath("templates", name).read_text(encoding="utf-8")


@cache
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def script_json(value: Any) -> str:
    """JSON safe to place inside <script>: no '</script>' or '<!--' can be formed by data."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# Clean partitions' payloads are packed only above this many bytes of JSON: below it the report
# is small anyway, and plain JSON opens in every browser (DecompressionStream needs Chromium 80,
# Firefox 113 or Safari 16.4); above it the report's size is what matters.
PACK_ABOVE = 1 << 20


def pack(partitions: dict[str, Any], above: int = 0) -> str | None:
    """Partition payloads as base64 of gzipped JSON, for the page to unpack on demand; ``None``
    when there are none or their JSON is not over ``above`` bytes. gzip at level 6: level 9 takes
    several times longer for a few percent."""
    if not partitions:
        return None
    raw = json.dumps(partitions, separators=(",", ":"), allow_nan=False).encode()
    if len(raw) <= above:
        return None
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def unpack(packed: str | None) -> dict[str, Any]:
    """The inverse of ``pack`` (tests, and anyone reading a report's data outside a browser)."""
    return json.loads(gzip.decompress(base64.b64decode(packed))) if packed else {}


def anchor(key: PartitionKey | None) -> str:
    return "p-cluster-wide" if key is None else f"p-{key[0]}-{key[1]}"


def _groups(df: pd.DataFrame | None) -> dict[PartitionKey, list[dict[str, Any]]]:
    """Rows per partition as plain dicts: one to_dict over the table, not one per group (which
    costs milliseconds each and dominates with thousands of partitions)."""
    if df is None or not {"topic", "partition"} <= set(df.columns):
        return {}
    out: dict[PartitionKey, list[dict[str, Any]]] = {}
    for row in df.to_dict("records"):
        topic, part = row.get("topic"), num(row.get("partition"))
        if cell_text(topic) is not None and part is not None:
            out.setdefault((str(topic), part), []).append(row)
    return out


def _finding_view(f: dict[str, Any]) -> dict[str, Any]:
    key = partition_key(f)
    evidence = [e for e in f.get("evidence") or [] if isinstance(e, dict)]
    return {
        "id": str(f.get("id") or ""),
        "severity": severity_of(f),
        "kind": str(f.get("kind") or ""),
        "topic": "" if key is None else key[0],
        "partition": partition_name(key),
        "anchor": anchor(key),
        "headline": finding_headline(f),
        "explanation": str(f.get("explanation") or ""),
        "evidence": [evidence_line(e) for e in evidence[:MAX_EVIDENCE_SHOWN]],
        "more_evidence": max(0, len(evidence) - MAX_EVIDENCE_SHOWN),
        "producers": f.get("producers") or [],
    }


def events_view(events: list[Event] | None, paths: dict[str, int]) -> dict[str, Any] | None:
    """One partition's timeline rows for the page, in order, as arrays of EVENT_FIELDS; evidence
    paths are interned in ``paths`` (shared by the whole report, since the same metadata log or
    server log is cited by every partition). None when the partition has no timeline rows."""
    if not events:
        return None
    rows = []
    omitted = 0
    for i, e in enumerate(events):
        if i >= MAX_EVENTS_EMBEDDED and e["highlight"] is None:
            omitted += 1
            continue
        path = None if e["path"] is None else paths.setdefault(e["path"], len(paths))
        rows.append([time_text(e["time"]), e["source"] or "", e["node"], event_text(e), leader_epoch_text(e),
                     "" if e["isr"] is None else "[" + ", ".join(map(str, e["isr"])) + "]", e["offset"], e["detail"],
                     path, e["position"], e["highlight"]])
    return {"rows": rows, "total": len(events), "omitted": omitted, "alarming": sum(e["highlight"] is not None for e in events)}


def _manifest(data: ReportData) -> dict[str, Any]:
    files = data.table("files")
    if files is None:
        return {"rows": [], "total": 0, "bytes": None}
    cols = [c for c in ("broker", "path", "kind", "size", "sha256", "mtime", "dir_state", "archive") if c in files.columns]
    df = files[cols].sort_values([c for c in ("broker", "path") if c in cols])
    rows = []
    for r in df.head(MAX_MANIFEST_ROWS).to_dict("records"):
        rows.append({c: (num(r[c]) if c in ("broker", "size") else cell_text(r[c])) for c in cols})
    return {"rows": rows, "total": len(df), "bytes": int(df["size"].fillna(0).sum()) if "size" in cols else None, "columns": cols}


def _brokers(data: ReportData) -> list[dict[str, Any]]:
    df = data.table("brokers")
    if df is None:
        return []
    out = []
    for r in df.sort_values("broker").to_dict("records") if "broker" in df.columns else []:
        out.append({
            "broker": num(r.get("broker")),
            "cluster_id": cell_text(r.get("cluster_id")) or "",
            "roles": cell_text(r.get("roles")) or "",
            "id_source": cell_text(r.get("id_source")) or "",
            "log_dirs": ", ".join(str(d) for d in figures.as_list(r.get("log_dirs"))),
            "files": num(r.get("files")),
            "bytes": human_bytes(num(r.get("bytes"))) if num(r.get("bytes")) is not None else "",
        })
    return out


def _timings(run: dict[str, Any] | None) -> dict[str, Any]:
    """run.json's seconds per phase (``seconds``, or ``timings`` in older runs), scalars only."""
    for key in ("seconds", "timings"):
        value = (run or {}).get(key)
        if isinstance(value, dict):
            return {k: round(v, 1) if isinstance(v, float) else v for k, v in value.items() if isinstance(v, (int, float, str))}
    return {}


def build_context(data: ReportData) -> dict[str, Any]:
    """Everything the template shows, as plain values (the template has no logic beyond loops)."""
    groups = findings_by_partition(data.findings)
    replicas, ranges, lineages, remote = (_groups(data.table(n)) for n in ("replica_logs", "offset_ranges", "epoch_lineage", "remote_segments"))
    with_findings = [k for k in groups if k is not None]
    clean = [k for k in all_partitions(data) if k not in groups]
    payload: dict[str, Any] = {}
    packed: dict[str, Any] = {}
    paths: dict[str, int] = {}
    for key in with_findings + clean:
        found = groups.get(key, [])
        fig = figures.timeline(replicas.get(key), ranges.get(key), found, data.timeline.get(key), remote.get(key))
        if fig is not None:
            fig = figures.compact(fig)
        entry = {
            "timeline": fig,
            "lineage": figures.lineage(lineages.get(key), replicas.get(key)),
            "replicas": figures.replica_rows(replicas.get(key)),
        }
        events = events_view(data.timeline.get(key), paths)
        if events is not None:  # absent, not null, for the many partitions without rows
            entry["events"] = events
        # keyed by the name the page shows in its data-key attribute (escaped there by ``_shown``)
        (payload if key in groups else packed)[escape(partition_name(key))] = entry

    def section(key: PartitionKey) -> dict[str, Any]:
        items = groups.get(key, [])
        return {"name": partition_name(key), "anchor": anchor(key),
                "counts": {s: n for s in SEVERITIES if (n := sum(severity_of(f) == s for f in items))},
                "worst": severity_of(items[0]) if items else None}

    packed_clean = pack(packed, PACK_ABOVE)
    if packed_clean is None:
        payload.update(packed)
    views = [_finding_view(f) for items in groups.values() for f in items]
    # the findings list's anchors are f-1, f-2 … in this order: the box links to them
    anchors = {v["id"]: f"f-{i}" for i, v in enumerate(views, 1) if v["id"]}
    restart = [{**line, "anchor": anchors.get(line["finding_id"] or "")} for line in restart_lines(data)]
    consumers = [{**line, "anchor": anchors.get(line["finding_id"] or "")} for line in consumer_lines(data.findings)]
    missing = data.missing_tables
    missing_sentences = {
        "replica_logs": "replica_logs is missing: no log start / HW / recovery point / LEO markers or replica tables.",
        "offset_ranges": "offset_ranges is missing: timelines show one bar per replica from log start to LEO, without epochs.",
        "epoch_lineage": "epoch_lineage is missing: lineage tables come from the leader-epoch checkpoints only.",
        "files": "files is missing: no evidence manifest.",
        "brokers": "brokers is missing: the broker table is empty.",
    }
    ov = overview(data)
    return {
        "title": f"kafka-forensics report — {(data.shown_dir or data.out_dir).name}",
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "findings_generated_at": str(data.findings_doc.get("generated_at") or ""),
        "out_dir": str(data.shown_dir or data.out_dir),
        "ov": ov,
        "era": ov["era"],
        "bytes_text": human_bytes(ov["bytes"]),
        "problems_text": problems_text(ov["problems"]) if ov["problems"] is not None else "",
        "changes_text": changes_text(ov["input_changes"]) or "",
        "brokers": _brokers(data),
        "verdict": verdict(data.findings),
        "restart": restart,
        "consumers": consumers,
        "worst": min((severity_of(f) for f in data.findings), key=SEVERITIES.index, default=None),
        "findings": views,
        "severities": SEVERITIES,
        "kinds": sorted({v["kind"] for v in views}),
        "topics": sorted({v["topic"] for v in views if v["topic"]}),
        "cluster_wide": groups.get(None, []) and section_cluster_wide(groups[None]),
        "partitions_with_findings": [section(k) for k in with_findings],
        "clean_partitions": [section(k) for k in clean],
        "notes": data.notes + [missing_sentences.get(n, f"{n} is missing.") for n in missing],
        "manifest": _manifest(data),
        "timings": _timings(data.run),
        "payload": script_json({"base_layout": figures.BASE_LAYOUT, "trace_styles": figures.MARKER_STYLES, "partitions": payload,
                                "packed": packed_clean, "event_fields": EVENT_FIELDS, "paths": list(paths)}),
        "has_timeline": bool(data.timeline),
        "css": _static("report.css"),
        "report_js": _static("report.js"),
        "plotly_js": _plotly_js(),
    }


def section_cluster_wide(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "cluster-wide", "anchor": anchor(None), "counts": {s: n for s in SEVERITIES if (n := sum(severity_of(f) == s for f in items))}}


def render_html(data: ReportData) -> str:
    """The whole report as one HTML string."""
    return _environment().get_template("report.html.j2").render(**build_context(data))
