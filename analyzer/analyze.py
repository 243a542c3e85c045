"""``analyze``: ingest + forensic jobs + report in one run, into DIR atomically.

The run is ``ingest``'s own (``jobs.ingest.run.staged_run``): inputs are discovered before Spark
starts, everything is built in a sibling of DIR and swapped in at the end, so a run killed at any
point leaves the previous DIR whole, and the Spark SQL catalog is registered after the swap (it
stores absolute locations). The jobs and the report run inside that block; the report's data is
loaded once, from the staged DIR as the run wrote it, and every format renders from it.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from jobs.errors import InputError
from jobs.ingest.focus import Focus

if TYPE_CHECKING:  # (pandas: loaded once the inputs proved usable)
    from .report import ReportData

log = logging.getLogger(__name__)


class AnalyzeError(InputError, ValueError):
    """Unusable input or arguments: the CLI prints it as one line and exits 2."""


@dataclass
class Analysis:
    """What one run of ``analyze`` leaves: findings.json's document, and the report's data loaded
    once from DIR (the text, JSON and HTML formats all render from it)."""

    doc: dict[str, Any]
    report: ReportData


def analyze(inputs: list[Path | str], out: Path, ledger: Path | None = None, master: str = "local[*]", progress: bool = True,
            spark=None, register_catalog: bool = True, focus: Focus | None = None) -> Analysis:
    """Ingest (``jobs.ingest.run.staged_run``), run the jobs and write findings.json, run.json and
    report.html into DIR. ``spark``: an existing session to reuse (tests); otherwise one is started
    once the inputs proved usable. ``register_catalog=False`` leaves the catalog to be built on
    first ``sql`` use (tests). ``focus``: only those partitions are read, and ``input.focus`` says
    so (null when everything was)."""
    from jobs.ingest.run import staged_run

    if ledger is not None and not ledger.is_file():
        raise AnalyzeError(f"--ledger {ledger}: no such file")
    if ledger is not None and not os.access(ledger, os.R_OK):
        raise AnalyzeError(f"--ledger {ledger}: not readable")
    t0 = time.monotonic()
    with staged_run(inputs, out, master, progress=progress, spark=spark, register=register_catalog, focus=focus) as staged:
        from jobs.findings import run as forensics  # (Spark's modules: imported once the inputs proved usable)
        from jobs.findings.model import document, write_json
        from jobs.ingest.progress import Stages

        from .report import load, write_html

        res, tmp = staged.result, staged.tmp
        t1 = time.monotonic()
        with Stages(enabled=progress) as stages:
            findings = forensics.run(staged.spark, tmp, ledger=ledger, stage=stages.stage, focus=staged.focus)
            t2 = time.monotonic()
            info = {
                "paths": [str(p) for p in inputs],
                "brokers": sorted(b["broker"] for b in res.brokers if b.get("broker") is not None),
                "files": res.files,
                "bytes": res.bytes,
                "ledger": str(ledger) if ledger else None,
                "focus": staged.run_info.get("focus"),  # (within the focused collections read)
                "changed_during_run": res.input_changes,
            }
            doc = document(findings, info)
            write_json(tmp / "findings.json", doc)
            staged.run_info.update({"input": info, "ledger": info["ledger"],
                                    "seconds": {**res.seconds, "jobs": round(t2 - t1, 2), "total": round(time.monotonic() - t0, 2)},
                                    "findings": doc["summary"]})
            staged.write_run_json()  # (the report shows it)
            stages.stage("report")
            report = load(tmp)
            write_html(report, shown_dir=Path(out).absolute())
    report.out_dir = Path(out)  # swapped in: DIR now holds what the report was loaded from
    return Analysis(doc, report)


def build(inputs: list[Path], out: Path, ledger: Path | None = None, master: str = "local[*]", progress: bool = True,
          spark=None, register_catalog: bool = True, focus: Focus | None = None) -> dict:
    """``analyze`` without printing anything; returns findings.json's document (tests, benchmarks)."""
    return analyze(inputs, out, ledger=ledger, master=master, progress=progress, spark=spark, register_catalog=register_catalog,
                   focus=focus).doc


def run_analyze(inputs: list[Path | str], out: Path, fmt: str = "text", ledger: Path | None = None, master: str = "local[*]",
                fail_on: str = "error", stream: TextIO | None = None, progress: bool = True, spark=None,
                register_catalog: bool = True, focus: Focus | None = None) -> int:
    """The ``analyze`` command: print ``fmt`` and return the contract's exit code (0 clean, 1
    findings >= ``fail_on``); the CLI checked both options (``analyzer.choices``)."""
    done = analyze(inputs, out, ledger=ledger, master=master, progress=progress, spark=spark, register_catalog=register_catalog,
                   focus=focus)
    from .report import exit_code, render

    render(done.report, fmt, stream or sys.stdout)
    return exit_code(done.doc, fail_on)
