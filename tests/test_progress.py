"""What a user sees while a run works: the jobs phase names its stage and the seconds elapsed on a
terminal, and prints nothing into a pipe or a log file."""

from __future__ import annotations

import io
import time

from rich.console import Console

from jobs.ingest import progress


def test_a_long_jobs_phase_names_its_stage_and_elapsed_time_on_a_terminal(monkeypatch):
    monkeypatch.setattr(progress, "SHOW_AFTER", 0.1)
    buf = io.StringIO()
    with progress.Stages(console=Console(file=buf, force_terminal=True, width=80)) as stages:
        stages.stage("jobs: epoch lineage")
        time.sleep(1.5)
    shown = buf.getvalue()
    assert "jobs: epoch lineage" in shown and " s" in shown


def test_a_short_phase_or_a_pipe_shows_nothing(monkeypatch):
    monkeypatch.setattr(progress, "SHOW_AFTER", 0.1)
    buf = io.StringIO()
    with progress.Stages(console=Console(file=buf, width=80)) as stages:  # not a terminal
        stages.stage("jobs: replica logs")
        time.sleep(1.0)
    assert buf.getvalue() == ""
    monkeypatch.setattr(progress, "SHOW_AFTER", 5.0)
    buf = io.StringIO()
    with progress.Stages(console=Console(file=buf, force_terminal=True, width=80)) as stages:
        stages.stage("jobs: replica logs")
    assert buf.getvalue() == ""
