"""Step ``uncovered``: a vital part of the gold (a number, full date, name or listed item the
question asks for; see :func:`frames_dspy.judge.coverage.vital_parts`) has no trace in the
response: "in 2009, 13 years later" for "March 3, 2009; 13 years"; "Three colours" for "3 -
red, white, blue"; a given name alone for a two-word name. It goes last, FALSE only, on what
no other step decided (a small LM judge says TRUE to nearly all of it).
"""

from __future__ import annotations

import re

from frames_dspy.judge.answer_forms import Quantity, compare_quantities, fold, parse_dates
from frames_dspy.judge.coverage import (
    MONTHS,
    Vital,
    norm_word,
    range_quantities,
    vital_parts,
)
from frames_dspy.judge.gold_forms import singular
from frames_dspy.judge.names import carries_name
from frames_dspy.judge.steps.base import Case, Rule
from frames_dspy.judge.steps.forms import ROMAN
from frames_dspy.judge.verdict import RuleVerdict
from frames_dspy.judge.words import WORD

__all__ = ["STEP", "uncovered"]

# A month name in any case ("october 1" as well as "October 1").
_MONTH = re.compile(rf"\b(?:{'|'.join(sorted(MONTHS, key=len, reverse=True))})\b")
# "03/11/2009", "3.11.09": day and month in either order.
_NUMERIC_DATE = re.compile(r"\b(\d{1,2})[/.-](\d{1,2})[/.-](\d{2}|\d{4})\b")


def _carries(vital: Vital, response: str, quantities: list[Quantity]) -> bool:
    if vital.kind == "number":
        relations = {compare_quantities(vital.quantity, q) for q in quantities}
        if relations & {"same", "close"} or "incomparable" in relations and vital.quantity.unit:
            return True  # another unit system ("0.8 in" for "20 mm") is not judged here
        years = {d.year for d in parse_dates(response) if d.year}
        return vital.quantity.year_like and int(vital.quantity.value) in years
    if vital.kind == "date":
        g = vital.date
        capital = _MONTH.sub(lambda m: m.group().title(), fold(response))
        if any(
            (d.month, d.day) == (g.month, g.day) and (d.year in (None, g.year) or g.year is None)
            for d in parse_dates(capital)  # "october 1" as well as "October 1"
        ):
            return True
        # "03/11/2009", "3.11.09": day and month in either order, not judged here.
        return any(
            {int(a), int(b)} == {g.month, g.day} and (g.year is None or str(g.year).endswith(y))
            for a, b, y in _NUMERIC_DATE.findall(response)
        )
    words = [norm_word(w) for w in WORD.findall(fold(response))]
    if vital.kind == "item":
        said = {singular(w) for w in words}
        return any(singular(w) in said for w in vital.words)
    if not carries_name(vital.words, vital.text, response):
        return False
    plain = [w for w in vital.words if len(w) >= 3 and not ROMAN.fullmatch(w)]
    if vital.whole_name and 2 <= len(plain) <= 3 and len(plain) == len(vital.words):
        # "Ada" for "Ada Quill": a given name alone does not name the person.
        first, last = plain[0], plain[-1]
        return not (carries_name((first,), first, response)
                    and not carries_name((last,), last, response))  # fmt: skip
    return True


def uncovered(question: str, gold: str, response: str) -> list[str] | None:
    """The gold's vital parts the response leaves out (of its best-covered form), or None.

    None when the gold has no vital part this reads, or the response carries every part of
    one of the gold's forms.
    """
    forms = vital_parts(question, gold)
    if not forms:
        return None
    quantities = range_quantities(response)
    missing = []
    for form in forms:
        lost = [v for v in form if not _carries(v, response, quantities)]
        for kind in ("number", "date", "name"):
            loose = [v for v in form if v.any_of and v.kind == kind]
            if loose and any(v not in lost for v in loose):
                lost = [v for v in lost if v not in loose]
        missing.append([v.text for v in lost])
    best = min(missing, key=len)
    return best or None


def _check(case: Case) -> RuleVerdict | None:
    if missing := uncovered(case.question, case.gold, case.resp.raw):
        return RuleVerdict(False, "uncovered", f"the response leaves out {missing}")
    return None


STEP = Rule(
    "uncovered",
    "a vital part of the gold (number, full date, name, listed item) with no trace",
    ("uncovered",),
    _check,
)
