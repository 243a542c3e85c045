"""The ``kafka-forensics`` command line (Typer). Commands stay thin: they hand off to parsers/,
jobs/ and the report, and turn bad usage or unusable input into exit 2 with one line on stderr."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from . import dump as dump_mod

app = typer.Typer(
    name="kafka-forensics",
    help="Offline forensic analyzer for Apache Kafka log directories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def fail(message: str) -> typer.Exit:
    """One clear line on stderr, exit 2 (the contract's 'bad usage or unusable input')."""
    print(f"kafka-forensics: {message}", file=sys.stderr)
    return typer.Exit(2)


@app.command()
def dump(
    file: Annotated[Path, typer.Argument(help="Any Kafka file: .log, .index, .timeindex, .txnindex, .snapshot, a checkpoint, leader-epoch-checkpoint, partition.metadata, meta.properties.")],
    json: Annotated[bool, typer.Option("--json", help="JSON Lines on stdout (schemas in docs/contract).")] = False,
    records: Annotated[bool, typer.Option("--records", help="Segments: decode every record, not only batch headers.")] = False,
    payloads: Annotated[bool, typer.Option("--payloads", help="With --records: include key and value bytes (may hold personal data).")] = False,
    kind: Annotated[str | None, typer.Option("--kind", help="File kind, when the name does not tell (e.g. segment, offset_index, leader_epoch).")] = None,
) -> None:
    """Decode one file, like kafka-dump-log but for every file kind and without a JVM.

    Exits 1 when the file has problems (torn tail, CRC mismatch, malformed checkpoint...).

    Example: kafka-forensics dump broker-1/orders-0/00000000000000000000.log --records --json
    """
    try:
        found = dump_mod.run(file, kind=kind, as_json=json, records=records, payloads=payloads, out=sys.stdout)
    except dump_mod.DumpError as exc:
        raise fail(str(exc)) from None
    raise typer.Exit(1 if found else 0)


@app.command()
def report(
    out: Annotated[Path, typer.Argument(help="An output directory written by analyze (findings.json, tables/).")],
    format: Annotated[str, typer.Option("--format", help="text (terminal summary), json (findings.json) or html (the report).")] = "text",
    fail_on: Annotated[str, typer.Option("--fail-on", help="Exit 1 when a finding is at or above this severity: error, warning or info.")] = "error",
) -> None:
    """Re-render the report of an analyzed directory without re-parsing (no Spark needed).

    Rewrites DIR/report.html and prints the chosen format.

    Example: kafka-forensics report out/ --format text
    """
    from .report import ReportError, run_report

    try:
        code = run_report(out, format, sys.stdout, fail_on)
    except (ReportError, ValueError) as exc:
        raise fail(str(exc)) from None
    raise typer.Exit(code)


@app.callback()
def _root() -> None:
    """Offline forensic analyzer for Apache Kafka log directories."""


def main() -> None:
    try:
        app()
    except BrokenPipeError:
        # stdout closed early (e.g. piped into head): not an error; silence the final flush too
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)


if __name__ == "__main__":
    main()
