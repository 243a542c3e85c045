"""The staged output swap: the previous DIR stays readable whatever happens to a run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from jobs.store.outdir import recover, staged_output


def test_swap_replaces_and_failure_keeps_old(tmp_path):
    out = tmp_path / "case"
    with staged_output(out) as tmp:
        (tmp / "v").write_text("1")
    assert (out / "v").read_text() == "1"
    with staged_output(out) as tmp:
        (tmp / "v").write_text("2")
        assert (out / "v").read_text() == "1"  # untouched while building
    assert (out / "v").read_text() == "2"
    with pytest.raises(RuntimeError):
        with staged_output(out) as tmp:
            (tmp / "v").write_text("3")
            raise RuntimeError("boom")
    assert (out / "v").read_text() == "2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case"]


def test_killed_run_leaves_previous_results(tmp_path):
    out = tmp_path / "case"
    with staged_output(out) as tmp:
        (tmp / "v").write_text("old")
    code = (
        "import sys, time; from pathlib import Path; from jobs.store.outdir import staged_output\n"
        f"with staged_output(Path({str(out)!r})) as tmp:\n"
        "    (tmp / 'v').write_text('new'); print('ready', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (out / "v").read_text() == "old"
    recover(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case"]


def test_recover_between_renames(tmp_path):
    """The fallback path (no renameat2) killed between its two renames: DIR is restored."""
    out = tmp_path / "case"
    old = tmp_path / "case.old-999999"
    old.mkdir()
    (old / "v").write_text("old")
    recover(out)
    assert (out / "v").read_text() == "old"
