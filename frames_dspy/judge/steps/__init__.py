"""The steps of the autorater's rule pipeline, one module each, in the order
:data:`frames_dspy.judge.rules.PIPELINE` tries them.

Each module holds one step: its ``STEP`` (a :class:`~frames_dspy.judge.steps.base.Rule` with
its name, its one-line ``decides``, the verdicts it gives and its guard), the check behind it,
and the patterns and word lists only it reads. What several steps share lives beside them:
:mod:`~frames_dspy.judge.steps.base` (the case a step reads, the step itself),
:mod:`~frames_dspy.judge.steps.forms` (a short response's answer and the numbers in names),
and, outside the package, the readers of the gold (:mod:`~frames_dspy.judge.gold_forms`), of
the response (:mod:`~frames_dspy.judge.mentions`, :mod:`~frames_dspy.judge.number_rules`),
of numbers, dates and units (:mod:`~frames_dspy.judge.answer_forms`,
:mod:`~frames_dspy.judge.units`) and of names (:mod:`~frames_dspy.judge.names`,
:mod:`~frames_dspy.judge.coverage`).

- ``refusal``: declines and names no form of the gold.
- ``other_option``: a lettered-option gold answered with another letter.
- ``exact``: the gold (or its core) after normalisation.
- ``hedge``: two or more candidates, no commitment.
- ``number_in_name``: the gold's name with another number in it.
- ``range``: a range gold, the same range or its digits in another unit.
- ``list``: every part of a list gold, or only some.
- ``name``: a name gold stated, spelled otherwise, swapped, rejected or offered as an option.
- ``yes_no``: a yes/no gold answered alike or with the opposite word.
- ``quantity``: a number gold: the same value, another one, another unit or scale, or none.
- ``date``: a date gold: the same date, another one, or a year or month only.
- ``different_name``: a name the response has no form of.
- ``moved_on``: the gold named on the way, then another answer committed to.
- ``uncovered``: a vital part of the gold with no trace.
"""
