"""What a detector gets, written where a newcomer reads it (issue 36 item 1): every detector's
``find`` takes the ``Case`` and returns findings, declares ``FINDING_KINDS`` (``KINDS`` is the file
kinds of parsers/files.py), and every view of the case says what it holds; the history tables'
schemas are defined once, in jobs/store/tables.py. No Spark: signatures and sources only."""

from __future__ import annotations

import inspect

from conftest import REPO

from jobs.findings.case import Case, once_property
from jobs.findings.registry import DETECTORS


def test_every_detector_takes_the_case_and_declares_its_finding_kinds():
    for detector in DETECTORS:
        name = detector.__name__
        params = inspect.signature(detector.find).parameters
        assert list(params) == ["case"] and params["case"].annotation == "Case", name
        assert inspect.signature(detector.find).return_annotation == "list[Finding]", name
        assert detector.FINDING_KINDS and not hasattr(detector, "KINDS"), name


def test_every_view_of_the_case_has_a_type_and_a_line_saying_what_it_holds():
    views = {n: v for n, v in vars(Case).items() if isinstance(v, once_property)}
    assert {"replicas", "lineage", "current", "survivors", "history"} <= set(views) and "rl" not in views
    for name, view in views.items():
        assert (view.__doc__ or "").strip(), name
        assert inspect.signature(view.fn).return_annotation not in (inspect.Signature.empty, "list", "dict"), name


def test_the_history_tables_schemas_are_defined_once():
    """metadata_events, broker_events and timeline were declared twice (Spark types in jobs/history,
    Arrow in jobs/store/tables.py): the history modules take the one in tables.py."""
    for module in ("metadata.py", "timeline.py"):
        source = (REPO / "jobs" / "history" / module).read_text(encoding="utf-8")
        assert "StructType([" not in source, module
