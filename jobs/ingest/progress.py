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


class Progress:
    """Context manager: shows ``files done/total, MB done/total`` once ``SHOW_AFTER`` s have passed."""

    def __init__(self, files: int, total_bytes: int, poll: Callable[[], tuple[int, int]], enabled: bool = True):
        self.files, self.total_bytes, self.poll, self.enabled = files, total_bytes, poll, enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="kf-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

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
