"""Deterministic autorater rules: TRUE or FALSE only when sure, otherwise None for the LM judge.

Every accuracy this project prints rests on the autorater. These rules decide the items whose
verdict does not need judgement: the same answer in another form (``"twenty-one"`` for 21,
``"5:31"`` for 5 minutes 31 seconds, ``"3 March 1958"`` for March 3rd, 1958, ``"Lena
Marsh"`` for "This was Lena Marsh."), and the plain failures (an empty response, a refusal, a
hedge between candidates, a different number, the right digits in the wrong unit, a year for a
full date, the gold answer named only to be rejected). Everything else returns None and goes to
the LM judge. Precision matters more than coverage: a wrong rule verdict is never checked again,
while an abstention only costs a judge call.

The rules are general: they read the form of the gold answer and the response (see
:mod:`frames_dspy.judge.gold_forms` and :mod:`frames_dspy.judge.answer_forms`), never a list of
items. Each step of :data:`PIPELINE` lives in its own module of :mod:`frames_dspy.judge.steps`,
with its guard, its patterns and word lists, its docstring and its one-line ``decides``.
"""

from __future__ import annotations

import re

from frames_dspy.judge.answer_forms import fold
from frames_dspy.judge.gold_forms import analyse_gold, tokens
from frames_dspy.judge.mentions import Response
from frames_dspy.judge.steps import (
    date,
    different_name,
    exact,
    hedge,
    moved_on,
    name,
    number_in_name,
    other_option,
    quantity,
    refusal,
    uncovered,
    yes_no,
)
from frames_dspy.judge.steps import list as list_step
from frames_dspy.judge.steps import range as range_step
from frames_dspy.judge.steps.base import Case, Rule
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["Case", "PIPELINE", "RULES", "Rule", "RuleVerdict", "WHOLE_RESPONSE_RULES", "decide"]


#: Rule name -> what it decides (for docs and tables).
RULES: dict[str, str] = {
    "exact": "TRUE: the response is the gold answer (or its core) after normalisation",
    "same_quantity": "TRUE: the response commits to the gold quantity, in any common form",
    "same_date": "TRUE: the response commits to the gold date, in any common format",
    "stated_answer": "TRUE: the response states the gold's core answer (every part of it) as its "
    "answer, not negated, compared away or listed among alternatives",
    "empty": "FALSE: the response is empty",
    "refusal": "FALSE: the response declines or says it cannot tell, and names no answer",
    "hedge": "FALSE: the response offers two or more candidates without committing to one",
    "rejected_option": "FALSE: the gold answer appears only negated, compared away or rejected",
    "different_number": "FALSE: the response commits to another number of the gold's kind",
    "unit_or_scale_mismatch": "FALSE: the gold's digits with another unit or scale word",
    "different_date": "FALSE: the response commits to another full date",
    "year_for_full_date": "FALSE: a full-date gold answered with a year or month only",
    "partial": "FALSE: the response names some parts of a multi-part gold and nothing else",
    "opposite_yes_no": "FALSE: a yes/no gold answered with the opposite word",
    "other_option": 'FALSE: a multiple-choice gold ("A) ...") answered with another option',
    "no_quantity": "FALSE: a count or measure answered with no number, or with years only",
    "different_name": "FALSE: the gold names someone or something and the response carries no "
    "form of that name (no word of it, another spelling, nor its initials)",
    "moved_on": "FALSE: the response names the gold, then commits to another answer of its kind",
    "uncovered": "FALSE: a vital part of the gold (a number, full date, name or listed item the "
    "question asks for) has no trace in the response",
}

#: Rules that read the whole response for the gold's vital parts; a span the LM extracted from
#: it may leave out what the response says elsewhere, so they do not judge an extraction.
WHOLE_RESPONSE_RULES = frozenset({"moved_on", "uncovered"})


#: The steps in the order they are tried; the first verdict wins.
PIPELINE: tuple[Rule, ...] = (
    refusal.STEP,
    other_option.STEP,
    exact.STEP,
    hedge.STEP,
    number_in_name.STEP,
    range_step.STEP,
    list_step.STEP,
    name.STEP,
    yes_no.STEP,
    quantity.STEP,
    date.STEP,
    different_name.STEP,
    moved_on.STEP,
    uncovered.STEP,
)


def decide(question: str, gold: str, response: str) -> RuleVerdict | None:
    """Decide whether ``response`` carries ``gold``, or None when no rule is sure.

    The response is read once; then each rule of :data:`PIPELINE` is tried in turn.

    Args:
        question: The FRAMES prompt (it tells a year from a count and which words of a gold
            sentence only repeat the question).
        gold: The gold answer, verbatim.
        response: The response to grade; None counts as empty.

    Returns:
        A :class:`RuleVerdict`, or None when the LM judge must decide.

    Raises:
        ValueError: ``gold`` is empty, so nothing can be judged against it.
    """
    if not str(gold or "").strip():
        raise ValueError(f"gold answer {gold!r} is empty; a rule needs an answer to compare with")
    resp = Response(str(response or ""))
    if not tokens(fold(gold)):  # a gold of signs only ("....-" in Morse code)
        same = resp.text.strip() == " ".join(fold(gold).split())
        return RuleVerdict(True, "exact", "the response is the gold answer") if same else None
    if not re.search(r"\w", resp.text):
        return RuleVerdict(False, "empty", "the response is empty")
    question = fold(question or "")
    case = Case(question, gold, analyse_gold(gold, question), resp)
    for rule in PIPELINE:
        if verdict := rule(case):
            return verdict
    return None
