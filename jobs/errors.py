"""The one base class of what the user can fix: bad usage or unusable input.

The CLI turns an ``InputError`` into one line on stderr and exit 2 (the contract's "bad usage or
unusable input"); any other exception escaping a command is a bug of ours, said as an internal
error with exit 3. Why a class of our own rather than ``ValueError``: Python, pandas, Arrow and
Spark raise ``ValueError`` for their callers' mistakes, which inside a job are ours, so catching it
at a command's edge blamed the user for a bug. A module that refuses what the user gave (an
argument, an input path, an archive, an output DIR, an environment variable) raises a subclass of
this, named for what it refuses; those that were ``ValueError``s stay ones too, for the callers
that catch them inside the analysis. A leaf module, so ``dump`` (no pandas, no Spark) can import it.
"""

from __future__ import annotations


class InputError(Exception):
    """Bad usage or unusable input: the message is the one line the user reads (exit 2)."""


def error_text(exc: BaseException) -> str | None:
    """What ``exc`` says (a py4j error asks its JVM for the text; a dead JVM cannot answer: None).
    Interrupts and exits are not errors to read."""
    if not isinstance(exc, Exception):
        return None
    try:
        return str(exc)
    except Exception:
        return None
