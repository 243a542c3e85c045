"""``dump``: one file, decoded to human text or the contract's JSON Lines.

Rows come straight from the parsers' Arrow tables (their column names are the contract's field
names), so this module only adds ``type`` and ``path`` and decides how to print.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import TextIO

from parsers import files


class DumpError(Exception):
    """Bad usage or an unusable file: the CLI prints it as one line and exits 2."""


def run(path: Path, kind: str | None, as_json: bool, records: bool, payloads: bool, out: TextIO) -> int:
    """Print every row and problem of one file; return the number of problems."""
    spath = os.fspath(path)
    if not os.path.exists(spath):
        raise DumpError(f"{spath}: no such file")
    if kind is None:
        kind = files.detect(spath)
        if kind is None:
            raise DumpError(f"{spath}: cannot tell the file kind from its name; pass --kind ({', '.join(sorted(files.KINDS))})")
    elif kind not in files.KINDS:
        raise DumpError(f"--kind {kind!r} is not one of: {', '.join(sorted(files.KINDS))}")
    if not os.path.isfile(spath):
        raise DumpError(f"{spath}: not a regular file")
    row_type = files.KINDS[kind].row_type
    problems = 0
    if not as_json:
        out.write(f"Dumping {spath} ({kind}, {os.path.getsize(spath)} bytes)\n")
    try:
        for piece in files.parse_path(spath, kind, records=records, payloads=payloads):
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
        raise DumpError(f"{spath}: cannot read: {exc.strerror or exc}") from None
    return problems


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
        out.write(json.dumps(obj, separators=(", ", ": ")) + "\n")
        return
    prefix = "| " if row_type == "record" else ""
    if row_type == "problem":
        out.write(f"PROBLEM {row['kind']} at {row['position']}: {row['detail']}\n")
        return
    out.write(prefix + " ".join(f"{k}: {'null' if v is None else v}" for k, v in row.items() if k != "path") + "\n")
