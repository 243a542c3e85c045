"""``parsers.common.keep_freed_memory``: a process that parses file after file (a dump, a Spark
worker's parse tasks) reuses the memory it freed instead of having the OS fault in fresh pages
for every file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# what a parse does per file: a block of tens of MB written, then freed; page faults counted
CHILD = """
import resource, sys
from parsers.common import keep_freed_memory
took = keep_freed_memory() if sys.argv[1] == "keep" else None
block = b"x" * (40 << 20); del block  # the first one faults in whatever memory it gets
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(8):
    block = b"x" * (40 << 20)
    del block
print(took, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    return out[0], int(out[1])


def test_freed_blocks_are_reused_not_faulted_in_again():
    took, kept = _faults("keep")
    if took != "True":
        pytest.skip("not glibc's malloc: nothing to tune")
    _, default = _faults("default")
    pages = 8 * (40 << 20) // 4096
    assert default > pages // 2  # glibc maps each 40 MB block afresh
    assert kept < pages // 20
