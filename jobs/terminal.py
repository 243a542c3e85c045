"""Text from the evidence, made safe to reach a terminal: control characters shown, never sent.

Why: folder and file names, cluster ids, topic names from the metadata log, group and
transactional ids and broker log lines all come from machines that may be compromised, and a
terminal acts on the control characters in what it is sent: ESC and CSI sequences rewrite the
screen, OSC sequences set the window title, make links or (OSC 52) write the clipboard. So every
value is passed through ``escape`` where it becomes terminal text, which shows each such
character as its Python escape (``\\x1b``, ``\\x07``, ``\\x9b``, ``\\t``): the analyst sees that
the name is hostile, and the terminal receives printable text only. Our own multi-line text keeps
its line breaks (``keep``); a value's own line breaks and tabs are escaped like the rest.

Machine output is left as it is: JSON escapes control characters by its own rules. Standard
library only, so ``dump`` (which loads no pandas) and the JVM's stderr relay can use it.
"""

from __future__ import annotations

import logging
import numbers
import sys
from collections.abc import Mapping
from typing import Any

# The characters terminals act on: C0 (tab and newline included), DEL and C1 (CSI is 0x9b).
CONTROLS = "".join(map(chr, (*range(0x20), *range(0x7F, 0xA0))))


def escape(text: str, keep: str = "") -> str:
    """``text`` with every non-printable character (the ``CONTROLS``, and Unicode's invisible
    format and separator characters such as ``\\u202e`` or ``\\u2028``) written as its Python
    escape, so it is visible and inert. Printable text comes back as it is (the common case).

    ``keep``: the layout characters of a text of our own that holds values, left as they are: a
    log record with its traceback keeps its line breaks (``keep="\\n"``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else c.encode("unicode_escape").decode("ascii") for c in text)


class _Shown:
    """A log record's argument as the terminal shows it: escaped whole (its line breaks too), by
    ``%s`` and ``%r`` alike."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __str__(self) -> str:
        return escape(str(self.value))

    def __repr__(self) -> str:
        return escape(repr(self.value))


def _shown(arg: Any) -> Any:
    return arg if isinstance(arg, numbers.Number) else _Shown(arg)  # (numbers: %d and %.1f need them as they are)


class LogFormatter(logging.Formatter):
    """A formatter for log records that reach a terminal: the record's arguments (the values:
    paths, names, errors) are escaped whole, then the formatted text is escaped line by line, so
    a message or traceback of ours keeps its lines and a value cannot add one. Other handlers of
    the same record (a log file, pytest's caplog) see it as logged."""

    def format(self, record: logging.LogRecord) -> str:
        if record.args:
            args = record.args
            shown = {k: _shown(v) for k, v in args.items()} if isinstance(args, Mapping) else tuple(map(_shown, args))
            record = logging.makeLogRecord({**record.__dict__, "args": shown})
        return escape(super().format(record), keep="\n")


class LastResort(logging.StreamHandler):
    """The root logger's handler in the CLI's own process: what logging's last resort does (stderr,
    WARNING and up, only for a record that no handler on its logger's way to the root took) with
    our escaping. Why not ``logging.lastResort`` itself: a root logger without a handler is one
    that the first module-level ``logging.error()`` (py4j's, when the JVM dies) gives a
    ``basicConfig`` handler, which then prints each later warning of ours a second time, unescaped."""

    def __init__(self) -> None:
        super().__init__()
        self.setLevel(logging.WARNING)
        self.setFormatter(LogFormatter())

    @property
    def stream(self):  # the stderr of the moment, as logging's last resort writes to
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass

    def filter(self, record: logging.LogRecord) -> bool:
        logger = logging.getLogger(record.name)
        while logger.parent is not None and logger.propagate:
            if logger.handlers:
                return False
            logger = logger.parent
        return logger.parent is None and bool(super().filter(record))
