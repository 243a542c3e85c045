"""What ``salvage`` exports: which offset ranges, read from which replicas, and which of their records.

Pure functions over findings.json's findings and decoded records (no files, no Spark), so the rules
are tested on their own and ``analyzer.salvage`` only does the reading and the writing.

A finding is salvageable when it names a partition, an offset range and a replica that still holds
records the cluster will lose there: its ``salvage_brokers`` (``acked_data_loss``, and
``replica_divergence``: the replicas that will truncate their version), or, when it names the
surviving log (``truncation_below_hw``), every other broker it names. Those replicas' records are
exported, less what the cluster keeps or never had:

- records the surviving log holds identically (same offset, same key and value hashes: the
  comparison's ``content``); when the surviving log is undetermined, records any of its candidates
  holds identically (only what every candidate lacks is lost, as the loss job reports);
- control records (transaction markers: the broker writes them, a producer cannot replay them);
- aborted transactional records (the producer's next marker on that replica is ABORT: no consumer
  ever saw them);
- records of a batch failing its CRC (damaged bytes are no record; ``crc_mismatch`` reports them);
- the same record (offset and content) already exported from another replica or finding.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from jobs.findings.kinds import LOSS_KINDS

# a record covered by several findings belongs to the first of these (then findings.json's order)
KIND_ORDER = LOSS_KINDS
LEFT_OUT = {
    "identical": "the surviving log holds identically",
    "aborted": "aborted transactional",
    "control": "control (transaction markers)",
    "damaged": "in batches failing their CRC",
    "duplicate": "already exported from another replica",
}


@dataclass(frozen=True)
class SalvageRange:
    """Offsets ``first_offset..last_offset`` of a partition to read from ``holders``; what any of
    ``references`` (the surviving log, or its candidates) holds identically stays out."""

    finding_id: str
    kind: str
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    holders: tuple[int, ...]
    references: tuple[int, ...]


def holders_of(finding: dict) -> tuple[int, ...]:
    """The replicas still holding the records a finding says the cluster loses (module doc)."""
    named = finding.get("salvage_brokers") or []
    if not named and finding.get("surviving_broker") is not None:
        named = [b for b in finding.get("brokers") or [] if b != finding["surviving_broker"]]
    return tuple(sorted({int(b) for b in named}))


def salvage_ranges(findings: Iterable[dict], topic: str | None = None, partition: int | None = None) -> list[SalvageRange]:
    """The salvageable ranges of ``findings`` (module doc), optionally of one topic / partition, in
    the order their records are attributed (``KIND_ORDER``)."""
    out = []
    for f in findings:
        if f.get("topic") is None or f.get("partition") is None or f.get("first_offset") is None or f.get("last_offset") is None:
            continue
        if (topic is not None and f["topic"] != topic) or (partition is not None and f["partition"] != partition):
            continue
        holders = holders_of(f)
        if not holders:
            continue
        refs = (f["surviving_broker"],) if f.get("surviving_broker") is not None else \
            tuple(sorted({int(b) for b in f.get("brokers") or []} - set(holders)))
        out.append(SalvageRange(f["id"], f["kind"], f["topic"], int(f["partition"]), int(f["first_offset"]), int(f["last_offset"]), holders, refs))
    rank = {k: i for i, k in enumerate(KIND_ORDER)}
    return sorted(out, key=lambda r: rank.get(r.kind, len(rank)))


def aborted_batches(batches: Iterable[dict]) -> set[int]:
    """Positions (``(path, position)`` keys) of transactional data batches whose producer's next
    marker on this replica is ABORT (``compare.with_txn_outcome``'s rule). ``batches``: one
    replica's batches in offset order, each with ``key``, ``producer_id``, ``is_transactional``,
    ``is_control`` and ``control_type`` (the marker's, for control batches)."""
    nxt: dict[int, str | None] = {}
    aborted = set()
    for b in reversed(list(batches)):
        if b["is_control"]:
            nxt[b["producer_id"]] = b["control_type"]
        elif b["is_transactional"] and nxt.get(b["producer_id"]) == "abort":
            aborted.add(b["key"])
    return aborted


def content(rec: dict) -> tuple:
    """What two replicas must agree on at an offset (``compare.record_details``' content)."""
    return rec["key_sha256"], rec["value_sha256"], rec.get("control_type")


def select_records(ranges: list[SalvageRange], held: dict[tuple, list[dict]], refs: dict[tuple, dict[int, tuple]]) -> tuple[list[dict], Counter]:
    """The records to export, each with its ``finding_id``, in (topic, partition, offset, broker)
    order, and how many were left out by reason (``LEFT_OUT``).

    ``held[(topic, partition, broker)]``: that replica's decoded records (with ``offset``, the
    hashes, ``control_type``, ``is_control``, ``aborted``, ``crc_valid``) over the ranges it holds;
    ``refs[(topic, partition, broker)]``: offset -> ``content`` of a reference replica's records."""
    left: Counter = Counter()
    taken: set[tuple] = set()  # (topic, partition, offset, broker): each record once
    exported: set[tuple] = set()  # (topic, partition, offset, content): each version once
    out = []
    for r in ranges:
        for broker in r.holders:
            for rec in held.get((r.topic, r.partition, broker), []):
                off = rec["offset"]
                if not r.first_offset <= off <= r.last_offset or (r.topic, r.partition, off, broker) in taken:
                    continue
                taken.add((r.topic, r.partition, off, broker))
                c = content(rec)
                if rec["is_control"]:
                    left["control"] += 1
                elif not rec["crc_valid"]:
                    left["damaged"] += 1
                elif rec["aborted"]:
                    left["aborted"] += 1
                elif any(refs.get((r.topic, r.partition, b), {}).get(off) == c for b in r.references):
                    left["identical"] += 1
                elif (r.topic, r.partition, off, c) in exported:
                    left["duplicate"] += 1
                else:
                    exported.add((r.topic, r.partition, off, c))
                    out.append({**rec, "finding_id": r.finding_id, "broker": broker})
    out.sort(key=lambda x: (x["topic"], x["partition"], x["offset"], x["broker"]))
    return out, left
