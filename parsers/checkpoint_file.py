"""The text format shared by every Kafka checkpoint: ``CheckpointFile.CheckpointReadBuffer``.

    CheckpointFile => Version:int32-line EntryCount:int32-line Entry-line*
      Version      => decimal text, must equal the file kind's version (0 for all kinds here)
      EntryCount   => decimal text
      Entry        => fields separated by \\s+ (formatter-specific: OffsetCheckpointFile
                      "topic partition offset", LeaderEpochCheckpointFile "epoch startOffset")
    Lines end with \\n, \\r or \\r\\n (BufferedWriter.newLine() writes the platform separator).
    The file is UTF-8.

Kafka's reader (mirrored here):
  * no first line (0-byte file) -> empty checkpoint, no error;
  * first line not an int -> "Malformed line in checkpoint file [...]: <line>";
    not the expected version -> "Unrecognised version:<v>, expected version: <e> ...";
  * no second line -> empty checkpoint, no error;
  * an entry line the formatter rejects -> "Malformed line in checkpoint file [...]: <line>";
    a field that is not a number -> a bare NumberFormatException ("For input string: ...");
  * entries read != count -> "Expected [<n>] entries in checkpoint file [...], but found only [<m>]".

Where Kafka stops at the first fault and keeps nothing, we report every fault (one problem row
per bad line, ``position`` = 1-based line number) and keep every entry that did parse: on a
damaged broker those surviving entries are still the best evidence of what it had checkpointed.
Entry lines are split and converted for the whole file at once with Arrow compute, or line by
line when there are few (``FEW_LINES``: Arrow's fixed cost per call outweighs a handful of lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._java import JAVA_WHITESPACE, JavaNumberFormatError, decode_utf8, parse_int, parse_integers, split_lines
from .common import Problem

VERSION_LINE = 1
COUNT_LINE = 2
FIRST_ENTRY_LINE = 3

_SPLIT_PATTERN = "[ \\t\\n\\x0b\\f\\r]+"  # java.util.regex "\\s+"


@dataclass
class CheckpointText:
    """A checkpoint file split the way CheckpointReadBuffer reads it."""

    version: int | None = None
    expected_count: int | None = None
    entry_lines: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def read_checkpoint_text(data: bytes | memoryview, expected_version: int, kind: str) -> CheckpointText:
    """Decode, split into lines and check the version and count header lines.

    ``kind`` is the problem kind to report (``checkpoint_malformed`` or
    ``leader_epoch_malformed``). The entry-count check needs the parsed entries, so it is
    done by :func:`check_count`.
    """
    out = CheckpointText()
    text, bad_utf8 = decode_utf8(bytes(data))
    if bad_utf8 is not None:
        out.problems.append(Problem(bad_utf8[0], kind, bad_utf8[1]))
    lines = split_lines(text)
    if not lines:
        return out
    out.version = _header_int(lines, VERSION_LINE, kind, out.problems)
    if out.version is not None and out.version != expected_version:
        out.problems.append(
            Problem(VERSION_LINE, kind, f"Unrecognised version:{out.version}, expected version: {expected_version}")
        )
    if len(lines) < 2:
        return out
    out.expected_count = _header_int(lines, COUNT_LINE, kind, out.problems)
    if out.expected_count is not None and out.expected_count < 0:
        # new ArrayList<>(expectedSize) throws before any entry is read
        out.problems.append(
            Problem(
                COUNT_LINE,
                kind,
                f"IllegalArgumentException: Illegal Capacity: {out.expected_count} (negative entry count)",
            )
        )
    out.entry_lines = lines[2:]
    return out


def _header_int(lines: list[str], line: int, kind: str, problems: list[Problem]) -> int | None:
    """Header line ``line`` (1-based) as a Java int; None, and a problem, when it is not one."""
    try:
        return parse_int(lines[line - 1])
    except JavaNumberFormatError:
        problems.append(Problem(line, kind, f"Malformed line in checkpoint file: {lines[line - 1]!s}"))
        return None


def check_count(text: CheckpointText, kind: str) -> list[Problem]:
    """Kafka's final check: the count line must equal the number of entry lines."""
    if text.expected_count is None or text.expected_count < 0:
        return []
    found = len(text.entry_lines)
    if found == text.expected_count:
        return []
    return [
        Problem(
            COUNT_LINE,
            kind,
            f"Expected [{text.expected_count}] entries in checkpoint file,"
            f" but found only [{found}]",
        )
    ]


def split_entries(entry_lines: list[str], n_fields: int) -> tuple[pa.ListArray, np.ndarray]:
    """Split entry lines on ``\\s+`` like ``Pattern.split`` and flag the right field count.

    Java's ``split`` drops trailing empty strings but keeps a leading one, so trailing blanks
    are tolerated and leading blanks make the line malformed; trimming the right end and
    splitting reproduces that. Returns (the split lists, a bool mask of lines with exactly
    ``n_fields`` fields).
    """
    lines = pa.array(entry_lines, pa.string())
    trimmed = pc.utf8_rtrim(lines, characters=JAVA_WHITESPACE)
    parts = pc.split_pattern_regex(trimmed, _SPLIT_PATTERN)
    counts = pc.list_value_length(parts).to_numpy(zero_copy_only=False)
    nonblank = pc.not_equal(trimmed, "").to_numpy(zero_copy_only=False)
    # "".split(...) is [""] (1 field) in Java; an all-blank line is [] (0 fields): never n_fields
    return parts, (counts == n_fields) & nonblank


def field_column(parts: pa.ListArray, ok: np.ndarray, index: int) -> pa.Array:
    """Field ``index`` of every line (null on lines without the right field count)."""
    safe = pc.if_else(pa.array(ok), parts, pa.scalar(None, parts.type))
    return pc.list_element(pc.fill_null(safe, pa.scalar([""] * (index + 1), parts.type)), index)


# Up to this many entry lines a file is split and converted line by line: Arrow's whole-column
# way costs ~30 kernel calls and several regex compiles whatever the size (~0.5 ms), most of a
# many-partition collection's ingest, where nearly every leader-epoch-checkpoint has one line.
FEW_LINES = 32
_SPLIT_RE = re.compile(_SPLIT_PATTERN)


def _entries_of_few(entry_lines: list[str], schema: pa.Schema, path: str, file_kind: str | None, kind: str
                    ) -> tuple[pa.Table, list[Problem]]:
    """``entries_table`` for a few lines, in Python: each line split, checked and converted in
    turn, one Arrow array a column at the end (the whole-column way's filters and casts are
    ~40 µs a file, most of a one-line leader-epoch-checkpoint's reading)."""
    names = schema.names[2:-1]
    types = [schema.field(name).type for name in names]
    integer = [pa.types.is_integer(t) for t in types]
    malformed: list[Problem] = []
    bad_numbers: list[Problem] = []
    columns: list[list] = [[] for _ in names]
    lines: list[int] = []
    for i, line in enumerate(entry_lines):
        trimmed = line.rstrip(JAVA_WHITESPACE)
        parts = _SPLIT_RE.split(trimmed)
        if len(parts) != len(types) or trimmed == "":
            malformed.append(Problem(FIRST_ENTRY_LINE + i, kind, f"Malformed line in checkpoint file: {line}"))
            continue
        values = []
        for text, t, is_int in zip(parts, types, integer):
            value = _int_or_none(text, t.bit_width) if is_int else text
            if value is None:  # Kafka's formatter parses the fields in order: the first bad one is named
                bad_numbers.append(Problem(FIRST_ENTRY_LINE + i, kind, f'NumberFormatException: For input string: "{text}"'
                                                                      f" (line: {line})"))
                break
            values.append(value)
        else:
            for column, value in zip(columns, values):
                column.append(value)
            lines.append(FIRST_ENTRY_LINE + i)
    n = len(lines)
    arrays = [pa.array([path] * n, pa.string()), pa.array([file_kind] * n, pa.string()),
              *(pa.array(column, t) for column, t in zip(columns, types)), pa.array(lines, pa.int32())]
    return pa.Table.from_arrays(arrays, schema=schema), malformed + bad_numbers


def _int_or_none(text: str | None, bits: int) -> int | None:
    try:
        return None if text is None else parse_int(text, bits)
    except JavaNumberFormatError:
        return None


def malformed_line_problems(
    entry_lines: list[str], bad: np.ndarray, kind: str, first_line: int = FIRST_ENTRY_LINE
) -> list[Problem]:
    """One problem per line the formatter would reject (loop over bad lines only)."""
    return [
        Problem(first_line + int(i), kind, f"Malformed line in checkpoint file: {entry_lines[int(i)]}")
        for i in np.flatnonzero(bad)
    ]


def number_problems(
    entry_lines: list[str],
    columns: list[tuple[pa.Array, pa.Array]],
    ok: np.ndarray,
    kind: str,
    first_line: int = FIRST_ENTRY_LINE,
) -> tuple[np.ndarray, list[Problem]]:
    """Lines whose numeric fields Java cannot parse, in field order (the first bad one wins).

    ``columns`` holds (raw string field, parsed int64 column) pairs in the order Kafka's
    formatter parses them. Returns (mask of lines whose numbers all parsed, problems).
    """
    good = ok.copy()
    problems: list[Problem] = []
    first_bad_text: dict[int, str] = {}
    for raw, parsed in columns:
        invalid = ok & parsed.is_null().to_numpy(zero_copy_only=False)
        for i in np.flatnonzero(invalid & good):
            first_bad_text[int(i)] = raw[int(i)].as_py()
        good &= ~invalid
    for i in sorted(first_bad_text):
        problems.append(
            Problem(
                first_line + i,
                kind,
                f'NumberFormatException: For input string: "{first_bad_text[i]}"'
                f" (line: {entry_lines[i]})",
            )
        )
    return good, problems


def entries_table(
    entry_lines: list[str], schema: pa.Schema, path: str, file_kind: str | None, kind: str
) -> tuple[pa.Table, list[Problem]]:
    """Parse the entry lines into ``schema``: ``path, file_kind, <field>..., line``.

    The fields are the schema's columns between ``file_kind`` and ``line``, in the order they
    stand on a line; an integer column is parsed as a Java int (32 bits) or long (64 bits), a
    string column is kept as written. Only the lines that parsed become rows. Returns the
    table and the problems (malformed lines, then numbers Java cannot parse).
    """
    if len(entry_lines) <= FEW_LINES:
        return _entries_of_few(entry_lines, schema, path, file_kind, kind)
    names = schema.names[2:-1]
    types = [schema.field(name).type for name in names]
    parts, ok = split_entries(entry_lines, len(names))
    raw = [field_column(parts, ok, i) for i in range(len(names))]
    values = [parse_integers(r, t.bit_width) if pa.types.is_integer(t) else r for r, t in zip(raw, types)]
    problems = malformed_line_problems(entry_lines, ~ok, kind)
    numbers = [(r, v) for r, v, t in zip(raw, values, types) if pa.types.is_integer(t)]
    good, bad_numbers = number_problems(entry_lines, numbers, ok, kind)
    problems += bad_numbers

    keep = pa.array(good)
    n = int(good.sum())
    line_numbers = pa.array(np.arange(FIRST_ENTRY_LINE, FIRST_ENTRY_LINE + len(entry_lines), dtype=np.int32))
    columns = {"path": pa.array([path] * n, pa.string()), "file_kind": pa.array([file_kind] * n, pa.string())}
    for name, value, t in zip(names, values, types):
        columns[name] = pc.cast(pc.filter(value, keep), t)
    columns["line"] = pc.filter(line_numbers, keep)
    return pa.table(columns, schema=schema), problems
