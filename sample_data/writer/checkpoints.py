"""Checkpoint files: ``CheckpointFile`` with the ``OffsetCheckpointFile`` and
``LeaderEpochCheckpointFile`` formatters.

    CheckpointFile => Version line ("0"), EntryCount line, one line per entry, each ending "\\n"
      OffsetCheckpointFile      entry => "<topic> <partition> <offset>"
        (replication-offset-checkpoint, recovery-point-offset-checkpoint,
         log-start-offset-checkpoint, cleaner-offset-checkpoint)
      LeaderEpochCheckpointFile entry => "<epoch> <start_offset>"

Entries are written in the order given: Kafka writes a map in its own iteration order, and
its reader does not care; pass them in the order the file you want to mimic has.
"""

from __future__ import annotations

CHECKPOINT_VERSION = 0  # OffsetCheckpointFile.CURRENT_VERSION, LeaderEpochCheckpointFile.CURRENT_VERSION
OFFSET_CHECKPOINT_FILES = {
    "replication_offset": "replication-offset-checkpoint",
    "recovery_point": "recovery-point-offset-checkpoint",
    "log_start": "log-start-offset-checkpoint",
    "cleaner": "cleaner-offset-checkpoint",
}
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"


def _checkpoint(lines: list[str]) -> bytes:
    return "".join(f"{line}\n" for line in [str(CHECKPOINT_VERSION), str(len(lines)), *lines]).encode("utf-8")


def offset_checkpoint_bytes(entries: dict[tuple[str, int], int]) -> bytes:
    """{(topic, partition): offset} as any of the four offset checkpoint files."""
    for topic, _ in entries:
        if not topic or any(c.isspace() for c in topic):
            raise ValueError(f"topic name {topic!r} cannot be written to a checkpoint line")
    return _checkpoint([f"{t} {p} {o}" for (t, p), o in entries.items()])


def leader_epoch_checkpoint_bytes(entries: list[tuple[int, int]]) -> bytes:
    """[(epoch, start_offset)] as a partition's leader-epoch-checkpoint."""
    return _checkpoint([f"{e} {o}" for e, o in entries])
