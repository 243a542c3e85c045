"""``kafka-forensics ingest`` end to end: staged DIR, Spark, ingest, run.json, swap, catalog.

Kept out of the CLI so ``analyze`` (and scripts) can do the same steps with more in between.
"""

from __future__ import annotations

import json
import logging
import platform
import time
from dataclasses import asdict
from pathlib import Path

import pyspark

from jobs.store import catalog
from jobs.store.outdir import staged_output
from jobs.store.spark import get_session

from .pipeline import IngestResult, ingest

log = logging.getLogger(__name__)


def run_info(inputs: list[Path], master: str, result: IngestResult) -> dict:
    """What DIR/run.json says about an ingest (analyze adds its own keys beside these)."""
    info = asdict(result)
    info.pop("out")
    return {
        "inputs": [str(Path(p).resolve()) for p in inputs],
        "master": master,
        "versions": {"python": platform.python_version(), "pyspark": pyspark.__version__},
        "ingest": info,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def run(inputs: list[Path], out: Path, master: str = "local[*]", payloads: bool = False, progress: bool = True,
        register: bool = True) -> IngestResult:
    """Ingest ``inputs`` into ``out`` (replaced atomically), then build its catalog."""
    for p in inputs:
        if not Path(p).exists():
            raise FileNotFoundError(f"{p}: no such file or directory")
    spark = get_session(master)
    with staged_output(out) as tmp:
        result = ingest(spark, [Path(p) for p in inputs], tmp, payloads=payloads, progress=progress)
        (tmp / "run.json").write_text(json.dumps(run_info(inputs, master, result), indent=1, default=str))
    result.out = Path(out)
    log.info("%d files, %.1f MB, %d brokers in %.1f s -> %s", result.files, result.bytes / 1e6, len(result.brokers),
             result.seconds.get("total", 0), out)
    if register:
        catalog.register(out, spark)
    return result
