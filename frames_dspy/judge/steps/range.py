"""Step ``range``: a gold that is a range ("5-7 km") read against the one range the response
gives: the same range in any unit of its kind (``same_quantity``), or its digits in another
unit or scale (``unit_or_scale_mismatch``).
"""

from __future__ import annotations

from frames_dspy.judge.answer_forms import compare_quantities
from frames_dspy.judge.coverage import range_gold, range_quantities, ranges
from frames_dspy.judge.mentions import Response
from frames_dspy.judge.number_rules import plain
from frames_dspy.judge.steps.base import Rule
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["STEP", "decide_range"]


def decide_range(gold: str, resp: Response) -> RuleVerdict | None:
    """A range gold: the same range in any unit of its kind, or its digits in another unit.

    Only a response that gives one range and no other number is decided.
    """
    ends = range_gold(gold)
    found = ranges(resp.text)
    if ends is None or len(found) != 1 or len(range_quantities(resp.text)) != 2:
        return None
    said = found[0]
    if not plain(resp, said[0].start, said[1].end):
        return None
    relations = [compare_quantities(g, r) for g, r in zip(ends, said, strict=True)]
    written = resp.text[said[0].start : said[1].end]
    if all(r in ("same", "close") for r in relations):
        return RuleVerdict(True, "same_quantity", f"the response gives the gold range {written!r}")
    if all(r == "unit_or_scale" for r in relations):
        why = f"the response gives {written!r}: the gold's range in another unit or scale"
        return RuleVerdict(False, "unit_or_scale_mismatch", why)
    return None


STEP = Rule(
    "range",
    "a range gold: the same range in any unit of its kind, or its digits in another unit",
    ("same_quantity", "unit_or_scale_mismatch"),
    lambda case: decide_range(case.gold, case.resp),
    guard=lambda case: range_gold(case.gold) is not None,
)
