"""Transactional producers and their coordinator, as far as the logs show them: the data batches,
the COMMIT/ABORT markers and the coordinator's ``__transaction_state`` records.

Mechanics followed (Kafka 4.1.1's classes in brackets):
  * the coordinator of a transactional id is the leader of ``__transaction_state`` partition
    ``abs(hashCode(id)) % partitions`` [TransactionStateManager.partitionFor]; its coordinator epoch
    is that partition's leader epoch, which every marker it sends carries;
  * InitProducerId [TransactionCoordinator.handleInitProducerId, TransactionMetadata
    .prepareIncrementProducerEpoch]: a new transactional id gets a producer id and epoch 0, a known
    one its epoch + 1 (an exhausted one, >= 32766, a new producer id at epoch 0,
    prepareProducerIdRotation): an ``Empty`` record, partitions null, start time -1;
  * the first send to a partition in a transaction adds it [AddPartitionsToTxn, sent by the
    partition leader's verification under transactions v2]: an ``Ongoing`` record with every
    partition so far and the client's transaction version (0, or 2 for a transactions-v2 client);
  * EndTxn [handleEndTransaction, prepareAbortOrCommit]: ``PrepareCommit``/``PrepareAbort``; a
    transactions-v2 client's transaction bumps the epoch here (the data's epoch + 1), and an
    exhausted epoch allocates the next producer id (``nextProducerId``, the Prepare record then
    holds epoch 32767);
  * the markers [TransactionMarkerChannelManager.addTxnMarkersToSend] carry the Prepare state's
    producer id and epoch, to every partition of the transaction;
  * [prepareComplete] ``CompleteCommit``/``CompleteAbort``, partitions empty; after an exhausted
    epoch with the next producer id at epoch 0;
  * the record's version follows the cluster's finalized ``transaction.version`` (0 -> v0, else v1)
    [TransactionLog.valueToBytes]; Kafka 4.4 (KAFKA-20310) also writes the previous and next
    producer ids (``persist_producer_ids``);
  * the client [TransactionManager]: sequences per partition and epoch from 0; a transactions-v2
    client takes the epoch (and id) the EndTxn response gives, so its next transaction starts one
    epoch up with sequences from 0; a client that sees ``transaction.version`` 2 finalized while
    it runs finishes its transaction the old way, then bumps its epoch with InitProducerId
    before its first v2 transaction (``clientSideEpochBumpRequired``).

Why: transactions v2 changes what a healthy partition looks like (a marker one epoch above its
data, sequences restarting at every epoch, a producer id handed over mid-stream); scenarios need
it exactly as Kafka writes it, next to the coordinator's own log, to show it is not a finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sample_data.writer.transaction_state import (
    NO_PRODUCER_ID,
    log_value_version,
    transaction_log_key,
    transaction_log_value,
)

from .cluster import START_MS, Cluster
from .model import SimBatch

TRANSACTION_STATE_TOPIC = "__transaction_state"
MAX_EPOCH = (1 << 15) - 1  # Short.MaxValue: only the coordinator may use it (to fence, or an exhausted v2 epoch's markers)
TV_0, TV_2 = 0, 2  # the client transaction versions Kafka tells apart (TransactionVersion.transactionVersionFor*)
DEFAULT_TIMEOUT_MS = 60_000


def is_epoch_exhausted(epoch: int) -> bool:
    """TransactionMetadata.isEpochExhausted: an epoch the client may not be given another bump from."""
    return epoch >= MAX_EPOCH - 1


def java_string_hash(text: str) -> int:
    """String.hashCode (UTF-16 code units, 32-bit wrap)."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(transactional_id: str, partitions: int) -> int:
    """TransactionStateManager.partitionFor: Utils.abs(hashCode) % partitions (abs of MIN_VALUE is 0)."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass
class TxnMetadata:
    """TransactionMetadata: what the coordinator holds per transactional id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int = -1
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    state: str = "Empty"
    partitions: list[tuple[str, int]] = field(default_factory=list)
    start_ms: int = -1
    last_update_ms: int = 0
    client_tv: int = TV_0
    timeout_ms: int = DEFAULT_TIMEOUT_MS


class TransactionCoordinator:
    """The transaction coordinators of a cluster, one ``__transaction_state`` partition each (see
    the module doc). ``transaction_version``: the cluster's finalized feature level (``upgrade``
    changes it); ``persist_producer_ids``: write the previous/next producer ids (Kafka 4.4)."""

    def __init__(self, cluster: Cluster, *, partitions: int = 3, replication: int = 3, min_isr: int = 2,
                 transaction_version: int = 2, persist_producer_ids: bool = False, first_producer_id: int = 4000,
                 replicate_rounds: int = 3):
        self.c = cluster
        self.partitions = partitions
        self.transaction_version = transaction_version
        self.persist_producer_ids = persist_producer_ids
        self.replicate_rounds = replicate_rounds
        self._next_id = first_producer_id
        self.txns: dict[str, TxnMetadata] = {}
        cluster.create_topic(TRANSACTION_STATE_TOPIC, partitions, min(replication, len(cluster.brokers)),
                             min_isr=min(min_isr, len(cluster.brokers)), compacted=True)

    # -------------------------------------------------------------- coordinator side
    def generate_producer_id(self) -> int:
        """ProducerIdManager.generateProducerId: ids are handed out once, in order."""
        pid, self._next_id = self._next_id, self._next_id + 1
        return pid

    def upgrade(self, level: int) -> None:
        """``kafka-features.sh upgrade --feature transaction.version=<level>``: records written
        from now on are v1 (level >= 1); clients see level 2 at their next transaction's end."""
        self.c.event("operator", "feature_upgrade", feature="transaction.version", from_level=self.transaction_version,
                     to_level=level)
        self.transaction_version = level

    def coordinator_epoch(self, transactional_id: str) -> int:
        return self.c.part(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, self.partitions)).epoch

    def _write(self, t: TxnMetadata) -> None:
        """TransactionStateManager.appendTransactionToLog (acks=all), then let the followers fetch it."""
        t.last_update_ms = START_MS + self.c.now
        version = log_value_version(self.transaction_version)
        ids = self.persist_producer_ids and version >= 1
        value = transaction_log_value(
            producer_id=t.producer_id, producer_epoch=t.producer_epoch, timeout_ms=t.timeout_ms, state=t.state,
            partitions=None if t.state == "Empty" else _grouped(t.partitions), last_update_ms=t.last_update_ms,
            start_ms=t.start_ms, version=version, client_transaction_version=t.client_tv,
            previous_producer_id=t.prev_producer_id if ids else NO_PRODUCER_ID,
            next_producer_id=t.next_producer_id if ids else NO_PRODUCER_ID,
        )
        p = partition_for(t.transactional_id, self.partitions)
        self.c.append_records(TRANSACTION_STATE_TOPIC, p, [(transaction_log_key(t.transactional_id), value)])
        self.c.event("coordinator", "txn_state", transactional_id=t.transactional_id, state=t.state, producer_id=t.producer_id,
                     producer_epoch=t.producer_epoch, partition=p)
        if self.replicate_rounds:
            self.c.fetch(self.replicate_rounds, topic=TRANSACTION_STATE_TOPIC)

    def _transition(self, t: TxnMetadata, **changes) -> None:
        """prepareTransitionTo + completeTransitionTo: the previous producer id is the one before."""
        t.prev_producer_id = t.producer_id
        for k, v in changes.items():
            setattr(t, k, v)
        self._write(t)

    def init_producer_id(self, transactional_id: str) -> TxnMetadata:
        t = self.txns.get(transactional_id)
        if t is None:
            t = self.txns[transactional_id] = TxnMetadata(transactional_id, self.generate_producer_id())
        if t.state in ("Ongoing", "PrepareCommit", "PrepareAbort"):
            raise ValueError(f"{transactional_id}: end the open transaction before InitProducerId")
        if is_epoch_exhausted(t.producer_epoch):
            self._transition(t, state="Empty", producer_id=self.generate_producer_id(), producer_epoch=0, partitions=[],
                             start_ms=-1)
        else:
            self._transition(t, state="Empty", producer_epoch=t.producer_epoch + 1, partitions=[], start_ms=-1)
        return t

    def resume(self, transactional_id: str, producer_id: int, producer_epoch: int, client_tv: int) -> TxnMetadata:
        """A transactional id that has run for long before this story: its last state (CompleteCommit
        at ``producer_epoch``) is all compaction left of its history in ``__transaction_state``."""
        t = self.txns[transactional_id] = TxnMetadata(transactional_id, producer_id, producer_epoch, producer_id,
                                                      client_tv=client_tv, start_ms=START_MS + self.c.now)
        self._transition(t, state="CompleteCommit")
        self._next_id = max(self._next_id, producer_id + 1)
        return t

    def add_partition(self, t: TxnMetadata, topic: str, partition: int, client_tv: int) -> None:
        if (topic, partition) in t.partitions:
            return
        start = START_MS + self.c.now if t.state in ("Empty", "CompleteCommit", "CompleteAbort") else t.start_ms
        self._transition(t, state="Ongoing", partitions=[*t.partitions, (topic, partition)], start_ms=start, client_tv=client_tv)

    def end_transaction(self, t: TxnMetadata, commit: bool, client_tv: int) -> list[SimBatch]:
        """EndTxn: Prepare, the markers, Complete. Returns the markers written."""
        bump = client_tv >= TV_2
        next_id = self.generate_producer_id() if bump and is_epoch_exhausted(t.producer_epoch) else NO_PRODUCER_ID
        self._transition(t, state="PrepareCommit" if commit else "PrepareAbort", next_producer_id=next_id,
                         producer_epoch=t.producer_epoch + 1 if bump else t.producer_epoch, client_tv=client_tv)
        markers = [self.c.write_marker(topic, p, t.producer_id, "commit" if commit else "abort", producer_epoch=t.producer_epoch,
                                       coordinator_epoch=self.coordinator_epoch(t.transactional_id))
                   for topic, p in t.partitions]
        rotate = bump and next_id != NO_PRODUCER_ID
        self._transition(t, state="CompleteCommit" if commit else "CompleteAbort", partitions=[], next_producer_id=NO_PRODUCER_ID,
                         producer_id=next_id if rotate else t.producer_id, producer_epoch=0 if rotate else t.producer_epoch)
        return markers

    # -------------------------------------------------------------- client side
    def producer(self, transactional_id: str, *, supports_tv2: bool = True) -> TransactionalProducer:
        """A new producer instance: ``initTransactions()``."""
        return TransactionalProducer(self, transactional_id, supports_tv2, self.init_producer_id(transactional_id))

    def resumed_producer(self, transactional_id: str, producer_id: int, producer_epoch: int, *,
                         supports_tv2: bool = True) -> TransactionalProducer:
        """A producer instance that has been running since before the story (see ``resume``)."""
        tv = TV_2 if supports_tv2 and self.transaction_version >= 2 else TV_0
        return TransactionalProducer(self, transactional_id, supports_tv2, self.resume(transactional_id, producer_id,
                                                                                         producer_epoch, tv))


class TransactionalProducer:
    """One KafkaProducer with a transactional.id (TransactionManager): ``send`` begins a transaction
    if none is open, ``commit``/``abort`` end it. ``supports_tv2``: a Java 4.x client (False: one
    that never uses transactions v2, e.g. librdkafka 2.x, which writes epoch 0 throughout)."""

    def __init__(self, coordinator: TransactionCoordinator, transactional_id: str, supports_tv2: bool, t: TxnMetadata):
        self.coord = coordinator
        self.c = coordinator.c
        self.transactional_id = transactional_id
        self.supports_tv2 = supports_tv2
        self.tv2 = supports_tv2 and coordinator.transaction_version >= 2
        self.producer_id, self.epoch = t.producer_id, t.producer_epoch

    @property
    def meta(self) -> TxnMetadata:
        return self.coord.txns[self.transactional_id]

    def send(self, topic: str, partition: int, n: int, *, batch_records: int = 10, value_bytes: int = 100,
             acks: str = "all") -> list[SimBatch]:
        self.coord.add_partition(self.meta, topic, partition, TV_2 if self.tv2 else TV_0)
        return self.c.produce(topic, partition, n, acks=acks, batch_records=batch_records, value_bytes=value_bytes,
                              key_fmt=self.transactional_id + "-{seq}", producer_id=self.producer_id, producer_epoch=self.epoch,
                              transactional=True)

    def commit(self) -> list[SimBatch]:
        return self._end(True)

    def abort(self) -> list[SimBatch]:
        return self._end(False)

    def _end(self, commit: bool) -> list[SimBatch]:
        t = self.meta
        markers = self.coord.end_transaction(t, commit, TV_2 if self.tv2 else TV_0)
        if self.tv2:  # EndTxn v5+: the response carries the producer id and epoch to use next
            self.producer_id, self.epoch = t.producer_id, t.producer_epoch
        elif self.supports_tv2 and self.coord.transaction_version >= 2:
            # maybeUpdateTransactionV2Enabled: the upgrade is seen now; bump the epoch before the first v2 transaction
            t = self.coord.init_producer_id(self.transactional_id)
            self.producer_id, self.epoch, self.tv2 = t.producer_id, t.producer_epoch, True
            self.c.event("producer", "transaction_version_upgraded", transactional_id=self.transactional_id,
                         producer_id=self.producer_id, producer_epoch=self.epoch)
        return markers


def _grouped(partitions: list[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    """TransactionLog.valueToBytes groups the partitions by topic."""
    out: dict[str, list[int]] = {}
    for topic, p in partitions:
        out.setdefault(topic, []).append(p)
    return list(out.items())
