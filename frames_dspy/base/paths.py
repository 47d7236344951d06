"""Where data and caches live: one environment variable points at local copies.

``FRAMES_DATA_DIR`` names a folder of local copies laid out as ``frames/frames_test_set.csv``,
``frames_wiki/pages.jsonl.gz`` (with ``frames_link_to_page.tsv``) and
``distractor_wiki_summaries/summaries_en-us.json``. Users without internet set it; CI sets it to
its offline copy. Without it the questions come from the Hugging Face hub (kept in its cache)
and the corpus is fetched from Wikipedia once (see :mod:`frames_dspy.data.mediawiki`); only a
local copy has the distractor summaries. ``FRAMES_DSPY_CACHE`` moves the cache (the fetched
corpus under ``corpus/``, BM25 indexes); ``FRAMES_DSPY_MODEL_DIR`` (see ``frames_dspy.lm``) moves
the assembled model files. ``FRAMES_JUDGE_LABELS`` names another JSONL of hand-labelled
autorater items (question, gold, response, label, kind) to measure the answer rules and judges
against; unset, the project's own ``judge_dev`` labels are used (see
:func:`frames_dspy.judge.labels.labels_file`).
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "FRAMES_DATA_DIR"
CACHE_DIR_ENV = "FRAMES_DSPY_CACHE"
JUDGE_LABELS_ENV = "FRAMES_JUDGE_LABELS"
HUB_DATASET = "google/frames-benchmark"

_LAYOUT = {
    "dataset": "frames/frames_test_set.csv",
    "corpus": "frames_wiki/pages.jsonl.gz",
    "aliases": "frames_wiki/frames_link_to_page.tsv",
    "distractors": "distractor_wiki_summaries/summaries_en-us.json",
}


def data_dir() -> Path | None:
    """The folder named by ``FRAMES_DATA_DIR``, or None when unset."""
    value = os.environ.get(DATA_DIR_ENV)
    return Path(value).expanduser() if value else None


def data_file(kind: str) -> Path | None:
    """The default local file of a kind (dataset, corpus, aliases, distractors), if present."""
    if kind not in _LAYOUT:
        raise ValueError(f"unknown data kind {kind!r}; choose one of {sorted(_LAYOUT)}")
    root = data_dir()
    if root is None:
        return None
    path = root / _LAYOUT[kind]
    return path if path.exists() else None


def judge_labels_file() -> Path | None:
    """The labelled judge JSONL ``FRAMES_JUDGE_LABELS`` names, or None when it is unset.

    A name that is not a file is returned as it is, so the command that reads it says so
    rather than quietly measuring on other labels.
    """
    value = os.environ.get(JUDGE_LABELS_ENV)
    return Path(value).expanduser() if value else None


def default_dataset() -> str:
    """The local FRAMES CSV under ``FRAMES_DATA_DIR`` if there is one, else the hub id."""
    path = data_file("dataset")
    return str(path) if path else HUB_DATASET


def cache_dir(*parts: str) -> Path:
    """A folder (created) under ``FRAMES_DSPY_CACHE``, by default ``~/.cache/frames-dspy``."""
    root = os.environ.get(CACHE_DIR_ENV) or Path.home() / ".cache" / "frames-dspy"
    path = Path(root).expanduser().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
