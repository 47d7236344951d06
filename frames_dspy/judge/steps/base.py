"""What every step of the rule pipeline is made of: the :class:`Case` it reads and the
:class:`Rule` it is."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from frames_dspy.judge.gold_forms import GoldForm
from frames_dspy.judge.mentions import Response
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["Case", "Rule", "of_kind"]


@dataclass(frozen=True)
class Case:
    """One item as the rules read it: the folded question, the gold verbatim and as a
    :class:`~frames_dspy.judge.gold_forms.GoldForm`, and the response."""

    question: str
    gold: str
    form: GoldForm
    resp: Response


@dataclass(frozen=True)
class Rule:
    """One step of the pipeline: its name, what it decides, when it applies, and the check.

    Attributes:
        name: The step's name (the verdict's ``rule`` is one of ``verdicts``).
        decides: What it decides, in one line (for docs and tables).
        verdicts: The rule names its verdicts carry (see :data:`~frames_dspy.judge.rules.RULES`).
        guard: Whether the step applies to a case at all; None: always.
        check: The verdict, or None to leave the case to the next step.
    """

    name: str
    decides: str
    verdicts: tuple[str, ...]
    check: Callable[[Case], RuleVerdict | None]
    guard: Callable[[Case], bool] | None = None

    def __call__(self, case: Case) -> RuleVerdict | None:
        if self.guard is not None and not self.guard(case):
            return None
        return self.check(case)


def of_kind(*kinds: str) -> Callable[[Case], bool]:
    """A guard: the gold is of one of ``kinds`` (see :mod:`frames_dspy.judge.gold_forms`)."""
    return lambda case: case.form.kind in kinds
