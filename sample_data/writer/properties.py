"""Small text/marker files: ``meta.properties``, ``partition.metadata``, ``.kafka_cleanshutdown``.

    meta.properties (MetaProperties -> PropertiesUtils.writePropertiesFile -> Properties.store)
      "#" "\\n" "#" <java.util.Date.toString()> "\\n", then key=value lines in the iteration
      order of the Properties' internal ConcurrentHashMap (capacity 16 for these few keys):
      by bucket (String.hashCode, spread) then insertion order.
      v0 => version=0 broker.id=<id> [cluster.id] ; v1 => version=1 node.id=<id> cluster.id [directory.id]
    partition.metadata (PartitionMetadataFile) => "version: 0\\ntopic_id: <base64url Uuid>" (no final newline)
    .kafka_cleanshutdown (CleanShutdownFileHandler) => empty before 3.7;
      {"version":0,"brokerEpoch":<n>} (Jackson, field order as declared) from 3.7

Why emulate Java's map order: so the files are byte-identical to a broker's, which is what
the golden tests check (apart from the date comment, which is the wall clock).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

PARTITION_METADATA_VERSION = 0
CLEAN_SHUTDOWN_VERSION = 0
META_PROPERTIES_FILE = "meta.properties"
PARTITION_METADATA_FILE = "partition.metadata"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CHM_CAPACITY = 16  # Properties() -> new ConcurrentHashMap<>(8) -> table of 16
DEFAULT_WRITTEN_AT = datetime(2025, 1, 1, tzinfo=UTC)  # deterministic date comment unless told otherwise
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def java_string_hash(s: str) -> int:
    """String.hashCode over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _chm_bucket(key: str) -> int:
    h = java_string_hash(key) & 0xFFFFFFFF
    return ((h ^ (h >> 16)) & 0x7FFFFFFF) & (CHM_CAPACITY - 1)


def java_date(dt: datetime) -> str:
    """java.util.Date.toString() in UTC: 'Sun Nov 22 18:16:11 UTC 2026'."""
    dt = dt.astimezone(UTC)
    return f"{_DAYS[dt.weekday()]} {_MONTHS[dt.month - 1]} {dt.day:02d} {dt:%H:%M:%S} UTC {dt.year}"


def _escape(s: str, is_key: bool) -> str:
    """Properties.saveConvert with escUnicode=false (store(Writer))."""
    out = []
    for i, c in enumerate(s):
        if c == " ":
            out.append("\\ " if is_key or i == 0 else " ")
        elif c in "\\=:#!":
            out.append("\\" + c)
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        else:
            out.append(c)
    return "".join(out)


def properties_text(props: dict[str, str], written_at: datetime = DEFAULT_WRITTEN_AT) -> str:
    """``Properties.store(writer, "")`` of ``props`` (inserted in dict order)."""
    order = {k: i for i, k in enumerate(props)}
    keys = sorted(props, key=lambda k: (_chm_bucket(k), order[k]))
    lines = ["#", "#" + java_date(written_at)] + [
        f"{_escape(k, True)}={_escape(v, False)}" for k, v in ((k, props[k]) for k in keys)
    ]
    return "".join(line + "\n" for line in lines)


def meta_properties_text(
    node_id: int, cluster_id: str, directory_id: str | None = None, version: int = 1, written_at: datetime = DEFAULT_WRITTEN_AT
) -> str:
    """A log dir's meta.properties as ``MetaProperties.toProperties`` + ``writePropertiesFile`` write it."""
    if version not in (0, 1):
        raise ValueError(f"meta.properties version must be 0 or 1, not {version}")
    props = {"version": str(version)}
    if cluster_id is not None:
        props["cluster.id"] = cluster_id
    props["broker.id" if version == 0 else "node.id"] = str(node_id)
    if directory_id is not None:
        props["directory.id"] = directory_id
    return properties_text(props, written_at)


def partition_metadata_text(topic_id: str) -> str:
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {topic_id}"


def clean_shutdown_bytes(broker_epoch: int | None = None) -> bytes:
    """The marker's content: empty (pre-3.7) when ``broker_epoch`` is None, else KIP-966 JSON."""
    if broker_epoch is None:
        return b""
    return json.dumps({"version": CLEAN_SHUTDOWN_VERSION, "brokerEpoch": broker_epoch}, separators=(",", ":")).encode()
