"""The Spark JVM's class-data-sharing archive (jobs/session/class_sharing.py): written once at the
first run's exit into the cache, mapped by the next JVM, never on stdout, off where it cannot work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

from jobs.session import class_sharing
from jobs.session.log_noise import SPARK_CONF

# a Spark start and one query, then what the JVM has mapped: is our archive among its mappings?
PROBE = """
import json, sys
from pyspark import SparkContext
from jobs.session.start import get_session
spark = get_session("local[1]", input_bytes=1000)
n = spark.range(5).count()
maps = open(f"/proc/{SparkContext._gateway.proc.pid}/maps").read()
print(json.dumps({"n": n, "mapped": sorted({ln.split()[-1] for ln in maps.splitlines() if ln.endswith(".jsa")})}))
"""


def _probe(cache: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONF_DIR", class_sharing.ENV_OFF, "KF_SPARK_LOG_LEVEL")}
    env[class_sharing.ENV_CACHE] = str(cache)
    return subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def test_first_run_writes_the_archive_and_the_next_maps_it(tmp_path):
    cache = tmp_path / "cache"
    first = _probe(cache)
    assert first.returncode == 0, first.stderr[-3000:]
    out = json.loads(first.stdout)
    assert out["n"] == 5 and not any(str(cache) in m for m in out["mapped"]), out  # no archive yet: none mapped
    archives = list(cache.glob("spark-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 10 << 20, sorted(p.name for p in cache.iterdir())
    assert not list(cache.glob("*.tmp-*")), "the pending archive is moved into place, not left"

    second = _probe(cache)
    assert second.returncode == 0, second.stderr[-3000:]
    out = json.loads(second.stdout)  # stdout holds our line only: the JVM's CDS log lines are silenced
    assert out["n"] == 5 and str(archives[0]) in out["mapped"]


def test_off_where_it_cannot_work(tmp_path, monkeypatch):
    monkeypatch.setenv(class_sharing.ENV_CACHE, str(tmp_path))
    log4j = SPARK_CONF / "log4j2.properties"
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "users-own"))  # a user's conf dir is left to the user
    assert class_sharing.java_options(SPARK_CONF, log4j) == ("", None, None)
    monkeypatch.setenv("SPARK_CONF_DIR", str(SPARK_CONF))
    monkeypatch.setenv(class_sharing.ENV_OFF, "0")
    assert class_sharing.java_options(SPARK_CONF, log4j) == ("", None, None)
    monkeypatch.delenv(class_sharing.ENV_OFF)
    opts, pending, final = class_sharing.java_options(SPARK_CONF, log4j)
    # our conf dir holds log4j2.properties, which the JVM refuses on a class path it archives
    assert os.environ["SPARK_CONF_DIR"] == str(tmp_path / "spark-conf") and not any((tmp_path / "spark-conf").iterdir())
    assert f"-XX:ArchiveClassesAtExit={pending}" in opts and f"-Dlog4j2.configurationFile={log4j}" in opts
    assert pending.parent == final.parent == tmp_path and not final.exists()


def test_a_child_of_a_run_keeps_spark_quiet(tmp_path, monkeypatch):
    """A process started by one that already ran Spark (a test's CLI subprocess, the catalog
    rebuild) inherits SPARK_CONF_DIR = the empty folder: it is still ours, so log4j's errors-only
    config still applies, with sharing on or off (it failed: Spark's WARN lines and stack traces came back)."""
    monkeypatch.setenv(class_sharing.ENV_CACHE, str(tmp_path))
    log4j = SPARK_CONF / "log4j2.properties"
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "spark-conf"))
    opts, _, _ = class_sharing.java_options(SPARK_CONF, log4j)
    assert f"-Dlog4j2.configurationFile={log4j}" in opts
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "spark-conf"))
    monkeypatch.setenv(class_sharing.ENV_OFF, "0")
    assert class_sharing.java_options(SPARK_CONF, log4j) == ("", None, None)
    assert os.environ["SPARK_CONF_DIR"] == str(SPARK_CONF), "sharing off: our conf dir, log4j config on the class path"
