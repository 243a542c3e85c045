"""``kafka-forensics collect``: the POSIX sh collector, run with dash (else sh) on broker host
layouts built from a real Kafka 3.6.2 cluster's dirs and its own server.properties (plus secrets):
the manifest holds the SHA-256 of the archive and of every file in it, secrets are redacted, the
broker's files are untouched, and ``analyze`` reads the archives as they are, finding what it
finds in the dirs themselves."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

import pytest
from conftest import REAL, REPO

from analyzer.analyze import run_analyze

CASE = REAL / "unclean-election-divergence-rejoined"
NODES = {1: "broker-1", 2: "broker-2", 3: "broker-3", 100: "controller-100"}
SHELL = shutil.which("dash") or shutil.which("sh")
CLI = [sys.executable, "-m", "analyzer.cli"]
SECRETS = {
    "ssl.keystore.password": "ks-Secret-1",
    "ssl.key.password": "key-Secret-2",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": "jaas-Secret-3",
    "ssl.truststore.certificates": "pem-Secret-4",
}
SECRET_LINES = """
ssl.keystore.password=ks-Secret-1
ssl.key.password = key-Secret-2
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\
    username="admin" \\
    password="jaas-Secret-3";
#ssl.truststore.password=comment-Secret-5
ssl.truststore.certificates: -----BEGIN CERTIFICATE----- pem-Secret-4
"""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _state(top: Path) -> dict[str, tuple[str, int, int]]:
    """Every file under ``top``: its hash, size and mtime."""
    return {str(p.relative_to(top)): (_sha256(p), p.stat().st_size, p.stat().st_mtime_ns) for p in top.rglob("*") if p.is_file()}


def _host(tmp: Path, node: int) -> Path:
    """A broker host as Kafka's tarball lays it out: config/server.properties (the cluster's own,
    log dirs pointed here, secrets added), the log dir, and logs/ with server.log and friends."""
    host = tmp / f"host-{node}"
    shutil.copytree(CASE / NODES[node], host / "data")
    (host / "config").mkdir()
    (host / "logs").mkdir()
    for gz in (CASE / "server-logs").glob(f"node-{node}-*.log.gz"):
        (host / "logs" / gz.name.removeprefix(f"node-{node}-").removesuffix(".gz")).write_bytes(gzip.decompress(gz.read_bytes()))
    props = [line for line in (CASE / "server-logs" / f"node-{node}.properties").read_text().splitlines()
             if not line.startswith("log.dirs=")]
    data = host / "data"
    # the controller names its one dir as log.dir and metadata.log.dir (fallback and de-duplication)
    dirs = [f"log.dir={data}", f"metadata.log.dir={data}"] if node == 100 else [f"log.dirs= {data} "]
    (host / "config" / "server.properties").write_text("\n".join(props + dirs) + "\n" + SECRET_LINES)
    return host


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """The script (written by the CLI) run on each host: -l for node 1, $LOG_DIR for node 2,
    ../logs beside config/ for the others. Returns (tmp, hosts, archives, states before)."""
    tmp = tmp_path_factory.mktemp("collect")
    script = tmp / "kafka-forensics-collect.sh"
    run = subprocess.run([*CLI, "collect", "--out", str(script)], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0 and os.access(script, os.X_OK), run.stderr
    hosts = {node: _host(tmp, node) for node in NODES}
    before = {node: _state(h) for node, h in hosts.items()}
    archives = {}
    for node, host in hosts.items():
        out = tmp / "out" / str(node)
        out.mkdir(parents=True)
        args = [SHELL, str(script), "-o", str(out)]
        env = {k: v for k, v in os.environ.items() if k != "LOG_DIR"}
        if node == 1:
            args += ["-l", str(host / "logs")]
        elif node == 2:
            env["LOG_DIR"] = str(host / "logs")
        run = subprocess.run([*args, str(host / "config" / "server.properties")], capture_output=True, text=True, env=env, timeout=120)
        assert run.returncode == 0, run.stderr
        archives[node] = Path(run.stdout.strip())
    return tmp, hosts, archives, before


def test_the_script_is_posix_sh():
    script = subprocess.run([*CLI, "collect"], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert script.returncode == 0 and script.stdout.startswith("#!/bin/sh\n")
    check = subprocess.run([SHELL, "-n"], input=script.stdout, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_manifest_hashes_the_archive_and_every_file_in_it(collected):
    tmp, hosts, archives, _ = collected
    for node, archive in archives.items():
        assert archive.name.startswith("kafka-forensics-") and f"-node{node}-" in archive.name and archive.suffixes[-2:] == [".tar", ".gz"]
        lines = [line.split("  ", 1) for line in Path(f"{archive}.sha256").read_text().splitlines()]
        assert lines[0] == [_sha256(archive), archive.name]
        listed = {name: digest for digest, name in lines[1:]}
        with tarfile.open(archive) as tf:
            members = {m.name: tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()}
        assert set(listed) == set(members)
        assert all(hashlib.sha256(members[name]).hexdigest() == digest for name, digest in listed.items())
        # every file of the log dir and every Kafka log is archived with the same bytes
        archived = Counter(listed.values())
        originals = [p for p in (hosts[node] / "data").rglob("*") if p.is_file()] + list((hosts[node] / "logs").iterdir())
        assert originals and all(archived[_sha256(p)] for p in originals), node
        assert sum(1 for name in listed if "/logs/" in name) == len(list((hosts[node] / "logs").iterdir())) > 0


def test_secrets_are_redacted_in_the_archived_properties(collected):
    _, hosts, archives, _ = collected
    for node, archive in archives.items():
        with tarfile.open(archive) as tf:
            props = next(tf.extractfile(m).read().decode() for m in tf.getmembers() if m.name.endswith("/server.properties"))
        for key, secret in SECRETS.items():
            assert secret not in props
            assert f"{key}=[REDACTED by kafka-forensics collect]" in props
        assert "Secret" not in props and 'username="admin"' not in props
        kept = (hosts[node] / "config" / "server.properties").read_text().split(SECRET_LINES)[0]
        assert props.startswith(kept) and f"node.id={node}" in kept  # the rest is kept as written


def test_the_brokers_files_are_untouched(collected):
    _, hosts, _, before = collected
    for node, host in hosts.items():
        assert _state(host) == before[node]
        assert not [p for p in host.rglob("*") if "staging" in p.name]


def test_unusable_properties_are_one_line_and_exit_2(collected, tmp_path):
    tmp, hosts, _, _ = collected
    script = tmp / "kafka-forensics-collect.sh"
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={tmp_path / 'nowhere'}\n")
    props_inside = tmp_path / "inside.properties"
    props_inside.write_text(f"log.dirs={hosts[1] / 'data'}\n")
    # no log dir; an OUT_DIR inside a log dir (the archive would collect itself); no properties
    for args in ([str(props)], ["-o", str(hosts[1] / "data"), str(props_inside)], [str(tmp_path / "missing.properties")]):
        run = subprocess.run([SHELL, str(script), *args], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2, (args, run.stderr)
        assert run.stderr.strip().splitlines()[-1].startswith("kafka-forensics-collect: "), run.stderr
    assert not list((hosts[1] / "data").glob(".kafka-forensics-*"))


def _kinds(doc: dict) -> Counter:
    return Counter((f["kind"], f["severity"], f["topic"], f["partition"]) for f in doc["findings"])


def test_analyze_reads_the_archives_as_they_are(collected, spark, tmp_path):
    """One analyze of the four archives, one of the host dirs they came from: the same findings."""
    _, hosts, archives, _ = collected
    runs = {}
    for name, inputs in (("archives", list(archives.values())), ("dirs", list(hosts.values()))):
        out = tmp_path / name
        code = run_analyze(inputs, out, fmt="json", stream=io.StringIO(), progress=False, spark=spark, register_catalog=False)
        assert code in (0, 1)
        runs[name] = json.loads((out / "findings.json").read_text())
    assert runs["archives"]["input"]["brokers"] == [1, 2, 3, 100]
    assert runs["archives"]["input"]["files"] == runs["dirs"]["input"]["files"]
    assert _kinds(runs["archives"]) == _kinds(runs["dirs"]) and runs["archives"]["findings"]


# ---------------------------------------------------------------------------- a live broker
TOOLS_TGZ = CASE.parents[2] / "tools" / "kafka_2.13-3.6.2.tgz"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kafka_tool(kafka: Path, tool: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx128m"}
    return subprocess.run([str(kafka / "bin" / f"{tool}.sh"), *args], input=stdin, capture_output=True, text=True, env=env, timeout=180)


@pytest.fixture
def live_broker(tmp_path):
    """A single-node KRaft Kafka 3.6.2 (broker and controller) from ../shared/tools, started the
    way an operator does (kafka-server-start.sh, LOG_DIR set), holding a topic of small segments."""
    if shutil.which("java") is None:
        pytest.fail("Java 17 is required to run Kafka")
    with tarfile.open(TOOLS_TGZ) as tf:
        tf.extractall(tmp_path, filter="data")
    kafka = next(tmp_path.glob("kafka_*"))
    port, controller = _free_port(), _free_port()
    (tmp_path / "config").mkdir()
    props = tmp_path / "config" / "server.properties"
    props.write_text("\n".join([
        "process.roles=broker,controller", "node.id=7", f"controller.quorum.voters=7@127.0.0.1:{controller}",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}", f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER", "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        f"log.dirs={tmp_path / 'data'}", "offsets.topic.replication.factor=1", "ssl.keystore.password=live-Secret-6", ""]))
    uuid = _kafka_tool(kafka, "kafka-storage", "random-uuid").stdout.strip()
    assert _kafka_tool(kafka, "kafka-storage", "format", "-t", uuid, "-c", str(props)).returncode == 0
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m", "LOG_DIR": str(tmp_path / "kafka-logs")}
    server = subprocess.Popen([str(kafka / "bin" / "kafka-server-start.sh"), str(props)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        bootstrap = f"127.0.0.1:{port}"
        create = _kafka_tool(kafka, "kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", "live",
                             "--partitions", "2", "--config", "segment.bytes=4096")
        assert create.returncode == 0, create.stderr
        yield kafka, props, bootstrap, tmp_path
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(30)


def test_collect_from_a_live_broker(live_broker, collected):
    """Collected while a producer writes: the archive verifies against its manifest, holds the log
    dir (rolled segments byte-identical to the broker's), server.log found through the running
    broker's -Dkafka.logs.dir (no -l, no $LOG_DIR, no ../logs), and discovery reads it as broker 7."""
    kafka, props, bootstrap, tmp = live_broker
    script = collected[0] / "kafka-forensics-collect.sh"
    produce = ["--bootstrap-server", bootstrap, "--topic", "live", "--producer-property", "batch.size=512", "--producer-property", "linger.ms=0"]
    assert _kafka_tool(kafka, "kafka-console-producer", *produce, stdin="\n".join(map(str, range(2000))) + "\n").returncode == 0
    producer = subprocess.Popen([str(kafka / "bin" / "kafka-console-producer.sh"), *produce], stdin=subprocess.PIPE, text=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx128m"})
    try:
        producer.stdin.write("\n".join(map(str, range(20000))) + "\n")
        producer.stdin.flush()
        out = tmp / "out"
        out.mkdir()
        # COLUMNS exported, as in many shells and CI runners: ps must not cut the broker's command line
        env = {**{k: v for k, v in os.environ.items() if k != "LOG_DIR"}, "COLUMNS": "80"}
        run = subprocess.run([SHELL, str(script), "-o", str(out), str(props)], capture_output=True, text=True, env=env, timeout=120)
    finally:
        producer.stdin.close()
        producer.wait(120)
    assert run.returncode == 0, run.stderr
    archive = Path(run.stdout.strip())
    lines = [line.split("  ", 1) for line in Path(f"{archive}.sha256").read_text().splitlines()]
    assert lines[0] == [_sha256(archive), archive.name]
    with tarfile.open(archive) as tf:
        members = {m.name.split("/", 1)[1]: tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()}
    assert {name.split("/", 1)[1]: digest for digest, name in lines[1:]} == {n: hashlib.sha256(b).hexdigest() for n, b in members.items()}
    assert "logs/server.log" in members and "live-Secret-6" not in members["server.properties"].decode()
    partition = f"logdir-{str(tmp / 'data').lstrip('/').replace('/', '_')}/live-0/"
    segments = sorted(n for n in members if n.startswith(partition) and n.endswith(".log"))
    assert len(segments) > 2
    for name in segments[:-1]:  # rolled when collected: Kafka never rewrites them
        assert members[name] == (tmp / "data" / "live-0" / name.rsplit("/", 1)[1]).read_bytes()
    assert not list(out.glob(".*staging*"))
    from jobs.ingest.discover import discover_inputs

    found = discover_inputs([archive], tmp / "work")
    assert [b.broker for b in found.brokers] == [7]
    assert {(f.topic, f.partition) for f in found.files if f.topic} >= {("live", 0), ("live", 1), ("__cluster_metadata", 0)}
