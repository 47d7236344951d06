"""Deterministic autorater rules: TRUE or FALSE only when sure, otherwise None for the LM judge.

Every accuracy this project prints rests on the autorater. These rules decide the items whose
verdict does not need judgement: the same answer in another form (``"twenty-one"`` for 21,
``"5:31"`` for 5 minutes 31 seconds, ``"3 March 1958"`` for March 3rd, 1958, ``"Lena
Marsh"`` for "This was Lena Marsh."), and the plain failures (an empty response, a refusal, a
hedge between candidates, a different number, the right digits in the wrong unit, a year for a
full date, the gold answer named only to be rejected). Everything else returns None and goes to
the LM judge. Precision matters more than coverage: a wrong rule verdict is never checked again,
while an abstention only costs a judge call.

The rules are general: they read the form of the gold answer and the response (see
:mod:`frames_dspy.judge.gold_forms` and :mod:`frames_dspy.judge.answer_forms`), never a list of
items.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from frames_dspy.judge.answer_forms import (
    DateMention,
    Quantity,
    compare_quantities,
    fold,
    parse_dates,
)
from frames_dspy.judge.answer_forms import parse_quantities as _quantities
from frames_dspy.judge.gold_forms import GoldForm, Part, analyse_gold, norm_tokens, tokens, word_set
from frames_dspy.judge.mentions import (
    CONTRAST,
    FUNCTION_WORDS,
    HEDGE_WORDS,
    NEGATION,
    Mention,
    Response,
    find_mentions,
    hedge,
    listed,
    negated,
    position,
    refusal,
    stated,
)
from frames_dspy.judge.names import names_another
from frames_dspy.judge.place_names import is_place_name
from frames_dspy.judge.units import UNIT_WORDS

__all__ = ["RuleVerdict", "RULES", "decide"]


@dataclass(frozen=True)
class RuleVerdict:
    """A rule's verdict: whether the response is correct, which rule decided, and why."""

    correct: bool
    rule: str
    reason: str


#: Rule name -> what it decides (for docs and tables).
RULES: dict[str, str] = {
    "exact": "TRUE: the response is the gold answer (or its core) after normalisation",
    "same_quantity": "TRUE: the response commits to the gold quantity, in any common form",
    "same_date": "TRUE: the response commits to the gold date, in any common format",
    "stated_answer": "TRUE: the response states the gold's core answer (every part of it) as its "
    "answer, not negated, compared away or listed among alternatives",
    "empty": "FALSE: the response is empty",
    "refusal": "FALSE: the response declines or says it cannot tell, and names no answer",
    "hedge": "FALSE: the response offers two or more candidates without committing to one",
    "rejected_option": "FALSE: the gold answer appears only negated, compared away or rejected",
    "different_number": "FALSE: the response commits to another number of the gold's kind",
    "unit_or_scale_mismatch": "FALSE: the gold's digits with another unit or scale word",
    "different_date": "FALSE: the response commits to another full date",
    "year_for_full_date": "FALSE: a full-date gold answered with a year or month only",
    "partial": "FALSE: the response names some parts of a multi-part gold and nothing else",
    "opposite_yes_no": "FALSE: a yes/no gold answered with the opposite word",
    "no_quantity": "FALSE: a count or measure answered with no number, or with years only",
    "different_name": "FALSE: the gold names someone or something and the response carries no "
    "form of that name (no word of it, another spelling, nor its initials)",
}

# --- response-wide rules ---------------------------------------------------------------------


def _refusal(resp: Response, present: bool) -> RuleVerdict | None:
    if present or (phrase := refusal(resp)) is None:
        return None
    return RuleVerdict(False, "refusal", f"the response declines to answer ({phrase!r})")


def _hedge(form: GoldForm, resp: Response, question: str) -> RuleVerdict | None:
    if form.has_or or (why := hedge(resp, question)) is None:
        return None  # a gold that itself reads "A or B" makes "or" no sign of a hedge
    return RuleVerdict(False, "hedge", f"the response does not commit: {why}")


# --- per kind of gold ------------------------------------------------------------------------


def _strip_frame(text: str) -> str:
    text = re.sub(
        r"^\W*(?:(?:the answer is|answer:|it is|it's|it was|this is|this was|that is|that's|"
        r"that would be|they are|they were|he is|he was|she is|she was)\s+)",
        "",
        text.strip(),
        flags=re.IGNORECASE,
    )
    return text.strip().rstrip(".!")


def _items(text: str) -> list[tuple[str, ...]] | None:
    """The names of a short list response ("Naruto Uzumaki and Minato Namikaze.")."""
    text = _strip_frame(text)
    if re.search(r"\w\w[.!?;:]\s", text) or len(text.split()) > 30:
        return None
    raw = [p for p in re.split(r"\s*,\s*(?:and\s+|&\s+)?|\s+(?:and|&)\s+", text) if p.strip()]
    merged: list[str] = []
    for piece in raw:
        if merged and is_place_name(piece):
            continue  # "Sydney, Australia": the place only locates the name before it
        merged.append(piece)
    return [norm_tokens(p) for p in merged]


def _matches_part(words: tuple[str, ...], part: Part) -> bool:
    return words == part.main or any(words == part.main + q for q in part.qualifiers)


def _decide_list(form: GoldForm, resp: Response, question: str) -> RuleVerdict | None:
    parts = form.parts
    if (items := _items(resp.text)) is not None:
        hit = [next((i for i, p in enumerate(parts) if _matches_part(w, p)), None) for w in items]
        if None not in hit and len(set(hit)) == len(hit):
            if len(hit) == len(parts):
                return RuleVerdict(True, "stated_answer", "the response lists every part")
            missing = [parts[i].text for i in range(len(parts)) if i not in hit]
            return RuleVerdict(False, "partial", f"the response leaves out {missing}")
    found = {i: find_mentions(resp, p.main) for i, p in enumerate(parts)}
    named = [i for i in found if found[i]]
    spots = sorted((found[i][0] for i in named), key=lambda m: m.start)
    if not spots or not _one_list(resp, spots) or resp.retracted_after(spots[0].sent):
        return None
    if len(named) == len(parts):
        if not stated(resp, spots[0].start, spots[-1].end, question):
            return None
        why = "the response names every part of the gold as one list"
        return RuleVerdict(True, "stated_answer", why)
    # Partial only when the list is closed ("... founded by Steve Jobs and Steve Wozniak.", not
    # "Ada Lind and her father") and no word of a missing part appears anywhere.
    s_end = resp.sentences[spots[0].sent][1]
    if not re.match(r"^[\s\"')]*(?:[.!;]|$)", resp.text[spots[-1].end : s_end]):
        return None
    shared = {
        w for i, p in enumerate(parts) for w in p.main if any(w in q.main for q in parts[i + 1 :])
    }
    present = {t.norm for t in resp.toks}
    missing = [parts[i] for i in found if not found[i]]
    for part in missing:
        own = set(part.main) - shared - FUNCTION_WORDS
        if not own or own & present:
            return None
    why = f"the response names {len(named)} of {len(parts)} parts; it leaves out "
    return RuleVerdict(False, "partial", why + ", ".join(repr(p.text) for p in missing))


def _one_list(resp: Response, spots: list[Mention]) -> bool:
    """The mentions form one list in one plain sentence, with no other name listed beside it."""
    if len({m.sent for m in spots}) != 1 or not resp.clean(spots[0].sent):
        return False
    for a, b in zip(spots, spots[1:], strict=False):
        gap = resp.text[a.end : b.start]
        if not re.fullmatch(r"[\s,;&\"']*(?:and\s+)?(?:the\s+)?[\"']?", gap, re.IGNORECASE):
            return False
    s, e = resp.sentences[spots[0].sent]
    return not (
        listed(resp.text[s : spots[0].start], "") or listed("", resp.text[spots[-1].end : e])
    )


_ROMAN = re.compile(r"m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})")
_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}


def _numeral(word: str) -> float | None:
    """The value of a token in digits or Roman numerals ("2", "ii"), or None for a word."""
    if word[0].isdigit():
        try:
            return float(word)
        except ValueError:
            return None
    if not _ROMAN.fullmatch(word) or (len(word) == 1 and word not in "ivx"):
        return None  # a lone C, D, L or M is an initial ("Dwight D Eisenhower")
    values = [_ROMAN_VALUES[c] for c in word]
    return float(sum(-v if v < n else v for v, n in zip(values, [*values[1:], 0], strict=True)))


def _number_changed(words: tuple[str, ...], gold: tuple[str, ...]) -> bool:
    """The same name with another number in it ("Blue Yodel No. 2" for "Blue Yodel No. 1").

    Roman numerals count as numbers ("Richard III" for "Richard II", "LXXVIII" for "LXXIX").
    """
    if len(words) != len(gold) or words == gold or all(w[0].isdigit() for w in gold):
        return False  # a gold that is only digits is a quantity, compared by its own rules
    changed = [i for i, (a, b) in enumerate(zip(words, gold, strict=True)) if a != b]
    values = [(_numeral(words[i]), _numeral(gold[i])) for i in changed]
    return all(a is not None and b is not None and a != b for a, b in values)


def _decide_name(form: GoldForm, resp: Response, question: str) -> RuleVerdict | None:
    part = form.parts[0]
    core = norm_tokens(_strip_frame(resp.text))
    if _matches_part(core, part):
        return RuleVerdict(True, "stated_answer", f"the response is the gold's core {part.text!r}")
    mentions = find_mentions(resp, part.main)
    if not mentions:
        if _number_changed(core, part.main):
            why = f"the response changes the number in {part.text!r}"
            return RuleVerdict(False, "different_number", why)
        return None
    where = [position(resp, m, part.main, question) for m in mentions]
    if all(w == "rejected" for w in where):
        return RuleVerdict(
            False, "rejected_option", f"{part.text!r} appears only as a rejected option"
        )
    if "alternative" in where and "asserted" not in where:
        return RuleVerdict(False, "hedge", f"{part.text!r} appears only as one of alternatives")
    if "asserted" in where and all(w in ("asserted", "neutral") for w in where):
        first = where.index("asserted")
        if not resp.retracted_after(mentions[first].sent):
            return RuleVerdict(
                True, "stated_answer", f"the response states {part.text!r} as its answer"
            )
    return None


def _decide_yes_no(form: GoldForm, resp: Response, question: str) -> RuleVerdict | None:
    m = re.match(r"^\W*(yes|no)\b(?!\s+one\b)(?![.,]?\s*\d)(?!\s*\?)", resp.text, re.IGNORECASE)
    if m is None:
        return None
    said, other = m.group(1).casefold(), "no" if form.polarity == "yes" else "yes"
    if said != form.polarity:
        if re.search(rf"\b{form.polarity}\b", resp.text[m.end() :], re.IGNORECASE):
            return None  # "No... actually, yes"
        why = f"the gold says {form.polarity!r}, the response {said!r}"
        return RuleVerdict(False, "opposite_yes_no", why)
    if HEDGE_WORDS.search(resp.unquoted) or re.search(rf"\b{other}\b", resp.text[m.end() :], re.I):
        return None  # "Yes and no", "Yes, possibly"
    if CONTRAST.search(resp.unquoted):
        return None  # "Yes is a common guess, but ..."
    if form.parts:
        part = form.parts[0]
        where = [position(resp, x, part.main, question) for x in find_mentions(resp, part.main)]
        if where and all(w in ("asserted", "neutral") for w in where):
            why = f"the response says {said!r} and names {part.text!r}"
            return RuleVerdict(True, "stated_answer", why)
        return None
    if form.explained:
        return RuleVerdict(True, "stated_answer", f"the response answers {said!r} like the gold")
    return None


def _candidates(form: GoldForm, resp: Response, question: str) -> list[Quantity]:
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
    return m.start(1) > sentence_start and m.group(1).casefold() not in _NOT_NAMES


# Words before a number that do not make it part of a name ("May 1881", "About 12").
_NOT_NAMES = word_set(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec about around approximately over under "
    "nearly almost roughly"
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


def _decide_quantity(form: GoldForm, resp: Response, question: str) -> RuleVerdict | None:
    gold = form.quantity
    found = _candidates(form, resp, question)
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


def _decide_date(form: GoldForm, resp: Response, question: str) -> RuleVerdict | None:
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


def _present(form: GoldForm, resp: Response, question: str) -> bool:
    """Whether the response names the gold answer anywhere (a refusal then is no refusal)."""
    if form.kind in ("name", "list"):
        return any(find_mentions(resp, p.main) for p in form.parts)
    if form.kind == "quantity":
        found = _candidates(form, resp, question)
        return any(compare_quantities(form.quantity, q) in ("same", "close") for q in found)
    if form.kind == "date":
        return any(
            (d.month, d.day) == (form.date.month, form.date.day) for d in parse_dates(resp.text)
        )
    if form.kind == "sentence":
        asked = set(norm_tokens(question))
        names = [
            t.norm
            for t in tokens(form.text)
            if t.text[0].isupper() and len(t.norm) > 2 and t.norm not in asked
        ]
        have = {t.norm for t in resp.toks}
        return any(n in have for n in names)
    return False


_DECIDERS = {
    "list": _decide_list,
    "name": _decide_name,
    "yes_no": _decide_yes_no,
    "quantity": _decide_quantity,
    "date": _decide_date,
}


def decide(question: str, gold: str, response: str) -> RuleVerdict | None:
    """Decide whether ``response`` carries ``gold``, or None when no rule is sure.

    Args:
        question: The FRAMES prompt (it tells a year from a count and which words of a gold
            sentence only repeat the question).
        gold: The gold answer, verbatim.
        response: The response to grade; None counts as empty.

    Returns:
        A :class:`RuleVerdict`, or None when the LM judge must decide.

    Raises:
        ValueError: ``gold`` is empty, so nothing can be judged against it.
    """
    if not str(gold or "").strip():
        raise ValueError(f"gold answer {gold!r} is empty; a rule needs an answer to compare with")
    resp = Response(str(response or ""))
    if not tokens(fold(gold)):  # a gold of signs only ("....-" in Morse code)
        same = resp.text.strip() == " ".join(fold(gold).split())
        return RuleVerdict(True, "exact", "the response is the gold answer") if same else None
    if not re.search(r"\w", resp.text):
        return RuleVerdict(False, "empty", "the response is empty")
    question = fold(question or "")
    form = analyse_gold(gold, question)
    if verdict := _refusal(resp, _present(form, resp, question)):
        return verdict
    if norm_tokens(resp.text) == norm_tokens(gold) or norm_tokens(
        _strip_frame(resp.text)
    ) == norm_tokens(_strip_frame(form.text)):
        return RuleVerdict(True, "exact", "the response is the gold answer after normalisation")
    if verdict := _hedge(form, resp, question):
        return verdict
    main = norm_tokens(re.sub(r"\([^)]*\)", " ", _strip_frame(form.text)))
    numeric = form.kind in ("quantity", "date")  # their own rules say which number differs
    if not numeric and _number_changed(norm_tokens(_strip_frame(resp.text)), main):
        return RuleVerdict(
            False, "different_number", "the response is the gold with another number"
        )
    if (decider := _DECIDERS.get(form.kind)) and (verdict := decider(form, resp, question)):
        return verdict
    if names := names_another(question, gold, response):
        return RuleVerdict(False, "different_name", f"the response names no form of {names!r}")
    return None
