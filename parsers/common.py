"""Shared plumbing for every parser: the result type, problem rows, read-only file access.

Every parser is a pure function ``parse(data, path) -> Parsed``. It never raises on bad
bytes: whatever Kafka would reject (or silently misread) becomes a row in ``problems``
with the contract's finding vocabulary, so one damaged file never stops a whole run.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a file, at a byte position (or a 1-based line for text files)."""

    position: int
    kind: str
    detail: str


@dataclass
class Parsed:
    """What a parser returns: the decoded rows, and what was wrong with the bytes.

    ``extra`` carries secondary tables (a segment's records beside its batches).
    """

    table: pa.Table
    problems: pa.Table
    extra: dict[str, pa.Table] = field(default_factory=dict)


def problems_table(path: str, problems: Iterable[Problem]) -> pa.Table:
    """Build the problems table of one file from Problem objects."""
    rows = list(problems)
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
    return schema.empty_table()


class FileBytes:
    """A read-only view of a file's bytes, memory-mapped where the OS allows it.

    Evidence is never written: the file is opened O_RDONLY and mapped ACCESS_READ. A 0-byte
    file cannot be mmapped, so it reads as b"". Use as a context manager so the map is closed.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        self._mm: mmap.mmap | None = None
        try:
            size = os.fstat(self._fd).st_size
            if size > 0:
                self._mm = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ)
                self.data: bytes | mmap.mmap | memoryview = self._mm
            else:
                self.data = b""
        except BaseException:
            os.close(self._fd)
            raise

    def close(self) -> None:
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                # numpy views still point into the map; the GC closes it with them.
                pass
            self._mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> FileBytes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
