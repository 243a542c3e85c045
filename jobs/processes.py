"""Whether a process id still runs: the one test behind every "left by a dead run" cleanup (DIR's
staging and old dirs, Spark scratch dirs, class-sharing archives being written) and the wait for
the JVM's children. A standard-library leaf beside ``jobs/errors.py``, so every room may use it."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Still running. A zombie counts as gone (it writes nothing more: Linux's ``/proc/<pid>/stat``
    says ``Z``); a process of another user (``kill`` refused) as running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc (or it just ended): what kill said
        return True
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"
