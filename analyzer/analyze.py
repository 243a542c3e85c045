"""``analyze``: ingest + forensic jobs + report in one run, into DIR atomically.

The ingest pipeline is ``ingest``'s own (``jobs.ingest.run.staged_ingest``): inputs are discovered
before Spark starts, everything is built in a sibling of DIR and swapped in at the end, so a run
killed at any point leaves the previous DIR whole, and the Spark SQL catalog is registered after
the swap (it stores absolute locations). The jobs and the report run inside that block.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import TextIO

from jobs.errors import InputError
from jobs.ingest.focus import Focus

log = logging.getLogger(__name__)


class AnalyzeError(InputError, ValueError):
    """Unusable input or arguments: the CLI prints it as one line and exits 2."""


def build(inputs: list[Path | str], out: Path, ledger: Path | None = None, master: str = "local[*]",
          progress: bool = True, spark=None, register_catalog: bool = True, focus: Focus | None = None) -> dict:
    """Ingest (``jobs.ingest.run.staged_ingest``), run the jobs and write findings.json +
    report.html into DIR; return findings.json's document. ``spark``: an existing session to reuse
    (tests); otherwise one is started once the inputs proved usable. ``register_catalog=False`` leaves the catalog to
    be built on first ``sql`` use (tests). ``focus``: only those partitions are read, and
    ``input.focus`` says so (null when everything was)."""
    from jobs.ingest.run import staged_ingest

    if ledger is not None and not ledger.is_file():
        raise AnalyzeError(f"--ledger {ledger}: no such file")
    if ledger is not None and not os.access(ledger, os.R_OK):
        raise AnalyzeError(f"--ledger {ledger}: not readable")
    t0 = time.monotonic()
    with staged_ingest(inputs, out, master, progress=progress, spark=spark, register=register_catalog, focus=focus) as staged:
        from jobs.findings import run as forensics  # (Spark's modules: imported once the inputs proved usable)
        from jobs.findings.model import document, write_json
        from jobs.ingest.progress import Stages

        from .report import write_html

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
            staged.write_run_json()  # the report shows it
            stages.stage("report")
            write_html(tmp, shown_dir=Path(out).absolute())
    return doc


def run_analyze(inputs: list[Path | str], out: Path, fmt: str = "text", ledger: Path | None = None, master: str = "local[*]",
                fail_on: str = "error", stream: TextIO | None = None, progress: bool = True, spark=None,
                register_catalog: bool = True, focus: Focus | None = None) -> int:
    """The ``analyze`` command: returns the contract's exit code (0 clean, 1 findings ≥ fail_on)."""
    from jobs.findings.severity import SEVERITIES

    if fmt not in ("text", "json", "html"):
        raise AnalyzeError(f"--format must be text, json or html, not {fmt!r}")
    if fail_on not in SEVERITIES:
        raise AnalyzeError(f"--fail-on must be error, warning or info, not {fail_on!r}")
    doc = build(inputs, out, ledger=ledger, master=master, progress=progress, spark=spark, register_catalog=register_catalog,
                focus=focus)
    from .report import exit_code, render

    render(out, fmt, stream or sys.stdout)
    return exit_code(doc, fail_on)
