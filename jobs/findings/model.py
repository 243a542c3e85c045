"""The findings vocabulary and document: one place that knows the contract's finding shape.

Each finding module declares its kinds with their severity (``FINDING_KINDS``; ``registry.FINDING_KINDS``
gathers them): corrupt or lost data is an error, what is inconsistent but not proven harmful a
warning, context info. A detection builds each ``Finding`` with the severity its module declares
(``severity=FINDING_KINDS[kind]``): this module knows no detector, and a finding without a known severity is
refused rather than guessed. Findings are few (one per anomaly, never one per record), so the driver
may hold them. They become the ``findings`` table and ``findings.json`` with the exact field
names of ../shared/docs/contract.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, astuple, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .kinds import ACKED_DATA_LOSS
from .severity import SEVERITIES, SEVERITY_RANK


def ms(t: datetime | None) -> int | None:
    """A timestamp as epoch milliseconds (the findings' time unit)."""
    return None if t is None else int(t.timestamp() * 1000)


Int32 = int  # Kafka's int32s (a broker id, a partition, an epoch): int32 columns of the findings table


@dataclass
class Evidence:
    broker: Int32 | None
    path: str | None
    position: int | None
    detail: str


# the keys of each ``producers`` entry, in the order of the findings table's struct
PRODUCER_KEYS = ("producer_id", "producer_epoch", "first_sequence", "last_sequence")


@dataclass
class Finding:
    """One finding, its fields in the contract's order: findings.json's keys and the ``findings``
    table's columns are these fields, in this order (``to_json``, ``to_rows``)."""

    id: str = field(default="", kw_only=True)  # given by ``finalize``
    kind: str
    severity: str  # the one its detector's FINDING_KINDS declares for ``kind`` (a few kinds raise it case by case)
    topic: str | None = None
    partition: Int32 | None = None
    brokers: list[Int32] = field(default_factory=list)
    first_offset: int | None = None
    last_offset: int | None = None
    records: int | None = None
    bytes: int | None = None
    leader_epochs: list[Int32] = field(default_factory=list)
    producers: list[dict[str, int]] = field(default_factory=list)
    first_timestamp: int | None = None
    last_timestamp: int | None = None
    evidence: list[Evidence] = field(default_factory=list)
    explanation: str = ""
    salvage_brokers: list[Int32] = field(default_factory=list)
    # findings judged against the surviving log: its broker, None when the evidence cannot tell
    # (the explanation says why and names the candidates); None on every other kind
    surviving_broker: Int32 | None = None
    # what decided an election finding's cause: "metadata_log", "broker_log" or "files" (None on other kinds)
    evidence_basis: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITY_RANK:
            raise ValueError(f"finding {self.kind!r}: severity {self.severity!r} is not one of {', '.join(SEVERITIES)} "
                             "(its detector passes the severity its FINDING_KINDS declares)")
        self.brokers = sorted({int(b) for b in self.brokers if b is not None})
        self.leader_epochs = sorted({int(e) for e in self.leader_epochs if e is not None and e >= 0})
        self.salvage_brokers = sorted({int(b) for b in self.salvage_brokers if b is not None})
        self.surviving_broker = None if self.surviving_broker is None else int(self.surviving_broker)
        # every producer entry has the contract's four keys (null where unknown)
        self.producers = [{k: p.get(k) for k in PRODUCER_KEYS} for p in self.producers]

    def key(self) -> tuple:
        return (
            SEVERITY_RANK.get(self.severity, 9),
            self.topic or "",
            -1 if self.partition is None else self.partition,
            self.kind,
            -1 if self.first_offset is None else self.first_offset,
            tuple(self.brokers),
            self.evidence[0].path or "" if self.evidence else "",
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def to_row(self) -> tuple:
        """The finding as a row of the ``findings`` table: its fields in order, each evidence and
        producer entry a struct (a tuple in ``Evidence``'s and ``PRODUCER_KEYS``' order)."""
        structs = {"evidence": [astuple(e) for e in self.evidence],
                   "producers": [tuple(p[k] for k in PRODUCER_KEYS) for p in self.producers]}
        return tuple(structs[f.name] if f.name in structs else getattr(self, f.name) for f in fields(self))


def finalize(findings: list[Finding]) -> list[Finding]:
    """Sort (errors first, then by partition) and give each finding a stable id.

    The id hashes what the finding is about, not its position in the list, so the same input
    gives the same ids run after run and a report can link to them.
    """
    findings = sorted(findings, key=Finding.key)
    seen: dict[str, int] = {}
    for f in findings:
        basis = json.dumps([f.kind, f.topic, f.partition, f.brokers, f.first_offset, f.last_offset,
                            [(e.broker, e.path, e.position) for e in f.evidence[:1]]])
        h = hashlib.sha256(basis.encode()).hexdigest()[:10]
        n = seen.get(h, 0)
        seen[h] = n + 1
        f.id = f"{f.kind}-{h}" + (f"-{n}" if n else "")
    return findings


def summary(findings: list[Finding]) -> dict[str, int]:
    lost = sum(f.records or 0 for f in findings if f.kind == ACKED_DATA_LOSS)
    return {
        "errors": sum(f.severity == "error" for f in findings),
        "warnings": sum(f.severity == "warning" for f in findings),
        "infos": sum(f.severity == "info" for f in findings),
        "records_lost": lost,
    }


def document(findings: list[Finding], input_info: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": 1,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "input": input_info,
        "summary": summary(findings),
        "findings": [f.to_json() for f in findings],
    }


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write atomically: a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".findings-", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    os.replace(tmp, path)


def to_rows(findings: list[Finding]) -> list[tuple]:
    """The findings as rows of the ``findings`` table (``jobs.store.tables.FINDINGS_SCHEMA``)."""
    return [f.to_row() for f in findings]
