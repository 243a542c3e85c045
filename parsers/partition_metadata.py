"""A partition's ``partition.metadata``: ``PartitionMetadataFile`` / ``PartitionMetadataReadBuffer``.

    PartitionMetadataFile => VersionLine TopicIdLine          (Kafka >= 2.8)
      VersionLine         => "version" ":" \\s+ Version:int32            ("version: 0")
      TopicIdLine         => "topic_id" ":" \\s+ TopicId:base64url(16 bytes)
                                                      ("topic_id: R29sZGVuVG9waWNJZDAwMA")

The topic id ties a partition directory to one incarnation of a topic: a topic deleted and
re-created under the same name gets a new id, so replicas that disagree on it hold different
topics (``topic_id_mismatch``, decided later across brokers).

Kafka's reader (mirrored): each line splits once on ``:\\s+`` and must have the expected key;
the version must parse and be >= 0 ("Unrecognized version of partition metadata file");
the id must be URL-safe base64 of exactly 16 bytes (``Uuid.fromString``: an illegal
character gives "Illegal base64 character 21") and not the zero UUID ("Invalid topic ID").
Every fault is a ``checkpoint_malformed`` problem at its 1-based line. The row is kept with
whatever parsed (null for the rest), since it is the only copy of that evidence.

A 0-byte file yields no row and no problem, like the other checkpoints of a broker killed right
after creating a partition (Kafka itself would fail to load such a log with a
NullPointerException; the caller sees the empty file in the ``files`` table).
"""

from __future__ import annotations

import re

import pyarrow as pa

from ._java import JavaNumberFormatError, decode_utf8, parse_int, split_lines, uuid_from_string
from .common import Parsed, Problem, empty_table, problems_table

CURRENT_VERSION = 0  # PartitionMetadataFile.CURRENT_VERSION
VERSION_KEY = "version"
TOPIC_ID_KEY = "topic_id"
VERSION_LINE = 1
TOPIC_ID_LINE = 2
PROBLEM_KIND = "checkpoint_malformed"
ZERO_UUID = "00000000-0000-0000-0000-000000000000"  # Uuid.ZERO_UUID

_SEPARATOR = re.compile("[:][ \t\n\x0b\f\r]+")  # PartitionMetadataReadBuffer: ":\\s+"

SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("version", pa.int32()),
        pa.field("topic_id", pa.string()),  # as written: URL-safe base64, 22 chars
        pa.field("topic_uuid", pa.string()),  # the same id as a canonical UUID string
    ]
)


def _split(line: str | None, key: str, number: int, problems: list[Problem]) -> str | None:
    """``parseLine``: split once on ``:\\s+``; the key must match."""
    if line is None:
        problems.append(Problem(number, PROBLEM_KIND, "Malformed line in partition metadata file: null"))
        return None
    parts = _SEPARATOR.split(line, maxsplit=1)
    if len(parts) != 2 or parts[0] != key:
        problems.append(
            Problem(number, PROBLEM_KIND, f"Malformed line in partition metadata file: {line}")
        )
        return None
    return parts[1]


def parse(data: bytes | memoryview, path: str) -> Parsed:
    """Read one ``partition.metadata``; never raises."""
    raw = bytes(data)
    if not raw:
        return Parsed(empty_table(SCHEMA), problems_table(path, []))
    problems: list[Problem] = []
    text, bad_utf8 = decode_utf8(raw)
    if bad_utf8 is not None:
        problems.append(Problem(bad_utf8[0], PROBLEM_KIND, bad_utf8[1]))
    lines = split_lines(text)

    version: int | None = None
    value = _split(lines[0] if lines else None, VERSION_KEY, VERSION_LINE, problems)
    if value is not None:
        try:
            version = parse_int(value)
        except JavaNumberFormatError as exc:
            problems.append(
                Problem(VERSION_LINE, PROBLEM_KIND, f"Malformed line in partition metadata file: {lines[0]} ({exc})")
            )
        else:
            if version < CURRENT_VERSION:
                problems.append(
                    Problem(VERSION_LINE, PROBLEM_KIND, f"Unrecognized version of partition metadata file: {version}")
                )

    topic_id: str | None = None
    topic_uuid: str | None = None
    line = lines[1] if len(lines) > 1 else None
    value = _split(line, TOPIC_ID_KEY, TOPIC_ID_LINE, problems)
    if value is not None:
        topic_id = value
        try:
            topic_uuid = str(uuid_from_string(value))
        except ValueError as exc:
            problems.append(
                Problem(TOPIC_ID_LINE, PROBLEM_KIND, f"IllegalArgumentException: {exc} (line: {line})")
            )
        else:
            if topic_uuid == ZERO_UUID:
                problems.append(
                    Problem(TOPIC_ID_LINE, PROBLEM_KIND, "Invalid topic ID in partition metadata file (the zero UUID)")
                )
    for extra in range(2, len(lines)):
        if lines[extra].strip(" \t\f\x0b"):
            problems.append(
                Problem(extra + 1, PROBLEM_KIND, f"unexpected line after topic_id (Kafka ignores it): {lines[extra]}")
            )

    table = pa.table(
        {
            "path": pa.array([path], pa.string()),
            "version": pa.array([version], pa.int32()),
            "topic_id": pa.array([topic_id], pa.string()),
            "topic_uuid": pa.array([topic_uuid], pa.string()),
        },
        schema=SCHEMA,
    )
    return Parsed(table, problems_table(path, problems))
