"""Step ``uncovered``: a vital part of the gold (a number, full date, name or listed item the
question asks for) has no trace in the response; see
:func:`frames_dspy.judge.coverage.uncovered`."""

from __future__ import annotations

from frames_dspy.judge.coverage import uncovered
from frames_dspy.judge.steps.base import Case, Rule
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["STEP"]


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
