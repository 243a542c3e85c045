"""A step-by-step model of Kafka replication, one method per thing that happens in a cluster.

Mechanics followed (Kafka's classes in brackets):
  * produce [ReplicaManager.appendRecords]: the leader appends a batch stamped with its leader
    epoch; acks=0/1 are answered at once, acks=all needs ISR >= min.insync.replicas at append
    and waits in the purgatory until the leader's HW passes the batch.
  * fetch round [Partition.fetchRecords]: the leader reads the log **and its HW first**, then
    records the follower's fetch offset as its remote LEO, maybe expands the ISR and advances
    the HW (min LEO over the ISR). So a follower learns a HW one fetch after the fetch that
    moved it: the two-fetch delay that KIP-101 is about.
  * ISR shrink [Partition.maybeShrinkIsr]: a follower not caught up for replica.lag.time.max.ms.
  * checkpoints [ReplicaManager / LogManager schedulers]: the HW every 5 s, recovery point and
    log start every 60 s; leader-epoch-checkpoint on every change. A kill -9 leaves them stale.
  * elections [controller]: clean = first live ISR member in replica order; unclean = anyone.
    The new leader assigns (new epoch, its LEO) in its epoch cache even before it appends.
  * truncation when a replica becomes a follower [AbstractFetcherThread]: rule ``hw`` (pre-0.11:
    to the HW checkpoint), ``kip101`` (leader's end offset for the follower's latest epoch) or
    ``kip279`` (Kafka >= 2.0: the leader answers with (epoch, end offset) of the largest epoch
    <= the asked one; the follower truncates to the min of both ends, asking again when it lacks
    that epoch). A fetch above the leader's LEO truncates to it [handleOffsetOutOfRange].
  * a KRaft controller (``kraft=True``: Kafka 4.1's defaults, eligible.leader.replicas.version 1)
    [ReplicationControlManager.generateLeaderAndIsrUpdates, PartitionChangeBuilder]: a killed broker
    is fenced and leaves every ISR at once, a stopped one at its controlled shutdown, the last ISR
    member too (the ISR may empty); the replicas that leave an ISR smaller than min.insync.replicas
    are eligible leader replicas (ELR, KIP-966), one elected cleanly when the ISR is empty; a killed
    broker's restart (an unclean shutdown) takes it out of the ELR; a partition going offline bumps
    its leader epoch (a leader of -1 is a change of leader); an unclean leader is RECOVERING until
    its first ISR expansion. ``listeners`` see every event (sample_data.sim.controller writes the
    metadata log from them).

Every step appends to ``events``; ground truth (``truth.py``) is derived from those and the final
state, never typed by hand.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime

from .model import UNDEFINED_EPOCH, Broker, PartitionState, PendingAck, Replica, SimBatch, SimRecord

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, so timestamps are reproducible
HW_CHECKPOINT_MS = 5_000  # replica.high.watermark.checkpoint.interval.ms
OFFSET_CHECKPOINT_MS = 60_000  # log.flush.offset.checkpoint.interval.ms (recovery point, log start)
LAG_TIME_MAX_MS = 30_000  # replica.lag.time.max.ms
FETCH_ROUND_MS = 100
TRUNCATION_RULES = ("hw", "kip101", "kip279")


@dataclass
class Size:
    """How much data a scenario makes: the same scenario scales to benchmark sizes."""

    brokers: int = 3
    partitions: int = 1
    records: int = 300
    batch_records: int = 10
    value_bytes: int = 100
    segment_bytes: int = 16_384
    index_interval_bytes: int = 1024
    codec: str = "none"


class Cluster:
    """In-memory brokers, replicas and controller state; see the module docstring for the rules."""

    def __init__(
        self, brokers: list[int], *, seed: int = 0, truncation: str = "kip279", cluster_id: str = "SimCluster000000000001",
        kraft: bool = False,
    ):
        if truncation not in TRUNCATION_RULES:
            raise ValueError(f"truncation must be one of {TRUNCATION_RULES}")
        self.rng = random.Random(seed)
        self.seed = seed
        self.truncation = truncation
        self.cluster_id = cluster_id
        self.brokers: dict[int, Broker] = {b: Broker(b) for b in brokers}
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self.replicas: dict[tuple[int, str, int], Replica] = {}
        self.topic_ids: dict[str, str] = {}
        self.now = 0  # ms since START_MS
        self.events: list[dict] = []
        self.ledger: list[dict] = []  # acknowledged records
        self.ledger_failed: list[dict] = []  # sends never acknowledged
        self.pending: list[PendingAck] = []
        self.committed: dict[tuple[str, int], dict[int, tuple]] = {}  # offset -> content, once below a leader HW
        self.compacted_away: dict[tuple[str, int], set[int]] = {}
        self.aborted: dict[tuple[str, int], set[int]] = {}
        self.damage: list[dict] = []  # byte-level mutations done at materialize time (torn write, index corruption)
        self._last_hw_ckpt = 0
        self._last_offset_ckpt = 0
        self._seq = 0
        self._pid_seq: dict[tuple[int, int, str, int], int] = {}  # (producer id, epoch, topic, partition) -> next sequence
        self.retriable: list[tuple[str, int, SimBatch]] = []  # acks=all sends that failed with a retriable error
        self.layouts: dict = {}  # (broker, topic, partition) -> PartitionLayout, after materialize
        self.share_start: dict[tuple[str, str, int], int] = {}  # (group, topic, partition) -> the stored share-partition start
        self.kraft = kraft  # a KRaft controller with ELR (module doc)
        self.listeners: list = []  # callables given every event, after it is logged

    # ------------------------------------------------------------------ bookkeeping
    def event(self, actor: str, action: str, **what) -> None:
        ts = datetime.fromtimestamp((START_MS + self.now) / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        self.events.append({"ts": ts, "t_ms": self.now, "actor": actor, "action": action, **what})
        for listener in self.listeners:
            listener(self.events[-1])

    def _set_isr(self, part: PartitionState, isr: list[int]) -> None:
        """A new ISR; under ``kraft`` the ELR and last known ELR follow it as
        PartitionChangeBuilder.maybePopulateTargetElr computes them, and an unclean leader's first
        ISR expansion marks it RECOVERED."""
        old, part.isr = part.isr, list(isr)
        if not self.kraft:
            return
        if part.recovering and len(part.isr) > len(old):
            part.recovering = False
        if len(part.isr) >= part.min_isr:
            part.elr, part.last_known_elr = [], []
            return
        candidates = set(part.elr) | set(old)
        part.elr = sorted(candidates - set(part.isr))
        part.last_known_elr = sorted((candidates | set(part.last_known_elr)) - set(part.isr) - set(part.elr))

    def advance(self, ms: int) -> None:
        """Move the clock; run the periodic checkpoints and ISR shrinks that fall due on the way."""
        end = self.now + ms
        while True:
            nxt = min(self._last_hw_ckpt + HW_CHECKPOINT_MS, self._last_offset_ckpt + OFFSET_CHECKPOINT_MS)
            if nxt > end:
                break
            self.now = nxt
            if nxt == self._last_hw_ckpt + HW_CHECKPOINT_MS:
                self._last_hw_ckpt = nxt
                self.checkpoint(hw=True, offsets=False)
            if nxt == self._last_offset_ckpt + OFFSET_CHECKPOINT_MS:
                self._last_offset_ckpt = nxt
                self.checkpoint(hw=False, offsets=True)
        self.now = end
        for part in self.partitions.values():
            self._maybe_shrink_isr(part)

    def replica(self, broker: int, topic: str, partition: int) -> Replica:
        return self.replicas[(broker, topic, partition)]

    def part(self, topic: str, partition: int) -> PartitionState:
        return self.partitions[(topic, partition)]

    def leader_replica(self, part: PartitionState) -> Replica | None:
        if part.leader < 0 or not self.brokers[part.leader].alive:
            return None
        return self.replica(part.leader, part.topic, part.partition)

    # ------------------------------------------------------------------ topics
    def create_topic(self, topic: str, partitions: int, replication: int, *, min_isr: int = 1, compacted: bool = False) -> None:
        ids = sorted(self.brokers)
        self.topic_ids[topic] = (
            "".join(self.rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") for _ in range(21)) + "A"
        )
        for p in range(partitions):
            assigned = [ids[(p + i) % len(ids)] for i in range(replication)]
            part = PartitionState(topic, p, assigned, min_isr=min_isr, compacted=compacted)
            self.partitions[(topic, p)] = part
            for b in assigned:
                self.replicas[(b, topic, p)] = Replica(b, topic, p, legacy_epoch_cache=self.truncation != "kip279")
            part.isr = list(assigned)
            self.event(
                "controller",
                "create_partition",
                topic=topic,
                partition=p,
                replicas=assigned,
                min_isr=min_isr,
                compacted=compacted,
            )
            self._make_leader(part, assigned[0], unclean=False, reason="create")

    # ------------------------------------------------------------------ produce
    def _new_records(self, n: int, key_fmt: str, value_bytes: int) -> list[SimRecord]:
        out = []
        for _ in range(n):
            key = key_fmt.format(seq=self._seq).encode()
            self._seq += 1
            out.append(SimRecord(key, self.rng.randbytes(value_bytes), START_MS + self.now))
        return out

    def _ledger_rows(self, topic: str, partition: int, batch: SimBatch, acks: str, *, failed: str | None = None) -> list[dict]:
        rows = []
        for i, r in enumerate(batch.records):
            ksha, vsha = r.content
            row = {
                "topic": topic,
                "partition": partition,
                "offset": None if failed else batch.base_offset + i,
                "timestamp": r.timestamp,
                "key": r.key.decode() if r.key else None,
                "key_sha256": ksha,
                "value_sha256": vsha,
                "acks": acks,
            }
            if failed:
                row["error"] = failed
            rows.append(row)
        return rows

    def produce(
        self,
        topic: str,
        partition: int,
        n: int,
        *,
        acks: str = "all",
        batch_records: int = 10,
        value_bytes: int = 100,
        key_fmt: str = "k-{seq}",
        producer_id: int = -1,
        producer_epoch: int = 0,
        transactional: bool = False,
        keys: list[bytes] | None = None,
    ) -> list[SimBatch]:
        """Send ``n`` records in batches to the current leader; returns the batches appended.
        An idempotent or transactional producer (``producer_id`` >= 0) numbers its batches per
        partition and producer epoch from 0 (``TransactionManager``'s sequence per partition is reset
        with every new epoch: transactions v2 bump it at each commit/abort)."""
        appended = []
        remaining = n
        while remaining > 0:
            k = min(batch_records, remaining)
            remaining -= k
            recs = self._new_records(k, key_fmt, value_bytes)
            if keys is not None:
                recs = [SimRecord(keys[(n - remaining - k + i) % len(keys)], r.value, r.timestamp) for i, r in enumerate(recs)]
            batch = self._send(topic, partition, recs, acks, producer_id, transactional, producer_epoch)
            if batch is not None:
                appended.append(batch)
        return appended

    def append_records(self, topic: str, partition: int, records: list[tuple[bytes | None, bytes | None]]) -> SimBatch | None:
        """One batch of exactly these (key, value) records, acks=all and no producer id: what a
        coordinator appends to its internal topic (``TransactionStateManager.appendTransactionToLog``)."""
        recs = [SimRecord(k, v, START_MS + self.now) for k, v in records]
        return self._send(topic, partition, recs, "all", -1, False)

    def _send(
        self, topic: str, partition: int, recs: list[SimRecord], acks: str, producer_id: int, transactional: bool,
        producer_epoch: int = 0,
    ) -> SimBatch | None:
        """One produce request of one batch: refused, appended and acked, or appended and waiting."""
        part = self.part(topic, partition)
        k = len(recs)
        try:
            leader = self.leader_replica(part)
            probe = SimBatch(0, tuple(recs), part.epoch)
            if leader is None:
                self.ledger_failed += self._ledger_rows(
                    topic, partition, probe, acks, failed="NOT_LEADER_OR_FOLLOWER: no live leader"
                )
                self.event("producer", "send_failed", topic=topic, partition=partition, records=k, error="no leader")
                return None
            if acks == "all" and len(part.isr) < part.min_isr:
                self.ledger_failed += self._ledger_rows(topic, partition, probe, acks, failed="NOT_ENOUGH_REPLICAS")
                self.event(
                    "producer",
                    "send_failed",
                    topic=topic,
                    partition=partition,
                    records=k,
                    error="NOT_ENOUGH_REPLICAS",
                    isr=list(part.isr),
                )
                return None
            seq = -1
            if producer_id >= 0:
                seq_key = (producer_id, producer_epoch, topic, partition)
                seq = self._pid_seq.get(seq_key, 0)
                self._pid_seq[seq_key] = seq + k
            batch = SimBatch(
                leader.leo,
                tuple(recs),
                part.epoch,
                producer_id=producer_id,
                producer_epoch=producer_epoch if producer_id >= 0 else -1,
                base_sequence=seq,
                transactional=transactional,
            )
            leader.append(batch)
            self.event(
                f"broker-{part.leader}",
                "append",
                topic=topic,
                partition=partition,
                first_offset=batch.base_offset,
                last_offset=batch.last_offset,
                epoch=part.epoch,
                acks=acks,
                transactional=transactional,
            )
            if acks in ("0", "1"):
                if acks == "1":
                    self.ledger += self._ledger_rows(topic, partition, batch, acks)
                else:
                    self.ledger_failed += self._ledger_rows(topic, partition, batch, acks, failed="acks=0: never acknowledged")
            else:
                self.pending.append(PendingAck(topic, partition, batch, part.epoch))
            self._maybe_advance_hw(part)
            return batch
        finally:
            self.advance(1)

    def retry_failed(self) -> None:
        """The producer's retries (retries > 0, not idempotent): the same records sent again to the
        current leader. If the first attempt was in fact replicated, the log now holds them twice."""
        todo, self.retriable = self.retriable, []
        for topic, partition, batch in todo:
            self.event(
                "producer", "retry", topic=topic, partition=partition, records=batch.count, first_attempt_offset=batch.base_offset
            )
            self._send(topic, partition, list(batch.records), "all", -1, False)

    def write_marker(
        self, topic: str, partition: int, producer_id: int, control: str, *, producer_epoch: int = 0, coordinator_epoch: int = 0
    ) -> SimBatch:
        """The transaction coordinator's COMMIT/ABORT marker: one offset, a control batch, at the
        epoch the coordinator holds (under transactions v2 the data's epoch + 1)."""
        part = self.part(topic, partition)
        leader = self.leader_replica(part)
        assert leader is not None
        batch = SimBatch(
            leader.leo,
            (),
            part.epoch,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=True,
            control=control,
            coordinator_epoch=coordinator_epoch,
            timestamp=START_MS + self.now,
        )
        if control == "abort":
            txn = [
                o
                for b in leader.batches
                if b.producer_id == producer_id and b.transactional and not b.control
                for o in b.offsets()
                if o >= self._txn_start(leader, producer_id)
            ]
            self.aborted.setdefault(part.tp, set()).update(txn)
        leader.append(batch)
        self.event(
            f"broker-{part.leader}",
            "append_marker",
            topic=topic,
            partition=partition,
            offset=batch.base_offset,
            control=control,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )
        self._maybe_advance_hw(part)
        return batch

    # ------------------------------------------------------------------ group coordinators (Kafka 4)
    def coordinator_write(self, topic: str, records: list) -> SimBatch | None:
        """The group or share coordinator appending its records (``writer.records.Record``s, one
        batch) to partition 0 of its topic (``__consumer_offsets``, ``__share_group_state``). The
        coordinator writes with acks=all inside the broker: no client ledger row. None when the
        partition has no live leader (the coordinator is unavailable: nothing is written)."""
        part = self.part(topic, 0)
        try:
            leader = self.leader_replica(part)
            if leader is None:
                self.event("coordinator", "write_failed", topic=topic, partition=0, records=len(records))
                return None
            # no producer id, base sequence 0: what Kafka 4.1.1's coordinators write (tests/data/kafka-4.1.1-groups)
            batch = SimBatch(leader.leo, tuple(SimRecord(r.key, r.value, START_MS + self.now) for r in records), part.epoch,
                             base_sequence=0)
            leader.append(batch)
            self.event(f"broker-{part.leader}", "append", topic=topic, partition=0, first_offset=batch.base_offset,
                       last_offset=batch.last_offset, epoch=part.epoch, acks="all", transactional=False, coordinator=True)
            self._maybe_advance_hw(part)
            return batch
        finally:
            self.advance(1)

    def _group_topics(self) -> None:
        """``__consumer_offsets`` and ``__share_group_state`` (one partition each, RF up to 3), created
        the first time a group does anything, as Kafka creates them on first use."""
        rf = min(3, len(self.brokers))
        if ("__consumer_offsets", 0) not in self.partitions:
            self.create_topic("__consumer_offsets", 1, rf, compacted=True)
        if ("__share_group_state", 0) not in self.partitions:
            self.create_topic("__share_group_state", 1, rf)

    def join_group(self, group: str, kind: str, topic: str, partitions: list[int], *, member: str = "member-1", epoch: int = 1) -> None:
        """A member joins a Kafka 4 group (``kind``: consumer = KIP-848, share = KIP-932, streams =
        KIP-1071) reading ``partitions`` of ``topic``: the group coordinator's records for it."""
        from sample_data.writer import coordinator_records as cr

        self._group_topics()
        ts, tid = START_MS + self.now, self.topic_ids[topic]
        if kind == "consumer":
            recs = cr.consumer_group_join(group, member, epoch=epoch, assignment={tid: partitions}, topics=[topic], ts=ts)
        elif kind == "share":
            recs = cr.share_group_join(group, member, epoch=epoch, assignment={tid: partitions}, topic_names={tid: topic}, ts=ts)
        elif kind == "streams":
            recs = cr.streams_group_join(group, member, epoch=epoch, source_topics=[topic], partitions=partitions, ts=ts)
        else:
            raise ValueError(f"group kind must be consumer, share or streams, not {kind!r}")
        if self.coordinator_write("__consumer_offsets", recs) is not None:
            self.event("coordinator", "group_join", group=group, kind=kind, topic=topic, partitions=list(partitions))
            if kind == "share":  # the share coordinator initializes each share-partition's state
                for p in partitions:
                    self.coordinator_write("__share_group_state", [cr.share_snapshot(group, tid, p, start_offset=-1, ts=ts)])

    def commit_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """A consumer group (classic or KIP-848: the same record) commits ``offset``: OffsetCommitValue
        v4 with the topic id, as Kafka 4 writes it; the leader epoch is the partition's current one."""
        from sample_data.writer.coordinator_records import offset_commit

        self._group_topics()
        part = self.part(topic, partition)
        rec = offset_commit(group, topic, partition, offset, ts=START_MS + self.now, leader_epoch=part.epoch,
                            topic_id=self.topic_ids[topic])
        if self.coordinator_write("__consumer_offsets", [rec]) is not None:
            self.event("coordinator", "group_progress", group=group, share=False, topic=topic, partition=partition, offset=offset)

    def share_acknowledge(self, group: str, topic: str, partition: int, upto: int, *, snapshot: bool = False) -> None:
        """A share group acknowledged every record below ``upto``. As Kafka 4.1.1 writes it
        (tests/data/kafka-4.1.1-groups): a ShareUpdate that keeps the start offset where it was and
        carries the acknowledged state batch; or, with ``snapshot`` (every few updates), a
        ShareSnapshot whose start offset is ``upto``."""
        from sample_data.writer import coordinator_records as cr

        self._group_topics()
        part, tid, ts = self.part(topic, partition), self.topic_ids[topic], START_MS + self.now
        start = self.share_start.get((group, topic, partition), 0)
        if snapshot:
            rec = cr.share_snapshot(group, tid, partition, start_offset=upto, ts=ts, snapshot_epoch=1, state_epoch=1,
                                    leader_epoch=part.epoch)
        else:
            rec = cr.share_update(group, tid, partition, start_offset=start, ts=ts, leader_epoch=part.epoch,
                                  batches=[(start, upto - 1, cr.ACKNOWLEDGED, 1)] if upto > start else [])
        if self.coordinator_write("__share_group_state", [rec]) is not None:
            if snapshot:
                self.share_start[(group, topic, partition)] = upto
            self.event("coordinator", "group_progress", group=group, share=True, topic=topic, partition=partition, offset=upto)

    @staticmethod
    def _txn_start(log: Replica, producer_id: int) -> int:
        """First offset of the producer's open transaction: after its last marker."""
        start = 0
        for b in log.batches:
            if b.producer_id == producer_id and b.control:
                start = b.next_offset
        return start

    # ------------------------------------------------------------------ replication
    def fetch(
        self, rounds: int = 1, *, topic: str | None = None, only: list[int] | None = None, max_batches: int | None = None
    ) -> None:
        """``rounds`` fetch rounds: every live follower (or those in ``only``) fetches once from its leader."""
        for _ in range(rounds):
            for part in self.partitions.values():
                if topic is not None and part.topic != topic:
                    continue
                for f in part.replicas:
                    if f == part.leader or not self.brokers[f].alive or (only is not None and f not in only):
                        continue
                    self._fetch_once(part, f, max_batches)
            self.advance(FETCH_ROUND_MS)

    def _fetch_once(self, part: PartitionState, f: int, max_batches: int | None) -> None:
        leader = self.leader_replica(part)
        if leader is None:
            return
        fol = self.replica(f, part.topic, part.partition)
        if fol.leo > leader.leo:  # ReplicaFetcherThread.handleOffsetOutOfRange
            self._truncate(fol, leader.leo, part, reason="fetch offset out of range: truncate to the leader's LEO")
        offset = fol.leo
        # the leader reads the log and its HW first (Partition.fetchRecords -> readFromLocalLog) ...
        resp_hw, resp_log_start = leader.hw, leader.log_start
        batches = [b for b in leader.batches if b.last_offset >= offset]
        if max_batches is not None:
            batches = batches[:max_batches]
        # ... then records the fetch offset as the follower's LEO (updateFollowerFetchState)
        part.remote_leo[f] = offset
        if offset >= leader.leo:
            part.caught_up_ms[f] = self.now
        epoch_start = next((s for e, s in leader.epochs if e == part.epoch), 0)
        if f not in part.isr and offset >= leader.hw and offset >= epoch_start:
            self._set_isr(part, [*part.isr, f])
            self.event(
                f"broker-{part.leader}", "isr_expand", topic=part.topic, partition=part.partition, isr=list(part.isr), broker=f
            )
        self._maybe_advance_hw(part)
        for b in batches:
            fol.assign_epoch(b.epoch, b.base_offset)
            fol.append(b)
        fol.hw = min(resp_hw, fol.leo)
        fol.log_start = max(fol.log_start, min(resp_log_start, fol.hw))
        if batches:
            self.event(
                f"broker-{f}",
                "fetched",
                topic=part.topic,
                partition=part.partition,
                first_offset=batches[0].base_offset,
                last_offset=batches[-1].last_offset,
                hw=fol.hw,
            )

    def _maybe_advance_hw(self, part: PartitionState) -> None:
        leader = self.leader_replica(part)
        if leader is None:
            return
        leos = [leader.leo] + [part.remote_leo.get(b) for b in part.isr if b != part.leader]
        if any(v is None for v in leos):
            return
        new = min(leos)
        if new <= leader.hw:
            return
        leader.hw = new
        self.event(f"broker-{part.leader}", "hw", topic=part.topic, partition=part.partition, hw=new, isr=list(part.isr))
        if new > part.committed:
            done = self.committed.setdefault(part.tp, {})
            for b in reversed(leader.batches):
                if b.last_offset < part.committed:
                    break
                for off, r in zip(b.offsets(), b.records):
                    if part.committed <= off < new:
                        done.setdefault(off, r.content)
            part.committed = new
        still = []
        for p in self.pending:
            if p.topic == part.topic and p.partition == part.partition and p.batch.next_offset <= new:
                self.ledger += self._ledger_rows(p.topic, p.partition, p.batch, "all")
                self.event(
                    f"broker-{part.leader}",
                    "ack",
                    topic=p.topic,
                    partition=p.partition,
                    first_offset=p.batch.base_offset,
                    last_offset=p.batch.last_offset,
                    acks="all",
                )
            else:
                still.append(p)
        self.pending = still

    def _fail_pending(self, part: PartitionState, error: str) -> None:
        still = []
        for p in self.pending:
            if (p.topic, p.partition) == part.tp:
                self.ledger_failed += self._ledger_rows(p.topic, p.partition, p.batch, "all", failed=error)
                self.retriable.append((p.topic, p.partition, p.batch))
                self.event(
                    "producer",
                    "send_failed",
                    topic=p.topic,
                    partition=p.partition,
                    first_offset=p.batch.base_offset,
                    last_offset=p.batch.last_offset,
                    error=error,
                )
            else:
                still.append(p)
        self.pending = still

    def _maybe_shrink_isr(self, part: PartitionState) -> None:
        leader = self.leader_replica(part)
        if leader is None:
            return
        out = [
            f
            for f in part.isr
            if f != part.leader
            and self.now - part.caught_up_ms.get(f, self.now) > LAG_TIME_MAX_MS
            and (part.remote_leo.get(f) or 0) < leader.leo
            # under kraft a live follower at the leader's end is caught up: it fetches all along (the
            # model fetches only in fetch rounds), so an idle partition keeps it in its ISR
            and not (self.kraft and self.brokers[f].alive and self.replica(f, part.topic, part.partition).leo >= leader.leo)
        ]
        if out:
            self._set_isr(part, [b for b in part.isr if b not in out])
            self.event(
                f"broker-{part.leader}", "isr_shrink", topic=part.topic, partition=part.partition, isr=list(part.isr), removed=out
            )
            self._maybe_advance_hw(part)

    # ------------------------------------------------------------------ checkpoints, log start, compaction
    def checkpoint(self, *, hw: bool = True, offsets: bool = True, brokers: list[int] | None = None) -> None:
        """Flush the HW (replication-offset-checkpoint) and/or recovery point + log start of live brokers."""
        for (b, _, _), rep in self.replicas.items():
            if not self.brokers[b].alive or (brokers is not None and b not in brokers):
                continue
            if hw:
                rep.ckpt_hw = rep.hw
            if offsets:
                rep.ckpt_recovery = rep.leo
                rep.ckpt_log_start = rep.log_start
        self.event(
            "scheduler",
            "checkpoint",
            hw=hw,
            offsets=offsets,
            brokers=brokers or sorted(b for b in self.brokers if self.brokers[b].alive),
        )

    def delete_records(self, topic: str, partition: int, offset: int) -> None:
        """AdminClient.deleteRecords: the leader moves its log start; followers follow on fetch."""
        part = self.part(topic, partition)
        leader = self.leader_replica(part)
        assert leader is not None and offset <= leader.hw
        leader.log_start = max(leader.log_start, offset)
        self.event(f"broker-{part.leader}", "delete_records", topic=topic, partition=partition, log_start=leader.log_start)

    def retention(self, topic: str, partition: int, before: int) -> None:
        """Retention on every replica: whole leading batches (standing for segments) below ``before`` are
        deleted and the log start moves to the first one left."""
        for rep in self._replicas_of(topic, partition):
            keep = [b for b in rep.batches if b.last_offset >= before or b.last_offset >= rep.hw]
            if keep and keep[0].base_offset > rep.log_start:
                rep.batches = keep
                rep.log_start = keep[0].base_offset
            self.event(f"broker-{rep.broker}", "retention", topic=topic, partition=partition, log_start=rep.log_start)

    def compact(self, topic: str, partition: int, *, upto: int) -> None:
        """The log cleaner on every replica: below ``upto`` (standing for the cleanable, non-active
        segments), drop every single-record batch whose key a later offset rewrote."""
        gone = self.compacted_away.setdefault((topic, partition), set())
        for rep in self._replicas_of(topic, partition):
            last_of_key: dict[bytes | None, int] = {}
            for b in rep.batches:
                for off, r in zip(b.offsets(), b.records):
                    last_of_key[r.key] = off
            kept = []
            for b in rep.batches:
                if (
                    b.next_offset <= upto
                    and not b.control
                    and b.records
                    and all(last_of_key[r.key] != off for off, r in zip(b.offsets(), b.records))
                ):
                    gone.update(b.offsets())
                    continue
                kept.append(b)
            rep.batches = kept
            rep.cleaner_offset = upto
            self.event(f"broker-{rep.broker}", "compact", topic=topic, partition=partition, cleaned_up_to=upto)

    def _replicas_of(self, topic: str, partition: int) -> list[Replica]:
        return [self.replica(b, topic, partition) for b in self.part(topic, partition).replicas]

    # ------------------------------------------------------------------ brokers
    def crash(self, b: int) -> None:
        """kill -9: page cache survives (the log bytes stay), checkpoints stay as last flushed, no marker."""
        self.brokers[b].alive = False
        self.brokers[b].crashed = True
        self.brokers[b].clean_marker = False
        self.event(f"broker-{b}", "kill9")
        self._leader_lost(b)
        if self.kraft:  # the controller fences it when its session expires: it leaves every ISR
            for part in self.partitions.values():
                if b in part.isr:
                    self._set_isr(part, [x for x in part.isr if x != b])
            self.event("controller", "fenced", broker=b)

    def power_loss(self, b: int) -> None:
        """A power cut (or kernel crash): as ``crash``, but what was not flushed to disk is gone. Kafka
        does not fsync on append, so each log keeps only what its last flush wrote: up to its
        recovery point (the last flushed offset), whatever its HW had covered [LogLoader recovery]."""
        self.crash(b)
        for part in self.partitions.values():
            if b in part.replicas:
                rep = self.replica(b, part.topic, part.partition)
                flushed = rep.ckpt_recovery if rep.ckpt_recovery is not None else rep.log_start
                if flushed < rep.leo:
                    self._truncate(rep, flushed, part, reason="power loss: writes after the last flush are gone")
        self.event(f"broker-{b}", "power_loss")

    def stop(self, b: int) -> None:
        """Controlled shutdown: leadership moves away first, checkpoints are flushed, marker written."""
        for part in self.partitions.values():
            if b in part.isr and (len(part.isr) > 1 or self.kraft and part.leader != b):
                self._set_isr(part, [x for x in part.isr if x != b])
        self._leader_lost(b, error="controlled shutdown")
        self.checkpoint(brokers=[b])
        self.brokers[b].alive = False
        self.brokers[b].crashed = False
        self.brokers[b].clean_marker = True
        self.event(f"broker-{b}", "clean_shutdown")

    def _leader_lost(self, b: int, error: str = "leader died") -> None:
        for part in self.partitions.values():
            if part.leader != b:
                continue
            self._fail_pending(part, f"NOT_LEADER_OR_FOLLOWER: {error}")
            cand = [x for x in part.replicas if x in part.isr and x != b and self.brokers[x].alive]
            if cand:
                self._set_isr(part, [x for x in part.isr if x != b])
                self._make_leader(part, cand[0], unclean=False, reason=error)
            else:
                part.leader = -1
                if self.kraft:  # the ISR may empty (its last member joins the ELR); leader -1 bumps the epoch
                    self._set_isr(part, [x for x in part.isr if x != b])
                    part.epoch += 1
                self.event("controller", "offline", topic=part.topic, partition=part.partition, isr=list(part.isr))

    def restart(self, b: int) -> None:
        """Start a stopped broker: HW from its checkpoint, then lead (if the partition is offline and it
        is in the ISR) or follow, truncating by the cluster's rule."""
        br = self.brokers[b]
        br.alive, br.clean_marker = True, False
        self.event(f"broker-{b}", "start", after="kill9" if br.crashed else "clean_shutdown")
        unclean_shutdown, br.crashed = br.crashed, False
        for part in self.partitions.values():
            if b not in part.replicas:
                continue
            if self.kraft and unclean_shutdown and b in part.elr:  # handleBrokerUncleanShutdown: not eligible any more
                part.elr = [x for x in part.elr if x != b]
                part.last_known_elr = sorted({*part.last_known_elr, b})
            rep = self.replica(b, part.topic, part.partition)
            rep.hw = min(rep.ckpt_hw or 0, rep.leo)
            if part.leader < 0 and (b in part.isr or self.kraft and not part.isr and b in part.elr):
                self._make_leader(part, b, unclean=False, reason="ISR member came back")
            elif part.leader >= 0:
                self._become_follower(part, rep)

    def elect(self, topic: str, partition: int, leader: int, *, unclean: bool = False) -> None:
        """An explicit election (kafka-leader-election; unclean = --election-type unclean)."""
        part = self.part(topic, partition)
        eligible = leader in part.isr or self.kraft and not part.isr and leader in part.elr
        if not unclean and not eligible:
            raise ValueError(f"broker {leader} is not in the ISR {part.isr}: a clean election cannot pick it")
        self._fail_pending(part, "NOT_LEADER_OR_FOLLOWER: new leader")
        self._make_leader(part, leader, unclean=unclean and not eligible, reason="election")

    def _make_leader(self, part: PartitionState, b: int, *, unclean: bool, reason: str) -> None:
        if reason != "create":
            part.epoch += 1
        rep = self.replica(b, part.topic, part.partition)
        committed_before, prev_isr = part.committed, list(part.isr)
        part.leader = b
        source = "outside_isr" if unclean else "isr"
        if unclean:
            part.isr = [b]
            part.elr, part.last_known_elr, part.recovering = [], [], self.kraft
        elif self.kraft and b not in part.isr and b in part.elr:  # elected from the ELR (KIP-966): a clean election
            part.isr, part.elr, source = [b], [x for x in part.elr if x != b], "elr"
        rep.assign_epoch(part.epoch, rep.leo)
        part.remote_leo = {f: None for f in part.replicas if f != b}
        part.caught_up_ms = {f: self.now for f in part.isr if f != b}
        self.event(
            "controller",
            "leader",
            topic=part.topic,
            partition=part.partition,
            leader=b,
            epoch=part.epoch,
            epoch_start_offset=rep.leo,
            isr=list(part.isr),
            unclean=unclean,
            reason=reason,
            **({"elected_from": source, "prev_isr": prev_isr, "elr": list(part.elr)} if self.kraft and reason != "create" else {}),
            committed_before=committed_before,
        )
        for f in part.replicas:
            if f != b and self.brokers[f].alive:
                self._become_follower(part, self.replica(f, part.topic, part.partition))
        self._maybe_advance_hw(part)

    def _become_follower(self, part: PartitionState, fol: Replica) -> None:
        leader = self.leader_replica(part)
        if leader is None or leader is fol:
            return
        target = self._truncation_offset(fol, leader)
        if target < fol.leo:
            self._truncate(fol, target, part, reason=f"become follower ({self.truncation})")
        if fol.leo > leader.leo:  # the first fetch is out of range (ReplicaFetcherThread.handleOffsetOutOfRange)
            self._truncate(fol, leader.leo, part, reason="fetch offset out of range: truncate to the leader's LEO")

    def _truncation_offset(self, fol: Replica, leader: Replica) -> int:
        if self.truncation == "hw" or fol.latest_epoch == UNDEFINED_EPOCH:
            return min(fol.hw, fol.leo)
        if self.truncation == "kip101":
            e = fol.latest_epoch  # the leader answers the start of the first epoch > e, or its LEO
            if e >= leader.latest_epoch:
                end = leader.leo
            else:
                later = [s for le, s in leader.epochs if le > e]
                end = later[0] if later else leader.leo
            return min(end, fol.leo)
        ask = fol.latest_epoch
        limit = fol.leo
        while True:  # AbstractFetcherThread.getOffsetTruncationState, repeated until completed
            l_epoch, l_end = leader.end_offset_for(ask)
            if l_epoch == UNDEFINED_EPOCH:
                return min(fol.hw, limit)
            f_epoch, f_end = fol.end_offset_for(l_epoch)
            if f_epoch == l_epoch:
                return min(l_end, f_end, limit)
            if f_epoch == UNDEFINED_EPOCH:
                return min(fol.hw, limit)
            limit = min(f_end, limit)
            ask = f_epoch

    def _truncate(self, rep: Replica, offset: int, part: PartitionState, *, reason: str) -> None:
        old_leo = rep.leo
        # the highest HW this replica knew or any replica had checkpointed: offsets below it were committed on record
        hw_bound = max([rep.hw] + [r.ckpt_hw for r in self._replicas_of(rep.topic, rep.partition) if r.ckpt_hw is not None])
        removed = rep.truncate_to(offset)
        self.event(
            f"broker-{rep.broker}",
            "truncate",
            topic=rep.topic,
            partition=rep.partition,
            from_leo=old_leo,
            to=rep.leo,
            records=sum(b.count for b in removed),
            committed=part.committed,
            hw_bound=hw_bound,
            reason=reason,
        )

    def tear(self, b: int, topic: str, partition: int) -> SimBatch:
        """Crash in the middle of appending the last batch: the model forgets it (nothing can read it),
        materialize writes half of its bytes."""
        rep = self.replica(b, topic, partition)
        batch = rep.batches[-1]
        rep.truncate_to(batch.base_offset)
        self.damage.append({"kind": "torn_tail", "broker": b, "topic": topic, "partition": partition, "batch": batch})
        self.event(
            f"broker-{b}",
            "torn_append",
            topic=topic,
            partition=partition,
            first_offset=batch.base_offset,
            last_offset=batch.last_offset,
        )
        return batch

    def corrupt_index(self, b: int, topic: str, partition: int) -> None:
        """A bit-rotted or badly copied offset index: applied to the files by materialize."""
        self.damage.append({"kind": "index_mismatch", "broker": b, "topic": topic, "partition": partition})
        self.event(f"broker-{b}", "index_corruption", topic=topic, partition=partition)

    def roll_then_crash(self, b: int, topic: str, partition: int) -> None:
        """kill -9 right after the partition's log rolled: the files show it (materialize), the model not."""
        self.damage.append({"kind": "rolled_before_kill", "broker": b, "topic": topic, "partition": partition})
        self.event(f"broker-{b}", "roll", topic=topic, partition=partition, new_segment=self.replica(b, topic, partition).leo)
        self.crash(b)

    def collect(self) -> None:
        """Stop every live broker cleanly before the directories are copied (crashed ones stay as they are)."""
        for b, br in sorted(self.brokers.items()):
            if br.alive:
                self.checkpoint(brokers=[b])
                br.alive, br.clean_marker = False, True
                self.event(f"broker-{b}", "clean_shutdown")
