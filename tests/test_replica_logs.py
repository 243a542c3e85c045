"""replica_logs in one aggregate on the driver: what each file kind says of a replica lands in its
row (the checkpoint files one column each, null where a file names no entry for it), and only a
log dir holding batches or segment files of a partition makes a replica of it."""

import pyarrow as pa

from jobs.replicas.replica_logs import LOCAL_INPUTS, local_build, rows_of
from jobs.store.tables import schema_of

R1 = {"topic": "t", "partition": 0, "broker": 1, "log_dir": "b1/d", "dir_state": "live"}
R2 = {"topic": "t", "partition": 0, "broker": 2, "log_dir": "b2/d", "dir_state": "live"}
LOG = "00000000000000000000.log"


def runs(batches: list[dict]) -> list[dict]:
    """The batch_runs rows of one replica's batches (one piece), as ingest sums them."""
    import pyarrow as pa

    from jobs.ingest.batch_runs import runs_of
    from parsers.segment import BATCH_SCHEMA

    table = pa.Table.from_pylist([{f.name: b.get(f.name) for f in BATCH_SCHEMA} for b in batches], schema=BATCH_SCHEMA)
    own = {k: batches[0][k] for k in (*R1, "file_kind")}
    return [{**own, **r} for r in runs_of(table).to_pylist()]


def _arrow(name, rows):
    """Input table ``name`` of ``rows``, with the columns ``local_build`` reads (Arrow, as the driver reads it)."""
    schema = schema_of(name)
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema).select(LOCAL_INPUTS[name])


def test_each_file_kind_lands_in_its_replica_row():
    rows = {
        "batches": [{**R1, "file_kind": "segment", "base_offset": 0, "last_offset": 4, "record_count": 5, "is_control": False,
                     "size": 100, "partition_leader_epoch": 1, "magic": 2},
                    {**R1, "file_kind": "segment", "base_offset": 5, "last_offset": 9, "record_count": 5, "is_control": False,
                     "size": 90, "partition_leader_epoch": 2, "magic": 2}],
        "files": [{**R1, "kind": "segment", "path": f"b1/d/t-0/{LOG}"}, {**R2, "kind": "segment", "path": f"b2/d/t-0/{LOG}"}],
        "checkpoints": [{**R1, "file_kind": "replication_offset", "offset": 10},
                        {**R1, "file_kind": "replication_offset", "offset": 12},  # (two entries: the highest counts)
                        {**R1, "file_kind": "recovery_point", "offset": 5},
                        {**R2, "file_kind": "cleaner", "offset": 7},
                        {**R1, "partition": 1, "file_kind": "log_start", "offset": 3}],  # (no log of t-1 in b1/d: no replica)
        "leader_epochs": [{**R1, "line": 3, "epoch": 2, "start_offset": 5}, {**R1, "line": 2, "epoch": 1, "start_offset": 0}],
        "partition_metadata": [{**R1, "topic_uuid": "uuid-t"}],
        "problems": [{**R1, "path": f"b1/d/t-0/{LOG}", "code": "x"}],
        "clean_shutdown": [{"broker": 2, "log_dir": "b2/d"}],
    }
    rows["batch_runs"] = runs(rows["batches"])
    t = {name: _arrow(name, rows.get(name, [])) for name in LOCAL_INPUTS}
    got = {r["broker"]: r.asDict(recursive=True) for r in rows_of(local_build(t, rows["clean_shutdown"]))}
    assert set(got) == {1, 2}
    one, two = got[1], got[2]
    assert (one["segments"], one["first_offset"], one["leo"], one["records"], one["bytes"]) == (1, 0, 10, 10, 190)
    assert (one["hw_checkpoint"], one["recovery_point"], one["log_start_checkpoint"], one["cleaner_offset"]) == (12, 5, None, None)
    assert one["epoch_entries"] == [{"epoch": 1, "start_offset": 0}, {"epoch": 2, "start_offset": 5}]
    assert (one["first_epoch"], one["last_epoch"], one["batch_last_epoch"], one["topic_id"], one["problems"]) == (1, 2, 2, "uuid-t", 1)
    assert (one["clean_shutdown"], one["compacted"]) == (False, False)
    # an empty log (a segment file, no batches): its LEO is the segment's base offset
    assert (two["segments"], two["first_offset"], two["leo"], two["records"], two["epoch_entries"], two["first_epoch"]) == (
        1, None, 0, 0, None, None)
    assert (two["hw_checkpoint"], two["cleaner_offset"], two["clean_shutdown"], two["compacted"], two["problems"]) == (
        None, 7, True, True, 0)
