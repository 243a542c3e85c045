"""A KRaft node's ``__cluster_metadata-0/quorum-state``: ``FileQuorumStateStore``.

    quorum-state => one line of JSON: QuorumStateData (QuorumStateDataJsonConverter) + data_version
      data_version 0 => clusterId:string leaderId:int32 leaderEpoch:int32 votedId:int32
                        appliedOffset:int64 currentVoters:[{voterId:int32}]|null
      data_version 1 => leaderId:int32 leaderEpoch:int32 votedId:int32 votedDirectoryId:Uuid
                        (KIP-853: the voters live in the metadata log instead)

What the node last knew of its Raft election: the leader and epoch it followed, whom it voted
for. Forensically it places a node in the controller quorum's history next to the metadata log.

Kafka's reader (mirrored): the first line only (``readLine``; none is "File ended
prematurely."), it must be a JSON object with a ``data_version`` between 0 and 1, and the
converter needs every field of that version. Each fault is a ``checkpoint_malformed`` problem
at line 1; the row keeps whatever did parse (null for the rest), as for the other checkpoints.
"""

from __future__ import annotations

import json

import pyarrow as pa

from ._java import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, decode_utf8, split_lines
from .common import Parsed, Problem, problems_table

PROBLEM_KIND = "checkpoint_malformed"
FIRST_LINE = 1
DATA_VERSION = "data_version"  # FileQuorumStateStore.DATA_VERSION
LOWEST_SUPPORTED_VERSION, HIGHEST_SUPPORTED_VERSION = 0, 1

SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("data_version", pa.int16()),
        pa.field("cluster_id", pa.string()),  # v0 only (Kafka writes "")
        pa.field("leader_id", pa.int32()),  # -1: no known leader
        pa.field("leader_epoch", pa.int32()),
        pa.field("voted_id", pa.int32()),  # -1: no vote in this epoch
        pa.field("voted_directory_id", pa.string()),  # v1 only
        pa.field("applied_offset", pa.int64()),  # v0 only
        pa.field("current_voters", pa.list_(pa.int32())),  # v0 only; null when written as null
    ]
)

_INT32 = (INT_MIN, INT_MAX)
_INT64 = (LONG_MIN, LONG_MAX)
# JSON name -> (column, range or None for a string, the data versions that carry it)
FIELDS = {
    "clusterId": ("cluster_id", None, (0,)),
    "leaderId": ("leader_id", _INT32, (0, 1)),
    "leaderEpoch": ("leader_epoch", _INT32, (0, 1)),
    "votedId": ("voted_id", _INT32, (0, 1)),
    "votedDirectoryId": ("voted_directory_id", None, (1,)),
    "appliedOffset": ("applied_offset", _INT64, (0,)),
}


def _is_int(value: object, bounds: tuple[int, int]) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and bounds[0] <= value <= bounds[1]


def _reject_constant(name: str) -> float:
    raise ValueError(f"invalid JSON number {name}")


def _read_object(raw: bytes, problems: list[Problem]) -> dict | None:
    """The first line as a JSON object, or None (and a problem) where Kafka's reader throws."""
    text, bad_utf8 = decode_utf8(raw)
    if bad_utf8 is not None:
        problems.append(Problem(bad_utf8[0], PROBLEM_KIND, bad_utf8[1]))
    lines = split_lines(text)
    if not lines:
        problems.append(Problem(FIRST_LINE, PROBLEM_KIND, "EOFException: File ended prematurely."))
        return None
    try:
        node = json.loads(lines[0], parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        problems.append(Problem(FIRST_LINE, PROBLEM_KIND, f"not JSON: {exc} (Kafka cannot read this file)"))
        return None
    if not isinstance(node, dict):
        problems.append(Problem(FIRST_LINE, PROBLEM_KIND, f"Deserialized node is a JSON {type(node).__name__}, not an object node"))
        return None
    return node


def _voters(value: object, problems: list[Problem]) -> list[int] | None:
    """``currentVoters``: a list of {"voterId": int32} (null allowed)."""
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(v, dict) and _is_int(v.get("voterId"), _INT32) for v in value):
        return [v["voterId"] for v in value]
    problems.append(Problem(FIRST_LINE, PROBLEM_KIND, f"currentVoters is not a list of {{\"voterId\": int32}}: {value!r}"[:300]))
    return None


def parse(data: bytes | memoryview, path: str) -> Parsed:
    """Read one ``quorum-state`` into one row; never raises."""
    problems: list[Problem] = []
    row: dict[str, object] = {name: None for name in SCHEMA.names}
    row["path"] = path
    node = _read_object(bytes(data), problems)
    if node is not None:
        version = node.get(DATA_VERSION)
        if version is None:
            problems.append(Problem(FIRST_LINE, PROBLEM_KIND, f"Deserialized node does not have {DATA_VERSION} field"))
        elif not _is_int(version, (LOWEST_SUPPORTED_VERSION, HIGHEST_SUPPORTED_VERSION)):
            problems.append(
                Problem(FIRST_LINE, PROBLEM_KIND, f"{DATA_VERSION} ({version!r}) is not within the min (0) and max (1) supported version")
            )
        else:
            row["data_version"] = version
        for name, (column, bounds, versions) in FIELDS.items():
            value = node.get(name)
            if name not in node:
                if row["data_version"] in versions:
                    problems.append(Problem(FIRST_LINE, PROBLEM_KIND, f"QuorumStateData: unable to locate field '{name}', which is mandatory in version {version}"))
            elif bounds is None and isinstance(value, str) or bounds is not None and _is_int(value, bounds):
                row[column] = value
            else:
                problems.append(Problem(FIRST_LINE, PROBLEM_KIND, f"QuorumStateData: {name} has the wrong type or range: {value!r}"[:300]))
        if "currentVoters" in node:
            row["current_voters"] = _voters(node["currentVoters"], problems)
        elif row["data_version"] == 0:
            problems.append(Problem(FIRST_LINE, PROBLEM_KIND, "QuorumStateData: unable to locate field 'currentVoters', which is mandatory in version 0"))
    table = pa.Table.from_pylist([row], schema=SCHEMA)
    return Parsed(table, problems_table(path, problems))
