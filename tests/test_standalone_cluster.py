"""``analyze --master spark://…`` on a real Spark standalone cluster (one master and two workers of
one core each, all on 127.0.0.1, started from pip's pyspark), reading the collection from an S3 API
(moto's server): the same input tables, job tables and findings as local mode from disk, and
run.json shows the parse tasks ran on both workers. DIR is a path both workers see (this machine's).
The jobs phase costs ~45 s here (each of its ~100 Spark jobs schedules tasks on remote executors)."""

from __future__ import annotations

import json
import os
import shutil
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
from s3_server import moto_server, table_rows

from analyzer.analyze import build
from jobs.findings.case import JOB_TABLES
from jobs.store.tables import ALL_TABLES

SPARK_HOME = Path(pyspark.__file__).parent
SRC = REAL / "crash-only"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp: Path, aws: dict) -> dict:
    """The daemons' and the CLI's environment: the S3 server's standard chain (the executors find
    their credentials in their worker's environment, as on a cluster with an instance role), and a
    conf dir whose spark-defaults.conf makes the first job wait for both executors."""
    conf = tmp / "conf"
    conf.mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "jobs" / "session" / "spark_conf" / "log4j2.properties", conf)
    (conf / "spark-defaults.conf").write_text("spark.scheduler.minRegisteredResourcesRatio 1.0\n"
                                              "spark.scheduler.maxRegisteredResourcesWaitingTime 120s\n")
    env = dict(os.environ) | aws
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(tmp / "logs"),
               PYSPARK_PYTHON=sys.executable, SPARK_CONF_DIR=str(conf))
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
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


@pytest.fixture
def s3(tmp_path):
    """moto's S3 server holding ``SRC`` under ``s3://evidence/``."""
    with moto_server(tmp_path) as server:
        yield server, server.upload(SRC, f"evidence/{SRC.name}")


@pytest.fixture
def cluster(tmp_path, s3):
    """spark://127.0.0.1:<port> with two workers of one core each (separate work dirs); every
    process stopped afterwards."""
    port, ui = _free_port(), _free_port()
    env = _env(tmp_path, s3[0].env)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    logs = open(tmp_path / "daemons.log", "w")
    master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)], env=env, stdout=logs, stderr=subprocess.STDOUT,
                              start_new_session=True)
    procs = [master]
    try:
        _wait(lambda: _alive_workers(ui) >= 0 and _port_open(port), 180, "the master", procs)
        for n in (1, 2):
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
                 "--cores", "1", "--memory", "1536m", "--webui-port", str(_free_port()), "--work-dir", str(tmp_path / f"work-{n}")],
                env=env | {"SPARK_WORKER_DIR": str(tmp_path / f"work-{n}")}, stdout=logs, stderr=subprocess.STDOUT,
                start_new_session=True))
        _wait(lambda: _alive_workers(ui) >= 2, 180, "both workers to register", procs)
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



def test_two_workers_reading_s3_equal_local(spark, s3, cluster, tmp_path):
    url, env = cluster
    remote = tmp_path / "remote"
    with open(tmp_path / "remote.stderr", "w+") as stderr:
        proc = subprocess.Popen([str(Path(sys.executable).parent / "kafka-forensics"), "analyze", s3[1], "--out", str(remote),
                                 "--master", url, "--quiet"], env=env, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
        try:
            # local mode's DIR, analyzed in this process while the cluster's run waits on its remote executors
            local = tmp_path / "local"
            doc = build([SRC], local, spark=spark, progress=False, register_catalog=False)
            proc.wait(timeout=900)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(60)
        stderr.seek(0)
        assert proc.returncode in (0, 1), stderr.read()[-3000:]
    run = json.loads((remote / "run.json").read_text())
    assert run["master"] == url and run["inputs"] == [s3[1]]
    executors = run["ingest"]["executors"]
    assert len(executors) == 2 and all(e["tasks"] for e in executors), executors
    assert sum(e["tasks"] for e in executors) == run["ingest"]["tasks"]
    for name in ALL_TABLES:
        assert table_rows(remote, name) == table_rows(local, name), name
    for name in JOB_TABLES:
        assert table_rows(remote, name) == table_rows(local, name), name
    found = json.loads((remote / "findings.json").read_text())["findings"]
    assert found == doc["findings"] and [f["kind"] for f in found] == ["unclean_shutdown"]
