"""``__transaction_state`` records: each transactional producer's state as its coordinator logged it.

    key   = int16 version (0) + TransactionLogKey   (TransactionalId: string)
    value = int16 version + TransactionLogValue, or null (tombstone: the transactional id expired)
      v0: ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32, TransactionStatus int8,
          TransactionPartitions nullable [Topic string, PartitionIds []int32],
          TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64
      v1: the same, flexible (compact strings and arrays, tagged fields), with tagged
          PreviousProducerId (tag 0), NextProducerId (tag 1), ClientTransactionVersion (tag 2),
          NextProducerEpoch (tag 3)
          (KIP-890, KIP-939; ``transaction-coordinator/src/main/resources/common/message/TransactionLog*.json``)

Which Kafka writes what (``TransactionLog.valueToBytes``): v0 while the cluster's
``transaction.version`` feature is 0, v1 from level 1 on, for every transactional id whatever its
client. Kafka 4.0-4.3 set only ClientTransactionVersion among the tags (written when not 0: a
transactions-v2 client's 2); 4.4 (KAFKA-20310) also writes PreviousProducerId (the producer id
before the transition, so nearly always) and NextProducerId (the id allocated when the epoch is
exhausted, on PrepareCommit/PrepareAbort). No Kafka up to 4.4 writes NextProducerEpoch yet.

Why: the coordinator's log says which transactions were open, on which partitions, since when,
and how they ended (PrepareCommit/CompleteCommit, PrepareAbort/CompleteAbort, a fenced epoch), the
other half of a hanging-transaction investigation.

Choices:
  * ``partitions`` is ``list<struct<topic, partitions list<int32>>>`` exactly as stored (null when
    Kafka's nullable array is null, which Kafka writes for every ``Empty`` transaction).
    Kafka's ``TransactionLog.readTxnRecordValue`` ignores the partitions of an ``Empty`` transaction
    when it loads them; we keep what the bytes say. Null partitions in any other state make Kafka's
    loader fail (a NullPointerException): that is an ``invalid_record`` problem here.
  * Tagged fields (``previous_producer_id``, ``next_producer_id``, ``next_producer_epoch``,
    ``client_transaction_version``) are null when not written (Kafka then uses -1, -1, -1, 0).
  * Transactions v2 (KIP-890 part 2): the coordinator bumps the epoch at every PrepareCommit /
    PrepareAbort (the markers carry that epoch); at an exhausted epoch (32766) the Prepare record
    holds epoch 32767 and the old id, and the Complete record the new id at epoch 0
    (``TransactionMetadata.prepareComplete``): the table shows them as written.
  * ``status_name`` follows ``TransactionState``; a status Kafka does not know (it throws on load)
    leaves ``status_name`` null and says so in ``error`` with an ``invalid_record`` problem.
  * Unknown key/value versions keep raw hex with no problem row (a newer Kafka); unreadable bytes
    keep raw hex and add an ``invalid_record`` problem; see consumer_offsets.py for the shared rules.
"""

from __future__ import annotations

import pyarrow as pa

from .common import Problem
from .consumer_offsets import decode_keyed_records, raw_hex, version_prefix
from .kafka_messages import F, Message, MessageError, decode

STATUS_NAMES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)

PARTITIONS_TYPE = pa.list_(pa.struct([pa.field("topic", pa.string()), pa.field("partitions", pa.list_(pa.int32()))]))

TRANSACTIONS_SCHEMA = pa.schema(
    [
        pa.field("batch_position", pa.int64()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.int64()),  # ms, the record's
        pa.field("key_version", pa.int16()),
        pa.field("value_version", pa.int16()),  # null for a tombstone
        pa.field("tombstone", pa.bool_()),
        pa.field("transactional_id", pa.string()),
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int16()),
        pa.field("timeout_ms", pa.int32()),
        pa.field("status", pa.int8()),
        pa.field("status_name", pa.string()),
        pa.field("partitions", PARTITIONS_TYPE),
        pa.field("last_update_ms", pa.int64()),
        pa.field("start_ms", pa.int64()),
        pa.field("previous_producer_id", pa.int64()),  # tagged, v1+
        pa.field("next_producer_id", pa.int64()),  # tagged, v1+
        pa.field("next_producer_epoch", pa.int16()),  # tagged, v1+
        pa.field("client_transaction_version", pa.int16()),  # tagged, v1+
        pa.field("error", pa.string()),
        pa.field("raw_hex", pa.string()),
    ]
)

TRANSACTION_LOG_KEY = Message("TransactionLogKey", valid="0", fields=[F("TransactionalId", "string")])
TRANSACTION_LOG_VALUE = Message(
    "TransactionLogValue",
    flexible="1+",
    valid="0-1",
    fields=[
        F("ProducerId", "int64"),
        F("PreviousProducerId", "int64", versions="1+", tagged="1+", tag=0, default=None),
        F("NextProducerId", "int64", versions="1+", tagged="1+", tag=1, default=None),
        F("ProducerEpoch", "int16"),
        F("NextProducerEpoch", "int16", versions="1+", tagged="1+", tag=3, default=None),
        F("TransactionTimeoutMs", "int32"),
        F("TransactionStatus", "int8"),
        F(
            "TransactionPartitions",
            "[]",
            nullable="0+",
            fields=[F("Topic", "string"), F("PartitionIds", "[]int32")],
        ),
        F("TransactionLastUpdateTimestampMs", "int64"),
        F("TransactionStartTimestampMs", "int64"),
        F("ClientTransactionVersion", "int16", versions="1+", tagged="1+", tag=2, default=None),
    ],
)

_COLUMNS = {
    "producerId": "producer_id",
    "producerEpoch": "producer_epoch",
    "transactionTimeoutMs": "timeout_ms",
    "transactionStatus": "status",
    "transactionLastUpdateTimestampMs": "last_update_ms",
    "transactionStartTimestampMs": "start_ms",
    "previousProducerId": "previous_producer_id",
    "nextProducerId": "next_producer_id",
    "nextProducerEpoch": "next_producer_epoch",
    "clientTransactionVersion": "client_transaction_version",
}


def decode_record(key: bytes | None, value: bytes | None) -> tuple[dict, str | None]:
    """One record's key and value -> (row fields, damage detail or None). Never raises."""
    row: dict = {"tombstone": value is None}
    kv = version_prefix(key) if key is not None else None
    row["key_version"] = kv
    if value is not None:
        row["value_version"] = version_prefix(value)
    if kv is None:
        row["error"] = "record has no key" if key is None else f"key of {len(key)} bytes has no version"
        row["raw_hex"] = raw_hex(key, value)
        return row, row["error"]
    if not TRANSACTION_LOG_KEY.supports(kv):
        row["error"] = f"unknown key version {kv}"
        row["raw_hex"] = raw_hex(key, value)
        return row, None
    notes = []
    try:
        k, kend = decode(TRANSACTION_LOG_KEY, key, kv, pos=2)
    except MessageError as e:
        row["error"] = f"TransactionLogKey v{kv}: {e}"
        row["raw_hex"] = raw_hex(key, value)
        return row, row["error"]
    row["transactional_id"] = k["transactionalId"]
    if kend < len(key):
        notes.append(f"{len(key) - kend} bytes after the key (Kafka ignores them)")
    if value is not None:
        vv = row["value_version"]
        if vv is None:
            row["error"] = f"value of {len(value)} bytes has no version"
            row["raw_hex"] = raw_hex(key, value)
            return row, row["error"]
        if not TRANSACTION_LOG_VALUE.supports(vv):
            row["error"] = f"unknown TransactionLogValue version {vv}"
            row["raw_hex"] = raw_hex(key, value)
            return row, None
        try:
            v, vend = decode(TRANSACTION_LOG_VALUE, value, vv, pos=2)
        except MessageError as e:
            row["error"] = f"TransactionLogValue v{vv}: {e}"
            row["raw_hex"] = raw_hex(key, value)
            return row, row["error"]
        for name, column in _COLUMNS.items():
            row[column] = v.get(name)
        parts = v["transactionPartitions"]
        row["partitions"] = None if parts is None else [{"topic": p["topic"], "partitions": p["partitionIds"]} for p in parts]
        status = row["status"]
        if 0 <= status < len(STATUS_NAMES):
            row["status_name"] = STATUS_NAMES[status]
        else:
            row["error"] = f"unknown transaction status {status} (Kafka cannot load this record)"
            row["raw_hex"] = raw_hex(key, value)
            return row, row["error"]
        if parts is None and status != 0:
            # Kafka writes null partitions only for Empty; its loader calls forEach on them otherwise
            row["error"] = f"null partitions in a {row['status_name']} transaction (Kafka's loader fails on it)"
            row["raw_hex"] = raw_hex(key, value)
            return row, row["error"]
        if vend < len(value):
            notes.append(f"{len(value) - vend} bytes after TransactionLogValue v{vv} (Kafka ignores them)")
    if notes:
        row["error"] = "; ".join(notes)
    return row, None


def decode_records(records: pa.Table) -> tuple[pa.Table, list[Problem]]:
    """Decode a ``__transaction_state`` segment's records (``segment.parse(..., records=True,
    payloads=True).extra["records"]``) into TRANSACTIONS_SCHEMA rows, skipping control records.

    Never raises on bad bytes: a record that cannot be read keeps its raw hex and adds an
    ``invalid_record`` problem at its byte position."""
    return decode_keyed_records(records, decode_record, TRANSACTIONS_SCHEMA, "__transaction_state")
