"""Step ``moved_on``: the response names the gold on the way, then commits to another answer
of its kind; see :func:`frames_dspy.judge.coverage.moved_on`."""

from __future__ import annotations

from frames_dspy.judge.coverage import moved_on
from frames_dspy.judge.steps.base import Case, Rule
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["STEP"]


def _check(case: Case) -> RuleVerdict | None:
    if found := moved_on(case.question, case.gold, case.resp.raw):
        other, where = found
        why = f"the response names the gold on the way, then commits to {other!r} ({where!r})"
        return RuleVerdict(False, "moved_on", why)
    return None


STEP = Rule(
    "moved_on",
    "the gold named on the way, then another answer of its kind committed to",
    ("moved_on",),
    _check,
)
