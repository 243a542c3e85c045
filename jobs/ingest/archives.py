"""Safe extraction of collected archives (.tar, .tar.gz, .tgz, .tar.xz, .zip) into DIR's work area.

Why by hand and not ``extractall``: evidence archives come from elsewhere and may be hostile or
broken. Every entry is checked before a byte is written: no absolute path, no ``..``, no link
(symbolic or hard) whose target leaves the extraction root, no device, fifo or socket. A refused
entry becomes a problem row (``unsafe_archive_entry``), one warning line names it, and extraction
goes on; the archive itself is only ever read.

Support bundles nest (``incident.tar.gz`` holding ``broker-1.tar.gz``, ``broker-2.zip`` ...): an
archive found inside (any of ``SUFFIXES``, or a plain ``.gz`` of one file) is unpacked in turn into
a folder of its own name (``incident.tar.gz/broker-1.tar.gz/...``), with the same refusals, down to
``MAX_DEPTH`` levels counting the outermost; deeper ones stay packed (a problem row says so).
Gzipped broker logs (``server.log.1.gz``) are read gzipped and left alone. All levels share one
budget: the entries and bytes of every level count against the bounds below, and the ratio is to
the outermost archive's size.

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from jobs.errors import InputError
from parsers.common import Problem
from parsers.files import detect

log = logging.getLogger(__name__)

SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".zip")
MAX_ENTRIES = 1_000_000
MAX_BYTES = 1 << 40  # 1 TiB unpacked
MAX_RATIO = 200  # unpacked bytes per archive byte, above RATIO_FLOOR
RATIO_FLOOR = 8 << 30
DISK_RESERVE = 256 << 20
MAX_HEADER_READ = 16 << 20
MAX_DEPTH = 3  # archive levels unpacked, the outermost included
_UNPACKING = ".kf-unpacking"  # suffix of the folder a nested archive is unpacked into before it takes its name
_COPY = 1 << 20
# what reading a damaged compressed stream may raise besides OSError / TarError
_STREAM_ERRORS = (OSError, EOFError, tarfile.TarError, zlib.error, lzma.LZMAError, zipfile.BadZipFile)


class ArchiveError(InputError, ValueError):
    """The archive cannot be used at all (not readable, or over a bound); ``kind`` is the problem
    kind its row gets (``unreadable_file``, or ``unsafe_archive_entry`` for a bound)."""

    def __init__(self, message: str, kind: str = "unreadable_file"):
        super().__init__(message)
        self.kind = kind


def is_archive(path: Path) -> bool:
    name = Path(path).name.lower()
    return Path(path).is_file() and name.endswith(SUFFIXES)


def printable_name(name: str) -> str:
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


@dataclass(frozen=True)
class _Source:
    """One archive being unpacked: the file read, and how rows and messages name it. ``opener``:
    how to read it when it is not a local file (an object on a store: ``stores.open_stream``)."""

    path: Path
    shown: str  # relative to the input root: "incident.tar.gz" or "incident.tar.gz/broker-1.zip"
    said: str  # in messages: the input path (or URL) for the outermost, ``shown`` below it
    opener: Callable[[], BinaryIO] | None = None

    @classmethod
    def outermost(cls, path: Path, opener: Callable[[], BinaryIO] | None = None, said: str | None = None) -> _Source:
        return cls(path, path.name, said or str(path), opener)

    def inner(self, path: Path, rel: str) -> _Source:
        shown = f"{self.shown}/{rel}"
        return _Source(path, shown, shown)

    def open(self) -> BinaryIO:
        """The archive's bytes from the start, as a seekable binary file."""
        return self.opener() if self.opener is not None else open(self.path, "rb")  # noqa: SIM115 - the caller closes it


def _problem(src: _Source, entry: str, detail: str, kind: str = "unsafe_archive_entry") -> Problem:
    # repr: a name with a newline or odd bytes still makes one line
    log.warning("%s: entry %r refused: %s", printable_name(src.shown), printable_name(entry), detail)
    return Problem(0, kind, detail, printable_name(f"{src.shown}/{entry}"))


class _Budget:
    """The byte and entry bounds of one archive and every archive inside it (see the module
    docstring); ``archive`` names the one being unpacked, for the messages."""

    def __init__(self, archive: str, size: int, dest: Path, max_entries: int, max_bytes: int):
        self.archive, self.dest = archive, dest
        self.max_entries = max_entries
        self.max_bytes = min(max_bytes, max(RATIO_FLOOR, MAX_RATIO * size))
        self.ratio_bound = self.max_bytes < max_bytes
        self.entries = self.bytes = 0
        self.upfront_from = 0  # bytes counted before the current zip's declared sizes

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
        if (self.bytes - self.upfront_from if upfront else size) > free - DISK_RESERVE:
            raise ArchiveError(f"{self.archive}: entry {name!r} ({size} bytes) does not fit in the free space "
                               f"of {self.dest} ({free} bytes); refused", "unsafe_archive_entry")


def extract(archive: Path, dest: Path, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES,
            max_depth: int = MAX_DEPTH, opener: Callable[[], BinaryIO] | None = None, size: int | None = None,
            said: str | None = None) -> list[dict]:
    """Extract ``archive`` under ``dest`` (created), and the archives inside it down to
    ``max_depth`` levels, refusing unsafe entries; returns problem rows. An archive that is not a
    local file (an object on a store) comes with its ``opener``, ``size`` and the URL messages
    name (``said``): it is streamed once, never copied whole first.

    Raises ``ArchiveError`` when the archive cannot be opened or exceeds a bound (at any level);
    ``dest`` is then removed, so nothing of a refused archive is analyzed."""
    archive = Path(archive) if opener is None else archive
    dest.mkdir(parents=True, exist_ok=True)
    src = _Source.outermost(archive, opener, said)
    try:
        budget = _Budget(src.said, archive.stat().st_size if size is None else size, dest, max_entries, max_bytes)
        problems = _extract_one(src, dest, budget)
        return problems + _extract_nested(src, dest, budget, 2, max_depth)
    except ArchiveError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except OSError as exc:  # the archive itself cannot be read
        shutil.rmtree(dest, ignore_errors=True)
        raise ArchiveError(f"{src.said}: cannot read archive: {exc}") from None


def _extract_one(src: _Source, dest: Path, budget: _Budget) -> list[dict]:
    """One archive's own entries (not those of archives inside it) into ``dest``."""
    budget.archive = src.said
    dest.mkdir(parents=True, exist_ok=True)
    name = src.path.name.lower()
    if name.endswith(".zip"):
        return _extract_zip(src, dest, budget)
    if name.endswith(".gz") and not name.endswith((".tar.gz", ".tgz")) and not _holds_tar(src):
        return _gunzip(src, dest, budget)
    return _extract_tar(src, dest, budget)


def nested_kind(name: str) -> bool:
    """Whether a file found inside an archive is an archive to unpack in turn: any of
    ``SUFFIXES``, or a plain ``.gz`` that is not a broker log (those are read gzipped)."""
    lower = name.lower()
    if lower.endswith(SUFFIXES):
        return True
    return lower.endswith(".gz") and detect(name) != "broker_log"


def _files_under(root: Path) -> list[Path]:
    """The regular files under ``root``, found without recursion (3.11's ``os.walk`` recurses:
    an archive of a thousand nested folders would raise RecursionError) nor following links."""
    files: list[Path] = []
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    stack.append(Path(e.path))
                elif e.is_file(follow_symlinks=False):
                    files.append(Path(e.path))
    return files


def _holds_tar(src: _Source) -> bool:
    """Whether a ``.gz`` (by name a single file) holds a tar, by reading its first header (a
    file of zeros reads as an empty tar: it is a file)."""
    try:
        tf = _open_tar(src)
    except (*_STREAM_ERRORS, ValueError):
        return False
    try:
        return tf.next() is not None
    except (*_STREAM_ERRORS, ValueError):
        return False
    finally:
        tf._kf_raw.close()
        tf.close()


def _extract_nested(outer: _Source, root: Path, budget: _Budget, depth: int, max_depth: int) -> list[dict]:
    """Unpack every archive extracted under ``root`` (from ``outer``) into a folder of its name,
    then the archives inside those, down to ``max_depth``. An inner archive that cannot be read
    stays as it is, with a problem row; one over a bound refuses everything (``ArchiveError``)."""
    problems: list[Problem] = []
    for path in sorted(p for p in _files_under(root) if nested_kind(p.name)):
        rel = path.relative_to(root).as_posix()
        inner = outer.inner(path, rel)
        if depth > max_depth:
            problems.append(_problem(outer, rel, f"an archive nested more than {max_depth} levels deep; not unpacked "
                                                 "(extract it by hand to analyze it)", "unreadable_file"))
            continue
        into = path.with_name(path.name + _UNPACKING)
        try:
            got = _extract_one(inner, into, budget)
        except ArchiveError as exc:
            shutil.rmtree(into, ignore_errors=True)
            if exc.kind != "unreadable_file":
                raise
            log.warning("%s", exc)
            problems.append(Problem(0, exc.kind, str(exc), printable_name(inner.shown)))
            continue
        except OSError as exc:
            shutil.rmtree(into, ignore_errors=True)
            problems.append(Problem(0, "unreadable_file", f"cannot read archive: {exc}", printable_name(inner.shown)))
            continue
        path.unlink()
        into.rename(path)
        problems += got + _extract_nested(inner, path, budget, depth + 1, max_depth)
    return problems


def _gunzip(src: _Source, dest: Path, budget: _Budget) -> list[dict]:
    """A plain ``.gz`` of one file: the file, named without ``.gz``, into ``dest``. Its size is
    only known by inflating it, so the budget counts each block before it is written."""
    name = src.path.name[:-3]
    try:
        with src.open() as raw, gzip.GzipFile(fileobj=raw, mode="rb") as gz, open(dest / name, "wb") as out:
            _copy_sparse(gz, out, lambda n: budget.add(name, n))
    except _STREAM_ERRORS as exc:
        if isinstance(exc, OSError) and exc.errno is not None:  # the disk, not the stream
            return [_write_error(src, name, exc)]
        raise ArchiveError(f"{src.said}: cannot open archive: {exc}") from None
    return []


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


def _open_tar(src: _Source) -> tarfile.TarFile:
    """The tar inside ``src`` (gzip, xz, bzip2 or none, told by magic bytes, not by name)."""
    raw = src.open()  # (closed through the TarFile)
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


def _copy_sparse(src, out, count=None) -> int:
    """Copy ``src`` to ``out`` writing all-zero blocks as holes; returns the bytes copied.
    ``count(n)`` is told each block's size before it is written (a bound may refuse it)."""
    n = 0
    while chunk := src.read(_COPY):
        if count is not None:
            count(len(chunk))
        if chunk.count(0) == len(chunk):
            out.seek(len(chunk), os.SEEK_CUR)
        else:
            out.write(chunk)
        n += len(chunk)
    out.truncate(n)  # a trailing hole still sets the size
    return n


def _write_error(src: _Source, name: str, exc: OSError) -> dict:
    """One entry that cannot be written (name too long, a file where a folder should be...);
    a full disk is not per entry: it ends the archive."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        raise ArchiveError(f"{src.said}: no space left while extracting {name!r}", "unsafe_archive_entry") from None
    return _problem(src, name, f"cannot be written: {exc.strerror or exc}")


def _extract_tar(src: _Source, dest: Path, budget: _Budget) -> list[dict]:
    problems: list[Problem] = []
    try:
        tf = _open_tar(src)
    except _STREAM_ERRORS as exc:
        raise ArchiveError(f"{src.said}: cannot open archive: {exc}") from None
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
                    problems.append(_problem(src, member.name, "entry path is absolute or climbs out of the archive root"))
                    continue
                target = dest / rel
                try:
                    if member.isdir():
                        target.mkdir(parents=True, exist_ok=True)
                    elif member.isfile():
                        target.parent.mkdir(parents=True, exist_ok=True)
                        data = tf.extractfile(member)
                        with data, open(target, "wb") as out:
                            _copy_sparse(data, out)
                        os.utime(target, (member.mtime, member.mtime))
                    elif member.issym() or member.islnk():
                        # a symlink is relative to its own folder, a hard link to the archive root
                        base = posixpath.dirname(rel) if member.issym() else ""
                        link = member.linkname.replace("\\", "/")
                        resolved = None if link.startswith("/") else _safe_name(posixpath.join(base, link))
                        if resolved is None:
                            problems.append(_problem(src, member.name, f"link to {member.linkname!r} leaves the archive root"))
                            continue
                        links.append((member.name, rel, resolved))
                    else:
                        problems.append(_problem(src, member.name, "device, fifo or other special file refused"))
                except OSError as exc:
                    if exc.errno is None:  # the stream, not the disk (gzip.BadGzipFile)
                        raise
                    problems.append(_write_error(src, member.name, exc))
        except ArchiveError:
            raise
        except _STREAM_ERRORS as exc:
            log.warning("%s: archive truncated or corrupt, the rest is not read: %s", printable_name(src.shown), exc)
            problems.append(Problem(0, "unreadable_file", f"archive truncated or corrupt: {exc}", printable_name(src.shown)))
        finally:
            tf._kf_raw.close()
    # links become copies of regular files already extracted (never links on disk); the copies
    # count against the byte bound (a thousand hard links to one big file are a bomb too)
    for name, rel, resolved in links:
        copied = dest / resolved
        if copied.is_file() and not copied.is_symlink():
            budget.add(name, copied.stat().st_size)
            try:
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(copied, dest / rel)
            except OSError as exc:
                problems.append(_write_error(src, name, exc))
        else:
            problems.append(_problem(src, name, f"link target {resolved!r} is not a regular file in the archive"))
    return problems


def _extract_zip(src: _Source, dest: Path, budget: _Budget) -> list[dict]:
    problems: list[Problem] = []
    raw = src.open()
    try:
        zf = zipfile.ZipFile(raw)
    except (*_STREAM_ERRORS, ValueError) as exc:
        raw.close()
        raise ArchiveError(f"{src.said}: cannot open archive: {exc}") from None
    with raw, zf:
        infos = zf.infolist()
        if budget.entries + len(infos) > budget.max_entries:
            raise ArchiveError(f"{src.said}: more than {budget.max_entries} entries; refused", "unsafe_archive_entry")
        budget.entries += len(infos)
        budget.upfront_from = budget.bytes
        for info in infos:  # the declared sizes, all checked before anything is inflated
            budget.add(info.filename, info.file_size, upfront=True)
        for info in infos:
            if _is_root(info.filename):
                continue
            rel = _safe_name(info.filename)
            if rel is None:
                problems.append(_problem(src, info.filename, "entry path is absolute or climbs out of the archive root"))
                continue
            mode = info.external_attr >> 16
            if mode and (stat.S_ISLNK(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
                problems.append(_problem(src, info.filename, "link or special file refused"))
                continue
            target = dest / rel
            try:
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as data, open(target, "wb") as out:
                    _copy_sparse(data, out)  # zipfile stops at the declared size and checks the CRC
            except ArchiveError:
                raise
            except (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError, RuntimeError) as exc:
                problems.append(_problem(src, info.filename, f"cannot be read: {exc}", "unreadable_file"))
            except OSError as exc:
                if exc.errno is None:
                    problems.append(_problem(src, info.filename, f"cannot be read: {exc}", "unreadable_file"))
                else:
                    problems.append(_write_error(src, info.filename, exc))
    return problems
