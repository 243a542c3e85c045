"""Every detector, in the order they run: each is a module with ``FINDING_KINDS`` (finding kind →
severity, which each of its findings carries: ``severity=FINDING_KINDS[kind]``) and
``find(case: Case) -> list[Finding]``. Adding a finding kind: a module (or a function in the closest
one), a line here if it is a new module, and a row in docs/findings.md."""

from __future__ import annotations

from . import (
    checkpoints,
    damage,
    divergence,
    elections,
    gaps,
    identity,
    loss,
    metadata_log,
    producers,
    shutdown,
    tiered,
    transactions,
    truncation,
)

DETECTORS = (damage, shutdown, checkpoints, gaps, producers, transactions, divergence, loss, tiered, truncation, elections, identity, metadata_log)

# The finding vocabulary: the contract's kinds plus ours, each with its severity.
FINDING_KINDS: dict[str, str] = {kind: severity for d in DETECTORS for kind, severity in d.FINDING_KINDS.items()}
