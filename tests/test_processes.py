"""Pid liveness is decided once (``jobs.processes.pid_alive``), for every cleanup of what a dead
run left and for the wait on the JVM's children: a zombie has stopped writing and counts as gone."""

import os
import subprocess
import sys
import time
from pathlib import Path

from jobs.processes import pid_alive
from jobs.store.outdir import recover


def _zombie() -> subprocess.Popen:
    """A child that has exited and is not reaped yet."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return child


def test_liveness(tmp_path):
    assert pid_alive(os.getpid())
    child = _zombie()
    try:
        assert not pid_alive(child.pid)
        # a staging dir left by the run that is now a zombie is removed like a dead run's
        out = tmp_path / "out"
        (tmp_path / f"out.tmp-{child.pid}").mkdir()
        recover(out)
        assert not (tmp_path / f"out.tmp-{child.pid}").exists()
    finally:
        child.wait()
    assert not pid_alive(child.pid)
