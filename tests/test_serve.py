"""``kafka-forensics serve DIR``: Spark's Thrift JDBC server over DIR's catalog, queried with the
beeline that ships in pyspark (the README's line, run as written), then stopped with SIGTERM,
leaving no JVM behind.

Every step is its own process, as a user runs them: analyze, serve, beeline. One analyzed DIR
(the real cluster's unclean election) serves all the tests of this module.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import REAL
from test_catalog import BIN, _env, _run, readme_line

from jobs.processes import pid_alive
from jobs.session.signals import descendants

README_BEELINE = "$(python -c 'import pyspark"
SCENARIO = REAL / "unclean-election-divergence-rejoined"
CLI = str(BIN / "kafka-forensics")


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("serve") / "case"
    proc = subprocess.run([CLI, "analyze", str(SCENARIO), "--out", str(out), "--quiet", "--master", "local[1]"],
                          env=_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _table(stdout: str) -> list[list[str]]:
    """beeline's table output as rows of cells, header rows included."""
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in stdout.splitlines() if ln.strip().startswith("|")]


class Server:
    """``kafka-forensics serve`` as a subprocess; ``ready`` once it printed its JDBC URL."""

    def __init__(self, out: Path, port: int) -> None:
        self.port = port
        self.proc = subprocess.Popen([CLI, "serve", str(out), "--port", str(port)], env=_env(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stderr: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)
            if line.startswith("JDBC server on"):
                self.ready.set()

    def wait_ready(self, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready.wait(1):
            assert self.proc.poll() is None, "".join(self.stderr)[-3000:]
            assert time.monotonic() < deadline, "".join(self.stderr)[-3000:]


@pytest.fixture(scope="module")
def server(analyzed):
    srv = Server(analyzed, _free_port())
    try:
        srv.wait_ready()
        yield srv
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


def test_readme_beeline_query_and_tables_match_the_dir(analyzed, server, tmp_path):
    # the beeline line follows the URL line in the same write; the reader thread may not have it yet
    deadline = time.monotonic() + 10
    while "bin/beeline -u" not in "".join(server.stderr) and time.monotonic() < deadline:
        time.sleep(0.1)
    said = "".join(server.stderr)
    assert f"jdbc:hive2://127.0.0.1:{server.port}" in said and "bin/beeline -u" in said
    line = readme_line(README_BEELINE)
    assert ":10000 " in line
    proc = _run(["bash", "-c", line.replace(":10000 ", f":{server.port} ")], tmp_path)
    rows = _table(proc.stdout)
    assert rows[0] == ["kind", "severity", "n"]
    findings = json.loads((analyzed / "findings.json").read_text())["findings"]
    expected = {}
    for f in findings:
        expected[(f["kind"], f["severity"])] = expected.get((f["kind"], f["severity"]), 0) + 1
    assert expected and {(k, s): int(n) for k, s, n in rows[1:]} == expected

    url = f"jdbc:hive2://127.0.0.1:{server.port}"
    proc = _run(["bash", "-c", line.split(" -u ")[0] + f" -u {url} -e 'select count(*) as n from findings; show tables'"], tmp_path)
    rows = _table(proc.stdout)
    assert rows[0] == ["n"] and int(rows[1][0]) == len(findings)
    shown = sorted(r[1] for r in rows[2:] if r[0] == "default")
    assert shown == sorted(p.name for p in (analyzed / "tables").iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def test_second_server_on_the_same_dir_is_one_line(analyzed, server):
    proc = subprocess.run([CLI, "serve", str(analyzed), "--port", str(_free_port())], env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("kafka-forensics: ") and proc.stderr.count("\n") == 1 and "catalog is open in another process" in proc.stderr


def test_sigterm_stops_the_server_and_its_jvm(server):
    jvms = [p for p in descendants(server.proc.pid) if "java" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]
    assert jvms, "the server runs in a JVM below serve"
    server.proc.terminate()
    assert server.proc.wait(120) == 0
    deadline = time.monotonic() + 30
    while any(pid_alive(p) for p in jvms) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(pid_alive(p) for p in jvms)
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", server.port)) != 0
    assert not any("Traceback" in line for line in server.stderr)


def test_not_an_analyzed_dir_and_a_taken_port(tmp_path):
    proc = subprocess.run([CLI, "serve", str(tmp_path)], env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("kafka-forensics: ") and "not an analyzed DIR" in proc.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        proc = subprocess.run([CLI, "serve", str(tmp_path), "--port", str(s.getsockname()[1])], env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "cannot listen on 127.0.0.1:" in proc.stderr


# ---------------------------------------------------------------- who may connect (no Spark: refused or stopped before)


def _serve_cli(monkeypatch, tmp_path, *args: str):
    """``serve`` in this process, stopped at its first step past the host check (the port check,
    before anything is started) by a port check that says so: exit 2, "port checked on HOST"."""
    from typer.testing import CliRunner

    from analyzer import serve as serve_mod
    from analyzer.cli import app

    def port_checked(host, port):
        raise serve_mod.ServeError(f"port checked on {host}")

    monkeypatch.setattr(serve_mod, "check_port", port_checked)
    return CliRunner().invoke(app, ["serve", str(tmp_path), *args])


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.invalid"])
def test_a_host_beyond_loopback_is_refused_before_anything_starts(monkeypatch, tmp_path, host):
    res = _serve_cli(monkeypatch, tmp_path, "--host", host)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith(f"kafka-forensics: --host {host}: not a loopback address") and "--allow-unauthenticated" in res.stderr


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_hosts_are_served_as_before(monkeypatch, tmp_path, host):
    res = _serve_cli(monkeypatch, tmp_path, "--host", host)
    assert (res.exit_code, res.stderr) == (2, f"kafka-forensics: port checked on {host}\n")


def test_allow_unauthenticated_serves_any_host(monkeypatch, tmp_path):
    res = _serve_cli(monkeypatch, tmp_path, "--host", "0.0.0.0", "--allow-unauthenticated")
    assert (res.exit_code, res.stderr) == (2, "kafka-forensics: port checked on 0.0.0.0\n")


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.255.0.9", True), ("::1", True), ("::ffff:127.0.0.1", True), ("LocalHost", True),
    ("0.0.0.0", False), ("::", False), ("", False), ("10.0.0.1", False), ("fe80::1", False), ("::ffff:10.0.0.1", False),
])  # fmt: skip
def test_is_loopback(host, loopback):
    from analyzer.serve import is_loopback

    assert is_loopback(host) is loopback
