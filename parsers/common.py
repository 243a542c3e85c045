"""Shared plumbing for every parser: the result type, problem rows, read-only file access.

Every parser is a pure function ``parse(data, path) -> Parsed``. It never raises on bad
bytes: whatever Kafka would reject (or silently misread) becomes a row in ``problems``
with the contract's finding vocabulary, so one damaged file never stops a whole run.
"""

from __future__ import annotations

import errno
import functools
import importlib
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import pyarrow as pa

# problems: path, position (byte offset in the file, or line number for text files), kind, detail
PROBLEM_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("position", pa.int64()),
        pa.field("kind", pa.string()),
        pa.field("detail", pa.string()),
    ]
)


class lazy_module:  # noqa: N801  (used as a module: ``K = lazy_module(...)``, then ``K.scan``)
    """The module ``name``, imported on its first attribute access.

    Why: the numba kernels cost ~100 MB of RSS and a few tenths of a second to import, and most
    processes that import the parsers never parse a byte: the analysis driver only reads their
    schemas, and a Spark worker running a job's pandas function reads none of them. A plain
    ``import_module`` on first use rather than importlib's LazyLoader: an import interrupted
    half-way (a fuzz input's alarm, Ctrl-C) is retried on the next access instead of leaving a
    half-initialised module behind, under the import lock. Each attribute read is then kept on
    this object, so later reads (some per batch) are plain attribute lookups."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):  # only for attributes not kept yet
        value = getattr(importlib.import_module(self._name), attr)
        setattr(self, attr, value)
        return value


class Problem(NamedTuple):
    """One thing wrong with a file, at a byte position (or a 1-based line for text files): what a
    parser, the ingest task, discovery and the archive reader all say. ``path`` names the file
    where the problem is not a parse's own (discovery, an archive entry); a parse's problems are
    its file's. A tuple, so a ``(position, kind, detail)`` reads as one."""

    position: int
    kind: str
    detail: str
    path: str | None = None


@dataclass
class Parsed:
    """What a parser returns: the decoded rows, and what was wrong with the bytes.

    ``extra`` carries secondary tables (a segment's records beside its batches).
    """

    table: pa.Table
    problems: pa.Table
    extra: dict[str, pa.Table] = field(default_factory=dict)


def problems_table(path: str, problems: Iterable[Problem]) -> pa.Table:
    """Build the problems table of one file from Problem objects (the shared empty table when
    there are none: every parse of a sound file ends here, ~25 µs a file to build it afresh)."""
    rows = list(problems)
    if not rows:
        return _NO_PROBLEMS
    return pa.table(
        {
            "path": pa.array([path] * len(rows), pa.string()),
            "position": pa.array([p.position for p in rows], pa.int64()),
            "kind": pa.array([p.kind for p in rows], pa.string()),
            "detail": pa.array([p.detail for p in rows], pa.string()),
        },
        schema=PROBLEM_SCHEMA,
    )


def problems_at(
    indices: Iterable, position: Callable[[int], int], kind: str, detail: Callable[[int], str]
) -> list[Problem]:
    """One ``kind`` problem per index (e.g. the offenders of a vectorised check).

    ``position(i)`` and ``detail(i)`` give the problem's position and text for index ``i``.
    """
    return [Problem(position(i), kind, detail(i)) for i in indices]


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of ``schema`` with no rows. Not ``Schema.empty_table()``: that imports pandas
    (~0.4 s), which a process that only parses (``dump``) would pay for nothing."""
    return pa.Table.from_batches([], schema)


_NO_PROBLEMS = empty_table(PROBLEM_SCHEMA)  # what problems_table returns for a sound file


class FileChanged(OSError):
    """The file is not what discovery listed any more: shrunk, or no longer a regular file.

    A live broker's log dir changes while it is read (retention deletes segments, a follower
    truncates, a roll trims the active segment's preallocated indexes); the caller turns this
    into an ``unreadable_file`` problem naming the file, like any other unreadable file."""

    def __init__(self, message: str):
        super().__init__(errno.ESTALE, message)


# Linux reads at most this many bytes in one read()/pread() call
_MAX_READ = 0x7FFFF000
_SPECIAL_FILES = ((stat.S_ISFIFO, "a fifo"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


def _pread_all(fd: int, size: int) -> bytes:
    """The first ``size`` bytes of ``fd`` (fewer if the file ends sooner), in as few reads as the OS allows."""
    parts: list[bytes] = []
    done = 0
    while done < size:
        part = os.pread(fd, min(size - done, _MAX_READ), done)
        if not part:
            break
        parts.append(part)
        done += len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _read_into(fd: int, view: memoryview, start: int, listed: int) -> None:
    """Fill ``view`` with the bytes of ``fd`` from position ``start``, in as few reads as the OS
    allows; ``FileChanged`` where the file (``listed`` bytes when listed) now ends sooner."""
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done : done + _MAX_READ]], start + done)
        if got <= 0:
            raise _shrank(fd, listed)
        done += got


def _shrank(fd: int, listed: int) -> FileChanged:
    """What a read that came back short says: the size the file has now (from the descriptor
    read), not how far the read got."""
    return FileChanged(f"shrank from {listed} to {os.fstat(fd).st_size} bytes while it was read (truncated by a live broker?)")


def _open_listed(path: str, listed_size: int | None) -> tuple[int, int]:
    """An O_RDONLY | O_NONBLOCK descriptor of ``path`` and how many bytes of it to read (its listed
    size, or its size now), after checking that it is still a regular file no smaller than listed
    (``FileBytes``' doc says why). The caller closes the descriptor."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    if listed_size is not None:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            what = next((why for test, why in _SPECIAL_FILES if test(st.st_mode)), "not a regular file")
            raise FileChanged(f"{what}, not a regular file" + (" (it was one when listed)" if listed_size is not None else ""))
        want = st.st_size if listed_size is None else listed_size
        if st.st_size < want:
            raise FileChanged(f"shrank from {want} to {st.st_size} bytes since it was listed (truncated by a live broker?)")
    except BaseException:
        os.close(fd)
        raise
    return fd, want


class FileBytes:
    """A read-only copy of a file's bytes, read once with ``pread``.

    Evidence is never written nor locked: the file is opened O_RDONLY. Why not ``mmap`` (as
    before): the input may be a live broker's log dir, and a mapped file truncated by someone else
    kills the reading process with SIGBUS on its next access; a copy cannot be pulled from under
    the parser. The price is memory: the whole file is held while it is parsed (one segment,
    at most ``log.segment.bytes`` = 1 GiB by default, per running task).

    ``listed_size``: the size discovery saw. Only that many bytes are read (the active segment
    grows while it is read; what was appended later is not part of what was listed), and a file
    now smaller raises ``FileChanged``. The open is O_NONBLOCK and the file checked with ``fstat``
    to still be a regular file: a fifo swapped in since discovery must neither block the open nor
    be read; a listed file is opened O_NOFOLLOW too (discovery never follows links).
    """

    def __init__(self, path: str | os.PathLike[str], listed_size: int | None = None):
        self.path = os.fspath(path)
        fd, want = _open_listed(self.path, listed_size)
        try:
            self.data: bytes = _pread_all(fd, want) if want > 0 else b""
            if len(self.data) < want:
                raise _shrank(fd, want)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Drop the copy (kept for the context-manager form every caller uses)."""
        self.data = b""

    def __enter__(self) -> FileBytes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
KEPT_BLOCKS = 64 << 20  # blocks up to this size come from the heap, and are reused once freed
KEPT_FREE = 256 << 20  # free memory at the heap's top kept rather than given back at once


@functools.cache
def keep_freed_memory() -> bool:
    """Have glibc's malloc keep what a parse frees for the next file or chunk, rather than give it
    back to the OS; once per process (a dump; a Spark worker, at its first parse task).

    Why: every file or chunk allocates the same tens of MB again (the file's bytes, decoded
    records, digests, Arrow buffers, formatted lines). By default glibc serves a block over its
    mmap threshold (at most 32 MiB) with fresh pages and trims the top of its heap when they are
    freed, so the OS faults in and zeroes those pages again for every file: measured on one parse
    task's code over 64 MiB segments, 215,000 page faults and 0.6-1.0 s of system time against
    67,000 and 0.3 s, 180 -> 238 MB/s; most of it is reuse from one task to the next (a task is a
    segment or a few): handing the memory back at each task's end (``malloc_trim``) lost it again,
    175-186 MB/s. The price: a process keeps the peak of what it allocated in blocks up to
    ``KEPT_BLOCKS`` (a block still in use above freed ones pins them, whatever ``KEPT_FREE`` says),
    never more than one file's or task's working set at once, which it needed anyway; a file over
    ``KEPT_BLOCKS`` is still mapped and unmapped whole. Only for processes that parse (dump; the
    Spark workers' parse tasks, not the driver). Off glibc (no ``mallopt``, or one that refuses)
    nothing changes; returns whether it took."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    took = bool(mallopt(M_MMAP_THRESHOLD, KEPT_BLOCKS))
    if took:
        mallopt(M_TRIM_THRESHOLD, KEPT_FREE)
    return took


class FileStream:
    """A whole file read a window at a time into one buffer, reused: how ``dump`` reads a segment.

    Why: reading a file whole (``FileBytes``) costs a fresh page of memory for every 4 KiB of it,
    faulted in and zeroed by the OS before the copy (0.11 s for 200 MiB here, against 0.03 s into
    a reused buffer), and holds the whole file: a 1 GiB segment is a 1 GiB process. A window is
    only valid until the next one is read; the segment reader copies out of it whatever it keeps.
    The same checks as ``FileBytes``: read-only, a regular file, not shrunk while it is read.
    """

    def __init__(self, path: str | os.PathLike[str], listed_size: int | None = None):
        import numpy as np

        self.path = os.fspath(path)
        self._fd, self.size = _open_listed(self.path, listed_size)
        self._buf = np.empty(0, np.uint8)

    def window(self, start: int, n: int):
        """The file's bytes ``[start, start + n)`` (n at most what is left of it) as a uint8 array
        in the reused buffer, which grows to the largest window asked for."""
        import numpy as np

        n = max(0, min(n, self.size - start))
        if n > self._buf.shape[0]:
            self._buf = np.empty(n, np.uint8)
        _read_into(self._fd, memoryview(self._buf)[:n], start, self.size)
        return self._buf[:n]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> FileStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FileWindow(FileBytes):
    """Part of a file, ``[start, stop)`` and as far past ``stop`` as its reader asks, at the same
    positions as in the file: what one task reads of a segment split at batch boundaries.

    Why positions stay the file's: batch and record positions are evidence (they name the byte a
    problem is at), and the parser needs none of its own arithmetic for a window. ``data`` is an
    array of the whole file's size, allocated but untouched (the OS commits a page only when it is
    written), and only the window is read into it; a batch that starts before ``stop`` and ends
    after it is read on demand (``ensure``). The same checks as ``FileBytes``: read-only, a
    regular file, not shrunk since it was listed."""

    def __init__(self, path: str | os.PathLike[str], listed_size: int, start: int, stop: int):
        import numpy as np

        self.path = os.fspath(path)
        self._fd, self.size = _open_listed(self.path, listed_size)
        try:
            # zeros, not empty: as cheap (the OS hands out zero pages as they are touched), and a
            # byte read without ``ensure`` is a zero, never a leftover of an earlier file
            self.data = np.zeros(listed_size, np.uint8)
            self._hi = start
            self.ensure(stop)
        except BaseException:
            os.close(self._fd)
            raise

    def ensure(self, upto: int) -> None:
        """Read the file up to position ``upto`` (at most its listed size), if not read yet."""
        upto = min(upto, self.size)
        if self._hi < upto:
            _read_into(self._fd, memoryview(self.data)[self._hi : upto], self._hi, self.size)
            self._hi = upto

    def sha256(self, block: int = 32 << 20) -> str:
        """SHA-256 of the whole file as listed, read through this window's own descriptor (the
        file parsed, not whatever the path names by now), ``block`` bytes at a time."""
        import hashlib

        sha = hashlib.sha256()
        done = 0
        while done < self.size:
            part = os.pread(self._fd, min(block, self.size - done), done)
            if not part:
                raise _shrank(self._fd, self.size)
            sha.update(part)
            done += len(part)
        return sha.hexdigest()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.data = b""
