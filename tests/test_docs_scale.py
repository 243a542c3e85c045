"""docs/scale.md stays true to the code it sends users to: the Spark keys it tells them to set are
keys kafka-forensics leaves to Spark (a key the session sets itself would silently win over the
user's ``spark-defaults.conf``), the keys it says kafka-forensics sets are set, the benchmarks it
cites exist, and README and docs/design.md link it. Also: ``cost_bench.py``'s reading of Spark's
event log, which the page's figures come from, puts each task in its phase. No Spark here."""

from __future__ import annotations

import ast
import inspect
import json
import re
import sys

from conftest import REPO

from jobs.session import conf, start

SCALE = REPO / "docs" / "scale.md"


def keys_we_set(tmp_path) -> set[str]:
    """Every conf key ``get_session`` gives the session: its literal ``settings``, the sized confs
    (at a terabyte and at a kilobyte) and the catalog's."""
    tree = ast.parse(inspect.getsource(start.get_session))
    keys: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k in node.keys:
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    keys.add(k.value)
                elif isinstance(k, ast.Name):
                    keys.add(getattr(start, k.id))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and isinstance(node.slice, ast.Constant):
            keys.add(node.slice.value)
    for size in (10**12, 1000, None):
        keys |= set(conf.sized_confs(size, 8))
    return keys | set(conf.catalog_confs(tmp_path))


def knob_rows() -> dict[str, str]:
    """The "What you set" table: its first column (what) -> its knob cell."""
    section = SCALE.read_text(encoding="utf-8").split("## What you set", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    return {cells[0].strip("| "): cells[1] for cells in rows if len(cells) > 2}


def test_the_keys_users_are_told_to_set_are_left_to_spark(tmp_path):
    rows = knob_rows()
    ours = keys_we_set(tmp_path)
    told = {}
    for what, knob in rows.items():
        first = re.search(r"`([^`]+)`", knob)  # the first name a row gives is the one to set; later ones are what not to
        if first and first.group(1).startswith("spark."):
            told[what] = first.group(1)
    assert {"executor heap", "shuffle partitions", "the ingest's split", "the jobs' read split"} <= set(told), told
    assert not {k for k in told.values() if k in ours}, "the page tells users to set a key the session overrides"
    for key in ("spark.sql.shuffle.partitions", "spark.driver.memory"):  # the page says these are ours
        assert key in ours
        assert any(key in knob and not knob.startswith(f"`{key}`") for knob in rows.values()), key


def test_cited_benchmarks_exist_and_the_page_is_linked():
    text = SCALE.read_text(encoding="utf-8")
    cited = set(re.findall(r"\b([a-z_]+_bench\.py)\b", text))
    assert {"cost_bench.py", "depth_bench.py", "memory_bench.py"} <= cited
    assert all((REPO / "benchmarks" / name).is_file() for name in cited), cited
    for doc in ("README.md", "docs/design.md"):
        assert "docs/scale.md" in (REPO / doc).read_text(encoding="utf-8"), doc


def test_cost_bench_puts_each_task_in_its_phase(tmp_path):
    """A hand-made event log in Spark's JSON (the fields JsonProtocol writes): a job before the
    parse, the parse job of the ingest's job group, two jobs after it. Each task's CPU, shuffle and
    result bytes land in the phase of its stage's job, and the phases are dated by the jobs."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import cost_bench

    def job(n, start, end, stages, group=None):
        props = {"spark.jobGroup.id": group} if group else {}
        return [{"Event": "SparkListenerJobStart", "Job ID": n, "Submission Time": start, "Stage IDs": stages, "Properties": props},
                {"Event": "SparkListenerJobEnd", "Job ID": n, "Completion Time": end}]

    def task(stage, cpu_ns, written=0, read=0, result=0):
        return {"Event": "SparkListenerTaskEnd", "Stage ID": stage, "Task Metrics": {
            "Executor CPU Time": cpu_ns, "Executor Deserialize CPU Time": 0, "Result Size": result, "Peak Execution Memory": 0,
            "Disk Bytes Spilled": 0, "Input Metrics": {"Bytes Read": 0},
            "Shuffle Read Metrics": {"Remote Bytes Read": read, "Local Bytes Read": 0},
            "Shuffle Write Metrics": {"Shuffle Bytes Written": written}}}

    events = [*job(0, 1_000, 2_000, [0]), *job(1, 3_000, 9_000, [1], "kafka-forensics-parse-1-2"), task(1, 5e9, result=10),
              *job(2, 10_000, 11_000, [2, 3]), task(2, 1e9, written=300), task(3, 1e9, read=300, result=7),
              *job(3, 12_000, 15_000, [4]), task(4, 2e9), task(0, 1e9)]
    folder = tmp_path / "events" / "eventlog_v2_local-1"
    folder.mkdir(parents=True)
    (folder / "events_1_local-1").write_text("".join(json.dumps(e) + "\n" for e in events[:6]))
    (folder / "events_2_local-1").write_text("".join(json.dumps(e) + "\n" for e in events[6:]))
    (folder / "appstatus_local-1").write_text("")
    log = cost_bench.read_event_log(tmp_path / "events")
    spans, stage_phase = cost_bench.phases(log, 0.5, 20.0)
    assert spans == {"start": (0.5, 3.0), "parse": (3.0, 9.0), "jobs": (9.0, 15.0), "tail": (15.0, 20.0)}
    by_phase: dict[str, list] = {}
    for t in log["tasks"]:
        by_phase.setdefault(stage_phase[t["stage"]], []).append(t)
    assert sum(t["cpu"] for t in by_phase["parse"]) == 5 and sum(t["cpu"] for t in by_phase["jobs"]) == 4
    assert sum(t["shuffle_write"] for t in by_phase["jobs"]) == 300 == sum(t["shuffle_read"] for t in by_phase["jobs"])
    assert [t["result"] for t in by_phase["parse"]] == [10] and sum(t["result"] for t in by_phase["jobs"]) == 7
    assert [t["cpu"] for t in by_phase["start"]] == [1]
