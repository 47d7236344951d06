"""The rules for a gold answer that is a number or a date: the same value in another form, or
another value, unit or scale.

:func:`decide_quantity` and :func:`decide_date` are the deciders :func:`frames_dspy.judge.rules.
decide` calls for a gold of kind ``quantity`` or ``date`` (see
:mod:`frames_dspy.judge.gold_forms`); :func:`candidates` lists the numbers of a response that
could be its answer to a numeric gold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal

from frames_dspy.judge.answer_forms import (
    MONTH_NAMES,
    DateMention,
    Quantity,
    compare_quantities,
    parse_dates,
)
from frames_dspy.judge.answer_forms import parse_quantities as _quantities
from frames_dspy.judge.coverage import range_gold, range_quantities, ranges
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
from frames_dspy.judge.units import BOUNDS, ROUGHLY, UNIT_WORDS
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["candidates", "decide_date", "decide_quantity", "decide_range"]


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
_VAGUE = re.compile(
    r"\b(?:half|quarter|couple|pair|several|few|both|dozens|scores|none|nobody|no one|nothing|"
    r"single|lone|sole|zero)\b|\b[IVXLCDM]{2,}\b|\d+\s*/\s*\d+",
)
_CONCLUSION = re.compile(
    r"=|\b(?:so|therefore|thus|hence|gives?|giving|making|total|answer|result|comes to|"
    r"which is|equals?|difference)\b",
    re.IGNORECASE,
)


def _plain(resp: Response, start: int, end: int) -> bool:
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


def _answers_elsewhere(resp: Response, found: Sequence[Quantity | DateMention]) -> bool:
    """The response names its answer explicitly, and none of ``found`` is in it.

    "Laraine Newman is the answer; 83 was the runner-up" gives 83, but not as its answer.
    """
    spans = [m.span(1) if m.group(1) else m.span(2) for m in _ANSWER_STATEMENT.finditer(resp.text)]
    inside = any(s <= f.start and f.end <= e for f in found for s, e in spans)
    return bool(spans) and not inside


_ASKED_UNIT = {
    "calendar": r"\b(?:years?|months?|decades?|centur\w+|old|age)\b",
    "duration": r"\b(?:days?|hours?|minutes?|seconds?|weeks?|long)\b",
    "percent": r"\b(?:percent\w*|%)",
}


def _unit_asked(q: Quantity, question: str) -> bool:
    """Whether the question asks for the kind of quantity the response's unit measures."""
    dimension = q.dimension
    if dimension.startswith("money"):
        pattern = r"\b(?:much|cost|price|worth|gross\w*|earn\w*|revenue|paid|sold|dollars?)\b"
    else:
        pattern = _ASKED_UNIT.get(dimension)
    if pattern is None:  # lengths, masses...: the unit itself must be named
        spellings = [w for w, u in UNIT_WORDS.items() if u == q.unit and len(w) > 2]
        pattern = r"\b(?:" + "|".join(map(re.escape, spellings or [q.unit])) + r")\b"
    return bool(re.search(pattern, question, re.IGNORECASE))


def _no_quantity(form: GoldForm, resp: Response) -> RuleVerdict | None:
    """A count or measure (not a year) answered with no number at all, or with years only."""
    if form.is_year or _VAGUE.search(resp.unquoted) or _VAGUE.search(resp.unquoted.casefold()):
        return None  # "Both", "None", "half": a count in words the parser does not read
    if any(compare_quantities(form.quantity, q) in ("same", "close") for q in resp.quantities):
        return None
    if any(not q.year_like for q in resp.quantities):
        return None  # a number the candidates left out (in a name, from the question): unsure
    return RuleVerdict(False, "no_quantity", "the response gives no number that could be it")


def decide_quantity(form: GoldForm, resp: Response, question: str) -> RuleVerdict | None:
    gold = form.quantity
    found = candidates(form, resp, question)
    if not found:
        return _no_quantity(form, resp)
    if any(q.bound for q in found):
        return None
    relation = [(q, compare_quantities(gold, q)) for q in found]
    same = [q for q, r in relation if r == "same"]
    written = resp.text[found[-1].start : found[-1].end]
    # "Not 282 years: ... 272 years old": the gold's number only ever negated.
    rejected = [q for q in same if negated(resp, q.start, q.end)]
    others_plain = not any(negated(resp, q.start, q.end) for q, r in relation if r != "same")
    if same and rejected == same and others_plain:
        said = resp.text[same[0].start : same[0].end]
        return RuleVerdict(False, "rejected_option", f"the response rejects {said!r}")
    if same:
        if not all(_plain(resp, q.start, q.end) for q in same) or _answers_elsewhere(resp, same):
            return None
        if any(q.unit and not gold.unit and not _unit_asked(q, question) for q in same):
            return None  # "7 years" for a bare 7: right only if the question asks in years
        if gold.value in {q.value for q in _quantities(question)} and len(resp.toks) > 6:
            return None  # the response may only repeat the question's number
        others = [q for q, r in relation if r != "same"]
        last = found[-1]
        sentence = resp.sentence(resp.sentence_of(last.start))
        if not others or (last in same and _CONCLUSION.search(sentence)):
            return RuleVerdict(True, "same_quantity", f"the response commits to {written!r}")
        return None
    kinds = {r for _, r in relation}
    if _VAGUE.search(resp.unquoted) or kinds - {"different", "unit_or_scale"}:
        return None
    if any(NEGATION.search(resp.sentence(resp.sentence_of(q.start))) for q in found):
        return None
    if kinds == {"unit_or_scale"}:
        why = f"the response gives {written!r}: the gold's digits with another unit or scale"
        return RuleVerdict(False, "unit_or_scale_mismatch", why)
    if kinds == {"different"}:
        return RuleVerdict(False, "different_number", f"the response commits to {written!r}")
    return None


def decide_date(form: GoldForm, resp: Response, question: str) -> RuleVerdict | None:
    gold = form.date
    asked = {(d.year, d.month, d.day) for d in parse_dates(question)}
    dates = [
        d
        for d in parse_dates(resp.text)
        if (d.year, d.month, d.day) not in asked and not resp.in_quotes(d.start)
    ]
    parsed = [(d.start, d.end) for d in parse_dates(resp.text)]
    for m in re.finditer(r"\b\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}\b", resp.text):
        if not any(s <= m.start() < e for s, e in parsed):
            return None  # 05/02/2011 (day or month first?), 25.08.1972: not read, so not sure
    full = [d for d in dates if d.day]
    same = [d for d in full if (d.month, d.day) == (gold.month, gold.day)]
    if any(gold.year and d.year is None for d in same):
        return None  # "August 25" for "August 25, 1972": the year is left out
    same = [d for d in same if gold.year is None or d.year == gold.year]
    other = [d for d in full if d not in same]
    sentences = {resp.sentence_of(d.start) for d in full}
    if any(NEGATION.search(resp.sentence(i)) for i in sentences):
        return None
    written = resp.text[full[0].start : full[0].end] if full else ""
    if same and not other:
        if not all(_plain(resp, d.start, d.end) for d in same) or _answers_elsewhere(resp, same):
            return None
        return RuleVerdict(True, "same_date", f"the response commits to {written!r}")
    if any(negated(resp, d.start, d.end) for d in other):
        return None
    if other and not same:
        return RuleVerdict(False, "different_date", f"the response commits to {written!r}")
    if full or not gold.day:
        return None
    years = [q for q in resp.quantities if q.year_like and q.value not in {y for y, _, _ in asked}]
    days = [q for q in resp.quantities if q.value == gold.day]
    partial = [d for d in dates if d.month and not d.day]
    if (partial or years) and not days:
        said = resp.text[(partial or years)[0].start : (partial or years)[0].end]
        why = f"the gold is a full date; the response gives only {said!r}"
        return RuleVerdict(False, "year_for_full_date", why)
    return None


# --- ranges ----------------------------------------------------------------------------------


def decide_range(gold: str, resp: Response) -> RuleVerdict | None:
    """A range gold: the same range in any unit of its kind, or its digits in another unit.

    Only a response that gives one range and no other number is decided.
    """
    ends = range_gold(gold)
    found = ranges(resp.text)
    if ends is None or len(found) != 1 or len(range_quantities(resp.text)) != 2:
        return None
    said = found[0]
    if not _plain(resp, said[0].start, said[1].end):
        return None
    relations = [compare_quantities(g, r) for g, r in zip(ends, said, strict=True)]
    written = resp.text[said[0].start : said[1].end]
    if all(r in ("same", "close") for r in relations):
        return RuleVerdict(True, "same_quantity", f"the response gives the gold range {written!r}")
    if all(r == "unit_or_scale" for r in relations):
        why = f"the response gives {written!r}: the gold's range in another unit or scale"
        return RuleVerdict(False, "unit_or_scale_mismatch", why)
    return None
