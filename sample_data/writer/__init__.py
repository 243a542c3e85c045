"""Writers for Kafka's on-disk formats: the inverse of ``parsers/``.

One module per file kind, named like the parser that reads it back. ``log.write_partition`` and
``log.write_broker_dir`` lay out whole directories the way a broker does (``LogSegment``,
``UnifiedLog``, ``ProducerStateManager``, the checkpoint files); ``bulk`` writes large data sets
fast for benchmarks. Every format here is judged by Kafka's own ``kafka-dump-log`` in the tests,
never only by our parser.
"""

from .checkpoints import leader_epoch_checkpoint_bytes, offset_checkpoint_bytes
from .indexes import offset_index_bytes, time_index_bytes, txn_index_bytes
from .log import LogConfig, PartitionLayout, PartitionSpec, write_broker_dir, write_broker_files, write_partition
from .producer_snapshot import ProducerEntry, producer_snapshot_bytes
from .properties import clean_shutdown_bytes, meta_properties_text, partition_metadata_text
from .records import BatchSpec, Record, encode_batch, encode_legacy_message_set

__all__ = [
    "BatchSpec",
    "LogConfig",
    "PartitionLayout",
    "PartitionSpec",
    "ProducerEntry",
    "Record",
    "clean_shutdown_bytes",
    "encode_batch",
    "encode_legacy_message_set",
    "leader_epoch_checkpoint_bytes",
    "meta_properties_text",
    "offset_checkpoint_bytes",
    "offset_index_bytes",
    "partition_metadata_text",
    "producer_snapshot_bytes",
    "time_index_bytes",
    "txn_index_bytes",
    "write_broker_dir",
    "write_broker_files",
    "write_partition",
]
