"""Archives are read safely: nothing lands outside the work area, hostile entries are refused."""

from __future__ import annotations

import io
import tarfile
import zipfile

import pytest

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
    refused = {p["path"].split("/", 1)[1] for p in problems}
    assert refused == {"../outside.txt", "/abs.txt", "ok/../../up.txt", "ok/link", "ok/abslink", "ok/hard", "ok/dev", "ok/fifo"}
    assert {p["kind"] for p in problems} == {"unsafe_archive_entry"}
    landed = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert landed == ["evil.tar.gz", "out/_work/ok/good.txt", "out/_work/ok/inner"]
    assert not (work / "ok" / "inner").is_symlink()  # links become copies, never links


def test_zip_with_traversal(tmp_path):
    arc = tmp_path / "a.zip"
    with zipfile.ZipFile(arc, "w") as zf:
        zf.writestr("../../evil", b"no")
        zf.writestr("logs/meta.properties", b"broker.id=2\n")
    problems = extract(arc, tmp_path / "w")
    assert [p["path"] for p in problems] == ["a.zip/../../evil"]
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
