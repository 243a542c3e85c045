"""The rooms' arrows point one way (parsers <- jobs/store <- jobs/{ingest,replicas,history} <-
jobs/findings <- analyzer), read from each module's own imports, the ones inside functions too;
and the findings model knows no detector: a finding carries the severity its detector declares."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import REPO

from jobs.findings.model import Finding


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports made absolute."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module) if p)
            names.update(f"{module}.{alias.name}" if node.module is None else module for alias in node.names)
    return names


def ours(names: set[str]) -> set[str]:
    return {n for n in names if n.split(".")[0] in ("parsers", "jobs", "analyzer")}


def test_the_findings_model_imports_only_the_severity_order():
    """It imported the registry (in ``Finding.__post_init__``), which imports every detector, which
    imports the model: building any finding loaded all detectors. (``kinds``: a leaf of names.)"""
    assert ours(imported(REPO / "jobs" / "findings" / "model.py")) == {"jobs.findings.severity", "jobs.findings.kinds"}


def test_jobs_store_imports_nothing_above_it():
    """tables_doc took restart_preview's schema from jobs/replicas; the job tables' schemas live in
    jobs/store/tables.py now."""
    allowed = ("parsers", "jobs.store", "jobs.errors", "jobs.terminal", "jobs.processes")
    up = {(path.name, name) for path in (REPO / "jobs" / "store").glob("*.py")
          for name in ours(imported(path)) if not name.startswith(allowed)}
    assert not up, sorted(up)


def test_a_finding_without_its_declared_severity_is_refused():
    """An undeclared kind became a silent "warning"; now a detector passes ``FINDING_KINDS[kind]`` and a
    missing or unknown severity is an error of ours."""
    with pytest.raises(TypeError):
        Finding(kind="torn_tail")  # type: ignore[call-arg]
    for severity in ("", "fatal", None):
        with pytest.raises(ValueError, match="torn_tail"):
            Finding(kind="torn_tail", severity=severity)  # type: ignore[arg-type]
    assert Finding(kind="torn_tail", severity="error").severity == "error"
