"""``ingest --master spark://…`` on a real Spark standalone cluster (one master, one worker, both on
127.0.0.1, started from pip's pyspark) writes the same tables as local mode."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark
import pytest
from conftest import REAL

from jobs.ingest.pipeline import ingest
from jobs.store.io import read_table
from jobs.store.tables import ALL_TABLES

SPARK_HOME = Path(pyspark.__file__).parent
SRC = REAL / "crash-only"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp: Path) -> dict:
    env = dict(os.environ)
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(tmp / "logs"),
               SPARK_WORKER_DIR=str(tmp / "work"), PYSPARK_PYTHON=sys.executable,
               SPARK_CONF_DIR=str(Path(__file__).resolve().parents[1] / "jobs" / "spark_conf"))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _wait(predicate, timeout: float, what: str, procs) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"{what}: a Spark daemon exited with {p.returncode}")
        if predicate():
            return
        time.sleep(1)
    pytest.fail(f"timed out waiting for {what}")


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


@pytest.fixture
def cluster(tmp_path):
    """spark://127.0.0.1:<port> with one worker; both processes stopped afterwards."""
    port, ui, wui = _free_port(), _free_port(), _free_port()
    env = _env(tmp_path)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    logs = open(tmp_path / "daemons.log", "w")
    master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)], env=env, stdout=logs, stderr=subprocess.STDOUT,
                              start_new_session=True)
    procs = [master]
    try:
        _wait(lambda: _alive_workers(ui) >= 0 and _port_open(port), 180, "the master", procs)
        worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                                   "--host", "127.0.0.1", "--cores", "2", "--memory", "2g", "--webui-port", str(wui),
                                   "--work-dir", str(tmp_path / "work")], env=env, stdout=logs, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        procs.append(worker)
        _wait(lambda: _alive_workers(ui) >= 1, 180, "the worker to register", procs)
        yield f"spark://127.0.0.1:{port}", env
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        logs.close()


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_standalone_equals_local(spark, cluster, tmp_path):
    url, env = cluster
    remote = tmp_path / "remote"
    proc = subprocess.run([str(Path(sys.executable).parent / "kafka-forensics"), "ingest", str(SRC), "--out", str(remote),
                           "--master", url, "--quiet"], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads((remote / "run.json").read_text())
    assert run["master"] == url
    local = tmp_path / "local"
    ingest(spark, [SRC], local, progress=False)
    for name in ALL_TABLES:
        a, b = read_table(spark, local, name), read_table(spark, remote, name)
        cols = sorted(a.columns)
        assert cols == sorted(b.columns), name
        a, b = a.select(cols), b.select(cols)
        assert a.count() == b.count(), name
        assert a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0, name
