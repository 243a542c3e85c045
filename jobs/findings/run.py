"""Run every forensic job over an ingested DIR: job tables back into DIR, findings out.

The case (``case.py``) writes the job tables and holds the views the detectors share; each
detector of the registry reads what it needs from it. Findings are few (one per anomaly).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.ingest.focus import Focus
from jobs.replicas import restart_preview
from jobs.session.parallel import side_by_side
from jobs.store.io import write_local_table
from jobs.store.tables import FINDINGS_SCHEMA, RESTART_PREVIEW_SCHEMA

from .case import Case
from .kinds import LOSS_KINDS
from .model import Finding, finalize, to_rows
from .registry import DETECTORS

DETECTOR_THREADS = 2


def run(spark: SparkSession, out: Path, ledger: Path | None = None, stage: Callable[[str], None] = lambda name: None,
        focus: Focus | None = None) -> list[Finding]:
    """Compute the job tables and findings of the ingested tables under ``out``; write the job
    tables there (restart_preview last, linking the findings) and return the findings (the caller
    writes findings.json). ``stage`` is told the
    name of each step as it starts (``jobs.ingest.progress.Stages``). ``focus``: the partitions
    ingest read, when not all (``Discovery.focus``)."""
    # two at a time: a detector's time is mostly Spark planning its queries on one JVM thread, and
    # the other core sat half idle (clean-failover: 1.2 of 2 cores busy in this phase); the
    # timeline, which no detector reads, is written beside the first of them
    case = None
    try:
        with side_by_side(DETECTOR_THREADS, "kf-detector") as pool:
            case = Case.open(spark, out, ledger, stage=stage, pool=pool, focus=focus)

            def find(detector) -> list[Finding]:
                stage(f"findings: {detector.__name__.rsplit('.', 1)[-1]}")
                return detector.find(case)

            findings = finalize([f for fs in pool.map(find, DETECTORS) for f in fs])
            case.timeline_written.result()
        # both tables are rows the driver holds: written with pyarrow, without a Spark job each
        stage("findings: writing")
        write_local_table(out, "findings", to_rows(findings), from_arrow_schema(FINDINGS_SCHEMA))
        # after the findings: each truncation names the finding whose records it destroys
        stage("restart preview")
        write_local_table(out, "restart_preview", restart_preview.build_rows(case, [f for k in LOSS_KINDS for f in findings if f.kind == k]),
                   from_arrow_schema(RESTART_PREVIEW_SCHEMA))
    except BaseException:
        # a failed run in a session that goes on (the demo, the tests) leaves nothing cached; after
        # the pool, where nothing runs beside any more but on Ctrl-C (then the session is
        # stopped, and a close that fails must not hide why the run ended)
        if case is not None:
            with contextlib.suppress(Exception):
                case.close()
        raise
    case.close()
    return findings
