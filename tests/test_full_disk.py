"""A full or unwritable output filesystem (issue 20, item 3): one line naming DIR and the bytes it
needs, exit 2, the previous DIR as it was, no staging sibling left.

The filesystems are real: a tmpfs mounted small (it fills while the ingest tasks write their
Parquet files) or remounted read-only (we run as root; without the right to mount, those tests
skip), and a regular file where DIR's parent should be.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REAL

from jobs.store import outdir

CLI = [sys.executable, "-m", "analyzer.cli"]
ROOT = Path(__file__).resolve().parents[1]
SRC = REAL / "crash-only"


def _analyze(out: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([*CLI, "analyze", str(SRC), "--out", str(out), "--format", "json"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def _input_bytes() -> int:
    return sum(p.stat().st_size for p in SRC.rglob("*") if p.is_file() and not p.is_symlink())


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


def _previous(out: Path) -> dict[str, str]:
    """A previous DIR (what an earlier run left) and its content."""
    (out / "tables").mkdir(parents=True)
    (out / "findings.json").write_text('{"version": 1, "findings": []}\n')
    (out / "tables" / "marker").write_bytes(b"previous run")
    return _tree(out)


def _one_line(run: subprocess.CompletedProcess, out: Path) -> str:
    assert run.returncode == 2, run.stderr[-3000:]
    ours = [line for line in run.stderr.splitlines() if line.startswith("kafka-forensics: ")]
    assert len(ours) == 1 and run.stderr.rstrip().endswith(ours[0]), run.stderr[-3000:]
    line = ours[0]
    assert f"cannot write {out}" in line and f"about {_input_bytes()} bytes" in line, line
    # Spark's own log may show the failed task; no traceback of the driver's (pyspark, py4j) follows
    assert "pyspark.errors" not in run.stderr and "py4j" not in run.stderr and "During handling" not in run.stderr
    assert not run.stdout
    return line


@contextlib.contextmanager
def _tmpfs(where: Path, size: str):
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_no_room_is_told_by_errno_or_by_the_words_spark_passes_on():
    assert outdir.no_room(OSError(28, "No space left on device")) == 28
    assert outdir.no_room(OSError(27, "File too large")) == 27
    assert outdir.no_room(RuntimeError("PythonException: OSError: [Errno 28] Error writing bytes to file. "
                                "Detail: [errno 28] No space left on device")) == 28
    assert outdir.no_room(RuntimeError("java.io.IOException: Read-only file system")) == 30
    assert outdir.no_room(FileNotFoundError(2, "No such file or directory")) is None  # a missing input is not the output's
    assert outdir.no_room(ValueError("bad input")) is None
    assert outdir.no_room(KeyboardInterrupt()) is None


def test_out_whose_parent_is_a_regular_file(tmp_path):
    (tmp_path / "evidence.txt").write_text("a file, not a folder")
    out = tmp_path / "evidence.txt" / "incident"
    line = _one_line(_analyze(out, tmp_path), out)
    assert f"a file is in the way ({tmp_path / 'evidence.txt'})" in line and "nothing was written" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evidence.txt"]


def test_out_on_a_read_only_filesystem_keeps_the_previous_dir(tmp_path):
    with _tmpfs(tmp_path / "ro", "4m") as fs:
        out = fs / "incident"
        before = _previous(out)
        subprocess.run(["mount", "-o", "remount,ro", str(fs)], check=True)
        line = _one_line(_analyze(out, tmp_path), out)
        assert "read-only" in line and f"the previous {out} is unchanged" in line
        assert _tree(out) == before
        assert sorted(p.name for p in fs.iterdir()) == ["incident"]


def test_output_filesystem_filling_mid_run_keeps_the_previous_dir(tmp_path):
    """512 KiB hold the previous DIR but not the new tables of a 22 MB capture: the ingest
    tasks fill it while they write (one Spark run)."""
    with _tmpfs(tmp_path / "small", "512k") as fs:
        out = fs / "incident"
        before = _previous(out)
        line = _one_line(_analyze(out, tmp_path), out)
        assert "no space left" in line and f"the previous {out} is unchanged" in line
        assert _tree(out) == before
        assert sorted(p.name for p in fs.iterdir()) == ["incident"], "a staging sibling was left"


def test_a_heap_too_small_is_one_line_and_leaves_no_dir(tmp_path):
    """A run whose jobs outgrow the heap ends as one line naming the heap and KF_DRIVER_MEMORY,
    exit 2: no Java stack trace, no py4j traceback, and no DIR (the catalog's table folders, made at
    their final location, used to be left behind as an empty tree). The heap is outgrown as a
    user's spark-defaults.conf can make it, at once: the 512 MiB heap (Spark's 300 MiB reserve and
    little more) cannot hold the column vectors of a Parquet reader batch of 200 M rows, which the
    jobs' first scan allocates in a task. Spark's handler then ends the JVM with its out-of-memory
    code while the aborted job still answers py4j, with a text that may not name the error (it was
    said as an internal error, one run in two). (A collection that outgrows the heap by its size
    does the same after minutes of garbage collection: one took 3-10 minutes of CI.)"""
    import shutil

    out = tmp_path / "out"
    conf = tmp_path / "spark-conf"
    conf.mkdir()
    shutil.copy(ROOT / "jobs" / "session" / "spark_conf" / "log4j2.properties", conf)
    (conf / "spark-defaults.conf").write_text("spark.sql.parquet.columnarReaderBatchSize 200000000\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KF_DRIVER_MEMORY": "512m", "SPARK_CONF_DIR": str(conf)}
    run = subprocess.run([*CLI, "analyze", str(REAL / "crash-only"), "--out", str(out), "--format", "json"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 2, run.stderr[-3000:]
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("kafka-forensics: Spark ran out of memory with a 512m heap"), run.stderr[-3000:]
    assert "KF_DRIVER_MEMORY=" in lines[-1] and f"nothing was written to {out}" in lines[-1]
    assert "Traceback" not in run.stderr and "\tat " not in run.stderr, run.stderr[-3000:]
    assert not out.exists(), sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))[:20]
    assert not list(tmp_path.glob("out.tmp-*"))


def test_a_setting_spark_refuses_is_one_line(tmp_path):
    """A user's spark-defaults.conf that Spark cannot use (a size where it reads a count) stops its
    context from starting: that is the user's setting to mend, said in Spark's words in one line,
    exit 2, not an internal error under the JVM's stack trace."""
    import shutil

    conf = tmp_path / "spark-conf"
    conf.mkdir()
    shutil.copy(ROOT / "jobs" / "session" / "spark_conf" / "log4j2.properties", conf)
    (conf / "spark-defaults.conf").write_text("spark.testing.memory 8g\n")
    out = tmp_path / "out"
    run = subprocess.run([*CLI, "analyze", str(REAL / "crash-only"), "--out", str(out)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), "SPARK_CONF_DIR": str(conf)})
    assert run.returncode == 2, run.stderr[-3000:]
    lines = [line for line in run.stderr.splitlines() if line.strip() and not line.startswith("INFO ")]
    assert len(lines) == 1 and lines[0].startswith("kafka-forensics: Spark could not start: "), run.stderr[-3000:]
    assert "spark.testing.memory" in lines[0] and "8g" in lines[0]
    assert not out.exists() and not list(tmp_path.glob("out.tmp-*"))


def test_a_bad_driver_memory_is_one_line(tmp_path):
    """KF_DRIVER_MEMORY below what Spark starts with, or not a size, is one line naming it, exit 2,
    before any JVM (it was Spark's INVALID_DRIVER_MEMORY stack trace and a Python traceback, exit 1)."""
    for value, said in (("460m", "is below the 512m Spark needs"), ("2gb", "not a size")):
        out = tmp_path / f"out-{value}"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "KF_DRIVER_MEMORY": value}
        run = subprocess.run([*CLI, "analyze", str(REAL / "crash-only"), "--out", str(out)], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 2, run.stderr[-3000:]
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith(f"kafka-forensics: KF_DRIVER_MEMORY={value}"), run.stderr
        assert said in lines[0] and not out.exists()
