"""Evidence is never touched: analyzing a read-only copy of a real cluster's log dirs leaves every
file's bytes, size, mtime and mode as they were and creates nothing inside the input; the
``files`` table's SHA-256 of every file is hashlib's."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat

import pyarrow.dataset as ds
from conftest import REAL

from analyzer.analyze import build

SCENARIO = REAL / "crash-only"


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _snapshot(root) -> dict[str, tuple]:
    """Every entry under root: (sha256 or None for dirs, size, mtime_ns, mode)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            digest = _sha256(p) if stat.S_ISREG(st.st_mode) else None
            size = st.st_size if stat.S_ISREG(st.st_mode) else None
            out[os.path.relpath(p, root)] = (digest, size, st.st_mtime_ns, st.st_mode)
    st = os.lstat(root)
    out["."] = (None, None, st.st_mtime_ns, st.st_mode)
    return out


def _chmod_tree(root, fn) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.chmod(p, fn(os.lstat(p).st_mode))
    os.chmod(root, fn(os.lstat(root).st_mode))


def test_analyze_leaves_evidence_untouched(tmp_path, spark):
    src = tmp_path / "evidence"
    shutil.copytree(SCENARIO, src, symlinks=True)
    _chmod_tree(src, lambda m: m & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))  # chmod -R a-w
    try:
        before = _snapshot(src)
        out = tmp_path / "out"
        build([src], out, spark=spark, progress=False, register_catalog=False)
        after = _snapshot(src)
    finally:
        _chmod_tree(src, lambda m: m | stat.S_IWUSR)  # let pytest clean up
    assert sorted(set(after) - set(before)) == [], "files created inside the input"
    assert sorted(set(before) - set(after)) == [], "files removed from the input"
    changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    assert not changed, f"input changed: {changed}"

    files = ds.dataset(out / "tables" / "files", format="parquet", partitioning="hive").to_table(
        columns=["log_dir", "path", "size", "sha256"]
    )
    rows = {r["path"]: r for r in files.to_pylist()}
    assert len(rows) == files.num_rows, "a file listed twice"
    wrong = {p: (r["sha256"], before[p][0]) for p, r in rows.items() if p not in before or r["sha256"] != before[p][0]}
    assert not wrong, f"files table sha256 differs from hashlib's: {wrong}"
    assert all(r["size"] == before[p][1] for p, r in rows.items())
    # every regular file under each log dir the table names is listed (broker logs are files
    # picked from a folder that is not a log dir: their folder's other files are not Kafka's)
    kinds = {r["path"]: r["kind"] for r in files_kinds(out)}
    log_dirs = {r["log_dir"] for p, r in rows.items() if kinds.get(p) != "broker_log"}
    on_disk = {p for p, v in before.items() if v[0] is not None and any(p.startswith(d + os.sep) for d in log_dirs)}
    assert on_disk - set(rows) == set(), "files under a log dir missing from the files table"
    assert len(log_dirs) >= 4 and len(rows) > 50


def files_kinds(out):
    return ds.dataset(out / "tables" / "files", format="parquet", partitioning="hive").to_table(columns=["path", "kind"]).to_pylist()
