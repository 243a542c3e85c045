"""``kafka-forensics collect``: the POSIX sh collector, run with dash (else sh) on broker host
layouts built from a real Kafka 3.6.2 cluster's dirs and its own server.properties (plus secrets):
the manifest holds the SHA-256 of the archive and of every file in it, secrets are redacted, the
broker's files are untouched, and ``analyze`` reads the archives as they are, finding what it
finds in the dirs themselves. A focused collection (``--topic --partition --since``) takes what
the forensics of its partitions need, says what it left out, and its analysis finds for those
partitions what the whole collection's does."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

import pytest
from conftest import REAL, REPO

from analyzer import collect as collect_mod
from analyzer.analyze import run_analyze
from analyzer.report.data import all_partitions, load

# broker 1 killed mid-production (no clean shutdown); topic tc, 3 partitions of 2 segments each
CASE = REAL / "crash-only"
# a focus: tc-1, without the segments older than this (the first segment's newest batch is at
# 19:20:16.317Z; brokers 2 and 3 checkpointed HW 560, broker 1 HW 220: below the second segment's
# base offset 290, so broker 1 keeps its first segment, as Kafka's retention would)
FOCUS = ["--topic", "t?", "--partition", "1", "--since", "2026-11-22T19:20:17Z"]
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


def _collect(script: Path, host: Path, out: Path, node: int) -> Path:
    """Run ``script`` on ``host`` into ``out``: -l for node 1, $LOG_DIR for node 2, ../logs beside
    config/ for the others. Returns the archive."""
    out.mkdir(parents=True)
    args = [SHELL, str(script), "-o", str(out)]
    env = {k: v for k, v in os.environ.items() if k != "LOG_DIR"}
    if node == 1:
        args += ["-l", str(host / "logs")]
    elif node == 2:
        env["LOG_DIR"] = str(host / "logs")
    run = subprocess.run([*args, str(host / "config" / "server.properties")], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    return Path(run.stdout.strip())


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """The script (written by the CLI) run on each host, whole and focused (FOCUS written in by the
    CLI). Returns (tmp, hosts, archives, states before, focused archives)."""
    tmp = tmp_path_factory.mktemp("collect")
    script, focused_script = tmp / "kafka-forensics-collect.sh", tmp / "focused.sh"
    for out, focus in ((script, []), (focused_script, FOCUS)):
        run = subprocess.run([*CLI, "collect", *focus, "--out", str(out)], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert run.returncode == 0 and os.access(out, os.X_OK), run.stderr
    hosts = {node: _host(tmp, node) for node in NODES}
    before = {node: _state(h) for node, h in hosts.items()}
    archives = {node: _collect(script, host, tmp / "out" / str(node), node) for node, host in hosts.items()}
    focused = {node: _collect(focused_script, host, tmp / "focused" / str(node), node) for node, host in hosts.items()}
    return tmp, hosts, archives, before, focused


def test_the_script_is_posix_sh():
    script = subprocess.run([*CLI, "collect"], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert script.returncode == 0 and script.stdout.startswith("#!/bin/sh\n")
    check = subprocess.run([SHELL, "-n"], input=script.stdout, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_manifest_hashes_the_archive_and_every_file_in_it(collected):
    tmp, hosts, archives, _, _ = collected
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
    _, hosts, archives, _, _ = collected
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
    _, hosts, _, before, _ = collected
    for node, host in hosts.items():
        assert _state(host) == before[node]
        assert not [p for p in host.rglob("*") if "staging" in p.name]


def test_unusable_properties_are_one_line_and_exit_2(collected, tmp_path):
    tmp, hosts, _, _, _ = collected
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


@pytest.fixture(scope="module")
def runs(collected, spark, tmp_path_factory):
    """analyze of the four archives, of the host dirs they came from, and of the four focused
    archives (no --topic: the collection says it): {name: (findings.json, DIR, text report)}."""
    _, hosts, archives, _, focused = collected
    tmp = tmp_path_factory.mktemp("runs")
    runs = {}
    for name, inputs in (("archives", list(archives.values())), ("dirs", list(hosts.values())), ("focused", list(focused.values()))):
        out, text = tmp / name, io.StringIO()
        code = run_analyze(inputs, out, fmt="text", stream=text, progress=False, spark=spark, register_catalog=False)
        assert code in (0, 1)
        runs[name] = json.loads((out / "findings.json").read_text()), out, text.getvalue()
    return runs


def test_analyze_reads_the_archives_as_they_are(runs):
    """The archives and the host dirs they came from: the same findings."""
    archives, dirs = runs["archives"][0], runs["dirs"][0]
    assert archives["input"]["brokers"] == [1, 2, 3, 100]
    assert archives["input"]["files"] == dirs["input"]["files"]
    assert _kinds(archives) == _kinds(dirs) and archives["findings"]
    assert archives["input"]["focus"] is None


def _members(archive: Path) -> dict[str, int]:
    """Each file of an archive (path below its top folder): its size."""
    with tarfile.open(archive) as tf:
        return {m.name.split("/", 1)[1]: m.size for m in tf.getmembers() if m.isfile()}


def test_a_focused_collection_leaves_out_only_what_its_focus_does_and_says_so(collected):
    """The focused archive holds the whole one's files but the other partitions' and the first
    segment of tc-1 where Kafka's retention would drop it (not on broker 1, whose HW is below it):
    every checkpoint, marker, the metadata log, and the kept partition's snapshots, epochs and
    metadata stay. COLLECT.txt and the manifest list what is left out; their byte count is the
    difference, and the archive shrank."""
    _, _, archives, _, focused = collected
    first = "tc-1/00000000000000000000."
    for node in NODES:
        whole, mine = _members(archives[node]), _members(focused[node])
        assert set(mine) <= set(whole)
        gone = {n for n in set(whole) - set(mine) if n not in ("COLLECT.txt",)}
        expect = {n for n in whole if "/tc-0/" in n or "/tc-2/" in n}
        if node in (2, 3):
            expect |= {n for n in whole if first in n and not n.endswith(".snapshot")}
        assert gone == expect, node
        assert any(first + "log" in n for n in mine) == (node == 1)
        assert {n for n in mine if "/tc-1/" in n} >= {n for n in whole if "/tc-1/" in n and not n.split("/")[-1][0].isdigit()}
        assert {n for n in whole if "/" not in n.split("/", 1)[-1] or "__cluster_metadata" in n} <= set(mine) | {"COLLECT.txt"}
        with tarfile.open(focused[node]) as tf:
            notes = next(tf.extractfile(m).read().decode() for m in tf.getmembers() if m.name.endswith("/COLLECT.txt"))
        assert "focus: --topic 't?' --partition 1 --since 2026-11-22T19:20:17.000Z\n" in notes
        total = notes.split("left out in all: ")[1].splitlines()[0]
        partitions = 0 if node == 100 else 2
        files = sum(1 for n in gone)
        size = sum(whole[n] for n in gone)
        assert total.startswith(f"{partitions} partitions") and sum(map(int, re.findall(r"(\d+) bytes", total))) == size
        assert sum(map(int, re.findall(r"\((\d+) files", total))) == files
        if node in (2, 3):
            assert "tc-1/00000000000000000000.log (segment, 3 files, " in notes
            assert "newest batch 2026-11-22T19:20:16.317Z (time index) is older than --since" in notes
        manifest = Path(f"{focused[node]}.sha256").read_text().splitlines()
        assert [line[2:] for line in manifest if line.startswith("# ")] == [x for x in notes.splitlines() if x.startswith(("focus: --", "left out"))]
        assert focused[node].stat().st_size < archives[node].stat().st_size or node == 100


def test_a_focused_collection_is_analyzed_as_focused_and_finds_what_the_whole_one_finds(runs):
    """analyze of the focused archives reads them as focused (input.focus and the report say so)
    and lists no partition it never read; its findings are the whole collection's for tc-1 (and
    cluster-wide, with the evidence of tc-1)."""
    whole, _, _ = runs["archives"]
    doc, out, text = runs["focused"]
    focus = doc["input"]["focus"]
    assert (focus["topics"], focus["partitions"]) == (["t?"], [1])
    assert len(focus["collected"]) == 4 and {c["since"] for c in focus["collected"]} == {"2026-11-22T19:20:17.000Z"}
    left = [c["left_out"] for c in focus["collected"]]
    assert sum(x["partitions"] for x in left) == 6 and sum(x["segments"] for x in left) == 2
    assert "collected focused, without the segments older than 2026-11-22T19:20:17.000Z" in " ".join(text.split())
    assert [f"{t}-{p}" for t, p in all_partitions(load(out))] == ["__cluster_metadata-0", "tc-1"]

    def mine(f: dict) -> bool:
        return f["topic"] is None or (f["topic"], f["partition"]) == ("tc", 1)

    def shown(f: dict) -> tuple:
        return (f["kind"], f["severity"], f["topic"], f["partition"], f["brokers"], f["first_offset"], f["last_offset"],
                sorted(e["detail"] for e in f["evidence"] if not re.search(r"^tc-[02]:|/tc-[02]/", f"{e['detail']}\n{e['path']}", re.M)))

    assert doc["findings"] and sorted(map(shown, doc["findings"])) == sorted(shown(f) for f in whole["findings"] if mine(f))


# ---------------------------------------------------------------------------- --since, as Kafka's retention
SINCE_MS = 1_714_564_800_000  # 2024-05-01T12:00:00Z
OLD, NEW = SINCE_MS - 86_400_000, SINCE_MS + 3_600_000


def _segment(folder: Path, base: int, newest: int | None = None, mtime: int = NEW, slots: bytes = b"") -> None:
    """A segment's files (the collector reads no .log byte): a time index whose last entry holds
    ``newest`` (none when None), then ``slots`` (e.g. a zero-filled one); the .log last modified at ``mtime`` (ms)."""
    name = folder / f"{base:020d}"
    folder.mkdir(exist_ok=True)
    for suffix in (".log", ".index"):
        Path(f"{name}{suffix}").write_bytes(os.urandom(64))
    entries = struct.pack(">qi", OLD - 10, 0) + (struct.pack(">qi", newest, 1) if newest is not None else b"")
    Path(f"{name}.timeindex").write_bytes((entries if newest is not None else b"") + slots)
    os.utime(f"{name}.log", ns=(mtime * 1_000_000,) * 2)


def _checkpoint(entries: dict[tuple[str, int], int]) -> str:
    return "0\n" + f"{len(entries)}\n" + "".join(f"{t} {p} {o}\n" for (t, p), o in entries.items())


def test_since_leaves_out_what_kafkas_time_retention_would(tmp_path):
    """Kafka's deleteRetentionMsBreachedSegments at SINCE, read in sh: a segment is older by its
    time index's last entry (LogSegment.largestTimestamp), else by its .log's mtime (an all-zero
    last slot is no entry); only a prefix goes (a newer segment keeps every later one), never the
    active segment, never one reaching the checkpointed HW, nothing without one; internal topics
    whole, __consumer_offsets out with --no-consumer-offsets, other topics and partitions out
    whole. The same for every form of the time; a bad one is one line, exit 2."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_text("version=1\nnode.id=5\ncluster.id=c\n")
    (data / ".kafka_cleanshutdown").write_text("")
    (data / "recovery-point-offset-checkpoint").write_text(_checkpoint({("orders", 0): 350}))
    (data / "replication-offset-checkpoint").write_text(_checkpoint({
        ("orders", 0): 400, ("orders", 1): 150, ("orders", 2): 500, ("__transaction_state", 0): 9, ("__consumer_offsets", 0): 9}))
    o0 = data / "orders-0"
    _segment(o0, 0, OLD)  # out: its newest batch is older
    _segment(o0, 100, None, mtime=OLD)  # out: no time index entry, last modified before
    _segment(o0, 200, NEW)  # kept: newer...
    _segment(o0, 300, OLD)  # ...so every later one too
    _segment(o0, 350, OLD)  # the active segment
    for name in ("leader-epoch-checkpoint", "partition.metadata", f"{100:020d}.snapshot"):
        (o0 / name).write_text("x")
    o1 = data / "orders-1"
    _segment(o1, 0, OLD)  # out (upper bound 100 <= HW 150)
    _segment(o1, 100, OLD)  # kept: offsets 100-199 reach above the HW
    _segment(o1, 200, OLD)
    o2 = data / "orders-2"
    _segment(o2, 0, OLD, mtime=OLD, slots=b"\0" * 5)  # out: a torn tail, the last whole entry decides
    _segment(o2, 10, OLD, mtime=NEW, slots=bytes(12))  # kept: a zero-filled last slot, the (newer) mtime decides
    _segment(o2, 20, OLD)
    _segment(data / "orders-3", 0, OLD)  # no HW checkpointed: kept
    _segment(data / "orders-3", 5, OLD)
    for topic in ("__transaction_state-0", "__consumer_offsets-0", "other-0", "orders-9"):
        _segment(data / topic, 0, OLD)
        _segment(data / topic, 5, OLD)
    props = tmp_path / "server.properties"
    props.write_text(f"node.id=5\nlog.dirs={data}\n")
    script = collect_mod.write(tmp_path / "collect.sh")
    before = _state(data)
    focus = ["--topic", "ord*", "--partition", "0", "--partition=1", "--partition", "2", "--partition", "3", "--no-consumer-offsets"]
    taken = []
    for i, since in enumerate(("2024-05-01T12:00:00Z", "2024-05-01 12:00", str(SINCE_MS))):
        out = tmp_path / f"out{i}"
        out.mkdir()
        run = subprocess.run([SHELL, str(script), "-q", "-o", str(out), *focus, "--since", since, str(props)], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0 and not run.stderr.replace("kafka logs: ", "").count(": "), run.stderr
        taken.append((sorted(_members(Path(run.stdout.strip()))), Path(run.stdout.strip())))
    assert taken[0][0] == taken[1][0] == taken[2][0]
    names, archive = taken[0]
    segments = {n.split("/", 1)[1] for n in names if n.endswith(".log")}
    assert segments == {"orders-0/00000000000000000200.log", "orders-0/00000000000000000300.log", "orders-0/00000000000000000350.log",
                        "orders-1/00000000000000000100.log", "orders-1/00000000000000000200.log",
                        "orders-2/00000000000000000010.log", "orders-2/00000000000000000020.log",
                        "orders-3/00000000000000000000.log", "orders-3/00000000000000000005.log",
                        "__transaction_state-0/00000000000000000000.log", "__transaction_state-0/00000000000000000005.log"}
    kept = {n.split("/", 1)[1] for n in names if n.startswith("logdir-")}
    assert {"meta.properties", ".kafka_cleanshutdown", "recovery-point-offset-checkpoint", "replication-offset-checkpoint",
            "orders-0/leader-epoch-checkpoint", "orders-0/partition.metadata", "orders-0/00000000000000000100.snapshot"} <= kept
    assert not any(n.startswith("orders-0/00000000000000000100.") and not n.endswith(".snapshot") for n in kept)
    with tarfile.open(archive) as tf:
        notes = next(tf.extractfile(m).read().decode() for m in tf.getmembers() if m.name.endswith("/COLLECT.txt"))
    why = dict(re.findall(r"left out: \S+?/(\S+) \(.*?\): (.*)", notes))
    assert why == {
        "orders-0/00000000000000000000.log": "newest batch 2024-04-30T12:00:00.000Z (time index) is older than --since; its .index, .timeindex, .txnindex go with it",
        "orders-0/00000000000000000100.log": "last modified before --since (no time index entry); its .index, .timeindex, .txnindex go with it",
        "orders-1/00000000000000000000.log": "newest batch 2024-04-30T12:00:00.000Z (time index) is older than --since; its .index, .timeindex, .txnindex go with it",
        "orders-2/00000000000000000000.log": "newest batch 2024-04-30T12:00:00.000Z (time index) is older than --since; its .index, .timeindex, .txnindex go with it",
        "__consumer_offsets-0": "--no-consumer-offsets", "other-0": "topic not in --topic", "orders-9": "partition not in --partition"}
    assert "left out in all: 3 partitions (18 files, " in notes and ", 4 segments (12 files, " in notes
    if shutil.which("sha256sum"):  # the manifest's '#' lines are skipped by a check
        subprocess.run(["tar", "-xzf", archive.name], cwd=archive.parent, check=True)
        check = subprocess.run(["sha256sum", "--strict", "-c", f"{archive.name}.sha256"], cwd=archive.parent, capture_output=True, text=True)
        assert check.returncode == 0 and check.stdout.count(": OK") == len(names) + 1, check.stdout + check.stderr
    assert _state(data) == before
    for bad in (["--since", "yesterday"], ["--since", "2024-13-01"], ["--partition", "x"]):
        run = subprocess.run([SHELL, str(script), "-o", str(tmp_path), *bad, str(props)], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and run.stderr.count("\n") == 1 and run.stderr.startswith(f"kafka-forensics-collect: {bad[0]} "), run.stderr
    run = subprocess.run([*CLI, "collect", "--since", "yesterday"], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 2 and not run.stdout and run.stderr.strip().count("\n") == 0 and "--since yesterday" in run.stderr


NOTES = """kafka-forensics collect on h at 2024-05-02T00:00:00Z by kafka
properties: /etc/kafka/server.properties (node 1)
hashes: sha256sum
focus: --topic 'or*' --topic 'pay'"'"'s' --partition 0 --partition 2 --since 2024-05-01T12:00:00.000Z --no-consumer-offsets
log dir: /data -> logdir-data
left out: logdir-data/other-0 (partition, 4 files, 100 bytes): topic not in --topic
left out in all: 1 partitions (4 files, 100 bytes), 0 segments (0 files, 0 bytes)
"""


def test_collect_notes_are_the_focus_of_their_analysis(tmp_path):
    """COLLECT.txt's focus line is read back (quoted as sh quotes); the analysis reads only what
    every focused collection kept, within analyze's own focus; the report says so in words."""
    import pyarrow as pa

    from analyzer.report.data import focus_text
    from jobs.ingest.discover import Root, collections
    from jobs.ingest.focus import Collected, Focus

    for name, text in (("a", NOTES), ("b", NOTES.replace("--topic 'or*' --topic 'pay'\"'\"'s' --partition 0 --partition 2", "--topic 'orders'")),
                       ("c", NOTES.replace("focus: --topic", "focus: none (every partition, every segment) --topic"))):
        (tmp_path / name / f"kafka-forensics-h-node1-{name}").mkdir(parents=True)
        (tmp_path / name / f"kafka-forensics-h-node1-{name}" / "COLLECT.txt").write_text(text)
    a, b = collections([Root(tmp_path / "a", "a.tar.gz"), Root(tmp_path / "b", ""), Root(tmp_path / "c", "c")])
    assert (a.notes, a.topics, a.partitions, a.since, a.consumer_offsets) == (
        "a.tar.gz/kafka-forensics-h-node1-a/COLLECT.txt", ("or*", "pay's"), (0, 2), "2024-05-01T12:00:00.000Z", False)
    assert dict(a.left_out) == {"partitions": 1, "partition_files": 4, "partition_bytes": 100, "segments": 0, "segment_files": 0, "segment_bytes": 0}
    focus = Focus(partitions=(2, 3)).within([a])
    assert [focus.kept(t, p) for t, p in (("orders", 2), ("orders", 3), ("orders", 0), ("pay's", 2), ("other", 2), ("__consumer_offsets", 7))] == [
        True, False, False, True, False, True]
    assert focus.describe() | {"collected": None} == {"topics": ["or*", "pay's"], "partitions": [2], "collected": None}
    both = Focus().within([a, b])
    table = pa.table({"topic": ["orders", "orders", "ore", "__cluster_metadata", None], "partition": [2, 1, 2, 0, None]})
    assert both.rows(table).to_pylist() == [{"topic": t, "partition": p} for t, p in (("orders", 2), ("__cluster_metadata", 0), (None, None))]
    assert Focus().within([Collected("n", since="2024-05-01T12:00:00.000Z")]).wanted() == ""  # names no partition: none is missing
    text = focus_text({"focus": both.describe()})
    assert text.startswith("every partition; 2 inputs collected focused on different partitions (read: only those every one kept), "
                           "without the segments older than 2024-05-01T12:00:00.000Z") and "without __consumer_offsets" in text


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
