"""``dump``: one file, decoded to human text or the contract's JSON Lines.

Rows come straight from the parsers' Arrow tables (their column names are the contract's field
names), so this module only adds ``type`` and ``path`` and decides how to print: a big piece of a
file whole columns at a time (``analyzer.lines``), anything else row by row (``_line``), to the
same bytes. Output goes to a binary stream in big chunks.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

from jobs.errors import InputError
from jobs.terminal import escape  # decoded bytes of a damaged or foreign file never reach a terminal raw
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


FAST_ROWS = 256  # rows (batches + records) of a piece from which analyzer.lines writes it


class DumpError(InputError):
    """Bad usage or an unusable file: the CLI prints it as one line and exits 2."""


def run(path: Path, kind: str | None, as_json: bool, records: bool, payloads: bool, out: BinaryIO) -> int:
    """Write every row and problem of one file to ``out`` (bytes, in big chunks); return the
    number of problems."""
    spath = os.fspath(path)
    kind, note = _kind_of(spath, kind)
    row_type = files.DUMP_KINDS[kind].row_type
    problems = 0
    if not as_json:
        out.write(_encode([escape(f"Dumping {spath} ({kind}{note}, {os.path.getsize(spath)} bytes)")]))
    try:
        for piece in _pieces(spath, kind, records, payloads):
            for chunk in _rows(piece, row_type, spath, as_json, records):
                out.write(chunk)
            if piece.problems.num_rows:
                problems += piece.problems.num_rows
                out.write(_encode([_line(as_json, "problem", spath, p) for p in piece.problems.to_pylist()]))
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise DumpError(f"{escape(spath)}: cannot read: {exc.strerror or exc}") from None
    return problems


class _NoPandas:
    """A meta path finder under which ``import pandas`` fails."""

    def find_spec(self, name: str, path=None, target=None):
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError("dump does not use pandas", name=name)
        return None


def without_pandas() -> None:
    """Make pyarrow believe, for the rest of this process, that pandas is not installed.

    pyarrow imports pandas (~0.4 s, most of a small file's dump) the first time it converts a
    list or a numpy array, only to ask whether it was handed a pandas object; dump never hands
    it one nor builds a DataFrame. pyarrow remembers the answer, so this is only for a process
    that runs nothing but dump (the console script's ``main``), never for one that goes on.
    """
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())


def _kind_of(spath: str, kind: str | None) -> tuple[str, str]:
    """The kind to decode ``spath`` as, and a note for the text header; DumpError if none fits.

    Checked in the order a user needs to hear it: the path exists, is not a folder, has a
    kind (named by --kind, or by its name), and is a regular file.
    """
    shown = escape(spath)
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
        raise DumpError(f"--kind {escape(kind)!r} is not one of: {', '.join(sorted(files.DUMP_KINDS))}")
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


def _rows(piece: Parsed, row_type: str, spath: str, as_json: bool, records: bool) -> list:
    """The bytes of a piece's rows (a segment's records after their batch), in chunks: whole
    columns at once through ``analyzer.lines`` when the piece is big enough to pay for loading
    its compiled kernels, else (or for columns it does not write) one line per row."""
    recs = piece.extra.get("records") if records else None
    if piece.table.num_rows + (recs.num_rows if recs is not None else 0) >= FAST_ROWS:
        from . import lines  # numba: only for pieces that need it

        fast = lines.piece_lines(piece.table, recs, lines.Style(as_json), row_type, spath)
        if fast is not None:
            return fast
    recs_by_batch = _group_records(recs) if recs is not None else {}
    out = []
    for row in piece.table.to_pylist():
        out.append(_line(as_json, row_type, spath, row))
        out.extend(_line(as_json, "record", spath, rec) for rec in recs_by_batch.get(row.get("position"), ()))
    return [_encode(out)]


def _encode(texts: list[str]) -> bytes:
    return "".join(text + "\n" for text in texts).encode("utf-8")


def _group_records(recs: pa.Table) -> dict[int, list[dict]]:
    grouped: dict[int, list[dict]] = {}
    for rec in recs.to_pylist():
        grouped.setdefault(rec.pop("batch_position"), []).append(rec)
    return grouped


def _jsonable(v):
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, datetime):  # broker-log lines: ISO 8601, UTC
        return v.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return v


def _line(as_json: bool, row_type: str, path: str, row: dict) -> str:
    """One row as the contract's JSON line (ASCII only) or as text, without the newline."""
    row = {k: _jsonable(v) for k, v in row.items()}
    if as_json:
        obj = {"type": row_type}
        if row_type != "record":
            obj["path"] = path
        obj.update({k: v for k, v in row.items() if k != "path"})
        return json.dumps(obj, separators=(", ", ": ")).replace("\x7f", "\\u007f")
    if row_type == "problem":
        return escape(f"PROBLEM {row['kind']} at {row['position']}: {row['detail']}")
    prefix = "| " if row_type == "record" else ""
    return escape(prefix + " ".join(f"{k}: {'null' if v is None else v}" for k, v in row.items() if k != "path"))
