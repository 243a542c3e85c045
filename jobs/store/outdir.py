"""Build an output DIR beside the old one and swap it in at the end, so a killed run never
leaves DIR half-written: before the swap readers see the previous results, after it the new.

    with staged_output(out) as tmp:   # tmp = DIR.tmp-<pid>, a sibling (same filesystem)
        ingest(spark, inputs, tmp)    # anything; an exception removes tmp and leaves DIR alone

The swap is one ``renameat2(RENAME_EXCHANGE)`` on Linux (atomic: DIR always names a complete
tree). Where that call is missing, DIR is renamed to ``DIR.old-<pid>`` and tmp to DIR; a run killed
between those two renames leaves DIR absent and ``DIR.old-<pid>`` complete, and ``recover`` (run
by the next ``staged_output`` and by ``sql``) renames it back. Sibling dirs of dead runs are removed.

``pause_point`` is a test-only hook: ``KF_TEST_PAUSE_AT=<name>`` makes a run stop at that named
point so tests/test_atomic_outputs.py can SIGKILL it exactly there; unset, it does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def pause_point(name: str) -> None:
    """Test-only: when ``KF_TEST_PAUSE_AT`` names this point, say so on stderr and sleep (to be killed)."""
    if os.environ.get("KF_TEST_PAUSE_AT") == name:
        print(f"kf-test-pause: {name}", file=sys.stderr, flush=True)
        time.sleep(600)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _siblings(out: Path, tag: str) -> list[tuple[Path, int]]:
    found = []
    for p in out.parent.glob(f"{out.name}.{tag}-*"):
        try:
            found.append((p, int(p.name.rsplit("-", 1)[1])))
        except ValueError:
            continue
    return found


def recover(out: Path) -> None:
    """Undo what a killed run left: restore ``DIR.old-<pid>`` if DIR is missing, drop dead tmp dirs."""
    out = Path(out).absolute()
    if not out.parent.is_dir():
        return
    for old, pid in _siblings(out, "old"):
        if _pid_alive(pid) and pid != os.getpid():
            continue
        if not out.exists():
            os.rename(old, out)
            log.warning("%s: restored the previous results left by an interrupted run", out)
        else:
            shutil.rmtree(old, ignore_errors=True)
    for tmp, pid in _siblings(out, "tmp"):
        if not _pid_alive(pid):
            shutil.rmtree(tmp, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2); False where unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    log.debug("renameat2 failed: %s", os.strerror(ctypes.get_errno()))
    return False


def swap_in(tmp: Path, out: Path) -> None:
    """Make ``tmp`` the new ``out``; the previous ``out`` is deleted after the swap."""
    if not out.exists():
        os.rename(tmp, out)
        return
    if _exchange(tmp, out):
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the previous results
        return
    old = out.parent / f"{out.name}.old-{os.getpid()}"
    os.rename(out, old)
    os.rename(tmp, out)
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def staged_output(out: Path) -> Iterator[Path]:
    """Yield a fresh sibling of ``out`` to build in; swap it in when the block succeeds."""
    out = Path(out).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{out} exists and is not a directory")
    recover(out)
    tmp = out.parent / f"{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        pause_point("before-swap")
        # an exception in the swap (Ctrl-C while the previous results are removed) leaves in tmp
        # either the new results not swapped in or the previous ones half removed: drop it too
        swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    pause_point("after-swap")
