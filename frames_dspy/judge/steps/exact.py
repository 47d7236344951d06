"""Step ``exact``: the response is the gold answer, or its core without an answer frame ("It
was X."), after normalisation."""

from __future__ import annotations

from frames_dspy.judge.gold_forms import norm_tokens
from frames_dspy.judge.steps.base import Case, Rule
from frames_dspy.judge.steps.forms import strip_frame
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["STEP"]


def _check(case: Case) -> RuleVerdict | None:
    resp, form = case.resp, case.form
    if norm_tokens(resp.text) == norm_tokens(case.gold) or norm_tokens(
        strip_frame(resp.text)
    ) == norm_tokens(strip_frame(form.text)):
        return RuleVerdict(True, "exact", "the response is the gold answer after normalisation")
    return None


STEP = Rule("exact", "the gold (or its core) after normalisation", ("exact",), _check)
