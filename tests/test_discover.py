"""Discovery: log dirs and brokers from the layouts operators collect (no Spark)."""

from __future__ import annotations

from pathlib import Path

from conftest import FOUND, REAL

from jobs.ingest.discover import Root, discover


def brokers(path: Path, prefix: str = "") -> dict[int, object]:
    return {b.broker: b for b in discover([Root(path, prefix)]).brokers}


def test_real_cluster_brokers_and_controller():
    found = brokers(REAL / "crash-only")
    assert set(found) == {1, 2, 3, 100}
    assert found[100].roles == "controller"
    assert {found[i].roles for i in (1, 2, 3)} == {"broker"}
    assert {b.id_source for b in found.values()} == {"meta.properties"}
    assert found[1].log_dirs == ["broker-1"]
    assert found[1].cluster_id == "HoldoutRealCluster000w"


def test_non_log_dirs_are_ignored_but_broker_logs_are_taken():
    files = discover([Root(REAL / "crash-only", "")]).files
    assert not any(f.path.startswith("dumps/") or "/" not in f.path for f in files)
    # server-logs/ holds the brokers' logs: only those, each attributed by its node-N- name
    logs = [f for f in files if f.path.startswith("server-logs/")]
    on_disk = sorted(p.name for p in (REAL / "crash-only" / "server-logs").iterdir() if ".log" in p.name)
    assert sorted(f.path.split("/", 1)[1] for f in logs) == on_disk
    assert all(f.kind == "broker_log" and f.path.split("/")[1].startswith(f"node-{f.broker}-") for f in logs)


def test_three_zookeeper_brokers():
    found = brokers(FOUND / "k3x-zk-3brokers-shubhamdixit863")
    assert sorted(found) == [1, 2, 3]
    assert found[2].log_dirs == ["kafka-logs-2"]


def test_single_log_dir_is_named_by_its_folder():
    d = discover([Root(FOUND / "k010-zk-v1-bullshit" / "kafka-logs", "")])
    assert [b.log_dirs for b in d.brokers] == [["kafka-logs"]]
    assert all(f.path.startswith("kafka-logs/") for f in d.files)
    assert any(f.topic == "TEST-TOPIC" and f.partition == 0 and f.dir_state == "live" for f in d.files)


def test_jbod_two_log_dirs_one_broker(tmp_path):
    for ld, topic in (("logs-a", "t-0"), ("logs-b", "t-1")):
        (tmp_path / "broker-5" / ld / topic).mkdir(parents=True)
        (tmp_path / "broker-5" / ld / "meta.properties").write_text(f"version=1\nnode.id=5\ncluster.id=C\ndirectory.id=dir-{ld}\n")
        (tmp_path / "broker-5" / ld / topic / "00000000000000000000.log").write_bytes(b"")
    found = brokers(tmp_path)
    assert list(found) == [5]
    assert found[5].log_dirs == ["broker-5/logs-a", "broker-5/logs-b"]
    assert found[5].directory_ids == ["dir-logs-a", "dir-logs-b"]


def test_folder_name_fallback(tmp_path):
    (tmp_path / "kafka-7" / "orders-0").mkdir(parents=True)
    (tmp_path / "kafka-7" / "orders-0" / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "kafka-7" / "orders-0" / "00000000000000000000.log.deleted").write_bytes(b"")
    (tmp_path / "kafka-7" / "orders-0.abc-delete").mkdir()
    (tmp_path / "kafka-7" / "orders-0.abc-delete" / "00000000000000000000.log").write_bytes(b"")
    d = discover([Root(tmp_path, "")])
    assert [(b.broker, b.id_source) for b in d.brokers] == [(7, "folder")]
    kinds = {(f.path, f.kind, f.dir_state) for f in d.files}
    assert ("kafka-7/orders-0/00000000000000000000.log.deleted", "pending_delete", "live") in kinds
    assert ("kafka-7/orders-0.abc-delete/00000000000000000000.log", "segment", "delete") in kinds


def test_discover_inputs_takes_every_layout_with_a_log_dir(tmp_path):
    """What analyze and ingest accept before Spark starts: a folder of broker dirs, one log dir, a
    KRaft controller-only node (only __cluster_metadata-0), one broker's archive, and inputs of
    which only some hold a log dir (broker logs beside them, an empty folder)."""
    import tarfile

    from jobs.ingest.discover import discover_inputs

    crash = REAL / "crash-only"
    with tarfile.open(tmp_path / "b2.tar.gz", "w:gz") as tf:
        tf.add(crash / "broker-2", arcname="broker-2")
    (tmp_path / "empty").mkdir()
    layouts = {
        "brokers": ([crash], {1, 2, 3, 100}),
        "one log dir": ([FOUND / "k010-zk-v1-bullshit" / "kafka-logs"], None),
        "controller only": ([crash / "controller-100"], {100}),
        "archive": ([tmp_path / "b2.tar.gz"], {2}),
        "with broker logs and an empty folder": ([crash / "broker-1", crash / "server-logs", tmp_path / "empty"], {1}),
    }
    for i, (name, (inputs, ids)) in enumerate(layouts.items()):
        found = discover_inputs(inputs, tmp_path / f"work-{i}")
        assert found.brokers and found.files, name
        if ids is not None:
            assert {b.broker for b in found.brokers} == ids, name
    assert any(f.kind == "broker_log" for f in discover_inputs(layouts["with broker logs and an empty folder"][0], tmp_path / "w").files)


def test_a_file_gone_between_the_walk_and_its_listing_is_said_gone_not_unreadable(tmp_path, monkeypatch):
    """The walk's own lstat is the file's: a file removed right after its folder was walked (a live
    broker's retention) fails the read check, and is named for what happened to it."""
    import jobs.ingest.discover as discover_module

    ld = tmp_path / "broker-1"
    (ld / "t-0").mkdir(parents=True)
    (ld / "meta.properties").write_text("node.id=1\nversion=1\ncluster.id=abc\n")
    (ld / "t-0" / "00000000000000000000.log").write_bytes(b"")
    gone = ld / "t-0" / "00000000000000000000.index"
    gone.write_bytes(b"")
    walk = discover_module._walk

    def walk_then_delete(top, stats=None):
        for here, dirs, files, odd in walk(top, stats):
            if gone.parent == here and gone.exists():
                gone.unlink()
            yield here, dirs, files, odd

    monkeypatch.setattr(discover_module, "_walk", walk_then_delete)
    found = discover([Root(ld, "")])
    assert [f.path.rsplit("/", 1)[1] for f in found.files if "/t-0/" in f.path] == ["00000000000000000000.log"]
    [problem] = [p for p in found.problems if p.path.endswith(".index")]
    assert "cannot be examined" in problem.detail and "No such file" in problem.detail


def test_a_log_dir_given_alone_lists_its_broker_logs_once(tmp_path):
    """A broker's server.log kept in its log dir (or in a partition folder) is one of the log
    dir's files; given the log dir itself as the input, it was listed a second time by the walk
    for logs outside log dirs, under another name (``t-0/server.log`` beside
    ``broker-5/t-0/server.log``): the same lines read twice."""
    ld = tmp_path / "broker-5"
    (ld / "t-0").mkdir(parents=True)
    (ld / "meta.properties").write_text("version=1\nnode.id=5\ncluster.id=C\n")
    (ld / "t-0" / "00000000000000000000.log").write_bytes(b"")
    line = "[2024-01-01 00:00:00,000] INFO started (kafka.server.KafkaServer)\n"
    (ld / "server.log").write_text(line)
    (ld / "t-0" / "server.log").write_text(line)
    for root in (Root(ld, ""), Root(tmp_path, "")):
        logs = sorted(f.abs_path for f in discover([root]).files if f.kind == "broker_log")
        assert logs == [str(ld / "server.log"), str(ld / "t-0" / "server.log")]


def test_broker_folders_named_like_partitions_with_their_server_logs(tmp_path):
    """``broker-1/`` parses as a partition folder (topic "broker", partition 1); with the broker's
    server.log in it, beside its log dir, the collection's top folder was taken for one log dir
    (broker -1, its files under a topic "broker"), because a server.log counted as a Kafka file."""
    for n in (1, 2):
        ld = tmp_path / f"broker-{n}" / "kafka-logs"
        (ld / "t-0").mkdir(parents=True)
        (ld / "meta.properties").write_text(f"version=1\nnode.id={n}\ncluster.id=C\n")
        (ld / "t-0" / "00000000000000000000.log").write_bytes(b"")
        (tmp_path / f"broker-{n}" / "server.log").write_text("[2024-01-01 00:00:00,000] INFO started (kafka.server.KafkaServer)\n")
    d = discover([Root(tmp_path, "")])
    assert [b.log_dirs for b in d.brokers] == [["broker-1/kafka-logs"], ["broker-2/kafka-logs"]]
    assert [b.broker for b in d.brokers] == [1, 2]
    logs = {f.path: f.broker for f in d.files if f.kind == "broker_log"}
    assert logs == {"broker-1/server.log": 1, "broker-2/server.log": 2}


def test_a_folder_given_twice_or_inside_another_input_is_read_once(tmp_path, caplog):
    """``analyze c/broker-1 c`` (or ``c c``) read broker 1's log dir twice: two log dirs of one
    broker holding the same partitions, every file counted twice."""
    from jobs.ingest.discover import discover_inputs

    clean = REAL / "clean-failover"
    alone = discover_inputs([clean], tmp_path / "a")
    for n, inputs in enumerate(([clean / "broker-1", clean], [clean, clean], [clean, clean / "broker-1"])):
        caplog.clear()
        found = discover_inputs(inputs, tmp_path / f"w{n}")
        assert [(b.broker, b.log_dirs) for b in found.brokers] == [(b.broker, b.log_dirs) for b in alone.brokers]
        assert [f.path for f in found.files] == [f.path for f in alone.files]
        assert any("read once" in r.getMessage() for r in caplog.records)
