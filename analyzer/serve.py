"""``kafka-forensics serve``: Spark's Thrift JDBC/ODBC server over an output DIR's catalog, so
beeline, DBeaver or Superset query every table by name.

Why Spark's own server rather than ours: its jars ship in pip's pyspark (HiveThriftServer2 and
the Hive JDBC driver beeline uses), and it opens the same Derby metastore ``sql`` does, with the
same confs (``jobs.session.conf.catalog_confs``). pip's pyspark has no ``start-thriftserver.sh``,
so the server is ``spark-submit --class HiveThriftServer2``, run in the foreground as a child.

The server has no authentication: whoever reaches its port reads every table (record keys and
values too, when DIR was ingested with ``--payloads``). So it listens on loopback only unless
``--allow-unauthenticated`` says the user means another address (``check_host``, before anything
starts).

Embedded Derby lets one JVM at a time open a metastore: the server takes DIR's catalog as ``sql``
does (``catalog.claim``, Derby's own lock checked too) and refuses, in one line, when another
process has it. While it runs, ``sql`` on the same DIR falls back to a private catalog.

Stopping: Ctrl-C or SIGTERM sends SIGTERM to the JVM (its shutdown hooks stop the server and
Spark and close Derby), SIGKILL after ``STOP_TIMEOUT``; the JVM also gets SIGTERM from the kernel
if this process dies first (``PR_SET_PDEATHSIG``), so no JVM outlives ``serve``.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from jobs.errors import InputError
from jobs.terminal import escape

THRIFT_SERVER = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10000
START_TIMEOUT = 600.0  # a loaded laptop takes minutes to start Spark with Hive
STOP_TIMEOUT = 30.0
_PR_SET_PDEATHSIG = 1


class ServeError(InputError):
    """Why DIR cannot be served: one line for the user."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` reaches this machine only: a loopback address (127.0.0.0/8, ::1, also as
    ::ffff:127.x), ``localhost``, or a name every address of which is loopback. A wildcard
    (0.0.0.0, ::, "") is every interface, not loopback."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if host.lower() == "localhost":
            return True
        try:
            found = {info[4][0] for info in socket.getaddrinfo(host, None)} if host else set()
        except (OSError, UnicodeError):
            return False
        return bool(found) and all(_loopback_ip(a) for a in found)
    return _loopback_ip(str(ip))


def _loopback_ip(text: str) -> bool:
    """An address (a zone ``%eth0`` dropped) in 127.0.0.0/8 or ::1; an IPv4-mapped IPv6 address is
    judged as the IPv4 address it carries, as the kernel routes it."""
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def check_host(host: str, allow_unauthenticated: bool = False) -> None:
    """Refuse (ServeError) to listen beyond loopback unless the user said so: the Thrift server
    authenticates no one (any user name and password), so on another address every table, payloads
    included, is open to whoever reaches the port."""
    if not allow_unauthenticated and not is_loopback(host):
        raise ServeError(f"--host {host or repr(host)}: not a loopback address, and the JDBC server has no authentication "
                         "(anyone who reaches the port reads every table); pass --allow-unauthenticated to serve it anyway")


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def jdbc_url(host: str, port: int) -> str:
    return f"jdbc:hive2://{_reachable(host)}:{port}"


def beeline_line(host: str, port: int, query: str = "show tables") -> str:
    """The command a user pastes to query the server with the beeline that ships in pyspark."""
    return f"{spark_home() / 'bin' / 'beeline'} -u {jdbc_url(host, port)} -e \"{query}\""


def server_command(catalog_dir: Path, host: str, port: int, master: str) -> list[str]:
    """``spark-submit`` running HiveThriftServer2 on ``host:port`` over the catalog in ``catalog_dir``:
    the confs ``sql`` opens it with (``catalog_confs``), quiet and UTC as ``get_session`` is."""
    from jobs.session.conf import catalog_confs, driver_memory

    confs = {
        **catalog_confs(catalog_dir),
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": driver_memory("1g"),
    }
    argv = [str(spark_home() / "bin" / "spark-submit"), "--master", master, "--name", "kafka-forensics serve",
            "--class", THRIFT_SERVER]
    for key, value in confs.items():
        argv += ["--conf", f"{key}={value}"]
    return argv + ["--hiveconf", f"hive.server2.thrift.bind.host={host}", "--hiveconf", f"hive.server2.thrift.port={port}"]


def check_dir(out: Path) -> None:
    """DIR must be an ingest/analyze output whose catalog no other process holds; a catalog built
    for another place or other tables is rebuilt first, in a JVM of its own (``jobs.store.catalog``)."""
    from jobs.store import catalog
    from jobs.store.outdir import recover

    recover(out)
    if not (out / "tables").is_dir() or not catalog.table_names(out):
        raise ServeError(f"{out}: not an analyzed DIR (no tables/ written by analyze or ingest)")
    if catalog.needs_registration(out) and not catalog.in_use(out):
        subprocess.run([sys.executable, "-m", "jobs.store.catalog", str(out)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    if not catalog.claim(out) or catalog.in_use(out):
        raise ServeError(f"{out}: its catalog is open in another process (a sql, analyze or spark-sql on DIR); "
                         "Derby allows one at a time: stop it, then serve")
    if catalog.needs_registration(out):
        raise ServeError(f"{out}: its catalog could not be rebuilt; run kafka-forensics sql {out} once to see why")


def check_port(host: str, port: int) -> None:
    """Fail before starting a JVM when the port is taken (the server would only log it and hang)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _reachable(host: str) -> str:
    """The address a client on this machine connects to (a wildcard bind is reached on loopback)."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)


def listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((_reachable(host), port), timeout=1):
            return True
    except OSError:
        return False


def _die_with_parent() -> None:
    """In the child before exec: the kernel sends it SIGTERM when ``serve`` dies, however it dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _relay(pipe, tail: collections.deque) -> None:
    """The server's stderr: kept (its last lines explain a failed start) and copied to ours
    without Spark's start-up noise, as ``get_session`` does for the JVM it starts."""
    from jobs.session.log_noise import startup_noise

    for raw in iter(pipe.readline, b""):
        line = raw.decode("utf-8", "replace")
        tail.append(line.rstrip())
        if not startup_noise(line) and "RECEIVED SIGNAL" not in line:  # (the server logs our SIGTERM)
            with contextlib.suppress(OSError):
                os.write(2, escape(line, keep="\n\t").encode("utf-8"))  # (errors may quote names from the evidence)


def failure_line(tail: collections.deque) -> str:
    """The most telling line a server that died printed: its first exception, else its last line."""
    lines = [ln.strip() for ln in tail if ln.strip()]
    for ln in lines:
        if "Exception" in ln or "Error" in ln:
            return ln[:300]
    return lines[-1][:300] if lines else "no output"


def stop(proc: subprocess.Popen, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM (the JVM's shutdown hooks stop the server, Spark and Derby), SIGKILL if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def serve(out: Path, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, master: str = "local[*]",
          ready: Callable[[], None] | None = None, allow_unauthenticated: bool = False) -> int:
    """Run the server until Ctrl-C/SIGTERM (0) or until it dies on its own (ServeError). ``ready``
    is called once the port accepts connections. A ``host`` beyond loopback needs
    ``allow_unauthenticated`` (``check_host``)."""
    check_host(host, allow_unauthenticated)
    from jobs.session.log_noise import quiet_java_logs
    from jobs.session.scratch import scratch_dir
    from jobs.store import catalog

    out = Path(out).absolute()
    check_port(host, port)
    check_dir(out)
    quiet_java_logs()  # (SPARK_CONF_DIR: log4j lets only errors through, as for sql)
    scratch = scratch_dir()
    env = dict(os.environ, SPARK_LOCAL_DIRS=str(scratch))
    proc = subprocess.Popen(server_command(catalog.catalog_dir(out), host, port, master), cwd=scratch, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=_die_with_parent)
    tail: collections.deque = collections.deque(maxlen=200)
    relay = threading.Thread(target=_relay, args=(proc.stderr, tail), name="kf-serve-stderr", daemon=True)
    relay.start()
    stopping = threading.Event()

    def on_signal(signum, frame):
        stopping.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not stopping.is_set() and proc.poll() is None and not listening(host, port):
            if time.monotonic() > deadline:
                raise ServeError(f"the JDBC server did not listen on {host}:{port} within {START_TIMEOUT:.0f} s")
            stopping.wait(0.5)
        if proc.poll() is None and not stopping.is_set() and ready is not None:
            ready()
        while not stopping.is_set() and proc.poll() is None:
            stopping.wait(0.5)
        if not stopping.is_set():
            relay.join(5)
            raise ServeError(f"the JDBC server stopped (exit {proc.returncode}): {failure_line(tail)}")
        return 0
    finally:
        stop(proc)
        shutil.rmtree(scratch, ignore_errors=True)
        for s, handler in previous.items():
            signal.signal(s, handler)
