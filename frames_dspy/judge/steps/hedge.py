"""Step ``hedge``: the response offers two or more candidates without committing to one.

"either A or B", two or more of "possibly"/"maybe"/"could be", "depending on ... A or B",
"could be A or B", and two values joined by "or" ("7 or 8 years", "1881 or 1882"). A gold that
itself reads "A or B" makes "or" no sign of a hedge, so the step does not apply to it. (A name
gold met only as one side of an "or" is decided by the ``name`` step, with the same verdict. A
single hedge word in a sentence, :data:`~frames_dspy.judge.mentions.HEDGE_WORDS`, is no verdict:
it only keeps the other steps from reading that sentence as a plain answer.)
"""

from __future__ import annotations

import re

from frames_dspy.judge.answer_forms import parse_dates
from frames_dspy.judge.mentions import Response
from frames_dspy.judge.steps.base import Case, Rule
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["STEP", "hedge"]

_EITHER = re.compile(
    r"\beither\b(?!\s+(?:way|of|one|side|case)\b)(?:[^.;!?]|\.(?=\d))*\bor\b", re.IGNORECASE
)
_MAYBE = re.compile(
    r"\b(?:possibly|perhaps|maybe|might be|could be|could also|may be|may also|alternatively)\b",
    re.IGNORECASE,
)
_DEPENDS = re.compile(
    r"\b(?:sources (?:differ|vary|disagree)|depending on|it depends)\b", re.IGNORECASE
)
_EITHER_ASKED = re.compile(r"\beither\b", re.IGNORECASE)  # "Was it either A or B?"
_OR = re.compile(r"\bor\b")
_COULD_BE_OR = re.compile(r"\b(?:could|might|may) (?:be|have been)\b[^.;!?]*\bor\b")
_VALUES_OR = re.compile(r"\s+or\s+(?:perhaps\s+|possibly\s+|maybe\s+)?")  # "7 or 8 years"


def hedge(resp: Response, question: str) -> str | None:
    """Why the response offers two or more candidates without committing, or None.

    "either A or B", two or more of "possibly"/"maybe"/"could be", "depending on ... A or B",
    "could be A or B", and two values joined by "or" ("7 or 8 years", "1881 or 1882").
    """
    text = resp.unquoted
    if (m := _EITHER.search(text)) and not _EITHER_ASKED.search(question):
        return f"it offers alternatives ({m.group()!r})"
    if len(_MAYBE.findall(text)) >= 2:
        return "it offers candidates with several hedges (" + ", ".join(_MAYBE.findall(text)) + ")"
    if any(
        _DEPENDS.search(s) and _OR.search(s) for s in map(resp.sentence, range(len(resp.sentences)))
    ):
        return "it says the answer depends and names alternatives"
    if _COULD_BE_OR.search(text):
        return "it says the answer could be one or another"
    values = [(q.start, q.end) for q in resp.quantities if not q.weak]
    values += [(d.start, d.end) for d in parse_dates(resp.text)]
    values.sort()
    for (_, e1), (s2, _) in zip(values, values[1:], strict=False):
        if _VALUES_OR.fullmatch(resp.text[e1:s2]):
            return f"it offers two values ({resp.text[values[0][0] : s2 + 8]!r}...)"
    return None


def _check(case: Case) -> RuleVerdict | None:
    if (why := hedge(case.resp, case.question)) is None:
        return None
    return RuleVerdict(False, "hedge", f"the response does not commit: {why}")


STEP = Rule(
    "hedge",
    "two or more candidates, no commitment (not when the gold itself says 'or')",
    ("hedge",),
    _check,
    guard=lambda case: not case.form.has_or,
)
