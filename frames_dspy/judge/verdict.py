"""The verdict a rule gives: TRUE or FALSE, the rule's name and its reason."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RuleVerdict"]


@dataclass(frozen=True)
class RuleVerdict:
    """A rule's verdict: whether the response is correct, which rule decided, and why."""

    correct: bool
    rule: str
    reason: str
