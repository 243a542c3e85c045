"""The run that builds an output DIR, shared by ``kafka-forensics ingest`` and ``analyze``:
discover the inputs, stage DIR, start Spark, ingest (its catalog built alongside), let the caller
add to DIR, write run.json, swap DIR in (``staged_run``).

Discovery (archives extracted into the staging dir) runs before Spark is even imported, so
unusable input (a missing path, a bad archive, a folder without any log dir) fails in well under
a second without a JVM. ``analyze`` adds its jobs and report inside the ``staged_run`` block.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.store.outdir import no_room, staged_output

from .discover import discover_inputs, input_bytes
from .focus import Focus
from .stores import input_arg, is_url

if TYPE_CHECKING:  # pyspark is imported only once discovery found something to ingest
    from pyspark.sql import SparkSession

    from .pipeline import IngestResult

log = logging.getLogger(__name__)


def run_info(inputs: list[Path | str], master: str, result: IngestResult) -> dict:
    """What DIR/run.json says about an ingest (analyze adds its own keys beside these). A store's
    input is its URL as given: what reached it (endpoint, credentials) is never written here."""
    import pyspark

    info = asdict(result)
    info.pop("out")
    return {
        "inputs": [p if is_url(p) else str(Path(p).resolve()) for p in inputs],
        "master": master,
        "versions": {"python": platform.python_version(), "pyspark": pyspark.__version__},
        "ingest": info,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


@dataclass
class StagedRun:
    """What the ``staged_run`` block gets: the session, the staging dir (DIR once swapped in), the
    ingest result and run.json's content. run.json is written once: by ``write_run_json`` in the
    block when something after it reads the file (analyze's report), else as the block ends; add
    keys to ``run_info`` before."""

    spark: SparkSession
    tmp: Path
    result: IngestResult
    run_info: dict = field(default_factory=dict)
    focus: Focus | None = None  # the partitions read, when not all (``Discovery.focus``)
    run_json_written: bool = False

    def write_run_json(self) -> None:
        if self.run_json_written:
            raise RuntimeError("run.json is written once; add to run_info before writing it")
        (self.tmp / "run.json").write_text(json.dumps(self.run_info, indent=1, default=str) + "\n")
        self.run_json_written = True


@contextlib.contextmanager
def staged_run(inputs: list[Path | str], out: Path, master: str = "local[*]", payloads: bool = False, progress: bool = True,
               spark: SparkSession | None = None, register: bool = True, focus: Focus | None = None) -> Iterator[StagedRun]:
    """Ingest ``inputs`` into a staging sibling of ``out`` and yield it for the block to add to;
    when the block ends, run.json is written (unless the block did), the catalog completed and
    DIR swapped in (``outdir.staged_output``).

    The session opens the staging dir's catalog, which a ``catalog.Registrar`` thread builds while
    the inputs are parsed and the block's jobs run (see catalog.py). ``spark``: a session to reuse
    (tests, demo); one JVM pins one catalog, so then the catalog is registered after the swap by a
    fresh process; ``register=False`` leaves it to the first ``sql`` use, as a
    ``sc://`` master (Spark Connect) does. ``focus``: only those
    partitions (run.json says so). An input may be a store's URL (``stores``: ``s3://…``)."""
    inputs = [input_arg(p) for p in inputs]
    existed = Path(out).is_dir()
    with staged_output(out, need=lambda: input_bytes(inputs)) as tmp:
        found = discover_inputs(inputs, tmp, focus)
        focus = found.focus  # (within the focused collections read)
        from jobs.session.connect import is_remote_url
        from jobs.session.memory import OutOfMemory, out_of_memory
        from jobs.session.signals import stop_jvm
        from jobs.session.start import get_session
        from jobs.store import catalog

        from .pipeline import ingest

        size = sum(f.size for f in found.files)
        # over Spark Connect (``--remote``) the session's catalog is the server's: DIR's own is built
        # by the first local ``sql DIR`` (no marker yet), in a JVM of its own
        own = spark is None and register and not is_remote_url(master)
        session = spark or get_session(master, input_bytes=size, catalog_dir=catalog.catalog_dir(tmp) if own else None)
        registrar = catalog.Registrar(session, tmp, out).start() if own else None
        # (asked now: a JVM that ran out of heap may be gone when it is said)
        heap = session.conf.get("spark.driver.memory", "?") if spark is None else None
        try:
            result = ingest(session, inputs, tmp, payloads=payloads, progress=progress, found=found, focus=focus)
            if registrar is not None:
                registrar.add(catalog.table_names(tmp))  # registered while the block's jobs run
            staged = StagedRun(session, tmp, result, run_info(inputs, master, result), focus)
            staged.run_info["focus"] = focus.describe() if focus is not None else None
            yield staged
            if not staged.run_json_written:
                staged.write_run_json()
            if registrar is not None:
                registrar.finish()
        except Exception as exc:
            code = no_room(exc)
            if spark is None and (code is not None or out_of_memory(exc, local=master.startswith("local"))):
                # the tasks still running write into tmp: stop them first
                logging.disable(logging.CRITICAL)  # py4j logs each call the dead JVM breaks
                stop_jvm()
                if code is not None:
                    raise OSError(code, os.strerror(code)) from None  # its text came from the JVM, now gone
                kept = f"the previous {out} is unchanged" if existed else f"nothing was written to {out}"
                raise OutOfMemory(f"Spark ran out of memory with a {heap} heap (sized from the input's {size / 1e6:.1f} MB "
                                  "on disk; compressed batches hold more records per byte): run again with a larger one, "
                                  f"e.g. KF_DRIVER_MEMORY=4g; {kept}") from None
            raise
        finally:
            if spark is None and is_remote_url(master):
                # a Connect session outlives its client on the server (cached tables and all) until
                # it idles out: release it, which also interrupts what it still runs (Ctrl-C)
                with contextlib.suppress(Exception):
                    session.stop()
    result.out = Path(out)
    log.info("%d files, %.1f MB, %d brokers in %.1f s -> %s", result.files, result.bytes / 1e6, len(result.brokers),
             result.seconds.get("total", 0), out)
    if register and spark is not None:
        subprocess.run([sys.executable, "-m", "jobs.store.catalog", str(out)], check=False, capture_output=True)


def run(inputs: list[Path | str], out: Path, master: str = "local[*]", payloads: bool = False, progress: bool = True,
        register: bool = True) -> IngestResult:
    """``kafka-forensics ingest``: ingest ``inputs`` into ``out`` (replaced atomically), then build its catalog."""
    with staged_run(inputs, out, master, payloads=payloads, progress=progress, register=register) as staged:
        pass
    return staged.result
