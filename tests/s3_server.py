"""moto's S3 server on 127.0.0.1 for the object-store tests: a real S3 API (ListObjectsV2, ranged
GETs, its own errors), started on a free port, with the standard chain's environment pointing at
it and nothing of the machine's own AWS profile or instance role."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

KEY = "kf-test-key"
SECRET = "kf-test-secret-5b1e9d"  # tests check it appears nowhere in DIR


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class S3Server:
    endpoint: str
    port: int
    env: dict[str, str]  # the standard chain's variables for a client of this server
    fs: pafs.S3FileSystem  # ours, to upload and change objects

    def upload(self, local: Path, key: str) -> str:
        """A file or folder uploaded under ``key`` (``bucket/prefix``); its ``s3://`` URL."""
        bucket = key.split("/", 1)[0]
        if self.fs.get_file_info(bucket).type == pafs.FileType.NotFound:
            self.fs.create_dir(bucket)
        pafs.copy_files(str(local), key, destination_filesystem=self.fs)
        return f"s3://{key}"


@contextlib.contextmanager
def moto_server(tmp: Path) -> Iterator[S3Server]:
    """moto's server, stopped when the block ends (its log in ``tmp/moto.log``)."""
    port = free_port()
    with open(tmp / "moto.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"moto's server exited with {proc.returncode}: {(tmp / 'moto.log').read_text()[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                pytest.fail("timed out waiting for moto's server")
            time.sleep(0.2)
        endpoint = f"http://127.0.0.1:{port}"
        env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET,
               "AWS_CONFIG_FILE": str(tmp / "no-aws-config"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "no-aws-credentials"),
               "AWS_EC2_METADATA_DISABLED": "true"}
        fs = pafs.S3FileSystem(endpoint_override=endpoint, region="us-east-1", access_key=KEY, secret_key=SECRET,
                               allow_bucket_creation=True)
        yield S3Server(endpoint, port, env, fs)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def table_rows(out: Path, name: str) -> list[str]:
    """Table ``name`` of DIR ``out`` as sorted row reprs, to compare a store run with a local one
    (``files.mtime`` left out: an object's time is when it was uploaded, not the file's on the broker)."""
    path = out / "tables" / name
    if not path.is_dir():
        return []
    table = pq.read_table(path)
    if name == "files":
        table = table.drop_columns(["mtime"])
    return sorted(map(repr, table.to_pylist()))
