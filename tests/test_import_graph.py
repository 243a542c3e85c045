"""The import graph, read from every module's imports (``ast``, nothing imported; the imports inside
functions and under ``TYPE_CHECKING`` count too): no circle, and no arrow up in the layering

    parsers <- jobs/store, jobs/session, jobs/*.py leaves <- jobs/{ingest,replicas,history}
            <- jobs/findings <- analyzer

sample_data (the writer and simulator) imports parsers only; jobs never imports analyzer or
sample_data. An arrow within one layer is fine (jobs/replicas reads jobs/ingest's helpers).
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGES = ("parsers", "jobs", "analyzer", "sample_data")

# layer of a module, by its longest matching prefix (jobs/session: being split out of
# jobs/store/spark.py, the same layer; fine if it does not exist yet)
LAYERS = {
    "parsers": 0,
    "jobs": 1,  # jobs/__init__ and the standard-library leaves beside it (errors, terminal, processes)
    "jobs.store": 1,
    "jobs.session": 1,
    "jobs.ingest": 2,
    "jobs.replicas": 2,
    "jobs.history": 2,
    "jobs.findings": 3,
    "analyzer": 4,
}
ROOMS_OF_JOBS = {"store", "session", "ingest", "replicas", "history", "findings"}
# arrows known to break the rule, each with why it is left (none today)
KNOWN: set[tuple[str, str]] = set()


def modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every module of ``PACKAGES`` under ``root`` (a package is its __init__)."""
    found = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ours that module ``name`` imports (``from p import m`` is module ``p.m`` when
    that is a module, else ``p``; relative imports made absolute)."""

    def ours(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(ours(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1] + [node.module or ""]).strip(".") if node.level else node.module
            found.update(ours(f"{base}.{a.name}") if f"{base}.{a.name}" in known else ours(base) for a in node.names)
    return {m for m in found if m and m != name}


def graph(root: Path) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imports(name, path, known) for name, path in known.items()}


def layer(name: str) -> int | None:
    top = name.split(".")
    if top[0] == "jobs" and len(top) > 1 and top[1] not in ROOMS_OF_JOBS and (REPO / "jobs" / top[1]).is_dir():
        raise AssertionError(f"{name}: a new room under jobs/; give it its layer in LAYERS")
    for n in range(len(top), 0, -1):
        if ".".join(top[:n]) in LAYERS:
            return LAYERS[".".join(top[:n])]
    return None  # sample_data


def wrong_arrows(g: dict[str, set[str]]) -> set[tuple[str, str]]:
    bad = set()
    for a, targets in g.items():
        for b in targets:
            if a.startswith("sample_data"):
                ok = b.startswith(("parsers", "sample_data"))
            elif b.startswith("sample_data"):
                ok = a.startswith("analyzer")
            else:
                ok = layer(b) <= layer(a)
            if not ok:
                bad.add((a, b))
    return bad


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_arrow_up():
    bad = wrong_arrows(graph(REPO)) - KNOWN
    assert not bad, "\n".join(f"{a} -> {b}" for a, b in sorted(bad))


def test_no_circle():
    assert not circles(graph(REPO))


def test_the_check_sees_an_arrow_up_and_a_circle(tmp_path):
    """The checker itself, on a planted tree: a parser importing a job, a circle in the findings
    room (as model -> registry -> detector -> model was), sample_data reading a job table."""
    files = {
        "parsers/__init__.py": "",
        "parsers/seg.py": "def f():\n    from jobs.store import io\n",
        "jobs/__init__.py": "",
        "jobs/store/__init__.py": "",
        "jobs/store/io.py": "import parsers.seg\n",
        "jobs/findings/__init__.py": "",
        "jobs/findings/model.py": "from .registry import KINDS\n",
        "jobs/findings/registry.py": "from . import loss\n",
        "jobs/findings/loss.py": "from jobs.findings.model import Finding\n",
        "analyzer/__init__.py": "",
        "sample_data/__init__.py": "",
        "sample_data/truth.py": "from jobs.store.io import x\nfrom parsers import seg\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    g = graph(tmp_path)
    assert wrong_arrows(g) == {("parsers.seg", "jobs.store.io"), ("sample_data.truth", "jobs.store.io")}
    assert sorted(circles(g)) == [["jobs.findings.loss", "jobs.findings.model", "jobs.findings.registry"],
                                  ["jobs.store.io", "parsers.seg"]]
