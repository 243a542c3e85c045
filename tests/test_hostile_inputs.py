"""Hostile inputs (issue 9, part 3): archives and odd files an operator may be handed.

Every case builds its hostile input in tmp_path and checks what a user would see: the entry is
refused or skipped with one warning line naming it and a problem row (``unsafe_archive_entry`` or
``unreadable_file``), nothing is written outside the extraction root / ``--out``, nothing blocks
(fifos are never opened, bombs are refused from their headers before inflating) and the good
data beside the hostile pieces is still read. One ``analyze`` run (CLI, subprocess) takes all of
them at once; the many small cases call ``jobs.ingest.archives`` / ``jobs.ingest.discover`` directly.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tarfile
import time
import zipfile
import zlib
from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import REAL

from jobs.ingest import archives
from jobs.ingest.archives import ArchiveError, extract
from jobs.ingest.discover import Root, discover, find_log_dirs

CLI = [sys.executable, "-m", "analyzer.cli"]
CF = REAL / "clean-failover"
IS_ROOT = os.geteuid() == 0


@pytest.fixture(autouse=True)
def no_hang():
    """A case that blocks (opening a fifo, inflating a bomb) fails after 120 s instead of hanging."""
    def boom(*_):
        raise TimeoutError("hostile input case did not finish in 120 s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


# ---------------------------------------------------------------- building hostile inputs

def _info(name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, size, link
    return info


def _tar(path: Path, entries: list[tuple[tarfile.TarInfo, bytes | None]], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode, format=tarfile.GNU_FORMAT) as tf:
        for info, data in entries:
            if data is not None:
                info.size = len(data)
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _hostile_tar_entries(tmp_path: Path, tag: str) -> tuple[list, dict[str, str]]:
    """Entries of every hostile kind (name -> expected detail word) plus good ones."""
    long_name = "L" * 300  # one component over NAME_MAX (255)
    hostile = {
        f"../escape-{tag}": "climbs out",
        f"{tmp_path}/escape/abs-{tag}": "absolute",
        f"ok/../../up-{tag}": "climbs out",
        f"ok/sym-out-{tag}": "leaves the archive root",
        f"ok/sym-abs-{tag}": "leaves the archive root",
        f"ok/hard-out-{tag}": "leaves the archive root",
        f"ok/chr-{tag}": "special file",
        f"ok/blk-{tag}": "special file",
        f"ok/fifo-{tag}": "special file",
        f"ok/{long_name}": "cannot be written",
    }
    deep = "/".join(["d"] * 200)
    entries = [
        (_info("./", tarfile.DIRTYPE), None),  # tar -C dir . : the root itself, not a problem
        (_info(f"../escape-{tag}"), b"no"),
        (_info(f"{tmp_path}/escape/abs-{tag}"), b"no"),
        (_info(f"ok/../../up-{tag}"), b"no"),
        (_info(f"ok/sym-out-{tag}", tarfile.SYMTYPE, link="../../../escape"), None),
        (_info(f"ok/sym-abs-{tag}", tarfile.SYMTYPE, link=f"{tmp_path}/escape"), None),
        (_info(f"ok/hard-out-{tag}", tarfile.LNKTYPE, link="../x"), None),
        (_info(f"ok/chr-{tag}", tarfile.CHRTYPE), None),
        (_info(f"ok/blk-{tag}", tarfile.BLKTYPE), None),
        (_info(f"ok/fifo-{tag}", tarfile.FIFOTYPE), None),
        (_info(f"ok/{long_name}"), b"long"),
        (_info("ok/good.txt"), b"good"),
        (_info("ok/-rf"), b"not an option"),
        (_info("ok/new\nline"), b"newline"),
        (_info("ok/bad\udcffbyte"), b"not utf-8"),  # tarfile writes the raw byte 0xff
        (_info(f"ok/{deep}/bottom"), b"deep"),
        (_info("ok/inner.tar.gz"), _tar_bytes([(_info("x/meta.properties"), b"broker.id=9\n")])),
        (_info("ok/hard-in", tarfile.LNKTYPE, link="ok/good.txt"), None),
        (_info("ok/sym-in", tarfile.SYMTYPE, link="good.txt"), None),
    ]
    return entries, hostile


def _tar_bytes(entries) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for info, data in entries:
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _gzip_bomb_tar(path: Path, name: str, size: int) -> Path:
    """A gzip'd tar of one ``size``-byte zero file, built cheaply as concatenated gzip members
    (each 1 MiB of zeros is ~1 KiB compressed): a real, valid ~1000:1 bomb."""
    head = _info(name, size=size).tobuf(tarfile.GNU_FORMAT)
    zeros = gzip.compress(b"\0" * (1 << 20), 9)
    with open(path, "wb") as f:
        f.write(gzip.compress(head))
        for _ in range(size >> 20):
            f.write(zeros)
        f.write(gzip.compress(b"\0" * (2 * 512)))  # end-of-archive blocks
    return path


def _zip_bomb(path: Path, name: str, mib: int, entries: int = 1) -> Path:
    """A valid zip whose ``entries`` entries each inflate to ``mib`` MiB of zeros (~1000:1). The
    deflate stream is built from one full-flushed 1 MiB block repeated, so it costs no CPU."""
    z = b"\0" * (1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(z) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(z) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(z) + c.flush(zlib.Z_FULL_FLUSH) == block  # the dictionary restarts each block
    data = first + block * (mib - 1) + c.flush()
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(z, crc)
    size = mib << 20
    local, central = bytearray(), bytearray()
    for i in range(entries):
        n = f"{name}{i}".encode()
        offset = len(local)
        local += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(data), size, len(n), 0) + n + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(data), size, len(n),
                               0, 0, 0, 0, 0, offset) + n
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, entries, entries, len(central), len(local), 0)
    path.write_bytes(bytes(local + central + eocd))
    return path


def _snapshot(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple]:
    """Every entry under root, never following or opening anything but regular files:
    (type and mode, size, mtime_ns, sha256 of regular files)."""
    out: dict[str, tuple] = {}
    skip_s = {os.fspath(p) for p in skip}
    stack = [os.fspath(root)]
    while stack:
        here = stack.pop()
        for e in os.scandir(here):
            if e.path in skip_s or any(e.path.startswith(s + ".") for s in skip_s):  # DIR and DIR.tmp-*
                continue
            st = e.stat(follow_symlinks=False)
            digest = None
            if stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(Path(e.path).read_bytes()).hexdigest()
            elif stat.S_ISDIR(st.st_mode):
                stack.append(e.path)
            out[os.path.relpath(e.path, root)] = (st.st_mode, st.st_size if digest else None, st.st_mtime_ns, digest)
    return out


def _lines(text: str, token: str) -> list[str]:
    return [ln for ln in text.splitlines() if token in ln]


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# ---------------------------------------------------------------- archives, function level

@pytest.mark.parametrize("mode,suffix", [("w:gz", ".tar.gz"), ("w", ".tar"), ("w:xz", ".tar.xz")])
def test_hostile_tar_entries_refused_and_the_rest_extracted(tmp_path, caplog, mode, suffix):
    entries, hostile = _hostile_tar_entries(tmp_path, "t")
    arc = _tar(tmp_path / f"evil{suffix}", entries, mode)
    dest = tmp_path / "out" / "_work"
    before = _snapshot(tmp_path)
    with caplog.at_level(logging.WARNING, logger="jobs"):
        problems = extract(arc, dest)
    assert _snapshot(tmp_path, skip=(tmp_path / "out",)) == before, "written outside the extraction root"
    assert not (tmp_path / "escape").exists() and not (tmp_path.parent / "escape-t").exists()
    assert not (tmp_path / "out" / "up-t").exists()

    by_entry = {p.path.split("/", 1)[1]: p for p in problems}
    assert set(by_entry) == set(hostile), problems
    for name, word in hostile.items():
        assert word in by_entry[name].detail, by_entry[name]
        assert by_entry[name].kind == "unsafe_archive_entry"
        assert len([w for w in _warnings(caplog) if repr(name) in w]) == 1, f"one warning line for {name!r}"
    assert all("\n" not in w for w in _warnings(caplog))

    ok = dest / "ok"
    assert (ok / "good.txt").read_bytes() == b"good"
    assert (ok / "-rf").read_bytes() == b"not an option"
    assert (ok / "new\nline").read_bytes() == b"newline"
    assert (Path(os.fsdecode(os.fsencode(ok) + b"/bad\xffbyte"))).read_bytes() == b"not utf-8"
    assert (ok / Path(*["d"] * 200) / "bottom").read_bytes() == b"deep"
    for link in ("hard-in", "sym-in"):  # links inside the root become copies, never links
        assert (ok / link).read_bytes() == b"good" and not (ok / link).is_symlink()
    # an archive inside the archive is unpacked into a folder of its name (tests/test_archives.py)
    assert (ok / "inner.tar.gz" / "x" / "meta.properties").read_bytes() == b"broker.id=9\n"
    # nothing special was created on disk
    kinds = {stat.S_IFMT(os.lstat(os.path.join(d, n)).st_mode) for d, ds, fs in os.walk(dest) for n in ds + fs}
    assert kinds <= {stat.S_IFREG, stat.S_IFDIR}


def test_hostile_zip_entries_refused(tmp_path, caplog):
    arc = tmp_path / "evil.zip"
    with zipfile.ZipFile(arc, "w") as zf:
        zf.writestr("../escape-z", b"no")
        zf.writestr(f"{tmp_path}/escape/abs-z", b"no")
        zf.writestr("..\\..\\win-z", b"no")
        link = zipfile.ZipInfo("ok/sym-z")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, f"{tmp_path}/escape")
        fifo = zipfile.ZipInfo("ok/fifo-z")
        fifo.external_attr = (stat.S_IFIFO | 0o644) << 16
        zf.writestr(fifo, b"")
        zf.writestr("ok/" + "L" * 300, b"long")
        zf.writestr("ok/good.txt", b"good")
    before = _snapshot(tmp_path)
    with caplog.at_level(logging.WARNING, logger="jobs"):
        problems = extract(arc, tmp_path / "out")
    assert _snapshot(tmp_path, skip=(tmp_path / "out",)) == before
    assert not (tmp_path / "escape").exists() and not (tmp_path.parent / "escape-z").exists()
    refused = {p.path.split("/", 1)[1]: p.detail for p in problems}
    assert set(refused) == {"../escape-z", f"{tmp_path}/escape/abs-z", "..\\..\\win-z", "ok/sym-z", "ok/fifo-z", "ok/" + "L" * 300}
    assert "cannot be written" in refused["ok/" + "L" * 300]
    assert (tmp_path / "out" / "ok" / "good.txt").read_bytes() == b"good"
    assert not (tmp_path / "out" / "ok" / "sym-z").exists()
    for name in refused:
        assert len([w for w in _warnings(caplog) if repr(name) in w]) == 1


def test_gzip_tar_bomb_refused_from_its_header(tmp_path):
    """16 GiB of zeros in 16 MiB: refused by the ratio bound before a byte is inflated."""
    arc = _gzip_bomb_tar(tmp_path / "bomb.tar.gz", "zeros", 16 << 30)
    assert arc.stat().st_size < (32 << 20) and (16 << 30) > archives.RATIO_FLOOR
    free = shutil.disk_usage(tmp_path).free
    t = time.monotonic()
    with pytest.raises(ArchiveError) as err:
        extract(arc, tmp_path / "out" / "w")
    assert time.monotonic() - t < 5, "the bomb was inflated"
    assert err.value.kind == "unsafe_archive_entry" and "decompression bomb" in str(err.value)
    assert "zeros" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "out" / "w").exists(), "a refused archive leaves nothing behind"
    assert shutil.disk_usage(tmp_path).free > free - (64 << 20)


def test_gzip_tar_bomb_behind_a_refused_entry_is_not_inflated_to_skip_it(tmp_path):
    """A bomb named ``../x`` is refused by name, but skipping it would still inflate it: the
    bound counts it anyway."""
    arc = _gzip_bomb_tar(tmp_path / "bomb2.tar.gz", "../zeros", 16 << 30)
    t = time.monotonic()
    with pytest.raises(ArchiveError):
        extract(arc, tmp_path / "w")
    assert time.monotonic() - t < 5


def test_zip_bomb_refused_from_its_central_directory(tmp_path):
    arc = _zip_bomb(tmp_path / "bomb.zip", "zeros", 1100, entries=8)  # 8.6 GiB in ~9 MiB
    assert arc.stat().st_size < (12 << 20) and (8800 << 20) > archives.RATIO_FLOOR
    with zipfile.ZipFile(arc) as zf:  # a valid zip: the first MiB inflates to zeros
        with zf.open("zeros0") as f:
            assert f.read(1 << 20) == b"\0" * (1 << 20)
    t = time.monotonic()
    with pytest.raises(ArchiveError) as err:
        extract(arc, tmp_path / "w")
    assert time.monotonic() - t < 5
    assert err.value.kind == "unsafe_archive_entry" and "decompression bomb" in str(err.value)
    assert not (tmp_path / "w").exists()


def test_zip_declaring_less_than_it_inflates_is_cut_at_the_declared_size(tmp_path):
    arc = _zip_bomb(tmp_path / "liar.zip", "zeros", 8)
    raw = bytearray(arc.read_bytes())
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):  # declare 1 KiB instead of 8 MiB
        at = raw.index(sig)
        off = at + (22 if sig == b"PK\x03\x04" else 24)
        raw[off:off + 4] = struct.pack("<I", 1024)
    arc.write_bytes(bytes(raw))
    problems = extract(arc, tmp_path / "w")
    out = tmp_path / "w" / "zeros0"
    assert not out.exists() or out.stat().st_size <= 1024
    assert [p.kind for p in problems] == ["unreadable_file"]  # zipfile: CRC mismatch at the cut


def test_preallocated_zero_indexes_are_extracted_as_holes(tmp_path):
    """Not a bomb: a crashed broker's active segment keeps its 10 MiB preallocated ``.index`` and
    ``.timeindex``, mostly zeros. They unpack byte for byte, and cost (almost) no disk."""
    index = b"\0\0\0\1\0\0\0\2" + b"\0" * ((10 << 20) - 8)
    arc = _tar(tmp_path / "crashed.tar.gz", [(_info("b/t-0/00000000000000000000.index"), index),
                                             (_info("b/t-0/00000000000000000000.timeindex"), b"\0" * (10 << 20))])
    assert extract(arc, tmp_path / "w") == []
    for name, data in (("00000000000000000000.index", index), ("00000000000000000000.timeindex", b"\0" * (10 << 20))):
        out = tmp_path / "w" / "b" / "t-0" / name
        assert out.read_bytes() == data
        assert out.stat().st_blocks * 512 <= (2 << 20), f"{name}: zeros written, not holes"


def test_tar_header_declaring_huge_size_with_short_body(tmp_path):
    # 1 TB declared (GNU base-256 size field), 10 bytes of body: refused by the bound at once
    huge = tmp_path / "huge.tar"
    info = _info("big.log", size=1 << 40)
    huge.write_bytes(info.tobuf(tarfile.GNU_FORMAT) + b"0123456789")
    with pytest.raises(ArchiveError) as err:
        extract(huge, tmp_path / "w1")
    assert err.value.kind == "unsafe_archive_entry" and "big.log" in str(err.value)
    # 100 KB declared (under every bound), 10 bytes of body: a truncated archive, the good entry
    # before it kept, one problem row
    short = tmp_path / "short.tar"
    good = _info("good.txt", size=4).tobuf(tarfile.GNU_FORMAT) + b"good".ljust(512, b"\0")
    short.write_bytes(good + _info("cut.log", size=100_000).tobuf(tarfile.GNU_FORMAT) + b"0123456789")
    problems = extract(short, tmp_path / "w2")
    assert (tmp_path / "w2" / "good.txt").read_bytes() == b"good"
    assert [(p.kind, p.path) for p in problems] == [("unreadable_file", "short.tar")]
    assert "truncated" in problems[0].detail


def test_tar_long_name_header_declaring_huge_size_is_not_read_into_memory(tmp_path):
    """A GNU long-name header is read whole by tarfile; one declaring 1 GiB is refused unread."""
    arc = tmp_path / "longlink.tar.gz"
    link = _info("././@LongLink", tarfile.GNUTYPE_LONGNAME, size=1 << 30).tobuf(tarfile.GNU_FORMAT)
    link = link[:512]  # the header block alone (tobuf pads nothing for a zero-length name)
    arc.write_bytes(gzip.compress(_info("good.txt", size=4).tobuf(tarfile.GNU_FORMAT) + b"good".ljust(512, b"\0") + link
                                  + b"\0" * 4096))
    problems = extract(arc, tmp_path / "w")
    assert (tmp_path / "w" / "good.txt").read_bytes() == b"good"
    assert [p.kind for p in problems] == ["unreadable_file"]
    assert "header asks to read" in problems[0].detail


def test_hard_links_multiplying_a_file_count_against_the_byte_bound(tmp_path):
    entries = [(_info("big"), b"\1" * (1 << 20))] + [(_info(f"h{i}", tarfile.LNKTYPE, link="big"), None) for i in range(100)]
    arc = _tar(tmp_path / "links.tar.gz", entries)
    with pytest.raises(ArchiveError) as err:
        extract(arc, tmp_path / "w", max_bytes=20 << 20)
    assert err.value.kind == "unsafe_archive_entry"
    assert not (tmp_path / "w").exists()


def test_too_many_entries(tmp_path):
    arc = _tar(tmp_path / "many.tar.gz", [(_info(f"f{i}"), b"") for i in range(60)])
    with pytest.raises(ArchiveError) as err:
        extract(arc, tmp_path / "w", max_entries=50)
    assert err.value.kind == "unsafe_archive_entry" and "more than 50 entries" in str(err.value)
    assert not (tmp_path / "w").exists()
    assert extract(arc, tmp_path / "w2", max_entries=60) == []


@pytest.mark.parametrize("name,content", [
    ("empty.tar.gz", b""), ("empty.zip", b""), ("empty.tar", b""),
    ("garbage.tar.gz", os.urandom(4096)), ("garbage.tgz", b"\x1f\x8b" + os.urandom(4096)),
    ("garbage.tar.xz", b"\xfd7zXZ\x00" + os.urandom(4096)), ("garbage.zip", b"PK\x03\x04" + os.urandom(4096)),
])
def test_empty_and_garbage_archives_are_one_clear_error(tmp_path, name, content):
    arc = tmp_path / name
    arc.write_bytes(content)
    with pytest.raises(ArchiveError) as err:
        extract(arc, tmp_path / "w")
    assert name in str(err.value) and "\n" not in str(err.value)
    assert err.value.kind == "unreadable_file"
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("mode,suffix", [("w:gz", ".tar.gz"), ("w:xz", ".tar.xz")])
def test_truncated_compressed_tar_keeps_what_came_before(tmp_path, mode, suffix):
    full = _tar(tmp_path / f"full{suffix}", [(_info("a/one"), b"1" * 100)] + [(_info(f"a/r{i}"), os.urandom(50_000)) for i in range(20)], mode)
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    problems = extract(cut, tmp_path / "w")
    assert (tmp_path / "w" / "a" / "one").read_bytes() == b"1" * 100
    assert [p.kind for p in problems] == ["unreadable_file"] and "truncated" in problems[0].detail


# ---------------------------------------------------------------- directory inputs, discovery

def _broker_copy(dst: Path) -> Path:
    shutil.copytree(CF / "broker-1", dst, symlinks=True)
    return dst


def test_directory_input_links_fifos_devices_and_odd_names(tmp_path, caplog):
    case = tmp_path / "case"
    b = _broker_copy(case / "broker-1")
    want: dict[str, str] = {}  # path relative to the root -> detail word
    (b / "cf-0" / "00000000000000099999.log").symlink_to("/etc/passwd")
    want["broker-1/cf-0/00000000000000099999.log"] = "symbolic link (to '/etc/passwd')"
    (b / "cf-0" / "loop-a").symlink_to(b / "cf-0" / "loop-b")
    (b / "cf-0" / "loop-b").symlink_to(b / "cf-0" / "loop-a")
    want["broker-1/cf-0/loop-a"] = want["broker-1/cf-0/loop-b"] = "symbolic link"
    (b / "cf-0" / "outside").symlink_to(tmp_path, target_is_directory=True)
    want["broker-1/cf-0/outside"] = "symbolic link"
    os.mkfifo(b / "cf-1" / "00000000000000088888.log")
    want["broker-1/cf-1/00000000000000088888.log"] = "fifo"
    os.mkfifo(b / "cf-1" / "00000000000000088888.index")
    want["broker-1/cf-1/00000000000000088888.index"] = "fifo"
    (b / "cf-2" / "00000000000000077777.log").mkdir()
    (b / "cf-2" / "00000000000000077777.log" / "00000000000000000000.log").write_bytes(b"hidden")
    want["broker-1/cf-2/00000000000000077777.log"] = "folder named like a Kafka file"
    with open(os.fsencode(b / "cf-2") + b"/bad\xffname.log", "wb") as f:
        f.write(b"x")
    want["broker-1/cf-2/bad\\xffname.log"] = "not valid UTF-8"
    if IS_ROOT:  # only root may make device nodes
        os.mknod(b / "cf-2" / "00000000000000066666.log", stat.S_IFCHR | 0o600, os.makedev(1, 3))
        want["broker-1/cf-2/00000000000000066666.log"] = "character device"
    (b / "cf-2" / "new\nline.log").write_bytes(b"")  # odd but valid UTF-8: read like any file
    (b / "-rf").write_bytes(b"")
    # outside any log dir: a link to /etc is reported too, never followed
    (case / "etc-link").symlink_to("/etc", target_is_directory=True)
    want["case/etc-link"] = "symbolic link"

    t = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="jobs"):
        found = discover([Root(case, "")])
    assert time.monotonic() - t < 30
    assert [x.broker for x in found.brokers] == [1]
    got = {p.path: p for p in found.problems}
    assert set(got) == set(want), got
    for path, word in want.items():
        assert got[path].kind == "unreadable_file" and word in got[path].detail, got[path]
        assert len([w for w in _warnings(caplog) if repr(path) in w]) == 1, path
    assert len(_warnings(caplog)) == len(want), "one line per skipped entry"
    paths = {f.path for f in found.files}
    assert not any(p in paths for p in want)
    assert "broker-1/cf-2/new\nline.log" in paths and "broker-1/-rf" in paths
    assert not any("00000000000000077777.log/" in p for p in paths), "a segment-named folder is not descended into"
    assert {f.path for f in discover([Root(CF / "broker-1", "broker-1")]).files} <= paths, "the real files are all still there"


def test_meta_properties_symlink_is_not_read(tmp_path):
    b = _broker_copy(tmp_path / "broker-7")
    (b / "meta.properties").unlink()
    os.mkfifo(tmp_path / "fifo")
    (b / "meta.properties").symlink_to(tmp_path / "fifo")  # reading it would block forever
    found = discover([Root(tmp_path, "")])
    assert [(x.broker, x.id_source) for x in found.brokers] == [(7, "folder")]
    assert any(p.path == "broker-7/meta.properties" and "symbolic link" in p.detail for p in found.problems)


def test_deep_nesting_does_not_hit_the_recursion_limit(tmp_path):
    deep = tmp_path
    for _ in range(1200):  # Python 3.11's os.walk (and os.makedirs, shutil.rmtree) recurse once per level
        deep = deep / "d"
        deep.mkdir()
    shutil.copytree(CF / "broker-1", deep / "broker-1")
    assert sys.getrecursionlimit() < 1300
    try:
        lds = find_log_dirs(Root(tmp_path, ""))
        assert [ld.rel.rsplit("/", 1)[-1] for ld in lds] == ["broker-1"] and lds[0].rel.count("/") == 1200
    finally:
        shutil.rmtree(deep / "broker-1")
        while deep != tmp_path:  # bottom up: pytest's recursive cleanup would overflow too
            deep.rmdir()
            deep = deep.parent


def test_unreadable_file(tmp_path, caplog):
    """Permission denied is one line and a problem row. Root reads anything (chmod 000 does not
    stop it), so as root the file is read like any other; either way a file that disappears
    between discovery and parsing is a problem row naming it, not a crash."""
    from jobs.ingest.tasks import parse_file

    b = _broker_copy(tmp_path / "broker-1")
    seg = b / "cf-0" / "00000000000000000000.log"
    seg.chmod(0)
    with caplog.at_level(logging.WARNING, logger="jobs"):
        found = discover([Root(tmp_path, "")])
    paths = {f.path: f for f in found.files}
    if IS_ROOT:
        assert "broker-1/cf-0/00000000000000000000.log" in paths and found.problems == []
    else:
        assert "broker-1/cf-0/00000000000000000000.log" not in paths
        assert [(p.path, p.kind, p.detail) for p in found.problems] == [
            ("broker-1/cf-0/00000000000000000000.log", "unreadable_file", "skipped: permission denied")]
        assert len([w for w in _warnings(caplog) if "00000000000000000000.log" in w]) == 1
    seg.chmod(0o644)
    gone = paths["broker-1/cf-1/00000000000000000000.log"]
    os.unlink(gone.abs_path)
    pieces = dict(parse_file(asdict(gone)))
    prob = pieces["problems"].to_pylist()
    assert [(p["path"], p["kind"]) for p in prob] == [("broker-1/cf-1/00000000000000000000.log", "unreadable_file")]
    assert "FileNotFoundError" in prob[0]["detail"]
    assert pieces["files"].to_pylist()[0]["sha256"] is None


# ---------------------------------------------------------------- end to end: one analyze run

def test_analyze_cli_over_many_hostile_inputs_at_once(tmp_path):
    """One ``analyze`` over a directory full of odd files and seven hostile archives: exit 0/1
    (not 2), findings naming every refused entry, one stderr line each, no traceback, nothing
    written outside --out (the working directory included), brokers 1 and 2 still analyzed."""
    signal.alarm(900)
    case = tmp_path / "case"
    b1 = _broker_copy(case / "broker-1")
    (b1 / "cf-0" / "00000000000000099999.log").symlink_to("/etc/passwd")
    (case / "loop-a").symlink_to(case / "loop-b")
    (case / "loop-b").symlink_to(case / "loop-a")
    os.mkfifo(b1 / "cf-1" / "00000000000000088888.log")
    (b1 / "cf-2" / "00000000000000077777.log").mkdir()
    with open(os.fsencode(b1 / "cf-2") + b"/bad\xffname.log", "wb") as f:
        f.write(b"x")
    (case / Path(*["n"] * 200)).mkdir(parents=True)
    (b1 / "-rf").write_bytes(b"")
    if not IS_ROOT:
        (b1 / "cf-0" / "00000000000000055555.log").write_bytes(b"secret")
        (b1 / "cf-0" / "00000000000000055555.log").chmod(0)
    entries, hostile = _hostile_tar_entries(tmp_path, "e2e")
    entries += [(_info(f"broker-2/{p.relative_to(CF / 'broker-2').as_posix()}"), p.read_bytes())
                for p in sorted((CF / "broker-2").rglob("*")) if p.is_file()]
    arcs = [
        _tar(tmp_path / "evil.tar.gz", entries),
        _gzip_bomb_tar(tmp_path / "bomb.tar.gz", "zeros", 16 << 30),
        _zip_bomb(tmp_path / "bomb.zip", "zeros", 1100, entries=8),
        tmp_path / "garbage.tar.gz",
        tmp_path / "empty.tgz",
    ]
    arcs[3].write_bytes(os.urandom(2048))
    arcs[4].write_bytes(b"")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    out = tmp_path / "out"
    before = _snapshot(tmp_path)
    passwd = os.stat("/etc/passwd")

    run = subprocess.run([*CLI, "analyze", str(case), *map(str, arcs), "--out", str(out), "--format", "json"],
                         capture_output=True, text=True, timeout=900, cwd=cwd)
    assert run.returncode in (0, 1), run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout
    doc = json.loads(run.stdout)
    assert {1, 2} <= set(doc["input"]["brokers"])

    after = _snapshot(tmp_path, skip=(out,))
    assert after == before, f"written outside --out: {sorted(set(after) ^ set(before))[:10]}"
    assert not (tmp_path / "escape").exists() and not (tmp_path.parent / "escape-e2e").exists()
    assert os.stat("/etc/passwd").st_mtime_ns == passwd.st_mtime_ns
    assert not list(tmp_path.glob("out.*")), "staging siblings left behind"

    evidence = [(f["kind"], e["path"], e["detail"]) for f in doc["findings"] for e in f["evidence"]
                if f["kind"] in ("unsafe_archive_entry", "unreadable_file")]

    def named(path: str, kind: str, word: str = "") -> None:
        hits = [ev for ev in evidence if ev[1] == path and ev[0] == kind and word in ev[2]]
        assert len(hits) == 1, (path, kind, [ev for ev in evidence if path.split("/")[-1] in (ev[1] or "")])

    for name in hostile:
        named(f"evil.tar.gz/{name}", "unsafe_archive_entry")
        assert len(_lines(run.stderr, repr(name))) == 1, name
    named("bomb.tar.gz", "unsafe_archive_entry", "decompression bomb")
    named("bomb.zip", "unsafe_archive_entry", "decompression bomb")
    named("garbage.tar.gz", "unreadable_file", "cannot open")
    named("empty.tgz", "unreadable_file", "cannot open")
    for arc in ("bomb.tar.gz", "bomb.zip", "garbage.tar.gz", "empty.tgz"):
        assert len(_lines(run.stderr, f"{arc}: ")) == 1, arc
    dir_cases = {"case/broker-1/cf-0/00000000000000099999.log": "symbolic link",
                 "case/loop-a": "symbolic link", "case/loop-b": "symbolic link",
                 "case/broker-1/cf-1/00000000000000088888.log": "fifo",
                 "case/broker-1/cf-2/00000000000000077777.log": "folder named like",
                 "case/broker-1/cf-2/bad\\xffname.log": "UTF-8"}
    if not IS_ROOT:
        dir_cases["case/broker-1/cf-0/00000000000000055555.log"] = "permission denied"
    for path, word in dir_cases.items():
        named(path, "unreadable_file", word)
        assert len(_lines(run.stderr, repr(path))) == 1, path
    # the good data was analyzed: both brokers' segments are in the files table with their hashes
    import pyarrow.dataset as ds

    files = ds.dataset(out / "tables" / "files", format="parquet", partitioning="hive").to_table().to_pylist()
    by_path = {f["path"]: f for f in files}
    for broker, prefix in ((1, "case/broker-1"), (2, "evil.tar.gz/broker-2")):
        seg = f"{prefix}/cf-0/00000000000000000000.log"
        assert by_path[seg]["sha256"] == hashlib.sha256((CF / f"broker-{broker}" / "cf-0" / "00000000000000000000.log").read_bytes()).hexdigest()


def test_analyze_cli_single_garbage_archive_is_one_line_and_exit_2(tmp_path):
    """Only input unusable: the contract's exit 2 with one line naming it, no DIR, no staging
    sibling, nothing else written."""
    signal.alarm(600)
    arc = tmp_path / "garbage.tar.gz"
    arc.write_bytes(b"\x1f\x8b" + os.urandom(1000))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    before = _snapshot(tmp_path)
    run = subprocess.run([*CLI, "analyze", str(arc), "--out", str(tmp_path / "out")], capture_output=True, text=True,
                         timeout=600, cwd=cwd)
    assert run.returncode == 2, run.stderr[-2000:]
    assert "Traceback" not in run.stderr + run.stdout
    named = _lines(run.stderr, "garbage.tar.gz")
    assert len(named) == 1 and named[0].startswith("kafka-forensics: ") and "cannot open archive" in named[0]
    assert _snapshot(tmp_path) == before, "nothing written: no DIR, no staging sibling, nothing in the working dir"
