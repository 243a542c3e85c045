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
import errno
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from jobs.errors import InputError
from jobs.processes import pid_alive

log = logging.getLogger(__name__)

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def pause_point(name: str) -> None:
    """Test-only: when ``KF_TEST_PAUSE_AT`` names this point, say so on stderr and sleep (to be killed)."""
    if os.environ.get("KF_TEST_PAUSE_AT") == name:
        print(f"kf-test-pause: {name}", file=sys.stderr, flush=True)
        time.sleep(600)


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
        if pid_alive(pid) and pid != os.getpid():
            continue
        if not out.exists():
            os.rename(old, out)
            log.warning("%s: restored the previous results left by an interrupted run", out)
        else:
            shutil.rmtree(old, ignore_errors=True)
    for tmp, pid in _siblings(out, "tmp"):
        if not pid_alive(pid):
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


class OutputError(InputError, ValueError):
    """DIR cannot be written: its filesystem is full or read-only, a file is in the way... The
    CLI prints it as one line and exits 2 (what the run needed is not there, like bad input)."""


# errors of a write that say the output has no room or no way in (errno -> how to say it)
_NO_ROOM = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
            errno.EFBIG: "a file grew over the file size limit", errno.EROFS: "the filesystem is read-only"}
_NO_WAY_IN = {errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
              errno.ENOTDIR: "a path component is a file, not a directory", errno.EEXIST: "a file is in the way"}


def no_room(exc: BaseException) -> int | None:
    """The errno (a key of ``_NO_ROOM``) when ``exc`` says DIR cannot be written, else None. An
    OSError of ours carries it; a task's error comes back from Spark as text (a Python worker's
    ``OSError: [Errno 28] ...`` or the JVM's ``IOException: No space left on device``), so the
    C library's words for the same errnos are looked for in it."""
    if isinstance(exc, OSError):
        return exc.errno if exc.errno in _NO_ROOM else None
    said = error_text(exc)
    return None if said is None else next((code for code in _NO_ROOM if os.strerror(code) in said), None)


def error_text(exc: BaseException) -> str | None:
    """What ``exc`` says (a py4j error asks its JVM for the text; a dead JVM cannot answer: None).
    Interrupts and exits are not errors to read."""
    if not isinstance(exc, Exception):
        return None
    try:
        return str(exc)
    except Exception:
        return None


def _cannot_write(out: Path, why: str, need: Callable[[], int] | None, existed: bool) -> OutputError:
    needed = f"; it needs about {need()} bytes free there (the size of the input)" if need is not None else ""
    kept = f"the previous {out} is unchanged" if existed else "nothing was written"
    return OutputError(f"cannot write {out}: {why}{needed}; {kept}")


def _prepare(out: Path, need: Callable[[], int] | None, existed: bool) -> Path:
    """Make the staging sibling of ``out``; a parent that cannot hold it is an ``OutputError``."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists() and not out.is_dir():
            raise OutputError(f"{out} exists and is not a directory")
        recover(out)
        tmp = out.parent / f"{out.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    except OSError as exc:
        why = _NO_ROOM.get(exc.errno) or _NO_WAY_IN.get(exc.errno)
        if why is None:
            raise
        if exc.filename and os.fspath(exc.filename) != os.fspath(out):
            why = f"{why} ({exc.filename})"
        raise _cannot_write(out, why, need, existed) from None
    return tmp


def _drop_skeleton(out: Path) -> None:
    """Remove ``out`` if it holds folders and no file: a run that failed before its swap leaves no
    DIR behind. (The catalog declares each table at its final location, and Hive makes the
    location's folder when it is missing: without this, a failed first run left DIR as a tree of
    empty table folders.) A file in it means someone else wrote there: left alone."""
    try:
        if not out.is_dir() or out.is_symlink() or any(f for _, _, files in os.walk(out) for f in files):
            return
    except OSError:
        return
    shutil.rmtree(out, ignore_errors=True)


@contextlib.contextmanager
def staged_output(out: Path, need: Callable[[], int] | None = None) -> Iterator[Path]:
    """Yield a fresh sibling of ``out`` to build in; swap it in when the block succeeds.

    A full or unwritable filesystem (when the sibling is made, or any time in the block: see
    ``no_room``) ends as one ``OutputError`` naming DIR and the bytes ``need()`` estimates it
    needs, with the sibling removed and the previous DIR as it was."""
    out = Path(out).absolute()
    existed = out.is_dir()
    tmp = _prepare(out, need, existed)
    try:
        yield tmp
        pause_point("before-swap")
        # an exception in the swap (Ctrl-C while the previous results are removed) leaves in tmp
        # either the new results not swapped in or the previous ones half removed: drop it too
        swap_in(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if not existed:
            _drop_skeleton(out)
        if (code := no_room(exc)) is not None:
            raise _cannot_write(out, _NO_ROOM[code], need, existed) from None
        raise
    pause_point("after-swap")
