"""Snapshot findings.json of every fixture and demo scenario, to prove a refactor changes nothing.

One Python process, one Spark session: the real-cluster scenarios (with their ledger), each found
dataset and the demo scenarios of ``sample_data.scenarios`` (generated once into DATA, reused on
later runs so both snapshots read the same bytes). Each findings.json is written to SNAP/<name>.json
without ``generated_at``; compare two snapshots with ``diff -r``.

Usage: python benchmarks/findings_snapshot.py SNAP DATA [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures"


def inputs(data: Path) -> list[tuple[str, Path, Path | None]]:
    """(name, input dir, ledger) for every fixture and demo scenario."""
    from sample_data.scenarios import SCENARIOS, generate

    out = []
    for d in sorted((FIXTURES / "real-cluster").iterdir()):
        if d.is_dir():
            led = d / "ledger.jsonl"
            out.append((f"real-{d.name}", d, led if led.exists() else None))
    for d in sorted((FIXTURES / "found").iterdir()):
        if d.is_dir():
            out.append((f"found-{d.name}", d, None))
    for name in SCENARIOS:
        d = data / name
        if not (d / "ground_truth.json").exists():
            generate(name, data)
        out.append((f"demo-{name}", d, d / "ledger.jsonl"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snap", type=Path)
    ap.add_argument("data", type=Path)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from analyzer.analyze import build
    from jobs.session.start import get_session

    args.snap.mkdir(parents=True, exist_ok=True)
    args.data.mkdir(parents=True, exist_ok=True)
    spark = get_session("local[2]")
    with tempfile.TemporaryDirectory(prefix="kf-snap-") as tmp:
        for name, src, led in inputs(args.data):
            if args.only and name not in args.only:
                continue
            t0 = time.monotonic()
            doc = build([src], Path(tmp) / name, ledger=led, spark=spark, progress=False, register_catalog=False)
            doc.pop("generated_at", None)
            (args.snap / f"{name}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
            print(f"{name}: {len(doc['findings'])} findings, {time.monotonic() - t0:.1f}s", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
