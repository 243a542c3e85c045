"""A broker dir made only of damaged files (golden/corrupt/) goes through ``analyze`` end to end.

Issue 9 part 2: every damaged file gives its problem kind, and a whole broker dir made of them
still ingests, reports and exits with the contract's code. The dir is built in tmp_path by copying
each case of ``corrupt/CASES.tsv``: files that Kafka keeps inside a partition dir go to
``data/<case>-0/`` (one topic per case, with the case's unchanged companions); files Kafka keeps at
log-dir level (offset checkpoints, meta.properties) cannot share one log dir, so each gets its own
log dir ``<case>/`` beside ``data/``, as a JBOD broker has several (same meta.properties).
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GOLDEN

CLI = [sys.executable, "-m", "analyzer.cli"]
CORRUPT = GOLDEN / "corrupt"

# What the contract's vocabulary calls each case's one fault (CASES.tsv column 5, and what Kafka does
# with it in MANIFEST.md). None: Kafka reads the file as valid and the contract lists it as benign
# (0-byte .log / checkpoint of a broker killed early, an index Kafka rebuilds), so no damage finding.
EXPECTED_KIND: dict[str, str | None] = {
    "torn-tail-mid-batch": "torn_tail",
    "torn-tail-in-header": "torn_tail",
    "zero-filled-tail": "zero_filled_tail",
    "crc-mismatch": "crc_mismatch",
    "batch-length-too-large": "torn_tail",  # Kafka's iteration stops there as at a torn tail
    "negative-batch-length": "invalid_batch",
    "bad-magic": "invalid_batch",
    "legacy-v0-crc-mismatch": "crc_mismatch",
    "empty-segment": None,
    "index-entry-past-eof": "index_mismatch",
    "index-non-monotonic": "index_mismatch",
    "index-torn": "index_mismatch",
    "empty-index": None,
    "timeindex-backwards": "timeindex_mismatch",
    "txnindex-torn": "txnindex_mismatch",
    "snapshot-crc-mismatch": "producer_snapshot_corrupt",
    "checkpoint-bad-version": "checkpoint_malformed",
    "checkpoint-count-mismatch": "checkpoint_malformed",
    "checkpoint-non-numeric": "checkpoint_malformed",
    "checkpoint-malformed-line": "checkpoint_malformed",
    "empty-checkpoint": None,
    "leader-epoch-epoch-decreasing": "leader_epoch_malformed",
    "leader-epoch-offset-decreasing": "leader_epoch_malformed",
    "partition-metadata-bad-topic-id": "checkpoint_malformed",
    "meta-properties-no-node-id": "checkpoint_malformed",
}
# Cases the parsers catch but analyze would not (xfail strict: the day a job does, this flips).
# Empty now: index-entry-past-eof was one until a job checked index entries against their segment.
KNOWN_GAPS: dict[str, str] = {}
# kinds that say a file is damaged (not context such as unclean_shutdown)
DAMAGE_KINDS = {k for k in EXPECTED_KIND.values() if k} | {"offset_regression", "segment_overlap", "unreadable_file"}
_PARTITION_DIR = re.compile(r"^.+-\d+$")


def _cases() -> list[dict]:
    with open(CORRUPT / "CASES.tsv", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f, delimiter="\t") if r and not r[0].startswith("#")]
    return [{"case": r[0], "damaged": r[1], "source": r[2], "companions": [] if r[3] == "-" else r[3].split(","), "fault": r[4]}
            for r in rows]


def _topic(case: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", case)


def _in_partition_dir(source: str) -> bool:
    """Where Kafka keeps the file: the directory it was copied from is a ``topic-N`` partition dir."""
    parts = Path(source).parts
    return len(parts) >= 2 and bool(_PARTITION_DIR.match(parts[-2]))


def _case_file(c: dict) -> str:
    """The damaged file's path relative to the broker dir (the input root)."""
    if _in_partition_dir(c["source"]):
        return f"data/{_topic(c['case'])}-0/{c['damaged']}"
    return f"{c['case']}/{c['damaged']}"


def _build_broker(root: Path) -> Path:
    broker = root / "broker-1"
    data = broker / "data"
    data.mkdir(parents=True)
    meta = GOLDEN / "logdir" / "meta.properties"
    shutil.copyfile(meta, data / "meta.properties")
    for c in _cases():
        dest = broker / Path(_case_file(c)).parent
        dest.mkdir(parents=True, exist_ok=True)
        for name in [c["damaged"], *c["companions"]]:
            shutil.copyfile(CORRUPT / c["case"] / name, dest / name)
        if not (dest / "meta.properties").exists() and dest.parent == broker:
            shutil.copyfile(meta, dest / "meta.properties")
    for p in broker.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)  # the fixtures are read-only; our copy need not be
    return broker


def test_every_case_has_an_expectation():
    assert sorted(c["case"] for c in _cases()) == sorted(EXPECTED_KIND)


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    root = tmp_path_factory.mktemp("damaged")
    broker = _build_broker(root)
    out = root / "out"
    run = subprocess.run([*CLI, "analyze", str(broker), "--out", str(out), "--format", "json"],
                         capture_output=True, text=True, timeout=1500)
    return broker, out, run


def test_exit_code_is_1_findings_at_error(analyzed):
    # contract: 1 = ran and found something at or above --fail-on (default error); crc_mismatch,
    # torn_tail and invalid_batch are corrupt data, i.e. errors
    _, out, run = analyzed
    assert run.returncode == 1, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    doc = json.loads(run.stdout)
    assert doc == json.loads((out / "findings.json").read_text())
    assert doc["summary"]["errors"] > 0
    assert (out / "report.html").stat().st_size > 10_000
    assert (out / "run.json").is_file()
    # the no-Spark re-render agrees on the exit code, and --fail-on above every finding clears it
    rep = subprocess.run([*CLI, "report", str(out), "--format", "json"], capture_output=True, text=True, timeout=300)
    assert rep.returncode == 1 and json.loads(rep.stdout)["summary"] == doc["summary"]


def _findings_by_file(doc: dict) -> dict[str, set[str]]:
    got: dict[str, set[str]] = {}
    for f in doc["findings"]:
        for ev in f["evidence"]:
            if ev.get("path"):
                got.setdefault(ev["path"], set()).add(f["kind"])
    return got


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(reason=KNOWN_GAPS[c], strict=True)) if c in KNOWN_GAPS
                                  else c for c in sorted(EXPECTED_KIND)])
def test_each_damaged_file_gives_its_kind(analyzed, case):
    _, out, run = analyzed
    assert run.returncode in (0, 1), run.stderr[-3000:]
    c = next(c for c in _cases() if c["case"] == case)
    kinds = _findings_by_file(json.loads((out / "findings.json").read_text())).get(_case_file(c), set())
    want = EXPECTED_KIND[case]
    if want is None:
        assert not kinds & DAMAGE_KINDS, f"{case}: Kafka reads this file as valid, we report {kinds}"
    else:
        assert want in kinds, f"{case} ({c['fault']}): want {want}, got {kinds}"


def test_no_finding_names_a_file_outside_the_cases(analyzed):
    broker, out, _ = analyzed
    doc = json.loads((out / "findings.json").read_text())
    damaged = {_case_file(c) for c in _cases()}
    companions = {str(Path(_case_file(c)).parent / n) for c in _cases() for n in c["companions"]}
    for f in doc["findings"]:
        if f["kind"] not in DAMAGE_KINDS:
            continue
        for ev in f["evidence"]:
            assert ev["path"] in damaged, (f["kind"], ev["path"], "companions are unchanged copies" if ev["path"] in companions else "")


def test_the_catalog_answers_with_the_problems(analyzed):
    _, out, _ = analyzed
    # parser problems, plus what a job finds across files (an index entry past its segment's end)
    q = subprocess.run([*CLI, "sql", str(out), "select path, kind from problems union all "
                        "select e.path, f.kind from findings f lateral view explode(evidence) x as e", "--format", "json"],
                       capture_output=True, text=True, timeout=900)
    assert q.returncode == 0, q.stderr[-3000:]
    rows = [json.loads(line) for line in q.stdout.splitlines() if line.startswith("{")]
    by_path: dict[str, set[str]] = {}
    for r in rows:
        by_path.setdefault(r["path"], set()).add(r["kind"])
    for c in _cases():
        want = EXPECTED_KIND[c["case"]]
        if want is not None and c["case"] not in KNOWN_GAPS:
            assert want in by_path.get(_case_file(c), set()), (c["case"], by_path.get(_case_file(c)))
    q2 = subprocess.run([*CLI, "sql", str(out), "select count(*) as n from files", "--format", "json"],
                        capture_output=True, text=True, timeout=900)
    assert q2.returncode == 0, q2.stderr[-3000:]
    n_files = sum(1 + len(c["companions"]) for c in _cases()) + 1 + sum(
        1 for c in _cases() if not _in_partition_dir(c["source"]) and c["damaged"] != "meta.properties")
    assert json.loads(q2.stdout.strip().splitlines()[-1])["n"] == n_files
