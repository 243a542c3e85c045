"""What each replica holds and how the replicas of a partition compare: replica logs, offset
ranges, epoch lineage, the record-level comparison, the ledger view and the surviving log."""
