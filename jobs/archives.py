"""Safe extraction of collected archives (.tar, .tar.gz, .tgz, .tar.xz, .zip) into DIR's work area.

Why by hand and not ``extractall``: evidence archives come from elsewhere and may be hostile or
broken. Every entry is checked before a byte is written: no absolute path, no ``..``, no link
(symbolic or hard) whose target leaves the extraction root, no device, fifo or socket; the
number of entries and the total unpacked size are bounded. A refused entry becomes a problem row
(``unsafe_archive_entry``) and extraction goes on; the archive itself is only ever read.
"""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
import stat
import tarfile
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".zip")
MAX_ENTRIES = 1_000_000
MAX_BYTES = 1 << 40  # 1 TiB unpacked
_COPY = 1 << 20


class ArchiveError(ValueError):
    """The archive cannot be used at all (not readable, or over a bound)."""


def is_archive(path: Path) -> bool:
    name = Path(path).name.lower()
    return Path(path).is_file() and name.endswith(SUFFIXES)


def _safe_name(name: str) -> str | None:
    """The entry's path relative to the root, or None if it would land outside it."""
    name = name.replace("\\", "/")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return None
    norm = posixpath.normpath(name)
    if norm == "." or norm.startswith("../") or norm == ".." or "/../" in f"/{norm}/":
        return None
    return norm


def _problem(archive: Path, entry: str, detail: str) -> dict:
    return {"path": f"{archive.name}/{entry}", "position": 0, "kind": "unsafe_archive_entry", "detail": detail}


def extract(archive: Path, dest: Path, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> list[dict]:
    """Extract ``archive`` under ``dest`` (created), refusing unsafe entries; returns problem rows."""
    archive = Path(archive)
    dest.mkdir(parents=True, exist_ok=True)
    if archive.name.lower().endswith(".zip"):
        return _extract_zip(archive, dest, max_entries, max_bytes)
    return _extract_tar(archive, dest, max_entries, max_bytes)


def _extract_tar(archive: Path, dest: Path, max_entries: int, max_bytes: int) -> list[dict]:
    problems: list[dict] = []
    total = count = 0
    try:
        tf = tarfile.open(archive, "r:*")
    except (OSError, tarfile.TarError) as exc:
        raise ArchiveError(f"{archive}: cannot open archive: {exc}") from None
    links: list[tuple[str, str]] = []
    with tf:
        try:
            for member in tf:
                count += 1
                if count > max_entries:
                    raise ArchiveError(f"{archive}: more than {max_entries} entries")
                rel = _safe_name(member.name)
                if rel is None:
                    problems.append(_problem(archive, member.name, "entry path is absolute or climbs out of the archive root"))
                    continue
                target = dest / rel
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                elif member.isfile():
                    total += member.size
                    if total > max_bytes:
                        raise ArchiveError(f"{archive}: unpacks to more than {max_bytes} bytes")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    src = tf.extractfile(member)
                    with src, open(target, "wb") as out:
                        shutil.copyfileobj(src, out, _COPY)
                    os.utime(target, (member.mtime, member.mtime))
                elif member.issym() or member.islnk():
                    # a symlink is relative to its own folder, a hard link to the archive root
                    base = posixpath.dirname(rel) if member.issym() else ""
                    link = member.linkname.replace("\\", "/")
                    resolved = None if link.startswith("/") else _safe_name(posixpath.join(base, link))
                    if resolved is None:
                        problems.append(_problem(archive, member.name, f"link to {member.linkname!r} leaves the archive root"))
                        continue
                    links.append((rel, resolved))
                else:
                    problems.append(_problem(archive, member.name, "device, fifo or other special file refused"))
        except (OSError, tarfile.TarError, EOFError) as exc:
            problems.append({"path": archive.name, "position": 0, "kind": "unreadable_file", "detail": f"archive truncated or corrupt: {exc}"})
    # links become copies of regular files already extracted (never links on disk)
    for rel, resolved in links:
        src = dest / resolved
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
        else:
            problems.append(_problem(archive, rel, f"link target {resolved!r} is not a regular file in the archive"))
    return problems


def _extract_zip(archive: Path, dest: Path, max_entries: int, max_bytes: int) -> list[dict]:
    problems: list[dict] = []
    try:
        zf = zipfile.ZipFile(archive)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ArchiveError(f"{archive}: cannot open archive: {exc}") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > max_entries:
            raise ArchiveError(f"{archive}: more than {max_entries} entries")
        if sum(i.file_size for i in infos) > max_bytes:
            raise ArchiveError(f"{archive}: unpacks to more than {max_bytes} bytes")
        for info in infos:
            rel = _safe_name(info.filename)
            if rel is None:
                problems.append(_problem(archive, info.filename, "entry path is absolute or climbs out of the archive root"))
                continue
            mode = info.external_attr >> 16
            if mode and (stat.S_ISLNK(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
                problems.append(_problem(archive, info.filename, "link or special file refused"))
                continue
            target = dest / rel
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            written = 0
            try:
                with zf.open(info) as src, open(target, "wb") as out:
                    while chunk := src.read(_COPY):
                        written += len(chunk)
                        if written > info.file_size:  # a lying header (zip bomb) stops here
                            raise ArchiveError(f"{archive}: {info.filename} unpacks beyond its declared size")
                        out.write(chunk)
            except (OSError, zipfile.BadZipFile, EOFError) as exc:
                problems.append({"path": f"{archive.name}/{rel}", "position": 0, "kind": "unreadable_file", "detail": str(exc)})
    return problems
