"""A run folder on disk: append-only predictions, atomic JSON files, provenance, resume checks.

``predictions.jsonl`` gets one JSON object per (condition, question), appended under a lock
and flushed to disk as each question finishes, so a killed run loses at most the questions in
flight and resumes where it stopped. Every other file is written atomically.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from frames_dspy.files import atomic_write_json

logger = logging.getLogger(__name__)

__all__ = [
    "RunFolder",
    "read_predictions",
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


def read_predictions(path: str | Path) -> list[dict[str, Any]]:
    """Records of a ``predictions.jsonl``; a torn last line (killed writer) is ignored.

    Raises:
        ValueError: a line other than the last is not valid JSON (the file was edited or
            corrupted; the message names the line).
    """
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if lineno == len(lines):
                logger.warning("ignoring an incomplete last line in %s", path)
            else:
                raise ValueError(f"{path}: line {lineno} is not valid JSON") from None
    return records


class RunFolder:
    """A run's files; ``predictions.jsonl`` is appended under a lock and fsynced per line."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.predictions = self.path / "predictions.jsonl"
        self._lock = threading.Lock()
        self._repair_tail()

    def _repair_tail(self) -> None:
        # A SIGKILL can leave half a line; cut it so the next append starts a fresh line.
        if not self.predictions.is_file():
            return
        data = self.predictions.read_bytes()
        if data and not data.endswith(b"\n"):
            keep = data.rfind(b"\n") + 1
            logger.warning("dropping an incomplete last line in %s", self.predictions)
            with self.predictions.open("r+b") as handle:
                handle.truncate(keep)

    def records(self) -> list[dict[str, Any]]:
        """Every prediction recorded so far."""
        return read_predictions(self.predictions)

    def done(self) -> set[tuple[str, int]]:
        """(condition, question id) pairs already recorded."""
        return {(r["condition"], int(r["id"])) for r in self.records()}

    def append(self, record: Mapping[str, Any]) -> None:
        """Add one prediction and make it durable before returning."""
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self._lock, self.predictions.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

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
    previous: Mapping[str, Any], current: Mapping[str, Any], keys: Iterable[str]
) -> list[str]:
    """``key: old -> new`` for each of ``keys`` whose value changed."""
    return [
        f"{key}: {previous.get(key)!r} -> {current.get(key)!r}"
        for key in keys
        if previous.get(key) != current.get(key)
    ]
