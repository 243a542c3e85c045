"""Whole Arrow tables to ``dump``'s text or JSON lines, a column at a time, in compiled loops.

Why: a dict and a ``json.dumps`` per row cost ~20 µs, so a segment of a million records spent
most of its time formatting. Here every column goes to a numba kernel as one numpy array (ints,
booleans, or the offsets and bytes of an Arrow string or binary column), and the kernel writes
each line's bytes (literals, digits, quoted strings, hex) straight into one output buffer. The
lines are byte for byte those of ``dump``'s row-by-row writer (``analyzer.dump``), which remains
for the columns this cannot take (lists, timestamps, floats, strings that need escaping).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numba import njit

# column kinds
INT, BOOL, TEXT, HEX = 0, 1, 2, 3
NULL, FALSE, TRUE = 0, 1, 2  # words


@dataclass(frozen=True)
class Style:
    """How one output format writes a row: ``start`` + (``key(name)`` + value)... + ``end``."""

    json: bool

    def start(self, row_type: str, path: str) -> str:
        if not self.json:
            return "| " if row_type == "record" else ""
        head = '{"type": ' + json.dumps(row_type)
        return head if row_type == "record" else head + ', "path": ' + json.dumps(path).replace("\x7f", "\\u007f")

    def key(self, name: str, first: bool) -> str:
        if self.json:
            return ", " + json.dumps(name) + ": "
        return f"{name}: " if first else f" {name}: "

    @property
    def end(self) -> str:
        return "}\n" if self.json else "\n"

    @property
    def words(self) -> tuple[str, str, str]:  # NULL, FALSE, TRUE
        return ("null", "false", "true") if self.json else ("null", "False", "True")


_NO_BYTES = np.frombuffer(b"\0", np.uint8)  # read-only


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view: the text columns reach a kernel as one tuple, whose arrays must share a
    type (Arrow buffers come out writable or not)."""
    view = a.view()
    view.flags.writeable = False
    return view


def _pool(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """ASCII strings as one uint8 pool and their int64 offsets."""
    raw = [s.encode("ascii") for s in strings]
    off = np.zeros(len(raw) + 1, np.int64)
    np.cumsum([len(r) for r in raw], out=off[1:])
    return np.frombuffer(b"".join(raw) or b"\0", np.uint8), off


def _bits(buf: pa.Buffer | None, offset: int, n: int) -> np.ndarray:
    """An Arrow bitmap (validity or boolean values) as n bools; all True when absent."""
    if buf is None:
        return np.ones(n, np.bool_)
    bits = np.unpackbits(np.frombuffer(buf, np.uint8), bitorder="little")
    return bits[offset : offset + n].astype(np.bool_)


def _column(arr: pa.Array, n: int):
    """(kind, integer values, validity (None: no nulls), text offsets, text bytes) of one column,
    or None when the kind is not one the kernel writes exactly as ``json.dumps`` / ``str`` would."""
    t = arr.type
    bufs = arr.buffers()
    valid = _bits(bufs[0], arr.offset, n) if arr.null_count else None
    if pa.types.is_integer(t) and t.bit_width <= 64 and not (pa.types.is_unsigned_integer(t) and t.bit_width == 64):
        dtype = np.dtype(f"{'u' if pa.types.is_unsigned_integer(t) else ''}int{t.bit_width}")
        return INT, np.frombuffer(bufs[1], dtype, count=arr.offset + n)[arr.offset :], valid, None, None
    if pa.types.is_boolean(t):
        return BOOL, _bits(bufs[1], arr.offset, n), valid, None, None
    text = pa.types.is_string(t) or pa.types.is_large_string(t)
    if text or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        wide = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        offsets = np.frombuffer(bufs[1], np.int64 if wide else np.int32, count=arr.offset + n + 1)[arr.offset :]
        data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None and bufs[2].size else _NO_BYTES
        if text and not plain(data, offsets[0], offsets[-1]):
            return None  # needs escaping: the row-by-row writer does it
        return (TEXT if text else HEX), np.zeros(0, np.int64), valid, offsets, data
    return None


@dataclass
class Columns:
    """A table's columns laid out for the kernels, with the literals of one style and row type."""

    args: tuple  # kinds, ints, valid, text_of, text_off, pool, lit, lit_off, word, word_off, quote

    def sizes(self) -> np.ndarray:
        """Bytes of each row's line."""
        return line_sizes(*self.args)

    def write(self, out: np.ndarray, starts: np.ndarray) -> None:
        """Row i's line into out[starts[i]:] (rows with a negative start are left out)."""
        write_lines(*self.args, out, starts, _memcpy())


def columns(table: pa.Table, style: Style, row_type: str, path: str, skip: tuple[str, ...]) -> Columns | None:
    """Every column of ``table`` but the ``skip`` ones, ready to write as ``style`` lines of
    ``row_type``; None when a column is of a kind only the row-by-row writer writes."""
    n = table.num_rows
    names = [c for c in table.column_names if c not in skip]
    cols = []
    for name in names:
        col = _column(table.column(name).combine_chunks(), n)
        if col is None:
            return None
        cols.append(col)
    m = len(cols)
    kinds = np.array([c[0] for c in cols], np.int64)
    ints = np.empty((m, n), np.int64)  # rows of text columns are never read
    valid = np.ones((m, n), np.bool_)
    text_of = np.full(m, -1, np.int64)
    texts = [c for c in cols if c[3] is not None]
    text_off = np.zeros((max(len(texts), 1), n + 1), np.int64)
    k = 0
    for j, (_, values, ok, offsets, _data) in enumerate(cols):
        if ok is not None:
            valid[j] = ok
        if offsets is None:
            ints[j] = values
            continue
        text_of[j] = k
        text_off[k] = offsets
        k += 1
    pool = tuple(_read_only(c[4]) for c in texts) or (_NO_BYTES,)  # each text column's bytes, one type
    literals = [style.start(row_type, path), *(style.key(name, j == 0) for j, name in enumerate(names)), style.end]
    lit, lit_off = _pool(literals)
    word, word_off = _pool(list(style.words))
    return Columns((kinds, ints, valid, text_of, text_off, pool, lit, lit_off, word, word_off, style.json))


BLOCK_LINES = 1 << 15  # lines formatted at once: each block's buffers stay small enough to be reused


def piece_lines(table: pa.Table, records: pa.Table | None, style: Style, row_type: str, path: str) -> list[np.ndarray] | None:
    """The bytes of a parser piece's rows, each segment batch followed by its records (in the
    records table's order, as ``batch_position`` ties them), in blocks of about ``BLOCK_LINES``
    lines; None when only the row-by-row writer can write them. Every line is written once, at
    its final place. (Blocks keep every buffer below the size from which malloc maps fresh
    pages, whose page faults would cost more than the formatting.)"""
    if records is None or records.num_rows == 0:
        out = []
        for b in range(0, table.num_rows, BLOCK_LINES):
            rows = columns(table.slice(b, BLOCK_LINES), style, row_type, path, skip=("path",))
            if rows is None:
                return None
            out.append(_written([(rows, rows.sizes(), None)]))
        return out
    at = records.column("batch_position").to_numpy()
    if (np.diff(at) < 0).any():  # stitch records to their batch in a stable order
        order = np.argsort(at, kind="stable")
        records, at = records.take(order), at[order]
    pos = table.column("position").to_numpy()
    first, last = np.searchsorted(at, pos, "left"), np.searchsorted(at, pos, "right")
    out = []
    b = 0
    while b < table.num_rows:  # whole batches with their records, about BLOCK_LINES lines a block
        e = min(max(int(np.searchsorted(last, first[b] + BLOCK_LINES, "right")), b + 1), b + BLOCK_LINES, table.num_rows)
        r0, r1 = int(first[b]), int(last[e - 1])
        rows = columns(table.slice(b, e - b), style, row_type, path, skip=("path",))
        recs = columns(records.slice(r0, r1 - r0), style, "record", path, skip=("path", "batch_position"))
        if rows is None or recs is None:
            return None
        out.append(_written(_after_their_batch(rows, recs, first[b:e] - r0, last[b:e] - r0)))
        b = e
    return out


def _after_their_batch(rows: Columns, recs: Columns, first: np.ndarray, last: np.ndarray) -> list:
    """(columns, line sizes, line starts) of batches and records, each batch's records right
    after it (records of no batch get start -1: left out)."""
    row_size, rec_size = rows.sizes(), recs.sizes()
    rec_end = np.cumsum(rec_size)
    rec_before = np.concatenate([[0], rec_end])  # bytes of the records before record r
    group = row_size + rec_before[last] - rec_before[first]
    row_start = np.concatenate([[0], np.cumsum(group)[:-1]])
    owner = np.full(rec_size.size, -1, np.int64)
    counts = last - first
    owner[np.repeat(first, counts) + _ranges(counts)] = np.repeat(np.arange(first.size), counts)
    rec_start = np.where(
        owner >= 0, row_start[owner] + row_size[owner] + rec_before[:-1] - rec_before[first[owner]], -1
    )
    return [(rows, row_size, row_start), (recs, rec_size, rec_start)]


def _ranges(counts: np.ndarray) -> np.ndarray:
    """0..c-1 for every c in counts, concatenated."""
    ends = np.cumsum(counts)
    return np.arange(ends[-1] if ends.size else 0) - np.repeat(ends - counts, counts)


def _written(parts: list) -> np.ndarray:
    """One buffer holding every part's lines at their starts (None: one after the other)."""
    total = int(sum(int(size.sum()) for _, size, start in parts if start is None)
                + sum(int(size[start >= 0].sum()) for _, size, start in parts if start is not None))
    out = np.empty(total, np.uint8)
    for cols, size, start in parts:
        if start is None:
            start = np.concatenate([[0], np.cumsum(size)[:-1]])
        cols.write(out, start)
    return out


# ---------------------------------------------------------------------------- kernels


@njit(cache=True, inline="always")
def _put(out, p, src, start, stop, memcpy):
    n = stop - start
    if n >= MEMCPY_FROM:
        memcpy(np.uint64(out.ctypes.data) + np.uint64(p), np.uint64(src.ctypes.data) + np.uint64(start), np.uint64(n))
        return p + n
    for q in range(start, stop):
        out[p] = src[q]
        p += 1
    return p


_POW10 = np.array([10**k for k in range(1, 20)], np.uint64)


@njit(cache=True, inline="always")
def _magnitude(v):
    return np.uint64(-(v + 1)) + np.uint64(1) if v < 0 else np.uint64(v)


@njit(cache=True, inline="always")
def _int_size(v):
    """len(str(v)) of an int64."""
    u = _magnitude(v)
    n = 1
    while n < 20 and u >= _POW10[n - 1]:
        n += 1
    return n + (1 if v < 0 else 0)


@njit(cache=True, inline="always")
def _put_int(out, p, v):
    """str(v) of an int64 at out[p:]; returns the new end."""
    end = p + _int_size(v)
    u = _magnitude(v)
    if v < 0:
        out[p] = 45  # '-'
    e = end
    while True:
        e -= 1
        out[e] = 48 + u % np.uint64(10)
        u //= np.uint64(10)
        if u == 0:
            break
    return end


_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
MEMCPY_FROM = 16  # bytes from which libc's memcpy beats a byte loop (literals, digests)
_MEMCPY = []


def _memcpy():
    """libc's memcpy as a first-class function argument (see parsers._kernels._CFunction)."""
    if not _MEMCPY:
        import ctypes

        import numba.experimental.function_type  # noqa: F401
        from numba import types

        from parsers._kernels import _CFunction

        _MEMCPY.append(_CFunction(ctypes.CDLL(None).memcpy, types.uintp(types.uintp, types.uintp, types.uintp)))
    return _MEMCPY[0]


_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)


@njit(cache=True, inline="always")
def _has_byte(w, byte):
    """Whether any of the 8 bytes of w equals ``byte`` (the classic SWAR zero-byte test)."""
    v = w ^ (_ONES * np.uint64(byte))
    return (v - _ONES) & ~v & _HIGHS


@njit(cache=True)
def plain(data, start, stop):
    """Whether data[start:stop] is printable ASCII without '"' or '\\\\': a JSON string as is.

    Eight bytes at a time (a byte below 0x20: ``w - 0x20..`` borrows into its high bit; at or
    above 0x80: its own high bit; 0x7f, '"' and '\\\\' by the zero-byte test), so a column of
    digests is checked at memory speed."""
    bad = np.uint64(0)
    i = start
    while i < stop and (i & 7):
        c = data[i]
        bad |= np.uint64((c < 0x20) | (c > 0x7E) | (c == 0x22) | (c == 0x5C))
        i += 1
    if i + 8 <= stop:
        words = data[i : stop - (stop - i) % 8].view(np.uint64)
        for w in words:
            bad |= (w & _HIGHS) | ((w - _ONES * np.uint64(0x20)) & ~w & _HIGHS)
            bad |= _has_byte(w, 0x7F) | _has_byte(w, 0x22) | _has_byte(w, 0x5C)
        i += words.size * 8
    while i < stop:
        c = data[i]
        bad |= np.uint64((c < 0x20) | (c > 0x7E) | (c == 0x22) | (c == 0x5C))
        i += 1
    return bad == 0


@njit(cache=True)
def line_sizes(kinds, ints, valid, text_of, text_off, pool, lit, lit_off, word, word_off, quote):
    """Bytes of each row's line as ``write_lines`` writes it."""
    m, n = ints.shape
    q = 2 if quote else 0
    sizes = np.full(n, lit_off[m + 2] - lit_off[0], np.int64)
    for j in range(m):
        kind = kinds[j]
        k = text_of[j]
        for i in range(n):
            if not valid[j, i]:
                sizes[i] += word_off[NULL + 1] - word_off[NULL]
            elif kind == INT:
                sizes[i] += _int_size(ints[j, i])
            elif kind == BOOL:
                w = TRUE if ints[j, i] else FALSE
                sizes[i] += word_off[w + 1] - word_off[w]
            else:
                length = text_off[k, i + 1] - text_off[k, i]
                sizes[i] += q + (2 * length if kind == HEX else length)
    return sizes


@njit(cache=True)
def write_lines(kinds, ints, valid, text_of, text_off, pool, lit, lit_off, word, word_off, quote, out, starts, memcpy):
    """Write row i as ``lit[0] (lit[j+1] value_j)... lit[m+1]`` at out[starts[i]:], for every i
    with a start >= 0.

    ``kinds[j]``: INT (decimal of ``ints[j, i]``), BOOL (``word[FALSE|TRUE]``), TEXT (the bytes
    ``pool[k][text_off[k, i]:text_off[k, i + 1]]``, k = ``text_of[j]``, in double quotes when
    ``quote``) or HEX (those bytes in lowercase hex, quoted likewise); ``word[NULL]`` where
    ``valid[j, i]`` is False.
    """
    m, n = ints.shape
    for i in range(n):
        p = starts[i]
        if p < 0:
            continue
        p = _put(out, p, lit, lit_off[0], lit_off[1], memcpy)
        for j in range(m):
            p = _put(out, p, lit, lit_off[j + 1], lit_off[j + 2], memcpy)
            kind = kinds[j]
            if not valid[j, i]:
                p = _put(out, p, word, word_off[NULL], word_off[NULL + 1], memcpy)
            elif kind == INT:
                p = _put_int(out, p, ints[j, i])
            elif kind == BOOL:
                w = TRUE if ints[j, i] else FALSE
                p = _put(out, p, word, word_off[w], word_off[w + 1], memcpy)
            else:
                k = text_of[j]
                if quote:
                    out[p] = 34  # '"'
                    p += 1
                src = pool[k]
                if kind == TEXT:
                    p = _put(out, p, src, text_off[k, i], text_off[k, i + 1], memcpy)
                else:
                    for s in range(text_off[k, i], text_off[k, i + 1]):
                        out[p] = _HEX[src[s] >> 4]
                        out[p + 1] = _HEX[src[s] & 15]
                        p += 2
                if quote:
                    out[p] = 34
                    p += 1
        _put(out, p, lit, lit_off[m + 1], lit_off[m + 2], memcpy)
