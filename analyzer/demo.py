"""``kafka-forensics demo``: generate the named incident scenarios and show what the analyzer makes
of them next to the ground truth, so a newcomer sees every finding kind on data with a known answer.

Each scenario is shown as the parsers see its files (problems by kind) beside the expected
findings, then ``analyze`` runs on it (with its ledger, all in one Spark session) and its findings
are compared with the ground truth by (kind, topic, partition) and by the brokers they name (for a
loss: the surviving log and where to salvage). ``analyze=False`` stops at the parsers' view (no Spark).
"""

from __future__ import annotations

import gc
import json
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import TextIO

from jobs.errors import InputError
from jobs.findings.kinds import ACKED_DATA_LOSS
from parsers.files import detect, parse_path
from sample_data.scenarios import SCENARIOS, generate, simulate, unusable_size
from sample_data.sim.cluster import Size


class DemoError(InputError):
    """Bad usage (an unknown scenario, a size the scenarios cannot take, an --out in use): the CLI
    turns it into exit 2."""


def parser_summary(path: Path) -> dict:
    """Brokers, partition directories, files and parser problems by kind of one generated scenario."""
    brokers, partitions, files, problems = set(), set(), 0, Counter()
    for f in sorted(path.glob("broker-*/**/*")):
        if not f.is_file():
            continue
        rel = f.relative_to(path).parts
        brokers.add(rel[0])
        if len(rel) > 2:
            partitions.add(rel[1])
        kind = detect(str(f))
        files += 1
        if kind is None:
            continue
        for parsed in parse_path(str(f), kind):
            problems.update(parsed.problems.column("kind").to_pylist())
    return {"brokers": len(brokers), "partitions": len(partitions), "files": files, "problems": dict(sorted(problems.items()))}


def finding_line(f: dict) -> str:
    """One expected finding as the demo lists it: where, which brokers, which offsets."""
    where = f"{f['topic']}-{f['partition']}" if f["topic"] is not None else "broker"
    if f["last_offset"] is not None:
        span = f" offsets {f['first_offset']}..{f['last_offset']}"
    elif f["first_offset"] is not None:  # a point, e.g. where an unclean leader's epoch starts
        span = f" from offset {f['first_offset']}"
    else:
        span = ""
    if span and f["records"] is not None:  # a range without a count (e.g. leader_epoch_conflict) shows offsets only
        span += f" ({f['records']} records)"
    return f"    {f['severity']:<7} {f['kind']:<24} {where:<14} brokers {f['brokers']}{span}"


def _key(f: dict) -> tuple:
    return f["kind"], f["topic"], f["partition"]


def expected_surviving(want: dict) -> int | None:
    """The surviving broker a ground-truth loss expects the analyzer to name: the true one when the
    files show it (``surviving_candidates`` is just it), else None (undetermined, never a guess)."""
    candidates = want.get("surviving_candidates") or [want["surviving_broker"]]
    return want["surviving_broker"] if len(candidates) == 1 else None


def same_brokers(found: dict, want: dict) -> bool:
    """Whether ``found`` names the brokers the ground-truth finding ``want`` does: for a loss the
    surviving log (``expected_surviving``) and the salvage brokers (when undetermined, those of the
    truth plus any candidate holding the records the other candidates lack); else the brokers."""
    if "surviving_broker" not in want:
        return found["brokers"] == want["brokers"]
    salvage, wanted = set(found.get("salvage_brokers") or []), set(want["salvage_brokers"])
    if found.get("surviving_broker") != expected_surviving(want):
        return False
    if expected_surviving(want) is not None:
        return found["brokers"] == want["brokers"] and salvage == wanted
    candidates = set(want["surviving_candidates"])
    return wanted <= salvage and salvage - wanted <= candidates and set(found["brokers"]) == candidates | salvage


def _who(f: dict) -> str:
    """The brokers a finding names, in words (a loss: its surviving log and where to salvage)."""
    if f["kind"] != ACKED_DATA_LOSS or "surviving_broker" not in f:
        return f"brokers {f['brokers']}"
    surviving = "undetermined" if f["surviving_broker"] is None else f"broker {f['surviving_broker']}"
    return f"surviving log {surviving}, salvage {f.get('salvage_brokers') or []}"


def detectable(f: dict) -> bool:
    """A finding the bytes or the ledger alone show. One that also needs the event log (what a
    server log or the metadata log would tell, e.g. that an election was unclean when no replica
    still checkpoints the HW the new epoch started below) is optional."""
    return "event_log" not in set(f.get("evidence_sources", ["files"]))


def verdict(findings_json: Path) -> str:
    """The verdict of an analysis in a few words: errors, else warnings, else clean (with its infos)."""
    summary = json.loads(findings_json.read_text(encoding="utf-8"))["summary"]
    for sev in ("errors", "warnings"):
        if summary.get(sev):
            return f"{summary[sev]} {sev if summary[sev] > 1 else sev[:-1]}"
    infos = summary.get("infos") or 0
    return f"clean ({infos} info{'s' if infos > 1 else ''})" if infos else "clean"


def closing_table(rows: list[tuple[str, str, str, str]]) -> str:
    """The demo's last word: per scenario its verdict, whether it matched the ground truth, its report."""
    head = ("scenario", "verdict", "matches truth", "report")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3] for r in [head, *rows])


def _compare(truth: dict, findings_json: Path, stream: TextIO) -> bool:
    """Print how the analyzer's findings match the ground truth by (kind, topic, partition) and the
    brokers they name; True if they do."""
    got = json.loads(findings_json.read_text(encoding="utf-8"))["findings"]
    want = [f for f in truth["expected_findings"] if detectable(f)]
    optional = {_key(f) for f in truth["expected_findings"]} - {_key(f) for f in want}
    missed, wrong = [], []
    for w in want:
        same = [f for f in got if _key(f) == _key(w)]
        if not same:
            missed.append(_key(w))
        elif not any(same_brokers(f, w) for f in same):
            expected = _who({**w, "surviving_broker": expected_surviving(w)} if "surviving_broker" in w else w)
            wrong.append(f"{_key(w)}: expected {expected}, found {'; '.join(_who(f) for f in same)}")
    extra = sorted({_key(f) for f in got} - {_key(f) for f in want} - optional, key=str)
    print(
        f"  analyze vs ground truth: {len(got)} findings ({findings_json}); "
        f"missed {missed or 'none'}, wrong brokers {wrong or 'none'}, not expected {extra or 'none'}",
        file=stream,
    )
    return not (missed or wrong or extra)


def _show(name: str, path: Path, truth: dict, stream: TextIO, counter: str = "") -> None:
    s = parser_summary(path)
    problems = ", ".join(f"{k} {v}" for k, v in s["problems"].items()) or "none"
    print(f"\n== {counter}{name}  ({path})", file=stream)
    print(f"  {truth['description']}", file=stream)
    print(
        f"  files: {s['brokers']} brokers, {s['partitions']} partitions, {s['files']} files; parser problems: {problems}",
        file=stream,
    )
    print(f"  expected findings ({len(truth['expected_findings'])}):", file=stream)
    for f in truth["expected_findings"]:
        print(finding_line(f) + ("" if detectable(f) else "  [needs the event log]"), file=stream)
    if not truth["expected_findings"]:
        print("    none (negative control)", file=stream)


def list_scenarios(stream: TextIO, width: int = 100) -> None:
    """``demo --list``: each scenario's name and the start of its story on one line. The story is
    the one the scenario itself tells (``simulate`` runs it in memory: no files, no Spark)."""
    names = list(SCENARIOS)
    pad = max(map(len, names))
    for name in names:
        story = simulate(name)[2]
        print(f"{name:<{pad}}  {textwrap.shorten(story, width - pad - 2, placeholder=' ...')}", file=stream)


def run(out: Path, names: list[str] | None, *, seed: int = 0, master: str = "local[*]", stream: TextIO,
        analyze: bool = True, **size) -> int:
    """Generate ``names`` (default: all) under ``out``; show and analyze each. Returns the exit
    code: 0, or 1 when analyze disagreed with a ground truth (or failed)."""
    from .analyze import run_analyze

    names = names or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise DemoError(f"unknown scenario {unknown[0]!r}; one of {', '.join(SCENARIOS)}")
    if (why := unusable_size(Size(**size))) is not None:
        raise DemoError(why)
    if out.exists() and not out.is_dir():
        raise DemoError(f"--out {out}: not a directory")
    foreign = [out / n for n in names if (out / n).exists() and not (out / n / "ground_truth.json").exists()]
    if foreign:
        raise DemoError(f"{foreign[0]} exists and was not written by the demo; choose another --out")
    spark = None
    bad, rows = 0, []
    try:
        for i, name in enumerate(names, 1):
            t0 = time.monotonic()
            try:
                path = generate(name, out, seed=seed, **size)
            except OSError as exc:  # the --out the user named: full, read-only, a file in the way
                raise DemoError(f"cannot write {out / name}: {exc.strerror or exc}") from None
            truth = json.loads((path / "ground_truth.json").read_text(encoding="utf-8"))
            _show(name, path, truth, stream, counter=f"{i}/{len(names)} ")
            if not analyze:
                continue
            if spark is None:  # one session for every scenario, not one JVM each
                from jobs.ingest.discover import input_bytes
                from jobs.session.conf import TINY_INPUT
                from jobs.session.start import get_session

                # one session serves every scenario (up to 42 MB: benign-mix), so it is sized as a
                # small collection (1 GiB heap), not by the first one, which may be tiny (512 MiB)
                spark = get_session(master, input_bytes=max(input_bytes([path]), TINY_INPUT))
            result = out / "_analysis" / name
            print("  analyze:", file=stream)
            try:
                run_analyze([path], result, fmt="text", ledger=path / "ledger.jsonl", master=master, stream=stream,
                            progress=False, spark=spark, register_catalog=False)
            except Exception as exc:  # the demo goes on with the next scenario and says what failed
                bad += 1
                print(f"  analyze failed: {type(exc).__name__}: {exc}", file=stream)
                rows.append((name, "analyze failed", "no", "-"))
                continue
            finally:
                # the analysis's DataFrames may sit in Python reference cycles, and each holds its
                # query plan in the JVM until Python drops it: drop them before the next scenario
                spark.catalog.clearCache()
                gc.collect()
            ok = _compare(truth, result / "findings.json", stream)
            bad += not ok
            rows.append((name, verdict(result / "findings.json"), "yes" if ok else "NO", str(result / "report.html")))
            print(f"  ({time.monotonic() - t0:.1f} s)", file=stream)
    finally:
        if spark is not None:
            spark.stop()
    if rows:
        matched = sum(r[2] == "yes" for r in rows)
        print(f"\n{matched} of {len(rows)} scenarios match their ground truth:\n{closing_table(rows)}", file=stream)
    return 1 if bad else 0
