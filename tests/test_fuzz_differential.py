"""Mutated v2 segments, read by Kafka 3.6.2's kafka-dump-log and by our parser: they must agree.

Wherever Kafka reads a batch as valid (``isvalid: true`` at a position), we read the same batch at
the same position with the same offsets (save one deliberate difference: a negative
lastOffsetDelta, which Kafka adds to the base offset, we flag as ``invalid_batch`` at that position
and keep last_offset = base_offset). Where Kafka stops before the end of the file (trailing
invalid bytes, or an exception that ends its dump), we report a problem at or before that position.
The mutants are the fuzzer's (fuzz/fuzz_parsers.py) applied to the golden v2 segments and to the
writer's segments of every codec, deterministically; KF_DIFF_MUTANTS sets how many (CI: 200),
KF_DIFF_SEED another set.
"""

from __future__ import annotations

import os
import random
import sys

from conftest import GOLDEN, REPO
from kafka_dump_log import parse_dump_text

from parsers import segment

sys.path.insert(0, str(REPO / "fuzz"))
import fuzz_parsers  # noqa: E402

MUTANTS = int(os.environ.get("KF_DIFF_MUTANTS", "200"))
SEED = int(os.environ.get("KF_DIFF_SEED", "20261122"))


def _seeds() -> list[bytes]:
    golden = [p.read_bytes() for p in sorted((GOLDEN / "logdir" / "golden-topic-0").glob("*.log"))]
    golden += [p.read_bytes() for p in sorted((GOLDEN / "corrupt").glob("*/*.log")) if "legacy" not in p.parent.name]
    writer = [s for s in fuzz_parsers.writer_seeds()["segment"] if s[16] == 2]  # v2 only
    return [s for s in golden + writer if s]


def _mutants(n: int) -> list[bytes]:
    rng = random.Random(SEED)
    seeds = _seeds()
    return [fuzz_parsers.mutate(rng, rng.choice(seeds), seeds, "segment", max_size=1 << 16) for _ in range(n)]


def _disagreements(path: str, data: bytes, kafka: dict, error: str | None) -> list[str]:
    got = segment.parse(data, path, records=True)
    ours = {r["position"]: r for r in got.table.select(["position", "base_offset", "last_offset", "magic"]).to_pylist()}
    problems = got.problems.column("position").to_pylist()
    # a negative lastOffsetDelta: Kafka prints base + delta, we keep last >= base and flag the header
    flagged = {
        r["position"] for r in got.problems.to_pylist() if r["kind"] == "invalid_batch" and "lastOffsetDelta -" in r["detail"]
    }
    out = []
    for b in kafka["batches"]:
        if b.get("isvalid") != "true" or b.get("magic") != "2":
            continue
        pos = int(b["position"])
        mine = ours.get(pos)
        kafka_last = int(b["lastOffset"]) if pos not in flagged else mine and mine["last_offset"]
        if mine is None or (mine["base_offset"], mine["last_offset"]) != (int(b["baseOffset"]), kafka_last):
            out.append(f"Kafka reads a valid batch at {pos} (offsets {b['baseOffset']}..{b['lastOffset']}); we read {mine}")
    stop = None
    if error is not None:  # the dump ended inside or right after the last batch it printed
        last = kafka["batches"][-1] if kafka["batches"] else None
        stop = int(last["position"]) + int(last["size"]) if last else 0
    elif kafka["trailing"]:
        stop = len(data) - kafka["trailing"]
    if stop is not None and not any(p <= stop for p in problems):
        why = error or f"{kafka['trailing']} invalid trailing bytes"
        out.append(f"Kafka stops at {stop} ({why}); our problems are at {problems}")
    return out


def test_mutated_segments_read_like_kafka(tmp_path, dump_logs):
    mutants = _mutants(MUTANTS)
    paths = []
    for i, data in enumerate(mutants):
        p = tmp_path / f"{i:020d}.log"
        p.write_bytes(data)
        paths.append(p)
    texts, errors = dump_logs(paths)
    bad = []
    stopped = 0
    for p, data in zip(paths, mutants):
        kafka = parse_dump_text(texts.get(str(p), f"Dumping {p}\n")).get(str(p), {"batches": [], "records": [], "trailing": 0})
        stopped += bool(errors.get(str(p)) or kafka["trailing"])
        bad += [f"{p.name}: {d}" for d in _disagreements(str(p), data, kafka, errors.get(str(p)))]
    print(f"\n{len(mutants)} mutants tried in one kafka-dump-log JVM; Kafka stopped early on {stopped}; {len(bad)} disagreements")
    assert len(texts) == len(mutants)
    assert not bad, "\n".join(bad[:20])
