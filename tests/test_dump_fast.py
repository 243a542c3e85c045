"""`dump`'s whole-column writer (analyzer/lines.py) writes exactly the lines of its row-by-row
writer, on Kafka's own segments and indexes and on every column kind it takes; a dump process
imports only what it needs and loads every numba kernel from the on-disk cache."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from conftest import GOLDEN, REAL, REPO
from typer.testing import CliRunner

import analyzer.dump as dump_mod
from analyzer import lines
from analyzer.cli import app
from sample_data.writer import bulk

runner = CliRunner()
GT = GOLDEN / "logdir" / "golden-topic-0"
FILES = [
    GT / "00000000000000000000.log",  # every codec, headers, null keys and values, LOG_APPEND_TIME
    GT / "00000000000000000031.log",  # idempotent, transactional, control batches, an empty batch
    GOLDEN / "logdir" / "legacy-topic-0" / "00000000000000000000.log",  # v0/v1 wrappers
    GOLDEN / "corrupt" / "crc-mismatch" / "00000000000000000000.log",
    GOLDEN / "corrupt" / "zero-filled-tail" / "00000000000000000000.log",
    REAL / "crash-only" / "broker-1" / "__cluster_metadata-0" / "00000000000000000000.log",  # KRaft records
    next((REAL / "unclean-election-divergence-rejoined").rglob("*.log")),
    GT / "00000000000000000049.index",
    GT / "00000000000000000000.timeindex",
]
MODES = [[], ["--json"], ["--records"], ["--records", "--json"], ["--records", "--payloads", "--json"], ["--records", "--payloads"]]


def _dump(args: list[str], fast: bool, monkeypatch) -> tuple[int, bytes]:
    monkeypatch.setattr(dump_mod, "FAST_ROWS", 0 if fast else 1 << 62)
    result = runner.invoke(app, ["dump", *args])
    return result.exit_code, result.stdout_bytes


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Segments of the writer's bulk generator, big enough for several blocks of lines."""
    d = tmp_path_factory.mktemp("bulk")
    out = []
    for codec in ("none", "lz4"):
        path = d / codec / "00000000000000000000.log"
        path.parent.mkdir()
        templates = bulk.make_templates(codec, 10, 95, 12, 4, seed=3)
        bulk.write_segment_file(path, templates, max_batches=(lines.BLOCK_LINES // 10) + 700, producer_id=7)
        out.append(path)
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_whole_columns_write_the_row_by_row_lines(path, monkeypatch):
    modes = MODES if path.suffix == ".log" else MODES[:2]
    for mode in modes:
        slow = _dump([str(path), *mode], False, monkeypatch)
        assert slow[1], mode
        assert _dump([str(path), *mode], True, monkeypatch) == slow, mode


def test_whole_columns_on_segments_of_several_blocks(written, monkeypatch):
    for path in written:
        for mode in MODES[2:4]:
            slow = _dump([str(path), *mode], False, monkeypatch)
            assert slow[1].count(b"\n") > lines.BLOCK_LINES
            assert _dump([str(path), *mode], True, monkeypatch) == slow, (path, mode)


EDGES = pa.table({
    "i64": pa.array([0, -1, 2**63 - 1, -(2**63), None, 10, -10], pa.int64()),
    "i8": pa.array([-128, 127, 0, None, 1, -1, 5], pa.int8()),
    "u32": pa.array([0, 2**32 - 1, None, 1, 9, 10, 99], pa.uint32()),
    "flag": pa.array([True, False, None, True, False, True, None]),
    "text": pa.array(["", "none", None, "a b", "~", "x" * 70, "0"]),
    "blob": pa.array([b"", b"\x00\xff", None, b"\x10", b"ab", b"\x7f" * 3, b"z"], pa.binary()),
    "big_text": pa.array(["p", None, "q", "r", "s", "t", "u"], pa.large_string()),
    "no_text": pa.array([None] * 7, pa.string()),  # no data buffer to speak of
    "empty": pa.array([""] * 7),
})  # fmt: skip


@pytest.mark.parametrize("as_json", [False, True])
@pytest.mark.parametrize("row_type", ["batch", "record"])
def test_every_column_kind_as_json_and_str_write_it(as_json, row_type):
    """Edge values (int64 limits, nulls of every kind, empty strings, bytes) and a sliced table."""
    for table in (EDGES, EDGES.slice(2, 4)):
        [fast] = lines.piece_lines(table, None, lines.Style(as_json), row_type, "dir/0.log")
        slow = "".join(dump_mod._line(as_json, row_type, "dir/0.log", row) + "\n" for row in table.to_pylist())
        assert fast.tobytes() == slow.encode()


@pytest.mark.parametrize("value", ['say "hi"', "back\\slash", "tab\there", "caf\u00e9", "del\x7f"])
def test_strings_that_need_escaping_are_left_to_the_row_writer(value):
    table = pa.table({"s": [value, "plain"]})
    assert lines.piece_lines(table, None, lines.Style(True), "batch", "p") is None
    assert lines.piece_lines(pa.table({"s": ["plain"] * 2}), None, lines.Style(True), "batch", "p") is not None


def test_lists_and_timestamps_are_left_to_the_row_writer():
    assert lines.columns(pa.table({"v": [[1], [2]]}), lines.Style(True), "x", "p", ()) is None
    assert lines.columns(pa.table({"t": pa.array(np.array([0, 1], "datetime64[ms]"))}), lines.Style(True), "x", "p", ()) is None


def _in_a_process(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    """The console script's ``main`` in a fresh interpreter; stderr ends with the top-level
    packages it imported."""
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('IMPORTED', ' '.join(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr))\n"
        "from analyzer.cli import main\n"
        f"sys.argv = ['kafka-forensics', *{args!r}]\n"
        "main()\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=REPO, env=env, timeout=300)


def _imported(proc: subprocess.CompletedProcess) -> set[str]:
    return set(proc.stderr.decode().rsplit("IMPORTED ", 1)[1].split())


def test_a_dump_process_writes_what_the_cli_writes_without_pandas(monkeypatch):
    path = GT / "00000000000000000031.log"
    proc = _in_a_process(["dump", str(path), "--records", "--json"])
    assert (proc.returncode, proc.stdout) == _dump([str(path), "--records", "--json"], False, monkeypatch)
    assert "pandas" not in _imported(proc)  # pyarrow would import it (~0.4 s) for nothing


def test_a_checkpoint_dump_loads_no_compiled_code():
    proc = _in_a_process(["dump", str(GT / "leader-epoch-checkpoint")])
    assert proc.returncode == 0 and proc.stdout.startswith(b"Dumping ")
    assert not {"numba", "pandas", "llvmlite"} & _imported(proc)


def test_every_kernel_of_a_segment_dump_comes_from_the_cache():
    import os

    args = ["dump", str(GT / "00000000000000000000.log"), "--records", "--json"]
    _in_a_process(args)  # fills the cache if this checkout never ran them
    proc = _in_a_process(args, env={**os.environ, "NUMBA_DEBUG_CACHE": "1"})
    log = proc.stdout.decode(errors="replace")  # numba prints its cache log to stdout
    assert proc.returncode == 0
    assert "data saved to" not in log, log  # nothing was compiled
    assert "_sha256_openssl" in log  # the OpenSSL loop too (it used to be compiled in every process)
