"""Sample data with a known answer: ``writer`` (Kafka's on-disk formats, byte-exact), ``sim`` (a
step-by-step replication simulator) and ``scenarios`` (named incidents written as broker dirs with
``ground_truth.json`` and ``ledger.jsonl``). Used by ``demo``, tests and benchmarks; never by the
analysis path."""
