"""``analyze``: ingest + forensic jobs + report in one run, into DIR atomically.

Everything is built in a sibling of DIR (``jobs.store.outdir.staged_output``) and swapped in at the
end, so a run killed at any point leaves the previous DIR whole. The Spark SQL catalog is
registered after the swap (it stores absolute locations), in the same process.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import TextIO

log = logging.getLogger(__name__)


class AnalyzeError(Exception):
    """Unusable input or arguments: the CLI prints it as one line and exits 2."""


def _check_inputs(inputs: list[Path], ledger: Path | None) -> None:
    for p in inputs:
        if not p.exists():
            raise AnalyzeError(f"{p}: no such file or directory")
        if not os.access(p, os.R_OK):
            raise AnalyzeError(f"{p}: not readable")
    if ledger is not None and not ledger.is_file():
        raise AnalyzeError(f"--ledger {ledger}: no such file")


def build(inputs: list[Path], out: Path, ledger: Path | None = None, master: str = "local[*]",
          progress: bool = True, spark=None, register_catalog: bool = True) -> dict:
    """Ingest, run the jobs and write findings.json + report.html into DIR; return findings.json's
    document. ``spark``: an existing session to reuse (tests); otherwise one is started and stopped.
    ``register_catalog=False`` leaves the catalog to be built on first ``sql`` use (tests)."""
    from jobs.findings import run as forensics
    from jobs.findings.model import document, write_json
    from jobs.ingest import run as run_ingest
    from jobs.ingest.pipeline import ingest
    from jobs.store import catalog
    from jobs.store.outdir import staged_output
    from jobs.store.spark import get_session

    from .report import write_html

    _check_inputs(inputs, ledger)
    own = spark is None
    t0 = time.monotonic()
    with staged_output(out) as tmp:
        spark = spark or get_session(master)
        res = ingest(spark, inputs, tmp, progress=progress)
        t1 = time.monotonic()
        findings = forensics.run(spark, tmp, ledger=ledger)
        t2 = time.monotonic()
        info = {
            "paths": [str(p) for p in inputs],
            "brokers": sorted(b["broker"] for b in res.brokers if b.get("broker") is not None),
            "files": res.files,
            "bytes": res.bytes,
            "ledger": str(ledger) if ledger else None,
        }
        doc = document(findings, info)
        write_json(tmp / "findings.json", doc)
        run_info = run_ingest.run_info(inputs, master, res)
        run_info.update({"input": info, "ledger": info["ledger"],
                         "seconds": {**res.seconds, "jobs": round(t2 - t1, 2), "total": round(time.monotonic() - t0, 2)},
                         "findings": doc["summary"]})
        (tmp / "run.json").write_text(json.dumps(run_info, indent=1, default=str) + "\n")
        write_html(tmp, shown_dir=Path(out).absolute())
    if own:
        catalog.register(out, spark)
    elif register_catalog:
        # One JVM pins one catalog: the caller's session stays; register in a fresh process.
        import subprocess

        subprocess.run([sys.executable, "-m", "jobs.store.catalog", str(out)], check=False, capture_output=True)
    return doc


def run_analyze(inputs: list[Path], out: Path, fmt: str = "text", ledger: Path | None = None, master: str = "local[*]",
                fail_on: str = "error", stream: TextIO | None = None, progress: bool = True, spark=None,
                register_catalog: bool = True) -> int:
    """The ``analyze`` command: returns the contract's exit code (0 clean, 1 findings ≥ fail_on)."""
    from jobs.findings.severity import SEVERITIES

    from .report import exit_code, render

    if fmt not in ("text", "json", "html"):
        raise AnalyzeError(f"--format must be text, json or html, not {fmt!r}")
    if fail_on not in SEVERITIES:
        raise AnalyzeError(f"--fail-on must be error, warning or info, not {fail_on!r}")
    doc = build(inputs, out, ledger=ledger, master=master, progress=progress, spark=spark, register_catalog=register_catalog)
    render(out, fmt, stream or sys.stdout)
    return exit_code(doc, fail_on)
