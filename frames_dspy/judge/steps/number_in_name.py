"""Step ``number_in_name``: the response is the gold's name with another number in it ("Blue
Yodel No. 2" for "Blue Yodel No. 1", "Richard III" for "Richard II"). Quantities and dates are
compared by their own steps, so it leaves them alone."""

from __future__ import annotations

import re

from frames_dspy.judge.gold_forms import norm_tokens
from frames_dspy.judge.steps.base import Case, Rule
from frames_dspy.judge.steps.forms import number_changed, strip_frame
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["STEP"]

_BRACKETED = re.compile(r"\([^)]*\)")


def _check(case: Case) -> RuleVerdict | None:
    main = norm_tokens(_BRACKETED.sub(" ", strip_frame(case.form.text)))
    if number_changed(norm_tokens(strip_frame(case.resp.text)), main):
        why = "the response is the gold with another number"
        return RuleVerdict(False, "different_number", why)
    return None


STEP = Rule(
    "number_in_name",
    "the gold's name with another number in it",
    ("different_number",),
    _check,
    guard=lambda case: case.form.kind not in ("quantity", "date"),  # their own steps decide
)
