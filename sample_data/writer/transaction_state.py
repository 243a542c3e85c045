"""``__transaction_state`` records as the transaction coordinator writes them (``TransactionLog``).

    key   => Version:int16=0 TransactionLogKey   (TransactionalId string)
    value => Version:int16 TransactionLogValue, or null (a tombstone: the transactional id expired)
      v0 => ProducerId int64 ProducerEpoch int16 TransactionTimeoutMs int32 TransactionStatus int8
            TransactionPartitions nullable [Topic string, PartitionIds [int32]]
            TransactionLastUpdateTimestampMs int64 TransactionStartTimestampMs int64
      v1 => the same fields, flexible (compact strings and arrays, a tag section after each
            partition entry and at the end), with tagged PreviousProducerId (0), NextProducerId (1),
            ClientTransactionVersion (2), NextProducerEpoch (3), each written only when not its
            default (-1, -1, 0, -1): Kafka's generated ``TransactionLogValue.write``.

Which version and which tags (``TransactionLog.valueToBytes``, 4.1.1 and 4.4): the value version
follows the cluster's finalized ``transaction.version`` (0 -> v0, 1 and 2 -> v1), not the client;
``ClientTransactionVersion`` is the client's (0, or 2 for a transactions-v2 client: the request
versions tell only those two apart, ``TransactionVersion.transactionVersionFor*``). Kafka 4.0-4.3
write no producer ids among the tags; 4.4 (KAFKA-20310) writes PreviousProducerId and
NextProducerId at v1 (``persist_producer_ids``). An ``Empty`` transaction's partitions are null.

Why: scenarios lay out the coordinator's log next to the partitions' markers (transactions v2's
epoch bump per transaction, the producer id handed over at an exhausted epoch), and tests let
Kafka 4.1.1's ``kafka-dump-log --transaction-log-decoder`` judge every version.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from .remote_log_metadata import uvarint

TRANSACTION_LOG_KEY_VERSION = 0
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# TransactionState ids, as TransactionState.id
STATES = {
    "Empty": 0,
    "Ongoing": 1,
    "PrepareCommit": 2,
    "PrepareAbort": 3,
    "CompleteCommit": 4,
    "CompleteAbort": 5,
    "Dead": 6,
    "PrepareEpochFence": 7,
}

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


def log_value_version(transaction_version: int) -> int:
    """``TransactionVersion.transactionLogValueVersion``: flexible records from level 1 on."""
    return 1 if transaction_version >= 1 else 0


def transaction_log_key(transactional_id: str) -> bytes:
    """``TransactionLog.keyToBytes``: version 0, then the transactional id (int16-length string)."""
    raw = transactional_id.encode()
    return _I16.pack(TRANSACTION_LOG_KEY_VERSION) + _I16.pack(len(raw)) + raw


def _string(text: str, flexible: bool) -> bytes:
    raw = text.encode()
    return (uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _partitions(partitions: Sequence[tuple[str, Sequence[int]]] | None, flexible: bool) -> bytes:
    if partitions is None:
        return uvarint(0) if flexible else _I32.pack(-1)
    out = uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
    for topic, ids in partitions:
        out += _string(topic, flexible)
        out += (uvarint(len(ids) + 1) if flexible else _I32.pack(len(ids))) + b"".join(_I32.pack(i) for i in ids)
        if flexible:
            out += uvarint(0)  # the entry's (empty) tag section
    return out


def transaction_log_value(
    *,
    producer_id: int,
    producer_epoch: int,
    timeout_ms: int,
    state: str,
    partitions: Sequence[tuple[str, Sequence[int]]] | None,
    last_update_ms: int,
    start_ms: int,
    version: int = 1,
    client_transaction_version: int = 0,
    previous_producer_id: int = NO_PRODUCER_ID,
    next_producer_id: int = NO_PRODUCER_ID,
    next_producer_epoch: int = NO_PRODUCER_EPOCH,
) -> bytes:
    """One ``TransactionLogValue`` of ``version`` (0 or 1), version prefix included. ``partitions``:
    (topic, partition ids) pairs, None for an ``Empty`` transaction (as Kafka writes it). The tags
    are written (v1 only) when not their defaults, in tag order; v0 cannot hold them."""
    if version not in (0, 1):
        raise ValueError(f"TransactionLogValue has versions 0 and 1, not {version}")
    flexible = version >= 1
    body = (_I16.pack(version) + _I64.pack(producer_id) + _I16.pack(producer_epoch) + _I32.pack(timeout_ms)
            + _I8.pack(STATES[state]) + _partitions(partitions, flexible) + _I64.pack(last_update_ms) + _I64.pack(start_ms))
    if not flexible:
        return body
    tags = [(tag, raw) for tag, raw, is_default in (
        (0, _I64.pack(previous_producer_id), previous_producer_id == NO_PRODUCER_ID),
        (1, _I64.pack(next_producer_id), next_producer_id == NO_PRODUCER_ID),
        (2, _I16.pack(client_transaction_version), client_transaction_version == 0),
        (3, _I16.pack(next_producer_epoch), next_producer_epoch == NO_PRODUCER_EPOCH),
    ) if not is_default]
    return body + uvarint(len(tags)) + b"".join(uvarint(tag) + uvarint(len(raw)) + raw for tag, raw in tags)
