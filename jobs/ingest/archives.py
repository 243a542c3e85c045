"""Safe extraction of collected archives (.tar, .tar.gz, .tgz, .tar.xz, .zip) into DIR's work area.

Why by hand and not ``extractall``: evidence archives come from elsewhere and may be hostile or
broken. Every entry is checked before a byte is written: no absolute path, no ``..``, no link
(symbolic or hard) whose target leaves the extraction root, no device, fifo or socket. A refused
entry becomes a problem row (``unsafe_archive_entry``), one warning line names it, and extraction
goes on; the archive itself is only ever read.

Bounds, so a hostile archive cannot exhaust disk, memory or time (a bound hit refuses the whole
archive: ``ArchiveError`` with ``kind="unsafe_archive_entry"``, its partial extraction removed):
- entries: at most ``MAX_ENTRIES`` (tar members are not kept in memory as they are read);
- bytes: the unpacked total (regular files plus the copies links become) stays under
  ``MAX_BYTES``, under ``MAX_RATIO`` times the archive's own size once past ``RATIO_FLOOR``
  (a decompression bomb), and under the free space of the work area less ``DISK_RESERVE``;
  sizes are checked from the headers *before* the data is inflated, so a bomb costs no time.
  The floor is high because crash evidence is legitimately full of zeros: Kafka preallocates
  each active segment's ``.index`` and ``.timeindex`` (10 MiB each by default) and trims them
  only on a clean roll or shutdown, so a crashed broker with 250 partitions (50 of them
  ``__consumer_offsets``) holds ~5 GiB of zeros that gzip packs 1000:1. Zero blocks are written
  as holes (sparse files), so they cost time to inflate but no disk;
- headers: tar reads a GNU long name or pax header whole into memory; a single read of more than
  ``MAX_HEADER_READ`` bytes (a header declaring a huge size) ends the archive as corrupt.
A genuine archive over a bound can be extracted by hand and its folder given as the input.
"""

from __future__ import annotations

import bz2
import errno
import gzip
import logging
import lzma
import os
import posixpath
import shutil
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path

log = logging.getLogger(__name__)

SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".zip")
MAX_ENTRIES = 1_000_000
MAX_BYTES = 1 << 40  # 1 TiB unpacked
MAX_RATIO = 200  # unpacked bytes per archive byte, above RATIO_FLOOR
RATIO_FLOOR = 8 << 30
DISK_RESERVE = 256 << 20
MAX_HEADER_READ = 16 << 20
_COPY = 1 << 20
# what reading a damaged compressed stream may raise besides OSError / TarError
_STREAM_ERRORS = (OSError, EOFError, tarfile.TarError, zlib.error, lzma.LZMAError, zipfile.BadZipFile)


class ArchiveError(ValueError):
    """The archive cannot be used at all (not readable, or over a bound); ``kind`` is the problem
    kind its row gets (``unreadable_file``, or ``unsafe_archive_entry`` for a bound)."""

    def __init__(self, message: str, kind: str = "unreadable_file"):
        super().__init__(message)
        self.kind = kind


def is_archive(path: Path) -> bool:
    name = Path(path).name.lower()
    return Path(path).is_file() and name.endswith(SUFFIXES)


def text(name: str) -> str:
    """A name as storable, printable text: undecodable bytes (``surrogateescape``) become ``\\xNN``
    (Arrow and Spark reject lone surrogates)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _safe_name(name: str) -> str | None:
    """The entry's path relative to the root, or None if it would land outside it."""
    name = name.replace("\\", "/")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return None
    norm = posixpath.normpath(name)
    if norm == "." or norm.startswith("../") or norm == ".." or "/../" in f"/{norm}/":
        return None
    return norm


def _is_root(name: str) -> bool:
    """``./`` (``tar -C dir .``) names the extraction root itself: nothing to do, nothing wrong."""
    return posixpath.normpath(name.replace("\\", "/")) == "."


def _problem(archive: Path, entry: str, detail: str, kind: str = "unsafe_archive_entry") -> dict:
    # repr: a name with a newline or odd bytes still makes one line
    log.warning("%s: entry %r refused: %s", archive.name, text(entry), detail)
    return {"path": text(f"{archive.name}/{entry}"), "position": 0, "kind": kind, "detail": detail}


class _Budget:
    """The byte and entry bounds of one archive (see the module docstring)."""

    def __init__(self, archive: Path, dest: Path, max_entries: int, max_bytes: int):
        self.archive, self.dest = archive, dest
        self.max_entries = max_entries
        size = archive.stat().st_size
        self.max_bytes = min(max_bytes, max(RATIO_FLOOR, MAX_RATIO * size))
        self.ratio_bound = self.max_bytes < max_bytes
        self.entries = self.bytes = 0

    def entry(self) -> None:
        self.entries += 1
        if self.entries > self.max_entries:
            raise ArchiveError(f"{self.archive}: more than {self.max_entries} entries; refused", "unsafe_archive_entry")

    def add(self, name: str, size: int, upfront: bool = False) -> None:
        """Count ``size`` more bytes; ``upfront``: sizes declared before anything is written (zip),
        so their running total must fit the free space, not each alone."""
        self.bytes += max(0, size)
        if self.bytes > self.max_bytes:
            why = (f"more than {MAX_RATIO} times its own size (a decompression bomb?)" if self.ratio_bound
                   else f"more than {self.max_bytes} bytes")
            raise ArchiveError(f"{self.archive}: unpacks to {why} at entry {name!r}; refused "
                               "(extract it by hand and give the folder if it is genuine)", "unsafe_archive_entry")
        free = shutil.disk_usage(self.dest).free
        if (self.bytes if upfront else size) > free - DISK_RESERVE:
            raise ArchiveError(f"{self.archive}: entry {name!r} ({size} bytes) does not fit in the free space "
                               f"of {self.dest} ({free} bytes); refused", "unsafe_archive_entry")


def extract(archive: Path, dest: Path, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> list[dict]:
    """Extract ``archive`` under ``dest`` (created), refusing unsafe entries; returns problem rows.

    Raises ``ArchiveError`` when the archive cannot be opened or exceeds a bound; ``dest`` is then
    removed, so nothing of a refused archive is analyzed."""
    archive = Path(archive)
    dest.mkdir(parents=True, exist_ok=True)
    try:
        budget = _Budget(archive, dest, max_entries, max_bytes)
        if archive.name.lower().endswith(".zip"):
            return _extract_zip(archive, dest, budget)
        return _extract_tar(archive, dest, budget)
    except ArchiveError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except OSError as exc:  # the archive itself cannot be read
        shutil.rmtree(dest, ignore_errors=True)
        raise ArchiveError(f"{archive}: cannot read archive: {exc}") from None


class _CappedReader:
    """A read-only file that refuses single reads over ``MAX_HEADER_READ`` (tarfile reads a long
    name or pax header in one call of the size the header declares)."""

    def __init__(self, f):
        self.f = f

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0 or n > MAX_HEADER_READ:
            raise tarfile.ReadError(f"a header asks to read {n} bytes at once (over {MAX_HEADER_READ})")
        return self.f.read(n)

    def seek(self, *args):
        return self.f.seek(*args)

    def tell(self) -> int:
        return self.f.tell()

    def close(self) -> None:
        self.f.close()


def _open_tar(archive: Path) -> tarfile.TarFile:
    """The tar inside ``archive`` (gzip, xz, bzip2 or none, told by magic bytes, not by name)."""
    raw = open(archive, "rb")  # noqa: SIM115 - closed through the TarFile
    magic = raw.read(6)
    raw.seek(0)
    if magic[:2] == b"\x1f\x8b":
        stream = gzip.GzipFile(fileobj=raw, mode="rb")
    elif magic == b"\xfd7zXZ\x00":
        stream = lzma.LZMAFile(raw)
    elif magic[:3] == b"BZh":
        stream = bz2.BZ2File(raw)
    else:
        stream = raw
    capped = _CappedReader(stream)
    try:
        tf = tarfile.open(fileobj=capped, mode="r:")
    except BaseException:
        stream.close()
        raw.close()
        raise
    tf._kf_raw = raw  # closed with it below
    return tf


def _copy_sparse(src, out) -> int:
    """Copy ``src`` to ``out`` writing all-zero blocks as holes; returns the bytes copied."""
    n = 0
    while chunk := src.read(_COPY):
        if chunk.count(0) == len(chunk):
            out.seek(len(chunk), os.SEEK_CUR)
        else:
            out.write(chunk)
        n += len(chunk)
    out.truncate(n)  # a trailing hole still sets the size
    return n


def _write_error(archive: Path, name: str, exc: OSError) -> dict:
    """One entry that cannot be written (name too long, a file where a folder should be...);
    a full disk is not per entry: it ends the archive."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        raise ArchiveError(f"{archive}: no space left while extracting {name!r}", "unsafe_archive_entry") from None
    return _problem(archive, name, f"cannot be written: {exc.strerror or exc}")


def _extract_tar(archive: Path, dest: Path, budget: _Budget) -> list[dict]:
    problems: list[dict] = []
    try:
        tf = _open_tar(archive)
    except _STREAM_ERRORS as exc:
        raise ArchiveError(f"{archive}: cannot open archive: {exc}") from None
    links: list[tuple[str, str, str]] = []
    with tf:
        try:
            while (member := tf.next()) is not None:
                tf.members.clear()  # tarfile keeps every header read; a million entries would stay in memory
                budget.entry()
                # every byte of data is inflated, even to skip a refused entry: count it before
                if member.isreg() or member.type not in tarfile.SUPPORTED_TYPES:
                    budget.add(member.name, member.size)
                if _is_root(member.name):
                    continue
                rel = _safe_name(member.name)
                if rel is None:
                    problems.append(_problem(archive, member.name, "entry path is absolute or climbs out of the archive root"))
                    continue
                target = dest / rel
                try:
                    if member.isdir():
                        target.mkdir(parents=True, exist_ok=True)
                    elif member.isfile():
                        target.parent.mkdir(parents=True, exist_ok=True)
                        src = tf.extractfile(member)
                        with src, open(target, "wb") as out:
                            _copy_sparse(src, out)
                        os.utime(target, (member.mtime, member.mtime))
                        _nested_archive_note(archive, member.name)
                    elif member.issym() or member.islnk():
                        # a symlink is relative to its own folder, a hard link to the archive root
                        base = posixpath.dirname(rel) if member.issym() else ""
                        link = member.linkname.replace("\\", "/")
                        resolved = None if link.startswith("/") else _safe_name(posixpath.join(base, link))
                        if resolved is None:
                            problems.append(_problem(archive, member.name, f"link to {member.linkname!r} leaves the archive root"))
                            continue
                        links.append((member.name, rel, resolved))
                    else:
                        problems.append(_problem(archive, member.name, "device, fifo or other special file refused"))
                except OSError as exc:
                    if exc.errno is None:  # the stream, not the disk (gzip.BadGzipFile)
                        raise
                    problems.append(_write_error(archive, member.name, exc))
        except ArchiveError:
            raise
        except _STREAM_ERRORS as exc:
            log.warning("%s: archive truncated or corrupt, the rest is not read: %s", archive.name, exc)
            problems.append({"path": text(archive.name), "position": 0, "kind": "unreadable_file",
                             "detail": f"archive truncated or corrupt: {exc}"})
        finally:
            tf._kf_raw.close()
    # links become copies of regular files already extracted (never links on disk); the copies
    # count against the byte bound (a thousand hard links to one big file are a bomb too)
    for name, rel, resolved in links:
        src = dest / resolved
        if src.is_file() and not src.is_symlink():
            budget.add(name, src.stat().st_size)
            try:
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / rel)
            except OSError as exc:
                problems.append(_write_error(archive, name, exc))
        else:
            problems.append(_problem(archive, name, f"link target {resolved!r} is not a regular file in the archive"))
    return problems


def _nested_archive_note(archive: Path, name: str) -> None:
    """Archives inside archives are not opened (one level only: no recursion to bound)."""
    if name.lower().endswith(SUFFIXES):
        log.warning("%s: entry %r is an archive inside the archive; it is not unpacked (extract it by hand to analyze it)",
                    archive.name, text(name))


def _extract_zip(archive: Path, dest: Path, budget: _Budget) -> list[dict]:
    problems: list[dict] = []
    try:
        zf = zipfile.ZipFile(archive)
    except (*_STREAM_ERRORS, ValueError) as exc:
        raise ArchiveError(f"{archive}: cannot open archive: {exc}") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > budget.max_entries:
            raise ArchiveError(f"{archive}: more than {budget.max_entries} entries; refused", "unsafe_archive_entry")
        for info in infos:  # the declared sizes, all checked before anything is inflated
            budget.add(info.filename, info.file_size, upfront=True)
        for info in infos:
            if _is_root(info.filename):
                continue
            rel = _safe_name(info.filename)
            if rel is None:
                problems.append(_problem(archive, info.filename, "entry path is absolute or climbs out of the archive root"))
                continue
            mode = info.external_attr >> 16
            if mode and (stat.S_ISLNK(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
                problems.append(_problem(archive, info.filename, "link or special file refused"))
                continue
            target = dest / rel
            try:
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as out:
                    _copy_sparse(src, out)  # zipfile stops at the declared size and checks the CRC
                _nested_archive_note(archive, info.filename)
            except ArchiveError:
                raise
            except (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError, RuntimeError) as exc:
                problems.append(_problem(archive, info.filename, f"cannot be read: {exc}", "unreadable_file"))
            except OSError as exc:
                if exc.errno is None:
                    problems.append(_problem(archive, info.filename, f"cannot be read: {exc}", "unreadable_file"))
                else:
                    problems.append(_write_error(archive, info.filename, exc))
    return problems
