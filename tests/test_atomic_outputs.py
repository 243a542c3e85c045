"""``analyze`` killed with SIGKILL at several points never loses the previous DIR (issue 9 part 5).

The good previous result is one analyze of the real-cluster ``crash-only`` capture. Then analyze is
started again into the same DIR, in its own session (the Spark JVM and its Python workers are in
it), and the whole session is SIGKILLed at a point found by watching the staging sibling
``DIR.tmp-<pid>`` fill up, or, where nothing on disk tells the moment apart, at a named test-only
pause (``KF_TEST_PAUSE_AT``, see ``jobs.store.outdir.pause_point``). After every kill: DIR holds a
complete result (before the swap: the previous one, byte for byte), the catalog answers the same
count, and no process of the killed session is left. A final rerun completes with the same findings.
Two runs into different DIRs from the same working directory do not interfere, nor two queries on one DIR.
Ctrl-C (SIGINT to the process group) at those points is one line and exit 130, with the staging dir removed;
SIGTERM (to the group, as ``timeout`` sends it) and SIGHUP get the same with exit 143 and 129, and on a
first run leave no DIR at all.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REAL

CLI = [sys.executable, "-m", "analyzer.cli"]
SRC = REAL / "crash-only"
OTHER = REAL / "clean-failover"


def _default_signals() -> None:
    """In the child: SIGHUP, SIGTERM and SIGINT as a shell started from a terminal gives them. A
    signal ignored when a run starts stays ignored (``nohup``), so a test run under a harness that
    ignores SIGHUP would otherwise test nothing."""
    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)


class Run:
    """One ``analyze`` in a new session; stderr is collected by a thread (it is how pauses announce)."""

    def __init__(self, src: Path, out: Path, cwd: Path, pause: str | None = None):
        env = {k: v for k, v in os.environ.items() if k != "KF_TEST_PAUSE_AT"}
        if pause:
            env["KF_TEST_PAUSE_AT"] = pause
        self.proc = subprocess.Popen([*CLI, "analyze", str(src), "--out", str(out), "--format", "json"], cwd=cwd, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                                     preexec_fn=_default_signals)
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.threads = [threading.Thread(target=self._drain, args=(s, buf), daemon=True)
                        for s, buf in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr))]
        for t in self.threads:
            t.start()

    @staticmethod
    def _drain(stream, buf: list[str]) -> None:
        for line in stream:
            buf.append(line)

    @property
    def staging(self) -> str:
        return f".tmp-{self.proc.pid}"

    def wait(self, timeout: float = 1500) -> int:
        code = self.proc.wait(timeout=timeout)
        for t in self.threads:
            t.join(timeout=10)
        return code

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.wait(60)


def session_members(sid: int) -> list[tuple[int, str]]:
    """Live processes of session ``sid`` (our run's JVM and Python workers stay in it; pyspark's
    daemon makes its own process group, so the session, not the group, is what to look at)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                found.append((int(d.name), (d / "cmdline").read_bytes().replace(b"\0", b" ")[:120].decode(errors="replace")))
        except (OSError, ValueError):
            continue
    return found


def no_orphans(sid: int, grace: float = 20) -> list[tuple[int, str]]:
    deadline = time.monotonic() + grace
    while (left := session_members(sid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def writers_under(root: Path) -> list[tuple[int, str]]:
    """Live processes with a file open under ``root`` (each process's /proc/PID/fd links)."""
    prefix = f"{root.resolve()}/"
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if any(os.readlink(fd).startswith(prefix) for fd in (d / "fd").iterdir()):
                found.append((int(d.name), (d / "cmdline").read_bytes().replace(b"\0", b" ")[:120].decode(errors="replace")))
        except OSError:
            continue
    return found


def wait_for(run: Run, cond, what: str, timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if run.proc.poll() is not None:
            pytest.fail(f"analyze ended (exit {run.proc.returncode}) before {what}: {''.join(run.stderr)[-2000:]}")
        if time.monotonic() > deadline:
            run.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def tree(out: Path) -> dict[str, tuple[int, int]]:
    """Every file of DIR with its size and mtime: a previous DIR left alone keeps all three."""
    return {p.relative_to(out).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(out.rglob("*")) if p.is_file()}


def sql_count(out: Path, table: str, cwd: Path) -> int:
    q = subprocess.run([*CLI, "sql", str(out), f"select count(*) as n from {table}", "--format", "json"],
                       capture_output=True, text=True, timeout=900, cwd=cwd)
    assert q.returncode == 0, q.stderr[-2000:]
    return json.loads(q.stdout.strip().splitlines()[-1])["n"]


def comparable(findings: bytes) -> dict:
    """findings.json without the one field that differs between two runs on the same input."""
    doc = json.loads(findings)
    doc.pop("generated_at", None)
    return doc


@pytest.fixture(scope="module")
def previous(tmp_path_factory):
    root = tmp_path_factory.mktemp("atomic")
    cwd = root / "cwd"
    cwd.mkdir()
    out = root / "parent" / "case"
    out.parent.mkdir()
    run = Run(SRC, out, cwd)
    assert run.wait() == 0, "".join(run.stderr)[-3000:]
    state = {"out": out, "cwd": cwd, "findings": (out / "findings.json").read_bytes(), "tree": tree(out),
             "batches": sql_count(out, "batches", cwd)}
    assert state["batches"] > 0
    state["tree"] = tree(out)  # opening the catalog touches Derby's files (locks, log): take the tree after it
    return state


def _staged(out: Path, run: Run, *rel: str):
    return lambda: (out.parent / f"{out.name}{run.staging}").joinpath(*rel).exists()


def _has_java(run: Run):
    return lambda: any("java" in cmd for _, cmd in session_members(run.proc.pid))


# kill points before the swap: (name, how to find the moment, pause hook)
BEFORE_SWAP = {
    "spark-start": lambda out, run: (lambda: _staged(out, run)() and _has_java(run)()),  # JVM starting, nothing parsed
    "mid-ingest": lambda out, run: _staged(out, run, "tables", "files"),  # parse tasks writing their tables
    "jobs": lambda out, run: _staged(out, run, "tables", "replica_logs"),  # ingest done, forensic jobs writing
    "catalog-registering": None,  # every table registered in the staged catalog, its marker not yet written
    "before-swap": None,  # findings.json, run.json, report.html, the catalog complete in the staging dir
}


@pytest.mark.parametrize("point", list(BEFORE_SWAP))
def test_kill_before_the_swap_leaves_the_previous_dir_untouched(previous, point):
    out, cwd = previous["out"], previous["cwd"]
    cond = BEFORE_SWAP[point]
    run = Run(SRC, out, cwd, pause=None if cond else point)
    if cond:
        wait_for(run, cond(out, run), point)
    else:
        wait_for(run, lambda: any(f"kf-test-pause: {point}" in ln for ln in run.stderr), f"pause {point}")
        assert (out.parent / f"{out.name}{run.staging}" / "findings.json").is_file()
    run.kill()
    assert no_orphans(run.proc.pid) == []
    assert (out / "findings.json").read_bytes() == previous["findings"]
    assert (out / "run.json").is_file()
    assert tree(out) == previous["tree"], "the previous DIR changed under a killed run"
    if point in ("jobs", "before-swap"):  # (a few Spark starts fewer: the tree equality already covers the others)
        assert sql_count(out, "batches", cwd) == previous["batches"]
        previous["tree"] = tree(out)  # opening the catalog touches Derby's files (locks, log)


# kill points after the swap: DIR is already the new run's complete result, catalog included
AFTER_SWAP = ["after-swap"]


@pytest.mark.parametrize("point", AFTER_SWAP)
def test_kill_after_the_swap_leaves_a_complete_new_dir(previous, point):
    out, cwd = previous["out"], previous["cwd"]
    run = Run(SRC, out, cwd, pause=point)
    wait_for(run, lambda: any(f"kf-test-pause: {point}" in ln for ln in run.stderr), f"pause {point}")
    run.kill()
    assert no_orphans(run.proc.pid) == []
    assert comparable((out / "findings.json").read_bytes()) == comparable(previous["findings"])
    assert (out / "run.json").is_file() and (out / "report.html").is_file()
    assert json.loads((out / "catalog" / "registered.json").read_text())["out"] == str(out.resolve())
    assert sql_count(out, "batches", cwd) == previous["batches"]


# Ctrl-C (issue 15 item 10): SIGINT to the run's whole process group, as a terminal sends it
INTERRUPT_POINTS = {k: v for k, v in BEFORE_SWAP.items() if k != "jobs"}


def _stop_at(out: Path, cwd: Path, point: str, sig: int, group: bool = True) -> Run:
    """An analyze into ``out`` sent ``sig`` at ``point``: to its whole process group (as a terminal
    sends Ctrl-C, and ``timeout`` SIGTERM: the JVM gets it too), or to the process alone (as
    Kubernetes stops a container's first process). Returned ended."""
    cond = INTERRUPT_POINTS[point]
    run = Run(SRC, out, cwd, pause=None if cond else point)
    if cond:
        wait_for(run, cond(out, run), point)
    else:
        wait_for(run, lambda: any(f"kf-test-pause: {point}" in ln for ln in run.stderr), f"pause {point}")
    (os.killpg if group else os.kill)(run.proc.pid, sig)
    run.wait(300)
    return run


def _one_line_and_nothing_left(run: Run, out: Path, line: str, code: int) -> None:
    """Exit ``code``, ``line`` the only line of ours and the last, no traceback, no process of the
    run left, and beside DIR no staging sibling (and no DIR where there was none)."""
    err = "".join(run.stderr)
    assert run.proc.returncode == code, err[-3000:]
    ours = [ln for ln in err.splitlines() if ln.startswith("kafka-forensics: ")]
    assert ours == [line], err[-3000:]
    assert err.rstrip().splitlines()[-1] == ours[0], "nothing printed after the line"
    for noise in ("Traceback", "py4j", "Exception", "KeyboardInterrupt"):
        assert noise not in err, err[-3000:]
    assert no_orphans(run.proc.pid) == []
    # a JVM still running would go on writing its cancelled tasks' files into the staging dir: none of
    # the session is left (above), and no process anywhere (one that left the session) has a file open there
    assert writers_under(out.parent) == []
    left = sorted(p.name for p in out.parent.iterdir())
    assert left == ([out.name] if "unchanged" in line else []), f"staging sibling or DIR left behind: {left}"


# Ctrl-C; SIGTERM (issue 37 item 6): what ``timeout`` (to the whole group), systemd, Kubernetes and
# batch schedulers send. Each ends with one line and exit 128 + signal, the previous DIR unchanged.
STOPS = {signal.SIGINT: ("interrupted", 130), signal.SIGTERM: ("stopped by SIGTERM", 143)}


# Both signals where a run spends its first seconds (cheap to reach); one each at the two late points,
# which cost a whole analysis apiece: SIGINT and SIGTERM take the same handler (``interruptible``).
STOP_CASES = [("spark-start", signal.SIGINT), ("spark-start", signal.SIGTERM), ("mid-ingest", signal.SIGINT),
              ("mid-ingest", signal.SIGTERM), ("catalog-registering", signal.SIGINT), ("before-swap", signal.SIGTERM)]
assert {p for p, _ in STOP_CASES} == set(INTERRUPT_POINTS), "every stop point is stopped at"


@pytest.mark.parametrize(("point", "sig"), STOP_CASES, ids=[f"{p}-{s.name}" for p, s in STOP_CASES])
def test_a_stop_is_one_line_exit_128_plus_signal_and_no_staging_dir(previous, point, sig):
    out, cwd = previous["out"], previous["cwd"]
    before = tree(out)
    run = _stop_at(out, cwd, point, sig)
    said, code = STOPS[sig]
    _one_line_and_nothing_left(run, out, f"kafka-forensics: {said}; previous results in {out} unchanged", code)
    assert tree(out) == before, "the previous DIR changed under a stopped run"


def _ignored_signals(pid: int) -> set[int]:
    """The signals process ``pid`` ignores (SigIgn in /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return set()
    mask = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("SigIgn:")), 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


def test_sighup_to_the_process_alone_is_exit_129_and_leaves_the_workers_their_signals(previous):
    """SIGHUP to the driver alone, while the parse tasks run: the JVM and pyspark's daemon and
    workers (started by exec, below it) ignore neither SIGTERM nor SIGHUP because the driver
    handles them (the daemon ignores SIGHUP by its own choice, its workers do not)."""
    out, cwd = previous["out"], previous["cwd"]
    before = tree(out)
    seen: dict[int, tuple[str, set[int]]] = {}

    def workers_running() -> bool:
        members = session_members(run.proc.pid)
        seen.update({pid: (cmd, _ignored_signals(pid)) for pid, cmd in members if pid != run.proc.pid})
        return any("pyspark.daemon" in cmd for _, cmd in members) and _staged(out, run, "tables", "files")()

    run = Run(SRC, out, cwd)
    wait_for(run, workers_running, "the parse tasks' Python workers")
    os.kill(run.proc.pid, signal.SIGHUP)
    run.wait(300)
    _one_line_and_nothing_left(run, out, f"kafka-forensics: stopped by SIGHUP; previous results in {out} unchanged", 129)
    assert tree(out) == before, "the previous DIR changed under a hung-up run"
    assert any("java" in cmd for cmd, _ in seen.values()) and any("pyspark.daemon" in cmd for cmd, _ in seen.values())
    for pid, (cmd, ignored) in seen.items():
        assert signal.SIGTERM not in ignored, (pid, cmd)
        assert signal.SIGHUP not in ignored or "pyspark.daemon" in cmd, (pid, cmd)


def test_sigterm_on_a_first_run_leaves_no_dir(tmp_path):
    """Killed by default, a first run left its staging dir and, once the catalog had declared
    the tables at their final place, DIR as a tree of empty table folders."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    out = tmp_path / "parent" / "case"
    out.parent.mkdir()
    run = _stop_at(out, cwd, "catalog-registering", signal.SIGTERM)
    _one_line_and_nothing_left(run, out, f"kafka-forensics: stopped by SIGTERM; nothing written to {out}", 143)


def test_stop_signals_are_taken_by_the_clis_own_process_only(tmp_path, monkeypatch, capsys):
    """Run in another program's process (tests' CliRunner, a notebook), a command leaves SIGTERM
    and SIGHUP to their owner; in the CLI's own process (``main``) it takes them while it runs,
    leaves an ignored one ignored (``nohup``) and puts the owner's back after."""
    from typer import Exit

    from analyzer import cli
    from jobs.session import signals

    monkeypatch.setattr(signals, "stop_jvm", lambda: None)  # (no JVM here; this process's children are not the run's)
    got: list[int] = []
    saved = {s: signal.signal(s, h) for s, h in ((signal.SIGTERM, lambda n, f: got.append(n)), (signal.SIGHUP, signal.SIG_IGN))}
    owner = signal.getsignal(signal.SIGTERM)
    try:
        with cli.writing(tmp_path / "out"):
            os.kill(os.getpid(), signal.SIGTERM)
        assert got == [signal.SIGTERM], "the owner's handler had the signal"
        monkeypatch.setattr(cli, "OWN_PROCESS", True)
        with pytest.raises(Exit) as stopped, cli.writing(tmp_path / "out"):
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN, "an ignored SIGHUP stays ignored"
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # (the handler raises at once)
        assert stopped.value.exit_code == 143 and got == [signal.SIGTERM]
        assert capsys.readouterr().err == f"kafka-forensics: stopped by SIGTERM; nothing written to {tmp_path / 'out'}\n"
        assert signal.getsignal(signal.SIGTERM) is owner and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        logging.disable(logging.NOTSET)  # (the handler silences logging for the JVM's last words)
        for s, h in saved.items():
            signal.signal(s, h)


def test_rerun_after_the_kills_completes_with_the_same_findings(previous):
    out, cwd = previous["out"], previous["cwd"]
    run = Run(SRC, out, cwd)
    assert run.wait() == 0, "".join(run.stderr)[-3000:]
    assert comparable((out / "findings.json").read_bytes()) == comparable(previous["findings"])
    assert json.loads("".join(run.stdout)) == json.loads((out / "findings.json").read_bytes())
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name], "no staging or old sibling left behind"
    assert sorted(p.name for p in cwd.iterdir()) == [], "nothing written into the working directory"


def test_two_runs_into_different_dirs_at_once(tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    a, b = tmp_path / "a", tmp_path / "b"
    runs = [Run(SRC, a, cwd), Run(OTHER, b, cwd)]
    codes = [r.wait() for r in runs]
    assert codes == [0, 0], ["".join(r.stderr)[-2000:] for r in runs]
    for r in runs:
        assert "Traceback" not in "".join(r.stderr)
        assert no_orphans(r.proc.pid) == []
    assert sorted(p.name for p in cwd.iterdir()) == [], "derby.log / metastore_db / spark-warehouse in the cwd"
    # each catalog answers its own DIR's tables (the two queries at once, from the same working directory too)
    topics = {}
    queries = {out: subprocess.Popen([*CLI, "sql", str(out), "select distinct topic from replica_logs", "--format", "json"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd) for out in (a, b)}
    for out, q in queries.items():
        stdout, stderr = q.communicate(timeout=900)
        assert q.returncode == 0, stderr[-2000:]
        topics[out.name] = {json.loads(line)["topic"] for line in stdout.splitlines() if line.startswith("{")}
        locs = json.loads((out / "catalog" / "registered.json").read_text())
        assert locs["out"] == str(out.resolve())
    assert topics["a"] and topics["b"] and topics["a"] != topics["b"], "topics differ between the two captures"
    assert sorted(p.name for p in cwd.iterdir()) == [], "derby.log / metastore_db / spark-warehouse in the cwd"
    for out, src in ((a, SRC), (b, OTHER)):
        doc = json.loads((out / "findings.json").read_text())
        assert doc["input"]["paths"] == [str(src)]


def test_two_queries_on_one_dir_at_once(previous):
    # Derby boots a database in one JVM only: the second query gets a private catalog, not a lock error
    out, cwd = previous["out"], previous["cwd"]
    qs = [subprocess.Popen([*CLI, "sql", str(out), "select count(*) as n from batches", "--format", "json"], cwd=cwd,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [q.communicate(timeout=900) for q in qs]
    assert [q.returncode for q in qs] == [0, 0], [err[-2000:] for _, err in outs]
    assert [json.loads(o.strip().splitlines()[-1])["n"] for o, _ in outs] == [previous["batches"]] * 2
    assert "Traceback" not in "".join(err for _, err in outs)
