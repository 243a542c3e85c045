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
said of every partition, so what changed between two events is one record per partition (Kafka
sometimes writes two where the simulator changes the ISR and the leader in one step).

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
        cluster.listeners.append(self.on_event)

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
            self.said[tp] = now
        if values:
            self.q.now = max(self.q.now, START_MS + self.c.now)
            self.q.append(values=values)
            self.q.replicate()
