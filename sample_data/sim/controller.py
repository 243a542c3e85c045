"""The KRaft controller's own records of the cluster: what ``__cluster_metadata`` says of each
topic and partition as the simulated cluster (``Cluster(kraft=True)``) lives.

Mechanics followed (Kafka 4.1.1's classes in brackets): a topic's creation is a TopicRecord and
a PartitionRecord per partition [ReplicationControlManager.createTopic]; every later change of a
partition's leader, ISR, ELR, last known ELR or leader recovery state is one PartitionChangeRecord
holding only what changed [PartitionChangeBuilder.build]; both at the version metadata.version
4.1-IV1 writes (2, with the KIP-966 fields; PartitionRecord's directories unassigned); a feature
upgrade is a FeatureLevelRecord [FeatureControlManager]. The leader epoch is not in a change
record: a reader bumps it at every record with a leader (``PartitionRegistration.merge``), which
the cluster's epochs follow (``Cluster(kraft=True)`` bumps it when a partition goes offline too).

The records go to the quorum's leader and are replicated at once (the brokers are observers and
follow the cluster's own running state). Each cluster event is compared with what the log last
said of every partition, so what changed between two events is one record per partition (where
the simulator logs an event between two steps Kafka takes at once, e.g. a controlled shutdown's
ISR removal and the new leader, that is two records where Kafka writes one: the same states).

Why: a Kafka 4 collection's elections (ELR, unclean, RECOVERING) are in the metadata log, not in
the broker dirs; the analyzer reads them from there, and a scenario must write them as Kafka does.
"""

from __future__ import annotations

import base64

from sample_data.writer import metadata_records as mr
from sample_data.writer import raft_log as rl

from .cluster import START_MS, Cluster
from .quorum import ControllerQuorum

RECORD_VERSION = 2  # MetadataVersion.partitionRecordVersion()/partitionChangeRecordVersion() with ELR (4.0-IV1 and later)


def topic_uuid(topic_id: str) -> bytes:
    """The 16 bytes of a topic id as partition.metadata spells it (base64url, no padding)."""
    return base64.urlsafe_b64decode(topic_id + "==")


class MetadataPublisher:
    """Listens to ``cluster``'s events and appends what its controller writes to ``quorum``."""

    def __init__(self, cluster: Cluster, quorum: ControllerQuorum):
        if not cluster.kraft:
            raise ValueError("the metadata log of partitions is written for a KRaft cluster (Cluster(kraft=True))")
        self.c, self.q = cluster, quorum
        self.said: dict[tuple[str, int], dict] = {}  # what the log last said of each partition
        self.epochs: dict[tuple[str, int], tuple[int, int]] = {}  # (leader epoch, partition epoch) as a reader merges them
        self.features: dict[str, int] = {}
        self.history: list[tuple[int, list[bytes]]] = []  # (log end offset, the image there) after each append
        cluster.listeners.append(self.on_event)
        quorum.image = self.image

    def finalize(self, feature: str, level: int) -> None:
        """A FeatureLevelRecord (``kafka-features.sh``, or the bootstrap of a new cluster)."""
        self.c.event("operator", "feature_upgrade", feature=feature, to_level=level)

    @staticmethod
    def _state(part) -> dict:
        return {"leader": part.leader, "isr": list(part.isr), "elr": list(part.elr), "last_known_elr": list(part.last_known_elr),
                "recovering": part.recovering, "replicas": list(part.replicas)}

    def on_event(self, e: dict) -> None:
        action = e["action"]
        if action in ("kill9", "clean_shutdown", "start") and e["actor"].startswith("broker-"):
            node = self.q.nodes.get(int(e["actor"].split("-")[1]))
            if node is not None:
                node.running = action == "start"
        values: list[bytes] = []
        if action == "feature_upgrade":
            values.append(rl.feature_level_record(e["feature"], e["to_level"]))
            self.features[e["feature"]] = e["to_level"]
        for tp, part in sorted(self.c.partitions.items()):
            now, before = self._state(part), self.said.get(tp)
            if before == now:
                continue
            tid = topic_uuid(self.c.topic_ids[part.topic])
            if before is None:
                if part.leader < 0:  # being created: its PartitionRecord comes with its first leader
                    continue
                if part.partition == 0:
                    values.append(mr.topic_record(part.topic, tid))
                values.append(mr.partition_record(tid, part.partition, part.replicas, now["isr"], now["leader"], leader_epoch=part.epoch,
                                                  version=RECORD_VERSION, elr=now["elr"] or None,
                                                  last_known_elr=now["last_known_elr"] or None))
                self.epochs[tp] = (part.epoch, 0)
            else:
                changed = {k for k in now if now[k] != before[k]}
                values.append(mr.partition_change_record(
                    tid, part.partition, version=RECORD_VERSION,
                    leader=now["leader"] if "leader" in changed else mr.NO_LEADER_CHANGE,
                    isr=now["isr"] if "isr" in changed else None,
                    elr=now["elr"] if "elr" in changed else None,
                    last_known_elr=now["last_known_elr"] if "last_known_elr" in changed else None,
                    leader_recovery_state=(mr.RECOVERING if now["recovering"] else mr.RECOVERED) if "recovering" in changed
                    else mr.NO_RECOVERY_STATE_CHANGE))  # fmt: skip
                leader_epoch, partition_epoch = self.epochs[tp]
                self.epochs[tp] = (leader_epoch + ("leader" in changed), partition_epoch + 1)
            self.said[tp] = now
        if values:
            self.q.now = max(self.q.now, START_MS + self.c.now)
            self.q.append(values=values)
            self.history.append((self.q.nodes[self.q.leader].end, self._image()))
            self.q.replicate()

    def _image(self) -> list[bytes]:
        """The image as a snapshot writes it (``MetadataImage.write``: features, then each topic's
        TopicRecord and PartitionRecords, ``PartitionRegistration.toRecord``: the ELR fields only
        when not empty)."""
        out = [rl.feature_level_record(name, level) for name, level in sorted(self.features.items())]
        for (topic, p), now in sorted(self.said.items(), key=lambda kv: (self.c.topic_ids[kv[0][0]], kv[0][1])):
            tid = topic_uuid(self.c.topic_ids[topic])
            if p == 0:
                out.append(mr.topic_record(topic, tid))
            leader_epoch, partition_epoch = self.epochs[(topic, p)]
            out.append(mr.partition_record(tid, p, now["replicas"], now["isr"], now["leader"], leader_epoch=leader_epoch,
                                           partition_epoch=partition_epoch, version=RECORD_VERSION, elr=now["elr"] or None,
                                           last_known_elr=now["last_known_elr"] or None,
                                           leader_recovery_state=mr.RECOVERING if now["recovering"] else mr.RECOVERED))
        return out

    def image(self, end_offset: int) -> list[bytes]:
        """The image a snapshot at ``end_offset`` restates: after the last partition records below it."""
        return next((img for end, img in reversed(self.history) if end <= end_offset), [])
