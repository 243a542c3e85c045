"""Spark queries two at a time (the job tables, the detectors): what they share is computed once,
and Ctrl-C does not wait for what runs beside."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from jobs.findings.case import Case, once_property
from jobs.session.parallel import side_by_side
from jobs.session.signals import Interrupted


def test_ctrl_c_does_not_wait_for_what_runs_beside():
    release = threading.Event()
    with pytest.raises(Interrupted):
        with side_by_side(2, "kf-test") as pool:
            beside = pool.submit(release.wait, 60)
            raise Interrupted()
    assert not beside.done()  # left running: the caller stops the session, which ends it
    release.set()
    assert beside.result(timeout=5) is True


def test_an_error_waits_for_what_runs_beside():
    """An ordinary error waits: the case is closed only once nothing beside uses it."""
    with pytest.raises(ValueError):
        with side_by_side(2, "kf-test") as pool:
            beside = pool.submit(time.sleep, 0.2)
            raise ValueError("a detector failed")
    assert beside.done()


def test_a_shared_view_is_computed_once_when_two_detectors_ask_at_once():
    case = Case(None, Path("/nonexistent"), {})
    calls = []

    def view(c):
        calls.append(threading.get_ident())
        time.sleep(0.2)
        return object()

    with side_by_side(2, "kf-test") as pool:
        got = list(pool.map(lambda _: case.shared(view), range(2)))
    assert len(calls) == 1 and got[0] is got[1]


def test_a_case_property_is_computed_once_when_two_detectors_ask_at_once():
    """Since Python 3.12 ``functools.cached_property`` has no lock: the case's properties (cached
    DataFrames, collected rows) have their own, per case and attribute."""
    calls = []

    class Probe(Case):
        @once_property
        def slow(self):
            calls.append(1)
            time.sleep(0.2)
            return object()

    case = Probe(None, Path("/nonexistent"), {})
    with side_by_side(2, "kf-test") as pool:
        got = list(pool.map(lambda _: case.slow, range(2)))
    assert len(calls) == 1 and got[0] is got[1] is case.slow
