"""The small-file parsers as the CLI and ingest reach them: through ``parsers.files.KINDS``."""

from __future__ import annotations

from collections.abc import Callable

from parsers import files
from parsers.common import Parsed

# every kind that is not a record-batch file (segment, KRaft/bootstrap snapshot)
PARSERS: dict[str, Callable[[bytes, str], Parsed]] = {
    kind: files.small_parser(kind) for kind in files.KINDS if kind not in files.SEGMENT_KINDS
}
