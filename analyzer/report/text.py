"""Terminal summary (rich): overview, verdict, findings by partition with their top evidence.

Why rich and these limits: the summary must read well in a 100-column terminal and in a CI log
(no colour, no cursor codes when stdout is not a terminal); the full detail lives in report.html,
so long lists are cut with a pointer to it.

Every value from the evidence (names, paths, ids, explanations that quote them, broker log lines)
goes through ``jobs.terminal.escape`` where it becomes a line or a cell, and rich's markup is
off: a topic named ``t\x1b]0;…`` or ``[link=…]`` is shown as what it is, never acted on.
"""

from __future__ import annotations

import os
from typing import Any, TextIO

from rich.console import Console, Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from jobs.ingest.discover import changes_text
from jobs.terminal import escape

from .data import SEVERITIES, ReportData, findings_by_partition, human_bytes, overview, partition_name, severity_of
from .summary import consumer_lines, counted, evidence_line, finding_headline, problems_text, restart_lines, verdict
from .timeline import Event, alarming, event_text, evidence_text, time_text, where_text

STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
MAX_PARTITIONS = 30
MAX_FINDINGS_PER_PARTITION = 8
MAX_EVIDENCE = 2
MAX_TIMELINE_LINES = 8
DEFAULT_WIDTH = 100


def make_console(stream: TextIO) -> Console:
    """Colour only on a real terminal; elsewhere plain text at $COLUMNS (default 100) columns."""
    is_tty = hasattr(stream, "isatty") and stream.isatty()
    width = None if is_tty else int(os.environ.get("COLUMNS") or DEFAULT_WIDTH)
    return Console(file=stream, width=width, no_color=not is_tty, highlight=False, soft_wrap=False, emoji=False, markup=False)


def _overview_table(data: ReportData) -> Table:
    ov = overview(data)
    rows: list[tuple[str, str]] = []
    brokers = ov["brokers"]
    rows.append(("Brokers", f"{len(brokers)} ({', '.join(map(str, brokers))})" if brokers else "unknown"))
    rows.append(("Log dirs", str(ov["log_dirs"]) if ov["log_dirs"] is not None else "unknown"))
    topics = ov["topics"]
    shown = ", ".join(topics[:8]) + (f", … {len(topics) - 8} more" if len(topics) > 8 else "")
    rows.append(("Topics", f"{len(topics)} ({shown})" if topics else "0"))
    rows.append(("Partitions", str(ov["partitions"])))
    files = f"{ov['files']} files, " if ov["files"] is not None else ""
    rows.append(("Data", f"{files}{human_bytes(ov['bytes'])}"))
    era = ov["era"]
    rows.append(("Kafka era", f"{era.label}" + (f" — {'; '.join(era.reasons)}" if era and era.reasons else "")))
    if ov["cluster_ids"]:
        rows.append(("Cluster id", ", ".join(ov["cluster_ids"])))
    if ov["inputs"]:
        rows.append(("Input", ", ".join(ov["inputs"])))
    if ov["focus"]:
        rows.append(("Focus", ov["focus"]))
    if moved := changes_text(ov["input_changes"]):
        rows.append(("Input changed", moved))
    if ov["problems"] is not None:
        rows.append(("Parser problems", problems_text(ov["problems"])))
    counts = ov["counts"]
    rows.append(("Findings", " · ".join(counted(counts[s], s) for s in SEVERITIES)))
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for label, value in rows:
        table.add_row(label, Text(escape(value)))
    return table


def _finding_block(finding: dict[str, Any]) -> Group:
    sev = severity_of(finding)
    head = Text.assemble((f"{sev.upper():<7}", STYLE[sev]), " ", (escape(finding_headline(finding)), "bold"))
    lines: list[Any] = [head]
    if finding.get("explanation"):
        lines.append(Padding(Text(escape(str(finding["explanation"]))), (0, 0, 0, 8)))
    evidence = [e for e in finding.get("evidence") or [] if isinstance(e, dict)]
    for ev in evidence[:MAX_EVIDENCE]:
        lines.append(Padding(Text("↳ " + escape(evidence_line(ev)), style="dim"), (0, 0, 0, 8)))
    if len(evidence) > MAX_EVIDENCE:
        more = len(evidence) - MAX_EVIDENCE
        lines.append(Padding(Text(f"↳ … {more} more piece{'s' if more != 1 else ''} of evidence in report.html", style="dim"), (0, 0, 0, 8)))
    return Group(*lines)


def _timeline_block(events: list[Event]) -> Group | None:
    """The partition's alarming timeline rows (unclean elections, truncations below HW …), oldest
    first, so the terminal tells who led when next to the findings they explain."""
    rows = alarming(events)
    if not rows:
        return None
    lines: list[Any] = [Text(f"Timeline ({len(rows)} alarming of {len(events)} events):", style="bold")]
    for e in rows[:MAX_TIMELINE_LINES]:
        when = time_text(e["time"]) or "time unknown"
        where = where_text(e)
        line = Text.assemble(("⏱ ", STYLE[e["highlight"]]), f"{when}  ", (escape(event_text(e)), STYLE[e["highlight"]]),
                             escape(f"  {where}") if where else "", escape(f": {e['detail']}") if e["detail"] else "")
        if evidence_text(e):
            line.append(escape(f" [{evidence_text(e)}]"), style="dim")
        lines.append(Padding(line, (0, 0, 0, 8)))
    if len(rows) > MAX_TIMELINE_LINES:
        lines.append(Padding(Text(f"… {len(rows) - MAX_TIMELINE_LINES} more alarming events in report.html", style="dim"), (0, 0, 0, 8)))
    return Group(*lines)


def render_text(data: ReportData, stream: TextIO) -> None:
    """Print the terminal summary of DIR to ``stream`` (trailing padding stripped, so CI logs and
    diffs stay clean)."""
    console = make_console(stream)
    with console.capture() as captured:
        _print_summary(console, data)
    stream.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    stream.flush()


def _print_restart_box(console: Console, data: ReportData) -> None:
    """What restarting each broker destroys, and the consumer groups that read lost records: what
    an operator must act on before bringing brokers back."""
    restart, consumers = restart_lines(data), consumer_lines(data.findings)
    if not restart and not consumers:
        return
    console.print()
    console.rule(Text("Before you restart", style="bold"), align="left")
    for line in restart:
        ref = f" [{line['finding_id']}]" if line["finding_id"] else ""
        console.print(Text.assemble(("⚠ ", STYLE["error"]), escape(line["sentence"]), (escape(ref), "dim")))
    for line in consumers:
        console.print(Text.assemble(("⚠ ", STYLE[line["severity"]]), escape(line["sentence"]), (escape(f" [{line['finding_id']}]"), "dim")))


def _print_summary(console: Console, data: ReportData) -> None:
    console.rule(Text("kafka-forensics report", style="bold"), align="left")
    console.print(_overview_table(data))
    console.print()
    worst = min((severity_of(f) for f in data.findings), key=SEVERITIES.index, default=None)
    for i, line in enumerate(verdict(data.findings)):
        label = "Verdict: " if i == 0 else " " * len("Verdict: ")
        console.print(Text(label, style="bold") + Text(escape(line), style=STYLE[worst] if worst else "bold green"))
    _print_restart_box(console, data)
    groups = findings_by_partition(data.findings)
    if groups:
        console.print()
        console.rule(Text(f"Findings by partition ({len(data.findings)} in {len(groups)} groups)", style="bold"), align="left")
    for i, (key, items) in enumerate(groups.items()):
        if i == MAX_PARTITIONS:
            console.print(Text(f"… {len(groups) - MAX_PARTITIONS} more partitions with findings: see report.html", style="bold"))
            break
        counts = [counted(n, s) for s in SEVERITIES if (n := sum(severity_of(f) == s for f in items))]
        console.print()
        console.print(Text.assemble((escape(partition_name(key)), "bold underline"), "  ", (" · ".join(counts), "dim")))
        for finding in items[:MAX_FINDINGS_PER_PARTITION]:
            console.print(_finding_block(finding))
        if len(items) > MAX_FINDINGS_PER_PARTITION:
            console.print(Padding(Text(f"… {len(items) - MAX_FINDINGS_PER_PARTITION} more findings on this partition in report.html"), (0, 0, 0, 8)))
        block = _timeline_block(data.timeline.get(key, [])) if key is not None else None
        if block is not None:
            console.print(block)
    notes = list(data.notes)
    if data.missing_tables:
        notes.append(f"Tables missing (not shown): {', '.join(data.missing_tables)}.")
    if notes:
        console.print()
        for note in notes:
            console.print(Text("Note: " + escape(note), style="dim"))
    console.print()
    html = data.out_dir / "report.html"
    where = f"Full report: {html}" if html.exists() else f"Full report: {html} (not written yet: run `kafka-forensics report {data.out_dir}`)"
    console.print(Text(escape(where), style="bold"))
    console.print(Text(escape(f"Findings (JSON): {data.out_dir / 'findings.json'}"), style="dim"))
