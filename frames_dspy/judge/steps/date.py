"""Step ``date``: a gold that is a date read against the dates of the response.

TRUE (``same_date``) for the same date in any common format, plainly stated as the answer;
FALSE for another full date (``different_date``) or, for a full-date gold, a year or month only
(``year_for_full_date``). A numeric date the parser does not read ("05/02/2011": day or month
first?) leaves the item to the LM judge.
"""

from __future__ import annotations

import re

from frames_dspy.judge.answer_forms import parse_dates
from frames_dspy.judge.gold_forms import GoldForm
from frames_dspy.judge.mentions import NEGATION, Response, negated
from frames_dspy.judge.number_rules import answers_elsewhere, plain
from frames_dspy.judge.steps.base import Rule, of_kind
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["STEP", "decide_date"]

# "05/02/2011", "25.08.1972": day or month first is not known, so such a date is not read.
_NUMERIC_DATE = re.compile(r"\b\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}\b")


def decide_date(form: GoldForm, resp: Response, question: str) -> RuleVerdict | None:
    """The verdict on a date gold from the response's dates (those the question gives aside)."""
    gold = form.date
    asked = {(d.year, d.month, d.day) for d in parse_dates(question)}
    dates = [
        d
        for d in parse_dates(resp.text)
        if (d.year, d.month, d.day) not in asked and not resp.in_quotes(d.start)
    ]
    parsed = [(d.start, d.end) for d in parse_dates(resp.text)]
    for m in _NUMERIC_DATE.finditer(resp.text):
        if not any(s <= m.start() < e for s, e in parsed):
            return None  # 05/02/2011 (day or month first?), 25.08.1972: not read, so not sure
    full = [d for d in dates if d.day]
    same = [d for d in full if (d.month, d.day) == (gold.month, gold.day)]
    if any(gold.year and d.year is None for d in same):
        return None  # "August 25" for "August 25, 1972": the year is left out
    same = [d for d in same if gold.year is None or d.year == gold.year]
    other = [d for d in full if d not in same]
    sentences = {resp.sentence_of(d.start) for d in full}
    if any(NEGATION.search(resp.sentence(i)) for i in sentences):
        return None
    written = resp.text[full[0].start : full[0].end] if full else ""
    if same and not other:
        if not all(plain(resp, d.start, d.end) for d in same) or answers_elsewhere(resp, same):
            return None
        return RuleVerdict(True, "same_date", f"the response commits to {written!r}")
    if any(negated(resp, d.start, d.end) for d in other):
        return None
    if other and not same:
        return RuleVerdict(False, "different_date", f"the response commits to {written!r}")
    if full or not gold.day:
        return None
    years = [q for q in resp.quantities if q.year_like and q.value not in {y for y, _, _ in asked}]
    days = [q for q in resp.quantities if q.value == gold.day]
    partial = [d for d in dates if d.month and not d.day]
    if (partial or years) and not days:
        said = resp.text[(partial or years)[0].start : (partial or years)[0].end]
        why = f"the gold is a full date; the response gives only {said!r}"
        return RuleVerdict(False, "year_for_full_date", why)
    return None


# --- ranges ----------------------------------------------------------------------------------


STEP = Rule(
    "date",
    "a date gold: the same date, another one, or a year or month only",
    ("same_date", "different_date", "year_for_full_date"),
    lambda case: decide_date(case.form, case.resp, case.question),
    guard=of_kind("date"),
)
