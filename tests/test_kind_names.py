"""A finding kind read outside the detector that declares it is imported by name
(``jobs.findings.kinds``), never written as a string literal: a renamed or misspelt kind then
fails at import, not silently in a report, salvage or the restart preview."""

import ast
from pathlib import Path

from jobs.findings import kinds
from jobs.findings.registry import FINDING_KINDS

ROOT = Path(__file__).resolve().parents[1]
# the rooms that read findings without declaring any (parsers and ingest name *problem* kinds,
# their own vocabulary, some of which damage.py passes on as findings)
READERS = ["analyzer", "jobs/replicas", "jobs/history"]


def test_named_kinds_are_declared():
    named = {v for k, v in vars(kinds).items() if k.isupper() and isinstance(v, str)}
    assert named <= set(FINDING_KINDS), named - set(FINDING_KINDS)
    assert set(kinds.LOSS_KINDS) <= named


def test_no_kind_literal_outside_the_detectors():
    found = []
    for room in READERS:
        for path in sorted((ROOT / room).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and node.value in FINDING_KINDS:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not found, "import the kind from jobs.findings.kinds:\n" + "\n".join(found)
