"""All of English Wikipedia at a pinned snapshot, read as a stream of articles.

``--corpus wikipedia`` names the Hugging Face dataset ``wikimedia/wikipedia`` at
:data:`DEFAULT_SNAPSHOT`; ``--corpus wikipedia:<snapshot>`` names another of its configs
(``20231101.en`` is a date and a language). A local parquet file, or a folder of them, in the
same schema (``id``, ``url``, ``title``, ``text``) is read the same way: that is how tests and
offline users use it. Either way the rows come through ``datasets`` in streaming mode, a batch at
a time, so the text of the whole snapshot is never in memory.

Example:
    >>> source = parse_snapshot("wikipedia")                      # doctest: +SKIP
    >>> for batch in stream_batches(source, skip=0, batch_size=1000):   # doctest: +SKIP
    ...     batch["title"][:2]
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frames_dspy.data.corpus import CorpusError

logger = logging.getLogger(__name__)

__all__ = [
    "COLUMNS",
    "DEFAULT_SNAPSHOT",
    "HUB_DATASET",
    "Snapshot",
    "is_snapshot",
    "parse_snapshot",
    "stream_batches",
]

HUB_DATASET = "wikimedia/wikipedia"
# The English snapshot closest to the paper's time (FRAMES was written in 2024 against
# then-current Wikipedia); the hub's dataset card lists 6,407,814 articles for it.
DEFAULT_SNAPSHOT = "20231101.en"
KNOWN_SIZES = {"20231101.en": 6_407_814}
COLUMNS = ("id", "url", "title", "text")
_SNAPSHOT_NAME = re.compile(r"^\d{8}\.[a-z][a-z0-9-]*$")
_PREFIX = "wikipedia"


@dataclass(frozen=True)
class Snapshot:
    """Where a Wikipedia snapshot's rows come from.

    Attributes:
        name: What the run records: ``wikipedia:20231101.en`` or the local path.
        config: The hub config (``20231101.en``); None for local parquet.
        files: The local parquet files, in order; empty for the hub.
    """

    name: str
    config: str | None = None
    files: tuple[Path, ...] = ()

    @property
    def is_local(self) -> bool:
        return bool(self.files)

    def identity(self) -> dict[str, Any]:
        """What names this snapshot's index: the hub config, or each file's name, size, mtime."""
        if not self.is_local:
            return {"dataset": HUB_DATASET, "config": self.config}
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
        """The article count, when it is known without reading the rows."""
        if self.is_local:
            import pyarrow.parquet as pq

            return sum(pq.ParquetFile(f).metadata.num_rows for f in self.files)
        return KNOWN_SIZES.get(self.config or "")


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
        CorpusError: a malformed snapshot name, or a parquet path that does not exist or holds
            no parquet file; the message names the value and the fix.
    """
    if value == _PREFIX:
        return Snapshot(f"{_PREFIX}:{DEFAULT_SNAPSHOT}", config=DEFAULT_SNAPSHOT)
    if value.startswith(_PREFIX + ":"):
        config = value.split(":", 1)[1]
        if not _SNAPSHOT_NAME.match(config):
            raise CorpusError(
                f"--corpus {value!r}: {config!r} is not a wikimedia/wikipedia snapshot name; "
                f"use a date and a language such as 'wikipedia:{DEFAULT_SNAPSHOT}', or plain "
                "'wikipedia' for that one"
            )
        return Snapshot(value, config=config)
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


def stream_batches(
    snapshot: Snapshot, *, skip: int = 0, batch_size: int = 1000
) -> Iterator[dict[str, list]]:
    """The snapshot's rows from ``skip`` on, as column batches of up to ``batch_size`` rows.

    Raises:
        CorpusError: the hub cannot be reached or has no such snapshot, or a file is unreadable.
    """
    import datasets

    try:
        if snapshot.is_local:
            files = [str(f) for f in snapshot.files]
            stream = datasets.load_dataset(
                "parquet", data_files={"train": files}, split="train", streaming=True
            )
        else:
            stream = datasets.load_dataset(
                HUB_DATASET, snapshot.config, split="train", streaming=True
            )
        stream = stream.select_columns(list(COLUMNS))
        if skip:
            stream = stream.skip(skip)
        yield from stream.iter(batch_size=batch_size)
    except (OSError, ValueError, ConnectionError) as err:
        if snapshot.is_local:
            raise CorpusError(
                f"could not read {snapshot.name}: {err}; check the file, or regenerate it"
            ) from err
        raise CorpusError(
            f"could not stream {HUB_DATASET} {snapshot.config!r} from the Hugging Face hub "
            f"({type(err).__name__}: {err}); check the snapshot name (e.g. {DEFAULT_SNAPSHOT!r}) "
            "and the network, or pass --corpus PATH to a local parquet copy"
        ) from err
