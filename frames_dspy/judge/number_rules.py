"""The numbers and dates a response commits to, read for the ``quantity``, ``date``,
``range`` and ``refusal`` steps (:mod:`frames_dspy.judge.steps`).

:func:`candidates` lists the numbers of a response that could be its answer to a numeric gold;
:func:`plain` says whether a number or date is stated plainly as the answer, and
:func:`answers_elsewhere` whether the response names its answer explicitly elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal

from frames_dspy.judge.answer_forms import (
    MONTH_NAMES,
    DateMention,
    Quantity,
    parse_dates,
)
from frames_dspy.judge.answer_forms import parse_quantities as _quantities
from frames_dspy.judge.gold_forms import GoldForm
from frames_dspy.judge.mentions import (
    CONTRAST,
    FUNCTION_WORDS,
    HEDGE_WORDS,
    NEGATION,
    Response,
    listed,
    negated,
)
from frames_dspy.judge.units import BOUNDS, ROUGHLY

__all__ = ["answers_elsewhere", "candidates", "plain"]


def candidates(form: GoldForm, resp: Response, question: str) -> list[Quantity]:
    """The response's numbers that could be its answer to a numeric gold.

    Left out: a lone "one", numbers in quotes (titles), numbers the question already gives,
    years for a non-year gold and plain numbers for a year gold, ordinals for a cardinal gold,
    and numbers in names ("Apollo 11", "No. 2") unless they equal the gold.
    """
    gold = form.quantity
    asked = {q.value for q in _quantities(question)} | {d.year for d in parse_dates(question)}
    found = list(resp.quantities)
    if form.is_year:
        found += [
            Quantity(d.start, d.end, value=Decimal(d.year), year_like=True)
            for d in parse_dates(resp.text)
            if d.year
        ]
    out = []
    for q in sorted(found, key=lambda q: q.start):
        equal = q.value == gold.value
        if q.weak or resp.in_quotes(q.start) or (q.clock and gold.dimension != "duration"):
            continue
        if not equal and (
            q.value in asked
            or q.year_like != form.is_year
            or (q.ordinal and not gold.ordinal)
            or _in_name(resp, q)
        ):
            continue
        if form.is_year and not q.year_like:
            continue
        out.append(q)
    return out


def _in_name(resp: Response, q: Quantity) -> bool:
    """A number that is part of a name: "Apollo 11", "Boeing 777", "No. 2", "Season 3"."""
    before = resp.text[max(0, q.start - 30) : q.start]
    if re.search(r"\b(?:No|Nos|#)\.?\s*$", before):
        return True
    m = re.search(r"([A-Za-z][\w'-]*)\s+$", before)
    if not m or not m.group(1)[0].isupper() or m.group(1).casefold() in FUNCTION_WORDS:
        return False
    sentence_start = resp.sentences[resp.sentence_of(q.start)][0]
    return m.start(1) > sentence_start and m.group(1).casefold() not in _BEFORE_NUMBER


# Words before a number that do not make it part of a name ("May 1881", "About 12"): month
# names and the words that make a number rough or a bound.
_BEFORE_NUMBER = frozenset(m.casefold() for m in MONTH_NAMES) | frozenset(
    w for phrase in (*ROUGHLY, *BOUNDS) for w in phrase.split()
)


def plain(resp: Response, start: int, end: int) -> bool:
    """A number or date stated plainly as the answer.

    Its sentence has no negation, hedge or contrast ("than" aside) and is no question; it is not
    in a range ("between"), not listed beside a name and not taken back by a later sentence
    ("However, ...", "I'm not sure which.").
    """
    i = resp.sentence_of(start)
    sentence = resp.sentence(i)
    s_start, s_end = resp.sentences[i]
    before, after = resp.text[s_start:start], resp.text[end:s_end]
    contrast = [w for w in CONTRAST.findall(sentence) if w.casefold() != "than"]
    return not (
        contrast
        or negated(resp, start, end)
        or NEGATION.search(sentence)
        or HEDGE_WORDS.search(sentence)
        or sentence.rstrip().endswith("?")
        or re.search(r"\bbetween\b", before, re.IGNORECASE)  # a range or a choice
        or listed(before, after, resp.text[start:end])  # "Laraine Newman and 83"
        or re.search(r"\b(?:and|&)\s*$", before)  # "1858 and 109 times"
        or re.match(r"^\s*(?:and|&)\s+\S", after)
        or resp.retracted_after(i)
    )


_CLAUSE_TEXT = r"(?:[^.;!?]|\.(?=\d))"  # up to the end of the clause; "0.49" is one number
_ANSWER_STATEMENT = re.compile(
    r"(?:^\W*(?:it is|it's|it was)|\b(?:the )?(?:correct |final |real |right )?answer(?: is|:)|"
    rf"\bi would (?:pick|choose|say))\s+({_CLAUSE_TEXT}+)"
    rf"|({_CLAUSE_TEXT}+?)\s+is the (?:correct |final |right )?answer\b",
    re.IGNORECASE,
)


def answers_elsewhere(resp: Response, found: Sequence[Quantity | DateMention]) -> bool:
    """The response names its answer explicitly, and none of ``found`` is in it.

    "Laraine Newman is the answer; 83 was the runner-up" gives 83, but not as its answer.
    """
    spans = [m.span(1) if m.group(1) else m.span(2) for m in _ANSWER_STATEMENT.finditer(resp.text)]
    inside = any(s <= f.start and f.end <= e for f in found for s, e in spans)
    return bool(spans) and not inside
