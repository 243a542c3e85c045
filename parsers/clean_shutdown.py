"""A log dir's ``.kafka_cleanshutdown`` marker: ``CleanShutdownFileHandler``.

    .kafka_cleanshutdown
      Kafka 0.8 .. 3.6     => empty file (existence is the whole message)
      Kafka 3.7+ (KIP-966) => JSON {"version":0,"brokerEpoch":<int64>}
      (short-lived variants, read too: JSON {"version":"0","broker_epoch":"<n>"} with string
       values, and the text form "version: 0\\nbrokerEpoch: <n>")

The broker writes this file as the last step of a clean shutdown and deletes it on startup,
so its presence means "this log dir was closed cleanly and needs no recovery"; its absence
on a broker (not a KRaft controller, which never writes it) means ``unclean_shutdown``.
The broker epoch (KIP-966) lets the controller tell a clean restart from an unclean one.

Kafka's reader only logs when the content does not parse and still treats the shutdown as
clean, with no epoch. We return the same row (nulls where unknown) but also report a
``checkpoint_malformed`` problem at line 1, since a garbled marker is evidence of damage.
The version is not checked (the JSON reader ignores it), so a newer Kafka's marker is no fault;
a JSON object without a broker epoch is (Kafka's reader fails on it: it is some other JSON file).
An empty file is the normal pre-3.7 form: one row of nulls, no problem.
"""

from __future__ import annotations

import json
import re

import pyarrow as pa

from ._java import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN
from .common import Parsed, Problem, problems_table

CURRENT_VERSION = 0  # CleanShutdownFileHandler.CURRENT_VERSION
PROBLEM_KIND = "checkpoint_malformed"
FIRST_LINE = 1

# The Scala handler's text form: "version: 0" / "brokerEpoch: 12", split on ":\\s+".
_TEXT_FORM = re.compile(r"version:[ \t\f\x0b]+(\S+)\r?\n+brokerEpoch:[ \t\f\x0b]+(\S+)\s*\Z")

SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("version", pa.int32()),  # null for the empty (pre-3.7) marker
        pa.field("broker_epoch", pa.int64()),  # null when absent
    ]
)


def _reject_constant(name: str) -> float:
    raise ValueError(f"invalid JSON number {name}")


def _to_int(value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or value is None:
        raise ValueError(f"not an integer: {value!r}")
    if isinstance(value, str):
        if re.fullmatch(r"[+-]?[0-9]+", value) is None:
            raise ValueError(f"not an integer: {value!r}")
        value = int(value)
    if not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"not an integer in range: {value!r}")
    return value


def _read(text: str) -> tuple[int | None, int | None]:
    """(version, broker epoch) from any of the written forms; ValueError if none fits."""
    match = _TEXT_FORM.match(text)
    if match is not None:
        return _to_int(match.group(1), INT_MIN, INT_MAX), _to_int(match.group(2), LONG_MIN, LONG_MAX)
    content = json.loads(text, parse_constant=_reject_constant)
    if not isinstance(content, dict):
        raise ValueError(f"expected a JSON object, found {type(content).__name__}")
    version = content.get("version")
    epoch = content.get("brokerEpoch", content.get("broker_epoch"))
    if epoch is None:  # every JSON form Kafka writes has one; its readers fail without it
        raise ValueError(f"no brokerEpoch in {sorted(content)[:8]}")
    return (
        None if version is None else _to_int(version, INT_MIN, INT_MAX),
        _to_int(epoch, LONG_MIN, LONG_MAX),
    )


def parse(data: bytes | memoryview, path: str) -> Parsed:
    """Read the clean-shutdown marker into one row; never raises."""
    raw = bytes(data)
    version: int | None = None
    epoch: int | None = None
    problems: list[Problem] = []
    # Utils.readFileAsString decodes UTF-8 with replacement, like errors="replace"
    text = raw.decode("utf-8", errors="replace")
    if text.strip():
        try:
            version, epoch = _read(text)
        except (ValueError, RecursionError) as exc:
            problems.append(
                Problem(FIRST_LINE, PROBLEM_KIND, f"Fail to read the clean shutdown file: {exc}")
            )
    table = pa.table(
        {
            "path": pa.array([path], pa.string()),
            "version": pa.array([version], pa.int32()),
            "broker_epoch": pa.array([epoch], pa.int64()),
        },
        schema=SCHEMA,
    )
    return Parsed(table, problems_table(path, problems))
