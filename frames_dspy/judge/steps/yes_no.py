"""Step ``yes_no``: a yes/no gold answered alike ("Yes, ...", naming the gold's part if it has
one) or with the opposite word. "Yes and no", "Yes, possibly", "No... actually, yes" and "Yes is
a common guess, but ..." are left to the LM judge."""

from __future__ import annotations

import re

from frames_dspy.judge.mentions import CONTRAST, HEDGE_WORDS, find_mentions, position
from frames_dspy.judge.steps.base import Case, Rule, of_kind
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["STEP"]

_OPENING = re.compile(r"^\W*(yes|no)\b(?!\s+one\b)(?![.,]?\s*\d)(?!\s*\?)", re.IGNORECASE)


def _check(case: Case) -> RuleVerdict | None:
    form, resp, question = case.form, case.resp, case.question
    m = _OPENING.match(resp.text)
    if m is None:
        return None
    said, other = m.group(1).casefold(), "no" if form.polarity == "yes" else "yes"
    if said != form.polarity:
        if re.search(rf"\b{form.polarity}\b", resp.text[m.end() :], re.IGNORECASE):
            return None  # "No... actually, yes"
        why = f"the gold says {form.polarity!r}, the response {said!r}"
        return RuleVerdict(False, "opposite_yes_no", why)
    if HEDGE_WORDS.search(resp.unquoted) or re.search(rf"\b{other}\b", resp.text[m.end() :], re.I):
        return None  # "Yes and no", "Yes, possibly"
    if CONTRAST.search(resp.unquoted):
        return None  # "Yes is a common guess, but ..."
    if form.parts:
        part = form.parts[0]
        where = [position(resp, x, part.main, question) for x in find_mentions(resp, part.main)]
        if where and all(w in ("asserted", "neutral") for w in where):
            why = f"the response says {said!r} and names {part.text!r}"
            return RuleVerdict(True, "stated_answer", why)
        return None
    if form.explained:
        return RuleVerdict(True, "stated_answer", f"the response answers {said!r} like the gold")
    return None


STEP = Rule(
    "yes_no",
    "a yes/no gold answered alike or with the opposite word",
    ("stated_answer", "opposite_yes_no"),
    _check,
    guard=of_kind("yes_no"),
)
