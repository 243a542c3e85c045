"""docs/findings.md lists every finding kind the jobs know, with the severity the code gives it."""

from __future__ import annotations

import re

from conftest import REPO, SHARED

from jobs.findings.registry import FINDING_KINDS


def test_every_kind_is_documented_with_its_severity():
    text = (REPO / "docs" / "findings.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([a-z0-9_]+)` \| (error|warning|info) \|", text, flags=re.M))
    assert rows == FINDING_KINDS


def test_contract_kinds_are_all_known():
    contract = (SHARED / "docs" / "contract.md").read_text(encoding="utf-8")
    section = contract.split("## Finding kinds", 1)[1].split("Must NOT", 1)[0]
    kinds = {k for k in re.findall(r"`([a-z_]+)`", section) if not k.startswith("__")}  # not topic names
    assert kinds <= set(FINDING_KINDS), kinds - set(FINDING_KINDS)
