"""Spark's classes kept parsed and verified between runs: the JVM's dynamic class data sharing.

Why: of the CPU a small ``analyze`` costs, nearly all is the Spark JVM's, and the largest share of
that is loading, verifying and linking Spark's classes from its jars (measured with the JVM's own
counters: class loading ~27 s, JIT ~9 s, GC ~4 s of ~55 CPU-seconds on 0.4 MB of input), again on
every run. A dynamic CDS archive (JDK 13+, ``-XX:ArchiveClassesAtExit``) holds the classes a run
loaded, already parsed and verified; a later JVM maps it instead of reading the jars. Measured
here: a bare Spark start plus one count falls from 8.7 s to 4.2 s.

How: the first Spark run with no archive writes one when its JVM exits (``finish`` closes the JVM
and moves the finished file into place, so a run killed mid-way leaves no half archive in use);
later runs map it. The archive lives in the user's cache (``KF_CACHE_DIR``, else
``$XDG_CACHE_HOME/kafka-forensics``, else ``~/.cache/kafka-forensics``), never in DIR or the inputs,
and is named after what the JVM checks it against (the java binary, pyspark's jars), so another
JDK or pyspark writes its own. The JVM refuses to write an archive when a non-empty directory is
on its class path, and Spark puts ``SPARK_CONF_DIR`` there: our log4j config is therefore passed
as ``-Dlog4j2.configurationFile`` and ``SPARK_CONF_DIR`` points at an empty folder of the cache.
Only when we chose ``SPARK_CONF_DIR`` ourselves: a user's own, ``--verbose`` or
``KF_CLASS_SHARING=0`` leave the JVM as Spark starts it. A mismatch the name misses only turns
sharing off (``-Xshare:auto``); the JVM's own log lines about it are silenced (they go to stdout,
which carries our JSON).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import shutil
from pathlib import Path

from jobs.processes import pid_alive

log = logging.getLogger(__name__)

ENV_OFF = "KF_CLASS_SHARING"
ENV_CACHE = "KF_CACHE_DIR"
# the JVM's unified logging prints CDS warnings to stdout; errors only, and on stderr
QUIET_JVM_LOG = "-Xlog:disable -Xlog:all=error:stderr"


def cache_dir() -> Path:
    if os.environ.get(ENV_CACHE):
        return Path(os.environ[ENV_CACHE])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-forensics"


def archive_name(java: str | None, jars: Path) -> str:
    """``spark-<hash>.jsa``: the hash covers what the archive must match (the java binary, by
    path, size and mtime, and pyspark's jars, by name and size)."""
    h = hashlib.sha256()
    if java:
        real = Path(java).resolve()
        st = real.stat()
        h.update(f"{real}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    for jar in sorted(jars.glob("*.jar")):
        h.update(f"{jar.name}:{jar.stat().st_size}\n".encode())
    return f"spark-{h.hexdigest()[:16]}.jsa"


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def java_options(our_conf_dir: Path, log4j_file: Path) -> tuple[str, Path | None, Path | None]:
    """The JVM options for class sharing, the archive being written (or None) and its final name.

    Sets ``SPARK_CONF_DIR`` to an empty folder when it was ours (``our_conf_dir``, or that empty
    folder, inherited from a parent process that started Spark); returns ``("", None, None)`` when
    sharing is off or cannot be used, with ``SPARK_CONF_DIR`` ours again (its log4j config on the
    class path), or left alone when it is a user's."""
    conf = Path(os.environ.get("SPARK_CONF_DIR", ""))
    empty = cache_dir() / "spark-conf"
    if conf not in (our_conf_dir, empty):
        return "", None, None
    os.environ["SPARK_CONF_DIR"] = str(our_conf_dir)
    if os.environ.get(ENV_OFF, "1") == "0":
        return "", None, None
    try:
        import pyspark

        empty.mkdir(parents=True, exist_ok=True)
        if any(empty.iterdir()):
            return "", None, None
        final = empty.parent / archive_name(_java(), Path(pyspark.__file__).parent / "jars")
        for old in empty.parent.glob(f"{final.name}.tmp-*"):  # left by runs killed while writing
            with contextlib.suppress(ValueError, OSError):
                if not pid_alive(int(old.name.rsplit("-", 1)[1])):
                    old.unlink()
    except OSError:
        return "", None, None
    os.environ["SPARK_CONF_DIR"] = str(empty)
    opts = f"-Dlog4j2.configurationFile={log4j_file} {QUIET_JVM_LOG}"
    if final.is_file():
        return f"{opts} -Xshare:auto -XX:SharedArchiveFile={final}", None, final
    pending = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    return f"{opts} -XX:ArchiveClassesAtExit={pending}", pending, final


_finishing: list[Path] = []


def finish_at_exit(pending: Path, final: Path) -> None:
    """At this process's exit: stop Spark, let its JVM exit (it writes the archive as it does) and
    move the archive into place. Registered once; a second session in the process changes nothing."""
    if _finishing:
        return
    _finishing.append(pending)
    atexit.register(_finish, pending, final)


def _finish(pending: Path, final: Path) -> None:
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    try:
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()  # the JVM's PythonGatewayServer exits on EOF: the archive is written then
            proc.wait(timeout=60)
        if proc is not None and proc.returncode == 0 and pending.is_file() and pending.stat().st_size > 0:
            os.replace(pending, final)
    except Exception as exc:  # a cache that could not be written costs speed, never the run
        log.debug("class-sharing archive not kept: %s", exc)
    finally:
        with contextlib.suppress(OSError):
            pending.unlink()
