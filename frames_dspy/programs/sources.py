"""What the LM adds: a program's no-LM query sources alone, and the no-LM references.

A multi-step program's articles come from three sources: the question itself
(``question_docs``), the question's capitalised phrases (``phrase_docs``) and the LM's written
queries (``(k - 1) x n_docs``). The LM is credited only with what it finds beyond the other
two, measured two ways, neither of which calls an LM:

- :func:`without_lm`: the same program with its query writer switched off; the question fills
  the LM's slots, so it retrieves the same number of articles (its no-LM parts alone);
- :class:`NoLMReferences`: ``bm25-N`` and ``phrases-N`` at each question's own article count
  N, from a run's records; a study subtracts the stronger one (the ``lift`` objective).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

import dspy

from frames_dspy.programs.modules import PHRASE_HITS, build_program
from frames_dspy.programs.queries import capitalised_phrases
from frames_dspy.programs.spec import ProgramSpec

__all__ = [
    "REFERENCE_KINDS",
    "NoLMReferences",
    "lm_queries",
    "lm_queries_per_round",
    "no_lm_recall",
    "no_lm_recalls",
    "without_lm",
]

#: The no-LM references a program's recall is judged against, by their condition prefix.
REFERENCE_KINDS = ("bm25", "phrases")


def lm_queries_per_round(spec: ProgramSpec) -> int:
    """How many queries the LM writes in each round it writes in (0: the program makes no
    LM query call)."""
    if spec.kind != "multihop" or (spec.lm_from_round or 1) > spec.rounds:
        return 0
    return spec.k - (1 if spec.include_question else 0)


def lm_queries(spec: ProgramSpec, question: str, queries: Sequence[Sequence[str]]) -> list[str]:
    """The queries the LM chose, in the order they were sent, from a prediction's queries per
    round: every search of the agent; each multi-step round's written queries; none for the
    programs whose LM writes none.

    A multi-step round sends the question first (``include_question``) and then, with
    ``phrase_docs``, the question's capitalised phrases, before the written queries; those
    are the program's, not the LM's. Without ``include_question`` a round that sends the
    question alone sent it because nothing was written.
    """
    if spec.kind == "agent":
        return [query for round_queries in queries for query in round_queries]
    if lm_queries_per_round(spec) == 0:
        return []
    phrases = capitalised_phrases(question) if spec.phrase_docs else []
    written: list[str] = []
    for round_queries in queries:
        sent = list(round_queries)
        if sent[:1] == [question] and (spec.include_question or len(sent) == 1):
            sent = sent[1:]
        if phrases and sent[: len(phrases)] == phrases:
            sent = sent[len(phrases) :]
        written.extend(sent)
    return written


def without_lm(program: Any) -> Any:
    """A shallow copy of ``program`` that runs its no-LM parts alone (no query call).

    The question takes the slots the LM's queries would have filled when ``question_docs``
    is set, so the copy retrieves as many articles; the answer step is left as it was.
    """
    alone = copy.copy(program)
    alone.lm_queries = False
    return alone


def _recall(gold_ids: Iterable[str], found: Iterable[str]) -> float:
    gold = set(gold_ids)
    return len(gold & set(found)) / len(gold)


def no_lm_recalls(program: Any, records: Iterable[Any]) -> dict[str, float]:
    """Final recall of ``program``'s no-LM parts alone (:func:`without_lm`, no answer step)
    on each record's question that has a gold article, by question id.

    No LM is configured while it runs, so a stray LM call would fail rather than cost.
    """
    alone = without_lm(program)
    alone.answer_step = False
    values = {}
    with dspy.context(lm=None):
        for record in records:
            if record.recall is None or not record.gold_ids:
                continue
            pred = alone(question=record.question)
            found = pred.context_ids[-1] if pred.context_ids else ()
            values[record.id] = _recall(record.gold_ids, found)
    return values


def no_lm_recall(program: Any, records: Iterable[Any]) -> float | None:
    """Mean of :func:`no_lm_recalls`; None when no question has a gold article."""
    values = list(no_lm_recalls(program, records).values())
    return round(sum(values) / len(values), 6) if values else None


class NoLMReferences:
    """``bm25-N`` and ``phrases-N`` recall for a run's questions, each at its own N.

    N is the number of articles the question's record ended with, so a program is compared
    with the references at exactly the budget it used. Results are cached per (question, N):
    a study's trials share one cache, and a reference costs only BM25 searches.
    """

    def __init__(self, retriever: Any):
        self._retriever = retriever
        self._programs: dict[tuple[str, int], Any] = {}
        self._found: dict[tuple[str, str, int], frozenset[str]] = {}

    def _program(self, kind: str, n: int) -> Any:
        if (kind, n) not in self._programs:
            spec = (
                ProgramSpec("bm25", n_docs=n)
                if kind == "bm25"
                else ProgramSpec("phrases", n_docs=n, k=PHRASE_HITS)
            )
            program = build_program(spec, retriever=self._retriever)
            program.answer_step = False
            self._programs[(kind, n)] = program
        return self._programs[(kind, n)]

    def found(self, kind: str, question: str, n: int) -> frozenset[str]:
        """The article ids reference ``kind`` (``bm25`` or ``phrases``) brings at N = ``n``."""
        if kind not in REFERENCE_KINDS:
            raise ValueError(f"unknown reference {kind!r}; choose one of {REFERENCE_KINDS}")
        key = (kind, question, n)
        if key not in self._found:
            pred = self._program(kind, n)(question=question)
            self._found[key] = frozenset(pred.context_ids[-1] if pred.context_ids else ())
        return self._found[key]

    def recall(self, kind: str, records: Iterable[Any]) -> float | None:
        """Mean recall of reference ``kind`` over the records' questions with a gold article,
        each at its record's final article count (0 for a record that retrieved nothing);
        None when no question has a gold article."""
        values = []
        for record in records:
            if record.recall is None or not record.gold_ids:
                continue
            n = len(record.context_ids[-1]) if record.context_ids else 0
            values.append(
                _recall(record.gold_ids, self.found(kind, record.question, n) if n else ())
            )
        return sum(values) / len(values) if values else None

    def strongest(self, records: Iterable[Any]) -> dict[str, Any]:
        """Both references' recall and the stronger one: ``{"bm25": .., "phrases": ..,
        "best": name, "value": its recall}`` (0.0 when nothing could be measured)."""
        records = list(records)
        figures = {kind: self.recall(kind, records) for kind in REFERENCE_KINDS}
        measured = {k: v for k, v in figures.items() if v is not None}
        best = max(measured, key=measured.get) if measured else None
        return {**figures, "best": best, "value": measured.get(best, 0.0) if best else 0.0}
