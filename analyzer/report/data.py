"""Load an output DIR (findings.json, run.json, Parquet tables) into plain Python and pandas.

Why a separate loader: ``report DIR`` must re-render quickly and without Spark or Java, and every
input may be missing, empty or half-written (a crashed run, an older version, a partial copy).
Everything here is tolerant: a table that cannot be read becomes ``None`` plus a note that the
renderers turn into a sentence, never an exception. Except findings.json: without it there is no
verdict to give (``ingest`` writes none), so its absence is a ``ReportError``.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds

from jobs.errors import InputError
from jobs.findings.kinds import ACKED_DATA_LOSS
from jobs.findings.severity import SEVERITIES, SEVERITY_RANK

from .era import Era, guess_era
from .timeline import Event, load_timeline

# Tables the report reads, in the order the "missing tables" sentence lists them.
TABLES = ("brokers", "files", "replica_logs", "offset_ranges", "epoch_lineage", "problems", "meta_properties", "restart_preview",
          "remote_segments")
# meta_properties only sharpens the era guess; restart_preview is absent from DIRs analyzed before it existed;
# remote_segments only where tiered storage's __remote_log_metadata was collected
OPTIONAL_TABLES = frozenset({"meta_properties", "restart_preview", "remote_segments"})


class ReportError(InputError, ValueError):
    """The DIR holds nothing a report can be made of, or the report cannot be written where it was
    asked to go (the CLI turns this into exit 2)."""


PartitionKey = tuple[str, int]


@dataclass
class ReportData:
    """Everything the renderers need, already loaded; renderers do no I/O of their own."""

    out_dir: Path
    findings_doc: dict[str, Any]
    findings: list[dict[str, Any]]
    findings_json: str  # findings.json as it is on disk (what --format json prints)
    run: dict[str, Any] | None
    tables: dict[str, pd.DataFrame | None]
    notes: list[str] = field(default_factory=list)
    era: Era | None = None
    # Where the report says it lives: analyze renders in a staging sibling that becomes out_dir.
    shown_dir: Path | None = None
    # The incident timeline (tables/timeline), per partition in time order; {} for older DIRs.
    timeline: dict[PartitionKey, list[Event]] = field(default_factory=dict)

    def table(self, name: str) -> pd.DataFrame | None:
        """The table, or None when it is missing or empty (callers then say so)."""
        df = self.tables.get(name)
        return df if df is not None and len(df) else None

    @property
    def missing_tables(self) -> list[str]:
        """Tables absent or unreadable (an empty table, e.g. no parser problems, is not missing)."""
        return [name for name in TABLES if name not in OPTIONAL_TABLES and self.tables.get(name) is None]


def _plain_columns(table: pa.Table) -> pa.Table:
    """Hive partition columns come back dictionary-encoded; pandas would make them Categorical,
    which breaks grouping and comparisons, so decode them to their value type."""
    for i, f in enumerate(table.schema):
        if pa.types.is_dictionary(f.type):
            table = table.set_column(i, f.name, table.column(i).cast(f.type.value_type))
    return table


def read_table(out_dir: Path, name: str, columns: list[str] | None = None) -> pd.DataFrame | None:
    """Read ``DIR/tables/<name>/`` (plain or Hive-partitioned Parquet) into pandas, or None.

    Only columns that exist are requested, so an older or newer table layout still loads."""
    path = out_dir / "tables" / name
    if not path.exists():
        return None
    dataset = ds.dataset(path, format="parquet", partitioning="hive")
    wanted = None if columns is None else [c for c in columns if c in dataset.schema.names]
    table = _plain_columns(dataset.to_table(columns=wanted))
    return table.to_pandas()


def batch_magics(out_dir: Path) -> set[int]:
    """The message-format versions present in ``batches``, from Parquet statistics when possible
    (so the era guess never scans a table of millions of batches)."""
    path = out_dir / "tables" / "batches"
    if not path.exists():
        return set()
    try:
        dataset = ds.dataset(path, format="parquet", partitioning="hive")
        if "magic" not in dataset.schema.names:
            return set()
        seen: set[int] = set()
        for fragment in dataset.get_fragments():
            md = fragment.metadata
            col = md.schema.names.index("magic") if "magic" in md.schema.names else None
            for rg in range(md.num_row_groups):
                stats = md.row_group(rg).column(col).statistics if col is not None else None
                if stats is None or not stats.has_min_max:
                    return {int(m) for m in dataset.to_table(columns=["magic"]).column("magic").unique().to_pylist() if m is not None}
                seen.update(range(int(stats.min), int(stats.max) + 1))
        return seen
    except (OSError, pa.ArrowException, ValueError):
        return set()


def _read_json(path: Path, notes: list[str]) -> tuple[dict[str, Any] | None, str]:
    """The JSON object in ``path`` and the file's text; (None, ...) and a note when it is none."""
    if not path.exists():
        return None, ""
    try:
        text = path.read_text(encoding="utf-8")
        doc = json.loads(text)
    except (OSError, ValueError) as exc:
        notes.append(f"{path.name} could not be read ({exc.__class__.__name__}: {exc}).")
        return None, ""
    if not isinstance(doc, dict):
        notes.append(f"{path.name} is not a JSON object; ignored.")
        return None, text
    return doc, text


def not_analyzed(out_dir: Path, run: dict[str, Any] | None) -> str:
    """The line for a DIR without findings.json (``ingest`` wrote it, or it is no output DIR at
    all): the jobs never ran on it, so no verdict can be given; say how to run them."""
    run = run or {}
    inputs = run.get("inputs") or (run.get("input") or {}).get("paths") or []
    given = " ".join(shlex.quote(str(p)) for p in inputs) if isinstance(inputs, list) and inputs else "INPUT..."
    what = "no findings.json: ingest wrote it" if "ingest" in run and "findings" not in run else "no findings.json"
    return (f"the analysis has not run on {out_dir} ({what}); run "
            f"`kafka-forensics analyze {given} --out {shlex.quote(str(out_dir))}`")


def load(out_dir: Path | str) -> ReportData:
    """Load DIR. Raises ReportError when DIR has no readable findings.json: without the jobs'
    findings any verdict, "Clean" above all, would be a guess."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise ReportError(f"{out_dir}: not a directory")
    notes: list[str] = []
    run, _ = _read_json(out_dir / "run.json", notes)
    if not (out_dir / "findings.json").is_file():
        raise ReportError(not_analyzed(out_dir, run))
    doc, text = _read_json(out_dir / "findings.json", notes)
    if doc is None:
        raise ReportError(f"{out_dir}: {notes[-1]}")
    tables: dict[str, pd.DataFrame | None] = {}
    for name in TABLES:
        try:
            tables[name] = read_table(out_dir, name)
        except (OSError, pa.ArrowException, ValueError) as exc:
            notes.append(f"Table {name} could not be read ({exc.__class__.__name__}); not rendered.")
            tables[name] = None
    timeline = load_timeline(out_dir, notes)
    findings = [f for f in doc.get("findings") or [] if isinstance(f, dict)]
    data = ReportData(out_dir=out_dir, findings_doc=doc, findings=findings, findings_json=text, run=run, tables=tables, notes=notes,
                      timeline=timeline)
    data.era = guess_era(data.table("files"), data.table("brokers"), data.table("meta_properties"), batch_magics(out_dir))
    return data


# ---- derived views shared by the text and HTML renderers -------------------------------------


def severity_of(finding: dict[str, Any]) -> str:
    sev = str(finding.get("severity") or "info").lower()
    return sev if sev in SEVERITY_RANK else "info"


def partition_key(finding: dict[str, Any]) -> PartitionKey | None:
    topic, part = finding.get("topic"), finding.get("partition")
    if topic is None or part is None:
        return None
    return (str(topic), int(part))


def partition_name(key: PartitionKey | None) -> str:
    return "cluster-wide" if key is None else f"{key[0]}-{key[1]}"


def findings_by_partition(findings: list[dict[str, Any]]) -> dict[PartitionKey | None, list[dict[str, Any]]]:
    """Findings grouped by partition (None = cluster-wide), worst partitions first, and inside a
    partition by severity then offset, so the first lines read are the ones that matter."""
    groups: dict[PartitionKey | None, list[dict[str, Any]]] = {}
    for f in findings:
        groups.setdefault(partition_key(f), []).append(f)
    for items in groups.values():
        items.sort(key=lambda f: (SEVERITY_RANK[severity_of(f)], f.get("first_offset") is None, f.get("first_offset") or 0, str(f.get("kind"))))

    def rank(item: tuple[PartitionKey | None, list[dict[str, Any]]]):
        key, items = item
        worst = min(SEVERITY_RANK[severity_of(f)] for f in items)
        return (worst, -sum(severity_of(f) == SEVERITIES[worst] for f in items), key is not None, key or ("", 0))

    return dict(sorted(groups.items(), key=rank))


def all_partitions(data: ReportData) -> list[PartitionKey]:
    """Every partition any table or finding mentions, sorted by topic then number."""
    keys: set[PartitionKey] = set()
    for name in ("replica_logs", "offset_ranges", "epoch_lineage"):
        df = data.table(name)
        if df is not None and {"topic", "partition"} <= set(df.columns):
            pairs = df[["topic", "partition"]].dropna().drop_duplicates()
            keys.update((str(t), int(p)) for t, p in pairs.itertuples(index=False))
    if not keys:
        df = data.table("files")
        if df is not None and {"topic", "partition"} <= set(df.columns):
            pairs = df[["topic", "partition"]].dropna().drop_duplicates()
            keys.update((str(t), int(p)) for t, p in pairs.itertuples(index=False))
    keys.update(k for k in map(partition_key, data.findings) if k is not None)
    keys.update(data.timeline)  # e.g. a deleted topic that only the metadata log still remembers
    return sorted(keys)


def overview(data: ReportData) -> dict[str, Any]:
    """Cluster overview numbers, each from the best table that has it (brokers, then files, then
    replica_logs); values that no table provides are None and rendered as 'unknown'."""
    brokers_df, files_df, replicas_df = data.table("brokers"), data.table("files"), data.table("replica_logs")
    broker_ids: set[int] = set()
    log_dirs: set[tuple[int, str]] = set()
    cluster_ids: set[str] = set()
    for df in (brokers_df, files_df, replicas_df):
        if df is not None and "broker" in df.columns:
            broker_ids.update(int(b) for b in df["broker"].dropna().unique())
    if brokers_df is not None:
        if "cluster_id" in brokers_df.columns:
            cluster_ids.update(str(c) for c in brokers_df["cluster_id"].dropna().unique())
        if "log_dirs" in brokers_df.columns:
            for b, dirs in zip(brokers_df["broker"], brokers_df["log_dirs"]):
                for d in _as_list(dirs):
                    log_dirs.add((int(b), str(d)))
    if not log_dirs and files_df is not None and {"broker", "log_dir"} <= set(files_df.columns):
        log_dirs.update((int(b), str(d)) for b, d in files_df[["broker", "log_dir"]].dropna().drop_duplicates().itertuples(index=False))
    partitions = all_partitions(data)
    topics = sorted({t for t, _ in partitions})
    total_bytes = None
    n_files = None
    if files_df is not None and "size" in files_df.columns:
        total_bytes, n_files = int(files_df["size"].fillna(0).sum()), len(files_df)
    elif brokers_df is not None and "bytes" in brokers_df.columns:
        total_bytes = int(brokers_df["bytes"].fillna(0).sum())
    problems_df = data.tables.get("problems")
    problems = None
    if problems_df is not None:
        kinds = problems_df["kind"].fillna("unknown").value_counts() if "kind" in problems_df.columns and len(problems_df) else {}
        problems = {"total": len(problems_df), "by_kind": {str(k): int(v) for k, v in dict(kinds).items()}}
    summary = data.findings_doc.get("summary") or {}
    counts = {sev: sum(severity_of(f) == sev for f in data.findings) for sev in SEVERITIES}
    return {
        "brokers": sorted(broker_ids),
        "log_dirs": len(log_dirs) if log_dirs else None,
        "cluster_ids": sorted(cluster_ids),
        "topics": topics,
        "partitions": len(partitions),
        "files": n_files,
        "bytes": total_bytes,
        "era": data.era,
        "counts": counts,
        "records_lost": summary.get("records_lost", sum(int(f.get("records") or 0) for f in data.findings if f.get("kind") == ACKED_DATA_LOSS)),
        "inputs": _inputs(data),
        "focus": focus_text(data.findings_doc.get("input")),
        "master": (data.run or {}).get("master"),
        "problems": problems,  # None when the problems table is missing
        "input_changes": (data.findings_doc.get("input") or {}).get("changed_during_run") or {},  # a live input
    }


def focus_text(info: Any) -> str | None:
    """``analyze --topic/--partition``, or a focused collection: the partitions the analysis was
    limited to, in words (None when it read everything), so no reader takes a focused report for
    the whole cluster's; and what the focused collections left out (a log that starts at a
    collection's --since cut started earlier on the broker)."""
    focus = info.get("focus") if isinstance(info, dict) else None
    if not isinstance(focus, dict):
        return None
    topics = ", ".join(map(str, focus.get("topics") or [])) or "all"
    partitions = ", ".join(map(str, focus.get("partitions") or [])) or "all"
    text = (f"only topics {topics}, partitions {partitions} (internal topics always read)" if (topics, partitions) != ("all", "all")
            else "every partition")
    collected = [c for c in focus.get("collected") or [] if isinstance(c, dict)]
    if collected:
        text += f"; {len(collected)} input{'s' if len(collected) > 1 else ''} collected focused"
        if len({(tuple(c.get("topics") or []), tuple(c.get("partitions") or [])) for c in collected}) > 1:
            text += " on different partitions (read: only those every one kept)"
        sinces = sorted({str(c["since"]) for c in collected if c.get("since")})
        if sinces:
            text += (f", without the segments older than {' / '.join(sinces)} (each log read starts at its oldest segment "
                     "kept, not at the broker's log start)")
        if any(c.get("consumer_offsets") is False for c in collected):
            text += ", without __consumer_offsets"
        left = [c.get("left_out") or {} for c in collected]
        parts, segs = sum(x.get("partitions", 0) for x in left), sum(x.get("segments", 0) for x in left)
        size = sum(x.get("partition_bytes", 0) + x.get("segment_bytes", 0) for x in left)
        text += f": {parts} partition folders and {segs} segments ({human_bytes(size)}) left out, as COLLECT.txt lists"
    return text


def _inputs(data: ReportData) -> list[str]:
    """Input roots from run.json or findings.json's ``input`` (``{"paths": [...]}`` or a list)."""
    for source in (data.run or {}, data.findings_doc):
        for key in ("input", "inputs", "input_roots", "roots"):
            value = source.get(key) if isinstance(source, dict) else None
            if isinstance(value, dict):
                value = value.get("paths") or value.get("roots") or value.get("inputs")
            if value:
                return [str(v) for v in _as_list(value)]
    return []


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    if hasattr(value, "tolist"):
        return list(value.tolist())
    return [value]


def as_list(value: Any) -> list[Any]:
    """Parquet arrays arrive as numpy arrays, JSON arrays as lists, absent ones as None/NaN."""
    if isinstance(value, float) and value != value:
        return []
    return _as_list(value)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "unknown"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
