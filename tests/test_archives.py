"""Archives are read safely: nothing lands outside the work area, hostile entries are refused."""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile

import pytest
from conftest import REAL

from jobs.ingest.archives import ArchiveError, extract, is_archive


def _tar(path, entries, mode="w:gz"):
    with tarfile.open(path, mode) as tf:
        for info, data in entries:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)


def _file(name, data=b"x"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name, kind, target=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


@pytest.mark.parametrize("suffix,mode", [(".tar", "w"), (".tar.gz", "w:gz"), (".tgz", "w:gz"), (".tar.xz", "w:xz")])
def test_tar_kinds(tmp_path, suffix, mode):
    arc = tmp_path / f"a{suffix}"
    _tar(arc, [_file("b/kafka-logs/meta.properties", b"broker.id=1\n")], mode)
    assert is_archive(arc)
    assert extract(arc, tmp_path / "w") == []
    assert (tmp_path / "w" / "b" / "kafka-logs" / "meta.properties").read_bytes() == b"broker.id=1\n"


def test_hostile_tar_entries_refused(tmp_path):
    arc = tmp_path / "evil.tar.gz"
    _tar(arc, [
        _file("../outside.txt"),
        _file("/abs.txt"),
        _file("ok/../../up.txt"),
        _special("ok/link", tarfile.SYMTYPE, "../../../etc/passwd"),
        _special("ok/abslink", tarfile.SYMTYPE, "/etc/passwd"),
        _special("ok/hard", tarfile.LNKTYPE, "../x"),
        _special("ok/dev", tarfile.CHRTYPE),
        _special("ok/fifo", tarfile.FIFOTYPE),
        _file("ok/good.txt", b"good"),
        _special("ok/inner", tarfile.SYMTYPE, "good.txt"),
    ])
    work = tmp_path / "out" / "_work"
    problems = extract(arc, work)
    refused = {p.path.split("/", 1)[1] for p in problems}
    assert refused == {"../outside.txt", "/abs.txt", "ok/../../up.txt", "ok/link", "ok/abslink", "ok/hard", "ok/dev", "ok/fifo"}
    assert {p.kind for p in problems} == {"unsafe_archive_entry"}
    landed = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert landed == ["evil.tar.gz", "out/_work/ok/good.txt", "out/_work/ok/inner"]
    assert not (work / "ok" / "inner").is_symlink()  # links become copies, never links


def test_zip_with_traversal(tmp_path):
    arc = tmp_path / "a.zip"
    with zipfile.ZipFile(arc, "w") as zf:
        zf.writestr("../../evil", b"no")
        zf.writestr("logs/meta.properties", b"broker.id=2\n")
    problems = extract(arc, tmp_path / "w")
    assert [p.path for p in problems] == ["a.zip/../../evil"]
    assert (tmp_path / "w" / "logs" / "meta.properties").is_file()
    assert not (tmp_path.parent / "evil").exists()


def test_bounds(tmp_path):
    arc = tmp_path / "many.tar"
    _tar(arc, [_file(f"f{i}") for i in range(5)], "w")
    with pytest.raises(ArchiveError):
        extract(arc, tmp_path / "w1", max_entries=3)
    with pytest.raises(ArchiveError):
        extract(arc, tmp_path / "w2", max_bytes=2)


def test_corrupt_archive_is_a_clear_error(tmp_path):
    arc = tmp_path / "bad.tar.gz"
    arc.write_bytes(b"not an archive at all")
    with pytest.raises(ArchiveError):
        extract(arc, tmp_path / "w")


# --- archives inside archives (support bundles) ---------------------------------------------------

def _tar_of(path, files: dict[str, bytes], mode="w:gz"):
    _tar(path, [_file(name, data) for name, data in files.items()], mode)
    return path


def _zip_of(path, files: dict[str, bytes]):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def _bundle(tmp_path, name, members: dict[str, object], mode="w:gz"):
    """An archive of the given files (bytes) and archives (paths, added under their name)."""
    with tarfile.open(tmp_path / name, mode) as tf:
        for arcname, what in members.items():
            if isinstance(what, bytes):
                tf.addfile(_file(arcname, what)[0], io.BytesIO(what))
            else:
                tf.add(what, arcname)
    return tmp_path / name


def test_archives_inside_an_archive_are_unpacked(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    members = {
        "broker-1.tar.gz": _tar_of(src / "broker-1.tar.gz", {"broker-1/meta.properties": b"node.id=1\n"}),
        "broker-2.zip": _zip_of(src / "broker-2.zip", {"broker-2/meta.properties": b"node.id=2\n"}),
        "b/broker-3.tar.xz": _tar_of(src / "broker-3.tar.xz", {"broker-3/meta.properties": b"node.id=3\n"}, "w:xz"),
        "b/broker-4.tgz": _tar_of(src / "broker-4.tgz", {"broker-4/meta.properties": b"node.id=4\n"}),
        "b/broker-5.tar": _tar_of(src / "broker-5.tar", {"broker-5/meta.properties": b"node.id=5\n"}, "w"),
        "notes.txt.gz": gzip.compress(b"collected by ops\n"),  # a plain .gz of one file
        "logs/server.log.1.gz": gzip.compress(b"[2024-01-01 00:00:00,000] INFO x (y)\n"),  # read gzipped: left alone
    }
    arc = _bundle(tmp_path, "incident.tar.gz", members)
    work = tmp_path / "w"
    assert extract(arc, work) == []
    for i, name in enumerate(["broker-1.tar.gz", "broker-2.zip", "b/broker-3.tar.xz", "b/broker-4.tgz", "b/broker-5.tar"], 1):
        assert (work / name / f"broker-{i}" / "meta.properties").read_bytes() == f"node.id={i}\n".encode()
    assert (work / "notes.txt.gz" / "notes.txt").read_bytes() == b"collected by ops\n"
    assert (work / "logs" / "server.log.1.gz").is_file()
    assert not list(work.rglob("*.kf-unpacking"))


def test_nested_archives_are_refused_the_same_way_at_every_level(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    inner = src / "inner.tar"
    _tar(inner, [_file("../escape-2"), _special("ok/link", tarfile.SYMTYPE, "../../../../etc/passwd"),
                 _special("ok/fifo", tarfile.FIFOTYPE), _file("ok/good.txt", b"good")], "w")
    middle = _zip_of(src / "middle.zip", {"inner.tar": inner.read_bytes(), "../escape-1": b"no"})
    arc = _bundle(tmp_path, "outer.tar.gz", {"middle.zip": middle, "/abs-0": b"no"})
    work = tmp_path / "out" / "w"
    problems = extract(arc, work)
    assert {p.path for p in problems} == {
        "outer.tar.gz//abs-0", "outer.tar.gz/middle.zip/../escape-1", "outer.tar.gz/middle.zip/inner.tar/../escape-2",
        "outer.tar.gz/middle.zip/inner.tar/ok/link", "outer.tar.gz/middle.zip/inner.tar/ok/fifo"}
    assert {p.kind for p in problems} == {"unsafe_archive_entry"}
    landed = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file() and src not in p.parents)
    assert landed == ["out/w/middle.zip/inner.tar/ok/good.txt", "outer.tar.gz"]


def test_nesting_deeper_than_three_levels_stays_packed(tmp_path):
    level4 = _tar_of(tmp_path / "l4.tar.gz", {"deep.txt": b"deep"})
    level3 = _bundle(tmp_path, "l3.tar", {"l4.tar.gz": level4, "three.txt": b"3"}, "w")
    level2 = _bundle(tmp_path, "l2.tar.gz", {"l3.tar": level3})
    arc = _bundle(tmp_path, "l1.tar.gz", {"l2.tar.gz": level2})
    work = tmp_path / "w"
    (problem,) = extract(arc, work)
    assert problem.path == "l1.tar.gz/l2.tar.gz/l3.tar/l4.tar.gz" and "more than 3 levels" in problem.detail
    assert (work / "l2.tar.gz" / "l3.tar" / "three.txt").read_bytes() == b"3"
    assert (work / "l2.tar.gz" / "l3.tar" / "l4.tar.gz").is_file()


def test_one_budget_for_every_level(tmp_path):
    """Each inner archive alone fits the bounds; all levels together do not."""
    src = tmp_path / "src"
    src.mkdir()
    inner = {f"i{n}.tar": _tar_of(src / f"i{n}.tar", {f"f{k}": b"x" * 1000 for k in range(4)}, "w") for n in range(3)}
    arc = _bundle(tmp_path, "bundle.tar", inner, "w")
    assert extract(arc, tmp_path / "ok") == []
    one = (src / "i0.tar").stat().st_size
    with pytest.raises(ArchiveError) as err:  # the outer level alone is 3 x one; the entries inside push it over
        extract(arc, tmp_path / "w1", max_bytes=3 * one + 5000)
    assert err.value.kind == "unsafe_archive_entry" and "i" in str(err.value)
    assert not (tmp_path / "w1").exists()
    with pytest.raises(ArchiveError):  # 3 entries outside, 12 inside
        extract(arc, tmp_path / "w2", max_entries=10)
    assert not (tmp_path / "w2").exists()


def test_gzip_bomb_inside_an_archive_is_refused(tmp_path):
    """A plain .gz has no declared size: its blocks are counted as they inflate."""
    bomb = gzip.compress(b"\0" * (64 << 20), 9)
    arc = _bundle(tmp_path, "bundle.tar", {"zeros.bin.gz": bomb}, "w")
    with pytest.raises(ArchiveError) as err:
        extract(arc, tmp_path / "w", max_bytes=8 << 20)
    assert err.value.kind == "unsafe_archive_entry" and "zeros.bin" in str(err.value)
    assert not (tmp_path / "w").exists()


def test_unreadable_inner_archive_is_a_problem_row_and_the_rest_is_unpacked(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    good = _tar_of(src / "good.tar.gz", {"b/meta.properties": b"node.id=1\n"})
    arc = _bundle(tmp_path, "bundle.tar", {"broken.tar.gz": b"not an archive", "good.tar.gz": good}, "w")
    (problem,) = extract(arc, tmp_path / "w")
    assert (problem.path, problem.kind) == ("bundle.tar/broken.tar.gz", "unreadable_file")
    assert (tmp_path / "w" / "broken.tar.gz").read_bytes() == b"not an archive"
    assert (tmp_path / "w" / "good.tar.gz" / "b" / "meta.properties").is_file()


INCIDENT = REAL / "unclean-election-divergence-rejoined"


def _without_paths(value):
    """findings.json minus what names where the input was or when the run was (a finding's id
    hashes its first evidence's path)."""
    if isinstance(value, dict):
        return {k: _without_paths(v) for k, v in value.items() if k not in ("path", "paths", "generated_at", "input", "id")}
    if isinstance(value, list):
        return [_without_paths(v) for v in value]
    return value


def test_a_bundle_of_broker_tarballs_analyzes_like_the_tarballs(spark, tmp_path):
    """incident.tar.gz holding broker-{1,2,3}.tar.gz gives the findings of the three given apart."""
    from analyzer.analyze import build

    parts = []
    for b in ("broker-1", "broker-2", "broker-3"):
        with tarfile.open(tmp_path / f"{b}.tar.gz", "w:gz") as tf:
            tf.add(INCIDENT / b, b)
        parts.append(tmp_path / f"{b}.tar.gz")
    bundle = _bundle(tmp_path, "incident.tar.gz", {p.name: p for p in parts})
    ledger = INCIDENT / "ledger.jsonl"
    apart = build(parts, tmp_path / "apart", ledger=ledger, progress=False, spark=spark, register_catalog=False)
    together = build([bundle], tmp_path / "together", ledger=ledger, progress=False, spark=spark, register_catalog=False)
    assert together["input"]["brokers"] == apart["input"]["brokers"] == [1, 2, 3]
    assert together["input"]["files"] == apart["input"]["files"]
    assert {f["kind"] for f in apart["findings"]} >= {"acked_data_loss"}
    assert _without_paths(together) == _without_paths(apart)

