"""Read kafka-dump-log.sh --deep-iteration output back into dicts, to compare with our parser."""

from __future__ import annotations

import re
from pathlib import Path

_FIELD = re.compile(r"(\w+): (\S+)")


def _fields(text: str) -> dict[str, str]:
    return dict(_FIELD.findall(text))


def parse_dump(path: Path) -> dict[str, dict]:
    """parse_dump_text of a saved dump file."""
    return parse_dump_text(path.read_text(encoding="utf-8", errors="replace"))


def parse_dump_text(text: str) -> dict[str, dict]:
    """{dumped file path: {"batches": [...], "records": [...], "trailing": int}} from one dump text."""
    out: dict[str, dict] = {}
    cur = None
    for line in text.splitlines():
        if line.startswith("Dumping "):
            cur = out.setdefault(line[len("Dumping ") :].strip(), {"batches": [], "records": [], "trailing": 0})
        elif cur is None:
            continue
        elif line.startswith("baseOffset: ") or line.startswith("offset: "):
            cur["batches"].append(_fields(line))
        elif line.startswith("| offset: "):
            cur["records"].append(_fields(line[2:].split(" headerKeys: ")[0]))
        elif line.startswith("Found ") and "invalid bytes" in line:
            cur["trailing"] = int(line.split()[1])
    return out
