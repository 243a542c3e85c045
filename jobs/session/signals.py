"""Ctrl-C and the other stop signals during a run: the JVM and its workers stopped first, then one
line instead of py4j's tracebacks.

Why: pyspark's own SIGINT handler cancels the jobs with a py4j call made inside the interrupted one
and prints its tracebacks, and the JVM (which ignores SIGINT) keeps writing into the staging dir
while Python removes it. Commands wrap their run in ``interruptible()`` instead, which the CLI's
own process also asks to take SIGTERM and SIGHUP (``STOP_SIGNALS``: ``timeout``, systemd,
Kubernetes, a batch scheduler or a closed terminal stop a run that way).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from jobs.processes import pid_alive

from .scratch import scratch_path


class Interrupted(BaseException):
    """Ctrl-C, or another stop signal, during a command that runs Spark. A BaseException like
    KeyboardInterrupt, so no ``except Exception`` swallows it, but not one: py4j logs every
    KeyboardInterrupt it sees inside a call with a traceback. ``signum``: the signal (a command
    exits 128 + it, as a shell reports a process that signal ended)."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signum)
        self.signum = signum


# Ctrl-C, then what ``timeout``, systemd, Kubernetes and batch schedulers send (SIGTERM), and a
# closed terminal (SIGHUP): each gets what Ctrl-C gets
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def not_a_broken_py4j_call(record: logging.LogRecord) -> bool:
    """A logging filter: False for py4j's own report of a call the JVM broke. py4j logs it on the root
    logger (``logging.exception("Exception while sending command.")``, with the traceback) from
    whichever thread's call meets the dead JVM, while the main thread says why the JVM ended (out of
    heap, a stop signal, an internal error) in the command's one line: so a run whose JVM died in a
    task printed that line after a page of py4j tracebacks, as often as the detector threads raced."""
    return not (record.name == "root" and "py4j" in Path(record.pathname).parts)


def descendants(root: int | None = None) -> list[int]:
    """Every process below ``root`` (this one by default): the JVM (or spark-submit still starting
    one) and, below the JVM, pyspark's daemon and its Python workers, which since ingest writes
    from the tasks hold open Parquet files in the staging dir."""
    parent: dict[int, int] = {}
    for d in Path("/proc").glob("[0-9]*"):
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        parent[int(d.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
    found, frontier = [], [os.getpid() if root is None else root]
    while frontier:
        kids = [pid for pid, ppid in parent.items() if ppid in frontier]
        found += kids
        frontier = kids
    return found


def jvm_process():
    """The ``subprocess.Popen`` of the JVM this process started (pyspark's py4j gateway), or None:
    none started yet, or not ours to see (Spark Connect)."""
    context = getattr(sys.modules.get("pyspark"), "SparkContext", None)
    proc = getattr(getattr(context, "_gateway", None), "proc", None)
    return proc if hasattr(proc, "wait") else None


def stop_jvm(timeout: float = 30) -> None:
    """Kill the JVM this process started and every process under it, and wait until they are
    gone, so nothing writes another byte (a cancelled task still finishing its Parquet file into
    the staging dir) once this returns; then remove its scratch. SIGKILL: the JVM says nothing
    while dying, and its shutdown hooks have nothing left to save. pyspark's Python workers are
    killed too rather than left to notice their JVM is gone: they write table files themselves."""
    import time

    context = getattr(sys.modules.get("pyspark"), "SparkContext", None)
    proc = jvm_process()
    server = getattr(getattr(context, "_active_spark_context", None), "_accumulatorServer", None)
    if server is not None:  # its connection from the JVM ends with an EOFError that socketserver prints
        server.handle_error = lambda request, client_address: None
    pids = set(descendants()) | ({proc.pid} if proc is not None and proc.poll() is None else set())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if proc is not None and proc.pid in pids:
        proc.wait(timeout)
    for pid in pids:  # our children are reaped here; the JVM's are reaped by init once it is gone
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_alive(pid) for pid in pids):
        time.sleep(0.02)
    shutil.rmtree(scratch_path(), ignore_errors=True)


@contextlib.contextmanager
def interruptible(signals: tuple[int, ...] = (signal.SIGINT,)) -> Iterator[None]:
    """Inside the block, Ctrl-C (each of ``signals``) stops the JVM first and then raises
    ``Interrupted``, so the staging dir is removed after the last write into it, and the command
    can say one line instead of py4j's tracebacks. (The JVM ignores SIGINT itself: pyspark starts
    it that way; a SIGTERM sent to the whole process group, as ``timeout`` sends it, starts its
    shutdown, which the SIGKILL cuts short.)

    Only Python-level handlers, in this process: the JVM and, below it, pyspark's daemon and its
    workers are started by exec, which resets a caught signal to its default, so they keep their
    own handling. A signal ignored when the block starts (``nohup``'s SIGHUP, a background job's
    SIGINT) stays ignored. Handlers are set from the main thread only (Python's rule)."""

    caught: list[int] = []
    handled = [s for s in signals if signal.getsignal(s) != signal.SIG_IGN]

    def handler(signum, frame):
        caught.append(signum)
        for s in handled:  # a second signal must not cut the cleanup short
            signal.signal(s, signal.SIG_IGN)
        logging.disable(logging.CRITICAL)  # py4j logs each call the dead JVM breaks, with a traceback
        stop_jvm()
        raise Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in handled}
    try:
        yield
    except Exception:
        # unwinding from the handler, pyspark's own context managers call the dead JVM once more
        # (``SCCallSiteSync.__exit__`` around a collect): their ConnectionRefusedError replaces
        # ``Interrupted``, but it is the same signal
        if caught:
            raise Interrupted(caught[0]) from None
        raise
    finally:
        for s, before in previous.items():
            signal.signal(s, signal.SIG_DFL if before is None else before)  # (None: set outside Python)
