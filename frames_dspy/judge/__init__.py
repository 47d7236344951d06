"""The autorater: rules that decide when sure, an LM judge for the rest, and how to check it.

- :mod:`~frames_dspy.judge.rules` (with :mod:`~frames_dspy.judge.gold_forms`,
  :mod:`~frames_dspy.judge.answer_forms`, :mod:`~frames_dspy.judge.units`,
  :mod:`~frames_dspy.judge.mentions`, :mod:`~frames_dspy.judge.place_names`): deterministic
  verdicts, or None.
- :mod:`~frames_dspy.judge.autorater`: :class:`Autorater`, the metric every run scores with.
- :mod:`~frames_dspy.judge.labels`: hand-labelled items; :mod:`~frames_dspy.judge.validate`:
  agreement of an autorater with them. ``python -m frames_dspy.judge validate --labels FILE``
  runs it from the command line.
"""

from frames_dspy.judge.autorater import (
    AUTORATER,
    DECISION_MODES,
    DEFAULT_DECISION,
    JUDGE_METHODS,
    P_TRUE_THRESHOLD,
    Autorater,
    Judgement,
    decision_probability,
    is_rule_method,
    method_counts,
)
from frames_dspy.judge.labels import LabelError, LabelledItem, load_labels, split_by_question
from frames_dspy.judge.rules import RULES, RuleVerdict, decide

__all__ = [
    "AUTORATER",
    "Autorater",
    "Judgement",
    "JUDGE_METHODS",
    "DECISION_MODES",
    "DEFAULT_DECISION",
    "P_TRUE_THRESHOLD",
    "decision_probability",
    "is_rule_method",
    "method_counts",
    "RULES",
    "RuleVerdict",
    "decide",
    "LabelledItem",
    "LabelError",
    "load_labels",
    "split_by_question",
]
