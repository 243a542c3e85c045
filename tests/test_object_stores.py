"""Inputs on an object store, against a real S3 API on 127.0.0.1: moto's server, started here on a
free port. A real-cluster collection uploaded as a folder analyzes to the same tables and findings
as the folder on disk; its tarball on the store unpacks to the same files; a split segment is read
in ranges to the same rows; salvage re-checks an object's size and SHA-256; what the store refuses
(no bucket, bad credentials, throttling) is one line naming the URL and exit 2, after bounded
retries. One server and one pair of analyses for the module."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import REAL
from s3_server import KEY, SECRET, moto_server, table_rows
from typer.testing import CliRunner

from analyzer.analyze import build
from analyzer.cli import app
from jobs.ingest import pipeline, stores
from jobs.ingest.discover import discover_inputs
from jobs.ingest.tasks import file_pieces, run_task
from jobs.store.tables import ALL_TABLES

SRC = REAL / "unclean-election-divergence-rejoined"
BUCKET = "evidence"
URL = f"s3://{BUCKET}/{SRC.name}"
TARBALL = f"s3://{BUCKET}/bundles/{SRC.name}.tar.gz"


def _forget_stores() -> None:
    """A new endpoint for the same bucket: this process resolves its stores again."""
    stores._known.clear()
    stores._filesystem.cache_clear()


@pytest.fixture(scope="module")
def s3(tmp_path_factory, spark):
    """moto's S3 server holding ``SRC`` as a folder and as a tarball; the environment (ours, and
    the executors' through ``SparkContext.environment``) points the standard chain at it."""
    tmp = tmp_path_factory.mktemp("s3")
    executors = spark.sparkContext.environment
    before = dict(executors)
    with moto_server(tmp) as server, pytest.MonkeyPatch.context() as mp:
        try:
            for k, v in server.env.items():
                mp.setenv(k, v)
            executors.update(server.env)
            _forget_stores()
            server.upload(SRC, f"{BUCKET}/{SRC.name}")
            tarball = tmp / f"{SRC.name}.tar.gz"
            with tarfile.open(tarball, "w:gz") as tf:
                tf.add(SRC, arcname=SRC.name)
            server.upload(tarball, TARBALL.removeprefix("s3://"))
            yield {"fs": server.fs, "port": server.port, "tarball": tarball, "upload": server.upload}
        finally:
            executors.clear()
            executors.update(before)
            _forget_stores()


@pytest.fixture(scope="module")
def analyzed(s3, spark, tmp_path_factory):
    """The same collection analyzed from disk and from the store."""
    tmp = tmp_path_factory.mktemp("analyzed")
    docs = {}
    for name, given in (("local", SRC), ("s3", URL)):
        docs[name] = build([given], tmp / name, spark=spark, progress=False, register_catalog=False)
    return tmp / "local", tmp / "s3", docs



def test_analyze_from_s3_equals_the_local_run(analyzed, s3):
    local, remote, docs = analyzed
    assert docs["s3"]["findings"] == docs["local"]["findings"] and docs["s3"]["findings"]
    assert docs["s3"]["summary"] == docs["local"]["summary"]
    assert docs["s3"]["input"]["paths"] == [URL]
    for name in ALL_TABLES:
        assert table_rows(remote, name) == table_rows(local, name), name
    files = pq.read_table(remote / "tables" / "files").to_pylist()
    assert files and all(f["sha256"] for f in files)
    ingest = json.loads((remote / "run.json").read_text())["ingest"]
    assert ingest["executors"] == [{"executor": "driver", "host": ingest["executors"][0]["host"], "tasks": ingest["tasks"]}]


def test_no_endpoint_nor_credential_in_dir(analyzed, s3):
    _, remote, _ = analyzed
    run = (remote / "run.json").read_text()
    assert URL in run
    for path in remote.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for said in (SECRET, KEY, f"127.0.0.1:{s3['port']}"):
                assert said.encode() not in data, (path, said)


def test_a_tarball_on_the_store_unpacks_to_the_local_tarballs_files(s3, tmp_path):
    """Streamed from the store and unpacked once into DIR's work area, as a local tarball is."""
    remote = discover_inputs([TARBALL], tmp_path / "r")
    local = discover_inputs([s3["tarball"]], tmp_path / "l")
    assert [(f.path, f.size, f.broker) for f in remote.files] == [(f.path, f.size, f.broker) for f in local.files]
    assert len(remote.files) > 50 and not remote.problems
    for a, b in zip(remote.files, local.files):
        assert Path(a.abs_path).read_bytes() == Path(b.abs_path).read_bytes(), a.path


FOCUS_NOTES = """kafka-forensics collect on h at 2024-05-02T00:00:00Z by kafka
focus: --topic 'u*'
left out in all: 1 partitions (8 files, 300 bytes), 0 segments (0 files, 0 bytes)
"""


def test_a_focused_bundle_uploaded_unpacked_is_read_as_focused(s3, tmp_path):
    """A bundle ``collect --topic 'u*'`` made, uploaded as a folder: its COLLECT.txt on the store
    focuses the analysis as the same notes on disk do (what it left out is not reported gone
    missing), and reads the same files as the same bundle on disk."""
    notes = tmp_path / "notes" / "COLLECT.txt"
    notes.parent.mkdir()
    notes.write_text(FOCUS_NOTES)
    prefix = f"{BUCKET}/focused/{SRC.name}"
    s3["upload"](SRC, prefix)
    s3["upload"](notes, f"{prefix}/COLLECT.txt")
    found = discover_inputs([f"s3://{BUCKET}/focused"], tmp_path / "w")
    (collected,) = found.focus.collected
    assert (collected.notes, collected.topics, dict(collected.left_out)["partitions"]) == (f"{SRC.name}/COLLECT.txt", ("u*",), 1)
    assert found.focus.describe()["collected"][0]["topics"] == ["u*"]
    local = tmp_path / "local" / SRC.name
    shutil.copytree(SRC, local)
    (local / "COLLECT.txt").write_text(FOCUS_NOTES)
    on_disk = discover_inputs([local.parent], tmp_path / "l")
    assert on_disk.focus.describe() == found.focus.describe()
    assert [(f.path, f.size) for f in found.files] == [(f.path, f.size) for f in on_disk.files]


def test_a_split_segment_is_read_in_ranges_to_the_same_rows(s3, tmp_path):
    """The biggest segment, split at its index's batch positions: each span read from the store
    (a ranged read of the span, the whole object only for the first span's hash) gives the rows
    the same span gives read from disk."""
    found = {f.path: f for f in discover_inputs([URL], tmp_path / "r").files}
    here = {f.path: f for f in discover_inputs([SRC], tmp_path / "l").files}
    seg = max((f for f in found.values() if f.kind == "segment" and f.topic == "ue"), key=lambda f: f.size)
    read = {}
    for side, files in (("s3", found), ("local", here)):
        f, index = files[seg.path], files[seg.path[: -len(".log")] + ".index"]
        row = {k: getattr(f, k) for k in pipeline.FILE_FIELDS} | {"span_start": None, "span_stop": None}
        reported: list[dict] = []
        items = [[{k: v for k, v in item.items() if k != "mtime"} if isinstance(item, dict) else (item.name, item.raw.to_pylist())
                  for item in file_pieces(part, spans=reported)]
                 for part in pipeline.split_segment(row, (index.abs_path, index.size), f.size // 4)]
        read[side] = items, reported
    assert len(read["s3"][0]) >= 3 and read["s3"][0][0][-1]["sha256"]
    assert read["s3"] == read["local"]


class _Refusing(BaseHTTPRequestHandler):
    """An S3 endpoint that answers every request with ``server.status`` (403: a key it does not
    know; 503: Slow Down), and counts them."""

    BODY = {403: b"<Error><Code>InvalidAccessKeyId</Code><Message>The AWS Access Key Id you provided does not exist in our "
                 b"records.</Message></Error>",
            503: b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"}

    def _answer(self):
        self.server.requests += 1
        body = self.BODY[self.server.status]
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def refusing(monkeypatch, s3):
    """An endpoint that refuses everything, as the standard chain's endpoint."""
    servers = []

    def start(status: int) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
        server.status, server.requests = status, 0
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
        _forget_stores()
        return server

    yield start
    for server in servers:
        server.shutdown()
    _forget_stores()


@pytest.mark.parametrize(("url", "status", "said"), [
    (f"s3://no-such-bucket-kf/{SRC.name}", None, "no such bucket"),
    (f"s3://{BUCKET}/nothing-under-this", None, "no such object or prefix"),
    (f"s3://{KEY}:{SECRET}@{BUCKET}/{SRC.name}", None, "credentials in the URL are refused"),
    (f"s3://{BUCKET}/{SRC.name}/broker-1/meta.properties", None, "a Kafka file (meta_properties), not a prefix of log dirs"),
    (URL, 403, "access denied (check the credentials"),
    (URL, 503, f"throttling requests (503 Slow Down) and still was after {stores.MAX_ATTEMPTS} attempts"),
])
def test_what_the_store_refuses_is_one_line_and_exit_2(s3, refusing, tmp_path, url, status, said):
    server = refusing(status) if status else None
    t0 = time.monotonic()
    res = CliRunner().invoke(app, ["analyze", url, "--out", str(tmp_path / "o"), "-q"])
    assert time.monotonic() - t0 < 60  # bounded retries: never a hang
    assert res.exit_code == 2, res.output
    [line] = res.stderr.splitlines()
    assert said in line and SECRET not in line
    assert line.startswith(f"kafka-forensics: {url}: " if SECRET not in url else "kafka-forensics: s3://…@")
    assert not (tmp_path / "o").exists()
    if status == 503:
        assert 1 < server.requests <= 2 * stores.MAX_ATTEMPTS  # retried, a bounded number of times


def test_a_read_the_store_refuses_stops_the_task(s3, refusing):
    """On an executor a refused read is not an ``unreadable_file`` row of evidence: it ends the
    run, and the driver says the task's line (``stores.failed_read``)."""
    refusing(403)
    f = {"abs_path": f"{URL}/broker-1/x-0/00000000000000000000.log", "path": "broker-1/x-0/00000000000000000000.log",
         "broker": 1, "log_dir": "broker-1", "topic": "x", "partition": 0, "dir_state": "live", "kind": "segment",
         "size": 100, "mtime_ms": 0, "archive": None, "span_start": None, "span_stop": None}
    with pytest.raises(stores.StoreError) as err:
        list(run_task([f]))
    line = str(err.value)
    assert line.startswith(f["abs_path"] + ": ")
    assert stores.failed_read(RuntimeError(f"Traceback ...\njobs.ingest.stores.StoreError: {line}\n\tat org.apache")) == line


def test_salvage_rechecks_each_object_size_and_hash(analyzed, s3, tmp_path):
    """salvage finds the analyzed objects again from findings.json's URL, and refuses one that
    changed since (same size, one byte different)."""
    from analyzer.salvage import SalvageError, input_files, segment_files, verified

    _, remote, _ = analyzed
    doc = json.loads((remote / "findings.json").read_text())
    quieted = logging.getLogger("jobs.ingest")
    level = quieted.level
    try:
        where = input_files(doc, tmp_path / "w")
    finally:  # (salvage's own process quiets discovery's warnings: not the rest of this worker's tests)
        quieted.setLevel(level)
    row = next(r for rows in segment_files(remote).values() for r in rows if r["size"] > 0)
    assert where[row["path"]].startswith(f"{URL}/")
    with verified(row, where) as fb:
        assert hashlib.sha256(fb.data).hexdigest() == row["sha256"]
    key = where[row["path"]].removeprefix("s3://")
    original = (SRC / row["path"]).read_bytes()
    changed = bytearray(original)
    changed[-1] ^= 1
    try:
        with s3["fs"].open_output_stream(key) as out:
            out.write(bytes(changed))
        with pytest.raises(SalvageError, match="its SHA-256 differs from the one recorded"):
            verified(row, where)
    finally:
        with s3["fs"].open_output_stream(key) as out:
            out.write(original)
