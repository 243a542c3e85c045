"""Inputs → brokers, log dirs and the list of files to parse. Pure Python, no Spark.

An INPUT is whatever an operator collected: a folder of broker folders, one broker folder
holding several log dirs (JBOD), a single log dir, or an extracted archive of any of these.
A *log dir* is a directory Kafka would load: it holds ``meta.properties``, a broker-level
checkpoint or marker, or partition directories (``topic-N``, ``…-delete`` …). We find log dirs
by walking down from each root and stop descending at the first one (its partition dirs are
part of it). A *broker* is identified by ``meta.properties`` (``node.id``/``broker.id``,
``cluster.id``, ``directory.id``); two log dirs carrying the same node id and cluster id are one
broker (JBOD). Without ``meta.properties`` the id comes from the folder name (the last number in
the log dir's name, then its parent's), and ``id_source`` says so.

``discover_inputs`` is the whole step from the command's INPUT paths (archives extracted first):
it runs before Spark starts, and inputs where no log dir is found stop there (``NoLogDirError``).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from jobs.errors import InputError
from jobs.ingest import archives, stores
from jobs.ingest import focus as focus_mod
from jobs.ingest.archives import printable_name
from jobs.ingest.focus import Focus
from parsers.broker_log import is_broker_log, node_from_name
from parsers.common import Problem
from parsers.files import KINDS, detect
from parsers.meta_properties import parse as parse_meta
from parsers.names import FIXED_NAMES, parse_partition_dir

log = logging.getLogger(__name__)

# names that make a directory a log dir by themselves (all log-dir level files of FIXED_NAMES
# except those that live inside partition dirs)
_LOG_DIR_MARKERS = frozenset(FIXED_NAMES) - {"partition.metadata", "leader-epoch-checkpoint", "quorum-state"}
WORK = "_work"  # archives are extracted under <staging dir>/_work/inputs/<n>
_NUMBER_RE = re.compile(r"(\d+)(?!.*\d)")


@dataclass
class FileEntry:
    """One file of a log dir, as the ingest tasks and the ``files`` table see it."""

    abs_path: str
    path: str  # relative to the input root (archives: "<archive name>/<path inside>")
    broker: int
    log_dir: str  # relative to the input root
    topic: str | None
    partition: int | None
    dir_state: str | None
    kind: str | None
    size: int
    mtime_ms: int
    archive: str | None


@dataclass
class LogDir:
    abs_path: Path | PurePosixPath
    rel: str
    input_root: str
    archive: str | None
    tree: Tree | None = None  # where it is (``LOCAL`` when None)
    node_id: int | None = None
    cluster_id: str | None = None
    directory_id: str | None = None
    partitions: int = 0
    has_broker_checkpoints: bool = False


@dataclass
class Broker:
    broker: int
    cluster_id: str | None
    id_source: str  # meta.properties | folder
    log_dirs: list[str] = field(default_factory=list)
    directory_ids: list[str] = field(default_factory=list)
    roles: str = "broker"
    files: int = 0
    bytes: int = 0


@dataclass
class Discovery:
    brokers: list[Broker]
    files: list[FileEntry]
    problems: list[Problem]  # discovery's and the archives' (each names its file: ``path``)
    seconds: float = 0.0
    focus: Focus | None = None  # the partitions read: analyze's --topic/--partition within the focused collections'


@dataclass(frozen=True)
class Root:
    """One input root: a folder (maybe the extraction of an archive, or a prefix on an object
    store) and how its paths are named."""

    path: Path | PurePosixPath
    prefix: str  # prepended to relative paths ("" for folders, "<archive name>" for archives)
    archive: str | None = None
    tree: Tree | None = None  # where it is: None for the local filesystem, a ``stores.Listing`` for a store
    url: str | None = None  # the INPUT's URL (a store's root)

    @property
    def listing(self) -> Tree:
        """How its folders are walked and its files named: ``tree``, or the local filesystem."""
        return self.tree or LOCAL


def _is_log_dir(path: Path, names: list[str], dirs: list[str], tree: Tree) -> bool:
    """Markers make a log dir; failing those, partition-named children holding Kafka files do,
    unless such a child is itself a log dir (``broker-1/`` parses as topic "broker", partition 1)."""
    if any(n in _LOG_DIR_MARKERS for n in names):
        return True
    holds_kafka_files = False
    for d in dirs:
        if parse_partition_dir(d) is None:
            continue
        try:
            child = tree.scan(path / d)[1]
        except OSError:
            continue
        if any(n in _LOG_DIR_MARKERS for n in child):
            return False
        # (a broker's server.log is no partition's file: ``broker-1/server.log`` beside
        # ``broker-1/kafka-logs/`` is a broker's folder, not partition 1 of a topic "broker")
        holds_kafka_files = holds_kafka_files or any(detect(n) not in (None, "broker_log") for n in child)
    return holds_kafka_files


_SPECIAL = ((stat.S_ISFIFO, "a fifo (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"))


def _skipped(path: str, why: str, problems: list[Problem]) -> None:
    """One warning line (``%r``: a newline or odd byte in a name cannot break it) and a problem row."""
    log.warning("%r skipped: %s", printable_name(path), why)
    problems.append(Problem(0, "unreadable_file", f"skipped: {why}", printable_name(path)))


def _walk(top: Path, stats: dict[str, os.stat_result] | None = None) -> Iterator[tuple[Path, list[str], list[str], list[tuple[str, str]]]]:
    """Like ``os.walk(top)`` (top-down, sorted, prune ``dirs`` in place) but without recursion
    (3.11's recurses: a thousand nested folders would raise RecursionError) and never following
    or opening anything: yields (folder, sub-folders, regular files, [(name, why skipped)]) where
    the skipped are links, fifos, sockets, devices (opening a fifo blocks), names that are not
    UTF-8 (Arrow and Spark cannot carry them) and folders that cannot be listed. ``stats``: filled
    with each regular file's ``lstat`` by name, for the folder just yielded (one stat a file)."""
    stack = [top]
    while stack:
        here = stack.pop()
        dirs: list[str] = []
        files: list[str] = []
        odd: list[tuple[str, str]] = []
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            odd.append((".", f"folder cannot be listed: {exc.strerror or exc}"))
            entries = []
        for e in entries:
            try:
                e.name.encode("utf-8")
                st = e.stat(follow_symlinks=False)
            except UnicodeEncodeError:
                odd.append((e.name, "name is not valid UTF-8"))
                continue
            except OSError as exc:
                odd.append((e.name, f"cannot be examined: {exc.strerror or exc}"))
                continue
            if stat.S_ISDIR(st.st_mode):
                dirs.append(e.name)
            elif stat.S_ISREG(st.st_mode):
                files.append(e.name)
                if stats is not None:
                    stats[e.name] = st
            elif stat.S_ISLNK(st.st_mode):
                try:
                    target = os.readlink(e.path)
                except OSError:
                    target = "?"
                odd.append((e.name, f"a symbolic link (to {printable_name(target)!r}); links are never followed"))
            else:
                odd.append((e.name, next((why for test, why in _SPECIAL if test(st.st_mode)), "not a regular file")))
        yield here, dirs, files, odd
        if stats is not None:
            stats.clear()
        stack.extend(here / d for d in reversed(dirs))


class LocalTree:
    """The local filesystem as discovery reads it (``stores.Listing`` is an object store's): a walk
    that never follows a link, a folder's entries, a file's stat, whether we may read it."""

    @staticmethod
    def walk(top: Path, stats: dict | None = None) -> Iterator[tuple[Path, list[str], list[str], list[tuple[str, str]]]]:
        return _walk(top, stats)

    @staticmethod
    def scan(path: Path) -> tuple[list[str], list[str]]:
        """(sub-folders, regular files) of ``path``, links not followed."""
        dirs, files = [], []
        with os.scandir(path) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    dirs.append(e.name)
                elif e.is_file(follow_symlinks=False):
                    files.append(e.name)
        return sorted(dirs), sorted(files)

    @staticmethod
    def abs_path(path: Path) -> str:
        return str(path)

    @staticmethod
    def stat(path: Path) -> os.stat_result | None:
        """``lstat`` of a regular file, None for anything else (a link or fifo is never read)."""
        try:
            st = os.lstat(path)
        except OSError:
            return None
        return st if stat.S_ISREG(st.st_mode) else None

    @staticmethod
    def unreadable(path: Path) -> str | None:
        """Why a listed file cannot be read (gone since the walk, or not ours to read), or None."""
        if os.access(path, os.R_OK):
            return None
        try:  # gone since the walk, or there and not ours to read
            os.lstat(path)
        except OSError as exc:
            return f"cannot be examined: {exc.strerror or exc}"
        return "permission denied"


Tree = LocalTree | stores.Listing
LOCAL = LocalTree()


def _rel(prefix: str, sub: str, name: str) -> str:
    parts = [p for p in (prefix, "" if sub == "." else sub, "" if name == "." else name) if p]
    return "/".join(parts) or "."


def find_log_dirs(root: Root, problems: list[Problem] | None = None) -> list[LogDir]:
    """Every log dir under ``root`` (the root itself may be one). Entries skipped outside log dirs
    (links, fifos...) go to ``problems``; those inside a log dir are reported by ``_walk_files``."""
    found: list[LogDir] = []
    problems = [] if problems is None else problems
    tree = root.listing
    for here, dirnames, filenames, odd in tree.walk(root.path):
        if _is_log_dir(here, filenames, dirnames, tree):
            rel = here.relative_to(root.path).as_posix()
            if rel == ".":
                rel = root.prefix or root.path.name  # the input is itself a log dir: name it by its folder
            else:
                rel = f"{root.prefix}/{rel}" if root.prefix else rel
            found.append(LogDir(here, rel, str(root.path), root.archive, root.tree))
            dirnames[:] = []  # partition dirs belong to this log dir
        else:
            sub = here.relative_to(root.path).as_posix()
            for name, why in odd:
                _skipped(_rel(root.prefix or root.path.name, sub, name), why, problems)
    return found


def _read_meta(ld: LogDir, problems: list[Problem]) -> None:
    meta = ld.abs_path / "meta.properties"
    tree = ld.tree or LOCAL
    st = tree.stat(meta)
    if st is None:
        return  # a link or fifo is never read (it is reported with the log dir's files)
    rel = f"{ld.rel}/meta.properties"
    try:
        with stores.listed_bytes(tree.abs_path(meta), st.st_size) as fb:  # no fifo swapped in can block it
            parsed = parse_meta(fb.data, rel)
    except OSError as exc:
        problems.append(Problem(0, "unreadable_file", str(exc), rel))
        return
    if parsed.table.num_rows:
        row = parsed.table.to_pylist()[0]
        ld.node_id, ld.cluster_id, ld.directory_id = row["node_id"], row["cluster_id"], row["directory_id"]


def _folder_id(ld: LogDir) -> int | None:
    for name in (ld.abs_path.name, ld.abs_path.parent.name):
        m = _NUMBER_RE.search(name)
        if m and len(m.group(1)) <= 9:
            return int(m.group(1))
    return None


def _walk_files(ld: LogDir, broker: int, problems: list[Problem]) -> list[FileEntry]:
    """The regular files of a log dir; what is skipped (see ``_walk``, plus files we may not read
    and folders named like a Kafka file) is one warning line and one problem row each."""
    out: list[FileEntry] = []
    stats: dict[str, os.stat_result] = {}
    tree = ld.tree or LOCAL
    for here, dirnames, filenames, odd in tree.walk(ld.abs_path, stats):
        sub = here.relative_to(ld.abs_path).as_posix()
        for name, why in odd:
            _skipped(_rel(ld.rel, sub, name), why, problems)
        for name in [d for d in dirnames if detect(d)]:
            dirnames.remove(name)  # e.g. a folder named 00000000000000000000.log: not a segment
            _skipped(_rel(ld.rel, sub, name), "a folder named like a Kafka file", problems)
        topic = partition = state = None
        if sub != ".":
            parsed = parse_partition_dir(sub.split("/", 1)[0])
            if parsed is not None:
                topic, partition, state = parsed
        for name in sorted(filenames):
            full = tree.abs_path(here / name)
            rel = f"{ld.rel}/{name}" if sub == "." else f"{ld.rel}/{sub}/{name}"
            st = stats[name]  # (the walk's own lstat of it)
            if why := tree.unreadable(here / name):
                _skipped(rel, why, problems)
                continue
            out.append(FileEntry(full, rel, broker, ld.rel, topic, partition, state, detect(name),
                                 st.st_size, int(st.st_mtime * 1000), ld.archive))
    return out


def _broker_logs(root: Root, log_dirs: list[LogDir], broker_of: dict[str, int]) -> list[FileEntry]:
    """server.log / controller.log / state-change.log files (rotated, gzipped) anywhere under
    ``root`` outside the log dirs: beside a broker's log dir, in a ``logs/`` or
    ``server-logs/`` folder. Whose they are: a node id in the name (``node-1-server.log.gz``),
    else the one broker whose log dirs share the nearest folder with the file, else -1 (the
    lines themselves often name the node). Links, fifos and odd names were already reported by
    ``find_log_dirs``' walk; here they are simply not taken."""
    inside = {ld.abs_path for ld in log_dirs}
    if root.path in inside:  # the input is itself a log dir: all of it is ``_walk_files``' (a walk
        return []  # here would list its logs twice, under other names, and stat every file again)
    out: list[FileEntry] = []
    tree = root.listing
    stats: dict = {}
    for here, dirnames, filenames, _odd in tree.walk(root.path, stats):
        dirnames[:] = [d for d in dirnames if here / d not in inside]
        for name in filenames:
            if not is_broker_log(name) or detect(name) != "broker_log":  # (the first, a regex, rules out most names)
                continue
            full = here / name
            st = stats[name]  # (the walk's own lstat of it)
            node = node_from_name(name)
            if node is None:
                node = _nearest_broker(here, log_dirs, broker_of)
            sub = here.relative_to(root.path).as_posix()
            folder = _rel(root.prefix, sub, ".") if (root.prefix or sub != ".") else root.path.name
            out.append(FileEntry(tree.abs_path(full), f"{folder}/{name}", node, folder, None, None, None, "broker_log",
                                 st.st_size, int(st.st_mtime * 1000), root.archive))
    return out


def _nearest_broker(here: Path, log_dirs: list[LogDir], broker_of: dict[str, int]) -> int:
    for folder in (here, *here.parents):
        ids = {broker_of[ld.rel] for ld in log_dirs if folder in ld.abs_path.parents or ld.abs_path == folder}
        if len(ids) == 1:
            return ids.pop()
        if len(ids) > 1:
            return -1
    return -1


def discover(roots: list[Root]) -> Discovery:
    """Log dirs under every root, grouped into brokers, with every file they hold."""
    problems: list[Problem] = []
    log_dirs = [ld for root in roots for ld in find_log_dirs(root, problems)]
    for ld in log_dirs:
        _read_meta(ld, problems)
        try:
            dirs, names = (ld.tree or LOCAL).scan(ld.abs_path)
        except OSError:
            dirs, names = [], []  # reported when its files are walked
        ld.partitions = sum(1 for d in dirs if parse_partition_dir(d) and d != "__cluster_metadata-0")
        ld.has_broker_checkpoints = any(n in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint") for n in names)
    brokers: dict[tuple[str | None, int], Broker] = {}
    used_ids = {ld.node_id for ld in log_dirs if ld.node_id is not None}
    files: list[FileEntry] = []
    synthetic = -1
    for ld in log_dirs:
        if ld.node_id is not None:
            key, source = (ld.cluster_id, ld.node_id), "meta.properties"
        else:
            fid = _folder_id(ld)
            said = f"broker id {fid} taken from the folder name"
            if fid is None or (fid in used_ids and (None, fid) not in brokers):
                said = "no broker id could be found (no number in the folder name)" if fid is None else \
                    f"the folder name's broker id {fid} is already taken"
                said += f"; calling it broker {synthetic}"
                fid, synthetic = synthetic, synthetic - 1
            key, source = (None, fid), "folder"
            log.warning("%s: no usable meta.properties; %s", ld.rel, said)
        b = brokers.get(key)
        if b is None:
            b = brokers[key] = Broker(key[1], key[0], source)
        b.log_dirs.append(ld.rel)
        if ld.directory_id:
            b.directory_ids.append(ld.directory_id)
        ld_files = _walk_files(ld, b.broker, problems)
        b.files += len(ld_files)
        b.bytes += sum(f.size for f in ld_files)
        files.extend(ld_files)
    broker_of = {rel: b.broker for b in brokers.values() for rel in b.log_dirs}
    for root in roots:
        files.extend(_broker_logs(root, [ld for ld in log_dirs if ld.input_root == str(root.path)], broker_of))
    by_id: dict[int, list[Broker]] = {}
    for b in brokers.values():
        by_id.setdefault(b.broker, []).append(b)
    for bid, group in by_id.items():
        if len(group) > 1:
            problems.append(Problem(0, "cluster_id_mismatch", f"log dirs of node {bid} carry different cluster ids: "
                                    f"{sorted(str(b.cluster_id) for b in group)}", ",".join(ld for b in group for ld in b.log_dirs)))
    for b in brokers.values():
        mine = [ld for ld in log_dirs if ld.rel in b.log_dirs]
        # guessed: a KRaft controller-only node holds nothing but __cluster_metadata-0
        b.roles = "broker" if any(ld.partitions or ld.has_broker_checkpoints for ld in mine) else "controller"
    return Discovery(sorted(brokers.values(), key=lambda b: b.broker), files, problems)


LOOKED_FOR = "meta.properties, broker checkpoints, or partition folders like orders-0 holding .log segments"


class NoLogDirError(InputError, ValueError):
    """No input holds a log dir: nothing of any broker can be read, so there is nothing to analyze
    (and no verdict to give). The CLI prints it as one line and exits 2."""


class InputPathError(InputError, ValueError):
    """An INPUT that cannot be read as one: missing, unreadable, a lone Kafka file, or neither a
    folder nor an archive. Refused before anything is extracted (one line, exit 2)."""


def _root_name(root: Root) -> str:
    return printable_name(root.archive or root.url or str(root.path))


def found_instead(root: Root) -> str:
    """What a root without a log dir holds, in a few words, so the line that refuses it tells the
    operator what was handed over: nothing, Kafka files outside any partition folder (a lone
    segment can be dumped, not analyzed), broker logs alone, or files none of which is Kafka's."""
    files: list[str] = []
    kafka: list[tuple[str, str]] = []
    folders = skipped = 0
    for here, dirs, names, odd in root.listing.walk(root.path):
        sub = here.relative_to(root.path).as_posix()
        folders += len(dirs)
        skipped += len(odd)
        for name in names:
            rel = name if sub == "." else f"{sub}/{name}"
            files.append(rel)
            if kind := detect(name):
                kafka.append((rel, kind))
    odd = f"; {skipped} links or special files skipped (never followed)" if skipped else ""
    if not files:
        return ("found nothing: it is empty" if not folders else f"found {folders} folders and no file") + odd
    if not kafka:
        return f"found {len(files)} files, none a Kafka file (e.g. {', '.join(printable_name(f) for f in files[:3])})" + odd
    rel, kind = kafka[0]
    more = f" and {len(kafka) - 1} more Kafka files" if len(kafka) > 1 else ""
    if all(k == "broker_log" for _, k in kafka):
        return f"found {printable_name(rel)} (a broker log){more}, but broker logs are read only beside the log dirs they describe"
    dump = "" if root.archive or root.url else f"; read one file with `kafka-forensics dump {printable_name(str(root.path / rel))}`"
    return (f"found {printable_name(rel)} ({kind}){more} outside any partition folder (Kafka keeps segments in topic-N folders "
            f"inside a log dir: for a partition folder, give the folder above it){dump}")


def require_log_dirs(found: Discovery, roots: list[Root]) -> None:
    """Raise ``NoLogDirError`` when no root held a log dir (an empty folder, a folder of other
    files, a lone segment): analyzing nothing must never end in a "Clean" verdict. Runs on the
    driver before Spark starts, so unusable input fails in well under a second. One root among
    several without a log dir (a ``server-logs/`` folder, say) is fine."""
    if found.brokers:
        return
    if not roots:
        raise NoLogDirError("no usable input: every archive given was refused")
    if len(roots) == 1:
        raise NoLogDirError(f"no Kafka log dir found in {_root_name(roots[0])} (looked for {LOOKED_FOR}); "
                            f"{found_instead(roots[0])}")
    each = "; ".join(f"{_root_name(r)}: {found_instead(r)}" for r in roots)
    raise NoLogDirError(f"no Kafka log dir found in any input (looked for {LOOKED_FOR}); {each}")


def _read_once(inputs: list[Path | str], listed: dict[str, tuple] | None = None) -> list[Path | str]:
    """The inputs without a folder given twice or inside another folder given (``analyze c/broker-1
    c``, a shell glob beside its parent): read twice, its log dirs would be two log dirs of the same
    broker holding the same partitions, and every file would count twice. One warning line each.
    ``listed``: what each store URL names (``stores.list_prefix``): a prefix is a folder."""
    listed = listed or {}

    def folder(raw) -> PurePosixPath | Path | None:
        if stores.is_url(raw):
            return PurePosixPath(raw.rstrip("/")) if listed[raw][0] == "folder" else None
        return Path(raw).resolve() if Path(raw).is_dir() else None

    folders = [f for f in map(folder, inputs) if f is not None]
    kept, seen = [], set()
    for raw in inputs:
        if (here := folder(raw)) is not None:
            outer = next((f for f in folders if f in here.parents), None)
            if here in seen or outer is not None:
                log.warning("%s: %s; read once", raw, "given twice" if outer is None else f"inside {outer}, which is given too")
                continue
            seen.add(here)
        kept.append(raw)
    return kept


def resolve_roots(inputs: list[Path | str], work_dir: Path) -> tuple[list[Root], list[dict]]:
    """Input paths and store URLs → roots to discover in; archives (local or on a store) are
    extracted into ``work_dir/_work``, a store's folder is listed once."""
    roots: list[Root] = []
    problems: list[Problem] = []
    used: set[str] = set()

    def name_for(path: Path) -> str:
        # several inputs: paths start with the input's own name so they cannot collide
        name, n = path.name, 1
        while name in used:
            n += 1
            name = f"{path.name}~{n}"
        used.add(name)
        return name

    listed: dict[str, tuple] = {}
    for raw in inputs:  # every input first: a typo fails before a long extraction
        if stores.is_url(raw):
            listed[raw] = stores.list_prefix(raw)  # (StoreError: the bucket, the credentials, the network)
            continue
        if not Path(raw).exists():
            raise InputPathError(f"{raw}: no such file or directory")
        if not os.access(raw, os.R_OK):
            raise InputPathError(f"{raw}: not readable")
    inputs = _read_once(inputs, listed)
    for i, raw in enumerate(inputs):
        if stores.is_url(raw):
            kind, listing, st = listed[raw]
            name = PurePosixPath(urlsplit(raw).path.rstrip("/")).name or urlsplit(raw).netloc
            if kind == "folder":
                roots.append(Root(listing.root, name_for(PurePosixPath(name)) if len(inputs) > 1 else "", tree=listing, url=raw))
                continue
            path, opener = PurePosixPath(name), functools.partial(stores.open_stream, raw)
            size = st.st_size
        else:
            path, opener, size = Path(raw), None, None
        if opener is None and path.is_dir():
            roots.append(Root(path.resolve(), name_for(path.resolve()) if len(inputs) > 1 else ""))
        elif archives.is_archive(path) or (opener is not None and path.name.lower().endswith(archives.SUFFIXES)):
            dest = Path(work_dir) / WORK / "inputs" / f"{i}"
            try:  # (an archive on a store: streamed from it, unpacked once here, as a local one is)
                problems += archives.extract(path, dest, opener=opener, size=size, said=raw if opener else None)
            except archives.ArchiveError as exc:
                if len(inputs) == 1:
                    raise  # the only input is unusable: one line, exit 2
                # one refused archive among several: say so, keep a problem row, analyze the rest
                log.warning("%s", exc)
                problems.append(Problem(0, exc.kind, str(exc), printable_name(path.name)))
                continue
            roots.append(Root(dest, name_for(path), path.name))
        elif opener is not None:
            what = f"a Kafka file ({kind})" if (kind := detect(path.name)) else "an object that is no supported archive"
            raise InputPathError(f"{raw}: {what}, not a prefix of log dirs; give the prefix that holds the log dirs, or a "
                                 ".tar, .tar.gz, .tgz, .tar.xz or .zip of them")
        elif kind := detect(path.name):
            raise InputPathError(f"{path}: a Kafka file ({kind}), not a log dir; read it alone with `kafka-forensics dump {path}`, "
                             "or give the log dir that holds it")
        else:
            raise InputPathError(f"{path}: not a directory or a supported archive (.tar, .tar.gz, .tgz, .tar.xz, .zip)")
    return roots, problems


def focused(found: Discovery, focus: Focus) -> Discovery:
    """``found`` without the files of partitions outside ``focus`` (their brokers' counts too).
    A focus that keeps no partition at all is unusable input: it says which topics there are."""
    topics = {f.topic for f in found.files if f.topic is not None and not f.topic.startswith("__")}
    found.files = [f for f in found.files if focus.kept(f.topic, f.partition)]
    kept = {(f.topic, f.partition) for f in found.files if f.topic is not None and not f.topic.startswith("__")}
    if not kept and focus.wanted():  # (a collection focused by --since alone names no partition)
        raise NoLogDirError(f"{focus.wanted()}: no such partition in the input (its topics: {', '.join(sorted(topics)) or 'none'})")
    for b in found.brokers:
        mine = [f for f in found.files if f.broker == b.broker]
        b.files, b.bytes = len(mine), sum(f.size for f in mine)
    return found


def discover_inputs(inputs: list[Path | str], work_dir: Path, focus: Focus | None = None) -> Discovery:
    """Step 1 alone, on the driver and without Spark: check the inputs, extract archives into
    ``work_dir``, find the brokers (only the files of ``focus``'s partitions, within those of the
    focused collections among the inputs: ``found.focus``). Raises
    (``FileNotFoundError``, ``ArchiveError``, ``NoLogDirError``...) when the inputs hold nothing to
    analyze, so callers can run it before starting a JVM and unusable input fails in under a second."""
    t0 = time.monotonic()
    roots, problems = resolve_roots(inputs, work_dir)
    found = discover(roots)
    require_log_dirs(found, roots)
    # (local roots, an archive unpacked to one among them, and folders on an object store)
    collected = collections(roots)
    if collected:
        focus = (focus or Focus()).within(collected)
    if focus is not None:
        found = focused(found, focus)
    found.focus = focus
    found.problems[:0] = problems
    found.seconds = time.monotonic() - t0
    return found


def _scanned(tree: Tree, folder: Path | PurePosixPath) -> tuple[list[str], list[str]]:
    """``tree.scan``, nothing for a folder that cannot be listed (discovery says so; the notes are
    only looked for)."""
    try:
        return tree.scan(folder)
    except OSError:
        return [], []


def collections(roots: list[Root]) -> list[focus_mod.Collected]:
    """The focused collections among the input roots: a COLLECT.txt in a root or one folder down
    (an archive unpacks to its one folder; a folder of unpacked ones; a bundle uploaded to a store
    as unpacked), walked as discovery walks the root (links never followed) and read in one go (one
    ranged GET on a store). Without this, a focused bundle would read as a broker whose other
    partitions went missing."""
    out = []
    for root in roots:
        tree = root.listing
        dirs, files = _scanned(tree, root.path)
        notes = [root.path / focus_mod.NOTES] if focus_mod.NOTES in files else []
        notes += [root.path / d / focus_mod.NOTES for d in dirs if focus_mod.NOTES in _scanned(tree, root.path / d)[1]]
        for path in notes:
            st = tree.stat(path)
            if st is None or st.st_size > MAX_NOTES_BYTES:
                continue
            try:
                with stores.listed_bytes(tree.abs_path(path), st.st_size) as fb:
                    text = fb.data.decode("utf-8", errors="replace")
            except OSError:
                continue
            rel = path.relative_to(root.path).as_posix()
            if (found := focus_mod.read_notes(text, f"{root.prefix}/{rel}" if root.prefix else rel)) is not None:
                out.append(found)
    return out


MAX_NOTES_BYTES = 16 << 20  # a COLLECT.txt lists every file left out: large for a big broker, never this large
MAX_CHANGE_EXAMPLES = 5


def changes_since(files: list[FileEntry]) -> dict:
    """Which listed files moved since discovery (size or mtime changed, or gone), by a fresh
    ``lstat`` of each: a live broker's log dir (retention deleting, segments rolling, the active
    segment growing) is read as it was listed, and the report must say the ground moved.
    Files extracted from an archive are ours and cannot move, and no broker appends to an object
    on a store: neither is looked at."""
    changed, removed, examples = 0, 0, []
    for f in files:
        if f.archive is not None or stores.is_url(f.abs_path):  # (no broker writes to an object store)
            continue
        try:
            st = os.lstat(f.abs_path)
        except FileNotFoundError:
            removed += 1
            what = "removed"
        except OSError:
            continue
        else:
            if st.st_size == f.size and int(st.st_mtime * 1000) == f.mtime_ms:
                continue
            changed += 1
            what = f"{f.size} -> {st.st_size} bytes" if st.st_size != f.size else "modified"
        if len(examples) < MAX_CHANGE_EXAMPLES:
            examples.append(f"{f.path} ({what})")
    return {"files_changed": changed, "files_removed": removed, "examples": examples}


def changes_text(changes: dict) -> str | None:
    """One sentence for the report and the log when the input moved while it was read, else None."""
    changed, removed = changes.get("files_changed") or 0, changes.get("files_removed") or 0
    if not changed and not removed:
        return None
    return (f"the input changed while it was read (a live broker?): {changed} files changed and {removed} removed "
            f"since discovery, e.g. {', '.join(changes.get('examples') or [])}; each file was read as it was listed, "
            "up to its listed size")


def parseable(kind: str | None) -> bool:
    """Whether ingest hands this kind to a parser (pending_*, lock, quorum-state: manifest only)."""
    return kind in KINDS


def input_bytes(inputs: list[Path]) -> int:
    """Bytes of every regular file under ``inputs`` (archives as stored), before anything is read:
    what ``jobs.session.conf.sized_confs`` sizes Spark by. Links are not followed, as discovery
    does not. An input on an object store (a URL) counts nothing here: its listing is discovery's."""
    total = 0
    for top in inputs:
        if stores.is_url(top):
            continue
        for root, _dirs, names in os.walk(top):
            for name in names:
                try:
                    st = os.lstat(os.path.join(root, name))
                except OSError:
                    continue
                total += st.st_size if st.st_mode & 0o170000 == 0o100000 else 0
        if os.path.isfile(top):
            total += os.path.getsize(top)
    return total
