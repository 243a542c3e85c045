"""``--remote sc://HOST:PORT``: the same jobs through a real Spark Connect server give the same tables.

The server is the one pip's pyspark ships (``sbin/start-connect-server.sh``), started once for the
module on 127.0.0.1 and a free port, its Python workers on this venv and this checkout (they run
our parsers inside ``mapInArrow``), and stopped at the end even when a test fails. One local and
one remote ``analyze`` of the smallest real-cluster incident with findings are compared table by
table (rows sorted) and findings.json apart from its timestamp; ``sql --remote`` queries the result.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pyspark
import pytest
from conftest import REAL, REPO

CLI = [sys.executable, "-m", "analyzer.cli"]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
INCIDENT = REAL / "unclean-election-divergence-rejoined"  # 2 MB, 4 nodes, an unclean election and acked loss
COMPARED = ("batches", "records", "findings", "replica_logs", "offset_ranges", "epoch_lineage", "files", "problems", "restart_preview")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    """``sc://127.0.0.1:PORT`` of a Spark Connect server started for this module (local[2]), and a
    ``ready()`` that waits until it listens: the server's JVM starts while the local analyze runs."""
    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("connect")
    port = _free_port()
    env = {**ENV, "PYSPARK_PYTHON": sys.executable, "SPARK_LOG_DIR": str(work / "log"), "SPARK_PID_DIR": str(work / "pid"),
           "SPARK_CONF_DIR": str(REPO / "jobs" / "session" / "spark_conf")}  # (its log4j config: errors only)
    cmd = [str(home / "sbin" / "start-connect-server.sh"), "--wait", "--master", "local[2]",
           "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
           "--conf", "spark.ui.enabled=false", "--conf", f"spark.local.dir={work}",
           "--conf", "spark.python.worker.reuse=true"]
    log = (work / "server.log").open("wb")
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 300

    def ready() -> str:
        while not _listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Spark Connect server did not start: {(work / 'server.log').read_text()[-2000:]}")
            time.sleep(0.2)
        return f"sc://127.0.0.1:{port}"

    try:
        yield ready
    finally:
        # --wait keeps spark-submit and its JVM in the group started above: stop that group only
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(30)
        log.close()


def _analyze(out: Path, *spark_args: str) -> subprocess.Popen:
    """``analyze`` started (not waited for), its stdout and stderr into files beside DIR."""
    with open(out.parent / "stdout", "w") as stdout, open(out.parent / "stderr", "w") as stderr:
        return subprocess.Popen([*CLI, "analyze", str(INCIDENT), "--out", str(out), "--ledger", str(INCIDENT / "ledger.jsonl"),
                                 "--format", "json", "--quiet", *spark_args], stdout=stdout, stderr=stderr, text=True, env=ENV)


@pytest.fixture(scope="module")
def analyzed(connect_server, tmp_path_factory) -> dict[str, Path]:
    """Local mode's DIR and the server's: the local analyze runs while the server starts and while
    the remote one runs (two runs into different DIRs at once: see test_atomic_outputs)."""
    outs = {name: tmp_path_factory.mktemp(name) / "out" for name in ("local", "remote")}
    runs = {"local": _analyze(outs["local"], "--master", "local[2]")}
    try:
        runs["remote"] = _analyze(outs["remote"], "--remote", connect_server())
        for name, run in runs.items():
            run.wait(timeout=1200)
            # 1: errors found (acked_data_loss, unclean_leader_election)
            assert run.returncode == 1, f"{name}: {(outs[name].parent / 'stderr').read_text()[-3000:]}"
    finally:
        for run in runs.values():
            if run.poll() is None:
                run.kill()
                run.wait(60)
    return outs


@pytest.fixture(scope="module")
def local_dir(analyzed) -> Path:
    return analyzed["local"]


@pytest.fixture(scope="module")
def remote_dir(analyzed) -> Path:
    return analyzed["remote"]


def _rows(out: Path, name: str) -> list[str]:
    """Table ``name`` of DIR as sorted row texts (Hive partition columns included)."""
    return sorted(repr(sorted(row.items())) for row in pq.read_table(out / "tables" / name).to_pylist())


def _findings(out: Path) -> dict:
    doc = json.loads((out / "findings.json").read_text())
    doc.pop("generated_at")
    return doc


def test_remote_analyze_writes_the_tables_local_mode_writes(local_dir, remote_dir, connect_server):
    url = connect_server()
    for name in COMPARED:
        local, remote = _rows(local_dir, name), _rows(remote_dir, name)
        assert remote == local, f"{name}: {len(remote)} rows over Connect, {len(local)} locally"
    assert len(_rows(remote_dir, "records")) > 2000 and len(_rows(remote_dir, "findings")) >= 2
    assert _findings(remote_dir) == _findings(local_dir)
    run, local = (json.loads((d / "run.json").read_text()) for d in (remote_dir, local_dir))
    # parsed by tasks on the server, every file (417 KB in 98 files is one task: tasks are no longer cut at each log dir)
    assert run["master"] == url and run["ingest"]["tasks"] >= 1 and run["ingest"]["files"] == local["ingest"]["files"] > 0
    assert not (remote_dir / "catalog").exists()  # the server's catalog is not DIR's: the first local sql builds it


def test_sql_remote_queries_the_tables(remote_dir, connect_server):
    url = connect_server()
    q = subprocess.run([*CLI, "sql", str(remote_dir), "select topic, count(*) as n from records group by topic", "--format", "json",
                        "--remote", url, "--quiet"], capture_output=True, text=True, timeout=600, env=ENV)
    assert q.returncode == 0, q.stderr
    got = {r.get("topic"): r["n"] for r in map(json.loads, q.stdout.splitlines())}  # (to_json leaves a null topic out)
    table = pq.read_table(remote_dir / "tables" / "records", columns=["topic"]).column("topic").to_pylist()
    assert got == {t: table.count(t) for t in set(table)}


def test_remote_without_server_is_one_line(tmp_path):
    """No server at the URL: one line naming it, exit 2, at once (pyspark's client would retry for minutes)."""
    (tmp_path / "tables").mkdir()
    port = _free_port()
    started = time.monotonic()
    run = subprocess.run([*CLI, "sql", str(tmp_path), "select 1", "--remote", f"sc://127.0.0.1:{port}"], capture_output=True, text=True,
                         timeout=120, env=ENV)
    assert run.returncode == 2
    assert run.stderr.startswith(f"kafka-forensics: sc://127.0.0.1:{port}: no Spark Connect server answers at 127.0.0.1:{port}")
    assert len(run.stderr.splitlines()) == 1 and time.monotonic() - started < 60
