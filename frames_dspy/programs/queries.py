"""What query-writing programs send: the LM's queries cleaned, and the question's named phrases.

- :func:`clean_queries`: a query writer's raw output (a list, or a string of lines) made into
  the queries a round sends: list markers stripped, duplicates and (optionally) an earlier
  round's queries dropped, with counts of each (:class:`QueryStats`).
- :func:`capitalised_phrases`: the question's runs of capitalised words, the no-LM reference
  query writer (:class:`~frames_dspy.programs.modules.PhraseQueries`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["OPENING_WORDS", "QueryStats", "capitalised_phrases", "clean_queries"]


@dataclass
class QueryStats:
    """What became of the queries a program's query writer wrote.

    Attributes:
        generated: Queries written (before cleaning).
        repeated: Written queries that match an earlier round's.
        dropped_repeats: Of those, the ones dropped (the planning and titles prompts' rule).
        dropped_duplicates: Empty, or a repeat within the round (the question included).
        errors: Query-writing calls whose reply could not be parsed (the round went on).
    """

    generated: int = 0
    repeated: int = 0
    dropped_repeats: int = 0
    dropped_duplicates: int = 0
    errors: int = 0

    def __add__(self, other: QueryStats) -> QueryStats:
        mine, theirs = dataclasses.astuple(self), dataclasses.astuple(other)
        return QueryStats(*(a + b for a, b in zip(mine, theirs, strict=True)))

    def as_dict(self) -> dict[str, int]:
        """The counts by name, as a prediction and its record carry them."""
        return dataclasses.asdict(self)


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)]|query\s*\d*:)\s*", re.IGNORECASE)


def _clean_one(query: object) -> str:
    text = _BULLET.sub("", str(query)).strip().strip("\"'`").strip()
    return " ".join(text.split())


def clean_queries(
    generated: Sequence[object] | str | None,
    *,
    limit: int,
    taken: Sequence[str] = (),
    past: Sequence[str] = (),
    drop_repeats: bool,
) -> tuple[list[str], QueryStats]:
    """Tidy LM-written queries: strip list markers, drop empty and duplicate ones, keep ``limit``.

    Args:
        generated: What the LM wrote (a list, or a newline-separated string).
        limit: How many queries to keep at most.
        taken: Queries already chosen for this round (e.g. the question); never duplicated.
        past: Queries of earlier rounds.
        drop_repeats: Drop queries that repeat an earlier round's (the planning prompt's rule);
            when False they are kept and only counted.

    Returns:
        The kept queries and their counts (``errors`` is left at 0: parsing is the caller's).
    """
    if generated is None:
        items: list[object] = []
    elif isinstance(generated, str):
        items = generated.splitlines()
    else:
        items = list(generated)
    seen = {q.casefold() for q in taken}
    earlier = {q.casefold() for q in past}
    kept: list[str] = []
    stats = QueryStats(generated=len(items))
    for item in items:
        query = _clean_one(item)
        key = query.casefold()
        if not query or key in seen:
            stats.dropped_duplicates += 1
            continue
        if key in earlier:
            stats.repeated += 1
            if drop_repeats:
                stats.dropped_repeats += 1
                continue
        if len(kept) < limit:
            kept.append(query)
            seen.add(key)
    return kept, stats


#: Words that name nothing and open a question or a clause with a capital letter (stripped
#: from the front of a capitalised run); a query's words outside them are what two queries are
#: compared by (:data:`frames_dspy.results.metrics.NEAR_REPEAT`). Not the autorater's longer
#: ``FUNCTION_WORDS`` (``frames_dspy.judge.words``): this list decides which phrases a
#: question yields, so it changes only with the retrieval figures it moves.
OPENING_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "as",
        "at",
        "by",
        "for",
        "from",
        "how",
        "if",
        "in",
        "of",
        "on",
        "the",
        "this",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "was",
        "were",
        "is",
        "are",
        "did",
        "does",
        "do",
        "i",
        "my",
        "his",
        "her",
        "their",
        "its",
    ]
)
_CAPITALISED = re.compile(
    r"[A-Z][\w'’.&-]*(?:\s+(?:(?:of|the|de|du|von|van|and|for)\s+)*[A-Z][\w'’.&-]*)*"
)


def capitalised_phrases(question: str) -> list[str]:
    """The question's runs of capitalised words (e.g. ``Mount Rushmore``), in order, once each.

    Opening words (:data:`OPENING_WORDS`, e.g. a sentence-initial ``Which``) are stripped
    from the front of a run; a run left empty is dropped.
    """
    phrases: list[str] = []
    for match in _CAPITALISED.finditer(question):
        words = match.group(0).rstrip(".").split()
        while words and words[0].casefold() in OPENING_WORDS:
            words.pop(0)
        phrase = re.sub(r"['’]s$", "", " ".join(words))  # "France's" -> "France"
        if phrase and phrase.casefold() not in {p.casefold() for p in phrases}:
            phrases.append(phrase)
    return phrases
