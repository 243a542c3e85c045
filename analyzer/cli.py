"""The ``kafka-forensics`` command line (Typer). Commands stay thin: they hand off to parsers/,
jobs/ and the report, and turn bad usage or unusable input (``jobs.errors.InputError``) into exit 2
with one line on stderr. Any other exception is a bug of ours: one line saying so, exit 3
(``Command``), the traceback too with -v."""

from __future__ import annotations

import contextlib
import errno
import json
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from typer import _click

from jobs.errors import InputError, error_text
from jobs.terminal import LastResort, LogFormatter, escape

from .choices import FAIL_ON, REPORT_FORMATS, SALVAGE_FORMATS, SQL_FORMATS
from .cli_words import NativeCommand, NativeGroup

app = typer.Typer(
    name="kafka-forensics",
    cls=NativeGroup,
    help="Offline forensic analyzer for Apache Kafka log directories.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


def say(message: str) -> None:
    """One line of ours on stderr. The message names paths and values from the evidence: escaped
    whole (``jobs.terminal``), so it stays one line and sends the terminal no control character.
    A stderr that is gone (the terminal closed: SIGHUP) is told nothing, and the exit code still says it."""
    with contextlib.suppress(OSError):
        print(f"kafka-forensics: {escape(message)}", file=sys.stderr, flush=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    """One clear line on stderr, exit 2 (the contract's 'bad usage or unusable input')."""
    say(message)
    return typer.Exit(code)


def one_of(option: str, value: str, choices: tuple[str, ...]) -> None:
    """Exit 2 with one line unless ``value`` is one of ``choices`` (``analyzer.choices``, the list
    --help shows): checked here once, before any work, so no layer below checks it again."""
    if value not in choices:
        said = f"{', '.join(choices[:-1])} or {choices[-1]}" if len(choices) > 1 else choices[0]
        raise fail(f"{option} must be {said}, not {value!r}")


INTERNAL_ERROR = 3  # a bug of ours, not the user's input (0/1: verdict, 2: bad usage or input, 130: Ctrl-C)


def internal_error(exc: BaseException, verbose: bool = False) -> typer.Exit:
    """One line for an exception no command expected, exit 3; its traceback before it with -v. Why
    not exit 2 or a bare traceback: a bug reported as bad usage sends the user looking for a mistake
    they did not make, and a traceback ending in exit 1 reads as "found something"."""
    if verbose:
        traceback.print_exception(exc, file=sys.stderr)
    said = next((line.strip() for line in (error_text(exc) or "").splitlines() if line.strip()), "")  # (a dead JVM says nothing)
    print(f"internal error: {type(exc).__name__}{': ' + said if said else ''} (-v shows the traceback; please report it)", file=sys.stderr)
    return typer.Exit(INTERNAL_ERROR)


# what a command's exception may be that is not a bug: Typer's and click's own exits and usage
# errors, Ctrl-C at a prompt (EOFError), and a closed stdout (handled by Typer and ``main``)
_NOT_A_BUG = (_click.exceptions.ClickException, typer.Exit, typer.Abort, EOFError)


class Command(NativeCommand):
    """Every command: an exception its code did not turn into exit 2 (``fail``) is a bug, said as
    ``internal_error`` (exit 3)."""

    def invoke(self, ctx: _click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except _NOT_A_BUG:
            raise
        except Exception as exc:
            if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
                raise
            raise internal_error(exc, bool(ctx.params.get("verbose"))) from None


def _written_at(out: Path) -> int | None:
    try:
        return (out / "run.json").stat().st_mtime_ns
    except OSError:
        return None


# Set by ``main``: this process is the CLI's own (the console script, ``python -m analyzer.cli``),
# so SIGTERM and SIGHUP are its to handle. Run in another program's process (tests' CliRunner,
# a notebook), a command takes Ctrl-C only and leaves those signals to their owner.
OWN_PROCESS = False


@contextlib.contextmanager
def writing(out: Path) -> Iterator[None]:
    """Run a command that writes DIR through Spark: unusable input is one line and exit 2, and
    Ctrl-C is one line saying what DIR holds now, and exit 130 (128 + SIGINT, as shells do);
    in the CLI's own process SIGTERM and SIGHUP get the same, with exit 143 and 129."""
    import signal

    from jobs.session.signals import STOP_SIGNALS, Interrupted, interruptible

    before = _written_at(out)
    try:
        with interruptible(STOP_SIGNALS if OWN_PROCESS else (signal.SIGINT,)):
            yield
    except InputError as exc:  # AnalyzeError, ArchiveError, NoLogDirError, OutputError ...
        raise fail(str(exc)) from None
    except Interrupted as stop:
        how = "interrupted" if stop.signum == signal.SIGINT else f"stopped by {signal.Signals(stop.signum).name}"
        if _written_at(out) != before:
            said = f"{how} after the new, complete results were swapped into {out}"
        else:
            said = f"{how}; previous results in {out} unchanged" if out.exists() else f"{how}; nothing written to {out}"
        raise fail(said, 128 + stop.signum) from None


# Options shared by several commands, declared once. Each command says what its --out holds; the
# --format choices differ (``analyzer.choices``; the command checks them with ``one_of``: exit 2
# with one line, not click's usage block).
def out_option(help: str) -> Any:
    return Annotated[Path, typer.Option("--out", metavar="DIR", help=help)]


def format_option(choices: tuple[str, ...], help: str) -> Any:
    return Annotated[str, typer.Option("--format", metavar="|".join(choices), help=help)]


OutDir = out_option("Output DIR: tables/, catalog/, run.json (replaced atomically).")
AnalyzeOutDir = out_option("Output DIR: tables/, catalog/, run.json, findings.json, report.html (replaced atomically).")
DemoOutDir = out_option("Where the scenario folders (broker dirs + ground_truth.json + ledger.jsonl) and _analysis/ go.")
Master = Annotated[str, typer.Option("--master", metavar="URL", help="Spark master URL: local[*] (every core), local[2], spark://host:7077 ...")]
Remote = Annotated[str | None, typer.Option("--remote", metavar="sc://HOST:PORT", help="Run the Spark jobs on this Spark Connect "
                                            "server instead of --master (DIR and the inputs must be paths the server and its "
                                            "executors see).")]
ReportFormat = format_option(REPORT_FORMATS, "What to print: text (terminal summary), json (findings.json) or html "
                                             "(the path of DIR/report.html).")
SqlFormat = format_option(SQL_FORMATS, "table, json (JSON Lines) or csv.")
SalvageFormat = format_option(SALVAGE_FORMATS, "text: the summary line on stderr; json: the summary (out, records, findings, "
                                               "left_out) on stdout too.")
FailOn = Annotated[str, typer.Option("--fail-on", metavar="|".join(FAIL_ON),
                                     help="Exit 1 when a finding is at or above this severity.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Only the result and errors: no progress bar, no log lines.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Spark's own log lines too (its start-up warnings, WARN and above), "
                                        "and the traceback of an internal error (exit 3).")]
Traceback = Annotated[bool, typer.Option("--verbose", "-v", help="The traceback of an internal error (exit 3) too.")]


@app.command(cls=Command)
def dump(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="Any Kafka file: .log, .index, .timeindex, .txnindex, .snapshot, a checkpoint, leader-epoch-checkpoint, partition.metadata, meta.properties, quorum-state.")],
    json: Annotated[bool, typer.Option("--json", help='JSON Lines on stdout: one object per batch, record, entry or problem, with a "type"; '
                                                          'its fields are the columns of the matching table in docs/tables.md.')] = False,
    records: Annotated[bool, typer.Option("--records", help="Segments: decode every record, not only batch headers.")] = False,
    payloads: Annotated[bool, typer.Option("--payloads", help="With --records: include key and value bytes (may hold personal data).")] = False,
    kind: Annotated[str | None, typer.Option("--kind", metavar="KIND", help="File kind, when the name does not tell (e.g. segment, offset_index, leader_epoch).")] = None,
    quiet: Quiet = False,
    verbose: Traceback = False,
) -> None:
    """Decode one file, like kafka-dump-log but for every file kind and without a JVM.

    Exits 1 when the file has problems (torn tail, CRC mismatch, malformed checkpoint...).

    Example: kafka-forensics dump broker-1/orders-0/00000000000000000000.log --records --json
    """
    from . import dump as dump_mod

    try:
        found = dump_mod.run(file, kind=kind, as_json=json, records=records, payloads=payloads, out=sys.stdout.buffer)
        sys.stdout.flush()
    except InputError as exc:  # DumpError
        raise fail(str(exc)) from None
    except BrokenPipeError:  # before Typer's own handler, which would exit 1 ("problems found")
        raise typer.Exit(stdout_closed()) from None
    raise typer.Exit(1 if found else 0)


@app.command(cls=Command)
def ingest(
    inputs: Annotated[list[str], typer.Argument(metavar="INPUT", help="Folders of broker dirs, broker dirs, log dirs, or .tar/.tar.gz/.tgz/.tar.xz/.zip of them; "
                                                "local, or on an object store: s3://, gs://, abfs://, hdfs:// (credentials from the store's "
                                                "standard chain).")],
    out: OutDir,
    master: Master = "local[*]",
    payloads: Annotated[bool, typer.Option("--payloads", help="Keep record keys and values in the records table (may hold personal data).")] = False,
    remote: Remote = None,
    quiet: Quiet = False,
    verbose: Verbose = False,
) -> None:
    """Discover brokers in INPUT..., parse every file as Spark tasks, write Parquet tables and a SQL catalog.

    Example: kafka-forensics ingest incident.tar.gz --out /tmp/case1
    """
    from jobs.ingest import run as run_ingest

    master = spark_target(master, remote)
    _log_to_stderr(quiet, verbose)
    with writing(out):
        result = run_ingest.run(input_args(inputs), out, master=master, payloads=payloads, progress=not quiet)
    print(f"{len(result.brokers)} brokers, {result.files} files, {result.rows.get('records', 0)} records, "
          f"{result.problems} problems -> {out}", file=sys.stderr)


@app.command(cls=Command)
def sql(
    out: Annotated[Path, typer.Argument(metavar="DIR", help="An output directory written by ingest or analyze.")],
    query: Annotated[str | None, typer.Argument(metavar="QUERY", help="A Spark SQL query; without it, an interactive prompt.")] = None,
    format: SqlFormat = "table",
    master: Master = "local[*]",
    remote: Remote = None,
    quiet: Quiet = False,
    verbose: Verbose = False,
) -> None:
    """Query DIR's tables (brokers, files, batches, records, ...) with Spark SQL.

    Example: kafka-forensics sql /tmp/case1 "select broker, topic, partition, count(*) from records group by 1,2,3"
    """
    from jobs.session.connect import is_remote_url
    from jobs.store import catalog

    from . import sql as sql_mod

    one_of("--format", format, SQL_FORMATS)
    master = spark_target(master, remote)
    _log_to_stderr(quiet, verbose)
    tables = None  # a one-shot read of DIR's tables needs no metastore (catalog.open_views), unless
    # DIR moved or changed since its catalog was built: then this run rebuilds it for spark-sql and pyspark
    if query is not None and not is_remote_url(master) and (out / "tables").is_dir() and not catalog.needs_registration(out):
        tables = catalog.tables_of_query(query, catalog.table_names(out))
    try:
        spark = catalog.open_catalog(out, master) if tables is None else catalog.open_views(out, tables, master)
    except InputError as exc:  # CatalogError, RemoteUnreachable, DriverMemoryError
        raise fail(str(exc)) from None
    if query is None:
        sql_mod.repl(spark, format)
        return
    try:
        sql_mod.run_query(spark, query, format)
    except InputError as exc:  # QueryError: Spark refused the query or failed running it
        raise fail(str(exc)) from None


@app.command(cls=Command)
def serve(
    out: Annotated[Path, typer.Argument(metavar="DIR", help="An output directory written by analyze or ingest.")],
    port: Annotated[int, typer.Option("--port", metavar="N", help="TCP port of the JDBC server.")] = 10000,
    host: Annotated[str, typer.Option("--host", metavar="ADDR", help="Address to listen on (0.0.0.0: every interface). "
                                      "Anything but loopback (127.0.0.1, ::1, localhost) needs --allow-unauthenticated.")] = "127.0.0.1",
    allow_unauthenticated: Annotated[bool, typer.Option("--allow-unauthenticated", help="Listen on a --host beyond loopback although "
                                                        "the server has no authentication: whoever reaches the port reads every "
                                                        "table (payloads too, if DIR has them).")] = False,
    master: Master = "local[*]",
    quiet: Quiet = False,
    verbose: Traceback = False,
) -> None:
    """Serve DIR's tables over JDBC/ODBC (Spark's Thrift server) until Ctrl-C, for beeline, DBeaver or Superset.

    Prints the JDBC URL and a beeline line on stderr once the port listens. Derby lets one process
    open DIR's catalog at a time: serve while no sql or analyze uses DIR.

    Example: kafka-forensics serve incident-42 --port 10000
    """
    from . import serve as serve_mod

    def ready() -> None:
        if not quiet:
            print(f"JDBC server on {serve_mod.jdbc_url(host, port)} (user and password: any); Ctrl-C stops it\n"
                  f"  {serve_mod.beeline_line(host, port)}", file=sys.stderr, flush=True)

    try:
        code = serve_mod.serve(out, host, port, master, ready=ready, allow_unauthenticated=allow_unauthenticated)
    except InputError as exc:  # ServeError, DriverMemoryError (KF_DRIVER_MEMORY)
        raise fail(str(exc)) from None
    raise typer.Exit(code)

def input_args(inputs: list[str]) -> list:
    """INPUT arguments as the pipeline takes them: local paths, and store URLs kept as strings
    (a ``Path`` would fold ``s3://b`` into ``s3:/b``)."""
    from jobs.ingest.stores import input_arg

    return [input_arg(raw) for raw in inputs]


def spark_target(master: str, remote: str | None) -> str:
    """What the jobs run on: ``--remote``'s ``sc://`` URL (a Spark Connect server, which has its own
    master), else ``--master``. Both at once is bad usage."""
    if remote is None:
        return master
    if not remote.startswith("sc://"):
        raise fail(f"--remote must be a Spark Connect URL, sc://HOST:PORT, not {remote!r}")
    if master != "local[*]":
        raise fail("--remote and --master exclude each other: a Spark Connect server runs on its own master")
    return remote


def _log_to_stderr(quiet: bool = False, verbose: bool = False) -> None:
    """Our INFO lines on stderr (none with --quiet); with --verbose, Spark's own too."""
    import logging
    import os

    if verbose:
        from jobs.session.log_noise import LOG_LEVEL_ENV

        os.environ.setdefault(LOG_LEVEL_ENV, "WARN")
    if quiet:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogFormatter("%(levelname)s %(message)s"))  # (values from the evidence, escaped)
    for name in ("jobs", "analyzer"):  # ours only: py4j and Spark stay quiet
        logging.getLogger(name).setLevel(logging.INFO)
        logging.getLogger(name).addHandler(handler)


@app.command(cls=Command)
def report(
    out: Annotated[Path, typer.Argument(metavar="DIR", help="An output directory written by analyze (findings.json, tables/).")],
    format: ReportFormat = "text",
    fail_on: FailOn = "error",
    output: Annotated[str | None, typer.Option("--output", "-o", metavar="FILE", help="With --format html: copy the report to FILE and "
                                               "print that path instead; '-' prints the HTML itself to stdout.")] = None,
    quiet: Quiet = False,
    verbose: Traceback = False,
) -> None:
    """Re-render the report of an analyzed directory without re-parsing (no Spark needed).

    Rewrites DIR/report.html and prints the chosen format (for html, the report's path: a report
    is megabytes; -o - prints the HTML itself).

    Example: kafka-forensics report out/ --format text
    """
    from .report import run_report

    one_of("--format", format, REPORT_FORMATS)
    one_of("--fail-on", fail_on, FAIL_ON)
    if output is not None and format != "html":
        raise fail(f"--output applies to --format html only, not {format}")
    try:
        code = run_report(out, format, sys.stdout, fail_on, output)
    except InputError as exc:  # ReportError
        raise fail(str(exc)) from None
    raise typer.Exit(code)


@app.command(cls=Command)
def analyze(
    inputs: Annotated[list[str], typer.Argument(metavar="INPUT", help="Collected broker dirs, log dirs or archives of them (several allowed); "
                                                "local, or on an object store: s3://, gs://, abfs://, hdfs://.")],
    out: AnalyzeOutDir,
    format: ReportFormat = "text",
    master: Master = "local[*]",
    ledger: Annotated[Path | None, typer.Option("--ledger", metavar="FILE", help="JSON Lines of acknowledged records (topic, partition, offset, hashes).")] = None,
    fail_on: FailOn = "error",
    topic: Annotated[list[str] | None, typer.Option("--topic", metavar="GLOB", help="Only the topics matching GLOB (repeatable, e.g. 'orders*'): other partitions' files are not even read.")] = None,
    partition: Annotated[list[int] | None, typer.Option("--partition", metavar="N", help="Only partition N of each topic (repeatable). Internal topics are always read.")] = None,
    remote: Remote = None,
    quiet: Quiet = False,
    verbose: Verbose = False,
) -> None:
    """The main command: ingest every broker, run the forensic jobs, write findings.json and report.html.

    INPUT may be on an object store (s3://bucket/prefix, or an archive there): listed here, read in
    ranges by the executors, credentials from the store's standard chain (for S3: AWS_ACCESS_KEY_ID...,
    AWS_PROFILE or the instance role; AWS_ENDPOINT_URL for another endpoint), never written to DIR.

    Example: kafka-forensics analyze collected/ --out incident-42 --ledger acked.jsonl
    """
    from .analyze import Focus, run_analyze

    one_of("--format", format, REPORT_FORMATS)
    one_of("--fail-on", fail_on, FAIL_ON)
    master = spark_target(master, remote)
    _log_to_stderr(quiet, verbose)
    focus = Focus(tuple(topic or ()), tuple(partition or ())) if topic or partition else None
    with writing(out):
        code = run_analyze(input_args(inputs), out, fmt=format, ledger=ledger, master=master, fail_on=fail_on, progress=not quiet, focus=focus)
    raise typer.Exit(code)


@app.command(cls=Command)
def demo(
    out: DemoOutDir = Path("kafka-forensics-demo"),
    scenario: Annotated[list[str] | None, typer.Option("--scenario", metavar="NAME", help="A scenario name (repeatable; see --list); default: all of them.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="Print the scenario names with one line each and exit (nothing generated).")] = False,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="Random seed: the same seed makes the same bytes.")] = 0,
    records: Annotated[int, typer.Option("--records", metavar="N", help="Records per partition (scale up for benchmarks).")] = 300,
    partitions: Annotated[int, typer.Option("--partitions", metavar="N", help="Partitions per topic.")] = 1,
    brokers: Annotated[int, typer.Option("--brokers", metavar="N", help="Brokers in the simulated cluster.")] = 3,
    segment_bytes: Annotated[int, typer.Option("--segment-bytes", metavar="BYTES", help="log.segment.bytes of the generated logs.")] = 16384,
    codec: Annotated[str, typer.Option("--codec", metavar="none|gzip|snappy|lz4|zstd", help="Compression of the generated batches.")] = "none",
    quiet: Quiet = False,
    verbose: Verbose = False,
) -> None:
    """Generate incident scenarios with known ground truth (simulated replication) and analyze them.

    Example: kafka-forensics demo --out /tmp/demo --scenario unclean-election
    """
    from . import demo as demo_mod

    if list_:
        demo_mod.list_scenarios(sys.stdout)
        raise typer.Exit(0)
    _log_to_stderr(quiet, verbose)
    try:
        code = demo_mod.run(out, scenario, seed=seed, stream=sys.stdout, records=records, partitions=partitions,
                            brokers=brokers, segment_bytes=segment_bytes, codec=codec)
    except InputError as exc:  # DemoError
        raise fail(str(exc)) from None
    raise typer.Exit(code)


@app.command(cls=Command)
def salvage(
    out: Annotated[Path, typer.Argument(metavar="DIR", help="An output directory written by analyze (findings.json, tables/files).")],
    file: Annotated[str, typer.Option("--out", metavar="FILE", help="Where the JSON Lines go (written atomically; never '-': "
                                      "payloads are not printed).")],
    topic: Annotated[str | None, typer.Option("--topic", metavar="TOPIC", help="Only this topic.")] = None,
    partition: Annotated[int | None, typer.Option("--partition", metavar="N", help="Only this partition.")] = None,
    format: SalvageFormat = "text",
    quiet: Quiet = False,
    verbose: Traceback = False,
) -> None:
    """Export every record of a lost or divergent range that a replica still holds, as JSON Lines ready to replay.

    Re-reads the segments read-only and refuses (exit 2) if one changed since DIR was analyzed.
    Leaves out what the surviving log holds identically, aborted transactional and control records.

    Example: kafka-forensics salvage incident-42 --out salvage.jsonl --topic orders
    """
    from .salvage import run_salvage

    one_of("--format", format, SALVAGE_FORMATS)
    try:
        done = run_salvage(out, file, topic=topic, partition=partition)
    except InputError as exc:  # SalvageError
        raise fail(str(exc)) from None
    if not quiet:
        say(done.summary_line())
    if format == "json":
        print(json.dumps(done.to_json()))


@app.command(cls=Command)
def collect(
    out: Annotated[Path | None, typer.Option("--out", metavar="FILE", help="Write the script to FILE (executable) instead of printing it.")] = None,
    topic: Annotated[list[str] | None, typer.Option("--topic", metavar="GLOB", help="Only the topics matching GLOB (repeatable, e.g. 'orders*'); internal topics are always taken.")] = None,
    partition: Annotated[list[int] | None, typer.Option("--partition", metavar="N", help="Only partition N of each topic (repeatable).")] = None,
    since: Annotated[str | None, typer.Option("--since", metavar="TIME", help="Leave out the segments whose newest batch is older than TIME "
                                              "(as Kafka's time retention would; the active segment is always kept): 2024-05-01T12:00:00Z "
                                              "(UTC), 2024-05-01, epoch milliseconds, or 90m / 6h / 2d before the script runs.")] = None,
    no_consumer_offsets: Annotated[bool, typer.Option("--no-consumer-offsets", help="Leave __consumer_offsets out (taken whole by default).")] = False,
    quiet: Quiet = False,
    verbose: Traceback = False,
) -> None:
    """Print the collector to run on each broker host: a POSIX sh script (no Python, no Java).

    On each host: sh kafka-forensics-collect.sh [-l KAFKA_LOGS_DIR] [-o OUT_DIR] [--topic GLOB]... [--partition N]... [--since TIME] [--no-consumer-offsets] SERVER_PROPERTIES

    It archives every log dir named by the properties (log.dirs, log.dir, metadata.log.dir), Kafka's server.log*, controller.log* and state-change.log* (from -l, $LOG_DIR or ../logs) and the properties with secrets redacted, staged by hard link or copy first so a live broker cannot tear the archive, and writes a SHA-256 manifest of every file and of the archive beside it.

    Focused (--topic, --partition, --since, --no-consumer-offsets: written into the script, so every broker takes the same; the script also takes them on its command line): only those partitions and segments, but always every checkpoint, meta.properties, .kafka_cleanshutdown, the kept partitions' other files, and the internal topics whole (__cluster_metadata, __transaction_state, __remote_log_metadata, __consumer_offsets). COLLECT.txt and the manifest list what was left out and why; analyze reads a focused collection as focused.

    Then analyze the archives as they are: kafka-forensics analyze *.tar.gz --out incident

    Example: kafka-forensics collect --topic 'orders*' --since 2024-05-01T12:00Z --out collect.sh
    """
    from . import collect as collect_mod

    focus = collect_mod.CollectFocus(tuple(topic or ()), tuple(partition or ()), since, not no_consumer_offsets)
    try:
        text = collect_mod.script(focus)
        if out is None:
            sys.stdout.write(text)
            return
        collect_mod.write(out, focus)
    except InputError as exc:  # CollectError: an option the script would refuse
        raise fail(str(exc)) from None
    except OSError as exc:  # the FILE the user named
        raise fail(f"{out}: {exc.strerror or exc}") from None
    if not quiet:
        print(f"wrote {out}; on each broker host run: sh {out.name} -o OUT_DIR SERVER_PROPERTIES", file=sys.stderr)


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"kafka-forensics {version('kafka-forensics')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            print("kafka-forensics (not installed)")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Offline forensic analyzer for Apache Kafka log directories."""


def stdout_closed() -> int:
    """The reader of stdout went away (e.g. piped into ``head``): not a problem in any file, so
    exit 0, and point stdout at /dev/null so the interpreter's final flush stays silent."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (an in-process runner)
        pass
    return 0


def main() -> None:
    import logging

    global OWN_PROCESS
    OWN_PROCESS = True

    # warnings logged with no handler of ours (--quiet, dump, report, salvage) reach stderr as
    # through logging's last resort, escaped like ours; py4j's report of a call the dead JVM broke
    # does not (the command says why the JVM ended)
    from jobs.session.signals import not_a_broken_py4j_call

    logging.getLogger().addFilter(not_a_broken_py4j_call)
    logging.getLogger().addHandler(LastResort())
    if sys.argv[1:2] == ["dump"]:  # a process of its own: nothing after it needs pandas
        from parsers.common import keep_freed_memory

        from .dump import without_pandas

        without_pandas()
        keep_freed_memory()
    try:
        app()
    except BrokenPipeError:
        sys.exit(stdout_closed())


if __name__ == "__main__":
    main()
