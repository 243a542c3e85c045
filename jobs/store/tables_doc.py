"""Generate docs/tables.md from jobs/store/tables.py, so the documented schemas cannot drift.

    python -m jobs.store.tables_doc            # rewrite docs/tables.md
    python -m jobs.store.tables_doc --check    # exit 1 if it is out of date (tests/test_tables_doc.py)
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql.pandas.types import from_arrow_type

from jobs.store.tables import ALL_TABLES, JOB_SCHEMAS, PARTITION_BY, schema_of

DOC = Path(__file__).resolve().parents[2] / "docs" / "tables.md"

ABOUT = {
    "brokers": "one row per broker found (discovery): how it was identified, its log dirs, files and bytes",
    "files": "the evidence manifest: every file of every log dir, hashed while it was parsed",
    "batches": "one row per record batch (v2) or message/wrapper (v0/v1) of every segment, KRaft snapshot and bootstrap.checkpoint",
    "batch_runs": "one row per run of contiguous batches of one leader epoch in a piece of a segment (summed by the task that "
                  "parsed them): offsets, counts, bytes, timestamps, magic range and a digest of the batches; what the per-replica "
                  "jobs read instead of every batch",
    "producer_epoch_sums": "one row per producer epoch in a piece of a segment (summed by the task that parsed its batches): "
                           "counts, sums, hashes and extremes of its sequence numbers, its last marker and transactional data; what "
                           "the producers and transactions detectors read instead of every batch",
    "records": "one row per record, Spark Kafka-source column names; `key`/`value` only with `--payloads`",
    "index_entries": "offset index (`.index`) entries",
    "time_index_entries": "time index (`.timeindex`) entries",
    "txn_index_entries": "transaction index (`.txnindex`) entries (aborted transactions)",
    "index_files": "one row per index file: real entries vs preallocated zero padding",
    "producer_states": "producer snapshot (`.snapshot`) entries",
    "checkpoints": "replication-offset / recovery-point / log-start / cleaner checkpoint entries (topic, partition of the entry)",
    "leader_epochs": "leader-epoch-checkpoint entries",
    "partition_metadata": "partition.metadata (topic id)",
    "meta_properties": "meta.properties of each log dir",
    "clean_shutdown": "one row per `.kafka_cleanshutdown` marker present",
    "remote_segments": "`__remote_log_metadata` (tiered storage, KIP-405): one row per remote segment event "
                       "(copy started/finished, delete started/finished, partition delete); topic/partition are the tiered partition's; "
                       "a segment's state is its latest row",
    "consumer_offsets": "`__consumer_offsets`: one row per record of every type Kafka 4.1.1's group coordinator writes (offset "
                        "commits; classic, consumer (KIP-848), share (KIP-932) and streams (KIP-1071) group records); topic/partition "
                        "are the committed partition's",
    "share_group_state": "`__share_group_state` (KIP-932 share groups): one row per ShareSnapshot/ShareUpdate record: a share "
                         "group's start offset and state batches per share-partition; `topic` is null (the record names the topic "
                         "by `topic_id`), `partition` is the share-partition's",
    "problems": "what every parser, the discovery and the archive reader found wrong, naming the file and byte position",
    # the job tables
    "replica_logs": "one row per replica (topic, partition, broker): its log as Kafka's `LogLoader` would see it at start-up "
                    "(log start offset, LEO, checkpointed HW, recovery point, leader epochs) and a digest of its batches",
    "metadata_events": "the KRaft metadata log replayed per partition: one row per partition change (elections with their "
                       "cleanliness, ISR and replica changes), naming the nodes whose copy holds the record",
    "epoch_lineage": "per partition, leader epoch and replica: where the epoch starts in the leader-epoch-checkpoint and in the "
                     "batches, and the epoch's `likely_leader` with the `leader_evidence` that decided it (null: undetermined)",
    "offset_ranges": "per replica, its contiguous offset ranges of one leader epoch (`data`) and the holes between them (`hole`) "
                     "with their reason",
    "broker_events": "from the KRaft metadata log: broker and controller registrations, fencing and controlled shutdowns",
    "timeline": "one incident timeline per partition: metadata events, epoch starts, broker log lines and consumer commits "
                "in time order (`seq` breaks ties)",
    "findings": "the findings of findings.json, one row each, with the contract's fields",
    "restart_preview": "per replica that is not its partition's surviving log: where it truncates when it rejoins as a follower "
                       "(leader-epoch protocol, or the HW for logs without epochs), the records that destroys and who else holds them",
}


def render() -> str:
    out = [
        "# Tables written by `ingest`",
        "",
        "Generated by `python -m jobs.store.tables_doc` from `jobs/store/tables.py` (do not edit by hand).",
        "Parquet under `DIR/tables/<name>/`, registered under the same names in DIR's Spark SQL catalog.",
        "Paths are relative to the input root; `broker` is the node id from meta.properties (else the folder name).",
        "",
    ]
    for name in ALL_TABLES:
        out += _section(name, schema_of(name))
    out += ["# Tables written by `analyze`", "",
            "`analyze` writes the tables above and these job tables beside them, in the same DIR and catalog.", ""]
    for name, schema in JOB_SCHEMAS.items():
        out += _section(name, schema)
    return "\n".join(out)


def _section(name: str, schema) -> list[str]:
    out = [f"## `{name}`", "", ABOUT.get(name, ""), ""]
    if name in PARTITION_BY:
        out += [f"Hive-style partitions: {', '.join(f'`{c}`' for c in PARTITION_BY[name])}.", ""]
    out += ["| column | Spark SQL type | Arrow type |", "|---|---|---|"]
    for field in schema:
        out.append(f"| `{field.name}` | {from_arrow_type(field.type).simpleString()} | {field.type} |")
    out.append("")
    return out


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not DOC.is_file() or DOC.read_text() != text:
            print(f"{DOC} is out of date: run python -m jobs.store.tables_doc", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
