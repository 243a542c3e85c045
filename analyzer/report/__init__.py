"""The report layer: turn an output DIR (findings.json + Parquet tables) into a terminal summary,
JSON on stdout, or a self-contained report.html, without Spark, so ``report DIR`` is fast.

DIR is read once (``load`` -> ``ReportData``) and every format renders from that data. API used by
the CLI and by ``analyze`` (the CLI checked ``fmt`` and ``fail_on`` against ``analyzer.choices``):
- ``load(out_dir) -> ReportData``: DIR's findings, run.json and tables.
- ``write_html(data) -> Path``: (re)write DIR/report.html atomically.
- ``render(data, fmt, stream, output=None)``: print the chosen format (text | json | html) to
  ``stream``; for html the report's path, or with ``output="-"`` the HTML itself.
- ``exit_code(findings, fail_on) -> int``: the contract's 0/1 by severity threshold.
- ``run_report(out_dir, fmt, stream, fail_on, output=None) -> int``: all of them, as ``report DIR`` does.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from jobs.findings.severity import SEVERITY_RANK

from .data import ReportData, ReportError, load, severity_of

__all__ = ["ReportData", "ReportError", "exit_code", "load", "render", "run_report", "write_html"]


def exit_code(findings: Iterable[Mapping[str, Any]] | Mapping[str, Any], fail_on: str = "error") -> int:
    """1 when any finding is at or above ``fail_on`` (error > warning > info: ``choices.FAIL_ON``),
    else 0.

    Accepts the findings list or the whole findings.json document."""
    if isinstance(findings, Mapping):
        findings = findings.get("findings") or []
    threshold = SEVERITY_RANK[fail_on]
    return int(any(SEVERITY_RANK[severity_of(dict(f))] <= threshold for f in findings))


def _atomic_write(path: Path, content: str) -> None:
    """Temp file in the same folder, then os.replace: a reader never sees half a report."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(content)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a report is meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_html(data: ReportData, shown_dir: Path | None = None) -> Path:
    """Render DIR/report.html from DIR's data; returns its path. ``shown_dir``: the directory the
    report names (analyze renders in a staging sibling that is then swapped in)."""
    from .html import render_html

    data.shown_dir = shown_dir
    path = data.out_dir / "report.html"
    _atomic_write(path, render_html(data))
    return path


def render(data: ReportData, fmt: str, stream: TextIO | None = None, output: str | None = None) -> None:
    """Print DIR's ``data`` in ``fmt``: text (rich summary), json (findings.json as is), html (the
    path of DIR/report.html, written when it does not exist yet). A report is megabytes (plotly.js
    is inlined), so its HTML goes to ``stream`` only when asked with ``output="-"``; another
    ``output`` gets a copy of the report and its path is printed instead."""
    stream = stream or sys.stdout
    if fmt == "json":
        stream.write(data.findings_json)
        return
    if fmt == "text":
        from .text import render_text

        render_text(data, stream)
        return
    path = data.out_dir / "report.html"
    if not path.exists():
        write_html(data)
    if output == "-":
        stream.write(path.read_text(encoding="utf-8"))
        return
    if output is not None:
        path = _copy(path, Path(output))
    stream.write(f"{path}\n")


def _copy(report: Path, dest: Path) -> Path:
    """The report copied to ``dest`` (atomically); an unwritable ``dest`` is bad usage."""
    try:
        _atomic_write(dest, report.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReportError(f"{dest}: cannot write the report: {exc.strerror or exc}") from None
    return dest


def run_report(out_dir: Path | str, fmt: str = "text", stream: TextIO | None = None, fail_on: str = "error",
               output: str | None = None) -> int:
    """What ``report DIR`` does: load DIR once, rewrite report.html, print ``fmt`` (``output``: see
    ``render``), return the exit code for ``fail_on``. Raises ReportError for unusable input."""
    data = load(out_dir)
    try:
        write_html(data)
    except OSError as exc:  # DIR, the user's: read-only, full
        raise ReportError(f"{out_dir}: cannot write report.html: {exc.strerror or exc}") from None
    render(data, fmt, stream, output)
    return exit_code(data.findings, fail_on)
