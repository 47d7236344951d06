"""Step ``quantity``: a gold that is a number (a count, a measure, an amount, a year) read
against the numbers the response commits to (see :func:`frames_dspy.judge.number_rules.
candidates`).

TRUE (``same_quantity``) for the same value in any common form, plainly stated as the answer;
FALSE for another number (``different_number``), the gold's digits in another unit or scale
(``unit_or_scale_mismatch``), the gold's number only ever negated (``rejected_option``), or no
number at all for a count or measure (``no_quantity``).
"""

from __future__ import annotations

import re

from frames_dspy.judge.answer_forms import Quantity, compare_quantities
from frames_dspy.judge.answer_forms import parse_quantities as _quantities
from frames_dspy.judge.gold_forms import GoldForm
from frames_dspy.judge.mentions import NEGATION, Response, negated
from frames_dspy.judge.number_rules import answers_elsewhere, candidates, plain
from frames_dspy.judge.steps.base import Rule, of_kind
from frames_dspy.judge.units import UNIT_WORDS
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["STEP", "decide_quantity"]

_VAGUE = re.compile(
    r"\b(?:half|quarter|couple|pair|several|few|both|dozens|scores|none|nobody|no one|nothing|"
    r"single|lone|sole|zero)\b|\b[IVXLCDM]{2,}\b|\d+\s*/\s*\d+",
)
_CONCLUSION = re.compile(
    r"=|\b(?:so|therefore|thus|hence|gives?|giving|making|total|answer|result|comes to|"
    r"which is|equals?|difference)\b",
    re.IGNORECASE,
)
# What a question says when it asks for the kind of quantity a unit measures.
_ASKED_MONEY = r"\b(?:much|cost|price|worth|gross\w*|earn\w*|revenue|paid|sold|dollars?)\b"
_ASKED_UNIT = {
    "calendar": r"\b(?:years?|months?|decades?|centur\w+|old|age)\b",
    "duration": r"\b(?:days?|hours?|minutes?|seconds?|weeks?|long)\b",
    "percent": r"\b(?:percent\w*|%)",
}


def _unit_asked(q: Quantity, question: str) -> bool:
    """Whether the question asks for the kind of quantity the response's unit measures."""
    dimension = q.dimension
    pattern = _ASKED_MONEY if dimension.startswith("money") else _ASKED_UNIT.get(dimension)
    if pattern is None:  # lengths, masses...: the unit itself must be named
        spellings = [w for w, u in UNIT_WORDS.items() if u == q.unit and len(w) > 2]
        pattern = r"\b(?:" + "|".join(map(re.escape, spellings or [q.unit])) + r")\b"
    return bool(re.search(pattern, question, re.IGNORECASE))


def _no_quantity(form: GoldForm, resp: Response) -> RuleVerdict | None:
    """A count or measure (not a year) answered with no number at all, or with years only."""
    if form.is_year or _VAGUE.search(resp.unquoted) or _VAGUE.search(resp.unquoted.casefold()):
        return None  # "Both", "None", "half": a count in words the parser does not read
    if any(compare_quantities(form.quantity, q) in ("same", "close") for q in resp.quantities):
        return None
    if any(not q.year_like for q in resp.quantities):
        return None  # a number the candidates left out (in a name, from the question): unsure
    return RuleVerdict(False, "no_quantity", "the response gives no number that could be it")


def decide_quantity(form: GoldForm, resp: Response, question: str) -> RuleVerdict | None:
    """The verdict on a number gold from the response's candidate numbers, or None."""
    gold = form.quantity
    found = candidates(form, resp, question)
    if not found:
        return _no_quantity(form, resp)
    if any(q.bound for q in found):
        return None
    relation = [(q, compare_quantities(gold, q)) for q in found]
    same = [q for q, r in relation if r == "same"]
    written = resp.text[found[-1].start : found[-1].end]
    # "Not 282 years: ... 272 years old": the gold's number only ever negated.
    rejected = [q for q in same if negated(resp, q.start, q.end)]
    others_plain = not any(negated(resp, q.start, q.end) for q, r in relation if r != "same")
    if same and rejected == same and others_plain:
        said = resp.text[same[0].start : same[0].end]
        return RuleVerdict(False, "rejected_option", f"the response rejects {said!r}")
    if same:
        if not all(plain(resp, q.start, q.end) for q in same) or answers_elsewhere(resp, same):
            return None
        if any(q.unit and not gold.unit and not _unit_asked(q, question) for q in same):
            return None  # "7 years" for a bare 7: right only if the question asks in years
        if gold.value in {q.value for q in _quantities(question)} and len(resp.toks) > 6:
            return None  # the response may only repeat the question's number
        others = [q for q, r in relation if r != "same"]
        last = found[-1]
        sentence = resp.sentence(resp.sentence_of(last.start))
        if not others or (last in same and _CONCLUSION.search(sentence)):
            return RuleVerdict(True, "same_quantity", f"the response commits to {written!r}")
        return None
    kinds = {r for _, r in relation}
    if _VAGUE.search(resp.unquoted) or kinds - {"different", "unit_or_scale"}:
        return None
    if any(NEGATION.search(resp.sentence(resp.sentence_of(q.start))) for q in found):
        return None
    if kinds == {"unit_or_scale"}:
        why = f"the response gives {written!r}: the gold's digits with another unit or scale"
        return RuleVerdict(False, "unit_or_scale_mismatch", why)
    if kinds == {"different"}:
        return RuleVerdict(False, "different_number", f"the response commits to {written!r}")
    return None


STEP = Rule(
    "quantity",
    "a number gold: the same value, another one, another unit or scale, or none",
    (
        "same_quantity",
        "different_number",
        "unit_or_scale_mismatch",
        "rejected_option",
        "no_quantity",
    ),
    lambda case: decide_quantity(case.form, case.resp, case.question),
    guard=of_kind("quantity"),
)
