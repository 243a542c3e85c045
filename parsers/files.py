"""Which parser reads which file kind, and how its rows are named in ``dump --json``.

The one place that maps a kind (from ``names.detect_kind`` or ``--kind``) to a parser module,
so the CLI and the ingest job cannot disagree about it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

from .common import FileBytes, Parsed


@dataclass(frozen=True)
class Kind:
    module: str  # parsers.<module>
    row_type: str  # the contract's "type" for one row in dump --json


KINDS: dict[str, Kind] = {
    "segment": Kind("segment", "batch"),
    "kraft_snapshot": Kind("segment", "batch"),
    "bootstrap_checkpoint": Kind("segment", "batch"),
    "offset_index": Kind("offset_index", "index_entry"),
    "time_index": Kind("time_index", "time_index_entry"),
    "txn_index": Kind("transaction_index", "txn_index_entry"),
    "producer_snapshot": Kind("producer_snapshot", "producer_state"),
    "replication_offset": Kind("offset_checkpoint", "checkpoint_entry"),
    "recovery_point": Kind("offset_checkpoint", "checkpoint_entry"),
    "log_start": Kind("offset_checkpoint", "checkpoint_entry"),
    "cleaner": Kind("offset_checkpoint", "checkpoint_entry"),
    "leader_epoch": Kind("leader_epoch_checkpoint", "checkpoint_entry"),
    "partition_metadata": Kind("partition_metadata", "partition_metadata"),
    "meta_properties": Kind("meta_properties", "meta_properties"),
    "clean_shutdown": Kind("clean_shutdown", "clean_shutdown"),
}
SEGMENT_KINDS = frozenset({"segment", "kraft_snapshot", "bootstrap_checkpoint"})


def detect(path: str) -> str | None:
    from .names import detect_kind

    return detect_kind(os.path.basename(path))


def module_for(kind: str):
    return importlib.import_module(f"parsers.{KINDS[kind].module}")


def parse_path(path: str, kind: str, records: bool = False, payloads: bool = False) -> Iterator[Parsed]:
    """Parse one file (opened read-only) in pieces. OSError propagates: the caller names the file."""
    mod = module_for(kind)
    with FileBytes(path) as fb:
        if kind in SEGMENT_KINDS:
            yield from mod.iter_parse(fb.data, path, records=records, payloads=payloads)
        elif mod.__name__.endswith("offset_checkpoint"):
            yield mod.parse(fb.data, path, file_kind=kind)
        else:
            yield mod.parse(fb.data, path)
