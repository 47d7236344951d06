"""The FRAMES paper's setups as named program specs, with the paper's figures, and ours.

Tables, help texts and the evaluation follow these tables' order; a new condition is one
entry. :data:`CONDITIONS` are the paper's six, run by default; :data:`MORE_CONDITIONS` are
conditions of ours that run when named (``--conditions agent``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Importing the module classes registers the program kinds the specs below use.
import frames_dspy.programs.agent  # noqa: F401
import frames_dspy.programs.modules  # noqa: F401
import frames_dspy.programs.multihop  # noqa: F401
from frames_dspy.programs.spec import ProgramSpec

__all__ = [
    "AGENT_KNOBS",
    "Condition",
    "CONDITIONS",
    "MORE_CONDITIONS",
    "MULTIHOP_KNOBS",
    "PAPER_ACCURACY",
    "condition",
    "condition_names",
]


@dataclass(frozen=True)
class Condition:
    """One setup: a named spec, what it does, and the paper's figure.

    Attributes:
        spec: The program (its budget is left to the run).
        summary: One line on what the program does (help texts and tables).
        paper: Gemini-Pro-1.5's accuracy on all 824 questions in the FRAMES paper, if reported.
        knobs: Settings a run's options (``--rounds``, ``--k``, ``--n-docs``,
            ``--no-question-query``, ``--question-docs``, ``--max-steps``, ``--cot``, ...)
            may change; the others define the condition.
    """

    spec: ProgramSpec
    summary: str
    paper: float | None = None
    knobs: tuple[str, ...] = ("cot",)

    def configured(self, **options: Any) -> ProgramSpec:
        """The spec with the run's options applied to the knobs this condition has."""
        return self.spec.replace(
            **{k: v for k, v in options.items() if k in self.knobs and v is not None}
        )


#: The multi-step settings a run's options can set (evaluate's --rounds, --k, ...).
MULTIHOP_KNOBS = (
    "rounds",
    "k",
    "n_docs",
    "include_question",
    "question_docs",
    "phrase_docs",
    "cot",
)

#: The agent's settings a run's options can set (evaluate's --max-steps, ..., --n-docs).
AGENT_KNOBS = ("max_steps", "max_articles", "max_agent_tokens", "n_docs", "cot")

#: Condition name -> :class:`Condition`, in the paper's order. Paper figures: Gemini-Pro-1.5
#: with the naive prompt, BM25-R with 4 documents, the oracle prompt, and multi-step retrieval
#: with search planning at 5 rounds x 5 queries x 10 documents; the others were not reported.
CONDITIONS: dict[str, Condition] = {
    "naive": Condition(ProgramSpec("naive"), "the question alone", paper=0.408),
    "bm25-2": Condition(ProgramSpec("bm25", n_docs=2), "the top 2 BM25 articles for the question"),
    "bm25-4": Condition(
        ProgramSpec("bm25", n_docs=4), "the top 4 BM25 articles for the question", paper=0.474
    ),
    "oracle": Condition(ProgramSpec("oracle"), "all gold articles", paper=0.729),
    "multistep-vanilla": Condition(
        ProgramSpec("multihop", planning=False),
        "ROUNDS rounds of K LM-written queries, N_DOCS articles each, then one answer",
        knobs=MULTIHOP_KNOBS,
    ),
    "multistep-planning": Condition(
        ProgramSpec("multihop", planning=True),
        "the same with the search-planning prompt",
        paper=0.66,
        knobs=MULTIHOP_KNOBS,
    ),
}

#: Conditions of ours beyond the paper's setups, run when named; tables list them after the
#: paper's.
MORE_CONDITIONS: dict[str, Condition] = {
    "agent": Condition(
        ProgramSpec("agent"),
        "the LM searches, reads and stops when it judges it has enough (limits: "
        "MAX_STEPS, MAX_ARTICLES, MAX_AGENT_TOKENS), then one answer",
        knobs=AGENT_KNOBS,
    ),
}

#: The paper's accuracy per condition, where it reported one.
PAPER_ACCURACY: dict[str, float] = {
    name: c.paper for name, c in CONDITIONS.items() if c.paper is not None
}


_SIZED = re.compile(r"(bm25|phrases)-(\S+)")


def condition(name: str) -> Condition:
    """The condition called ``name``: one of :data:`CONDITIONS` or :data:`MORE_CONDITIONS`,
    ``bm25-N`` or ``phrases-N``.

    ``bm25-N`` is BM25 for the question alone with N articles: the question-only reference
    at the article count of a multi-step program (rounds x k x n_docs). ``phrases-N`` is the
    no-LM reference with N articles: the question's top N/2, the top 2 for each of its
    capitalised phrases, filled to N from the question's results
    (:class:`~frames_dspy.programs.modules.PhraseQueries`).

    Raises:
        ValueError: an unknown name, or N not a whole number of at least 1.
    """
    known = CONDITIONS | MORE_CONDITIONS
    if name in known:
        return known[name]
    match = _SIZED.fullmatch(name)
    if match is None:
        raise ValueError(
            f"unknown condition {name!r}; choose from {', '.join(known)}, bm25-N (N "
            "articles for the question, e.g. bm25-12) or phrases-N"
        )
    kind, text = match.groups()
    if not text.isdigit() or int(text) < 1:
        raise ValueError(
            f"condition {name!r}: N in {kind}-N must be a whole number of at least 1 "
            f"(e.g. {kind}-12)"
        )
    n = int(text)
    if kind == "bm25":
        return Condition(
            ProgramSpec("bm25", n_docs=n), f"the top {n} BM25 articles for the question"
        )
    return Condition(
        ProgramSpec("phrases", n_docs=n, k=2),
        f"no LM: the question's top {n // 2} articles, 2 per capitalised phrase, filled to {n}",
    )


def condition_names(text: str) -> tuple[str, ...]:
    """Parse a comma-separated list of condition names (``bm25-N`` allowed).

    Raises:
        ValueError: an empty list, or a name :func:`condition` rejects.
    """
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        known = ", ".join(CONDITIONS | MORE_CONDITIONS)
        raise ValueError(f"no condition in {text!r}; choose from {known}")
    for name in names:
        condition(name)
    return names
