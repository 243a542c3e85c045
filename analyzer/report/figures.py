"""Per-partition Plotly figure JSON (timeline) and the plain data behind the lineage and replica tables.

Why plain dicts in Plotly's JSON schema rather than ``go.Figure`` objects: a report may hold
thousands of partitions, and building validated figure objects costs milliseconds each and embeds
a full template per figure. One shared plotly.js plus a small dict per partition keeps report.html
small and lets the page draw a partition only when it is opened. Tests validate these dicts
against ``plotly.graph_objects.Figure``.
"""

from __future__ import annotations

import html
import textwrap
from typing import Any

import numpy as np
import pandas as pd

from jobs.findings.kinds import ACKED_DATA_LOSS, TRUNCATION_BELOW_HW
from parsers.remote_log_metadata import latest_segments

from .data import as_list, severity_of
from .summary import evidence_line, finding_headline

# Plotly's default qualitative palette (D3 category10), indexed by leader epoch.
EPOCH_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#bcbd22", "#8c564b", "#e377c2", "#7f7f7f", "#ff7f0e", "#393b79")
HOLE_COLOUR = "rgba(160,160,160,0.55)"
LOST_KINDS = frozenset({ACKED_DATA_LOSS, TRUNCATION_BELOW_HW})
# finding family -> (legend name, outline and hatch colour, hatch, bar width). The overlay has no fill
# of its own, only an outline and sparse hatching: a tinted fill over the epoch colours (and two over
# each other where a range is both lost and divergent) turned blue, green and purple into one mud,
# and which epoch a lost range belongs to is half the story.
HIGHLIGHT = {
    "lost": ("lost range", "#d62728", "/", 0.9),
    "divergent": ("divergent / suspect range", "#ff7f0e", "\\", 0.7),
}
TRANSPARENT = "rgba(0,0,0,0)"
# replica_logs column, legend name, symbol, size, colour: drawn largest first, so markers at the
# same offset (HW = recovery point = LEO on a clean replica) stay visible inside each other.
MARKERS = (
    ("leo", "LEO", "triangle-left", 16, "#111111"),
    ("hw_checkpoint", "HW checkpoint", "diamond", 12, "#b8860b"),
    ("recovery_point", "recovery point", "x", 8, "#00897b"),
    ("log_start_offset", "log start", "triangle-right", 12, "#111111"),
)
MARKER_STYLES = {  # legend name -> every property of its trace but the points (shared once per report)
    name: {"type": "scatter", "mode": "markers", "marker": {"symbol": symbol, "size": size, "color": colour, "line": {"width": 1, "color": "#ffffff"}},
           "hovertemplate": f"%{{y}} · {name} %{{x}}<extra></extra>"}
    for _, name, symbol, size, colour in MARKERS
}
MAX_RANGES_PER_LANE = 400
REMOTE_LANE = "remote storage"
REMOTE_STYLES = (  # legend name, latest states, bar style
    ("remote: copied", {"COPY_SEGMENT_FINISHED"}, {"color": "#17becf"}),
    ("remote: copy unfinished", {"COPY_SEGMENT_STARTED"}, {"color": "#ff7f0e", "pattern": {"shape": "x"}}),
    ("remote: deleted", {"DELETE_SEGMENT_STARTED", "DELETE_SEGMENT_FINISHED"}, {"color": "#c7c7c7", "pattern": {"shape": "/"}}),
)
MAX_HOVER_EVIDENCE = 3
TRUNCATION_EVENTS = frozenset({"truncation"})  # timeline events drawn on the replica's lane
TRUNCATION_STYLES = {  # legend name -> (alarming?, marker): routine truncations (a follower catching up) stay quiet
    "truncation": (False, {"symbol": "line-ns", "size": 18, "color": "#555555", "line": {"width": 2, "color": "#555555"}}),
    "alarming truncation": (True, {"symbol": "line-ns", "size": 28, "color": "#d62728", "line": {"width": 4, "color": "#d62728"}}),
}


def missing(value: Any) -> bool:
    """None, NaN, NaT or pd.NA (arrays and dicts are never 'missing' here)."""
    if value is None:
        return True
    kind = type(value)
    if kind is int or kind is str or kind is bool:  # the common cases, without pandas (~1 µs a call, a million calls at 15,000 partitions)
        return False
    if kind is float:
        return value != value
    if isinstance(value, (list, tuple, dict, np.ndarray)):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def num(value: Any) -> int | None:
    """An int from a pandas/numpy/JSON value, None for null/NaN (JSON-safe)."""
    if missing(value):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def cell_text(value: Any) -> str | None:
    """A table cell's value as the text a figure or table shows, None where it is missing."""
    return None if missing(value) else str(value)


def esc(value: Any) -> str:
    """Data from disk shown in Plotly hover text (which understands a few tags) is escaped."""
    return html.escape(str(value), quote=False)


HOVER_WIDTH = 100


def esc_wrapped(value: Any, width: int = HOVER_WIDTH) -> str:
    """``esc``, broken into lines at word boundaries: Plotly's hover box never wraps, so a whole
    Kafka log line would run off the figure (and cutting it would lose what it says)."""
    return "<br>".join(esc(line) for line in textwrap.wrap(str(value), width, break_long_words=True, break_on_hyphens=False))


def lane_name(broker: Any) -> str:
    return f"broker {num(broker)}"


Rows = list[dict[str, Any]] | pd.DataFrame | None  # one partition's rows of a table


def _rows(rows: Rows) -> list[dict[str, Any]]:
    if rows is None:
        return []
    return rows.to_dict("records") if isinstance(rows, pd.DataFrame) else rows


def _merge_ranges(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge adjacent ranges with the same epoch and kind when a lane has too many to draw."""
    if len(rows) <= MAX_RANGES_PER_LANE:
        return rows
    merged: list[dict[str, Any]] = []
    for row in rows:
        last = merged[-1] if merged else None
        if last and last["leader_epoch"] == row["leader_epoch"] and last["kind"] == row["kind"] and row["first_offset"] <= last["last_offset"] + 1:
            last["last_offset"] = max(last["last_offset"], row["last_offset"])
            last["records"] = (last["records"] or 0) + (row["records"] or 0)
            last["bytes"] = (last["bytes"] or 0) + (row["bytes"] or 0)
            last["path"], last["position"] = None, None
        else:
            merged.append(dict(row))
    return merged


def _range_rows(ranges: Rows) -> dict[int, list[dict[str, Any]]]:
    by_lane: dict[int, list[dict[str, Any]]] = {}
    for r in _rows(ranges):
        first, last = num(r.get("first_offset")), num(r.get("last_offset"))
        if first is None or last is None or num(r.get("broker")) is None:
            continue
        by_lane.setdefault(num(r["broker"]), []).append(
            {
                "first_offset": first,
                "last_offset": last,
                "leader_epoch": num(r.get("leader_epoch")),
                "kind": cell_text(r.get("kind")) or "data",
                "reason": cell_text(r.get("reason")),
                "records": num(r.get("records")),
                "bytes": num(r.get("bytes")),
                "path": cell_text(r.get("path")),
                "position": num(r.get("position")),
            }
        )
    return {b: _merge_ranges(sorted(rows, key=lambda r: r["first_offset"])) for b, rows in by_lane.items()}


def _epoch_label(epoch: int | None) -> str:
    if epoch is None:
        return "epoch ?"
    return "no epoch (v0/v1)" if epoch < 0 else f"epoch {epoch}"


def _range_hover(broker: int, r: dict[str, Any]) -> str:
    what = _epoch_label(r["leader_epoch"]) if r["kind"] == "data" else f"hole ({esc(r['reason'] or 'unexplained')})"
    lines = [f"broker {broker} · {what}", f"offsets {r['first_offset']}–{r['last_offset']}"]
    size = [f"{r['records']} records" if r["records"] is not None else "", f"{r['bytes']} bytes" if r["bytes"] is not None else ""]
    if any(size):
        lines.append(", ".join(s for s in size if s))
    if r["path"]:
        lines.append(esc(r["path"]) + (f" @{r['position']}" if r["position"] is not None else ""))
    return "<br>".join(lines)


def _bar(name: str, lanes: list[str], starts: list[int], ends: list[int], hover: list[str], **style: Any) -> dict[str, Any]:
    return {
        "type": "bar",
        "orientation": "h",
        "name": name,
        "y": lanes,
        "base": starts,
        "x": [max(e - s + 1, 1) for s, e in zip(starts, ends)],
        "hovertext": hover,
        "hoverinfo": "text",
        **style,
    }


def timeline(replicas: Rows, ranges: Rows, findings: list[dict[str, Any]], events: list[dict[str, Any]] | None = None,
             remote: Rows = None) -> dict[str, Any] | None:
    """One lane per replica: ranges coloured by leader epoch, holes greyed, lost/divergent ranges
    outlined, markers for log start, HW checkpoint, recovery point and LEO, and a red tick where
    the incident timeline (``events``, from report.timeline) says the replica truncated to. With
    tiered storage (``remote``: the partition's remote_segments rows) a last lane shows the remote
    segments by their latest state."""
    replica_rows = [r for r in _rows(replicas) if num(r.get("broker")) is not None]
    by_lane = _range_rows(ranges)
    brokers = sorted({num(r["broker"]) for r in replica_rows} | set(by_lane))
    if not brokers:
        return None
    lanes = [lane_name(b) for b in brokers]
    remote_traces = _remote_lane(remote)
    if remote_traces:
        lanes.append(REMOTE_LANE)
    traces: list[dict[str, Any]] = []
    if by_lane:
        epochs = sorted({r["leader_epoch"] for rows in by_lane.values() for r in rows if r["kind"] == "data"}, key=lambda e: (e is None, e or 0))
        for epoch in epochs:
            picked = [(b, r) for b in brokers for r in by_lane.get(b, []) if r["kind"] == "data" and r["leader_epoch"] == epoch]
            colour = EPOCH_COLOURS[(epoch or 0) % len(EPOCH_COLOURS)] if epoch is not None else "#444444"
            traces.append(_bar(_epoch_label(epoch), [lane_name(b) for b, _ in picked],
                               [r["first_offset"] for _, r in picked], [r["last_offset"] for _, r in picked],
                               [_range_hover(b, r) for b, r in picked], marker={"color": colour}, width=0.5))
        holes = [(b, r) for b in brokers for r in by_lane.get(b, []) if r["kind"] != "data"]
        if holes:
            traces.append(_bar("hole", [lane_name(b) for b, _ in holes], [r["first_offset"] for _, r in holes], [r["last_offset"] for _, r in holes],
                               [_range_hover(b, r) for b, r in holes], marker={"color": HOLE_COLOUR, "pattern": {"shape": "/"}}, width=0.5))
    else:  # no offset_ranges: one neutral bar per replica from log start to LEO
        spans = [(num(r["broker"]), num(r.get("log_start_offset")) or 0, num(r.get("leo"))) for r in replica_rows]
        spans = [(b, s, e - 1) for b, s, e in spans if e is not None and e > s]
        if spans:
            traces.append(_bar("log (no offset_ranges table)", [lane_name(b) for b, _, _ in spans], [s for _, s, _ in spans], [e for _, _, e in spans],
                               [f"broker {b}<br>offsets {s}–{e}" for b, s, e in spans], marker={"color": "#9ecae1"}, width=0.5))
    traces.extend(remote_traces)
    traces.extend(_highlights(findings, brokers))
    for column, name, *_style in MARKERS:
        pts = [(num(r["broker"]), num(r.get(column))) for r in replica_rows if num(r.get(column)) is not None]
        if pts:
            traces.append({**MARKER_STYLES[name], "name": name, "y": [lane_name(b) for b, _ in pts], "x": [v for _, v in pts]})
    traces.extend(_truncations(events, brokers))
    if not traces:
        return None
    layout = {
        "barmode": "overlay",
        "height": 130 + 46 * len(lanes),
        "margin": {"l": 80, "r": 20, "t": 60, "b": 45},
        "xaxis": {"title": {"text": "offset"}, "tickformat": "d", "zeroline": False},
        "yaxis": {"type": "category", "categoryorder": "array", "categoryarray": list(reversed(lanes)), "automargin": True},
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        "hovermode": "closest",
        "showlegend": True,
    }
    return {"data": traces, "layout": layout}



def _remote_lane(remote: Rows) -> list[dict[str, Any]]:
    """The remote storage lane: each remote segment of ``__remote_log_metadata`` as a bar, one
    trace per kind of latest state (copied, copy unfinished, deleted)."""
    segments = [s for segs in latest_segments(_rows(remote)).values() for s in segs]
    traces = []
    for name, states, style in REMOTE_STYLES:
        picked = sorted((s for s in segments if s["state"] in states), key=lambda s: s["start_offset"])
        if picked:
            hover = [f"remote segment {esc(s['segment_id'])}<br>offsets {s['start_offset']}–{s['end_offset']}<br>{esc(s['state'])}"
                     f"<br>per {esc(s['path'])}" for s in picked]  # fmt: skip
            traces.append(_bar(name, [REMOTE_LANE] * len(picked), [s["start_offset"] for s in picked],
                               [s["end_offset"] for s in picked], hover, marker=style, width=0.5))  # fmt: skip
    return traces


def _truncations(events: list[dict[str, Any]] | None, brokers: list[int]) -> list[dict[str, Any]]:
    """Truncation points (offset truncated to) on the lane of the broker that logged them: after a
    rejoin the replicas look alike again, and this tick is what still shows where data went.
    Alarming ones (e.g. below the HW, per the timeline's severity) are drawn large and red."""
    pts = [e for e in events or () if e.get("event") in TRUNCATION_EVENTS and e.get("offset") is not None and e.get("node") in brokers]
    traces = []
    for name, (alarming, marker) in TRUNCATION_STYLES.items():
        picked = [e for e in pts if (e.get("highlight") is not None) == alarming]
        if not picked:
            continue
        hover = []
        for e in picked:
            when = e["time"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC" if e.get("time") is not None else "time unknown"
            where = [esc(e["path"]) + (f" @{e['position']}" if e.get("position") is not None else "")] if e.get("path") else []
            hover.append("<br>".join([f"<b>broker {e['node']} truncated to {e['offset']}</b>", when, esc_wrapped(e.get("detail") or ""), *where]))
        traces.append({"type": "scatter", "mode": "markers", "hoverinfo": "text", "marker": marker, "name": name,
                       "y": [lane_name(e["node"]) for e in picked], "x": [e["offset"] for e in picked], "hovertext": hover})
    return traces


def _highlights(findings: list[dict[str, Any]], brokers: list[int]) -> list[dict[str, Any]]:
    """Outlined bars over the ranges a finding names, on the lanes of its brokers (all lanes if none)."""
    traces = []
    for family in ("lost", "divergent"):
        lanes, starts, ends, hover = [], [], [], []
        for f in findings:
            first, last = num(f.get("first_offset")), num(f.get("last_offset"))
            if first is None:
                continue
            is_lost = f.get("kind") in LOST_KINDS
            if (family == "lost") != is_lost or (family == "divergent" and severity_of(f) == "info"):
                continue
            named = [b for b in (num(x) for x in as_list(f.get("brokers")) + as_list(f.get("salvage_brokers"))) if b in brokers]
            tip = "<br>".join([f"<b>{severity_of(f).upper()}</b> {esc(finding_headline(f))}", esc_wrapped(f.get("explanation") or "")]
                              + [esc(evidence_line(e)) for e in (f.get("evidence") or [])[:MAX_HOVER_EVIDENCE] if isinstance(e, dict)])
            for b in sorted(set(named)) or brokers:
                lanes.append(lane_name(b))
                starts.append(first)
                ends.append(last if last is not None else first)
                hover.append(tip)
        if lanes:
            name, line, hatch, width = HIGHLIGHT[family]
            pattern = {"shape": hatch, "fgcolor": line, "bgcolor": TRANSPARENT, "fillmode": "overlay", "size": 12, "solidity": 0.1}
            traces.append(_bar(name, lanes, starts, ends, hover, marker={"color": TRANSPARENT, "line": {"color": line, "width": 2}, "pattern": pattern},
                               width=width))
    return traces


def _is_leader(likely_leader: Any, broker: int) -> bool:
    """epoch_lineage.likely_leader names the leader's broker id (older layouts: a bool per row)."""
    if missing(likely_leader):
        return False
    if isinstance(likely_leader, (bool, np.bool_)):
        return bool(likely_leader)
    return num(likely_leader) == broker


def lineage(lineage_df: Rows, replicas: Rows) -> dict[str, Any] | None:
    """Leader epochs (rows) × replicas (columns): checkpoint start offset and the offsets batches of
    that epoch span, from epoch_lineage, else from replica_logs.epoch_entries (checkpoint only);
    per epoch the leader epoch_lineage decided and its evidence (None: undetermined)."""
    cells: dict[int, dict[int, dict[str, Any]]] = {}
    led: dict[int, tuple[int | None, str | None]] = {}
    for r in _rows(lineage_df):
        epoch, broker = num(r.get("leader_epoch")), num(r.get("broker"))
        if epoch is None or broker is None:
            continue
        leader = r.get("likely_leader")
        if not missing(leader) and not isinstance(leader, (bool, np.bool_)):
            led[epoch] = (num(leader), None if missing(r.get("leader_evidence")) else str(r.get("leader_evidence")))
        cells.setdefault(epoch, {})[broker] = {
            "cp": num(r.get("checkpoint_start_offset")),
            "first": num(r.get("batch_start_offset")),
            "last": num(r.get("batch_end_offset")),
            "leader": _is_leader(r.get("likely_leader"), broker),
        }
    source = "epoch_lineage"
    if not cells:
        source = "replica_logs.epoch_entries (checkpoint only)"
        for r in _rows(replicas):
            broker = num(r.get("broker"))
            for entry in as_list(r.get("epoch_entries")):
                if isinstance(entry, dict) and num(entry.get("epoch")) is not None and broker is not None:
                    cells.setdefault(num(entry["epoch"]), {})[broker] = {"cp": num(entry.get("start_offset")), "first": None, "last": None, "leader": False}
    if not cells:
        return None
    brokers = sorted({b for row in cells.values() for b in row})
    rows = []
    for epoch in sorted(cells):
        starts = {c["cp"] for c in cells[epoch].values() if c["cp"] is not None}
        leader, evidence = led.get(epoch, (None, None))
        rows.append({"epoch": epoch, "conflict": len(starts) > 1, "cells": [cells[epoch].get(b) for b in brokers],
                     "leader": leader, "leader_evidence": evidence})
    return {"brokers": brokers, "rows": rows, "source": source}


REPLICA_COLUMNS = ("broker", "log_dir", "dir_state", "log_start_offset", "hw_checkpoint", "recovery_point", "leo",
                   "first_epoch", "last_epoch", "segments", "records", "bytes", "clean_shutdown", "compacted")


def replica_rows(replicas: Rows) -> list[dict[str, Any]]:
    """The replica_logs columns shown per partition, JSON-safe."""
    out = []
    for r in sorted(_rows(replicas), key=lambda r: num(r.get("broker")) or 0):
        row: dict[str, Any] = {}
        for c in REPLICA_COLUMNS:
            v = r.get(c)
            if c in ("log_dir", "dir_state"):
                row[c] = cell_text(v)
            elif c in ("clean_shutdown", "compacted"):
                row[c] = None if missing(v) else bool(v)
            else:
                row[c] = num(v)
        out.append({c: v for c, v in row.items() if v is not None})  # absent = unknown; keeps the page small
    return out


BASE_LAYOUT = timeline([{"broker": 0, "leo": 1}], None, [])["layout"]  # what every timeline shares


def layout_diff(layout: dict[str, Any], base: dict[str, Any] = BASE_LAYOUT) -> dict[str, Any]:
    """The keys of ``layout`` that differ from ``base`` (recursively), so the report embeds the
    shared layout once and each partition only its height and lanes; the page merges them back."""
    out: dict[str, Any] = {}
    for key, value in layout.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            sub = layout_diff(value, base[key])
            if sub:
                out[key] = sub
        elif base.get(key, object()) != value:
            out[key] = value
    return out


def compact(fig: dict[str, Any]) -> dict[str, Any]:
    """The figure minus what the report embeds once (BASE_LAYOUT, MARKER_STYLES); ``report.js``
    merges them back before drawing."""
    data = [{k: v for k, v in t.items() if k not in MARKER_STYLES.get(t.get("name"), {}) or t.get("type") != "scatter"} for t in fig["data"]]
    return {"data": data, "layout": layout_diff(fig["layout"])}


def _merge(base: dict[str, Any], diff: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in diff.items():
        out[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def expand(fig: dict[str, Any]) -> dict[str, Any]:
    """Inverse of ``compact`` (what report.js does in the page); used by tests to validate figures."""
    data = [_merge(MARKER_STYLES[t["name"]], t) if "type" not in t and t.get("name") in MARKER_STYLES else t for t in fig["data"]]
    return {"data": data, "layout": _merge(BASE_LAYOUT, fig["layout"])}
