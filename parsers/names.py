"""File and directory names in a Kafka log dir: which kind of file is this, and whose?

Mirrors the naming rules of Kafka's ``LogFileUtils`` (segment files), ``LocalLog``
(partition directories and their ``-delete`` / ``-future`` / ``-stray`` variants),
``Snapshots`` (KRaft metadata snapshots) and the fixed names of the log-dir level files::

    SegmentFileName    => BaseOffset:decimal (zero-padded to 20 digits) "." Suffix [PendingSuffix]
      Suffix           => "log" | "index" | "timeindex" | "txnindex" | "snapshot"
      PendingSuffix    => ".deleted" | ".cleaned" | ".swap"
    KRaftSnapshotName  => EndOffset:20 digits "-" Epoch:10 digits ".checkpoint"
    PartitionDirName   => Topic "-" Partition:int32                      (live)
                        | Topic "-" Partition "." UniqueId "-delete"      (LocalLog.logDeleteDirName)
                        | Topic "-" Partition "." UniqueId "-future"      (LocalLog.logFutureDirName)
                        | Topic "-" Partition "." UniqueId "-stray"       (LocalLog.logStrayDirName)

Why this module exists: the kind of a file decides which parser reads it, and a file that
Kafka has renamed for deletion, cleaning or swapping (``.deleted``, ``.cleaned``, ``.swap``)
is not live data. Reading such a file as a live segment would invent duplicate or
divergent offsets, so those get their own ``pending_*`` kinds.
"""

from __future__ import annotations

import re
from typing import Literal

# Log-dir level files with fixed names (Kafka's constants in LogManager, ReplicaManager,
# LeaderEpochCheckpointFile, PartitionMetadataFile, MetaProperties, CleanShutdownFileHandler,
# QuorumStateStore, BootstrapDirectory, FileLock).
FIXED_NAMES: dict[str, str] = {
    "replication-offset-checkpoint": "replication_offset",
    "recovery-point-offset-checkpoint": "recovery_point",
    "log-start-offset-checkpoint": "log_start",
    "cleaner-offset-checkpoint": "cleaner",
    "leader-epoch-checkpoint": "leader_epoch",
    "partition.metadata": "partition_metadata",
    "meta.properties": "meta_properties",
    ".kafka_cleanshutdown": "clean_shutdown",
    "quorum-state": "quorum_state",
    "bootstrap.checkpoint": "bootstrap_checkpoint",
    ".lock": "lock",
}

# The four offset checkpoints (OffsetCheckpointFile), by kind.
OFFSET_CHECKPOINT_KINDS = frozenset({"replication_offset", "recovery_point", "log_start", "cleaner"})

# Segment-family suffixes (LogFileUtils.*_FILE_SUFFIX) -> kind.
SEGMENT_SUFFIXES: dict[str, str] = {
    "log": "segment",
    "index": "offset_index",
    "timeindex": "time_index",
    "txnindex": "txn_index",
    "snapshot": "producer_snapshot",
}

# Suffixes Kafka appends while a file is on its way out or in (LogFileUtils.DELETED_FILE_SUFFIX,
# CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX; Snapshots.DELETE_SUFFIX / PARTIAL_SUFFIX; the ".tmp"
# that CheckpointFile writes before its atomic move). None of these is live data.
PENDING_SUFFIXES: dict[str, str] = {
    ".deleted": "pending_delete",
    ".cleaned": "pending_clean",
    ".swap": "pending_swap",
    ".part": "pending_tmp",
    ".tmp": "pending_tmp",
}

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

# Kafka parses the part before the first '.' with Long.parseLong, so any run of digits works;
# the 20-digit padding is only how Kafka writes it.
_SEGMENT_RE = re.compile(r"([0-9]+)\.(log|index|timeindex|txnindex|snapshot)\Z")
_KRAFT_SNAPSHOT_RE = re.compile(r"([0-9]{20})-([0-9]{10})\.checkpoint\Z")
# Tiered storage's RemoteIndexCache (``<log dir>/remote-log-index-cache/``) names a remote
# segment's cached indexes ``<start offset>_<segment id>.index`` (.timeindex, .txnindex):
# generateFileNamePrefixForIndex, the id as Uuid.toString (22 base64url characters)
_REMOTE_INDEX_RE = re.compile(r"([0-9]+)_([A-Za-z0-9_-]{22})\.(index|timeindex|txnindex)\Z")

# LocalLog.DELETE_DIR_PATTERN etc.: "^(\S+)-(\S+)\.(\S+)" + suffix, matched against the whole name.
# Java's \S is "not [ \t\n\x0B\f\r]".
_NS = r"[^ \t\n\x0b\f\r]"
_SUFFIXED_DIR_RE = {
    state: re.compile(rf"({_NS}+)-({_NS}+)\.({_NS}+){suffix}\Z")
    for state, suffix in (("delete", "-delete"), ("future", "-future"), ("stray", "-stray"))
}
# Integer.parseInt accepts a leading '+' (and '-', which cannot occur after the last '-').
_PARTITION_RE = re.compile(r"\+?[0-9]+\Z")

PartitionState = Literal["live", "delete", "future", "stray"]


def _strip_pending(filename: str) -> tuple[str, str | None]:
    for suffix, kind in PENDING_SUFFIXES.items():
        if filename.endswith(suffix) and len(filename) > len(suffix):
            return filename[: -len(suffix)], kind
    return filename, None


def detect_kind(filename: str) -> str | None:
    """The kind of a Kafka file from its base name, or None when Kafka would not know it.

    Pending files (``00000000000000000000.log.deleted``, ``….cleaned``, ``….swap``,
    ``replication-offset-checkpoint.tmp``, a KRaft ``….checkpoint.part``) map to
    ``pending_delete`` / ``pending_clean`` / ``pending_swap`` / ``pending_tmp`` whatever they
    were before: Kafka deletes or completes them at the next start, so they never count as
    live data. A directory path is tolerated; only its last component is looked at.
    """
    name = filename.replace("\\", "/").rsplit("/", 1)[-1]
    stem, pending = _strip_pending(name)
    if pending is not None:
        if _live_kind(stem) is not None:
            return pending
        return None
    return _live_kind(name)


def kind_before_pending(filename: str) -> str | None:
    """The kind a pending file had before Kafka renamed it (``….log.deleted`` -> ``segment``).

    Its bytes are still in that kind's format, so it can be decoded as one (it is not live
    data). None for a name without a pending suffix.
    """
    name = filename.replace("\\", "/").rsplit("/", 1)[-1]
    stem, pending = _strip_pending(name)
    return _live_kind(stem) if pending is not None else None


def _live_kind(name: str) -> str | None:
    if name in FIXED_NAMES:
        return FIXED_NAMES[name]
    m = _SEGMENT_RE.match(name) or _REMOTE_INDEX_RE.match(name)
    if m is not None:
        return SEGMENT_SUFFIXES[m.group(m.lastindex)] if int(m.group(1)) <= LONG_MAX else None
    if _KRAFT_SNAPSHOT_RE.match(name):
        return "kraft_snapshot"
    return None


def base_offset_from_name(filename: str) -> int | None:
    """The offset a segment-family file is named after (``LogFileUtils.offsetFromFileName``).

    For ``.log/.index/.timeindex/.txnindex`` that is the segment's base offset; for a producer
    ``.snapshot`` it is the offset the snapshot was taken at (exclusive end of the state it
    holds); for a KRaft ``NNNN-EEEE.checkpoint`` it is the snapshot's end offset; for a remote
    segment's cached index (``300_<segment id>.index``) the remote segment's start offset. Pending
    suffixes are looked through (``00000000000000000031.log.deleted`` → 31). Anything else,
    or a number that does not fit in a Java long, gives None.
    """
    name = filename.replace("\\", "/").rsplit("/", 1)[-1]
    stem, _ = _strip_pending(name)
    m = _SEGMENT_RE.match(stem) or _KRAFT_SNAPSHOT_RE.match(stem) or _REMOTE_INDEX_RE.match(stem)
    if m is None:
        return None
    value = int(m.group(1))
    return value if value <= LONG_MAX else None


def parse_partition_dir(dirname: str) -> tuple[str, int, PartitionState] | None:
    """Split a partition directory name into (topic, partition, state), as Kafka does.

    Mirrors ``LocalLog.parseTopicPartitionName``: a name ending in ``-delete``, ``-future`` or
    ``-stray`` must match ``^(\\S+)-(\\S+)\\.(\\S+)<suffix>`` and loses everything from its
    last '.'; the rest splits on its LAST '-' into topic and partition (topics may contain
    '-', partitions cannot), and the partition must parse as a Java int. Returns None where
    Kafka would throw "is not in the form of topic-partition or
    topic-partition.uniqueId-delete" (``__cluster_metadata-0`` is a partition dir too).

    Note: for ``-delete`` and ``-stray`` Kafka caps the whole name at 255 characters by
    truncating the topic (``logDirNameWithSuffixCappedLength``), so the topic returned for a
    very long name may be a prefix of the real one.
    """
    name = dirname.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    if "-" not in name:
        return None
    state: PartitionState = "live"
    for candidate, pattern in _SUFFIXED_DIR_RE.items():
        if name.endswith("-" + candidate):
            if pattern.match(name) is None:
                return None
            state = candidate  # type: ignore[assignment]
            name = name[: name.rindex(".")]
            break
    index = name.rfind("-")
    if index < 0:
        return None
    topic, partition_string = name[:index], name[index + 1 :]
    if not topic or _PARTITION_RE.match(partition_string) is None:
        return None
    partition = int(partition_string)
    if partition > INT_MAX:
        return None
    return topic, partition, state
