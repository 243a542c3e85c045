"""Writers for Kafka's on-disk formats: the inverse of ``parsers/``.

One module per file kind, named like the parser that reads it back. ``log.write_partition`` and
``log.write_broker_dir`` lay out whole directories the way a broker does (``LogSegment``,
``UnifiedLog``, ``ProducerStateManager``, the checkpoint files); ``bulk`` writes large data sets
fast for benchmarks. Every format here is judged by Kafka's own ``kafka-dump-log`` in the tests,
never only by our parser.
"""
