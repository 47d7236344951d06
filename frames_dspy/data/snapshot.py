"""All of English Wikipedia at a pinned snapshot, read as a stream of articles.

``--corpus wikipedia`` names the Hugging Face dataset ``wikimedia/wikipedia`` at
:data:`DEFAULT_SNAPSHOT`; ``--corpus wikipedia:<snapshot>`` names another of its configs
(``20231101.en`` is a date and a language), and ``wikipedia:<snapshot>@<revision>`` a revision of
the repo: a commit hash, or a branch or tag that is resolved to one. A local parquet file, or a
folder of them, in the same schema (``id``, ``url``, ``title``, ``text``) is read the same way:
that is how tests and offline users use it. Either way the rows come through ``datasets`` in
streaming mode, a batch at a time, so the text of the whole snapshot is never in memory.

A hub snapshot is pinned to a commit before anything is read (:func:`pin_snapshot`), because the
repo's main branch moves: the commit names the index, and every run records it. A revision given
by name is resolved once and remembered, and a plain ``wikipedia`` means the commit last resolved
for its config (on the first run, main's), so it works offline and later runs search the same
articles.

A stream remembers where it is: each batch comes with a :class:`Position` (the rows read and the
``datasets`` stream's own ``state_dict()``), and a stream started from a position reads only what
comes after it (``load_state_dict``), instead of reading and discarding every earlier row. Network
failures the hub client did not retry away are retried here, from the last position.

Example:
    >>> source = parse_snapshot("wikipedia")                          # doctest: +SKIP
    >>> for batch, position in stream_batches(source, batch_size=1000):   # doctest: +SKIP
    ...     batch["title"][:2], position.rows
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from frames_dspy.base.files import atomic_write_json
from frames_dspy.data import hub
from frames_dspy.data.corpus import CorpusError
from frames_dspy.data.download import DownloadError

logger = logging.getLogger(__name__)

__all__ = [
    "COLUMNS",
    "DEFAULT_SNAPSHOT",
    "HUB_DATASET",
    "STREAM_FIX",
    "Position",
    "Snapshot",
    "count_rows",
    "is_snapshot",
    "parse_snapshot",
    "pin_snapshot",
    "require_hub",
    "stream_batches",
]

HUB_DATASET = "wikimedia/wikipedia"
# The English snapshot closest to the paper's time (FRAMES was written in 2024 against
# then-current Wikipedia); the hub's dataset card lists 6,407,814 articles for it.
DEFAULT_SNAPSHOT = "20231101.en"
COLUMNS = ("id", "url", "title", "text")
#: Bytes read at a time from the end of a hub parquet file to count its rows from the footer.
FOOTER_BLOCK = 1 << 16
#: Bumped when the stream's pipeline changes, so a position saved by another one is not loaded.
STREAM_FORMAT = 1
#: What to do instead when the hub cannot be streamed from.
STREAM_FIX = "pass --corpus PATH to a local parquet copy"
_SNAPSHOT_NAME = re.compile(r"^\d{8}\.[a-z][a-z0-9-]*$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$")
_PREFIX = "wikipedia"


@dataclass(frozen=True)
class Snapshot:
    """Where a Wikipedia snapshot's rows come from.

    Attributes:
        name: What the run records: ``wikipedia:20231101.en@<commit>`` or the local path.
        config: The hub config (``20231101.en``); None for local parquet.
        revision: The hub revision: a 40-hex commit once pinned, a branch or tag as asked,
            or None (the pinned commit, or main's); None for local parquet.
        files: The local parquet files, in order; empty for the hub.
    """

    name: str
    config: str | None = None
    revision: str | None = None
    files: tuple[Path, ...] = ()

    @property
    def is_local(self) -> bool:
        return bool(self.files)

    @property
    def pinned(self) -> bool:
        """Local files, or a hub snapshot at a commit (not a branch that can move)."""
        return self.is_local or bool(self.revision and _COMMIT.match(self.revision))

    def at(self, commit: str) -> Snapshot:
        """This hub snapshot pinned to ``commit``."""
        return replace(self, name=f"{_PREFIX}:{self.config}@{commit}", revision=commit)

    def identity(self) -> dict[str, Any]:
        """What names this snapshot's index: the hub config and commit, or each file's name,
        size and mtime."""
        if not self.is_local:
            return {"dataset": HUB_DATASET, "config": self.config, "revision": self.revision}
        return {
            "parquet": [
                {"name": f.name, "bytes": f.stat().st_size, "mtime_ns": f.stat().st_mtime_ns}
                for f in self.files
            ]
        }

    def key(self) -> str:
        """A short hash of :meth:`identity`, for folder names."""
        text = repr(sorted(self.identity().items()))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def expected_rows(self) -> int | None:
        """The article count of local files (their parquet metadata); None for the hub (see
        :func:`count_rows`, which asks it)."""
        if self.is_local:
            import pyarrow.parquet as pq

            return sum(pq.ParquetFile(f).metadata.num_rows for f in self.files)
        return None


def is_snapshot(value: str | None) -> bool:
    """Does a ``--corpus`` value name a Wikipedia snapshot (rather than a JSONL corpus file)?"""
    if not value:
        return False
    if value == _PREFIX or value.startswith(_PREFIX + ":"):
        return True
    path = Path(value).expanduser()
    return path.suffix == ".parquet" or (path.is_dir() and any(path.glob("*.parquet")))


def parse_snapshot(value: str) -> Snapshot:
    """Read a ``--corpus`` value that names a snapshot.

    Raises:
        CorpusError: a malformed snapshot name or revision, or a parquet path that does not
            exist or holds no parquet file; the message names the value and the fix.
    """
    if value == _PREFIX:
        return Snapshot(f"{_PREFIX}:{DEFAULT_SNAPSHOT}", config=DEFAULT_SNAPSHOT)
    if value.startswith(_PREFIX + ":"):
        config, at, revision = value.split(":", 1)[1].partition("@")
        if not _SNAPSHOT_NAME.match(config):
            raise CorpusError(
                f"--corpus {value!r}: {config!r} is not a wikimedia/wikipedia snapshot name; "
                f"use a date and a language such as 'wikipedia:{DEFAULT_SNAPSHOT}', or plain "
                "'wikipedia' for that one"
            )
        if at and not (_REF.match(revision) and ".." not in revision):
            raise CorpusError(
                f"--corpus {value!r}: {revision!r} is not a revision; after '@' give a commit "
                f"hash (40 hex digits) or a branch or tag, e.g. 'wikipedia:{config}@main'"
            )
        return Snapshot(value, config=config, revision=revision or None)
    path = Path(value).expanduser()
    if path.is_dir():
        files = tuple(sorted(path.glob("*.parquet")))
    elif path.is_file():
        files = (path,)
    else:
        raise CorpusError(
            f"--corpus {value!r} does not exist; give a parquet file or folder with the columns "
            f"{', '.join(COLUMNS)}, or 'wikipedia' for the hub snapshot"
        )
    if not files:
        raise CorpusError(f"--corpus {value!r} holds no .parquet file")
    _check_schema(files[0])
    return Snapshot(str(path.resolve()), files=files)


def _check_schema(path: Path) -> None:
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except (OSError, ValueError) as err:
        raise CorpusError(
            f"{path} is not a readable parquet file ({err}); re-download or regenerate it"
        ) from err
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise CorpusError(
            f"{path} lacks column(s) {missing}; a Wikipedia snapshot needs {list(COLUMNS)} "
            "(the schema of wikimedia/wikipedia)"
        )


# -- the hub: reaching it, retrying, pinning ----------------------------------------------------


def require_hub(snapshot: Snapshot, *, kept: str = "") -> None:
    """Return at once if ``snapshot`` is local or the hub can be reached; else raise the
    :class:`DownloadError` that says so (within seconds, before any client retries).

    Args:
        kept: What is kept for a later attempt (an unfinished build), said in the message.
    """
    if snapshot.is_local or (why := hub.unreachable_reason()) is None:
        return
    what = f"{HUB_DATASET} {snapshot.config} (commit {snapshot.revision})"
    raise DownloadError(what, hub.endpoint(), why, fix=STREAM_FIX, kept=kept)


def _hub_failure(what: str, err: BaseException, fix: str) -> Exception:
    """The one-line error for a hub call that failed: a missing repo or revision names the fix;
    a network failure is a :class:`DownloadError`."""
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    if isinstance(err, RevisionNotFoundError):
        return CorpusError(
            f"{HUB_DATASET} has no revision {what}; give a commit hash from "
            f"https://huggingface.co/datasets/{HUB_DATASET}/commits/main or a branch such as "
            "'main' after '@'"
        )
    if isinstance(err, RepositoryNotFoundError):
        return CorpusError(f"{hub.endpoint()} has no dataset {HUB_DATASET}; {fix}")
    return DownloadError(what, hub.endpoint(), hub.reason(err), fix=fix)


_OFFLINE_FIX = (
    "pass --corpus wikipedia:CONFIG@COMMIT for an index built before, or --corpus PATH for a "
    "local parquet copy"
)


def _read_pins(pins: Path) -> dict[str, Any]:
    try:
        record = json.loads(pins.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return record if isinstance(record, dict) else {}


def _resolve(ref: str, config: str | None) -> str:
    """The commit ``ref`` names on the hub, checked to hold ``config`` (each is a folder)."""
    from huggingface_hub import HfApi

    what = f"{HUB_DATASET}@{ref}"
    try:
        info = hub.retrying(
            f"resolving {what}",
            lambda: HfApi().dataset_info(HUB_DATASET, revision=ref, expand=["sha"]),
        )
        commit = str(info.sha)
        found = hub.retrying(
            f"looking up {config} in {what}",
            lambda: HfApi().get_paths_info(
                HUB_DATASET, [config], revision=commit, repo_type="dataset"
            ),
        )
    except Exception as err:
        raise _hub_failure(repr(ref), err, _OFFLINE_FIX) from err
    if not found:
        raise _no_config(config, commit)
    return commit


def _no_config(config: str | None, commit: str | None) -> CorpusError:
    return CorpusError(
        f"{HUB_DATASET} has no snapshot {config!r} at commit {commit}; use one its card lists, "
        f"such as {DEFAULT_SNAPSHOT!r} (https://huggingface.co/datasets/{HUB_DATASET})"
    )


def pin_snapshot(
    snapshot: Snapshot, *, pins: Path, say: Callable[[str], None] | None = None
) -> Snapshot:
    """The snapshot at a commit: local files and commits as they are; a branch or tag resolved
    on the hub (and remembered in ``pins`` for its config); no revision: the one remembered for
    the config, or main's resolved and remembered (the first time).

    Raises:
        CorpusError: the hub has no such revision;
        DownloadError: it cannot be asked and nothing is remembered for the config.
    """
    say = say or logger.info
    if snapshot.pinned:
        return snapshot
    key = f"{HUB_DATASET} {snapshot.config}"
    record = _read_pins(pins)
    remembered = record.get(key)
    if snapshot.revision is None and isinstance(remembered, dict):
        commit = str(remembered.get("revision", ""))
        if _COMMIT.match(commit):
            say(
                f"{snapshot.name} is {HUB_DATASET} {snapshot.config} at commit {commit}, "
                f"resolved from {remembered.get('from')} on {remembered.get('resolved')} "
                f"(add @main to move to the newest commit)"
            )
            return snapshot.at(commit)
    ref = snapshot.revision or "main"
    why = hub.unreachable_reason()
    if why is not None:
        raise DownloadError(
            f"the commit of {HUB_DATASET}@{ref}", hub.endpoint(), why, fix=_OFFLINE_FIX
        )
    commit = _resolve(ref, snapshot.config)
    record[key] = {"revision": commit, "from": ref, "resolved": time.strftime("%Y-%m-%d")}
    atomic_write_json(pins, record)
    say(f"{HUB_DATASET} {snapshot.config}: {ref} is commit {commit} (remembered for later runs)")
    return snapshot.at(commit)


# -- the stream -----------------------------------------------------------------------------


def _stream_format() -> str:
    import datasets

    return f"datasets {datasets.__version__}, stream {STREAM_FORMAT}"


@dataclass(frozen=True)
class Position:
    """Where a stream stands after a batch.

    Attributes:
        rows: Rows read so far.
        state: The ``datasets`` stream's ``state_dict()`` there (None: not known, so a stream
            started here reads and discards ``rows`` rows).
        format: Which ``datasets`` version and stream pipeline wrote ``state``; a state is
            loaded only by the same.
    """

    rows: int = 0
    state: dict[str, Any] | None = None
    format: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "state": self.state, "format": self.format}

    @classmethod
    def from_json(cls, data: Any) -> Position | None:
        if not isinstance(data, dict) or not isinstance(data.get("rows"), int):
            return None
        state = data.get("state") if isinstance(data.get("state"), dict) else None
        return cls(data["rows"], state, str(data.get("format", "")))

    @property
    def loadable(self) -> bool:
        """Can a stream start here without reading the rows before?"""
        return self.state is not None and self.format == _stream_format()


def _builder(snapshot: Snapshot) -> Any:
    import datasets

    if snapshot.is_local:
        files = [str(f) for f in snapshot.files]
        return datasets.load_dataset_builder("parquet", data_files={"train": files})
    return datasets.load_dataset_builder(HUB_DATASET, snapshot.config, revision=snapshot.revision)


def _open(snapshot: Snapshot) -> Any:
    """The builder, with a config the hub lacks said in one line."""
    try:
        return _builder(snapshot)
    except ValueError as err:
        if not snapshot.is_local and "not found" in str(err) and snapshot.config in str(err):
            raise _no_config(snapshot.config, snapshot.revision) from None
        raise


def count_rows(snapshot: Snapshot) -> int:
    """The snapshot's article count from its parquet footers (for the hub, each data file's
    last bytes, read through ``HfFileSystem``): what a complete build must have indexed.

    Raises:
        CorpusError / DownloadError: as :func:`stream_batches`.
    """
    if snapshot.is_local:
        return snapshot.expected_rows() or 0
    import pyarrow.parquet as pq
    from huggingface_hub import HfFileSystem

    def footer(url: str) -> int:
        with HfFileSystem().open(url.removeprefix("hf://"), "rb", block_size=FOOTER_BLOCK) as f:
            return pq.ParquetFile(f).metadata.num_rows

    try:
        builder = hub.retrying(f"opening {snapshot.name}", lambda: _open(snapshot))
        files = list(builder.config.data_files["train"])
        return sum(hub.retrying(f"reading {url}", lambda u=url: footer(u)) for url in files)
    except (CorpusError, DownloadError):
        raise
    except Exception as err:
        if not _expected(err):
            raise
        raise _stream_failure(snapshot, err) from err


def _read(snapshot: Snapshot, start: Position, batch_size: int) -> Iterator[tuple[dict, Position]]:
    """One pass of the stream from ``start``, a batch and its end position at a time."""
    stream = _open(snapshot).as_streaming_dataset(split="train").select_columns(list(COLUMNS))
    rows, skip = start.rows, 0
    if start.loadable:
        stream.load_state_dict(start.state)
    elif rows:
        # Read and thrown away here rather than with stream.skip(), which some datasets
        # versions get wrong on parquet (4.8.x: whole blocks were not skipped).
        skip = rows
        logger.warning("re-reading the first %d rows of %s to resume", rows, snapshot.name)
    fmt = _stream_format()
    batch: dict[str, list] = {c: [] for c in COLUMNS}
    for example in stream:
        if skip:
            skip -= 1
            continue
        for column in COLUMNS:
            batch[column].append(example[column])
        if len(batch["id"]) == batch_size:
            rows += batch_size
            yield batch, Position(rows, stream.state_dict(), fmt)
            batch = {c: [] for c in COLUMNS}
    if batch["id"]:
        rows += len(batch["id"])
        yield batch, Position(rows, stream.state_dict(), fmt)


def stream_batches(
    snapshot: Snapshot, *, start: Position | None = None, batch_size: int = 1000
) -> Iterator[tuple[dict[str, list], Position]]:
    """The snapshot's rows after ``start``, as column batches of ``batch_size`` rows (the last
    may be shorter), each with the position after it.

    A stream that fails for a network reason (after the hub client's own retries) is started
    again from the last batch's position, after each of ``hub.RETRY_WAITS``; the count
    restarts once a batch arrives.

    Raises:
        CorpusError: no such snapshot, or a file is unreadable;
        DownloadError: the hub kept failing (the message says why and what to do).
    """
    position = start or Position()
    failures = 0
    while True:
        try:
            for batch, reached in _read(snapshot, position, batch_size):
                position, failures = reached, 0
                yield batch, reached
            return
        except (CorpusError, DownloadError):
            raise
        except Exception as err:
            if not _expected(err):
                raise  # a bug, with its traceback
            if snapshot.is_local or not hub.transient(err) or failures == len(hub.RETRY_WAITS):
                raise _stream_failure(snapshot, err) from err
            wait = hub.retry_wait(err, hub.RETRY_WAITS[failures])
            failures += 1
            logger.warning(
                "streaming %s failed at row %d (%s); retrying from there in %.0f s",
                snapshot.name,
                position.rows,
                hub.reason(err),
                wait,
            )
            time.sleep(wait)


def _expected(err: BaseException) -> bool:
    """A failure of the data or the network (said in one line), not of the code."""
    return hub.transient(err) or isinstance(err, OSError | ValueError)


def _stream_failure(snapshot: Snapshot, err: BaseException) -> Exception:
    if snapshot.is_local:
        return CorpusError(
            f"could not read {snapshot.name}: {err}; check the file, or regenerate it"
        )
    what = f"{HUB_DATASET} {snapshot.config} (commit {snapshot.revision})"
    if hub.transient(err):
        return DownloadError(what, hub.endpoint(), hub.reason(err), fix=STREAM_FIX)
    return CorpusError(
        f"could not stream {what} from {hub.endpoint()} ({type(err).__name__}: "
        f"{' '.join(str(err).split())[:200]}); check the snapshot name (e.g. "
        f"{DEFAULT_SNAPSHOT!r}) and the network, or {STREAM_FIX}"
    )
