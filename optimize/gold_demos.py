"""Demos for the query writer built from the train split's gold articles (``gold-demos``).

A train question comes with the Wikipedia articles that answer it. Replaying the multi-step
program on it with an oracle in place of the LM gives, for each round, what a good query
writer would have seen and written: the ``found`` view that round shows, the queries sent so
far, and, as the queries, the titles of the gold articles still missing (not yet in context,
and not brought this round by the question itself when the question is one of the queries). A
title is what BM25 finds an article by, so these demos show a small model what a useful query
looks like: the name of the person, place, work or event the question leads to, not a
restatement of the question or a guess at the answer.

Only the train split's gold articles are ever read: demos never come from dev or test.
"""

from __future__ import annotations

import copy
import logging
import random
import re
from collections.abc import Sequence
from typing import Any

import dspy

from frames_dspy.data.corpus import Article

logger = logging.getLogger(__name__)

__all__ = [
    "TaughtBootstrap",
    "drop_empty_rounds",
    "gold_query_demos",
    "reachable",
    "with_gold_demos",
]

#: The ``plan`` a planning-prompt demo carries (the prompt asks for one before the queries).
_PLAN = "Still missing: the articles on {names}."


#: The query writer's inputs (both prompts take the same ones).
_INPUTS = ("question", "found", "past_queries", "n_queries")


def gold_query_demos(program, trainset: Sequence[dspy.Example], store) -> list[dspy.Example]:
    """Replay ``program`` (a MultiHop) on ``trainset`` with gold titles as the written queries.

    Args:
        program: A :class:`~frames_dspy.programs.MultiHop`; its rounds, k, n_docs,
            question_docs, include_question and found view shape the demos, and its
            retriever searches.
        trainset: Train examples with ``question`` and ``gold_urls``.
        store: The article store that resolves gold URLs to articles.

    Returns:
        One demo per (question, round) where a gold article was still missing, in trainset
        order: inputs ``question``, ``found``, ``past_queries``, ``n_queries`` and the
        label ``queries`` (plus ``plan`` for the planning prompt).
    """
    planning = "plan" in program.generate.signature.output_fields
    demos: list[dspy.Example] = []
    for example in trainset:
        gold: list[Article] = store.resolve_many(example.get("gold_urls", []))
        if not gold:
            continue
        question = example.question
        context: list[Article] = []
        in_context: set[str] = set()
        past: list[str] = []
        for number in range(1, program.rounds + 1):
            queries = [question] if program.include_question else []
            wanted = program.k - len(queries) if program.writes_in(number) else 0
            if wanted > 0:
                # What the question itself (and its phrases) bring this round is not missing.
                coming = set(in_context)
                if queries:
                    coming.update(program.fixed_hits(question, in_context))
                missing = [a.title for a in gold if a.id not in coming and a.title not in past]
                written = missing[:wanted]
                if written:
                    fields = {
                        "question": question,
                        "found": program.found_view(context),
                        "past_queries": list(past),
                        "n_queries": wanted,
                        "queries": written,
                    }
                    if planning:
                        fields["plan"] = _PLAN.format(names="; ".join(written))
                    demos.append(dspy.Example(**fields).with_inputs(*_INPUTS))
                queries.extend(written)
                past.extend(written)
            if not queries:
                break
            for article_id in program.round_hits(question, queries, in_context):
                in_context.add(article_id)
                context.append(store[article_id])
    return demos


_QUALIFIER = re.compile(r"\s*\([^)]*\)")
_WORD = re.compile(r"\w{3,}")


def reachable(demo: dspy.Example) -> bool:
    """Whether every query of ``demo`` can be read off its question and found view.

    A query counts as readable when each of its words of 3+ characters (a title's
    parenthetical qualifier, e.g. "(actress)", left out) occurs in the question or in the
    found view, ignoring case.
    """
    seen = f"{demo.question} {demo.found}".casefold()
    return all(
        all(word in seen for word in _WORD.findall(_QUALIFIER.sub("", query).casefold()))
        for query in demo.queries
    )


def with_gold_demos(
    program,
    trainset: Sequence[dspy.Example],
    store,
    *,
    demos: int,
    seed: int = 0,
    optimizer: str = "gold-demos",
) -> dspy.Module:
    """A copy of ``program`` whose query writer holds ``demos`` gold demos from ``trainset``.

    The demos are drawn with ``random.Random(seed)`` from :func:`gold_query_demos`, at most
    one per train question (so they show different questions), :func:`reachable` ones first,
    and set on the query writer through ``dspy.LabeledFewShot``; the answer step is left as
    it is. ``optimizer`` names the optimizer that asked, for the error messages.

    Raises:
        ValueError: ``program`` has no query writer, or no train question yields a demo.
    """
    if not hasattr(program, "generate") or not hasattr(program, "found_view"):
        raise ValueError(
            f"--optimizer {optimizer} builds demos for the multi-step query writer; "
            f"the {type(program).__name__} program has none"
        )
    pool = gold_query_demos(program, trainset, store)
    if not pool:
        raise ValueError(
            "no train question has a gold article the corpus holds and the question alone "
            "misses; raise --train or check --corpus"
        )
    rng = random.Random(seed)
    chosen: list[dspy.Example] = []
    # Demos whose queries the writer could have written from what it saw come first: a
    # title that needs outside knowledge (the actor behind a role) teaches guessing.
    for tier in (True, False):
        by_question: dict[str, list[dspy.Example]] = {}
        for demo in pool:
            if reachable(demo) is tier and demo.question not in {d.question for d in chosen}:
                by_question.setdefault(demo.question, []).append(demo)
        questions = sorted(by_question)
        rng.shuffle(questions)
        for question in questions[: demos - len(chosen)]:
            # Alternate first-round and later-round demos where a question has both, so the
            # writer sees how to read the found view as well as the question.
            later = len(chosen) % 2 == 1
            options = [d for d in by_question[question] if bool(d.past_queries) is later]
            chosen.append(rng.choice(options or by_question[question]))
    logger.info(
        "gold demos: %d built from %d train questions (%d reachable), %d chosen",
        len(pool),
        len({d.question for d in pool}),
        sum(reachable(d) for d in pool),
        len(chosen),
    )
    student = copy.deepcopy(program)
    # LabeledFewShot sets k labelled examples as each predictor's demos; given the chosen
    # demos and k = their number, it keeps exactly them.
    student.generate = dspy.LabeledFewShot(k=len(chosen)).compile(
        student.generate, trainset=chosen, sample=False
    )
    return student


def _empty_round(demo: Any) -> bool:
    """A query-writer demo whose round sent no written query: it teaches writing nothing."""
    return "queries" in demo and not demo["queries"]


def drop_empty_rounds(program: dspy.Module) -> int:
    """Remove every demo of ``program`` whose round wrote no query (in place); returns how
    many were removed."""
    dropped = 0
    for _, predictor in program.named_predictors():
        kept = [demo for demo in predictor.demos if not _empty_round(demo)]
        dropped += len(predictor.demos) - len(kept)
        predictor.demos = kept
    return dropped


class TaughtBootstrap(dspy.BootstrapFewShot):
    """``dspy.BootstrapFewShot`` whose passing runs count only when their demo wrote queries.

    A run that passes the metric but whose sampled query-writer step wrote nothing (a round
    with no query) yields no demo and does not count, so the teacher goes on through the
    train split until it has the demos asked for, or the split ends. :attr:`report` says
    how many train questions were tried and passed, and how many passing runs were dropped.
    """

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.report = {"tried": 0, "passed": 0, "dropped_empty": 0}

    def _bootstrap_one_example(self, example, round_idx=0):
        before = {name: len(traces) for name, traces in self.name2traces.items()}
        self.report["tried"] += 1
        if not super()._bootstrap_one_example(example, round_idx):
            return False
        new = {name: traces[before[name] :] for name, traces in self.name2traces.items()}
        if any(_empty_round(demo) for demos in new.values() for demo in demos):
            for name in new:
                del self.name2traces[name][before[name] :]
            self.report["dropped_empty"] += 1
            return False
        self.report["passed"] += 1
        return True

    def compile(self, student, *, teacher=None, trainset):
        compiled = super().compile(student, teacher=teacher, trainset=trainset)
        logger.info(
            "teacher: %d of %d train questions passed (%d more passed with an empty round, "
            "dropped); %d demos asked for",
            self.report["passed"],
            self.report["tried"],
            self.report["dropped_empty"],
            self.max_bootstrapped_demos,
        )
        compiled.teacher_report = {**self.report, "asked": self.max_bootstrapped_demos}
        return compiled
