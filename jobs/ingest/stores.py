"""Inputs on object stores (``s3://``, ``gs://``, ``abfs://``, ``hdfs://``): listed by the driver,
read by the executors with ranged reads, through ``pyarrow.fs``. No Spark here.

Why pyarrow's filesystems: pyarrow is already a dependency and has all four (S3, GCS, Azure Data
Lake, HDFS), each resolving credentials from its store's standard chain (for S3: the environment
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, a profile, an instance
role; the endpoint from ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``), so nothing of ours ever
holds a secret. What the driver resolved and an executor cannot know from its own environment
(an S3 endpoint, a bucket's region) travels to the executors as a ``Store``, which holds no
credential: executors find theirs in their own chain (on a cluster: the instance role, or
``spark.executorEnv.AWS_*``). Nothing of a ``Store`` is written to DIR, run.json or a log line:
inputs are named by their URL alone, and a URL carrying credentials (``s3://KEY:SECRET@…``) is
refused.

A file of the input is named by its URL everywhere a local file is named by its absolute path
(``FileEntry.abs_path``, the task list); ``listed_bytes`` and ``listed_window`` open either.
An object is read in ranges: a whole small file in one GET of its listed size, a span of a split
segment in one GET of its span (never the whole object), the whole-file hash of a split segment
in ``HASH_BLOCK`` ranges. What the store refuses (credentials, a missing bucket, throttling past
``MAX_ATTEMPTS`` attempts, a timeout) is a ``StoreError``: one line naming the URL, exit 2;
an object gone since it was listed is what a file removed since discovery is (a ``FileNotFoundError``).
"""

from __future__ import annotations

import functools
import io
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from jobs.errors import InputError
from parsers.common import FileBytes, FileChanged, FileWindow

# an INPUT on an object store (``s3://…``): a scheme, then ``://``
STORE_URL = re.compile(r"^([a-z][a-z0-9+.-]*)://", re.I)
SCHEMES = ("s3", "gs", "abfs", "abfss", "hdfs")
MAX_ATTEMPTS = 3  # attempts of one request (a throttled or failed read), then the run stops: never a hang
CONNECT_TIMEOUT = 10.0  # seconds
REQUEST_TIMEOUT = 60.0  # seconds without a byte
GCS_RETRY_SECONDS = 15.0  # GCS retries by time, 15 minutes by default
HASH_BLOCK = 32 << 20
STREAM_BUFFER = 8 << 20  # an archive on a store is streamed in ranges of this size
MAX_SAID = 400  # characters of a store's own error message kept in our one line


class StoreError(InputError):
    """The store refused or failed a request (credentials, bucket, throttling, network), after
    bounded retries: the message is one line naming the URL (exit 2). Not an ``OSError``: a file
    the store cannot serve must stop the run, not become an ``unreadable_file`` row of evidence."""


def is_url(path: object) -> bool:
    """Whether an INPUT (or a listed file's ``abs_path``) is on an object store."""
    return isinstance(path, str) and STORE_URL.match(path) is not None


def input_arg(raw: str | os.PathLike) -> str | os.PathLike:
    """An INPUT as given on the command line: a URL stays a string (``Path`` would fold its
    ``//``), anything else is a local path."""
    from pathlib import Path

    return raw if is_url(raw) else Path(raw)


@dataclass(frozen=True)
class Store:
    """How to reach one bucket (container, namenode): its scheme, its authority, and the options
    the driver resolved from its own chain that an executor could not (an S3 endpoint and
    region). Never a credential: it travels to executors in the task's closure."""

    scheme: str
    authority: str
    options: tuple[tuple[str, Any], ...] = ()


_known: dict[tuple[str, str], Store] = {}
_lock = threading.Lock()


def known() -> dict[tuple[str, str], Store]:
    """The stores this process resolved, to hand to the executors (``use``)."""
    with _lock:
        return dict(_known)


def use(stores: dict[tuple[str, str], Store]) -> None:
    """On an executor: the driver's stores, so its reads go where the driver's listing went."""
    with _lock:
        _known.update(stores)


def _split(url: str) -> tuple[str, str, str]:
    """(scheme, authority, the path in pyarrow's terms) of a store URL."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise StoreError(f"{url}: {scheme}:// is not a supported store (s3://, gs://, abfs://, abfss://, hdfs://)")
    if ("@" in parts.netloc and scheme not in ("abfs", "abfss")) or parts.password is not None:
        shown = f"{scheme}://…@{parts.netloc.rsplit('@', 1)[1]}{parts.path}"  # (the secret is not repeated)
        raise StoreError(f"{shown}: credentials in the URL are refused (they would be written to run.json); "
                         "give them the store's standard way (for S3: AWS_ACCESS_KEY_ID..., a profile, an instance role)")
    if not parts.netloc:
        raise StoreError(f"{url}: no bucket in the URL (e.g. s3://bucket/prefix)")
    key = parts.path.strip("/")
    if scheme == "hdfs":
        path = "/" + key
    elif scheme in ("abfs", "abfss"):
        container = parts.netloc.split("@", 1)[0]
        path = f"{container}/{key}" if key else container
    else:
        path = f"{parts.netloc}/{key}" if key else parts.netloc
    return scheme, parts.netloc, path


def store_for(url: str) -> Store:
    """The ``Store`` of ``url``'s bucket: resolved once per process, from this process's chain
    (the driver's, or what ``use`` was given)."""
    scheme, authority, _ = _split(url)
    with _lock:
        found = _known.get((scheme, authority))
    if found is not None:
        return found
    options: dict[str, Any] = {}
    if scheme == "s3":
        options = _s3_options(url)
    store = Store(scheme, authority, tuple(sorted(options.items())))
    with _lock:
        _known.setdefault((scheme, authority), store)
    return store


def _s3_options(url: str) -> dict[str, Any]:
    """The endpoint, scheme and region pyarrow resolves for ``url`` from the standard chain
    (``FileSystem.from_uri`` asks the bucket for its region when none is configured)."""
    from pyarrow import fs

    with errors(url):
        probe, _ = fs.FileSystem.from_uri(url)
    said = probe.__reduce__()[1][0]  # the resolved options; secrets only when given explicitly, never here
    return {"region": probe.region, "endpoint_override": said.get("endpoint_override") or None,
            "scheme": said.get("scheme") or "https"}


@functools.cache
def _filesystem(store: Store):
    """A pyarrow filesystem for ``store`` (one per process and store), with bounded retries and
    timeouts: a store that throttles or stops answering ends the run, it never hangs it."""
    from pyarrow import fs

    options = dict(store.options)
    if store.scheme == "s3":
        return fs.S3FileSystem(**options, connect_timeout=CONNECT_TIMEOUT, request_timeout=REQUEST_TIMEOUT,
                               retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=MAX_ATTEMPTS))
    if store.scheme == "gs":
        from datetime import timedelta

        return fs.GcsFileSystem(retry_time_limit=timedelta(seconds=GCS_RETRY_SECONDS))
    url = f"{store.scheme}://{store.authority}/"
    if store.scheme in ("abfs", "abfss") and not hasattr(fs, "AzureFileSystem"):
        import pyarrow

        raise StoreError(f"{url}: abfs:// needs pyarrow with AzureFileSystem (17 or later; this is {pyarrow.__version__})")
    try:
        return fs.FileSystem.from_uri(url)[0]
    except Exception as exc:  # (OSError, ValueError, ArrowException: whatever the store's client raises)
        if store.scheme == "hdfs":
            raise StoreError(f"{url}: hdfs:// needs Hadoop's libhdfs and a JVM (HADOOP_HOME, JAVA_HOME, CLASSPATH from "
                             f"`hadoop classpath --glob`): {_first_line(exc)}") from None
        raise StoreError(f"{url}: {_first_line(exc)}") from None


def filesystem(url: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path in it) for a store URL."""
    _, _, path = _split(url)
    return _filesystem(store_for(url)), path


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


# what an AWS error code means to the operator (pyarrow's message says "AWS Error CODE during OP operation: text")
_AWS_SAID = {
    "ACCESS_DENIED": "access denied (check the credentials: AWS_ACCESS_KEY_ID..., AWS_PROFILE or the instance role)",
    "INVALID_ACCESS_KEY_ID": "the access key is not known to the store (check AWS_ACCESS_KEY_ID, AWS_PROFILE or the instance role)",
    "SIGNATURE_DOES_NOT_MATCH": "the secret key does not match the access key (check AWS_SECRET_ACCESS_KEY)",
    "NO_SUCH_BUCKET": "no such bucket",
    "SLOW_DOWN": f"the store is throttling requests (503 Slow Down) and still was after {MAX_ATTEMPTS} attempts; try again later",
    "THROTTLING": f"the store is throttling requests and still was after {MAX_ATTEMPTS} attempts; try again later",
    "NETWORK_CONNECTION": "cannot connect to the store (check AWS_ENDPOINT_URL, the network or a proxy)",
    "REQUEST_TIME_TOO_SKEWED": "this machine's clock is too far from the store's",
    "EXPIRED_TOKEN": "the session token has expired (AWS_SESSION_TOKEN)",
}
_AWS_RE = re.compile(r"AWS Error (\w+)(?: \(HTTP status (\d+)\))? during (\w+) operation: ?([^\n]*)")


def said(exc: OSError) -> str:
    """A store's error as a few words for the operator: the meaning of its code, then the store's
    own words (without request ids)."""
    text = re.sub(r"\s*\(Request ID: [^)]*\)", "", str(exc))
    m = _AWS_RE.search(text)
    if m is None:  # (GCS: ``google::cloud::Status(CODE: words error_info={...})``)
        text = re.sub(r"\s*error_info=\{.*", "", _first_line(exc)).removeprefix("google::cloud::Status(")
        return text[:MAX_SAID] + ("…" if len(text) > MAX_SAID else "")
    code, status, op, words = m.groups()
    words = words.strip().rstrip(".")
    if code == "UNKNOWN" and status:
        meaning = {"503": _AWS_SAID["SLOW_DOWN"], "403": _AWS_SAID["ACCESS_DENIED"], "404": "not found",
                   "500": f"the store failed the request (HTTP 500) {MAX_ATTEMPTS} times"}.get(status, f"HTTP status {status}")
    else:
        meaning = _AWS_SAID.get(code, code.lower().replace("_", " "))
    own = "" if not words or words == "No response body" else f": {words}"
    return f"{meaning} ({op}{own})"


class errors:  # noqa: N801 (a context manager used as ``with errors(url):``)
    """Turn what pyarrow raises for ``url`` into ours: a missing object stays a
    ``FileNotFoundError`` (gone since it was listed), anything else is a ``StoreError``."""

    def __init__(self, url: str):
        self.url = url

    def __enter__(self) -> errors:
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if exc is None or isinstance(exc, (StoreError, FileChanged)):
            return False
        if isinstance(exc, FileNotFoundError):
            raise FileNotFoundError(2, f"{self.url}: no such object") from None
        from pyarrow import ArrowException

        if isinstance(exc, (OSError, ValueError, ArrowException)):
            raise StoreError(f"{self.url}: {said(exc)}") from None
        return False


# -- listing (the driver) ---------------------------------------------------------------------


@dataclass
class StoreStat:
    """What discovery reads of a listed object (the fields of ``os.stat_result`` it uses)."""

    st_size: int
    st_mtime: float


@dataclass
class Listing:
    """Every object under a store prefix, from one recursive listing (S3: ListObjectsV2, a
    thousand keys a request), as folders of files and sub-folders: what discovery walks.
    Paths are pyarrow's (``bucket/key``), as ``PurePosixPath``."""

    url: str
    root: PurePosixPath
    files: dict[PurePosixPath, dict[str, StoreStat]] = field(default_factory=dict)
    dirs: dict[PurePosixPath, set[str]] = field(default_factory=dict)

    def abs_path(self, path: PurePosixPath) -> str:
        """The URL of a listed path (``FileEntry.abs_path`` of its file)."""
        rel = path.relative_to(self.root).as_posix()
        return self.url.rstrip("/") + ("" if rel == "." else "/" + rel)

    def stat(self, path: PurePosixPath) -> StoreStat | None:
        """A listed object's size and time, None when no object has that path."""
        return self.files.get(path.parent, {}).get(path.name)

    def unreadable(self, path: PurePosixPath) -> str | None:
        """Why a listed object may not be read: never known before reading it."""
        return None

    def walk(self, top: PurePosixPath, stats: dict | None = None) -> Iterator[tuple[PurePosixPath, list[str], list[str], list]]:
        """As ``discover._walk``: top-down, sorted, ``dirs`` pruned in place; nothing on a store
        is a link, a fifo or a name that is not UTF-8, so nothing is skipped."""
        stack = [top]
        while stack:
            here = stack.pop()
            dirs = sorted(self.dirs.get(here, ()))
            files = self.files.get(here, {})
            if stats is not None:
                stats.clear()
                stats.update(files)
            yield here, dirs, sorted(files), []
            stack.extend(here / d for d in reversed(dirs))

    def scan(self, path: PurePosixPath) -> tuple[list[str], list[str]]:
        """(sub-folders, files) of one folder."""
        return sorted(self.dirs.get(path, ())), sorted(self.files.get(path, {}))


def list_prefix(url: str) -> tuple[str, Listing | None, StoreStat | None]:
    """What ``url`` names: ``("folder", listing, None)``, ``("file", None, its stat)``, or
    raises ``StoreError`` (no such bucket, nothing under the prefix, the store refused)."""
    from pyarrow import fs as pafs

    store_fs, path = filesystem(url)
    with errors(url):
        info = store_fs.get_file_info(path)
    if info.type == pafs.FileType.File:
        return "file", None, StoreStat(info.size, _mtime(info))
    if info.type == pafs.FileType.NotFound:
        bucket = path.split("/", 1)[0] if not path.startswith("/") else None
        with errors(url):
            gone = bucket is not None and "/" in path and store_fs.get_file_info(bucket).type == pafs.FileType.NotFound
        raise StoreError(f"{url}: {'no such bucket' if gone else 'no such object or prefix'}")
    root = PurePosixPath(path)
    listing = Listing(url, root, {}, {})
    with errors(url):
        infos = store_fs.get_file_info(pafs.FileSelector(path, recursive=True))
    for i in infos:
        p = PurePosixPath(i.path)
        if i.type == pafs.FileType.Directory:
            listing.dirs.setdefault(p, set())
            listing.dirs.setdefault(p.parent, set()).add(p.name)
        elif i.type == pafs.FileType.File:
            listing.files.setdefault(p.parent, {})[p.name] = StoreStat(i.size, _mtime(i))
    # an object's folders are listed as directories by some stores and not by others: add them all
    for folder in list(listing.files):
        for child, parent in zip((folder, *folder.parents), folder.parents):
            if child == root or root not in child.parents:
                break
            listing.dirs.setdefault(parent, set()).add(child.name)
    return "folder", listing, None


def _mtime(info) -> float:
    return info.mtime.timestamp() if info.mtime is not None else 0.0


# -- reading (executors, and the driver's few small reads) ------------------------------------


class StoreBytes:
    """``FileBytes`` of an object: its first ``listed_size`` bytes in one ranged read (an object
    now smaller than listed raises ``FileChanged``)."""

    def __init__(self, url: str, listed_size: int | None = None):
        self.path = url
        store_fs, path = filesystem(url)
        with errors(url), store_fs.open_input_file(path) as f:
            size = f.size()
            want = size if listed_size is None else listed_size
            if size < want:
                raise FileChanged(f"shrank from {want} to {size} bytes since it was listed (replaced in the store?)")
            self.data: bytes = f.read_at(want, 0) if want > 0 else b""
        if len(self.data) < want:
            raise FileChanged(f"shrank from {want} to {len(self.data)} bytes while it was read (replaced in the store?)")

    def close(self) -> None:
        self.data = b""

    def __enter__(self) -> StoreBytes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StoreWindow:
    """``FileWindow`` of an object: ``[start, stop)`` read in one ranged GET, and as far past
    ``stop`` as the parser asks (``ensure``), at the object's own positions; never the whole object."""

    def __init__(self, url: str, listed_size: int, start: int, stop: int):
        import numpy as np

        self.path = url
        store_fs, path = filesystem(url)
        with errors(url):
            self._f = store_fs.open_input_file(path)
        try:
            with errors(url):
                self.size = self._f.size()
            if self.size < listed_size:
                raise FileChanged(f"shrank from {listed_size} to {self.size} bytes since it was listed (replaced in the store?)")
            self.size = listed_size
            self.data = np.zeros(listed_size, np.uint8)  # (untouched pages cost nothing: see FileWindow)
            self._hi = start
            self.ensure(stop)
        except BaseException:
            self._f.close()
            raise

    def ensure(self, upto: int) -> None:
        upto = min(upto, self.size)
        if self._hi < upto:
            with errors(self.path):
                got = self._f.read_at(upto - self._hi, self._hi)
            if len(got) < upto - self._hi:
                raise FileChanged(f"ended at {self._hi + len(got)} bytes while it was read, {self.size} when listed")
            self.data[self._hi : upto] = memoryview(got)
            self._hi = upto

    def sha256(self, block: int = HASH_BLOCK) -> str:
        """SHA-256 of the whole object as listed, ``block`` bytes a ranged read."""
        import hashlib

        sha = hashlib.sha256()
        done = 0
        while done < self.size:
            with errors(self.path):
                part = self._f.read_at(min(block, self.size - done), done)
            if not part:
                raise FileChanged(f"ended at {done} bytes while it was hashed, {self.size} when listed")
            sha.update(part)
            done += len(part)
        return sha.hexdigest()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
        self.data = b""

    def __enter__(self) -> StoreWindow:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def listed_bytes(path: str, listed_size: int | None = None) -> FileBytes | StoreBytes:
    """A listed file's bytes, wherever it is (``FileBytes`` or ``StoreBytes``)."""
    return StoreBytes(path, listed_size) if is_url(path) else FileBytes(path, listed_size=listed_size)


def listed_window(path: str, listed_size: int, start: int, stop: int) -> FileWindow | StoreWindow:
    """A span of a listed file, wherever it is (``FileWindow`` or ``StoreWindow``)."""
    return StoreWindow(path, listed_size, start, stop) if is_url(path) else FileWindow(path, listed_size, start, stop)


class _StoreStream(io.RawIOBase):
    """An object as a seekable raw stream for ``io.BufferedReader`` (reads of ``STREAM_BUFFER``
    ranges): how an archive on a store is unpacked without a local copy of it. Errors are the
    store's (``StoreError``), so a throttled read is never taken for a truncated archive."""

    def __init__(self, url: str):
        self.url = url
        store_fs, path = filesystem(url)
        with errors(url):
            self._f = store_fs.open_input_file(path)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        with errors(self.url):
            return self._f.readinto(buffer)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        with errors(self.url):
            return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def close(self) -> None:
        if not self.closed:
            self._f.close()
        super().close()


def open_stream(url: str) -> io.BufferedReader:
    """An object for sequential reading (an archive), in ranged reads of ``STREAM_BUFFER`` bytes."""
    return io.BufferedReader(_StoreStream(url), buffer_size=STREAM_BUFFER)


def failed_read(exc: BaseException) -> str | None:
    """The line of a ``StoreError`` an executor raised, from the exception Spark hands the driver
    (its text carries the worker's traceback), or None when it is something else."""
    m = re.search(r"StoreError: ([^\n]+)", str(exc))
    return m.group(1).strip() if m else None
