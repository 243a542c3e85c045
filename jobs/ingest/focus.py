"""``analyze --topic GLOB --partition N``: which partitions an analysis reads. Pure, no Spark.

Why at discovery: the files of other partitions are then never opened, hashed or parsed, so a
question about one topic of a large cluster costs what that topic costs. Rows that name a
partition of their own (a checkpoint entry, a metadata record, a log line, a consumer commit)
are kept only for the focused partitions, so the tables hold nothing else. Kafka's internal
topics (``__cluster_metadata``, ``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``,
``__remote_log_metadata``) are always read:
they are the context of every partition (who led, who committed, which transactions ended).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

import pyarrow as pa
import pyarrow.compute as pc

INTERNAL_PREFIX = "__"


@dataclass(frozen=True)
class Focus:
    """Topics matching any of ``topics`` (shell globs, all when empty) and partitions in
    ``partitions`` (all when empty)."""

    topics: tuple[str, ...] = ()
    partitions: tuple[int, ...] = ()

    def topic_kept(self, topic: str | None) -> bool:
        if topic is None or topic.startswith(INTERNAL_PREFIX) or not self.topics:
            return True
        return any(fnmatchcase(topic, glob) for glob in self.topics)

    def kept(self, topic: str | None, partition: int | None) -> bool:
        """Whether a file or row of ``topic``-``partition`` belongs to the analysis (rows that
        name no partition, and internal topics, always do)."""
        if topic is None or topic.startswith(INTERNAL_PREFIX):
            return True
        return self.topic_kept(topic) and (not self.partitions or partition is None or partition in self.partitions)

    def rows(self, table: pa.Table) -> pa.Table:
        """``table`` without the rows of partitions outside the focus (by its topic/partition
        columns; a table without a topic column is returned as is)."""
        if "topic" not in table.column_names or table.num_rows == 0:
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

    def describe(self) -> dict:
        """What findings.json's ``input.focus`` and run.json say."""
        return {"topics": list(self.topics), "partitions": list(self.partitions)}
