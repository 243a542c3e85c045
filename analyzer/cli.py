"""The ``kafka-forensics`` command line (Typer). Commands stay thin: they hand off to parsers/,
jobs/ and the report, and turn bad usage or unusable input into exit 2 with one line on stderr."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
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


def fail(message: str, code: int = 2) -> typer.Exit:
    """One clear line on stderr, exit 2 (the contract's 'bad usage or unusable input')."""
    print(f"kafka-forensics: {message}", file=sys.stderr)
    return typer.Exit(code)


def _written_at(out: Path) -> int | None:
    try:
        return (out / "run.json").stat().st_mtime_ns
    except OSError:
        return None


@contextlib.contextmanager
def staged_run(out: Path) -> Iterator[None]:
    """Run a command that writes DIR through Spark: unusable input is one line and exit 2, and
    Ctrl-C is one line saying what DIR holds now, and exit 130 (128 + SIGINT, as shells do)."""
    from jobs.spark import Interrupted, interruptible

    before = _written_at(out)
    try:
        with interruptible():
            yield
    except (FileNotFoundError, NotADirectoryError, ValueError) as exc:  # AnalyzeError, ArchiveError, NoLogDirError too
        raise fail(str(exc)) from None
    except Interrupted:
        if _written_at(out) != before:
            said = (f"interrupted after the new results were swapped into {out}; "
                    f"a half-built catalog is rebuilt by the first `kafka-forensics sql {out}`")
        else:
            said = f"interrupted; previous results in {out} unchanged" if out.exists() else f"interrupted; nothing written to {out}"
        raise fail(said, 130) from None


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


# shared option types (ingest, sql; analyze reuses them)
OutDir = Annotated[Path, typer.Option("--out", help="Output directory: tables/, catalog/, run.json (replaced atomically).")]
Master = Annotated[str, typer.Option("--master", help="Spark master URL: local[*], local[2], spark://host:7077 ...")]


@app.command()
def ingest(
    inputs: Annotated[list[Path], typer.Argument(help="Folders of broker dirs, broker dirs, log dirs, or .tar/.tar.gz/.tgz/.tar.xz/.zip of them.")],
    out: OutDir,
    master: Master = "local[*]",
    payloads: Annotated[bool, typer.Option("--payloads", help="Keep record keys and values in the records table (may hold personal data).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Discover brokers in INPUT..., parse every file as Spark tasks, write Parquet tables and a SQL catalog.

    Example: kafka-forensics ingest incident.tar.gz --out /tmp/case1
    """
    from jobs import run_ingest

    _log_to_stderr()
    with staged_run(out):
        result = run_ingest.run(inputs, out, master=master, payloads=payloads, progress=not quiet)
    print(f"{len(result.brokers)} brokers, {result.files} files, {result.rows.get('records', 0)} records, "
          f"{result.problems} problems -> {out}", file=sys.stderr)


@app.command()
def sql(
    out: Annotated[Path, typer.Argument(help="An output directory written by ingest or analyze.")],
    query: Annotated[str | None, typer.Argument(help="A Spark SQL query; without it, an interactive prompt.")] = None,
    format: Annotated[str, typer.Option("--format", help="table, json (JSON Lines) or csv.")] = "table",
    master: Master = "local[*]",
) -> None:
    """Query DIR's tables (brokers, files, batches, records, ...) with Spark SQL.

    Example: kafka-forensics sql /tmp/case1 "select broker, topic, partition, count(*) from records group by 1,2,3"
    """
    from jobs import catalog
    from jobs import sql as sql_mod

    if format not in sql_mod.FORMATS:
        raise fail(f"--format must be one of {', '.join(sql_mod.FORMATS)}")
    _log_to_stderr()
    try:
        spark = catalog.open_catalog(out, master)
    except FileNotFoundError as exc:
        raise fail(str(exc)) from None
    if query is None:
        sql_mod.repl(spark, format)
        return
    try:
        sql_mod.run_query(spark, query, format)
    except Exception as exc:  # AnalysisException, ParseException: bad usage
        raise fail(str(exc).strip().splitlines()[0]) from None


def _log_to_stderr() -> None:
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    for name in ("jobs", "analyzer"):  # ours only: py4j and Spark stay quiet
        logging.getLogger(name).setLevel(logging.INFO)
        logging.getLogger(name).addHandler(handler)


@app.command()
def report(
    out: Annotated[Path, typer.Argument(metavar="DIR", help="An output directory written by analyze (findings.json, tables/).")],
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


@app.command()
def analyze(
    inputs: Annotated[list[Path], typer.Argument(help="Collected broker dirs, log dirs or archives of them (several allowed).")],
    out: Annotated[Path, typer.Option("--out", help="Output DIR: tables/, catalog, findings.json, report.html (replaced atomically).")],
    format: Annotated[str, typer.Option("--format", help="What to print: text (summary), json (findings.json) or html.")] = "text",
    master: Annotated[str, typer.Option("--master", help="Spark master URL: local[*] (default) or spark://host:7077.")] = "local[*]",
    ledger: Annotated[Path | None, typer.Option("--ledger", help="JSON Lines of acknowledged records (topic, partition, offset, hashes).")] = None,
    fail_on: Annotated[str, typer.Option("--fail-on", help="Exit 1 when a finding is at or above: error, warning or info.")] = "error",
) -> None:
    """The main command: ingest every broker, run the forensic jobs, write findings.json and report.html.

    Example: kafka-forensics analyze collected/ --out incident-42 --ledger acked.jsonl
    """
    from .analyze import run_analyze

    _log_to_stderr()
    with staged_run(out):
        code = run_analyze(inputs, out, fmt=format, ledger=ledger, master=master, fail_on=fail_on)
    raise typer.Exit(code)


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", help="Where the scenario folders (broker dirs + ground_truth.json + ledger.jsonl) go.")] = Path("kafka-forensics-demo"),
    scenario: Annotated[list[str] | None, typer.Option("--scenario", help="A scenario name (repeatable); default: all of them.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed: the same seed makes the same bytes.")] = 0,
    records: Annotated[int, typer.Option("--records", help="Records per partition (scale up for benchmarks).")] = 300,
    partitions: Annotated[int, typer.Option("--partitions", help="Partitions per topic.")] = 1,
    brokers: Annotated[int, typer.Option("--brokers", help="Brokers in the simulated cluster.")] = 3,
    segment_bytes: Annotated[int, typer.Option("--segment-bytes", help="log.segment.bytes of the generated logs.")] = 16384,
    codec: Annotated[str, typer.Option("--codec", help="none, gzip, snappy, lz4 or zstd.")] = "none",
) -> None:
    """Generate incident scenarios with known ground truth (simulated replication) and analyze them.

    Example: kafka-forensics demo --out /tmp/demo --scenario unclean-election
    """
    from . import demo as demo_mod

    try:
        code = demo_mod.run(out, scenario, seed=seed, stream=sys.stdout, records=records, partitions=partitions,
                            brokers=brokers, segment_bytes=segment_bytes, codec=codec)
    except (demo_mod.DemoError, ValueError, FileExistsError) as exc:
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
