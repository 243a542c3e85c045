"""Sentences shared by the terminal and HTML reports: the verdict and one-line finding labels.

Why shared: an operator reading the terminal and a colleague reading report.html must see the
same words for the same finding, so both renderers take their wording from here.
"""

from __future__ import annotations

from typing import Any

from jobs.findings.kinds import ACKED_DATA_LOSS, CONSUMER_READ_LOST_DATA

from .data import SEVERITIES, as_list, partition_key, partition_name, severity_of

LOSS_KIND = ACKED_DATA_LOSS
MAX_VERDICT_LINES = 3


def offsets_text(finding: dict[str, Any]) -> str:
    first, last = finding.get("first_offset"), finding.get("last_offset")
    if first is None and last is None:
        return ""
    if last is None or first == last:
        return f"offset {first if first is not None else last}"
    return f"offsets {first}–{last}"


def brokers_text(brokers: Any) -> str:
    ids = [str(b) for b in as_list(brokers)]
    if not ids:
        return ""
    return ("broker " if len(ids) == 1 else "brokers ") + ", ".join(ids)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def counted(n: int, word: str) -> str:
    """'no errors', '1 error', '2 errors': a count as a reader says it (badges, summary lines)."""
    return f"no {word}s" if n == 0 else _plural(n, word)


def loss_sentence(finding: dict[str, Any]) -> str:
    """'812 acknowledged records lost on orders-0, offsets 1000–1811, still held by broker 1'."""
    records = finding.get("records")
    what = f"{records} acknowledged records" if records is not None else "acknowledged records"
    parts = [f"{what} lost on {partition_name(partition_key(finding))}"]
    if offsets_text(finding):
        parts.append(offsets_text(finding))
    salvage = as_list(finding.get("salvage_brokers"))
    parts.append(f"still held by {brokers_text(salvage)}" if salvage else "no replica holds them any more")
    return ", ".join(parts)


def verdict(findings: list[dict[str, Any]]) -> list[str]:
    """The few lines an operator reads first: acknowledged loss if any, else the worst there is."""
    losses = sorted((f for f in findings if f.get("kind") == LOSS_KIND), key=lambda f: -(f.get("records") or 0))
    lines = [loss_sentence(f) for f in losses[:MAX_VERDICT_LINES]]
    if len(losses) > MAX_VERDICT_LINES:
        rest = losses[MAX_VERDICT_LINES:]
        total = sum(int(f.get("records") or 0) for f in rest)
        lines.append(f"… and {_plural(len(rest), 'more loss finding')} ({total} records)")
    counts = {sev: sum(severity_of(f) == sev for f in findings) for sev in SEVERITIES}
    other_errors = [f for f in findings if severity_of(f) == "error" and f.get("kind") != LOSS_KIND]
    if other_errors:
        parts = sorted({partition_name(partition_key(f)) for f in other_errors})
        kinds = sorted({str(f.get("kind")) for f in other_errors})
        lead = "Also " if lines else "No acknowledged loss proven, but "
        lines.append(f"{lead}{_plural(len(other_errors), 'error')} on {_plural(len(parts), 'partition')}: {', '.join(kinds)}")
    if not lines:
        if counts["warning"]:
            lines.append(f"No data loss or divergence found; {_plural(counts['warning'], 'warning')} to review")
        elif counts["info"]:
            lines.append(f"Clean: no errors or warnings ({_plural(counts['info'], 'informational note')})")
        else:
            lines.append("Clean: no findings")
    return lines


def restart_lines(data: Any) -> list[dict[str, Any]]:
    """The "Before you restart" box: each restart_preview truncation that destroys records, in the
    table's own sentence, with the finding whose range it destroys (``finding_id``)."""
    df = data.table("restart_preview")
    if df is None or "sentence" not in df.columns:
        return []
    rows = df[df["sentence"].notna()].sort_values(["topic", "partition", "broker"])
    return [{"sentence": str(r["sentence"]), "finding_id": r.get("finding_id") if isinstance(r.get("finding_id"), str) else None}
            for r in rows.to_dict("records")]


def consumer_lines(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per consumer group that read lost or divergent records (``consumer_read_lost_data``)."""
    return [{"sentence": str(f.get("explanation") or ""), "finding_id": f.get("id"), "severity": severity_of(f)}
            for f in findings if f.get("kind") == CONSUMER_READ_LOST_DATA]


def finding_headline(finding: dict[str, Any]) -> str:
    """'acked_data_loss offsets 1000–1811 · 812 records · brokers 1, 2 · epochs 1, 2'."""
    parts = [str(finding.get("kind") or "finding")]
    if offsets_text(finding):
        parts.append(offsets_text(finding))
    if finding.get("records") is not None:
        parts.append(_plural(int(finding["records"]), "record"))
    if brokers_text(finding.get("brokers")):
        parts.append(brokers_text(finding.get("brokers")))
    epochs = as_list(finding.get("leader_epochs"))
    if epochs:
        parts.append(("epoch " if len(epochs) == 1 else "epochs ") + ", ".join(str(e) for e in epochs))
    if finding.get("kind") == LOSS_KIND and "surviving_broker" in finding:
        surviving = finding["surviving_broker"]
        parts.append("surviving log undetermined" if surviving is None else f"surviving log on broker {surviving}")
    salvage = as_list(finding.get("salvage_brokers"))
    if salvage:
        parts.append(f"salvage from {brokers_text(salvage)}")
    return " · ".join(parts)


def evidence_line(ev: dict[str, Any]) -> str:
    """'broker 1 broker-1/orders-0/00000000000000000000.log @8123: detail' (never payload bytes)."""
    where = str(ev.get("path") or "")
    if ev.get("position") is not None:
        where += f" @{ev['position']}"
    head = " ".join(x for x in (f"broker {ev['broker']}" if ev.get("broker") is not None else "", where) if x)
    detail = str(ev.get("detail") or "")
    return f"{head}: {detail}" if head and detail else (head or detail)


def problems_text(problems: dict[str, Any]) -> str:
    """'3 (torn_tail 2, crc_mismatch 1)' or 'none'."""
    if not problems["total"]:
        return "none"
    return f"{problems['total']} (" + ", ".join(f"{k} {v}" for k, v in problems["by_kind"].items()) + ")"
