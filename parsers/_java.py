"""The few Java library behaviours the text-file parsers must reproduce exactly.

Kafka reads its text files with ``Integer.parseInt`` / ``Long.parseLong``, splits lines the
way ``BufferedReader.readLine`` does, and decodes ids with ``Uuid.fromString`` (URL-safe
base64 of 16 bytes). Python's ``int()``, ``str.splitlines()`` and ``base64`` are all more
lenient (underscores, surrounding blanks, Unicode line separators, silently skipped
characters), so a parser built on them would accept files Kafka rejects. These helpers
accept exactly what Java accepts, and fail with Java's messages.
"""

from __future__ import annotations

import re
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

# Integer.parseInt / Long.parseLong: optional sign, then at least one digit, nothing else.
# (Java also takes non-ASCII decimal digits; Kafka never writes them, so we do not.)
_JAVA_INTEGER_RE = re.compile(r"[+-]?[0-9]+\Z")
# BufferedReader.readLine: a line ends at \n, \r or \r\n, nothing else.
_JAVA_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# java.util.regex \s (without UNICODE_CHARACTER_CLASS).
JAVA_WHITESPACE = " \t\n\x0b\f\r"


class JavaNumberFormatError(ValueError):
    """What ``NumberFormatException`` would have said."""


def parse_int(text: str | None, bits: int = 32) -> int:
    """``Integer.parseInt`` (bits=32) or ``Long.parseLong`` (bits=64), with Java's message."""
    if text is None:
        raise JavaNumberFormatError("Cannot parse null string: null")
    if _JAVA_INTEGER_RE.match(text) is None:
        raise JavaNumberFormatError(f'For input string: "{text}"')
    value = int(text)
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise JavaNumberFormatError(f'For input string: "{text}"')
    return value


def parse_integers(strings: pa.Array, bits: int) -> pa.Array:
    """Vectorised ``parse_int``: an int64 array, null wherever Java would throw.

    Works on a whole column at once (Arrow compute), so a checkpoint with 100 000 partitions
    costs no Python loop. Range is checked on the digit strings, before any cast, so an
    overflowing value becomes null instead of an Arrow error.
    """
    strings = pc.cast(strings, pa.string())
    well_formed = pc.fill_null(pc.match_substring_regex(strings, r"^[+-]?[0-9]+$"), False)
    negative = pc.fill_null(pc.starts_with(strings, "-"), False)
    digits = pc.replace_substring_regex(strings, r"^[+-]?0*", "")
    n_digits = pc.binary_length(digits)
    limit = str((1 << (bits - 1)) - 1)
    neg_limit = str(1 << (bits - 1))
    bound = pc.if_else(negative, pa.scalar(neg_limit), pa.scalar(limit))
    fits = pc.or_(
        pc.less(n_digits, len(limit)),
        pc.and_(pc.equal(n_digits, len(limit)), pc.less_equal(digits, bound)),
    )
    valid = pc.and_(well_formed, pc.fill_null(fits, False))
    unsigned = pc.replace_substring_regex(strings, r"^\+", "")
    return pc.cast(pc.if_else(valid, unsigned, pa.scalar(None, pa.string())), pa.int64())


def split_lines(text: str) -> list[str]:
    """``BufferedReader.readLine`` until null: no empty line after a final terminator."""
    if not text:
        return []
    lines = _JAVA_LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def line_of_byte(raw: bytes, byte_position: int) -> int:
    """1-based line number (readLine's terminators) of the byte at ``byte_position``."""
    head = raw[:byte_position]
    return len(re.findall(rb"\r\n|\r|\n", head)) + 1


def decode_utf8(raw: bytes) -> tuple[str, tuple[int, str] | None]:
    """Decode as ``Files.newBufferedReader(path, UTF_8)`` would, but never fail.

    Java throws ``MalformedInputException`` at the first bad byte (Kafka then fails the whole
    read). We decode with replacement characters so the lines around it stay readable, and
    return (line, detail) of the first bad byte for the caller's problem row.
    """
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1].hex()
        detail = (
            f"MalformedInputException: invalid UTF-8 byte 0x{bad} at byte {exc.start}"
            " (Kafka cannot read this file)"
        )
        return raw.decode("utf-8", errors="replace"), (line_of_byte(raw, exc.start), detail)


_BASE64URL_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def base64url_decode(text: str) -> bytes:
    """``Base64.getUrlDecoder().decode(String)`` with Java's error messages.

    Padding is optional but must be right when present; any other character is
    "Illegal base64 character <hex>" (Java prints the char code in hex, e.g. 21 for '!').
    """
    body = text
    pad = len(body) - len(body.rstrip("="))
    body = body[: len(body) - pad] if pad else body
    for ch in body:
        if ch not in _BASE64URL_ALPHABET:
            raise ValueError(f"Illegal base64 character {ord(ch) & 0xFF:x}")
    if len(body) % 4 == 1:
        raise ValueError("Last unit does not have enough valid bits")
    if pad and (len(body) + pad) % 4 != 0:
        raise ValueError("Input byte array has wrong 4-byte ending unit")
    if pad > 2:
        raise ValueError("Input byte array has incorrect ending byte")
    bits = 0
    n_bits = 0
    out = bytearray()
    for ch in body:
        bits = (bits << 6) | _B64_VALUE[ch]
        n_bits += 6
        if n_bits >= 8:
            n_bits -= 8
            out.append((bits >> n_bits) & 0xFF)
    return bytes(out)


_B64_VALUE = {
    ch: i
    for i, ch in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
}


def uuid_from_string(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``: URL-safe base64 (22 chars, unpadded) of exactly 16 bytes."""
    if len(text) > 24:
        raise ValueError(
            f"Input string with prefix `{text[:24]}` is too long to be decoded as a base64 UUID"
        )
    raw = base64url_decode(text)
    if len(raw) != 16:
        raise ValueError(
            f"Input string `{text}` decoded as {len(raw)} bytes, which is not equal to the"
            " expected 16 bytes of a base64-encoded UUID"
        )
    return uuid.UUID(bytes=raw)


def first_index(mask: np.ndarray) -> int | None:
    """Index of the first True in a boolean array, or None."""
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else None
