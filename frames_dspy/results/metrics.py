"""Retrieval and query metrics: gold-article recall per round and query repetition.

Two repetition figures: :func:`query_repetition_rate` counts exact repeats of an earlier
round's query (casefolded), as the multi-step programs count them while they run;
:data:`NEAR_REPEAT` counts near-repeats (the same content words in another order, form or
with a word more), the measure the agent and the fixed-rounds conditions are compared by.

The autorater (answer correctness) lives in :mod:`frames_dspy.judge`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from frames_dspy.programs.queries import OPENING_WORDS

__all__ = ["NEAR_REPEAT", "NearRepeat", "gold_recall", "mean_recall", "query_repetition_rate"]


def gold_recall(
    gold_ids: Sequence[str], context_ids: Sequence[Sequence[str]]
) -> list[float] | None:
    """Fraction of the gold articles in context after each round; None without gold articles."""
    gold = set(gold_ids)
    if not gold:
        return None
    return [len(gold & set(ids)) / len(gold) for ids in context_ids]


def mean_recall(recalls: Iterable[Sequence[float] | None]) -> tuple[list[float], int]:
    """Mean gold-article recall per round, and how many questions it is averaged over.

    Every question with a gold article in the corpus counts (its recall a list): one that
    failed before retrieving anything, or retrieved nothing, counts as 0 in every round, so a
    run where most questions failed cannot show the recall of the few that worked. A question
    that stopped early keeps its last recall for the remaining rounds. Programs that never
    retrieve (no question has any round) have no recall: ``([], 0)``.
    """
    rows = [list(r) for r in recalls if isinstance(r, list | tuple)]
    if not any(rows):
        return [], 0
    depth = max(len(r) for r in rows)
    padded = [(r + [r[-1]] * (depth - len(r))) if r else [0.0] * depth for r in rows]
    return [sum(r[i] for r in padded) / len(padded) for i in range(depth)], len(padded)


def query_repetition_rate(query_stats: dict[str, int] | None) -> float | None:
    """Share of LM-written queries that repeat an earlier round's query (None if none written)."""
    if not query_stats or not query_stats.get("generated"):
        return None
    return query_stats.get("repeated", 0) / query_stats["generated"]


_WORD = re.compile(r"[^\W_]+")


def _words_in_order(query: str) -> tuple[str, ...]:
    return tuple(w.casefold() for w in _WORD.findall(query))


@dataclass(frozen=True)
class NearRepeat:
    """The paper's "repetitive query loops", measured: a query near-repeats an earlier one
    of the same question when their content words overlap by at least ``overlap`` (shared
    words over all words, Jaccard). Content words are the query's words casefolded, without
    :data:`~frames_dspy.programs.queries.OPENING_WORDS` and single letters; so word order,
    case, punctuation and small words do not make a query new, and one word more in four
    does not either ("Willis Tower completion" then "Willis Tower completion date"). An
    exact repeat is a near-repeat; a query of small words only repeats the same words in
    the same order.

    The same rule measures every condition, from the queries its LM chose
    (:func:`frames_dspy.programs.sources.lm_queries`): the agent's searches, a multi-step
    program's written queries.
    """

    overlap: float = 0.75

    def words(self, query: str) -> frozenset[str]:
        found = (w.casefold() for w in _WORD.findall(query))
        return frozenset(w for w in found if w not in OPENING_WORDS and (len(w) > 1 or w.isdigit()))

    def repeats(self, query: str, earlier: Iterable[str]) -> bool:
        """Whether ``query`` near-repeats one of ``earlier``."""
        words = self.words(query)
        for other in earlier:
            theirs = self.words(other)
            if not words or not theirs:  # small words only: the same words in order
                if _words_in_order(query) == _words_in_order(other):
                    return True
                continue
            if len(words & theirs) / len(words | theirs) >= self.overlap:
                return True
        return False

    def share(self, queries: Sequence[str], *, dropped_repeats: int = 0) -> float | None:
        """The share of a question's LM queries, in the order sent, that near-repeat an
        earlier one; ``dropped_repeats`` are exact repeats the LM wrote that were not sent
        (the planning prompt's rule drops them), counted as repeats. None without a query."""
        total = len(queries) + dropped_repeats
        if total == 0:
            return None
        near = sum(self.repeats(q, queries[:i]) for i, q in enumerate(queries))
        return (near + dropped_repeats) / total


#: The one near-repeat rule every figure uses.
NEAR_REPEAT = NearRepeat()
