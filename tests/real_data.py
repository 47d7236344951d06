"""The real FRAMES data of the tests marked ``real``, found where a user's own run finds it.

In the product's order: ``FRAMES_DATA_DIR`` when it is set (a local copy: the questions, the
articles with their alias table, the distractor summaries); else what a first run keeps, the
hub's ``test.tsv`` in the Hugging Face cache and the articles of all FRAMES links in the user
cache (``<cache>/corpus``); else that first run's fetch, now, when the hub and Wikipedia can be
reached (about 8.5 minutes, once). The lookups are the product's own: the hub download of
:func:`~frames_dspy.data.questions.load_frames`, and
:func:`~frames_dspy.run.session.article_source` with its
:func:`~frames_dspy.data.mediawiki.default_corpus`.
When none of them gives the data, :class:`DataUnavailable` says so in one line and the tests
skip with it (fail under ``CI=true``, see :mod:`tests.needs`).

The user cache is the user's own: ``FRAMES_DSPY_CACHE`` as it was before ``conftest.py`` pointed
it at a throwaway folder, else ``~/.cache/frames-dspy``. So a test run reuses what the user's
first run fetched, and what a test run fetches is kept for the next run and the user's commands;
everything else the tests write still goes to the throwaway cache.

Only a local copy has the distractor summaries (the product adds them from ``FRAMES_DATA_DIR``
alone): :attr:`RealData.distractors` is None for fetched data, and tests that need them, or
that read the local copy's folders themselves, say so (``local_data`` in ``conftest.py``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy

from frames_dspy.base.paths import CACHE_DIR_ENV, DATA_DIR_ENV, HUB_DATASET, data_dir
from frames_dspy.data.corpus import ArticleStore
from frames_dspy.data.download import DownloadError
from frames_dspy.data.mediawiki import corpus_manifest
from frames_dspy.data.questions import _download_hub_file, load_frames
from frames_dspy.run.session import article_source, load_store
from frames_dspy.run.settings import ModelDataSettings

#: A MediaWiki API the tests fetch the corpus from instead of Wikipedia's (a local server).
WIKI_API_ENV = "FRAMES_TEST_WIKI_API"


class DataUnavailable(Exception):
    """The real data is neither local nor cached and cannot be fetched; one line says why."""


@dataclass(frozen=True)
class RealData:
    """The FRAMES questions and articles, as a run loads them.

    Attributes:
        questions: The questions file (a local copy's CSV, or the hub's cached ``test.tsv``).
        corpus: The articles (``pages.jsonl.gz``).
        aliases: The link -> article table beside them, if any.
        distractors: The distractor summaries (a local copy only), or None.
        examples: The questions loaded.
        store: Articles, aliases and distractors loaded together, as a run's store.
        local: ``FRAMES_DATA_DIR`` when it is set (the local copy), else None.
        manifest: The fetch's ``manifest.json`` when the corpus was fetched, else None.
    """

    questions: Path
    corpus: Path
    aliases: Path | None
    distractors: Path | None
    examples: list[dspy.Example]
    store: ArticleStore
    local: Path | None
    manifest: dict[str, Any] | None

    @property
    def frames_articles(self) -> int:
        """Articles of the corpus itself (the store less its distractor summaries)."""
        return sum(1 for article in self.store if article.source == "frames")

    def cli_args(self) -> list[str]:
        """The options that make a command line load exactly this data."""
        args = ["--dataset", str(self.questions), "--corpus", str(self.corpus)]
        if self.aliases:
            args += ["--aliases", str(self.aliases)]
        return args + ["--distractors", str(self.distractors or "none")]


@contextlib.contextmanager
def users_cache(value: str | None) -> Iterator[None]:
    """``FRAMES_DSPY_CACHE`` set to ``value`` (unset when None) inside, restored after."""
    saved = os.environ.get(CACHE_DIR_ENV)
    try:
        _set(CACHE_DIR_ENV, value)
        yield
    finally:
        _set(CACHE_DIR_ENV, saved)


def _set(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def find_real_data(
    *,
    user_cache: str | None,
    wiki_api: str | None = None,
    say: Callable[[str], None] | None = None,
) -> RealData:
    """The real data: local copy, else the user's caches, else fetched into them.

    Args:
        user_cache: The user's ``FRAMES_DSPY_CACHE`` (None: the default, ``~/.cache``).
        wiki_api: The MediaWiki API to fetch from (None: Wikipedia's, as a user's run).
        say: Where the fetch's notes go (that it starts, where it keeps the articles).

    Raises:
        DataUnavailable: nothing local or cached, and the hub or Wikipedia cannot be reached.
        ValueError: ``FRAMES_DATA_DIR`` is set but names no folder.
    """
    local = data_dir()
    if local is not None and not local.is_dir():
        raise ValueError(
            f"{DATA_DIR_ENV}={local} is not a folder; point it at a local copy (frames/, "
            "frames_wiki/, distractor_wiki_summaries/) or unset it to use the user cache"
        )
    with users_cache(user_cache):
        settings = ModelDataSettings(wiki_api=wiki_api)
        try:
            questions = (
                _download_hub_file(HUB_DATASET, settings.revision)
                if settings.dataset == HUB_DATASET
                else Path(settings.dataset)
            )
            examples = load_frames(questions)
            source = article_source(settings, examples=examples, say=say)
            store = load_store(source, say=say)
        except DownloadError as err:
            raise DataUnavailable(_unavailable(err, local)) from err
    return RealData(
        questions=Path(questions),
        corpus=Path(source.corpus),
        aliases=Path(source.aliases) if source.aliases else None,
        distractors=None if source.distractors in (None, "none") else Path(source.distractors),
        examples=examples,
        store=store,
        local=local,
        manifest=corpus_manifest(source.corpus),
    )


def _unavailable(err: DownloadError, local: Path | None) -> str:
    where = f"{DATA_DIR_ENV}={local}" if local else f"{DATA_DIR_ENV} (unset)"
    return (
        f"needs the real FRAMES data: {err.what} is not in {where} nor cached, and "
        f"{err.source} cannot be reached ({err.reason}); set {DATA_DIR_ENV} to a local copy, "
        "or connect once to fetch it into the user cache"
    )
