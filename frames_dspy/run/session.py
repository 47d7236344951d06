"""From settings to the things a run uses: articles, program LM, judge LM, autorater, retriever.

``python -m frames_dspy.evaluate`` and ``python -m optimize.compile`` (and the notebooks) take
the same model and data settings and open them here, in two steps: :func:`open_articles` (the
corpus, fetched or indexed once if need be) and :func:`open_session` (the models and the
retriever), which also resolves the run's settings once
(:meth:`~frames_dspy.run.settings.ModelDataSettings.resolved`) and hands them on as
``Session.settings``. So a flag means one thing everywhere and both record the same
provenance. Anything a caller already has (a test's fake LM, a notebook's store) is passed in
and used as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import dspy

from frames_dspy.base.paths import data_file
from frames_dspy.data.corpus import ArticleStore, CorpusError, default_aliases, load_corpus
from frames_dspy.data.disk_store import DiskArticleStore
from frames_dspy.data.mediawiki import corpus_manifest, default_corpus, fetched_aliases
from frames_dspy.data.questions import dataset_fingerprint
from frames_dspy.data.snapshot import is_snapshot, parse_snapshot
from frames_dspy.judge.autorater import Autorater
from frames_dspy.lm import ModelSpec, context_window, make_lm, parse_spec
from frames_dspy.lm.cache import use_cache
from frames_dspy.results.run_folder import environment_record
from frames_dspy.retrieval.disk_index import ENGINE, SnapshotRetriever, open_snapshot
from frames_dspy.run.settings import ArticleSource, ModelDataSettings
from frames_dspy.run.tracking import check_tracking, enable_traces

logger = logging.getLogger(__name__)

__all__ = [
    "Articles",
    "Session",
    "article_source",
    "load_store",
    "open_store",
    "open_articles",
    "open_session",
    "make_judge",
]

#: What needs a corpus, for the error when there is none (evaluate's default).
_NEEDED_FOR = "the retrieval and oracle conditions"


def article_source(
    settings: ModelDataSettings,
    *,
    needed_for: str = _NEEDED_FOR,
    examples: Sequence[dspy.Example] | None = None,
    say: Callable[[str], None] | None = None,
    progress: bool = False,
) -> ArticleSource:
    """The articles the settings name (``corpus``, ``aliases``, ``distractors``), each default
    filled in as the run records it.

    Only the default corpus (under ``FRAMES_DATA_DIR``) gets the default distractors; a
    user's own corpus is left as it is unless ``distractors`` names a file. With neither, and
    the whole dataset given as ``examples``, the articles of all its links are fetched from
    Wikipedia once into the user cache (:func:`frames_dspy.data.mediawiki.default_corpus`;
    ``say`` gets its notes, ``progress`` shows its bar) and used from there on.

    Raises:
        ValueError: no corpus given, none under ``FRAMES_DATA_DIR`` and no ``examples``;
        CorpusError: a snapshot asked for with what it cannot take;
        DownloadError: the fetch failed (what was fetched stays cached).
    """
    if is_snapshot(settings.corpus):
        return _snapshot_source(settings)
    corpus = settings.corpus or data_file("corpus")
    if corpus is None and examples is not None:
        urls = [url for ex in examples for url in ex.gold_urls]
        corpus = default_corpus(urls, api_url=settings.wiki_api, say=say, progress=progress)
    if corpus is None:
        raise ValueError(
            f"{needed_for} need a corpus: pass --corpus PATH (JSONL of title/text articles) "
            "or set FRAMES_DATA_DIR"
        )
    distractors = settings.distractors
    if distractors is None and settings.corpus is None and data_file("distractors"):
        distractors = str(data_file("distractors"))
    aliases = settings.aliases
    if aliases is None and (beside := default_aliases(corpus)):
        aliases = str(beside)
    return ArticleSource(
        corpus=str(corpus), aliases=aliases, distractors=distractors, retriever=settings.retriever
    )


def _snapshot_aliases(wiki_api: str | None = None) -> Path | None:
    """The link table a snapshot resolves redirected gold links with when none is given:
    ``FRAMES_DATA_DIR``'s, else the one a first run wrote beside the articles it fetched."""
    return data_file("aliases") or fetched_aliases(wiki_api)


def _snapshot_source(settings: ModelDataSettings) -> ArticleSource:
    """A Wikipedia snapshot's source: searched with its on-disk tantivy index (a ``rank-bm25``
    asked for is refused), with no distractors (the snapshot has them all)."""
    if settings.retriever == "rank-bm25":
        raise CorpusError(
            f"--retriever rank-bm25 cannot search {settings.corpus!r}: a Wikipedia snapshot is "
            "searched with its on-disk tantivy index; drop --retriever"
        )
    if settings.distractors not in (None, "none"):
        raise CorpusError(
            f"--distractors {settings.distractors!r} cannot be added to {settings.corpus!r}: a "
            "snapshot holds all of Wikipedia; drop --distractors"
        )
    snapshot = parse_snapshot(settings.corpus)
    aliases = settings.aliases
    if aliases is None and (found := _snapshot_aliases(settings.wiki_api)):
        aliases = str(found)
    return ArticleSource(
        corpus=snapshot.name,
        aliases=aliases,
        distractors="none",
        retriever=ENGINE,
        snapshot=snapshot,
    )


def load_store(
    source: ArticleSource, *, say: Callable[[str], None] | None = None, progress: bool = False
) -> ArticleStore:
    """The store of ``source``: a JSONL corpus loaded (with its aliases and distractors), or a
    snapshot's on-disk store, its index built once (see ``retrieval.disk_index``)."""
    if source.snapshot is not None:
        return open_snapshot(source.snapshot, aliases=source.aliases, say=say, progress=progress)
    distractors = None if source.distractors in (None, "none") else source.distractors
    return load_corpus(source.corpus, aliases=source.aliases, distractors=distractors)


def open_store(
    corpus: str | Path, *, aliases: str | None = None, say: Callable[[str], None] | None = None
) -> ArticleStore:
    """The store ``corpus`` names, as it is: a Wikipedia snapshot (``wikipedia``,
    ``wikipedia:SNAPSHOT``, a parquet file or folder; its index built once, with a progress
    bar) or a JSONL corpus, with no distractors. ``aliases`` defaults, for a snapshot, to
    ``FRAMES_DATA_DIR``'s, else to that of the articles a first run fetched; for a JSONL corpus,
    to the file beside it.

    Raises:
        CorpusError: a snapshot or corpus that cannot be used (the message names the fix).
    """
    if is_snapshot(str(corpus)):
        snapshot = parse_snapshot(str(corpus))
        aliases = aliases or _snapshot_aliases()
        return open_snapshot(snapshot, aliases=aliases, progress=True, say=say)
    path = Path(corpus)
    return load_corpus(path, aliases=aliases or default_aliases(path))


@dataclass(frozen=True)
class Articles:
    """A run's article store and where it came from.

    Attributes:
        store: The store searched (and the oracle's articles), or None when nothing needs one.
        source: Where the store came from, when it was loaded from the settings; None when
            it was handed in (a test's, a notebook's) or none is needed, and then the
            settings' data fields are recorded as given.
    """

    store: ArticleStore | None = None
    source: ArticleSource | None = None


def open_articles(
    settings: ModelDataSettings,
    *,
    needed: bool,
    needed_for: str = _NEEDED_FOR,
    store: ArticleStore | None = None,
    examples: Sequence[dspy.Example] | None = None,
    say: Callable[[str], None] | None = None,
    progress: bool = False,
) -> Articles:
    """The articles of a run: ``store`` if given; else the store the settings name, when
    ``needed`` or a corpus is named (see :func:`article_source`); else none."""
    if store is not None or not (needed or settings.corpus):
        return Articles(store=store)
    source = article_source(
        settings, needed_for=needed_for, examples=examples, say=say, progress=progress
    )
    store = load_store(source, say=say, progress=progress)
    if source.snapshot is not None:
        # The snapshot as searched: a hub one pinned to its commit (wikipedia:<config>@<commit>).
        source = replace(source, corpus=store.manifest["snapshot"])
    return Articles(store=store, source=source)


def _spec_of(text: str, lm: Any) -> ModelSpec:
    # An injected LM (a test's fake, a notebook's own dspy.LM) may carry a name that is no
    # model spec at all; it is then treated as an API model.
    spec = getattr(lm, "model_spec", None)
    if isinstance(spec, ModelSpec):
        return spec
    try:
        return parse_spec(text)
    except ValueError:
        return ModelSpec(text=text, kind="litellm", value=text)


def _program_lm(settings: ModelDataSettings) -> dspy.BaseLM:
    return make_lm(
        settings.model,
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
        api_base=settings.api_base,
        timeout=settings.lm_timeout,
    )


def make_judge(
    settings: ModelDataSettings,
    *,
    lm: dspy.BaseLM | None = None,
    judge_lm: dspy.BaseLM | None = None,
    protocol: str | None = None,
) -> tuple[dspy.BaseLM, Autorater]:
    """The judge LM and the autorater, built exactly as every entry point builds them.

    With the program's own model as judge, the judge is a copy of ``lm`` with its own limits
    (greedy, ``judge_max_tokens``), so its calls are told apart from the program's.
    ``python -m frames_dspy.judge validate`` builds its judge here too, so the agreement it
    measures is that of a run's autorater. ``protocol`` is how the autorater uses its LM
    (:data:`frames_dspy.judge.protocols.JUDGE_PROTOCOLS`); None takes the settings'.
    """
    if judge_lm is None:
        if settings.judge_is_program_model():
            if lm is None:
                lm = _program_lm(settings)
            judge_lm = lm.copy(temperature=0.0, max_tokens=settings.judge_max_tokens)
        else:
            judge_lm = make_lm(
                settings.judge_model,
                temperature=0.0,
                max_tokens=settings.judge_max_tokens,
                api_base=settings.judge_api_base,
                timeout=settings.lm_timeout,
            )
    elif judge_lm is lm:
        judge_lm = lm.copy(temperature=0.0, max_tokens=settings.judge_max_tokens)
    return judge_lm, Autorater(judge_lm, protocol=protocol or settings.judge_protocol)


@dataclass(frozen=True)
class Session:
    """What a run works with.

    Attributes:
        settings: The run's settings, resolved once (every default from the model and the
            data filled in), as the run reads and records them; frozen like every settings
            object.
        model: The program model's parsed spec (an injected LM whose name is no spec counts
            as an API model).
        lm, judge_lm, autorater: The program LM, the judge LM and the metric.
        store, retriever: The article store and BM25 index (None when not needed).
        judge: The judge model's parsed spec.
        self_judging: The judge is the model under test (its verdicts tend to favour its
            own answers); an injected judge LM counts as another model.
    """

    settings: ModelDataSettings
    model: ModelSpec
    lm: dspy.BaseLM
    judge_lm: dspy.BaseLM
    autorater: Autorater
    store: ArticleStore | None
    retriever: Any
    judge: ModelSpec | None = None
    self_judging: bool = False

    def provenance(self, examples: Sequence[dspy.Example]) -> dict[str, Any]:
        """Hashes of the data and corpus, the models, package versions: for run configs.

        A corpus fetched from Wikipedia adds ``corpus_fetch``: its counts (links, articles,
        ``unresolved_links``: links no article was found for), the API and when.
        """
        fetched = (
            corpus_manifest(self.settings.corpus)
            if self.settings.corpus and not is_snapshot(self.settings.corpus)
            else None
        )
        return {
            "dataset_sha256": dataset_fingerprint(examples),
            "corpus_sha256": self.store.fingerprint if self.store is not None else None,
            "corpus_articles": len(self.store) if self.store is not None else 0,
            "corpus_fetch": {k: v for k, v in fetched.items() if k != "unresolved"}
            if fetched and self.store is not None
            else None,
            "corpus_index": getattr(self.store, "manifest", None),
            "lm_model": getattr(self.lm, "model", str(self.lm)),
            "judge_model": getattr(self.judge_lm, "model", str(self.judge_lm)),
            "engines": self.engines(),
            **environment_record(),
        }

    def engines(self) -> dict[str, Any]:
        """How each embedded model runs (isolation, threads, extra buffers, the CPU).

        Starts the embedded engines if they are not running yet, so an engine that cannot run
        on this machine stops the run here, before any question, and the record says what
        the start-up probe chose.
        """
        engines = {}
        for role, lm in (("program", self.lm), ("judge", self.judge_lm)):
            engine = getattr(lm, "engine", None)
            if getattr(engine, "embedded", False) and hasattr(engine, "load"):
                engines[role] = engine.load()
        return engines


def open_session(
    config: ModelDataSettings,
    *,
    articles: Articles,
    retriever_needed: bool,
    lm: dspy.BaseLM | None = None,
    judge_lm: dspy.BaseLM | None = None,
    retriever: Any = None,
    out: str | None = None,
) -> Session:
    """Open the LMs and the retriever, and resolve the run's settings.

    Args:
        config: The settings asked for (frozen: the caller's object is never changed).
        articles: The run's articles (:func:`open_articles`).
        retriever_needed: Build (or load) the BM25 index over the store.
        lm, judge_lm, retriever: Already built parts to use instead.
        out: The run folder the caller holds, recorded as the settings' ``out``.

    Returns:
        The session; its ``settings`` are ``config`` resolved
        (:meth:`~frames_dspy.run.settings.ModelDataSettings.resolved`), what every later step
        reads.

    Raises:
        ValueError: ``mlflow`` set without MLflow installed; LMSetupError: an LM cannot run.
    """
    check_tracking(config)  # a missing MLflow fails here, before any model loads
    use_cache(config.cache)
    if lm is None:
        lm = _program_lm(config)
    model = _spec_of(config.model, lm)
    settings = config.resolved(
        model=model, window=context_window(lm), articles=articles.source, out=out
    )
    if settings.mlflow_traces:
        enable_traces(settings)
    if retriever is None and retriever_needed and articles.store is not None:
        retriever = _retriever(articles.store, settings.retriever)
    self_judging = judge_lm is lm or (judge_lm is None and settings.judge_is_program_model())
    judge_lm, autorater = make_judge(settings, lm=lm, judge_lm=judge_lm)
    return Session(
        settings=settings,
        model=model,
        lm=lm,
        judge_lm=judge_lm,
        autorater=autorater,
        store=articles.store,
        retriever=retriever,
        judge=_spec_of(settings.judge_model or settings.model, judge_lm),
        self_judging=self_judging,
    )


def _retriever(store: ArticleStore, backend: str) -> Any:
    """The BM25 index over ``store``: a snapshot's own (built with its store), or built now."""
    if isinstance(store, DiskArticleStore):
        return SnapshotRetriever(store)
    from frames_dspy.retrieval.bm25 import build_retriever

    return build_retriever(store, backend=backend)
