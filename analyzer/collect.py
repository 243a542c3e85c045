"""``kafka-forensics collect``: the script an operator runs on each broker host to gather what
``analyze`` reads, with a chain of custody.

Broker hosts rarely have Python 3.11 or a JDK to spare, and must not get a package installed in
the middle of an incident, so the collector is a POSIX shell script (``collect.sh``, dash-clean)
needing only find, ln, cp, tar, gzip and sha256sum or shasum. It stages every log dir by hard
link or copy before archiving (a live broker's retention cannot tear the archive), redacts the
secrets of the properties it archives, and writes a SHA-256 manifest of every file and of the
archive beside it. What it archives is one of ``analyze``'s inputs as is.

A focused collection (``--topic``, ``--partition``, ``--since``, ``--no-consumer-offsets``) takes
only what one incident needs from a broker holding terabytes. The options given here are written
into the script, so every broker runs the same focus (options on its own command line add to them).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from jobs.errors import InputError

# the script's line that options given to ``collect`` replace (with a ``set --`` of them)
BAKED_MARKER = "# (options written in by `kafka-forensics collect --topic ... --out FILE` come here, before the command line's)\n"

# the --since forms the script reads (its ``since_ms``): a UTC time, epoch milliseconds, or before now
SINCE_FORMS = "2024-05-01T12:00:00Z in UTC, 2024-05-01, epoch milliseconds, or 90m, 6h, 2d before now"
_SINCE_RE = re.compile(r"\d{12,}|\d+[smhd]|\d{4}-(\d\d)-(\d\d)([T ](\d\d):(\d\d)(:(\d\d)(\.\d+)?)?)?Z?")


class CollectError(InputError, ValueError):
    """An option the script would refuse: one line, exit 2, before any script is written."""


@dataclass(frozen=True)
class CollectFocus:
    """What the collector takes from each log dir: partitions of topics matching ``topics`` (shell
    globs, all when empty) and numbered ``partitions`` (all when empty); ``since``: leave out
    the segments whose newest batch is older; ``consumer_offsets``: take ``__consumer_offsets``."""

    topics: tuple[str, ...] = ()
    partitions: tuple[int, ...] = ()
    since: str | None = None
    consumer_offsets: bool = True

    def args(self) -> list[str]:
        """The script's options for this focus (checked as the script checks them)."""
        out: list[str] = []
        for glob in self.topics:
            if not glob:
                raise CollectError("--topic: an empty glob")
            out += ["--topic", glob]
        for n in self.partitions:
            if n < 0:
                raise CollectError(f"--partition {n}: not a partition number")
            out += ["--partition", str(n)]
        if self.since is not None:
            m = _SINCE_RE.fullmatch(self.since)
            if m is None or (m.group(1) and not (1 <= int(m.group(1)) <= 12 and 1 <= int(m.group(2)) <= 31)):
                raise CollectError(f"--since {self.since}: not a time ({SINCE_FORMS})")
            out += ["--since", self.since]
        if not self.consumer_offsets:
            out.append("--no-consumer-offsets")
        return out


def script(focus: CollectFocus | None = None) -> str:
    """The collector script's text (shipped as package data beside this module), with ``focus``'s
    options written in."""
    text = files(__package__).joinpath("collect.sh").read_text(encoding="utf-8")
    args = focus.args() if focus is not None else []
    if not args:
        return text
    return text.replace(BAKED_MARKER, BAKED_MARKER + f'set -- {shlex.join(args)} "$@"\n', 1)


def write(out: Path, focus: CollectFocus | None = None) -> Path:
    """Write the script to ``out``, executable (rwxr-xr-x: it holds no secret); returns ``out``."""
    text = script(focus)
    out.write_text(text, encoding="utf-8")
    os.chmod(out, 0o755)
    return out
