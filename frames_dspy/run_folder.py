"""A run folder on disk: append-only predictions, atomic JSON files, provenance, resume checks.

``predictions.jsonl`` gets one record per (condition, question)
(:class:`frames_dspy.records.PredictionsFile`), appended under a lock and flushed to disk as
each question finishes, so a killed run loses at most the questions in flight and resumes
where it stopped. Every other file is written atomically.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from frames_dspy.files import atomic_write_json
from frames_dspy.records import (
    PredictionsFile,
    QuestionRecord,
    folder_schema,
    read_records,
)

logger = logging.getLogger(__name__)

__all__ = [
    "RunFolder",
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
        """Add one prediction and make it durable before returning."""
        self._predictions.append(record)

    def read_json(self, name: str) -> dict[str, Any] | None:
        """A JSON file of the folder, or None if it does not exist."""
        path = self.path / name
        if not path.is_file():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    def write_json(self, name: str, payload: Any) -> None:
        """Write a JSON file of the folder atomically."""
        atomic_write_json(self.path / name, payload)


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
