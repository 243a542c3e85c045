"""Spark Connect: a ``--remote sc://HOST:PORT`` server runs the jobs, and this process has no JVM.

Why it matters to every job: a Connect session has no SparkContext, so no RDDs, accumulators,
py4j or ``_jdf``; jobs ask ``is_remote`` before using any of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.errors import InputError

from .conf import DEBUGGING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REMOTE_SCHEME = "sc://"
CONNECT_PORT = 15002  # Spark Connect's default port (SparkConnectClient's DEFAULT_PORT)


class RemoteUnreachable(InputError, ValueError):
    """No Spark Connect server answers at the ``--remote`` URL: the CLI says so in one line, exit 2."""


def is_remote_url(master: str) -> bool:
    """Whether ``master`` names a Spark Connect server (``--remote sc://HOST:PORT``) rather than a master."""
    return master.startswith(REMOTE_SCHEME)


def is_remote(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session: no SparkContext, no py4j JVM in this process,
    so no RDDs, accumulators or ``_jdf``; jobs ask this before using any of them."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def remote_endpoint(url: str) -> tuple[str, int]:
    """(host, port) of ``sc://HOST[:PORT][/;params]``, as pyspark's ChannelBuilder reads it."""
    netloc = url[len(REMOTE_SCHEME):].split("/", 1)[0].split(";", 1)[0]
    host, _, port = netloc.rpartition(":") if netloc.rsplit(":", 1)[-1].isdigit() else (netloc, "", "")
    return host.strip("[]") or "localhost", int(port) if port else CONNECT_PORT


def remote_session(url: str, settings: dict[str, str], timeout: float = 10) -> SparkSession:
    """A Spark Connect session on ``url`` with those of ``settings`` a client may set.

    Why only some: over Connect the server owns the JVM, so its master, memory, JVM options, UI,
    scratch, Python workers and catalog were fixed by its own ``--conf``s when it started (setting
    such a static conf is an error); what a session may change (``RuntimeConfig.isModifiable``: the
    time zone, shuffle partitions, Arrow batch size, codegen, Parquet codec...) is set as locally.
    The port is tried first: pyspark's client retries an unreachable server for minutes."""
    import socket

    from pyspark.sql import SparkSession

    host, port = remote_endpoint(url)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise RemoteUnreachable(f"{url}: no Spark Connect server answers at {host}:{port} ({exc.strerror or exc})") from None
    spark = SparkSession.builder.remote(url).getOrCreate()
    for key, value in settings.items():
        if (key.startswith("spark.sql.") or key == DEBUGGING) and spark.conf.isModifiable(key):
            spark.conf.set(key, value)
    return spark
