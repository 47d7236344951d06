"""The paper's multi-step retrieval (its Algorithm 1) as a DSPy module.

Each of ``rounds`` rounds: the LM writes ``k`` queries from the question and what was found
so far; BM25 returns the top ``n_docs`` articles per query; only articles not yet in context
are added. After the last round, one answer call. :meth:`MultiHop.forward` reads as that loop;
the budgets that make rounds comparable with the no-LM references (the question's own share,
the question's phrases, the round the LM starts in) live in the steps it names.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import dspy
from dspy.utils.exceptions import AdapterParseError

from frames_dspy.data.corpus import Article
from frames_dspy.programs.modules import PHRASE_HITS, _FramesProgram, _note_round, _prediction
from frames_dspy.programs.packing import CHARS_PER_TOKEN
from frames_dspy.programs.queries import QueryStats, capitalised_phrases, clean_queries
from frames_dspy.programs.signatures import GenerateQueries, NameArticles, PlanQueries

logger = logging.getLogger(__name__)

__all__ = ["MultiHop"]


@dataclass
class _RoundLog:
    """Each round's articles in context after it and the queries it sent.

    Each round is also noted for the runner as it ends (:func:`recording_rounds`), so a
    program that fails in a later round is still credited with what it found.
    """

    context_ids: list[list[str]] = field(default_factory=list)
    queries: list[list[str]] = field(default_factory=list)

    def add(self, context: Sequence[Article], queries: list[str]) -> None:
        self.context_ids.append([a.id for a in context])
        self.queries.append(queries)
        _note_round(self.context_ids[-1], queries)


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

    def forward(self, question: str) -> dspy.Prediction:
        context: list[Article] = []  # what was found so far, in the order it came
        past: list[str] = []  # the queries the LM wrote in earlier rounds
        stats = QueryStats()
        log = _RoundLog()
        for number in range(1, self.rounds + 1):
            written, counts = self.write_queries(question, context, past, number)
            queries = self.round_queries(question, written)
            context.extend(self.search(question, queries, context))
            log.add(context, self.sent_queries(question, queries))
            past.extend(written)
            stats += counts
        answer, packed = self._answer(question, context)
        return _prediction(
            answer,
            packed,
            context_ids=log.context_ids,
            queries=log.queries,
            query_stats=stats.as_dict(),
        )

    def write_queries(
        self, question: str, context: Sequence[Article], past: list[str], number: int
    ) -> tuple[list[str], QueryStats]:
        """Round ``number``'s written queries, cleaned (:func:`clean_queries`), and their
        counts; none when the LM does not write in that round or the question takes all
        ``k``. A reply that cannot be parsed is counted as an error and writes nothing."""
        taken = [question] if self.include_question else []
        wanted = self.k - len(taken) if self.writes_in(number) else 0
        if wanted <= 0:
            return [], QueryStats()
        try:
            out = self.generate(
                question=question,
                found=self.found_view(context),
                past_queries=list(past),  # a copy: the trace keeps what this round saw
                n_queries=wanted,
            )
        except AdapterParseError as err:
            logger.warning("query generation could not be parsed: %s", err)
            return [], QueryStats(errors=1)
        drop_repeats = self.planning or self.titles
        kept, counts = clean_queries(
            out.queries, limit=wanted, taken=taken, past=past, drop_repeats=drop_repeats
        )
        if out.queries:
            # The trace holds this prediction and bootstrapped demos are made from it: keep
            # only the queries sent, not a small model's runaway list.
            out.queries = kept
        return kept, counts

    def round_queries(self, question: str, written: list[str]) -> list[str]:
        """The queries a round searches with: the question first when it is one of them,
        then the written ones; the question alone when nothing else is left."""
        if self.include_question or not written:
            return [question, *written]
        return list(written)

    def search(
        self, question: str, queries: list[str], context: Sequence[Article]
    ) -> list[Article]:
        """The articles a round's ``queries`` bring that are not yet in ``context``, in the
        order they join it (:meth:`round_hits`)."""
        in_context = {a.id for a in context}
        store = self.retriever.store
        return [store[i] for i in self.round_hits(question, queries, in_context)]

    def sent_queries(self, question: str, queries: list[str]) -> list[str]:
        """A round's queries as recorded: with ``phrase_docs`` the question's phrases, which
        :meth:`fixed_hits` searches too, follow the question."""
        if self.phrase_docs and queries[:1] == [question]:
            return [queries[0], *capitalised_phrases(question), *queries[1:]]
        return queries

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
        """What query writing sees of the articles found: a numbered title per article, with
        its lead while the view is under ``found_tokens``."""
        # Append-only: a later round's view extends the earlier one, so a prefix cache helps.
        lines, used = [], 0
        budget = self.found_tokens * CHARS_PER_TOKEN
        for i, article in enumerate(articles, start=1):
            lead = " ".join(article.text[: self.lead_chars * 2].split())[: self.lead_chars]
            line = f"[{i}] {article.title}: {lead}…" if used < budget else f"[{i}] {article.title}"
            used += len(line) + 1
            lines.append(line)
        return "\n".join(lines) if lines else "(nothing yet)"
