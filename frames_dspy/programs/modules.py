"""The FRAMES paper's setups as DSPy modules, one class per program kind, and what they share.

Every program returns a ``dspy.Prediction`` with the same fields, so the evaluation and the
optimizers treat them alike:

- ``answer``: the final answer text;
- ``context_ids``: for each round, the ids of the articles in context after it (one round for
  the single-shot setups, none for ``Naive``);
- ``queries``: for each round, the search queries sent;
- ``packing``: how the articles were fitted into the answer prompt (tokens, how much was cut);
- ``query_stats``: generated, repeated and dropped queries, and query-generation errors
  (:class:`~frames_dspy.programs.queries.QueryStats` as a dict; programs with a query writer).

The single-shot setups (naive, BM25-R, phrases, oracle) are here; the paper's multi-step
method is :class:`~frames_dspy.programs.multihop.MultiHop`. Each class declares its ``KIND``
and the parts it needs (``NEEDS``: a retriever, an article store); its spec settings
(``SETTINGS``) are its constructor's keyword arguments with their defaults, read from the
signature. Defining the class registers the kind, so :func:`build_program` builds any
:class:`~frames_dspy.programs.spec.ProgramSpec` whose class was imported (the package imports
them all).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import dspy

from frames_dspy.data.corpus import Article, ArticleStore
from frames_dspy.programs.packing import PackedContext, pack_articles
from frames_dspy.programs.queries import capitalised_phrases
from frames_dspy.programs.signatures import AnswerFromKnowledge, AnswerWithContext
from frames_dspy.programs.spec import ProgramSpec, register_kind

#: New articles each capitalised phrase brings (``phrases-N`` and ``phrase_docs``).
PHRASE_HITS = 2

__all__ = [
    "PROGRAM_CLASSES",
    "recording_rounds",
    "Naive",
    "RetrieveThenAnswer",
    "PhraseQueries",
    "Oracle",
    "build_program",
]

# What the program running in this thread has retrieved so far: if it fails half-way, the
# runner still credits the articles it found (its recall is not left out of the average).
_ROUNDS: ContextVar[dict[str, Any] | None] = ContextVar("frames_rounds", default=None)


@contextlib.contextmanager
def recording_rounds() -> Iterator[dict[str, Any]]:
    """Collect ``context_ids`` and ``queries`` per round of the program run in the block, and
    ``answer_context``: the text the answer step saw (None if it saw none). The runner reads
    that text and keeps only what it needs of it, so records stay small."""
    trace: dict[str, Any] = {"context_ids": [], "queries": [], "answer_context": None}
    token = _ROUNDS.set(trace)
    try:
        yield trace
    finally:
        _ROUNDS.reset(token)


def _note_round(ids: Sequence[str], queries: Sequence[str]) -> None:
    trace = _ROUNDS.get()
    if trace is not None:
        trace["context_ids"].append(list(ids))
        trace["queries"].append(list(queries))


def _note_answer_context(text: str) -> None:
    trace = _ROUNDS.get()
    if trace is not None:
        trace["answer_context"] = text


#: Program kind -> its module class (filled as the classes below are defined).
PROGRAM_CLASSES: dict[str, type[_FramesProgram]] = {}


def _constructor_settings(cls: type) -> dict[str, Any]:
    """A program class's spec settings: its constructor's keyword-only arguments and their
    defaults (``context_tokens`` defaults to None: :func:`build_program` fills it in)."""
    settings = {}
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if param.kind is not inspect.Parameter.KEYWORD_ONLY:
            continue
        if param.default is inspect.Parameter.empty:
            raise TypeError(f"{cls.__name__}.__init__'s setting {name!r} needs a default")
        settings[name] = param.default
    return settings


class _FramesProgram(dspy.Module):
    """Shared parts: the answer step, the prediction layout, and the spec.

    ``answer_step`` (default True) can be switched off to run only the retrieval half: the
    answer is then "" and costs no LM call. Optimising for recall does this, since the answer
    cannot change what was retrieved.
    """

    answer_step: bool = True
    #: Whether a program with a query writer calls it; False runs the program's no-LM parts
    #: alone at the same article budget (see :meth:`MultiHop.round_hits`), which measures
    #: what the LM's queries add.
    lm_queries: bool = True

    #: Example fields passed to ``forward``.
    input_fields: tuple[str, ...] = ("question",)
    #: The program kind; set by each concrete class, which registers it.
    KIND: str = ""
    #: Spec settings with their defaults: the constructor's keyword-only arguments, derived
    #: from its signature when the class is defined (:func:`_constructor_settings`).
    SETTINGS: Mapping[str, Any] = {}
    #: Non-LM parts the constructor takes first: ``retriever`` and/or ``store``.
    NEEDS: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("KIND"):
            cls.SETTINGS = _constructor_settings(cls)
            register_kind(cls.KIND, cls.SETTINGS)
            PROGRAM_CLASSES[cls.KIND] = cls

    @property
    def spec(self) -> ProgramSpec:
        """The spec that rebuilds this program's shape (not its prompts or demos)."""
        return ProgramSpec(self.KIND, **{name: getattr(self, name) for name in self.SETTINGS})

    @classmethod
    def from_spec(cls, spec: ProgramSpec, *, retriever=None, store=None) -> _FramesProgram:
        """Build the program a spec describes, with the parts it needs."""
        parts = {"retriever": retriever, "store": store}
        missing = [name for name in cls.NEEDS if parts[name] is None]
        if missing:
            what = "a retriever" if missing[0] == "retriever" else "an article store"
            raise ValueError(f"the {spec.kind} program needs {what}")
        settings = {name: getattr(spec, name) for name in cls.SETTINGS}
        return cls(*(parts[name] for name in cls.NEEDS), **settings)

    def __init__(self, *, context_tokens: int | None = None, cot: bool = False):
        super().__init__()
        if context_tokens is None:
            raise ValueError(
                "context_tokens is not set: pass it, or build the program with build_program, "
                "which takes it from the model"
            )
        if context_tokens <= 0:
            raise ValueError(f"context_tokens={context_tokens} must be positive")
        self.context_tokens = context_tokens
        self.cot = cot
        make = dspy.ChainOfThought if cot else dspy.Predict
        self.answer = make(AnswerWithContext)

    def _answer(
        self, question: str, articles: Sequence[Article]
    ) -> tuple[str, PackedContext | None]:
        """The answer call on ``articles`` packed into the budget, and the packing ("" and
        None without the answer step)."""
        if not self.answer_step:
            return "", None
        packed = pack_articles(articles, self.context_tokens) if articles else None
        context = packed.text if packed else "(no articles were found)"
        _note_answer_context(context)
        result = self.answer(question=question, context=context)
        return str(result.answer).strip(), packed


def _prediction(
    answer: str,
    packed: PackedContext | None,
    *,
    context_ids: list[list[str]],
    queries: list[list[str]],
    **more: Any,
) -> dspy.Prediction:
    """A program's prediction, in the layout every program shares (the module docstring).

    LM calls and tokens are not in it: whoever runs the program counts them once (the
    runner's meter and DSPy's usage tracker).
    """
    packing = packed.summary() if packed else None
    return dspy.Prediction(
        packing=packing, answer=answer, context_ids=context_ids, queries=queries, **more
    )


class Naive(_FramesProgram):
    """The paper's naive prompt: the question alone, no retrieval."""

    KIND = "naive"

    def __init__(self, *, cot: bool = False):
        dspy.Module.__init__(self)
        self.cot = cot
        self.answer = (dspy.ChainOfThought if cot else dspy.Predict)(AnswerFromKnowledge)

    def forward(self, question: str) -> dspy.Prediction:
        answer = str(self.answer(question=question).answer).strip()
        return _prediction(answer, None, context_ids=[], queries=[])


class RetrieveThenAnswer(_FramesProgram):
    """BM25-R: the top ``n_docs`` articles for the question, then one answer call."""

    KIND = "bm25"
    NEEDS = ("retriever",)

    def __init__(
        self, retriever, *, n_docs: int = 4, context_tokens: int | None = None, cot: bool = False
    ):
        super().__init__(context_tokens=context_tokens, cot=cot)
        if n_docs < 1:
            raise ValueError(f"n_docs={n_docs} must be at least 1")
        self.retriever = retriever
        self.n_docs = n_docs

    def forward(self, question: str) -> dspy.Prediction:
        hits = self.retriever.search(question, self.n_docs)
        articles = [self.retriever.store[h.article_id] for h in hits]
        ids = [a.id for a in articles]
        _note_round(ids, [question])
        answer, packed = self._answer(question, articles)
        return _prediction(answer, packed, context_ids=[ids], queries=[[question]])


class PhraseQueries(_FramesProgram):
    """A no-LM reference: the question's capitalised phrases as extra BM25 queries.

    The question's top ``n_docs // 2`` articles, then the top ``k`` new articles for each
    capitalised phrase (:func:`capitalised_phrases`) while fewer than ``n_docs`` are in
    context, then the question's next articles until ``n_docs`` are. One round, one answer
    call (none without the answer step). It shows what a query writer must beat that only
    copies names out of the question.
    """

    KIND = "phrases"
    NEEDS = ("retriever",)

    def __init__(
        self,
        retriever,
        *,
        n_docs: int = 12,
        k: int = PHRASE_HITS,
        context_tokens: int | None = None,
        cot: bool = False,
    ):
        super().__init__(context_tokens=context_tokens, cot=cot)
        if n_docs < 1 or k < 1:
            raise ValueError(f"n_docs={n_docs} and k={k} must be at least 1")
        self.retriever = retriever
        self.n_docs, self.k = n_docs, k

    def forward(self, question: str) -> dspy.Prediction:
        ids: list[str] = []
        self._add_new(ids, question, max(1, self.n_docs // 2))
        phrases = capitalised_phrases(question)
        for phrase in phrases:
            if len(ids) >= self.n_docs:
                break
            self._add_new(ids, phrase, self.k)
        self._add_new(ids, question, self.n_docs - len(ids))
        queries = [question, *phrases]
        _note_round(ids, queries)
        answer, packed = self._answer(question, [self.retriever.store[i] for i in ids])
        return _prediction(answer, packed, context_ids=[ids], queries=[queries])

    def _add_new(self, ids: list[str], query: str, limit: int) -> None:
        """Append to ``ids`` the top ``limit`` new articles for ``query``, up to ``n_docs``."""
        for hit in self.retriever.search_many([query], limit, exclude=set(ids))[0]:
            if len(ids) < self.n_docs and hit.article_id not in ids:
                ids.append(hit.article_id)


class Oracle(_FramesProgram):
    """All gold articles the corpus has, then one answer call (the paper's upper bound)."""

    KIND = "oracle"
    NEEDS = ("store",)
    input_fields = ("question", "gold_urls")

    def __init__(
        self, store: ArticleStore, *, context_tokens: int | None = None, cot: bool = False
    ):
        super().__init__(context_tokens=context_tokens, cot=cot)
        self.store = store

    def forward(self, question: str, gold_urls: Sequence[str] | None = None) -> dspy.Prediction:
        if gold_urls is None:
            raise ValueError("Oracle needs the example's gold_urls; call it with gold_urls=[...]")
        articles = self.store.resolve_many(gold_urls)
        ids = [a.id for a in articles]
        _note_round(ids, [])
        answer, packed = self._answer(question, articles)
        return _prediction(answer, packed, context_ids=[ids], queries=[])


def build_program(
    spec: ProgramSpec | Mapping[str, Any],
    *,
    retriever=None,
    store: ArticleStore | None = None,
    context_tokens: int = 2000,
) -> _FramesProgram:
    """Build the program a spec describes.

    Args:
        spec: A :class:`ProgramSpec` or its dict form.
        retriever: For the kinds that search (``bm25``, ``phrases``, ``multihop``).
        store: For ``oracle``.
        context_tokens: The article budget when the spec does not set one.

    Raises:
        ValueError: an unknown kind or setting, or a retriever/store missing for a kind that
            needs it.
    """
    if not isinstance(spec, ProgramSpec):
        spec = ProgramSpec.from_dict(spec)
    if spec.takes("context_tokens") and spec.context_tokens is None:
        spec = spec.replace(context_tokens=context_tokens)
    return PROGRAM_CLASSES[spec.kind].from_spec(spec, retriever=retriever, store=store)
