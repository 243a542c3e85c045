"""Guess which Kafka generation wrote the files, from what is on disk (never from a version string,
which Kafka does not store in log dirs).

Each on-disk feature has a first release, so the newest feature seen gives a lower bound:
message format v2 and leader-epoch-checkpoint files (0.11, KIP-98/KIP-101), partition.metadata
with topic ids (2.8, KIP-516), meta.properties with directory.id (3.7, KIP-858), and the
``__cluster_metadata`` log (KRaft). Only v0/v1 batches and no leader-epoch files point before 0.11.
It is a guess and is always labelled so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

# (lower bound, feature) in ascending release order; the last one seen wins.
_FEATURES = (
    ("0.11", "message format v2 batches"),
    ("0.11", "leader-epoch-checkpoint files"),
    ("2.8", "partition.metadata files (topic ids)"),
    ("3.7", "meta.properties with directory.id"),
)


@dataclass
class Era:
    label: str
    reasons: list[str] = field(default_factory=list)
    kraft: bool = False

    def __str__(self) -> str:
        return self.label


def _has_kind(files: pd.DataFrame | None, kind: str) -> bool:
    return files is not None and "kind" in files.columns and bool((files["kind"] == kind).any())


def _has_directory_id(brokers: pd.DataFrame | None, meta: pd.DataFrame | None) -> bool:
    if meta is not None and "directory_id" in meta.columns and meta["directory_id"].notna().any():
        return True
    if brokers is not None and "directory_ids" in brokers.columns:
        return any(v is not None and not (isinstance(v, float) and v != v) and len(v) for v in brokers["directory_ids"])
    return False


def _is_kraft(files: pd.DataFrame | None) -> bool:
    if files is None:
        return False
    if "topic" in files.columns and bool((files["topic"] == "__cluster_metadata").any()):
        return True
    if "path" in files.columns and bool(files["path"].astype(str).str.contains("__cluster_metadata-0", regex=False).any()):
        return True
    return _has_kind(files, "kraft_snapshot") or _has_kind(files, "bootstrap_checkpoint")


def guess_era(files: pd.DataFrame | None, brokers: pd.DataFrame | None, meta: pd.DataFrame | None, magics: set[int]) -> Era:
    """The newest on-disk feature found, as 'Kafka ≥ X (guessed)', with the evidence behind it."""
    seen = {
        "message format v2 batches": 2 in magics,
        "leader-epoch-checkpoint files": _has_kind(files, "leader_epoch"),
        "partition.metadata files (topic ids)": _has_kind(files, "partition_metadata"),
        "meta.properties with directory.id": _has_directory_id(brokers, meta),
    }
    kraft = _is_kraft(files)
    reasons = [feature for _, feature in _FEATURES if seen[feature]]
    bound = None
    for version, feature in _FEATURES:
        if seen[feature]:
            bound = version
    if kraft:
        reasons.append("__cluster_metadata log present")
        bound = bound if bound and bound >= "2.8" else "2.8"
    if bound is None:
        if magics and magics <= {0, 1}:
            return Era("before 0.11 (guessed)", ["only message format v0/v1 batches", "no leader-epoch-checkpoint files"])
        return Era("unknown (too few files to guess)", [])
    # A KRaft broker also holds __cluster_metadata-0, so whole log dirs without it mean ZooKeeper.
    mode = ", KRaft" if kraft else (", ZooKeeper" if _has_kind(files, "meta_properties") else "")
    return Era(f"Kafka ≥ {bound}{mode} (guessed)", reasons, kraft=kraft)
