"""The small-file parsers as the CLI and ingest reach them: through ``parsers.files.KINDS``."""

from __future__ import annotations

from collections.abc import Callable

from parsers import files
from parsers.common import Parsed


def _small_parser(kind: str) -> Callable[[bytes, str], Parsed]:
    """``files.KINDS``' parser for one small-file kind, called the way ``files.parse_path`` calls it."""
    module = files.module_for(kind)
    if module.__name__.endswith("offset_checkpoint"):
        return lambda data, path: module.parse(data, path, file_kind=kind)
    return module.parse


# every kind that is not a record-batch file (segment, KRaft/bootstrap snapshot)
PARSERS: dict[str, Callable[[bytes, str], Parsed]] = {
    kind: _small_parser(kind) for kind in files.KINDS if kind not in files.SEGMENT_KINDS
}
