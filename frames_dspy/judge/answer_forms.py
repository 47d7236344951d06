"""Answer forms: the numbers, quantities and dates that answers are written in.

The rules in :mod:`frames_dspy.judge.rules` compare a gold answer with a response by what they say,
not by how they say it: "twenty-one" is 21, "2.5 million" is 2,500,000, "5:31" is 5 minutes 31
seconds, "4 km" is 4,000 metres, "12 May 1990" and "May 12th, 1990" are one date. Everything
here is plain text processing: no model, no data files.

All positions (``start``, ``end``) refer to the text after :func:`fold`, which the parsers apply
themselves; callers that need spans fold first.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from frames_dspy.judge.units import (
    ATTACHED_UNITS,
    BOUNDS,
    CURRENCY_PREFIX,
    ROUGHLY,
    SCALE_ABBREVIATIONS,
    SCALES,
    UNIT_WORDS,
    UNITS,
)

__all__ = [
    "MONTH_NAMES",
    "Quantity",
    "DateMention",
    "fold",
    "parse_quantities",
    "parse_dates",
    "compare_quantities",
]

# Curly quotes, primes and dashes written by people and models become their plain forms, so
# one pattern reads them all. An em dash is punctuation between words, never a minus sign.
_PLAIN = str.maketrans(
    {
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u2033": '"',
        "\u2018": "'",
        "\u2019": "'",
        "\u2032": "'",
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2212": "-",
        "\u2014": " - ",
        "\u00a0": " ",
        "\u2009": " ",
        "\u202f": " ",
    }
)


def fold(text: str) -> str:
    """The text with accents removed and quotes, dashes and spaces made plain; case is kept."""
    text = unicodedata.normalize("NFKD", str(text))
    return "".join(c for c in text if not unicodedata.combining(c)).translate(_PLAIN)


# --- number words ----------------------------------------------------------------------------


def _numbered(words: str, first: int, step: int = 1) -> dict[str, int]:
    """``{"twenty": 20, "thirty": 30, ...}`` from a space-separated word list."""
    return {w: first + step * i for i, w in enumerate(words.split())}


_ONES = _numbered(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen",
    0,
)
_TENS = _numbered("twenty thirty forty fifty sixty seventy eighty ninety", 20, 10)
_ORDINAL_ONES = _numbered(
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
    "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth",
    1,
)
_ORDINAL_TENS = _numbered(
    "twentieth thirtieth fortieth fiftieth sixtieth seventieth eightieth ninetieth", 20, 10
)
_ADVERBS = {"once": 1, "twice": 2, "thrice": 3}
_WORD_VOCAB = (
    set(_ONES) | set(_TENS) | set(_ORDINAL_ONES) | set(_ORDINAL_TENS) | set(SCALES) | set(_ADVERBS)
) | {"hundred", "hundredth", "thousandth", "millionth", "dozen"}
_WORD_RUN = re.compile(
    r"\b(?:a\s+(?=(?:hundred|thousand|million|billion|dozen)\b))?"
    rf"(?:{'|'.join(sorted(_WORD_VOCAB, key=len, reverse=True))})"
    rf"(?:(?:\s+and\s+|\s+|-)(?:{'|'.join(sorted(_WORD_VOCAB, key=len, reverse=True))}))*\b",
    re.IGNORECASE,
)


def _word_value(words: list[str]) -> tuple[Decimal, bool] | None:
    """The value of a run of number words and whether it is an ordinal; None if malformed."""
    total, current, ordinal, seen = 0, 0, False, False
    for word in words:
        if ordinal:  # nothing follows an ordinal ("third five" is two numbers)
            return None
        if word in _ONES or word in _ORDINAL_ONES:
            value = _ONES.get(word, _ORDINAL_ONES.get(word))
            if seen and current % 10:
                return None
            current += value
            ordinal = word in _ORDINAL_ONES
        elif word in _TENS or word in _ORDINAL_TENS:
            if seen and current % 100:
                return None
            current += _TENS.get(word, _ORDINAL_TENS.get(word))
            ordinal = word in _ORDINAL_TENS
        elif word in ("hundred", "hundredth"):
            current = (current or 1) * 100
            ordinal = word == "hundredth"
        elif word == "dozen":
            current = (current or 1) * 12
        elif word in SCALES or word in ("thousandth", "millionth"):
            scale = SCALES.get(word) or (1000 if word == "thousandth" else 10**6)
            total += (current or 1) * int(scale)
            current = 0
            ordinal = word.endswith("th")
        else:
            return None
        seen = True
    return Decimal(total + current), ordinal


# --- quantities ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Quantity:
    """One number in a text, with what is written around it.

    Attributes:
        start: Start of the number (or its currency sign) in the folded text.
        end: End of the number and its unit.
        value: The number times its scale word ("2.5 million" -> 2500000), in ``unit``.
        unit: Canonical unit ("year", "km", "USD", "percent"), or None for a bare count.
        scale: The scale word written ("million"), if any.
        ordinal: Written as an ordinal ("3rd", "third").
        words: Written in words ("twelve").
        roughly: Preceded by "about", "approximately" and the like.
        bound: Preceded by "more than", "over", "at least" and the like.
        precision: Half of this is how far the true value may be from a rounded one.
        year_like: A bare four-digit integer between 1000 and 2199 (probably a year).
        parts: For a compound duration ("5 minutes and 31 seconds"), its (unit, value) parts.
        clock: Written as ``m:ss`` or ``h:mm:ss`` (a duration only where one is expected).
        weak: A lone "one", which is more often a pronoun ("one of the ...") than a number.
    """

    start: int
    end: int
    value: Decimal
    unit: str | None = None
    scale: str | None = None
    ordinal: bool = False
    words: bool = False
    roughly: bool = False
    bound: bool = False
    precision: Decimal = Decimal(1)
    year_like: bool = False
    parts: tuple[tuple[str, Decimal], ...] = ()
    clock: bool = False
    weak: bool = False

    @property
    def dimension(self) -> str:
        """The unit's dimension ("length", "calendar", "money:USD"), "" for a bare count."""
        if self.parts:
            dims = {UNITS[u][0] for u, _ in self.parts}
            return dims.pop() if len(dims) == 1 else "+".join(sorted(dims))
        return UNITS[self.unit][0] if self.unit else ""

    @property
    def system(self) -> str:
        return UNITS[self.unit][2] if self.unit and not self.parts else ""

    def measure(self) -> dict[str, Decimal]:
        """The amount per dimension in base units; compound durations may span two."""
        if not self.parts:
            factor = UNITS[self.unit][1] if self.unit else Decimal(1)
            return {self.dimension: self.value * factor}
        out: dict[str, Decimal] = {}
        for unit, value in self.parts:
            dim, factor, _ = UNITS[unit]
            out[dim] = out.get(dim, Decimal(0)) + value * factor
        return out

    @property
    def mantissa(self) -> str:
        """The significant digits of the value as written: 517375 for "$517.375 million"."""
        digits = "".join(map(str, self.value.normalize().as_tuple().digits))
        return digits.strip("0") or "0"


_NUMBER = re.compile(
    r"(?P<cur>US\$|\$|£|€|¥)?\s?"
    r"(?<![\w.,])(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?P<tail>[A-Za-z%]*)",
)
_CLOCK = re.compile(r"(?<![\w:.])(\d{1,2}):([0-5]\d)(?::([0-5]\d))?(?![\w:])")
_UNIT_AFTER = re.compile(
    r"\s*-?\s*(?P<unit>"
    + "|".join(re.escape(w) for w in sorted(UNIT_WORDS, key=len, reverse=True) if w != "%")
    + r")(?![\w/])",
    re.IGNORECASE,
)
_SCALE_AFTER = re.compile(r"\s+(thousand|million|billion|trillion)\b", re.IGNORECASE)
_CURRENCY_AFTER = re.compile(r"\s+(US dollars|dollars|USD|euros|EUR|pounds sterling|GBP|yen)\b")


def _qualifier(text: str, start: int) -> tuple[bool, bool]:
    """Whether the words just before ``start`` make the number rough or a bound."""
    before = " ".join(text[max(0, start - 24) : start].casefold().split())
    before = re.sub(r"[$£€¥]$", "", before).strip()
    bound = any(re.search(rf"(?:^|\W){re.escape(b)}$", before) for b in BOUNDS)
    roughly = any(re.search(rf"(?:^|\W){re.escape(r)}$", before) for r in ROUGHLY)
    return roughly, bound


def _precision(digits: str, scale: Decimal) -> Decimal:
    """How finely a written number is given: 0.1 for "31.2"; 1000 for "84,000"; 1 for "1940"."""
    if "." in digits:
        return Decimal(1).scaleb(-len(digits.split(".")[1])) * scale
    bare = digits.replace(",", "")
    zeros = len(bare) - len(bare.rstrip("0"))
    # Two trailing zeros ("1900", "120") are as often exact as rounded; three or more
    # ("84,000") or a scale word ("2 million") mark a rounded number.
    if scale > 1:
        return scale
    return Decimal(10) ** zeros if zeros >= 3 and bare != "0" else Decimal(1)


def _unit_after(text: str, end: int, currency: str | None) -> tuple[str | None, str | None, int]:
    """(scale word, unit, new end) for the words straight after a number."""
    scale = None
    if m := _SCALE_AFTER.match(text, end):
        scale, end = m.group(1).casefold(), m.end()
    unit = currency
    if currency is None and (m := _CURRENCY_AFTER.match(text, end)):
        unit, end = UNIT_WORDS[m.group(1).casefold()], m.end()
    elif m := _UNIT_AFTER.match(text, end):
        word = m.group("unit").casefold()
        # A lone "m", "g" or "ha" after a space is too often an initial or a word to be a unit
        # unless punctuation follows ("21 m."); "in" (inches) is nearly always the preposition
        # and is not a unit spelling at all.
        ambiguous = word in ("m", "mi", "g", "ha")
        if not ambiguous or re.match(r"\s*(?:[.,;)]|$)", text[m.end() :]):
            unit, end = UNIT_WORDS[word], m.end()
    return scale, unit, end


def _digit_quantities(text: str, taken: list[tuple[int, int]]) -> Iterable[Quantity]:
    for m in _NUMBER.finditer(text):
        start, num = m.start("num"), m.group("num")
        if _overlaps(start, m.end("num"), taken):
            continue
        tail = m.group("tail")
        currency = CURRENCY_PREFIX.get((m.group("cur") or "").casefold())
        ordinal = tail.casefold() in ("st", "nd", "rd", "th")
        scale_word, unit, end = None, currency, m.end()
        if tail and not ordinal:
            low = tail.casefold()
            if currency and low in SCALE_ABBREVIATIONS:
                scale_word = SCALE_ABBREVIATIONS[low]
            elif low == "bn":
                scale_word = "billion"
            elif low in ATTACHED_UNITS and not (currency and low == "m"):
                unit = ATTACHED_UNITS[low]
            else:
                continue  # "1980s", "9K38", "3D": part of a word, not a quantity
        elif not ordinal:
            more_scale, more_unit, end = _unit_after(text, m.end(), currency)
            scale_word, unit = more_scale, more_unit or currency
            if more_scale and currency is None and (c := _CURRENCY_AFTER.match(text, end)):
                unit, end = UNIT_WORDS[c.group(1).casefold()], c.end()
            elif more_scale and currency is None:
                _, after_unit, end = _unit_after(text, end, None)
                unit = after_unit
        if ordinal and (more := _UNIT_AFTER.match(text, end)):
            unit, end = UNIT_WORDS[more.group("unit").casefold()], end  # "5th year": unit only
        try:
            value = Decimal(num.replace(",", ""))
        except InvalidOperation:
            continue
        scale = SCALES[scale_word] if scale_word else Decimal(1)
        first = m.start("cur") if m.group("cur") else start
        if first > 0 and text[first - 1] == "-" and (first < 2 or not text[first - 2].isalnum()):
            value, first = -value, first - 1
        roughly, bound = _qualifier(text, first)
        yield Quantity(
            start=first,
            end=end,
            value=value * scale,
            unit=unit,
            scale=scale_word,
            ordinal=ordinal,
            roughly=roughly,
            bound=bound,
            precision=_precision(num, scale),
            year_like=bool(
                re.fullmatch(r"1\d{3}|20\d{2}|21\d{2}", num) and not unit and not scale_word
            )
            and not ordinal,
        )


def _word_quantities(text: str, taken: list[tuple[int, int]]) -> Iterable[Quantity]:
    for m in _WORD_RUN.finditer(text):
        if _overlaps(m.start(), m.end(), taken):
            continue
        words = [w.casefold() for w in re.split(r"\s+and\s+|\s+|-", m.group()) if w]
        if words and words[0] == "a":
            words = ["one", *words[1:]]
        if len(words) == 1 and words[0] in _ADVERBS:
            yield Quantity(m.start(), m.end(), Decimal(_ADVERBS[words[0]]), words=True)
            continue
        if any(w in _ADVERBS for w in words):
            continue
        # "second" after a number is the unit ("31 seconds" is read as digits + unit anyway).
        if words == ["second"] and re.search(r"\d\s*$", text[: m.start()]):
            continue
        parsed = _word_value(words)
        if parsed is None:
            continue
        value, ordinal = parsed
        scale_word, unit, end = _unit_after(text, m.end(), None)
        if words[-1] in SCALES and len(words) > 1:
            scale_word = words[-1]
        if scale_word and words[-1] not in SCALES:
            value *= SCALES[scale_word]
        if ordinal:
            unit, end = None, m.end()
        roughly, bound = _qualifier(text, m.start())
        scale = SCALES.get(scale_word or "", Decimal(1))
        yield Quantity(
            start=m.start(),
            end=end,
            value=value,
            unit=unit,
            scale=scale_word,
            ordinal=ordinal,
            words=True,
            roughly=roughly,
            bound=bound,
            precision=scale,
            weak=words == ["one"] and unit is None,
        )


def _clock_quantities(text: str, taken: list[tuple[int, int]]) -> Iterable[Quantity]:
    for m in _CLOCK.finditer(text):
        if _overlaps(m.start(), m.end(), taken):
            continue
        a, b, c = int(m[1]), int(m[2]), m[3]
        parts = (
            (("hour", a), ("minute", b), ("second", int(c)))
            if c
            else (("minute", a), ("second", b))
        )
        yield Quantity(
            m.start(),
            m.end(),
            Decimal(a * 3600 + b * 60 + int(c)) if c else Decimal(a * 60 + b),
            unit="second",
            parts=tuple((u, Decimal(v)) for u, v in parts),
            clock=True,
        )


def _overlaps(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    return any(start < e and s < end for s, e in spans)


_JOIN = re.compile(r"\s*(?:,\s*and|,|and|&)?\s*$", re.IGNORECASE)


def _merge_durations(quantities: list[Quantity], text: str) -> list[Quantity]:
    """Join "26 years, 8 months, and 26 days" into one compound duration."""
    out: list[Quantity] = []
    for q in quantities:
        prev = out[-1] if out else None
        if (
            prev is not None
            and q.unit in UNITS
            and UNITS[q.unit][0] in ("duration", "calendar")
            and not q.clock
            and not q.ordinal
            and (
                prev.parts
                or (prev.unit in UNITS and UNITS[prev.unit][0] in ("duration", "calendar"))
            )
            and not prev.clock
            and _JOIN.fullmatch(text[prev.end : q.start])
            and _order(q.unit) < _order(prev.parts[-1][0] if prev.parts else prev.unit)
        ):
            parts = prev.parts or ((prev.unit, prev.value),)
            out[-1] = Quantity(
                prev.start,
                q.end,
                prev.value,
                unit=prev.unit,
                roughly=prev.roughly,
                bound=prev.bound,
                parts=(*parts, (q.unit, q.value)),
            )
        else:
            out.append(q)
    return out


_ORDER = ["second", "minute", "hour", "day", "week", "month", "year", "decade", "century"]


def _order(unit: str | None) -> int:
    return _ORDER.index(unit) if unit in _ORDER else -1


def parse_quantities(text: str, *, skip: Iterable[tuple[int, int]] = ()) -> list[Quantity]:
    """Every number in ``text`` (digits or words) with its scale, unit and qualifiers.

    Args:
        text: Any text; it is folded first (see :func:`fold`).
        skip: Spans of the folded text to leave out, e.g. the dates found by
            :func:`parse_dates`, whose day numbers are not quantities.

    Returns:
        Quantities in order of position, compound durations joined into one.
    """
    text = fold(text)
    taken = list(skip)
    clocks = list(_clock_quantities(text, taken))
    taken += [(q.start, q.end) for q in clocks]
    found = list(_digit_quantities(text, taken))
    taken += [(q.start, q.end) for q in found]
    found += _word_quantities(text, taken)
    found = sorted(found + clocks, key=lambda q: q.start)
    return _merge_durations(found, text)


def compare_quantities(gold: Quantity, response: Quantity) -> str:
    """How a response quantity stands to the gold one.

    Returns:
        ``"same"`` (equal after unit conversion, a bare number counting as the gold's unit),
        ``"close"`` (equal once one is rounded to the other's precision),
        ``"unit_or_scale"`` (the same digits with another unit or scale word),
        ``"different"`` (same kind, another value), or ``"incomparable"`` (different kinds of
        quantity, or metric against imperial).
    """
    g_dim, r_dim = gold.dimension, response.dimension
    if response.clock and g_dim != "duration":
        return "incomparable"
    g_units = {u for u, _ in gold.parts} if gold.parts else {gold.unit}
    r_units = {u for u, _ in response.parts} if response.parts else {response.unit}
    bare = not r_dim or not g_dim
    if bare and not gold.parts and not response.parts:
        g_value, r_value = gold.value, response.value
        if "percent" in (g_dim, r_dim) and (g_value / 100 == r_value or g_value == r_value / 100):
            return "same"  # 75.68% written as the fraction 0.7568
    elif g_dim == r_dim and (gold.system == response.system or not gold.system):
        g_measure, r_measure = gold.measure(), response.measure()
        if g_measure == r_measure:
            return "same"
        if len(g_measure) != 1 or len(r_measure) != 1:
            return "different" if set(g_measure) == set(r_measure) else "incomparable"
        g_value, r_value = g_measure[g_dim], r_measure[r_dim]
        if bool(gold.parts) != bool(response.parts):
            # "7 years and 2 months" against "7 years": the finer answer is not another one.
            simple = response if gold.parts else gold
            whole = (g_value if gold.parts else r_value) // UNITS[simple.unit][1]
            return "close" if whole == simple.value else "different"
        if gold.parts or response.parts:
            return "different"  # both compound: each part is exact to its unit
    else:
        if not gold.parts and not response.parts and gold.mantissa == response.mantissa:
            return "unit_or_scale"
        return "incomparable"
    if g_value == r_value:
        return "same"
    if (
        not gold.parts
        and not response.parts
        and gold.mantissa == response.mantissa
        and (g_units != r_units and not bare or gold.scale != response.scale)
    ):
        return "unit_or_scale"
    factor = g_value / gold.value if gold.value and not bare else Decimal(1)
    r_factor = r_value / response.value if response.value and not bare else Decimal(1)
    gap = abs(g_value - r_value)
    if gap * 2 <= response.precision * r_factor or gap * 2 <= gold.precision * factor:
        return "close"
    return "different"


# --- dates -----------------------------------------------------------------------------------

MONTH_NAMES = {
    m: i
    for i, names in enumerate(
        [
            ("January", "Jan"),
            ("February", "Feb"),
            ("March", "Mar"),
            ("April", "Apr"),
            ("May",),
            ("June", "Jun"),
            ("July", "Jul"),
            ("August", "Aug"),
            ("September", "Sept", "Sep"),
            ("October", "Oct"),
            ("November", "Nov"),
            ("December", "Dec"),
        ],
        start=1,
    )
    for m in names
}
# Month names must be capitalised: "may" and "march" are also ordinary words.
_MONTH = r"(?P<month>" + "|".join(sorted(MONTH_NAMES, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})(?!\d)"
_DATE_PATTERNS = [
    re.compile(rf"\b(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}"),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}"),
    re.compile(r"\b(?P<year>\d{4})-(?P<month>[01]?\d)-(?P<day>[0-3]?\d)\b"),
    re.compile(r"\b(?P<a>[0-3]?\d)/(?P<b>[0-3]?\d)/(?P<year>\d{4})\b"),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}"),
    re.compile(rf"\b(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH}(?![\w])"),
    re.compile(rf"\b{_MONTH}\s+{_DAY}(?![\w:,.]\d|\d)"),
    re.compile(rf"\b(?:in|of|on|during|since|until|by)\s+{_MONTH}(?![\w])"),
]


@dataclass(frozen=True)
class DateMention:
    """A date in a text; parts not written are None (``month`` only for "in June")."""

    start: int
    end: int
    year: int | None
    month: int | None
    day: int | None

    @property
    def full(self) -> bool:
        return None not in (self.year, self.month, self.day)


def _month_number(token: str) -> int | None:
    if token.isdigit():
        return int(token) if 1 <= int(token) <= 12 else None
    return MONTH_NAMES.get(token.rstrip("."))


def parse_dates(text: str) -> list[DateMention]:
    """Dates in ``text``, most complete form first where forms overlap.

    Reads "12 May 1990", "the 12th of May, 1990", "May 12, 1990", "1990-05-12", "May 1990",
    "12 May", "May 12" and a month after "in"/"on"/"of". A slashed date (``12/05/1990``) counts
    only where it is unambiguous: one of the first two numbers is over 12, or both are equal.
    Month names must be capitalised. Years alone are quantities, not dates.
    """
    text = fold(text)
    found: list[DateMention] = []
    for pattern in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            if _overlaps(m.start(), m.end(), [(d.start, d.end) for d in found]):
                continue
            groups = m.groupdict()
            if "a" in groups:
                a, b = int(groups["a"]), int(groups["b"])
                if a > 12 >= b:
                    day, month = a, b
                elif b > 12 >= a or a == b:
                    day, month = b, a
                else:
                    continue
            else:
                month = _month_number(groups["month"])
                day = int(groups["day"]) if groups.get("day") else None
            year = int(groups["year"]) if groups.get("year") else None
            if month is None or (day is not None and not 1 <= day <= 31):
                continue
            found.append(DateMention(m.start(), m.end(), year, month, day))
    return sorted(found, key=lambda d: d.start)
