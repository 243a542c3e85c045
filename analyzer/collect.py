"""``kafka-forensics collect``: the script an operator runs on each broker host to gather what
``analyze`` reads, with a chain of custody.

Broker hosts rarely have Python 3.11 or a JDK to spare, and must not get a package installed in
the middle of an incident, so the collector is a POSIX shell script (``collect.sh``, dash-clean)
needing only find, ln, cp, tar, gzip and sha256sum or shasum. It stages every log dir by hard
link or copy before archiving (a live broker's retention cannot tear the archive), redacts the
secrets of the properties it archives, and writes a SHA-256 manifest of every file and of the
archive beside it. What it archives is one of ``analyze``'s inputs as is.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path


def script() -> str:
    """The collector script's text (shipped as package data beside this module)."""
    return files(__package__).joinpath("collect.sh").read_text(encoding="utf-8")


def write(out: Path) -> Path:
    """Write the script to ``out``, executable (rwxr-xr-x: it holds no secret); returns ``out``."""
    out.write_text(script(), encoding="utf-8")
    os.chmod(out, 0o755)
    return out
