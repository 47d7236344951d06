"""A run's settings: declared once, resolved once, then read-only.

:class:`ModelDataSettings` holds what every entry point that runs a model shares (the models,
the data, tracking, how many questions at once); :class:`RunSettings` adds what
``python -m frames_dspy.evaluate`` and ``python -m optimize.compile`` both take (the program
options they fix, the call budget); each command's own class
(:class:`~frames_dspy.run.eval_config.EvalConfig`, :class:`optimize.config.CompileConfig`)
adds the rest. Argparse options, ``config.json``, the reproduce command and
``docs/settings.md`` derive from these declarations (:mod:`frames_dspy.base.settings`).

Every settings object is frozen. What a caller passes (a command line's values, a notebook's
config) is what was asked for; :meth:`ModelDataSettings.resolved` returns, once per run, the
settings the run uses and records, with each default that depends on the model (``threads``,
``context_tokens``) or the data (``corpus``, ``aliases``, ``distractors``, ``retriever``) filled
in, and ``mlflow`` when ``--mlflow-traces`` implies it.
:func:`frames_dspy.run.session.open_session` calls it and hands the result on as
``Session.settings``; no step changes it afterwards, and every later step of the run reads it
rather than the caller's object.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Self

from frames_dspy.base.paths import default_dataset
from frames_dspy.base.settings import resume_keys, setting
from frames_dspy.data.snapshot import Snapshot
from frames_dspy.judge.autorater import AUTORATER
from frames_dspy.judge.protocols import DEFAULT_PROTOCOL, JUDGE_PROTOCOLS
from frames_dspy.lm import API_THREADS, THREADS_DEFAULT, ModelSpec
from frames_dspy.lm.cache import CACHE_MODES
from frames_dspy.run.tracking import DEFAULT_EXPERIMENT, DEFAULT_STORE

__all__ = [
    "JUDGE_MAX_TOKENS",
    "SESSION_KEYS",
    "ArticleSource",
    "ModelDataSettings",
    "RunSettings",
]

#: Output tokens for an autorater call: an explanation of a sentence or two and the verdict.
JUDGE_MAX_TOKENS = 256

#: Entry points that take the judge's options (``judge validate`` runs the judge alone).
_JUDGE_ENTRIES = ("evaluate", "compile", "validate")
_TRACKING = "tracking (optional: pip install -e '.[mlflow]')"
_WHAT, _RUN = "what to run", "run"


@dataclass(frozen=True)
class ArticleSource:
    """Where a run's articles come from, every default filled in
    (:func:`frames_dspy.run.session.article_source`).

    Attributes:
        corpus: The JSONL file searched, or the snapshot's name (``wikipedia:20231101.en``,
            pinned to its commit once the store is open: ``...@<commit>``).
        aliases: The link -> page table used, or None.
        distractors: The distractor file added, ``none``, or None (no default applied).
        retriever: The BM25 backend (a snapshot's is its on-disk index's, ``tantivy``).
        snapshot: The parsed snapshot when ``corpus`` names one (not recorded: ``corpus`` is).
    """

    corpus: str
    aliases: str | None
    distractors: str | None
    retriever: str
    snapshot: Snapshot | None = None

    def recorded(self) -> dict[str, Any]:
        """The settings fields this source fills in, as the run records them."""
        return {
            name: getattr(self, name) for name in ("corpus", "aliases", "distractors", "retriever")
        }


@dataclass(frozen=True)
class ModelDataSettings:
    """The model and data settings every entry point that runs a model shares.

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
        context_tokens: Article budget of the answer prompt; None derives it from the model
            when the run starts.
        dataset, revision: FRAMES questions (a hub id with a pinned revision, or a local file).
        corpus, aliases, distractors: The article store (see
            :func:`frames_dspy.run.session.article_source`).
        wiki_api: The MediaWiki API the default corpus is fetched from when no corpus is
            given (None: Wikipedia's).
        retriever: The BM25 backend.
        mlflow, mlflow_experiment, mlflow_traces: Track in MLflow (a store URI or folder;
            None: not at all), in this experiment, with DSPy's traces of every call (see
            :mod:`frames_dspy.run.tracking`). They change no result.
        threads: Questions run at once; None chooses by the model when the run starts (1
            for an embedded model, 8 for an API model or server: ``ModelSpec.default_threads``).
    """

    model: str = setting(
        "local",
        group="models",
        help="program LM: 'local' (embedded, offline), 'local-1.5b', 'local:/path.gguf', or a "
        "LiteLLM model string such as openai/gpt-4o-mini (default %(default)s)",
        resume=("evaluate", "compile"),
    )
    judge_model: str | None = setting(
        None,
        group="models",
        entries=_JUDGE_ENTRIES,
        help="autorater LM for the items its rules leave (default: the program's --model, which "
        "inflates scores, and a run says so; judge validate, which runs no program: local)",
        resume=("evaluate", "compile"),
    )
    api_base: str | None = setting(
        None,
        group="models",
        help="OpenAI-compatible server for --model (vLLM, Ollama, llama.cpp)",
        resume=("evaluate", "compile"),
    )
    judge_api_base: str | None = setting(
        None,
        group="models",
        entries=_JUDGE_ENTRIES,
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
        help="program LM temperature",
        resume=("evaluate", "compile"),
    )
    # Answers and query lists are short; a small model that loops stops here instead of
    # spending minutes (and a parse-failure retry) on 512 tokens of repetition.
    max_tokens: int = setting(
        256,
        kind="positive_int",
        group="models",
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
        entries=_JUDGE_ENTRIES,
        metavar="SECONDS",
        help="seconds one LM call may take; a slower call is retried (API models) and then "
        "recorded as that question's (or item's) error (default: the provider's; none for the "
        "embedded model)",
    )
    cache: str = setting(
        "on",
        group="models",
        entries=_JUDGE_ENTRIES,
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
        metavar="URI",
        help="log the run to MLflow: a tracking URI (sqlite:///..., http://...) or a folder "
        f"for a local SQLite store (default when given alone: {DEFAULT_STORE}/)",
    )
    mlflow_experiment: str = setting(
        DEFAULT_EXPERIMENT,
        group=_TRACKING,
        help="MLflow experiment name (default %(default)s)",
    )
    mlflow_traces: bool = setting(
        False,
        kind="flag",
        group=_TRACKING,
        help="also record DSPy's traces of every LM call (mlflow.dspy.autolog; implies --mlflow)",
    )
    threads: int | None = setting(
        None,
        kind="positive_int",
        group=_RUN,
        entries=_JUDGE_ENTRIES,
        default_text=f"`1` embedded, `{API_THREADS}` API",
        help=f"questions run at once (judge validate: items judged at once) (default: "
        f"{THREADS_DEFAULT}); config.json records the number used",
    )

    def resolved(
        self,
        *,
        model: ModelSpec,
        window: int | None,
        articles: ArticleSource | None = None,
        out: str | None = None,
    ) -> Self:
        """These settings with every default that depends on the model or the data filled in:
        the settings a run reads and records. Called once per run, by
        :func:`frames_dspy.run.session.open_session`.

        Args:
            model: The program model's spec (``threads`` and ``context_tokens`` follow it).
            window: Its context window in tokens, if known (``lm.usage.context_window``).
            articles: Where the articles came from, when the run loaded them (None: a store
                was handed in, or none is needed; the data settings stand as given).
            out: The run folder the caller holds (evaluate's and compile's ``out``).
        """
        filled: dict[str, Any] = {
            "threads": self.threads if self.threads is not None else model.default_threads,
            "context_tokens": self.context_tokens
            if self.context_tokens is not None
            else model.default_context_tokens(window),
            # --mlflow-traces implies --mlflow (its traces need a store).
            "mlflow": self.mlflow or (DEFAULT_STORE if self.mlflow_traces else None),
        }
        if articles is not None:
            filled |= articles.recorded()
        if out is not None:
            filled["out"] = out
        return replace(self, **filled)

    def model_data_settings(self) -> dict[str, Any]:
        """These shared settings as keyword arguments (to hand them to another config)."""
        return {f.name: getattr(self, f.name) for f in fields(ModelDataSettings)}

    def judge_is_program_model(self) -> bool:
        """Whether the autorater runs the program's own model (self-judging)."""
        if self.judge_model in (None, self.model):
            return (self.judge_api_base if self.judge_model else self.api_base) == self.api_base
        return False


@dataclass(frozen=True)
class RunSettings(ModelDataSettings):
    """What ``frames_dspy.evaluate`` and ``optimize.compile`` both take, beyond the model and
    data: the program options fixed for the whole run and the call budget.

    Their other look-alikes stay with each command on purpose: compile's ``rounds``, ``k`` and
    ``n_docs`` are ranges to search where evaluate's are values; compile's ``train``, ``dev``
    and ``seed`` have other defaults (small splits keep a study affordable) and also seed its
    sampler and optimizer; ``out`` defaults to another folder name (``runs/<timestamp>``,
    ``runs/opt-<timestamp>``) and keeps its place among evaluate's options, so the reproduce
    command compile records reads as it always has.

    Attributes:
        include_question, cot: MultiHop's question-as-a-query and chain-of-thought answering
            (compile fixes them for the whole study; ``--search-question-query`` searches
            the first).
        max_lm_calls: Stop cleanly once this process has made this many LM calls (cached ones
            included); what finished is kept and a rerun continues.
    """

    include_question: bool = setting(
        True,
        flag="--no-question-query",
        kind="no_flag",
        group=_WHAT,
        help="do not use the question itself as one of each round's queries",
        resume=("evaluate", "compile"),
    )
    cot: bool = setting(
        False,
        kind="flag",
        group=_WHAT,
        help="answer with chain of thought",
        resume=("evaluate", "compile"),
    )
    max_lm_calls: int | None = setting(
        None,
        kind="positive_int",
        group=_RUN,
        help="stop cleanly after this many LM calls in this process (program, judge and "
        "compile's optimizer calls, cached ones included): no new question or trial starts, "
        "what finished is kept, and a rerun with the same --out continues",
    )


#: Settings that change what a prediction means, whatever the entry point: a run folder or a
#: study made with other values is not resumed (declared with ``resume``).
SESSION_KEYS = tuple(
    key
    for key in resume_keys(ModelDataSettings, "evaluate")
    if key in resume_keys(ModelDataSettings, "compile")
)
