"""A progress bar on stderr (files, bytes) for ingest runs that take more than a few seconds.

Why a polling thread: the numbers come from Spark accumulators that executors bump as each task
ends, and the driver only learns them between jobs' events; polling twice a second is cheap and
keeps Spark's own console progress bar (turned off in spark.py) out of the way.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

SHOW_AFTER = 3.0


class _Display:
    """A context manager whose ``_run`` draws on stderr from a daemon thread while the block runs
    (when ``enabled``); ``_run`` waits on ``self._stop``, which the end of the block sets."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self):
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name=f"kf-{type(self).__name__.lower()}", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _run(self) -> None:
        raise NotImplementedError


class Progress(_Display):
    """Context manager: shows ``files done/total, MB done/total`` once ``SHOW_AFTER`` s have passed."""

    def __init__(self, files: int, total_bytes: int, poll: Callable[[], tuple[int, int]], enabled: bool = True):
        super().__init__(enabled)
        self.files, self.total_bytes, self.poll = files, total_bytes, poll

    def _run(self) -> None:
        if self._stop.wait(SHOW_AFTER):
            return
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        columns = (TextColumn("ingest"), BarColumn(), TextColumn("{task.fields[files]} files"), DownloadColumn(), TimeElapsedColumn())
        with Bar(*columns, console=Console(file=sys.stderr)) as bar:
            task = bar.add_task("ingest", total=max(self.total_bytes, 1), files=f"0/{self.files}")
            while True:
                try:
                    done_files, done_bytes = self.poll()
                except Exception:  # the accumulator may be unavailable while Spark stops
                    done_files, done_bytes = 0, 0
                bar.update(task, completed=done_bytes, files=f"{done_files}/{self.files}")
                if self._stop.wait(0.5):
                    bar.update(task, completed=self.total_bytes, files=f"{self.files}/{self.files}")
                    return


class Stages(_Display):
    """Context manager: after ``SHOW_AFTER`` s, a status line on stderr naming the stage the run is
    in and the seconds elapsed (``jobs: epoch lineage · 14 s``), updated as ``stage(name)`` is called.

    Why: after the ingest bar, the jobs ran silently for minutes on big collections; a stage name
    tells the user the run is alive and where the time goes. On a terminal only (rich shows no live
    status on a pipe or a log file), so scripts and CI logs stay clean."""

    def __init__(self, enabled: bool = True, console=None):
        super().__init__(enabled)
        self.console, self.name = console, "starting"

    def stage(self, name: str) -> None:
        self.name = name

    def _run(self) -> None:
        import time

        t0 = time.monotonic()
        if self._stop.wait(SHOW_AFTER):
            return
        from rich.console import Console

        console = self.console or Console(file=sys.stderr)
        with console.status("") as status:
            while not self._stop.wait(0.5):
                status.update(f"{self.name} · {time.monotonic() - t0:.0f} s")
