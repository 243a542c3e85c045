"""replica_logs' checkpoint columns: one pass over the checkpoints table gives each replica the
offset each checkpoint file of its log dir names for it, and null where that file names none."""

from jobs.replicas.replica_logs import CHECKPOINT_COLUMNS, checkpointed

COLUMNS = ["broker", "log_dir", "topic", "partition", "file_kind", "offset"]


def test_each_checkpoint_kind_is_its_own_column_and_absent_kinds_are_null(spark):
    rows = [
        (1, "d1", "t", 0, "replication_offset", 10),
        (1, "d1", "t", 0, "replication_offset", 12),  # (two entries for one replica: the highest counts, as before)
        (1, "d1", "t", 0, "recovery_point", 5),
        (1, "d1", "t", 1, "log_start", 3),
        (2, "d2", "t", 0, "cleaner", 7),
        (2, "d2", "t", 0, "replication_offset", 9),
    ]
    got = {(r["broker"], r["topic"], r["partition"]): r.asDict()
           for r in checkpointed(spark.createDataFrame(rows, COLUMNS)).collect()}
    assert set(got) == {(1, "t", 0), (1, "t", 1), (2, "t", 0)}
    pick = {key: tuple(r[c] for c in CHECKPOINT_COLUMNS.values()) for key, r in got.items()}
    # (hw_checkpoint, recovery_point, log_start_checkpoint, cleaner_offset)
    assert pick == {(1, "t", 0): (12, 5, None, None), (1, "t", 1): (None, None, 3, None), (2, "t", 0): (9, None, None, 7)}
