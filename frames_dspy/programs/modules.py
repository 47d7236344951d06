"""The FRAMES paper's setups as DSPy modules, one class per program kind.

Every program returns a ``dspy.Prediction`` with the same fields, so the evaluation and the
optimizers treat them alike:

- ``answer``: the final answer text;
- ``context_ids``: for each round, the ids of the articles in context after it (one round for
  the single-shot setups, none for ``Naive``);
- ``queries``: for each round, the search queries sent;
- ``packing``: how the articles were fitted into the answer prompt (tokens, how much was cut);
- ``query_stats``: generated, repeated and dropped queries, and query-generation errors.

Each class declares its ``KIND`` and the parts it needs (``NEEDS``: a retriever, an article
store); its spec settings (``SETTINGS``) are its constructor's keyword arguments with their
defaults, read from the signature. Defining the class registers the kind, so
:func:`build_program` builds any :class:`~frames_dspy.programs.spec.ProgramSpec`.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from frames_dspy.data.corpus import Article, ArticleStore
from frames_dspy.programs.packing import CHARS_PER_TOKEN, PackedContext, pack_articles
from frames_dspy.programs.queries import capitalised_phrases, clean_queries
from frames_dspy.programs.signatures import (
    AnswerFromKnowledge,
    AnswerWithContext,
    GenerateQueries,
    NameArticles,
    PlanQueries,
)
from frames_dspy.programs.spec import ProgramSpec, register_kind

logger = logging.getLogger(__name__)

#: New articles each capitalised phrase brings (``phrases-N`` and ``phrase_docs``).
PHRASE_HITS = 2

__all__ = [
    "PROGRAM_CLASSES",
    "recording_rounds",
    "Naive",
    "RetrieveThenAnswer",
    "PhraseQueries",
    "capitalised_phrases",
    "Oracle",
    "MultiHop",
    "clean_queries",
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


def _note_round(ids: list[str], queries: list[str]) -> None:
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
        if not self.answer_step:
            return "", None
        packed = pack_articles(articles, self.context_tokens) if articles else None
        context = packed.text if packed else "(no articles were found)"
        _note_answer_context(context)
        result = self.answer(question=question, context=context)
        return str(result.answer).strip(), packed

    def _run(self, body: Callable[[], dict[str, Any]]) -> dspy.Prediction:
        # LM calls and tokens are counted once, by whoever runs the program (the runner's
        # meter and DSPy's usage tracker), not here.
        fields = body()
        packed: PackedContext | None = fields.pop("packed", None)
        return dspy.Prediction(packing=packed.summary() if packed else None, **fields)


class Naive(_FramesProgram):
    """The paper's naive prompt: the question alone, no retrieval."""

    KIND = "naive"

    def __init__(self, *, cot: bool = False):
        dspy.Module.__init__(self)
        self.cot = cot
        self.answer = (dspy.ChainOfThought if cot else dspy.Predict)(AnswerFromKnowledge)

    def forward(self, question: str) -> dspy.Prediction:
        def body():
            answer = self.answer(question=question).answer
            return {"answer": str(answer).strip(), "context_ids": [], "queries": []}

        return self._run(body)


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
        def body():
            hits = self.retriever.search(question, self.n_docs)
            articles = [self.retriever.store[h.article_id] for h in hits]
            ids = [a.id for a in articles]
            _note_round(ids, [question])
            answer, packed = self._answer(question, articles)
            return {
                "answer": answer,
                "context_ids": [ids],
                "queries": [[question]],
                "packed": packed,
            }

        return self._run(body)


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
        def body():
            ids: list[str] = []

            def add(query: str, limit: int) -> None:
                for hit in self.retriever.search_many([query], limit, exclude=set(ids))[0]:
                    if len(ids) < self.n_docs and hit.article_id not in ids:
                        ids.append(hit.article_id)

            add(question, max(1, self.n_docs // 2))
            phrases = capitalised_phrases(question)
            for phrase in phrases:
                if len(ids) >= self.n_docs:
                    break
                add(phrase, self.k)
            add(question, self.n_docs - len(ids))
            queries = [question, *phrases]
            _note_round(ids, queries)
            articles = [self.retriever.store[i] for i in ids]
            answer, packed = self._answer(question, articles)
            return {
                "answer": answer,
                "context_ids": [ids],
                "queries": [queries],
                "packed": packed,
            }

        return self._run(body)


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

        def body():
            articles = self.store.resolve_many(gold_urls)
            _note_round([a.id for a in articles], [])
            answer, packed = self._answer(question, articles)
            return {
                "answer": answer,
                "context_ids": [[a.id for a in articles]],
                "queries": [],
                "packed": packed,
            }

        return self._run(body)


class MultiHop(_FramesProgram):
    """The paper's multi-step retrieval (its Algorithm 1), vanilla or with search planning.

    Each of ``rounds`` rounds writes ``k`` queries, retrieves the top ``n_docs`` articles per
    query that are not yet in context, and appends them; one answer call follows the last round.

    Args:
        retriever: Has ``search_many(queries, k, exclude=...)`` and a ``store``.
        rounds: Retrieval rounds (the paper: up to 5).
        k: Queries per round (the paper: 5).
        n_docs: Articles retrieved per query (the paper: 10).
        planning: Use the search-planning prompt (examples, no repeats, step by step) and drop
            queries that repeat an earlier round's.
        titles: Ask for the titles of the missing articles (``NameArticles``) instead of
            keyword queries, and drop titles asked for in an earlier round.
        include_question: Make the question itself one of each round's ``k`` queries. Small
            models often echo the question or answer it instead of writing queries; the
            question keeps retrieval useful whatever they write.
        question_docs: With the question as a query: the articles it brings per round (None:
            ``n_docs``, like any query). It also takes the slots the written queries leave
            unused (too few written, repeats dropped, hits already in context), so every
            round adds exactly ``question_docs + (k - 1) * n_docs`` articles and the program
            compares with ``bm25-N`` at one article count.
        phrase_docs: Articles the question's capitalised phrases bring per round, a no-LM
            query source (None: none; needs ``question_docs``). A round then takes the
            question's top ``question_docs``, the top :data:`PHRASE_HITS` new articles per
            phrase while fewer than ``phrase_docs`` came, each written query's
            ``n_docs``, and fills the rest from the question: exactly
            ``question_docs + phrase_docs + (k - 1) * n_docs`` articles. With ``k=1`` and
            one round this is ``phrases-N`` (N = question_docs + phrase_docs).
        lm_from_round: The first round whose queries the LM writes (None: 1); earlier rounds
            send the question (and phrases) alone, e.g. 2: the LM first sees what the
            question found, and round 1 costs no LM call.
        context_tokens: Budget of the answer prompt's article field.
        found_tokens: Budget of the compact view (titles and leads) that query writing sees.
        lead_chars: Characters of each article's opening shown in that view.
        cot: Answer with chain of thought.
    """

    KIND = "multihop"
    NEEDS = ("retriever",)

    def __init__(
        self,
        retriever,
        *,
        rounds: int = 5,
        k: int = 5,
        n_docs: int = 10,
        planning: bool = True,
        titles: bool = False,
        include_question: bool = True,
        question_docs: int | None = None,
        phrase_docs: int | None = None,
        lm_from_round: int | None = None,
        context_tokens: int | None = None,
        found_tokens: int = 1000,
        lead_chars: int = 120,
        cot: bool = False,
    ):
        super().__init__(context_tokens=context_tokens, cot=cot)
        for name, value in (("rounds", rounds), ("k", k), ("n_docs", n_docs)):
            if value < 1:
                raise ValueError(f"{name}={value} must be at least 1")
        if titles and planning:
            raise ValueError(
                "titles and planning are two query prompts; choose one (planning=False)"
            )
        if question_docs is not None and (question_docs < 1 or not include_question):
            raise ValueError(
                f"question_docs={question_docs} needs the question as one of the queries "
                "(include_question) and must be at least 1"
            )
        if phrase_docs is not None and (phrase_docs < 1 or question_docs is None):
            raise ValueError(
                f"phrase_docs={phrase_docs} needs question_docs (a fixed round size) and must "
                "be at least 1"
            )
        self.retriever = retriever
        self.phrase_docs = phrase_docs
        self.lm_from_round = lm_from_round
        self.rounds, self.k, self.n_docs = rounds, k, n_docs
        self.planning = planning
        self.titles = titles
        self.include_question = include_question
        self.question_docs = question_docs
        self.found_tokens = found_tokens
        self.lead_chars = lead_chars
        signature = NameArticles if titles else PlanQueries if planning else GenerateQueries
        self.generate = dspy.Predict(signature)

    def round_hits(self, question: str, queries: Sequence[str], in_context: set[str]) -> list[str]:
        """The new article ids one round's ``queries`` bring, in the order they join the
        context (with ``question_docs``: the question's first, then the written queries')."""
        budgeted = self.question_docs is not None and queries[:1] == [question]
        written = queries[1:] if budgeted else queries
        if budgeted and self.phrase_docs:
            fixed = self.fixed_hits(question, in_context)
            fresh = self._new_ids(written, self.n_docs, in_context | set(fixed))
            taken = list(dict.fromkeys(fixed + fresh))
            slots = self.round_size - len(taken)
            return taken + self._new_ids([question], max(0, slots), in_context | set(taken))
        fresh = self._new_ids(written, self.n_docs, in_context)
        if not budgeted:
            return fresh
        slots = self.question_docs + (self.k - 1) * self.n_docs - len(fresh)
        return self._new_ids([question], max(0, slots), in_context | set(fresh)) + fresh

    def writes_in(self, number: int) -> bool:
        """Whether the LM writes queries in round ``number`` (1-based)."""
        return self.lm_queries and number >= (self.lm_from_round or 1)

    @property
    def round_size(self) -> int | None:
        """Articles a round adds (None when the question has no fixed budget)."""
        if self.question_docs is None:
            return None
        return self.question_docs + (self.phrase_docs or 0) + (self.k - 1) * self.n_docs

    def fixed_hits(self, question: str, in_context: set[str]) -> list[str]:
        """The new article ids a round's no-LM queries bring before any written query: the
        question's top ``question_docs`` (``n_docs`` unset) and the phrases' share."""
        ids = self._new_ids([question], self.question_docs or self.n_docs, in_context)
        if not self.phrase_docs:
            return ids
        phrase_ids: list[str] = []
        for phrase in capitalised_phrases(question):
            if len(phrase_ids) >= self.phrase_docs:
                break
            skip = in_context | set(ids) | set(phrase_ids)
            for article_id in self._new_ids([phrase], PHRASE_HITS, skip):
                if len(phrase_ids) < self.phrase_docs:
                    phrase_ids.append(article_id)
        return ids + phrase_ids

    def _new_ids(self, queries: Sequence[str], n: int, skip: set[str]) -> list[str]:
        # A retriever may return skipped ids anyway; each id is kept once, in hit order.
        ids: list[str] = []
        for hits in self.retriever.search_many(queries, n, exclude=skip):
            ids.extend(h.article_id for h in hits if h.article_id not in skip)
        return list(dict.fromkeys(ids))

    def found_view(self, articles: Sequence[Article]) -> str:
        # Append-only: a later round's view extends the earlier one, so a prefix cache helps.
        lines, used = [], 0
        budget = self.found_tokens * CHARS_PER_TOKEN
        for i, article in enumerate(articles, start=1):
            lead = " ".join(article.text[: self.lead_chars * 2].split())[: self.lead_chars]
            line = f"[{i}] {article.title}: {lead}…" if used < budget else f"[{i}] {article.title}"
            used += len(line) + 1
            lines.append(line)
        return "\n".join(lines) if lines else "(nothing yet)"

    def forward(self, question: str) -> dspy.Prediction:
        def body():
            store = self.retriever.store
            context: list[Article] = []
            in_context: set[str] = set()
            per_round_ids: list[list[str]] = []
            per_round_queries: list[list[str]] = []
            past: list[str] = []
            stats = {
                "generated": 0,
                "repeated": 0,
                "dropped_repeats": 0,
                "dropped_duplicates": 0,
                "errors": 0,
            }
            for number in range(1, self.rounds + 1):
                queries = [question] if self.include_question else []
                wanted = self.k - len(queries) if self.writes_in(number) else 0
                if wanted > 0:
                    try:
                        out = self.generate(
                            question=question,
                            found=self.found_view(context),
                            past_queries=past,
                            n_queries=wanted,
                        )
                        written = out.queries
                    except AdapterParseError as err:
                        logger.warning("query generation could not be parsed: %s", err)
                        stats["errors"] += 1
                        written = []
                    kept, counts = clean_queries(
                        written,
                        limit=wanted,
                        taken=queries,
                        past=past,
                        drop_repeats=self.planning or self.titles,
                    )
                    for key, value in counts.items():
                        stats[key] += value
                    if written:
                        # The trace holds this prediction and bootstrapped demos are made from
                        # it: keep only the queries sent, not a small model's runaway list.
                        out.queries = kept
                    queries.extend(kept)
                    past.extend(kept)
                if not queries:
                    queries = [question]
                for article_id in self.round_hits(question, queries, in_context):
                    in_context.add(article_id)
                    context.append(store[article_id])
                if self.phrase_docs and queries[:1] == [question]:
                    queries = [queries[0], *capitalised_phrases(question), *queries[1:]]
                per_round_ids.append([a.id for a in context])
                per_round_queries.append(queries)
                _note_round(per_round_ids[-1], queries)
            answer, packed = self._answer(question, context)
            return {
                "answer": answer,
                "context_ids": per_round_ids,
                "queries": per_round_queries,
                "query_stats": stats,
                "packed": packed,
            }

        return self._run(body)


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
        retriever: For the kinds that search (``bm25``, ``multihop``).
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
