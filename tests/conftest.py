"""Shared test fixtures: where ../shared lives, and helpers to read Kafka's expected output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(__import__("os").environ.get("KF_SHARED", REPO.parent / "shared"))
GOLDEN = SHARED / "fixtures" / "golden"
FOUND = SHARED / "fixtures" / "found"
REAL = SHARED / "fixtures" / "real-cluster"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="session")
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"../shared not found at {SHARED}: the fixtures are required")
    return SHARED
