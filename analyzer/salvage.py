"""``salvage``: export the records of lost or divergent ranges that some replica still holds, as
JSON Lines ready to replay (the contract's salvage line), re-read read-only from the inputs.

No Spark: the findings come from DIR/findings.json, the files from DIR's ``files`` table (Parquet,
read with pyarrow). The inputs findings.json names are discovered again as ``ingest`` did
(``discover_inputs``: same relative paths, archives extracted into a temporary folder), and every
segment opened must still have the size and SHA-256 the files table recorded: salvaging from
evidence that changed since it was analyzed would export records nobody analyzed. What to export
is decided by ``analyzer.salvageable``. Payloads go only to the FILE named (written atomically),
never to stdout.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs.errors import InputError
from jobs.ingest.stores import StoreBytes, input_arg, is_url, listed_bytes
from parsers import segment
from parsers.common import FileBytes
from parsers.default_records import record_headers
from parsers.names import base_offset_from_name

from .salvageable import LEFT_OUT, SalvageRange, aborted_batches, content, salvage_ranges, select_records

INT32_MAX = 2**31 - 1
FILE_MODE = 0o600  # FILE holds record keys and values: its owner's alone, whatever the umask


class SalvageError(InputError, ValueError):
    """Unusable DIR, input or FILE, or nothing to salvage: one line on stderr, exit 2."""


@dataclass
class Salvaged:
    """What a run wrote: ``records`` lines into ``out``, from ``findings``, and what it left out."""

    out: str
    records: int
    findings: list[str]
    left_out: dict[str, int] = field(default_factory=dict)

    def summary_line(self) -> str:
        """The one line ``salvage`` prints when done (without --json)."""
        left = ", ".join(f"{n} {LEFT_OUT[k]}" for k, n in sorted(self.left_out.items()) if n)
        return (f"salvaged {self.records} records of {len(self.findings)} finding{'s' * (len(self.findings) != 1)} into {self.out}"
                + (f"; left out: {left}" if left else ""))

    def to_json(self) -> dict:
        return {"out": self.out, "records": self.records, "findings": self.findings, "left_out": self.left_out}


def load_findings(out_dir: Path) -> dict:
    """DIR/findings.json; a DIR without one was not analyzed."""
    path = Path(out_dir) / "findings.json"
    if not path.is_file():
        raise SalvageError(f"{out_dir}: not an analyzed DIR (no findings.json); run `kafka-forensics analyze INPUT... --out {out_dir}` first")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SalvageError(f"{path}: unreadable ({exc})") from None


def segment_files(out_dir: Path) -> dict[tuple, list[dict]]:
    """Per (topic, partition, broker), the live segments the files table recorded, in offset order."""
    from jobs.store.tables import SCHEMAS  # the files table's own schema (no Spark in it)

    path = Path(out_dir) / "tables" / "files"
    if not path.is_dir():
        raise SalvageError(f"{out_dir}: no files table (tables/files); analyze the inputs again")
    rows = pq.read_table(path, schema=SCHEMAS["files"]).to_pylist()
    segs: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if r["kind"] == "segment" and r["dir_state"] == "live" and r["topic"] is not None:
            segs[(r["topic"], r["partition"], r["broker"])].append({**r, "base": base_offset_from_name(r["path"])})
    for v in segs.values():
        v.sort(key=lambda r: r["base"])
    return segs


def input_files(doc: dict, work: Path) -> dict[str, str]:
    """Relative path (as the files table names it) -> where it is now, by discovering the inputs
    findings.json names exactly as ``ingest`` did."""
    from jobs.ingest.discover import discover_inputs

    # what discovery warns about (a log dir without meta.properties...) was said by analyze already
    logging.getLogger("jobs.ingest").setLevel(logging.ERROR)
    paths = (doc.get("input") or {}).get("paths") or []
    if not paths:
        raise SalvageError("findings.json names no input paths: cannot re-read the records")
    try:
        found = discover_inputs([input_arg(p) for p in paths], work)
    except (OSError, InputError) as exc:  # moved, deleted, no log dir any more
        raise SalvageError(f"inputs of the analysis: {exc}") from None
    return {f.path: f.abs_path for f in found.files}


def verified(row: dict, where: dict[str, str]) -> FileBytes | StoreBytes:
    """The file, opened read-only, when it still has the size and SHA-256 the files table recorded
    (an object on a store as well: read whole, in one ranged GET)."""
    rel = row["path"]
    if rel not in where:
        raise SalvageError(f"{rel}: no longer in the inputs; salvage re-reads the files it analyzed")
    fb = listed_bytes(where[rel])
    size = len(fb.data)
    if size != row["size"] or row["sha256"] is None or hashlib.sha256(fb.data).hexdigest() != row["sha256"]:
        fb.close()
        said = f"{size} bytes, {row['size']} when analyzed" if size != row["size"] else "its SHA-256 differs from the one recorded"
        raise SalvageError(f"{where[rel]}: changed since it was analyzed ({said}); analyze it again before salvaging")
    return fb


def read_replica(segs: list[dict], where: dict[str, str], first: int, last: int, payloads: bool) -> list[dict]:
    """One replica's records at offsets first..last, each with its batch's facts and ``aborted``.

    Reads from the segment holding ``first`` on; past ``last`` only while a transaction of the
    range has not met its producer's marker yet (an abort decides whether its records count)."""
    start = max([i for i, s in enumerate(segs) if s["base"] <= first] or [0])
    recs, batches, pending = [], [], set()
    for s in segs[start:]:
        if s["base"] > last and not pending:
            break
        with verified(s, where) as fb:
            for piece in segment.iter_parse(fb.data, s["path"], records=True, payloads=payloads, headers=payloads):
                bt = {b["position"]: b for b in piece.table.to_pylist()}
                rt = piece.extra["records"]
                wanted = pc.or_(pc.and_(pc.greater_equal(rt["offset"], first), pc.less_equal(rt["offset"], last)),
                                pc.is_valid(rt["control_type"]))  # the range, and every marker (aborts)
                for r in rt.filter(wanted).to_pylist():
                    b = bt[r["batch_position"]]
                    if b.get("control_type") is None and b["is_control"]:
                        b["control_type"] = r["control_type"]
                    if first <= r["offset"] <= last:
                        recs.append(record_row(r, b, s))
                for b in bt.values():
                    b["key"] = (s["path"], b["position"])
                    b.setdefault("control_type", None)
                    batches.append(b)
                    if b["base_offset"] <= last and b["is_transactional"] and not b["is_control"]:
                        pending.add(b["producer_id"])
                    elif b["is_control"]:
                        pending.discard(b["producer_id"])
    aborted = aborted_batches(batches)
    for r in recs:
        r["aborted"] = (r["path"], r["position"]) in aborted
    return recs


def record_sequence(base_sequence: int, delta: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: a record's sequence, wrapping past Int32.MAX_VALUE."""
    if base_sequence < 0:
        return -1
    return base_sequence + delta - INT32_MAX - 1 if base_sequence > INT32_MAX - delta else base_sequence + delta


def record_row(r: dict, b: dict, s: dict) -> dict:
    """A decoded record with what the salvage line needs from its batch and file."""
    return {
        "topic": s["topic"], "partition": s["partition"], "offset": r["offset"], "timestamp": r["timestamp"],
        "timestamp_type": b["timestamp_type"], "key": r.get("key"), "value": r.get("value"),
        "headers": r["headers"], "header_bytes": r.get("header_bytes"), "key_sha256": r["key_sha256"],
        "value_sha256": r["value_sha256"], "control_type": r["control_type"], "leader_epoch": b["partition_leader_epoch"],
        "producer_id": b["producer_id"], "producer_epoch": b["producer_epoch"],
        "sequence": record_sequence(b["base_sequence"], r["offset"] - b["base_offset"]),
        "is_transactional": b["is_transactional"], "is_control": b["is_control"], "crc_valid": b["crc_valid"],
        "path": s["path"], "position": b["position"],
    }


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def salvage_line(rec: dict) -> dict:
    """The contract's salvage line shape, in its order."""
    headers = record_headers(rec["header_bytes"] or b"", rec["headers"])
    return {
        "topic": rec["topic"], "partition": rec["partition"], "offset": rec["offset"], "timestamp": rec["timestamp"],
        "timestamp_type": rec["timestamp_type"], "key": b64(rec["key"]), "value": b64(rec["value"]),
        "headers": [{"key": k, "value": b64(v)} for k, v in headers],
        "key_sha256": rec["key_sha256"], "value_sha256": rec["value_sha256"], "leader_epoch": rec["leader_epoch"],
        "producer_id": rec["producer_id"], "producer_epoch": rec["producer_epoch"], "sequence": rec["sequence"],
        "is_transactional": rec["is_transactional"], "broker": rec["broker"], "path": rec["path"], "position": rec["position"],
        "finding_id": rec["finding_id"],
    }


def check_destination(dest: str, where: dict[str, str], doc: dict) -> Path:
    """FILE may not be stdout, a folder, an input file or inside an input (evidence is never written)."""
    if dest == "-":
        raise SalvageError("--out -: payloads are never written to stdout; name a FILE")
    out = Path(dest).absolute()
    if out.is_dir():
        raise SalvageError(f"--out {dest}: a directory; name a FILE")
    real = os.path.realpath(out)
    roots = [os.path.realpath(p) for p in (doc.get("input") or {}).get("paths") or [] if not is_url(p)]
    where = {k: v for k, v in where.items() if not is_url(v)}
    if real in {os.path.realpath(p) for p in where.values()} or any(real == r or real.startswith(r + os.sep) for r in roots):
        raise SalvageError(f"--out {dest}: inside the inputs; evidence is never written, choose a FILE elsewhere")
    return out


def write_atomically(out: Path, lines: list[dict]) -> None:
    """FILE as JSON Lines, through a temporary file beside it: a reader sees all of it or none.
    The temporary file is made ``FILE_MODE`` before a byte is written, and the rename keeps it:
    payloads are never readable by others, not even for the time of the write."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}-", dir=out.parent)
    try:
        os.fchmod(fd, FILE_MODE)  # (mkstemp's own mode today; said here, not left to it)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for line in lines:
                fh.write(json.dumps(line) + "\n")
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def spans(ranges: list[SalvageRange]) -> dict[tuple, list]:
    """Per replica to read, [first, last, payloads]: the offsets every range needs of it, so each
    replica is read once (with payloads when it holds records to export)."""
    out: dict[tuple, list] = {}
    for r in ranges:
        for broker, payloads in [*((b, True) for b in r.holders), *((b, False) for b in r.references)]:
            span = out.setdefault((r.topic, r.partition, broker), [r.first_offset, r.last_offset, payloads])
            span[0], span[1], span[2] = min(span[0], r.first_offset), max(span[1], r.last_offset), span[2] or payloads
    return out


def collect(ranges: list[SalvageRange], segs: dict[tuple, list[dict]], where: dict[str, str]) -> tuple[dict, dict]:
    """The holders' records (with payloads) and every replica's contents (by offset) over the ranges."""
    held: dict[tuple, list[dict]] = {}
    refs: dict[tuple, dict[int, tuple]] = {}
    for key, (first, last, payloads) in spans(ranges).items():
        recs = read_replica(segs.get(key, []), where, first, last, payloads)
        held[key] = recs
        refs[key] = {rec["offset"]: content(rec) for rec in recs if not rec["is_control"]}
    return held, refs


def run_salvage(out_dir: Path, dest: str, topic: str | None = None, partition: int | None = None) -> Salvaged:
    """The ``salvage`` command: write FILE, return what was written (SalvageError: exit 2)."""
    if dest == "-":
        check_destination(dest, {}, {})
    doc = load_findings(out_dir)
    ranges = salvage_ranges(doc.get("findings") or [], topic, partition)
    scope = "" if topic is None and partition is None else f" (--topic {topic}, --partition {partition})"
    if not ranges:
        raise SalvageError(f"nothing to salvage in {out_dir}{scope}: no lost or divergent range is held by a replica "
                           f"({len(doc.get('findings') or [])} findings)")
    segs = segment_files(out_dir)
    with tempfile.TemporaryDirectory(prefix="kf-salvage-") as work:
        where = input_files(doc, Path(work))
        out = check_destination(dest, where, doc)
        held, refs = collect(ranges, segs, where)
    records, left = select_records(ranges, held, refs)
    if not records:
        said = ", ".join(f"{n} {LEFT_OUT[k]}" for k, n in sorted(left.items()) if n) or "no replica's files hold them"
        raise SalvageError(f"nothing to salvage in {out_dir}{scope}: every record of {len(ranges)} ranges left out ({said})")
    try:
        write_atomically(out, [salvage_line(r) for r in records])
    except OSError as exc:  # the FILE the user named: no room, no way in
        raise SalvageError(f"--out {dest}: cannot write: {exc.strerror or exc}") from None
    return Salvaged(str(out), len(records), sorted({r["finding_id"] for r in records}), dict(left))
