"""A log dir's ``meta.properties``: ``MetaProperties`` read through ``java.util.Properties.load``.

    meta.properties (java.util.Properties text, ISO-8859-1, \\uXXXX escapes)
      v0 (ZooKeeper era)   => version=0  broker.id=<int32>  [cluster.id=<string>]
      v1 (KRaft)           => version=1  node.id=<int32>    cluster.id=<string>
                              [directory.id=<base64url Uuid>]            (directory.id: 3.7+)
    The writer (PropertiesUtils.writePropertiesFile) puts a "#" comment and a date comment first.

Why we parse the Properties syntax ourselves instead of splitting on '=': the file is read by
``Properties.load(InputStream)``, which accepts ':' or whitespace as separators, '#'/'!'
comments, backslash line continuations and escapes. A hand-edited file that Kafka reads one
way must not be read another way here.

``MetaProperties.Builder(Properties)`` rules (Kafka 4.0), mirrored as ``checkpoint_malformed``:
``version`` defaults to 0 and must be 0 or 1 ("Unknown meta.properties version number");
v0 takes ``broker.id`` if present (it is optional in 4.0), v1 requires ``node.id`` ("Failed to
find node.id") and ``cluster.id`` ("cluster.id was not found."); ids must be base-10 ints
("Unable to read node.id as a base-10 number."); ``directory.id`` must be a Uuid. A problem
for a missing key has ``position`` 0 (no line holds it); others carry the 1-based line number.
The row keeps whatever did parse. Stricter than Kafka: a non-empty v0 file without any id
(e.g. random bytes read with ``--kind meta_properties``) is not a meta.properties at all.
"""

from __future__ import annotations

import pyarrow as pa

from ._java import JavaNumberFormatError, parse_int, uuid_from_string
from .common import Parsed, Problem, problems_table

VERSION_PROP = "version"
BROKER_ID_PROP = "broker.id"
NODE_ID_PROP = "node.id"
CLUSTER_ID_PROP = "cluster.id"
DIRECTORY_ID_PROP = "directory.id"
KNOWN_VERSIONS = (0, 1)
PROBLEM_KIND = "checkpoint_malformed"
WHOLE_FILE = 0  # problem position for a key that is missing altogether
ID_KEYS = (BROKER_ID_PROP, NODE_ID_PROP, CLUSTER_ID_PROP, DIRECTORY_ID_PROP)
# Properties.load reads any bytes and MetaProperties defaults the version to 0, so Kafka would
# take random bytes for a v0 file that names nothing; its writer always writes an id.
NOT_META_PROPERTIES = (
    "none of broker.id, node.id, cluster.id, directory.id is set: Kafka writes an id into every"
    " meta.properties, so this file is not one"
)

# java.util.Properties.LineReader
_PROPERTIES_WHITESPACE = " \t\f"
_COMMENT_STARTS = "#!"
_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "f": "\f"}

SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("version", pa.int32()),
        pa.field("node_id", pa.int32()),  # node.id (v1) or broker.id (v0)
        pa.field("cluster_id", pa.string()),
        pa.field("directory_id", pa.string()),  # as written (base64url)
    ]
)


class PropertiesSyntaxError(ValueError):
    """``Properties.load`` would throw (only a malformed \\uXXXX escape does)."""

    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """``Properties.LineReader``: (first physical line number, logical line) pairs.

    Skips blank lines and comment lines, drops leading whitespace, and joins a line that ends
    in an odd number of backslashes with the next one (whose leading whitespace is dropped).
    """
    physical = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(physical):
        start = i
        line = physical[i].lstrip(_PROPERTIES_WHITESPACE)
        i += 1
        if not line or line[0] in _COMMENT_STARTS:
            continue
        parts = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 1:
                parts.append(line[:-1])
                if i >= len(physical):
                    break
                line = physical[i].lstrip(_PROPERTIES_WHITESPACE)
                i += 1
                continue
            parts.append(line)
            break
        out.append((start + 1, "".join(parts)))
    return out


def _convert(raw: str, line: int) -> str:
    """``Properties.loadConvert``: \\uXXXX, \\t \\r \\n \\f, and \\x -> x."""
    if "\\" not in raw:
        return raw
    out = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        i += 1
        if ch != "\\":
            out.append(ch)
            continue
        if i >= len(raw):
            break
        ch = raw[i]
        i += 1
        if ch == "u":
            digits = raw[i : i + 4]
            if len(digits) < 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesSyntaxError(line, "Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(ch, ch))
    return "".join(out)


def _split_key_value(logical: str) -> tuple[str, str]:
    """``Properties.load0``: the key ends at the first unescaped '=', ':' or blank."""
    key_end = len(logical)
    value_start = len(logical)
    has_separator = False
    backslash = False
    for pos, ch in enumerate(logical):
        if ch in "=:" and not backslash:
            key_end, value_start, has_separator = pos, pos + 1, True
            break
        if ch in _PROPERTIES_WHITESPACE and not backslash:
            key_end, value_start = pos, pos + 1
            break
        backslash = (ch == "\\") and not backslash
    while value_start < len(logical):
        ch = logical[value_start]
        if ch in _PROPERTIES_WHITESPACE:
            value_start += 1
        elif not has_separator and ch in "=:":
            has_separator = True
            value_start += 1
        else:
            break
    return logical[:key_end], logical[value_start:]


def load_properties(data: bytes | memoryview) -> tuple[dict[str, str], dict[str, int], list[Problem]]:
    """``Properties.load(InputStream)``: (properties, line of each key, problems).

    Decodes ISO-8859-1 like Java's InputStream overload, so any byte sequence is readable.
    A later duplicate key wins, as in a Hashtable.
    """
    text = bytes(data).decode("latin-1")
    props: dict[str, str] = {}
    key_lines: dict[str, int] = {}
    problems: list[Problem] = []
    for line_no, logical in _logical_lines(text):
        raw_key, raw_value = _split_key_value(logical)
        try:
            key = _convert(raw_key, line_no)
            value = _convert(raw_value, line_no)
        except PropertiesSyntaxError as exc:
            problems.append(Problem(exc.line, PROBLEM_KIND, f"IllegalArgumentException: {exc}"))
            continue
        props[key] = value
        key_lines[key] = line_no
    return props, key_lines, problems


def parse(data: bytes | memoryview, path: str) -> Parsed:
    """Read one ``meta.properties`` into one row; never raises."""
    props, lines, problems = load_properties(data)

    def required_int(key: str) -> int | None:
        value = props.get(key)
        if value is None:
            problems.append(Problem(WHOLE_FILE, PROBLEM_KIND, f"Failed to find {key}"))
            return None
        try:
            return parse_int(value)
        except JavaNumberFormatError:
            problems.append(
                Problem(lines[key], PROBLEM_KIND, f"Unable to read {key} as a base-10 number.")
            )
            return None

    version: int | None = None
    version_text = props.get(VERSION_PROP, "0")
    try:
        version = parse_int(version_text.strip())
    except JavaNumberFormatError:
        problems.append(
            Problem(lines.get(VERSION_PROP, WHOLE_FILE), PROBLEM_KIND, f"Invalid meta.properties version string '{version_text}'")
        )
    else:
        if version not in KNOWN_VERSIONS:
            problems.append(
                Problem(lines.get(VERSION_PROP, WHOLE_FILE), PROBLEM_KIND, f"Unknown meta.properties version number {version}")
            )

    node_id: int | None = None
    if version == 0:
        if BROKER_ID_PROP in props:
            node_id = required_int(BROKER_ID_PROP)
        elif len(data) and not any(key in props for key in ID_KEYS):
            problems.append(Problem(WHOLE_FILE, PROBLEM_KIND, NOT_META_PROPERTIES))
    elif version is not None:
        node_id = required_int(NODE_ID_PROP)
        if CLUSTER_ID_PROP not in props:
            problems.append(Problem(WHOLE_FILE, PROBLEM_KIND, "cluster.id was not found."))

    directory_id = props.get(DIRECTORY_ID_PROP)
    if directory_id is not None:
        try:
            uuid_from_string(directory_id)
        except ValueError as exc:
            problems.append(
                Problem(lines[DIRECTORY_ID_PROP], PROBLEM_KIND, f"Unable to read directory.id as a Uuid: {exc}")
            )

    table = pa.table(
        {
            "path": pa.array([path], pa.string()),
            "version": pa.array([version], pa.int32()),
            "node_id": pa.array([node_id], pa.int32()),
            "cluster_id": pa.array([props.get(CLUSTER_ID_PROP)], pa.string()),
            "directory_id": pa.array([directory_id], pa.string()),
        },
        schema=SCHEMA,
    )
    problems.sort(key=lambda p: p.position)
    return Parsed(table, problems_table(path, problems))
