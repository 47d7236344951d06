"""The autorater: rules that decide when sure, an LM judge for the rest, and how to check it.

- :mod:`~frames_dspy.judge.rules`: deterministic verdicts, or None: :data:`PIPELINE`, the
  steps in order, each in its own module of :mod:`~frames_dspy.judge.steps` (drawing on the
  readers :mod:`~frames_dspy.judge.gold_forms`, :mod:`~frames_dspy.judge.answer_forms`,
  :mod:`~frames_dspy.judge.units`, :mod:`~frames_dspy.judge.mentions`,
  :mod:`~frames_dspy.judge.number_rules`, :mod:`~frames_dspy.judge.names`,
  :mod:`~frames_dspy.judge.coverage`, :mod:`~frames_dspy.judge.place_names` and the shared word
  lists of :mod:`~frames_dspy.judge.words`).
- :mod:`~frames_dspy.judge.protocols`: how the LM is used (``rules+extract``, ``rules+lm``,
  the paper's ``lm``); :mod:`~frames_dspy.judge.autorater`: :class:`Autorater`, the metric
  every run scores with.
- :mod:`~frames_dspy.judge.labels`: hand-labelled items; :mod:`~frames_dspy.judge.validate`:
  agreement of an autorater with them. ``python -m frames_dspy.judge validate --labels FILE
  [--split dev|held-out|all] [--judge-protocol P[,P]]`` runs it from the command line.
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
from frames_dspy.judge.labels import (
    SPLIT_SEED,
    LabelError,
    LabelledItem,
    load_labels,
    select_split,
    split_by_question,
)
from frames_dspy.judge.protocols import DEFAULT_PROTOCOL, JUDGE_PROTOCOLS
from frames_dspy.judge.rules import PIPELINE, RULES, RuleVerdict, decide

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
    "DEFAULT_PROTOCOL",
    "JUDGE_PROTOCOLS",
    "PIPELINE",
    "RULES",
    "RuleVerdict",
    "decide",
    "LabelledItem",
    "LabelError",
    "load_labels",
    "select_split",
    "split_by_question",
    "SPLIT_SEED",
]
