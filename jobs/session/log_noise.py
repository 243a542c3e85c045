"""What Spark and its JVM print that a user of the CLI did not ask for: start-up lines filtered
from the JVM's stderr, log4j at errors only (``spark_conf/``), Spark's logs back with ``--verbose``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

SPARK_CONF = Path(__file__).with_name("spark_conf")  # our log4j2.properties: Spark's errors only

CONTEXT_FAILED = "Error initializing SparkContext"  # what Spark logs (with the stack) when its context cannot start
LOG_LEVEL_ENV = "KF_SPARK_LOG_LEVEL"  # set (``--verbose`` sets WARN): Spark logs as Spark itself would

# What the JVM and Spark print on stderr while starting, before any log4j config or setLogLevel
# can act (the JVM's own warning about the vector module Spark loads, the shell's log-level hint):
# noise to a user of the CLI, who gets it back with ``--verbose``.
STARTUP_NOISE = (
    "WARNING: Using incubator modules",
    "Setting default log level to",
    "To adjust logging level use sc.setLogLevel",
    "NativeCodeLoader",
    "Using Spark's default log4j profile",
    "Your hostname, ",
    "Set SPARK_LOCAL_IP if you need to bind",
)


def verbose() -> bool:
    """Whether Spark's own logs were asked for (``--verbose``, or KF_SPARK_LOG_LEVEL by hand)."""
    return LOG_LEVEL_ENV in os.environ


def startup_noise(line: str) -> bool:
    return any(marker in line for marker in STARTUP_NOISE)


def _forward_stderr(pipe) -> None:
    """Copy the JVM's stderr (and its Python workers') to ours line by line, without the start-up
    noise; errors and worker tracebacks still come through. Written to fd 2, as the JVM did, with
    control characters escaped: an error may quote a path or name from the evidence.
    (``jobs.terminal`` is a standard-library leaf beside ``jobs.errors``: the CLI and the report use it too.)"""
    from jobs.terminal import escape

    from .memory import OUT_OF_HEAP

    ending = False
    for raw in iter(pipe.readline, b""):
        line = raw.decode("utf-8", "replace")
        # a JVM out of heap is ending (Spark exits on an OutOfMemoryError no caller caught): its
        # stack traces and the threads failing after it are not the user's to read; the CLI says
        # it in one line, naming the heap (``jobs.session.memory``). Nor are those of a SparkContext
        # that could not start: the CLI says Spark's reason (``start.refused_setting``) or its own
        ending = ending or OUT_OF_HEAP in line or CONTEXT_FAILED in line
        if not ending and not startup_noise(line):
            with contextlib.suppress(OSError):
                os.write(2, escape(line, keep="\n\t").encode("utf-8"))  # (Java's stack frames start with a tab)


def start_jvm_quietly(options: dict[str, str]) -> None:
    """Start the JVM as pyspark would (same spark-submit, same confs), but with its stderr piped
    through ``_forward_stderr``: the lines it prints before log4j is configured cannot be
    silenced any other way. A JVM already running, or ``verbose()``, is left as pyspark does it."""
    import subprocess
    import threading

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or verbose():
        return
    conf = SparkConf(loadDefaults=False).setAll(list(options.items()))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=_forward_stderr, args=(gateway.proc.stderr,), name="kf-jvm-stderr", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


def quiet_java_logs() -> None:
    """Spark prints a few WARN lines while starting (native hadoop, hostname loopback...) before
    setLogLevel can act; point log4j2 at a config that only lets errors through."""
    if "SPARK_CONF_DIR" in os.environ or verbose():
        return
    if (SPARK_CONF / "log4j2.properties").is_file():
        os.environ["SPARK_CONF_DIR"] = str(SPARK_CONF)
