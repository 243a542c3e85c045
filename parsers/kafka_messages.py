"""A schema-driven reader of Kafka's generated-message serialization (the ``*Data.read`` methods).

Kafka describes its internal records (``__cluster_metadata`` records, ``__consumer_offsets`` keys and
values, ``__transaction_state``, KRaft control records) in JSON message definitions; a code generator
turns them into Java classes whose ``read`` and ``*JsonConverter.write`` we reproduce here, so one
small interpreter decodes every such record from a spec written in Python.

Wire rules (MessageDataGenerator):
  * fixed-width big-endian ints, ``bool`` (one byte, non-zero is true), ``float64``, ``uuid`` (16 bytes);
  * non-flexible versions: string = int16 length, bytes/records/arrays = int32 length, -1 is null;
  * flexible versions: the same as unsigned varint ``length + 1`` ("compact"), 0 is null, and every
    struct ends with a tagged-field section: uvarint count, then (uvarint tag, uvarint size, bytes);
  * a field outside its ``versions`` is not on the wire and takes its default; a field in its
    ``taggedVersions`` is read from the tagged section, never inline.

JSON rules (JsonConverterGenerator.write), so our dicts equal what ``kafka-dump-log`` prints:
  * fields absent from the version are omitted; tagged fields are printed only when not default;
  * unknown tagged fields are not printed (so we drop them);
  * uuid as ``Uuid.toString()`` (base64url, no padding), bytes as Jackson's BinaryNode (base64 with
    padding). ``records`` fields are printed as base64 of their bytes (Kafka prints ``""`` or a size:
    neither is evidence).

Bad input raises exactly one exception type, :class:`MessageError`, carrying the byte position;
lengths are checked against the buffer before anything is allocated.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["F", "Message", "MessageError", "decode", "parse_versions", "uuid_str", "to_json", "read_uvarint"]

NO_VERSIONS = (1, 0)  # an empty range
MAX_VERSION = 0x7FFF
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


class MessageError(ValueError):
    """Malformed or truncated message bytes; ``position`` is the byte where reading failed."""

    def __init__(self, message: str, position: int):
        super().__init__(f"{message} (at byte {position})")
        self.reason = message
        self.position = position


_UNSET: Any = object()


@dataclass(frozen=True, eq=False)
class F:
    """One field of a message spec, named and typed as in Kafka's JSON definitions.

    ``nullable``/``tagged``/``flexible`` are version strings like ``versions`` ("N", "N+", "N-M",
    "none"); ``flexible`` overrides the message's flexible versions for this field only (Kafka's
    per-field ``flexibleVersions``). ``default`` of ``None`` means null; leave it unset for Kafka's
    type default (0, false, "", zero uuid, empty array).
    """

    name: str
    type: str
    versions: str = "0+"
    nullable: str | None = None
    tagged: str | None = None
    tag: int | None = None
    default: Any = _UNSET
    fields: list[F] | None = None
    flexible: str | None = None

    @property
    def key(self) -> str:
        """The JSON name: Kafka's camelCaseName (first letter lower-cased)."""
        return self.name[:1].lower() + self.name[1:]


@dataclass(eq=False)
class Message:
    """A message spec: name, flexible versions, fields, optionally the valid versions."""

    name: str
    flexible: str = "none"
    fields: list[F] = field(default_factory=list)
    valid: str | None = None
    _plans: dict[int, _Plan] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._valid = parse_versions(self.valid) if self.valid is not None else (0, MAX_VERSION)

    def plan(self, version: int) -> _Plan:
        p = self._plans.get(version)
        if p is None:
            p = _compile(self.fields, version, parse_versions(self.flexible))
            self._plans[version] = p
        return p

    def supports(self, version: int) -> bool:
        return self._valid[0] <= version <= self._valid[1]


def parse_versions(spec: str | None) -> tuple[int, int]:
    """Version strings ("3", "3+", "0-2", "none") -> an inclusive (low, high) range; "none"/None -> empty."""
    if spec is None:
        return NO_VERSIONS
    s = str(spec).strip()
    if s == "none" or not s:
        return NO_VERSIONS
    if s.endswith("+"):
        return int(s[:-1]), MAX_VERSION
    if "-" in s:
        lo, hi = s.split("-", 1)
        return int(lo), int(hi)
    return int(s), int(s)


def _in(v: int, r: tuple[int, int]) -> bool:
    return r[0] <= v <= r[1]


def uuid_str(raw: bytes) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def to_json(data: Any) -> str:
    """Compact JSON like Jackson's ``JsonNode.toString()`` (no spaces, non-ASCII kept)."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------- low-level readers
# Every reader is ``r(buf, pos, n) -> (value, new_pos)`` with ``n = len(buf)``.

Reader = Callable[[Any, int, int], tuple[Any, int]]


def read_uvarint(buf, pos: int, n: int) -> tuple[int, int]:
    """ByteUtils.readUnsignedVarint: at most 5 bytes, the result wraps to 32 bits like a Java int."""
    value = 0
    shift = 0
    while True:
        if pos >= n:
            raise MessageError("truncated varint", pos)
        b = buf[pos]
        pos += 1
        if not b & 0x80:
            return (value | (b << shift)) & 0xFFFFFFFF, pos
        value |= (b & 0x7F) << shift
        shift += 7
        if shift > 28:
            raise MessageError("varint is too long", pos)


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v & 0x80000000 else v


def _fixed(fmt: str, convert: Callable[[Any], Any] | None = None) -> Reader:
    st = struct.Struct(fmt)
    size = st.size
    unpack = st.unpack_from

    if convert is None:

        def r(buf, pos, n):
            if pos + size > n:
                raise MessageError(f"truncated {fmt}", pos)
            return unpack(buf, pos)[0], pos + size

    else:

        def r(buf, pos, n):
            if pos + size > n:
                raise MessageError(f"truncated {fmt}", pos)
            return convert(unpack(buf, pos)[0]), pos + size

    return r


def _read_uuid(buf, pos, n):
    if pos + 16 > n:
        raise MessageError("truncated uuid", pos)
    return uuid_str(bytes(buf[pos : pos + 16])), pos + 16


_PRIMITIVES: dict[str, Reader] = {
    "int8": _fixed(">b"),
    "int16": _fixed(">h"),
    "int32": _fixed(">i"),
    "int64": _fixed(">q"),
    "uint16": _fixed(">H"),
    "uint32": _fixed(">I"),
    "float64": _fixed(">d"),
    "bool": _fixed(">b", lambda b: b != 0),
    "uuid": _read_uuid,
}
_VARIABLE = ("string", "bytes", "records")
_TYPE_DEFAULTS: dict[str, Any] = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0, "uint32": 0,
    "float64": 0.0, "bool": False, "uuid": ZERO_UUID, "string": "", "bytes": "", "records": "",
}  # fmt: skip
_I16 = _PRIMITIVES["int16"]
_I32 = _PRIMITIVES["int32"]


def _length_reader(kind: str, flexible: bool) -> Reader:
    """The length prefix: compact uvarint-1 in flexible versions, else int16 (strings) / int32."""
    if flexible:

        def r(buf, pos, n):
            v, pos = read_uvarint(buf, pos, n)
            return _s32(v - 1), pos

        return r
    return _I16 if kind == "string" else _I32


def _variable(kind: str, name: str, flexible: bool, nullable: bool) -> Reader:
    """string / bytes / records, null-checked and bounded like the generated code."""
    read_len = _length_reader(kind, flexible)

    def r(buf, pos, n):
        start = pos
        length, pos = read_len(buf, pos, n)
        if length < 0:
            if nullable:
                return None, pos
            raise MessageError(f"non-nullable field {name} was serialized as null", start)
        if kind == "string" and length > 0x7FFF:
            raise MessageError(f"string field {name} had invalid length {length}", start)
        if pos + length > n:
            raise MessageError(f"{kind} field {name} of {length} bytes runs past the end", start)
        raw = bytes(buf[pos : pos + length])
        if kind == "string":
            return raw.decode("utf-8", "replace"), pos + length
        return base64.b64encode(raw).decode("ascii"), pos + length

    return r


def _array(name: str, flexible: bool, nullable: bool, element: Reader) -> Reader:
    read_len = _length_reader("array", flexible)

    def r(buf, pos, n):
        start = pos
        length, pos = read_len(buf, pos, n)
        if length < 0:
            if nullable:
                return None, pos
            raise MessageError(f"non-nullable field {name} was serialized as null", start)
        if length > n - pos:
            raise MessageError(f"array {name} of {length} elements but only {n - pos} bytes remain", start)
        out = []
        append = out.append
        for _ in range(length):
            v, pos = element(buf, pos, n)
            append(v)
        return out, pos

    return r


# ---------------------------------------------------------------- compiled per-version plans


@dataclass
class _Plan:
    """How to read one struct at one version: inline fields, tagged fields, output order."""

    inline: list[tuple[str, Reader]]
    tagged: dict[int, tuple[str, Reader]]
    bad_tags: frozenset[int]
    flexible: bool
    out: list[tuple[str, bool, Any]]  # (key, is_tagged, default) for every field present in the version
    defaults: dict[str, Any]  # defaults of tagged fields (filled when the tag is absent)


def _struct_reader(plan: _Plan) -> Reader:
    def r(buf, pos, n):
        return _read_struct(plan, buf, pos, n)

    return r


def _compile(fields: list[F], version: int, msg_flex: tuple[int, int]) -> _Plan:
    flexible = _in(version, msg_flex)
    inline: list[tuple[str, Reader]] = []
    tagged: dict[int, tuple[str, Reader]] = {}
    bad: set[int] = set()
    out: list[tuple[str, bool, Any]] = []
    defaults: dict[str, Any] = {}
    for f in fields:
        vr = parse_versions(f.versions)
        tr = parse_versions(f.tagged)
        present = _in(version, vr)
        is_tagged = present and _in(version, tr)
        if f.tag is not None and not (tr[0] > tr[1]) and not is_tagged:
            # Kafka: a known tag outside its tagged versions is "not valid for version"
            lo, hi = max(vr[0], tr[0]), min(vr[1], tr[1])
            if lo <= hi:
                bad.add(f.tag)
        if not present:
            continue
        field_flex = _in(version, parse_versions(f.flexible)) if f.flexible is not None else flexible
        reader = _field_reader(f, version, msg_flex, field_flex or is_tagged, is_tagged)
        default = _default(f, version, msg_flex)
        if is_tagged:
            if f.tag is None:
                raise ValueError(f"field {f.name} is tagged but has no tag")
            tagged[f.tag] = (f.key, reader)
            defaults[f.key] = default
        else:
            inline.append((f.key, reader))
        out.append((f.key, is_tagged, default))
    return _Plan(inline, tagged, frozenset(bad), flexible, out, defaults)


def _field_reader(f: F, version: int, msg_flex: tuple[int, int], flexible: bool, is_tagged: bool) -> Reader:
    nullable = _in(version, parse_versions(f.nullable))
    t = f.type
    if t.startswith("[]"):
        elem = t[2:]
        if f.fields is not None:
            element = _struct_reader(_compile(f.fields, version, msg_flex))
        elif elem in _PRIMITIVES:
            element = _PRIMITIVES[elem]
        elif elem in ("string", "bytes"):
            element = _variable(elem, f.name + " element", flexible, False)
        else:
            raise ValueError(f"field {f.name}: unknown array element type {elem!r}")
        return _array(f.name, flexible, nullable, element)
    if f.fields is not None:
        inner = _struct_reader(_compile(f.fields, version, msg_flex))
        if not nullable:
            return inner

        def nullable_struct(buf, pos, n):
            if is_tagged:
                marker, p = read_uvarint(buf, pos, n)
                if _s32(marker) <= 0:
                    return None, p
            else:
                marker, p = _PRIMITIVES["int8"](buf, pos, n)
                if marker < 0:
                    return None, p
            return inner(buf, p, n)

        return nullable_struct
    if t in _PRIMITIVES:
        return _PRIMITIVES[t]
    if t in _VARIABLE:
        return _variable(t, f.name, flexible, nullable)
    raise ValueError(f"field {f.name}: unknown type {t!r}")


def _default(f: F, version: int, msg_flex: tuple[int, int]) -> Any:
    if f.default is not _UNSET:
        return list(f.default) if isinstance(f.default, list) else f.default
    if f.type.startswith("[]"):
        return []
    if f.fields is not None:
        plan = _compile(f.fields, version, msg_flex)
        return {k: d for k, tagged, d in plan.out if not tagged}
    return _TYPE_DEFAULTS[f.type]


def _read_struct(plan: _Plan, buf, pos: int, n: int) -> tuple[dict, int]:
    values: dict[str, Any] = {}
    for key, reader in plan.inline:
        values[key], pos = reader(buf, pos, n)
    if plan.flexible:
        count, pos = read_uvarint(buf, pos, n)
        for _ in range(_s32(count)):
            tag_pos = pos
            tag, pos = read_uvarint(buf, pos, n)
            size, pos = read_uvarint(buf, pos, n)
            known = plan.tagged.get(tag)
            if known is not None:
                # Kafka reads a known tag by its type and does not check ``size``
                values[known[0]], pos = known[1](buf, pos, n)
            elif tag in plan.bad_tags:
                raise MessageError(f"tag {tag} is not valid for this version", tag_pos)
            else:
                size = _s32(size)
                if size < 0 or pos + size > n:
                    raise MessageError(f"unknown tagged field {tag} of {size} bytes runs past the end", tag_pos)
                pos += size
    out: dict[str, Any] = {}
    for key, is_tagged, default in plan.out:
        if is_tagged:
            v = values.get(key, default)
            if v != default:
                out[key] = v
        else:
            out[key] = values[key]
    return out, pos


def decode(spec: Message, buf, version: int, pos: int = 0) -> tuple[dict, int]:
    """Read ``spec`` at ``version`` from ``buf`` starting at ``pos``.

    Returns the decoded dict (Kafka's JSON names and values) and the position after the message.
    Raises :class:`MessageError` on any malformed or truncated input, or a version the spec lacks.
    """
    plan = spec._plans.get(version)
    if plan is None:
        if not 0 <= version <= MAX_VERSION or not spec.supports(version):
            raise MessageError(f"{spec.name} has no version {version}", pos)
        plan = spec.plan(version)
    n = len(buf)
    if pos < 0 or pos > n:
        raise MessageError("start position outside the buffer", pos)
    try:
        return _read_struct(plan, buf, pos, n)
    except MessageError:
        raise
    except (IndexError, struct.error, ValueError, OverflowError, MemoryError) as e:  # defensive: never leak
        raise MessageError(f"undecodable {spec.name}: {e}", pos) from e
