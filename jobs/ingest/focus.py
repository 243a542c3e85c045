"""``analyze --topic GLOB --partition N``, and the focus of a focused collection: which
partitions an analysis reads. Pure, no Spark.

Why at discovery: the files of other partitions are then never opened, hashed or parsed, so a
question about one topic of a large cluster costs what that topic costs. Rows that name a
partition of their own (a checkpoint entry, a metadata record, a log line, a consumer commit)
are kept only for the focused partitions, so the tables hold nothing else. Kafka's internal
topics (``__cluster_metadata``, ``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``,
``__remote_log_metadata``) are always read:
they are the context of every partition (who led, who committed, which transactions ended).

A collection ``collect --topic/--partition/--since`` made says so in its COLLECT.txt; its analysis
reads only the partitions that focus kept (``Collected``), as if ``--topic/--partition`` were
given: the checkpoints and the metadata log still name every partition of the broker, and rows of
partitions never collected would read as replicas gone missing.
"""

from __future__ import annotations

import logging
import re
import shlex
from dataclasses import dataclass
from fnmatch import fnmatchcase

import pyarrow as pa
import pyarrow.compute as pc

INTERNAL_PREFIX = "__"
NOTES = "COLLECT.txt"  # what ``collect`` writes beside the log dirs it archives
_NOTES_FIRST = "kafka-forensics collect on "
_LEFT_OUT = re.compile(r"left out in all: (\d+) partitions \((\d+) files, (\d+) bytes\), (\d+) segments \((\d+) files, (\d+) bytes\)")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Collected:
    """A focused collection as its COLLECT.txt (``notes``, named as the input's paths are) tells it:
    the collector's focus and what it left out (``left_out``: partitions, segments, files, bytes)."""

    notes: str
    topics: tuple[str, ...] = ()
    partitions: tuple[int, ...] = ()
    since: str | None = None  # UTC, as the collector wrote it: segments whose newest batch is older were left out
    consumer_offsets: bool = True
    left_out: tuple[tuple[str, int], ...] = ()

    def describe(self) -> dict:
        return {"notes": self.notes, "topics": list(self.topics), "partitions": list(self.partitions), "since": self.since,
                "consumer_offsets": self.consumer_offsets, "left_out": dict(self.left_out)}


def read_notes(text: str, notes: str) -> Collected | None:
    """The focus of the collection whose COLLECT.txt says ``text`` (its ``focus:`` line holds the
    collector's options, quoted for sh), or None when it was not focused or is not our notes."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith(_NOTES_FIRST):
        return None
    line = next((x for x in lines if x.startswith("focus: --")), None)
    if line is None:
        return None
    try:
        words = shlex.split(line.removeprefix("focus:"))
    except ValueError:
        log.warning("%s: its focus line cannot be read: %r", notes, line)
        return None
    topics: list[str] = []
    partitions: list[int] = []
    since, offsets = None, True
    for opt, value in zip(words, [*words[1:], None]):
        if opt == "--topic" and value:
            topics.append(value)
        elif opt == "--partition" and value and value.isdigit():
            partitions.append(int(value))
        elif opt == "--since" and value:
            since = value
        elif opt == "--no-consumer-offsets":
            offsets = False
    m = next((m for m in map(_LEFT_OUT.fullmatch, lines) if m), None)
    names = ("partitions", "partition_files", "partition_bytes", "segments", "segment_files", "segment_bytes")
    left = tuple(zip(names, map(int, m.groups()))) if m else ()
    return Collected(notes, tuple(topics), tuple(partitions), since, offsets, left)


@dataclass(frozen=True)
class Focus:
    """Topics matching any of ``topics`` (shell globs, all when empty) and partitions in
    ``partitions`` (all when empty), within what every focused collection read (``collected``)
    kept: a partition one of them left out is not read from any input."""

    topics: tuple[str, ...] = ()
    partitions: tuple[int, ...] = ()
    collected: tuple[Collected, ...] = ()

    def _narrows(self) -> list[Focus]:
        return [Focus(c.topics, c.partitions) for c in self.collected if c.topics or c.partitions]

    def topic_kept(self, topic: str | None) -> bool:
        if topic is None or topic.startswith(INTERNAL_PREFIX):
            return True
        own = not self.topics or any(fnmatchcase(topic, glob) for glob in self.topics)
        return own and all(f.topic_kept(topic) for f in self._narrows())

    def kept(self, topic: str | None, partition: int | None) -> bool:
        """Whether a file or row of ``topic``-``partition`` belongs to the analysis (rows that
        name no partition, and internal topics, always do)."""
        if topic is None or topic.startswith(INTERNAL_PREFIX):
            return True
        own = self.topic_kept(topic) and (not self.partitions or partition is None or partition in self.partitions)
        return own and all(f.kept(topic, partition) for f in self._narrows())

    def rows(self, table: pa.Table) -> pa.Table:
        """``table`` without the rows of partitions outside the focus (by its topic/partition
        columns; a table without a topic column is returned as is)."""
        for f in self._narrows():
            table = f.rows(table)
        if "topic" not in table.column_names or table.num_rows == 0 or not (self.topics or self.partitions):
            return table
        topics = table.column("topic")
        kept_topics = [t for t in pc.unique(topics).to_pylist() if t is not None and self.topic_kept(t)]
        mask = pc.or_kleene(pc.is_null(topics), pc.is_in(topics, value_set=pa.array(kept_topics, pa.string())))
        if self.partitions and "partition" in table.column_names:
            part = table.column("partition")
            internal = pc.starts_with(topics, INTERNAL_PREFIX)
            in_parts = pc.or_kleene(pc.is_null(part), pc.is_in(part, value_set=pa.array(self.partitions, part.type)))
            mask = pc.and_kleene(mask, pc.or_kleene(pc.fill_null(internal, True), in_parts))
        return table.filter(pc.fill_null(mask, True))

    def within(self, collected: list[Collected]) -> Focus:
        """This focus within the focused collections read."""
        return Focus(self.topics, self.partitions, (*self.collected, *collected))

    def wanted(self) -> str:
        """The options that made this focus, for a line that says it kept nothing."""
        own = " ".join([*(f"--topic {t}" for t in self.topics), *(f"--partition {p}" for p in self.partitions)])
        theirs = "; ".join(f"{c.notes}: collected with {' '.join([*(f'--topic {t}' for t in c.topics), *(f'--partition {p}' for p in c.partitions)])}"
                           for c in self.collected if c.topics or c.partitions)
        return "; ".join(x for x in (own, theirs) if x)

    def describe(self) -> dict:
        """What findings.json's ``input.focus`` and run.json say: the topics and partitions read
        (analyze's own, else those of the focused collections when they all agree) and, when a
        focused collection was read, ``collected``: each one's focus and what it left out."""
        topics, partitions = list(self.topics), list(self.partitions)
        narrows = {(f.topics, f.partitions) for f in self._narrows()}
        if len(narrows) == 1:
            (their_topics, their_partitions), = narrows
            topics = topics or list(their_topics)
            partitions = (sorted(set(partitions) & set(their_partitions)) if partitions and their_partitions
                          else partitions or list(their_partitions))
        out = {"topics": topics, "partitions": partitions}
        if self.collected:
            out["collected"] = [c.describe() for c in self.collected]
        return out
