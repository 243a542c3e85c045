"""The per-partition incident timeline (``DIR/tables/timeline/``) as the report shows it.

Why its own loader: the table joins metadata-log records, broker-log lines, leader-epoch
checkpoints and consumer commits, and is the one place where "who led when" lives; the report
shows it under each partition's offset figure and quotes its alarming rows in the terminal.
It is read with pyarrow straight into Python values (not pandas), because pandas turns nullable
int32/int64 columns into floats and offsets must stay exact. Older DIRs have no such table: that
is not an error, the report simply shows no timeline. Rows are re-sorted here by (time, nulls
last; seq), so the order does not depend on how Spark split the table into files.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from jobs.findings.severity import SEVERITIES

TABLE = "timeline"
COLUMNS = ("topic", "partition", "time", "source", "node", "event", "leader", "leader_epoch", "offset", "isr", "election",
           "severity", "detail", "path", "position", "seq")

Event = dict[str, Any]
PartitionKey = tuple[str, int]


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _time(value: Any) -> datetime | None:
    """UTC datetime; a naive value (timestamp without zone) is taken as UTC, epoch millis too."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, (int, float)) and value == value:
        try:
            return datetime.fromtimestamp(value / 1000, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def highlight(severity: str | None, election: str | None) -> str | None:
    """The row's colour class: its severity; an unclean election is an error even if unlabelled."""
    if severity in SEVERITIES:
        return severity
    return "error" if election == "unclean" else None


def normalise(row: dict[str, Any]) -> Event | None:
    """One Parquet row as plain, typed Python values, or None when it names no partition."""
    topic, part = _str(row.get("topic")), _int(row.get("partition"))
    if topic is None or part is None:
        return None
    severity = (_str(row.get("severity")) or "").lower() or None
    election = (_str(row.get("election")) or "").lower() or None
    isr = row.get("isr")
    return {
        "topic": topic, "partition": part, "time": _time(row.get("time")),
        "source": _str(row.get("source")), "node": _int(row.get("node")), "event": _str(row.get("event")) or "event",
        "leader": _int(row.get("leader")), "leader_epoch": _int(row.get("leader_epoch")), "offset": _int(row.get("offset")),
        "isr": [int(b) for b in isr if b is not None] if isinstance(isr, (list, tuple)) else None,
        "election": election, "severity": severity if severity in SEVERITIES else None,
        "highlight": highlight(severity, election),
        "detail": _str(row.get("detail")) or "", "path": _str(row.get("path")), "position": _int(row.get("position")),
        "seq": _int(row.get("seq")),
    }


def order_key(event: Event) -> tuple:
    """(time, nulls last; seq, nulls last): the table's documented order within a partition; then
    source, node, path and position, so the order never depends on how the files were split."""
    t = event["time"]
    return (t is None, t or datetime.min.replace(tzinfo=UTC), event["seq"] is None, event["seq"] or 0,
            event["source"] or "", event["node"] if event["node"] is not None else -1, event["path"] or "", event["position"] or 0)


def load_timeline(out_dir: Path, notes: list[str]) -> dict[PartitionKey, list[Event]]:
    """Timeline rows per partition, each list in time order; {} when the table is absent.
    Unreadable tables add a note instead of raising; rows without topic/partition are skipped."""
    path = out_dir / "tables" / TABLE
    if not path.exists():
        return {}
    try:
        dataset = ds.dataset(path, format="parquet", partitioning="hive")
        names = set(dataset.schema.names)
        if not {"topic", "partition"} <= names:
            notes.append("Table timeline has no topic/partition columns; not shown.")
            return {}
        table = dataset.to_table(columns=[c for c in COLUMNS if c in names])
        for i, f in enumerate(table.schema):  # Hive partition columns come back dictionary-encoded
            if pa.types.is_dictionary(f.type):
                table = table.set_column(i, f.name, table.column(i).cast(f.type.value_type))
        rows = table.to_pylist()
    except (OSError, pa.ArrowException, ValueError) as exc:
        notes.append(f"Table timeline could not be read ({exc.__class__.__name__}); no incident timeline shown.")
        return {}
    out: dict[PartitionKey, list[Event]] = {}
    for row in rows:
        event = normalise(row)
        if event is not None:
            out.setdefault((event["topic"], event["partition"]), []).append(event)
    for events in out.values():
        events.sort(key=order_key)  # stable: rows of one record (same key) keep the table's own order
        settle_final_shutdown(events)
    return out


SHUTDOWN_EVENTS = frozenset({"controlled_shutdown", "shutdown"})  # metadata record / broker log line
OFFLINE_WORDS = "no leader: partition offline"


def final_shutdown(events: list[Event]) -> tuple[Event, int] | None:
    """The row that only says the cluster was stopped cleanly at the end, and the leader that
    stopped, if any: the partition's last leader change leaves it without a leader (``offline``)
    right as that leader shut down in a controlled way (its controlled-shutdown record or shutdown
    log line, after it became leader and no later than the change). Nothing came after, so there
    was no outage to see: every benign collection taken after a clean stop ends like this. An
    offline period followed by a new leader, or a leader fenced (killed) rather than shut down, is not this."""
    changes = [e for e in events if e["source"] == "metadata" and e["election"] is not None]
    if not changes or changes[-1]["election"] != "offline" or changes[-1]["time"] is None:
        return None
    last = changes[-1]
    elected = [e for e in changes[:-1] if e["leader"] is not None and e["leader"] >= 0]
    if not elected:
        return None
    leader, since = elected[-1]["leader"], elected[-1]["time"]
    stopped = any(e["event"] in SHUTDOWN_EVENTS and e["node"] == leader and e["time"] is not None
                  and (since is None or e["time"] >= since) and e["time"] <= last["time"] for e in events)
    return (last, leader) if stopped else None


def settle_final_shutdown(events: list[Event]) -> None:
    """Show the final clean stop as what it is (``final shutdown``, not highlighted) instead of an
    alarming "partition offline" row; the table keeps Kafka's own record of it."""
    found = final_shutdown(events)
    if found is None:
        return
    row, leader = found
    said = f"no leader after broker {leader}'s controlled shutdown, the last change before collection: a clean stop, not an outage"
    row.update(election="final shutdown", severity=None, highlight=None,
               detail=row["detail"].replace(OFFLINE_WORDS, said) if OFFLINE_WORDS in row["detail"] else f"{row['detail']}; {said}")


# ---- wording shared by the terminal and the HTML ---------------------------------------------


def time_text(t: datetime | None) -> str:
    """'2026-11-22 19:11:16.317' (UTC, to the millisecond), '' when unknown."""
    if t is None:
        return ""
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def leader_epoch_text(event: Event) -> str:
    """'2 / e2', 'none / e1' for leader -1 (no leader), 'e2' or '2' when one side is unknown."""
    leader, epoch = event["leader"], event["leader_epoch"]
    who = None if leader is None else ("none" if leader < 0 else str(leader))
    parts = [p for p in (who, None if epoch is None else f"e{epoch}") if p is not None]
    return " / ".join(parts)


def event_text(event: Event) -> str:
    """The event name, with the election kind when the name does not already say it."""
    name, election = event["event"], event["election"]
    return f"{name} ({election})" if election and election not in name else name


def evidence_text(event: Event) -> str:
    """'server-logs/node-1-server.log.gz:812' (path relative to the input root, then byte or line)."""
    if not event["path"]:
        return ""
    return event["path"] + (f":{event['position']}" if event["position"] is not None else "")


def where_text(event: Event) -> str:
    """'node 100 metadata' — which node and which source the fact comes from."""
    return " ".join(p for p in (f"node {event['node']}" if event["node"] is not None else "", event["source"] or "") if p)


def alarming(events: list[Event]) -> list[Event]:
    """Rows worth an operator's attention in the terminal: those with a severity (or unclean)."""
    return [e for e in events if e["highlight"] is not None]
