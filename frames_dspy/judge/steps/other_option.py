"""Step ``other_option``: a gold that is a lettered option ("A) ...") answered by opening with
another letter ("B) ...", "The answer is C.")."""

from __future__ import annotations

import re

from frames_dspy.judge.answer_forms import fold
from frames_dspy.judge.steps.base import Case, Rule
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["STEP"]

_OPTION = r"\(?([A-Ha-h])[).:](?=[\s:,]|$)"
_GOLD_OPTION = re.compile(rf"^\s*{_OPTION}")
_RESPONSE_OPTION = re.compile(
    rf"^\W*(?:(?:the\s+)?(?:correct\s+|final\s+)?(?:answer|option)(?:\s+is)?\s*:?\s*)?{_OPTION}",
    re.IGNORECASE,
)


def _check(case: Case) -> RuleVerdict | None:
    g, r = _GOLD_OPTION.match(fold(case.gold)), _RESPONSE_OPTION.match(case.resp.text)
    if not g or not r or g.group(1).casefold() == r.group(1).casefold():
        return None
    why = f"the gold is option {g.group(1)}; the response chooses {r.group(1)}"
    return RuleVerdict(False, "other_option", why)


STEP = Rule(
    "other_option",
    "a lettered-option gold answered with another letter",
    ("other_option",),
    _check,
)
