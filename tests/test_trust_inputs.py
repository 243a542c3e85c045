"""Trust first (issue 15 items 1 and 2): nothing read, no verdict.

Input where no broker log dir is found (an empty folder, other files, a lone segment, a partition
folder on its own) is one line naming what was looked for and what was found instead, exit 2,
before any JVM: the CLI runs here with ``JAVA_HOME`` pointing nowhere, so reaching Spark would fail
differently. ``report`` on a DIR that ``ingest`` wrote (real ingest, real files) says the analysis
has not run and how to run it, exit 2, instead of a "Clean" verdict.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REAL

CLI = [sys.executable, "-m", "analyzer.cli"]
BROKER = REAL / "crash-only" / "broker-1"
SEGMENT = "00000000000000000000.log"


def _empty(d: Path) -> Path:
    d.mkdir()
    return d


def _other_files(d: Path) -> Path:
    (d / "notes").mkdir(parents=True)
    (d / "a.txt").write_text("collected on the 3rd\n")
    (d / "b.csv").write_text("x,y\n")
    (d / "notes" / "c.md").write_text("# incident\n")
    return d


def _lone_segment(d: Path) -> Path:
    d.mkdir()
    shutil.copy(BROKER / "tc-0" / SEGMENT, d / SEGMENT)
    return d


def _partition_folder(d: Path) -> Path:
    shutil.copytree(BROKER / "tc-0", d / "tc-0")
    return d / "tc-0"


# (how to build the input, words the one line must hold)
CASES = {
    "empty folder": (_empty, ["found nothing: it is empty"]),
    "other files": (_other_files, ["found 3 files, none a Kafka file", "a.txt"]),
    "lone segment": (_lone_segment, [f"found {SEGMENT} (segment) outside any partition folder", "kafka-forensics dump"]),
    "partition folder": (_partition_folder, ["outside any partition folder", "give the folder above it"]),
}


def _no_jvm_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "JAVA_HOME": str(tmp_path / "no-java-here")}


@pytest.mark.parametrize("command", ["analyze", "ingest"])
@pytest.mark.parametrize("case", list(CASES))
def test_no_log_dir_is_one_line_exit_2_before_any_jvm(tmp_path, command, case):
    build, words = CASES[case]
    src = build(tmp_path / "input")
    out = tmp_path / "out"
    run = subprocess.run([*CLI, command, str(src), "--out", str(out)], capture_output=True, text=True, timeout=120,
                         env=_no_jvm_env(tmp_path), cwd=tmp_path)
    assert run.returncode == 2, run.stderr[-2000:]
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr[-2000:]
    assert lines[0].startswith(f"kafka-forensics: no Kafka log dir found in {src} (looked for meta.properties"), lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    assert "Clean" not in run.stdout and run.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input"], "no DIR, no staging sibling, nothing in the cwd"


def test_a_lone_segment_file_as_input_points_to_dump(tmp_path):
    src = _lone_segment(tmp_path / "input") / SEGMENT
    run = subprocess.run([*CLI, "analyze", str(src), "--out", str(tmp_path / "out")], capture_output=True, text=True,
                         timeout=120, env=_no_jvm_env(tmp_path))
    assert run.returncode == 2
    assert run.stderr.splitlines() == [f"kafka-forensics: {src}: a Kafka file (segment), not a log dir; read it alone with "
                                       f"`kafka-forensics dump {src}`, or give the log dir that holds it"]


def test_several_inputs_none_with_a_log_dir_name_each(tmp_path):
    a, b = _empty(tmp_path / "a"), _other_files(tmp_path / "b")
    run = subprocess.run([*CLI, "analyze", str(a), str(b), "--out", str(tmp_path / "out")], capture_output=True, text=True,
                         timeout=120, env=_no_jvm_env(tmp_path))
    assert run.returncode == 2
    [line] = run.stderr.splitlines()
    assert "no Kafka log dir found in any input" in line
    assert f"{a}: found nothing: it is empty" in line and f"{b}: found 3 files, none a Kafka file" in line


def test_report_on_an_ingest_dir_says_the_analysis_has_not_run(spark, tmp_path):
    """A real ingest (the pipeline ``kafka-forensics ingest`` runs) of one broker's log dir, then
    ``report`` on it: no jobs ran, so no verdict; one line saying how to run them, exit 2."""
    from jobs.ingest.run import staged_run

    out = tmp_path / "case"
    with staged_run([BROKER], out, spark=spark, progress=False, register=False) as staged:
        assert staged.result.files > 0
    assert (out / "tables" / "batches").is_dir() and (out / "run.json").is_file() and not (out / "findings.json").exists()
    for fmt in ("text", "json", "html"):
        run = subprocess.run([*CLI, "report", str(out), "--format", fmt], capture_output=True, text=True, timeout=120)
        assert run.returncode == 2, run.stdout[-2000:]
        assert run.stdout == "" and "Clean" not in run.stderr
        assert run.stderr.splitlines() == [
            f"kafka-forensics: the analysis has not run on {out} (no findings.json: ingest wrote it); "
            f"run `kafka-forensics analyze {BROKER.resolve()} --out {out}`"]  # (run.json keeps inputs resolved)
    assert not (out / "report.html").exists()
