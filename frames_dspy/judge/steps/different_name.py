"""Step ``different_name``: the gold names someone or something and the response carries no
form of that name (no word of it, another spelling, nor its initials); see
:func:`frames_dspy.judge.names.names_another`."""

from __future__ import annotations

from frames_dspy.judge.names import names_another
from frames_dspy.judge.steps.base import Case, Rule
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["STEP"]


def _check(case: Case) -> RuleVerdict | None:
    if names := names_another(case.question, case.gold, case.resp.raw):
        return RuleVerdict(False, "different_name", f"the response names no form of {names!r}")
    return None


STEP = Rule(
    "different_name",
    "the gold names someone or something the response has no form of",
    ("different_name",),
    _check,
)
