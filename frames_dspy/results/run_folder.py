"""A run folder on disk: append-only predictions, atomic JSON files, provenance, resume checks.

``predictions.jsonl`` gets one record per (condition, question)
(:class:`frames_dspy.results.records.PredictionsFile`), appended under a lock and flushed to disk as
each question finishes, so a killed run loses at most the questions in flight and resumes
where it stopped. Every other file is written atomically. One process writes a run folder at
a time (the caller holds :func:`frames_dspy.base.locks.lock_folder`); a file that cannot be written
(a full disk, a read-only folder) becomes a :class:`FolderWriteError` of one line.
"""

from __future__ import annotations

import errno
import json
import logging
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from frames_dspy.base.files import atomic_write_json
from frames_dspy.results.records import (
    PredictionsFile,
    QuestionRecord,
    folder_schema,
    read_records,
)
from frames_dspy.results.summary import ConditionSummary

logger = logging.getLogger(__name__)

__all__ = [
    "RunFolder",
    "RunSummary",
    "FolderWriteError",
    "check_out",
    "write_error",
    "WRITE_ERRNOS",
    "load_records",
    "package_versions",
    "environment_record",
    "setting_differences",
]

_PACKAGES = (
    "frames-dspy",
    "dspy",
    "bm25s",
    "rank-bm25",
    "llama_cpp_python",
    "litellm",
    "datasets",
    "optuna",
)


class FolderWriteError(RuntimeError):
    """A file of a run folder could not be written (a full disk, a read-only folder, no
    permission); the message names the file, what was kept and the fix.

    Attributes:
        path: The file that could not be written.
        records_complete: Every question of the run is recorded; only report files are
            missing or left as the previous run wrote them.
    """

    def __init__(self, message: str, *, path: str, records_complete: bool):
        super().__init__(message)
        self.path = path
        self.records_complete = records_complete


#: Why a write failed, and what frees it, by errno.
_WHY = {
    errno.ENOSPC: ("no space left on the device", "free some space"),
    errno.EDQUOT: ("the disk quota is used up", "free some space"),
    errno.EROFS: ("the file system is read-only", "make it writable"),
    errno.EACCES: ("permission denied", "make it writable for this user"),
    errno.EPERM: ("permission denied", "make it writable for this user"),
}


#: The errors of a write that the user can fix (space, a read-only file system, permissions).
WRITE_ERRNOS = frozenset(_WHY)


def write_error(
    err: OSError, *, path: str | Path, kept: str, rerun: str, records_complete: bool
) -> FolderWriteError:
    """The one-line error for a failed write: which file, why, what was kept, the fix.

    Args:
        err: The error (its file name, when it has one, is the one named).
        path: The file named when ``err`` names none.
        kept: What is safe on disk (``"12 of 40 questions are recorded in ..."``).
        rerun: How to carry on once the cause is fixed (``"rerun with --out RUN"``).
        records_complete: Whether every question is recorded.
    """
    where = str(err.filename or path)
    why, fix = _WHY.get(err.errno, (err.strerror or str(err), "fix that"))
    return FolderWriteError(
        f"cannot write {where}: {why}. {kept[:1].upper()}{kept[1:]}; {fix}, then {rerun}",
        path=where,
        records_complete=records_complete,
    )


def check_out(path: Path, flag: str = "--out") -> None:
    """Refuse a run folder that cannot be written, before anything is loaded or created.

    Raises:
        ValueError: the folder (or the nearest folder above it that exists) cannot be
            written; the message names it and ``flag``.
    """
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(20, "not a folder", str(existing))
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".frames-write-test-"):
            pass
    except OSError as err:
        fix = f"choose another {flag}"
        if (path / "predictions.jsonl").is_file():  # a run to resume: it stays as it is
            fix = (
                f"its records are kept; make it writable and rerun to resume, or copy the "
                f"folder somewhere writable and pass the copy as {flag}"
            )
        raise ValueError(
            f"cannot write the run folder {path} ({err.strerror or err}: {existing}); {fix}"
        ) from err


def load_records(folder: str | Path) -> list[QuestionRecord]:
    """The prediction records of a run folder, read by the schema its ``config.json`` declares.

    Raises:
        RecordError: a newer schema, or a line that is not a record (the message says the fix).
    """
    folder = Path(folder)
    if not folder.is_dir():  # a predictions.jsonl named directly
        return read_records(folder)
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else None
    return read_records(folder, schema=folder_schema(config, folder=folder))


class RunFolder:
    """A run's files; ``predictions.jsonl`` is appended under a lock and fsynced per line."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.predictions = self.path / "predictions.jsonl"
        self._predictions = PredictionsFile(self.predictions)

    def records(self) -> list[QuestionRecord]:
        """Every prediction recorded so far."""
        return load_records(self.path)

    def done(self) -> set[tuple[str, int]]:
        """(condition, question id) pairs already recorded."""
        return {(r.condition, r.id) for r in self.records()}

    def append(self, record: QuestionRecord) -> None:
        """Add one prediction and make it durable before returning.

        Raises:
            OSError: it could not be written; the file is as it was before.
        """
        self._predictions.append(record)

    def check_writable(self) -> None:
        """Fail now, not after the first question, if ``predictions.jsonl`` is read-only.

        Raises:
            OSError: it cannot be appended to.
        """
        self._predictions.check_writable()

    def write_failed(self, err: OSError, keys: set[tuple[str, Any]]) -> FolderWriteError:
        """The one-line error for a failed write of this folder: what was kept, how to go on.

        Args:
            err: The failed write.
            keys: Every (condition, question id) the run records; if all are recorded,
                only report files are missing (``records_complete``).
        """
        recorded = len(self.done() & keys)
        complete = recorded == len(keys)
        rerun = f"rerun the same command (--out {self.path})"
        if complete:
            kept = (
                f"all {recorded} records are in {self.predictions}; the report files are as "
                "the last complete write left them"
            )
            rerun += " to write them"
        else:
            kept = f"{recorded} of {len(keys)} questions are recorded in {self.predictions}"
            rerun += f" to run the other {len(keys) - recorded}"
        return write_error(err, path=self.path, kept=kept, rerun=rerun, records_complete=complete)

    def read_json(self, name: str) -> dict[str, Any] | None:
        """A JSON file of the folder, or None if it does not exist."""
        path = self.path / name
        if not path.is_file():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    def write_json(self, name: str, payload: Any) -> None:
        """Write a JSON file of the folder atomically."""
        atomic_write_json(self.path / name, payload)


@dataclass
class RunSummary:
    """How an evaluation went: its per-condition summaries and how the run was made.

    Attributes:
        rows: Each condition's figures, in table order (``summary.json`` holds them).
        out: The run folder.
        stopped: Why the run stopped before every question was done (a budget, Ctrl-C), or None.
        notes: How the run was made (models, judge, cache, an early stop), as ``table.md`` says.
    """

    rows: dict[str, ConditionSummary]
    out: Path
    stopped: str | None = None
    notes: list[str] = field(default_factory=list)

    def failing(self, max_rate: float) -> dict[str, ConditionSummary]:
        """Conditions where more than ``max_rate`` of the questions' programs failed."""
        return {name: row for name, row in self.rows.items() if row.program_errors_above(max_rate)}


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shape a result (for run configs)."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def environment_record() -> dict[str, Any]:
    """Package versions, the Python version and the start time, for a run's config."""
    return {
        "packages": package_versions(),
        "python": sys.version.split()[0],
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def setting_differences(
    previous: Mapping[str, Any],
    current: Mapping[str, Any],
    keys: Iterable[str],
    *,
    defaults: Mapping[str, Any] | None = None,
) -> list[str]:
    """``key: old -> new`` for each of ``keys`` whose value changed. A key ``previous`` lacks
    (a setting added since) counts as its value in ``defaults``: what the old run used."""
    defaults = defaults or {}
    differences = []
    for key in keys:
        old = previous[key] if key in previous else defaults.get(key)
        if old != current.get(key):
            differences.append(f"{key}: {old!r} -> {current.get(key)!r}")
    return differences
