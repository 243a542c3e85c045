"""``dump``: one file, decoded to human text or the contract's JSON Lines.

Rows come straight from the parsers' Arrow tables (their column names are the contract's field
names), so this module only adds ``type`` and ``path`` and decides how to print.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TextIO

import pyarrow as pa

from parsers import files
from parsers.common import Parsed
from parsers.names import kind_before_pending

# how the text header names a file Kafka had renamed on its way out (names.PENDING_SUFFIXES)
PENDING_NOTES = {
    "pending_delete": "renamed .deleted, awaiting deletion",
    "pending_clean": "a .cleaned file the log cleaner had not swapped in",
    "pending_swap": "a .swap file Kafka had not swapped in",
    "pending_tmp": "a temporary file Kafka had not renamed into place",
}


class DumpError(Exception):
    """Bad usage or an unusable file: the CLI prints it as one line and exits 2."""


def run(path: Path, kind: str | None, as_json: bool, records: bool, payloads: bool, out: TextIO) -> int:
    """Print every row and problem of one file; return the number of problems."""
    spath = os.fspath(path)
    kind, note = _kind_of(spath, kind)
    row_type = files.DUMP_KINDS[kind].row_type
    problems = 0
    if not as_json:
        out.write(printable(f"Dumping {spath} ({kind}{note}, {os.path.getsize(spath)} bytes)") + "\n")
    try:
        for piece in _pieces(spath, kind, records, payloads):
            recs_by_batch = _group_records(piece) if records and "records" in piece.extra else {}
            for row in piece.table.to_pylist():
                _emit(out, as_json, row_type, spath, row)
                for rec in recs_by_batch.get(row.get("position"), ()):
                    _emit(out, as_json, "record", spath, rec)
            for prob in piece.problems.to_pylist():
                problems += 1
                _emit(out, as_json, "problem", spath, prob)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise DumpError(f"{printable(spath)}: cannot read: {exc.strerror or exc}") from None
    return problems


def _kind_of(spath: str, kind: str | None) -> tuple[str, str]:
    """The kind to decode ``spath`` as, and a note for the text header; DumpError if none fits.

    Checked in the order a user needs to hear it: the path exists, is not a folder, has a
    kind (named by --kind, or by its name), and is a regular file.
    """
    shown = printable(spath)
    if not os.path.lexists(spath):
        raise DumpError(f"{shown}: no such file")
    if os.path.isdir(spath):
        raise DumpError(f"{shown} is a directory; dump reads one file (for a log dir or a broker's folder use: kafka-forensics analyze {shown} --out DIR)")
    note = ""
    if kind is None:
        detected = files.detect(spath)
        kind = kind_before_pending(spath) or detected
        if kind != detected:
            note = f", {PENDING_NOTES[detected]}; not live data"
        if kind in files.NOT_DECODED:
            raise DumpError(f"{shown}: {files.NOT_DECODED[kind]}; not a kind dump reads")
        if kind is None:
            raise DumpError(f"{shown}: cannot tell the file kind from its name; pass --kind ({', '.join(sorted(files.DUMP_KINDS))})")
    elif kind not in files.DUMP_KINDS:
        raise DumpError(f"--kind {printable(kind)!r} is not one of: {', '.join(sorted(files.DUMP_KINDS))}")
    if not os.path.isfile(spath):
        raise DumpError(f"{shown}: not a regular file")
    return kind, note


def _pieces(spath: str, kind: str, records: bool, payloads: bool) -> Iterator[Parsed]:
    """The parser's pieces; an index's entries are also checked against the segment beside it."""
    for piece in files.parse_path(spath, kind, records=records, payloads=payloads):
        beside = files.check_against_segment(spath, kind, piece.table)
        if beside is not None and beside.num_rows:
            merged = pa.concat_tables([piece.problems, beside]).sort_by([("position", "ascending")])
            piece = Parsed(piece.table, merged, piece.extra)
        yield piece


def printable(text: str) -> str:
    """``text`` with every non-printable character escaped (``\\x1b``, ``\\u2028``): decoded
    bytes of a damaged or foreign file must never reach a terminal raw."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _group_records(piece) -> dict[int, list[dict]]:
    grouped: dict[int, list[dict]] = {}
    for rec in piece.extra["records"].to_pylist():
        grouped.setdefault(rec.pop("batch_position"), []).append(rec)
    return grouped


def _jsonable(v):
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, datetime):  # broker-log lines: ISO 8601, UTC
        return v.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return v


def _emit(out: TextIO, as_json: bool, row_type: str, path: str, row: dict) -> None:
    row = {k: _jsonable(v) for k, v in row.items()}
    if as_json:
        obj = {"type": row_type}
        if row_type != "record":
            obj["path"] = path
        obj.update({k: v for k, v in row.items() if k != "path"})
        out.write(json.dumps(obj, separators=(", ", ": ")).replace("\x7f", "\\u007f") + "\n")  # ASCII only
        return
    prefix = "| " if row_type == "record" else ""
    if row_type == "problem":
        out.write(printable(f"PROBLEM {row['kind']} at {row['position']}: {row['detail']}") + "\n")
        return
    out.write(printable(prefix + " ".join(f"{k}: {'null' if v is None else v}" for k, v in row.items() if k != "path")) + "\n")
