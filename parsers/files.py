"""Which parser reads which file kind, and how its rows are named in ``dump --json``.

The one place that maps a kind (from ``names.detect_kind`` or ``--kind``) to a parser module,
so the CLI and the ingest job cannot disagree about it.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from .common import FileBytes, FileStream, Parsed
from .names import OFFSET_CHECKPOINT_KINDS, SEGMENT_SUFFIXES, detect_kind


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
    "broker_log": Kind("broker_log", "log_event"),
}
SEGMENT_KINDS = frozenset({"segment", "kraft_snapshot", "bootstrap_checkpoint"})
# Kinds only ``dump`` decodes: ingest lists these files in its manifest without parsing them.
DUMP_ONLY_KINDS: dict[str, Kind] = {
    "quorum_state": Kind("quorum_state", "quorum_state"),
}
DUMP_KINDS: dict[str, Kind] = {**KINDS, **DUMP_ONLY_KINDS}
# Files Kafka leaves in a log dir that hold nothing to decode, and what they are.
NOT_DECODED: dict[str, str] = {
    "lock": "Kafka's lock file (.lock): empty, only locked while the broker runs",
}


def detect(path: str) -> str | None:
    """The kind of a file from its name: Kafka's own files, then broker logs (server.log …)."""
    return _detect_name(os.path.basename(path))


@functools.lru_cache(maxsize=1 << 14)
def _detect_name(name: str) -> str | None:
    """``detect`` of a base name, remembered: a log dir repeats the same few names in every
    partition folder (``00000000000000000000.index``, ``leader-epoch-checkpoint``...), and
    discovery asks for each (~6 µs a name, 0.5 s of 3 x 5,000 partitions' discovery)."""
    kind = detect_kind(name)
    if kind is None and module_for("broker_log").is_broker_log(name):
        return "broker_log"
    return kind


@functools.cache
def module_for(kind: str):
    """The parser module of ``kind`` (imported on first use: ``dump`` of one file loads one parser;
    remembered, since an ingest task asks once a file)."""
    return importlib.import_module(f"parsers.{DUMP_KINDS[kind].module}")


def small_parser(kind: str) -> Callable[[bytes, str], Parsed]:
    """The ``parse(data, path)`` of a non-segment kind. The four offset checkpoints share one
    parser that must be told which checkpoint it reads (the name may not say, with --kind)."""
    mod = module_for(kind)
    if kind in OFFSET_CHECKPOINT_KINDS:
        return functools.partial(mod.parse, file_kind=kind)
    return mod.parse


def parse_path(path: str, kind: str, records: bool = False, payloads: bool = False) -> Iterator[Parsed]:
    """Parse one file (opened read-only) in pieces. OSError propagates: the caller names the file."""
    if kind in SEGMENT_KINDS:  # a window at a time: a segment may be a GiB
        with FileStream(path) as stream:
            yield from module_for(kind).iter_parse_stream(stream, path, records=records, payloads=payloads)
        return
    with FileBytes(path) as fb:
        yield small_parser(kind)(fb.data, path)


# index kinds whose parser module has ``verify_against_batches`` (entries vs the segment's batches)
CHECKED_AGAINST_SEGMENT = frozenset({"offset_index", "time_index"})


def check_against_segment(path: str, kind: str, index: pa.Table) -> pa.Table | None:
    """Problems of an index's entries against the segment (``.log``) beside it, or None when
    there is none to read (not an index kind, another name, no such file, unreadable).

    ``analyze`` makes the same check across the ingested tables; this lets ``dump`` of one
    index say what ``kafka-dump-log`` would die on (an entry past the segment's end).
    """
    suffix = "." + next((s for s, k in SEGMENT_SUFFIXES.items() if k == kind), "")
    if kind not in CHECKED_AGAINST_SEGMENT or not path.endswith(suffix):
        return None
    log = path[: -len(suffix)] + ".log"
    if not os.path.isfile(log):
        return None
    try:
        with FileBytes(log) as fb:
            size = len(fb.data)
            batches = module_for("segment").parse(fb.data, log).table
    except OSError:
        return None
    if kind == "offset_index":  # only offsets index positions, so only it can run past the end
        return module_for(kind).verify_against_batches(index, batches, path, segment_size=size)
    return module_for(kind).verify_against_batches(index, batches, path)
