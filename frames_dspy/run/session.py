"""From settings to the things a run uses: program LM, judge LM, autorater, store, retriever.

``python -m frames_dspy.evaluate`` and ``python -m optimize.compile`` (and the notebooks) take
the same model and data settings and open them here, so a flag means one thing everywhere and
both record the same provenance. Anything a caller already has (a test's fake LM, a notebook's
store) is passed in and used as it is.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import dspy

from frames_dspy.base.paths import data_file, default_dataset
from frames_dspy.base.settings import resume_keys, setting
from frames_dspy.data.corpus import ArticleStore, CorpusError, default_aliases, load_corpus
from frames_dspy.data.disk_store import DiskArticleStore
from frames_dspy.data.questions import dataset_fingerprint
from frames_dspy.data.snapshot import is_snapshot, parse_snapshot
from frames_dspy.data.wikipedia import corpus_manifest, default_corpus
from frames_dspy.judge.autorater import AUTORATER, Autorater
from frames_dspy.judge.protocols import DEFAULT_PROTOCOL, JUDGE_PROTOCOLS
from frames_dspy.lm import ModelSpec, context_window, make_lm, parse_spec
from frames_dspy.lm.cache import CACHE_MODES, use_cache
from frames_dspy.results.run_folder import environment_record
from frames_dspy.retrieval.disk_index import ENGINE, SnapshotRetriever, open_snapshot
from frames_dspy.run.tracking import (
    DEFAULT_EXPERIMENT,
    DEFAULT_STORE,
    check_tracking,
    enable_traces,
)

logger = logging.getLogger(__name__)

__all__ = [
    "JUDGE_MAX_TOKENS",
    "SESSION_KEYS",
    "ModelDataSettings",
    "Session",
    "open_session",
    "make_judge",
    "load_store",
]

#: Output tokens for an autorater call: an explanation of a sentence or two and the verdict.
JUDGE_MAX_TOKENS = 256

#: Entry points that take the model options (``judge validate`` runs models too).
_MODEL_ENTRIES = ("evaluate", "compile", "validate")
_TRACKING = "tracking (optional: pip install -e '.[mlflow]')"


@dataclass
class ModelDataSettings:
    """The model and data settings every entry point shares.

    Attributes:
        model: The program LM's spec (``local``, ``local-1.5b``, ``local:/path.gguf`` or a
            LiteLLM model string).
        judge_model: The autorater's LM spec; None means the program's model.
        api_base, judge_api_base: OpenAI-compatible servers for the two.
        autorater: Which autorater scores the answers (:data:`frames_dspy.judge.AUTORATER`);
            not a flag but a record, so a run folder or study scored by another autorater
            (an older one, or one with the overlap guard) is not resumed with this one.
        temperature, max_tokens: Program LM sampling and output limit.
        lm_timeout: Seconds one LM call may take (None: the provider's default; no limit
            for the embedded model); a call over it is retried (API models), then recorded
            as the question's error.
        cache: DSPy's response cache for program and judge calls: ``on``, ``off`` or
            ``refresh`` (see :mod:`frames_dspy.lm.cache`).
        context_tokens: Article budget of the answer prompt; None derives it from the model.
        dataset, revision: FRAMES questions (a hub id with a pinned revision, or a local file).
        corpus, aliases, distractors: The article store (see :func:`load_store`).
        wiki_api: The MediaWiki API the default corpus is fetched from when no corpus is
            given (None: Wikipedia's).
        retriever: The BM25 backend.
        mlflow, mlflow_experiment, mlflow_traces: Track in MLflow (a store URI or folder;
            None: not at all), in this experiment, with DSPy's traces of every call (see
            :mod:`frames_dspy.run.tracking`). They change no result.
    """

    model: str = setting(
        "local",
        group="models",
        entries=_MODEL_ENTRIES,
        help="program LM: 'local' (embedded, offline), 'local-1.5b', 'local:/path.gguf', or a "
        "LiteLLM model string such as openai/gpt-4o-mini (default %(default)s)",
        resume=("evaluate", "compile"),
    )
    judge_model: str | None = setting(
        None,
        group="models",
        entries=_MODEL_ENTRIES,
        help="autorater LM for the items its rules leave (default: the same as --model, which "
        "inflates scores; a run says so)",
        resume=("evaluate", "compile"),
    )
    api_base: str | None = setting(
        None,
        group="models",
        entries=_MODEL_ENTRIES,
        help="OpenAI-compatible server for --model (vLLM, Ollama, llama.cpp)",
        resume=("evaluate", "compile"),
    )
    judge_api_base: str | None = setting(
        None,
        group="models",
        entries=_MODEL_ENTRIES,
        help="server for --judge-model",
        resume=("evaluate", "compile"),
    )
    judge_protocol: str = setting(
        DEFAULT_PROTOCOL,
        group="models",
        # judge validate takes several at once, to show them side by side: its own option.
        entries=("evaluate", "compile"),
        choices=JUDGE_PROTOCOLS,
        help="how the autorater uses its LM: rules+extract (rules; the LM says which answer the "
        "response commits to; its verdict only when the rules still cannot decide), rules+lm "
        "(rules, then the LM's verdict), lm (the paper's autorater alone, for a strong judge "
        "and paper-comparable numbers) (default %(default)s)",
        resume=("evaluate", "compile"),
    )
    autorater: str = setting(
        AUTORATER,
        flag=None,
        help="the autorater's version (a record)",
        resume=("evaluate", "compile"),
    )
    temperature: float = setting(
        0.0,
        kind="float",
        group="models",
        entries=_MODEL_ENTRIES,
        help="program LM temperature",
        resume=("evaluate", "compile"),
    )
    # Answers and query lists are short; a small model that loops stops here instead of
    # spending minutes (and a parse-failure retry) on 512 tokens of repetition.
    max_tokens: int = setting(
        256,
        kind="positive_int",
        group="models",
        entries=_MODEL_ENTRIES,
        help="output tokens per program LM call (default %(default)s)",
        resume=("evaluate", "compile"),
    )
    judge_max_tokens: int = setting(
        JUDGE_MAX_TOKENS,
        kind="positive_int",
        group="models",
        help="output tokens per judge call: an explanation and the verdict (default %(default)s)",
        resume=("evaluate", "compile"),
    )
    lm_timeout: float | None = setting(
        None,
        kind="positive_float",
        group="models",
        entries=_MODEL_ENTRIES,
        metavar="SECONDS",
        help="seconds one LM call may take; a slower call is retried (API models) and then "
        "recorded as that question's error (default: the provider's; none for the embedded "
        "model)",
    )
    cache: str = setting(
        "on",
        group="models",
        entries=_MODEL_ENTRIES,
        choices=CACHE_MODES,
        help="DSPy's response cache for program and judge calls: on (reuse answers; they are "
        "counted as cached in the table), off (no reads, no writes), refresh (no reads, "
        "overwrite). Keyed by model file and API base (default %(default)s)",
    )
    context_tokens: int | None = setting(
        None,
        kind="positive_int",
        group="answer prompt",
        help="token budget for articles in the answer prompt (default: from the model: 2000 "
        "for the embedded model, up to 100k for API models)",
        resume=("evaluate", "compile"),
    )
    dataset: str = setting(
        default_factory=default_dataset,
        group="data",
        help="hub id or local .tsv/.csv (default: %(default)s)",
        entries=("evaluate", "compile", "data", "wikipedia"),
        resume=("evaluate",),
    )
    revision: str | None = setting(
        None, group="data", help="hub revision to pin", entries=("evaluate", "compile", "data")
    )
    corpus: str | None = setting(
        None,
        group="data",
        help="articles JSONL(.gz) (default: frames_wiki/pages.jsonl.gz under $FRAMES_DATA_DIR); "
        "'wikipedia' for all of English Wikipedia (wikimedia/wikipedia 20231101.en at the "
        "commit pinned on first use, indexed on disk once), 'wikipedia:SNAPSHOT' for another "
        "snapshot, 'wikipedia:SNAPSHOT@REVISION' at a commit (or a branch resolved to one), or "
        "a parquet file or folder in its schema (id, url, title, text)",
        resume=("evaluate",),
    )
    aliases: str | None = setting(
        None,
        group="data",
        help="link -> page_id TSV (default: frames_link_to_page.tsv beside the corpus)",
    )
    distractors: str | None = setting(
        None,
        group="data",
        help="distractor summaries JSON added to the index, or 'none' (default: the Vital "
        "Articles summaries under $FRAMES_DATA_DIR, with the default corpus only)",
        resume=("evaluate",),
    )
    wiki_api: str | None = setting(
        None,
        group="data",
        metavar="URL",
        help="MediaWiki API to fetch the corpus from when none is given (default: "
        "Wikipedia's; the fetch goes to the user cache once, FRAMES_DSPY_CACHE moves it)",
    )
    retriever: str = setting(
        "bm25s",
        group="data",
        choices=("bm25s", "rank-bm25", "tantivy"),
        help="BM25 backend for a JSONL corpus (default %(default)s); a Wikipedia snapshot is "
        "always searched with its on-disk tantivy index",
        resume=("evaluate", "compile"),
    )
    mlflow: str | None = setting(
        None,
        kind="optional_value",
        const=DEFAULT_STORE,
        group=_TRACKING,
        entries=_MODEL_ENTRIES,
        metavar="URI",
        help="log the run to MLflow: a tracking URI (sqlite:///..., http://...) or a folder "
        f"for a local SQLite store (default when given alone: {DEFAULT_STORE}/)",
    )
    mlflow_experiment: str = setting(
        DEFAULT_EXPERIMENT,
        group=_TRACKING,
        entries=_MODEL_ENTRIES,
        help="MLflow experiment name (default %(default)s)",
    )
    mlflow_traces: bool = setting(
        False,
        kind="flag",
        group=_TRACKING,
        entries=_MODEL_ENTRIES,
        help="also record DSPy's traces of every LM call (mlflow.dspy.autolog; implies --mlflow)",
    )

    def model_data_settings(self) -> dict[str, Any]:
        """These shared settings as keyword arguments (to hand them to another config)."""
        return {f.name: getattr(self, f.name) for f in fields(ModelDataSettings)}

    def judge_is_program_model(self) -> bool:
        """Whether the autorater runs the program's own model (self-judging)."""
        if self.judge_model in (None, self.model):
            return (self.judge_api_base if self.judge_model else self.api_base) == self.api_base
        return False


def load_store(
    settings: ModelDataSettings,
    *,
    needed_for: str = "the retrieval and oracle conditions",
    examples: Sequence[dspy.Example] | None = None,
    say: Callable[[str], None] | None = None,
    progress: bool = False,
) -> ArticleStore:
    """The article store the settings name (their ``corpus``, ``aliases``, ``distractors``).

    Fills those fields in on ``settings`` with what was used, so the run records it. Only the
    default corpus (under ``FRAMES_DATA_DIR``) gets the default distractors; a user's own
    corpus is left as it is unless ``distractors`` names a file. With neither, and the whole
    dataset given as ``examples``, the articles of all its links are fetched from Wikipedia
    once into the user cache (:func:`frames_dspy.data.wikipedia.default_corpus`; ``say`` gets its
    notes, ``progress`` shows its bar) and used from there on.

    Raises:
        ValueError: no corpus given, none under ``FRAMES_DATA_DIR`` and no ``examples``;
        DownloadError: the fetch failed (what was fetched stays cached).
    """
    if is_snapshot(settings.corpus):
        return _load_snapshot(settings, say=say, progress=progress)
    corpus = settings.corpus or data_file("corpus")
    if corpus is None and examples is not None:
        urls = [url for ex in examples for url in ex.gold_urls]
        corpus = default_corpus(urls, api_url=settings.wiki_api, say=say, progress=progress)
    if corpus is None:
        raise ValueError(
            f"{needed_for} need a corpus: pass --corpus PATH (JSONL of title/text articles) "
            "or set FRAMES_DATA_DIR"
        )
    if settings.distractors is None and settings.corpus is None and data_file("distractors"):
        settings.distractors = str(data_file("distractors"))
    settings.corpus = str(corpus)
    if settings.aliases is None and (aliases := default_aliases(corpus)):
        settings.aliases = str(aliases)
    distractors = None if settings.distractors in (None, "none") else settings.distractors
    return load_corpus(corpus, aliases=settings.aliases, distractors=distractors)


def _load_snapshot(settings: ModelDataSettings, *, say, progress: bool) -> DiskArticleStore:
    """A Wikipedia snapshot's store, its on-disk index built once (see ``disk_index``).

    Its index is tantivy's, built with the store: ``retriever`` is set to say so, and a
    ``rank-bm25`` asked for is refused. No distractors are added (the snapshot has them all).
    """
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
    settings.retriever, settings.distractors = ENGINE, "none"
    if settings.aliases is None and (aliases := data_file("aliases")):
        settings.aliases = str(aliases)
    store = open_snapshot(snapshot, aliases=settings.aliases, say=say, progress=progress)
    # The snapshot as searched: a hub one pinned to its commit (wikipedia:<config>@<commit>).
    settings.corpus = store.manifest["snapshot"]
    return store


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


@dataclass
class Session:
    """What a run works with; ``settings`` is a filled-in copy of the caller's settings.

    Attributes:
        settings: The settings with every default resolved (corpus paths, budget), as a
            run records them.
        model: The program model's parsed spec (an injected LM whose name is no spec counts
            as an API model).
        lm, judge_lm, autorater: The program LM, the judge LM and the metric.
        store, retriever: The article store and BM25 index (None when not needed).
        context_tokens: The article budget of the answer prompt.
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
    context_tokens: int
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
    settings: ModelDataSettings,
    *,
    store_needed: bool,
    retriever_needed: bool,
    needed_for: str = "the retrieval and oracle conditions",
    lm: dspy.BaseLM | None = None,
    judge_lm: dspy.BaseLM | None = None,
    store: ArticleStore | None = None,
    retriever: Any = None,
    examples: Sequence[dspy.Example] | None = None,
    say: Callable[[str], None] | None = None,
) -> Session:
    """Open the store, the retriever and the LMs the settings name.

    Args:
        settings: Model and data settings (not modified; the session holds a filled copy).
        store_needed: Load the corpus even if ``settings.corpus`` is not set.
        retriever_needed: Build (or load) the BM25 index over the store.
        needed_for: What needs the corpus, for the error when there is none.
        lm, judge_lm, store, retriever: Already built parts to use instead.
        examples, say: The whole dataset, whose links make the corpus fetched when none is
            given, and where that fetch's notes go (with a progress bar when ``say`` is given);
            see :func:`load_store`.

    Raises:
        ValueError: no corpus where one is needed, or ``mlflow`` set without MLflow
            installed; LMSetupError: an LM cannot run.
    """
    settings = dataclasses.replace(settings)
    check_tracking(settings)  # a missing MLflow fails here, before any model or corpus loads
    if settings.mlflow_traces:
        enable_traces(settings)
    if store is None and (store_needed or settings.corpus):
        store = load_store(
            settings,
            needed_for=needed_for,
            examples=examples,
            say=say,
            progress=say is not None,
        )
    if retriever is None and retriever_needed and store is not None:
        from frames_dspy.retrieval.bm25 import build_retriever

        if isinstance(store, DiskArticleStore):
            retriever = SnapshotRetriever(store)  # its index was built with the store
        else:
            retriever = build_retriever(store, backend=settings.retriever)
    use_cache(settings.cache)
    if lm is None:
        lm = _program_lm(settings)
    model = _spec_of(settings.model, lm)
    self_judging = judge_lm is lm or (judge_lm is None and settings.judge_is_program_model())
    judge_lm, autorater = make_judge(settings, lm=lm, judge_lm=judge_lm)
    if settings.context_tokens is None:
        settings.context_tokens = model.default_context_tokens(context_window(lm))
    return Session(
        settings=settings,
        model=model,
        lm=lm,
        judge_lm=judge_lm,
        autorater=autorater,
        store=store,
        retriever=retriever,
        context_tokens=settings.context_tokens,
        judge=_spec_of(settings.judge_model or settings.model, judge_lm),
        self_judging=self_judging,
    )


#: Settings that change what a prediction means, whatever the entry point: a run folder or a
#: study made with other values is not resumed (declared with ``resume``).
SESSION_KEYS = tuple(
    key
    for key in resume_keys(ModelDataSettings, "evaluate")
    if key in resume_keys(ModelDataSettings, "compile")
)
