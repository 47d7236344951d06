"""The gold's vital parts: what a response must carry for the ``uncovered`` and ``moved_on`` steps.

The FRAMES paper's judge asks whether the *vital facts* of the gold answer are in a response.
The other rules each read one shape of gold (a name, a number, a date, a list); this module
reads any gold, sentences and explanations included, for the parts an answer cannot leave out:

- every number and full date, when the question asks for a quantity, a year or a date, or for
  two things at once ("When did it open, and how many years after ...?");
- every name (a run of capitalised words the question does not already contain), when the
  question asks who or what; each list part ("A, B and C"); each item a count is followed by
  ("3 - red, white, blue").

What is in brackets is another form of the answer ("Foo No. 1 (Bar Song)", "20 mm (0.8 in)"):
a response that carries the bracketed form instead is as good. An explanation of two or more
sentences is read for its last sentence only, unless the question asks for two things.

Two FALSE-only steps of :data:`frames_dspy.judge.rules.PIPELINE` read these parts, last, on what
no other step decided: :mod:`~frames_dspy.judge.steps.uncovered` (a vital part has no trace in
the response) and :mod:`~frames_dspy.judge.steps.moved_on` (the response names the gold, then
commits to another answer of its kind). The ranges of a text (:func:`ranges`,
:func:`range_gold`) are read here too, for them and for the ``range`` step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from frames_dspy.judge.answer_forms import (
    MONTH_NAMES,
    DateMention,
    Quantity,
    fold,
    parse_dates,
    parse_quantities,
)
from frames_dspy.judge.gold_forms import (
    BRACKETED,
    analyse_gold,
    is_multi_part_question,
    question_asks,
    singular,
)
from frames_dspy.judge.words import FUNCTION_WORDS, NAME_TITLES, PLACE_NOUNS, WORD, word_set

__all__ = [
    "MONTHS",
    "Vital",
    "name_runs",
    "norm_word",
    "range_gold",
    "range_quantities",
    "ranges",
    "vital_parts",
]


@dataclass(frozen=True)
class Vital:
    """One part of the gold a correct response must carry.

    Attributes:
        kind: ``number``, ``date``, ``name`` (capitalised words) or ``item`` (a listed thing).
        text: As the gold writes it.
        words: For ``name`` and ``item``, the normalised words.
        quantity: For ``number``.
        date: For ``date``.
        whole_name: For ``name``, the part is the whole gold and the question asks for a person
            ("who", "name"): a given name alone is too little.
        any_of: One of the parts of its kind (number or name) marked so is enough.
    """

    kind: str
    text: str
    words: tuple[str, ...] = ()
    quantity: Quantity | None = None
    date: DateMention | None = None
    whole_name: bool = False
    any_of: bool = False


MONTHS = frozenset(m.casefold().rstrip(".") for m in MONTH_NAMES)
# Capitalised words that are no name of their own.
_NOT_NAMES = FUNCTION_WORDS | NAME_TITLES | PLACE_NOUNS | MONTHS | word_set("i")
# A count followed by what it counts: "3 - red, white, blue", "Two: Oslo and Bergen".
_COUNT_THEN_ITEMS = re.compile(r"^\s*(\w+)\s*(?:[-–—:]|\()\s*(?P<items>.+?)\)?\s*$")
_PERSON_ASKED = re.compile(r"\b(?:who|whom|whose|name)\b", re.IGNORECASE)
_CONNECTORS = word_set("of de la von van der del da du")
# Between the two ends of a range, and before it.
_RANGE_JOIN = re.compile(r"\s*(?:-|–|—|to|and)\s*$", re.IGNORECASE)
_RANGE_FILLER = re.compile(r"^\W*(?:between|from|about|around|roughly|approximately)?\s*$", re.I)


def range_quantities(text: str) -> list[Quantity]:
    """The quantities of ``text``, the first end of a range given the unit of its second.

    "20-30 mm" and "2 to 3 cm" are read as two lengths, not a count and a length.
    """
    text = fold(text)
    found = [
        q for q in parse_quantities(text, skip=[(d.start, d.end) for d in parse_dates(text)])
        if not q.weak
    ]  # fmt: skip
    out = list(found)
    for i in range(len(found) - 1):
        a, b = found[i], found[i + 1]
        if a.unit is None and b.unit and _RANGE_JOIN.match(text[a.end : b.start]):
            out[i] = replace(a, unit=b.unit, scale=a.scale or b.scale)
    return out


def ranges(text: str) -> list[tuple[Quantity, Quantity]]:
    """The ranges of a text ("20-30 mm", "2 to 3 cm"), both ends in the unit written last."""
    found = range_quantities(text)
    folded = fold(text)
    return [
        (a, b)
        for a, b in zip(found, found[1:], strict=False)
        if _RANGE_JOIN.match(folded[a.end : b.start]) and a.unit == b.unit
    ]


def range_gold(gold: str) -> tuple[Quantity, Quantity] | None:
    """The two ends of a gold that is one range with a unit ("20-30 mm (0.8-1.2 in)")."""
    main = re.sub(r"\s*\([^()]*\)", "", fold(gold)).strip(" .")
    found = ranges(main)
    if len(found) != 1 or not found[0][1].unit or len(range_quantities(main)) != 2:
        return None
    low, high = found[0]
    if not _RANGE_FILLER.match(main[: low.start]) or re.search(r"\w", main[high.end :]):
        return None
    return low, high


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=\w\w[.!?])\s+(?=[A-Z])", text.strip()) if s.strip()]


def name_runs(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """Runs of capitalised name words (broken at punctuation): (text, normalised words)."""
    runs: list[list[re.Match]] = [[]]
    end = 0
    for m in WORD.finditer(text):
        word, gap = m.group(), text[end : m.start()]
        end = m.end()
        norm = norm_word(word)
        opens = re.search(r"(?:^|[.!?:])\W*$", text[: m.start()]) is not None
        if re.search(r"[^\s'’-]", gap):
            runs.append([])
        name = word[0].isupper() and not (opens and norm in FUNCTION_WORDS)
        if name and norm not in _NOT_NAMES and not parse_quantities(word):  # "Two", "First"
            runs[-1].append(m)
        elif norm not in _CONNECTORS or not runs[-1]:
            runs.append([])
    out = []
    for run in runs:
        if run := [m for m in run if len(norm_word(m.group())) > 1]:
            words = tuple(norm_word(m.group()) for m in run)
            out.append((text[run[0].start() : run[-1].end()], words))
    return out


def norm_word(word: str) -> str:
    return re.sub(r"['’]s?$", "", word.casefold())


def _items(text: str) -> tuple[tuple[str, ...], ...] | None:
    """The things a count is followed by, when there are two or more short ones."""
    m = _COUNT_THEN_ITEMS.match(text)
    if not m or not parse_quantities(m.group(1)):
        return None
    pieces = [p for p in re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", m.group("items")) if p.strip()]
    words = [
        tuple(w.casefold() for w in WORD.findall(p) if w.casefold() not in FUNCTION_WORDS)
        for p in pieces
    ]
    if len(words) < 2 or any(not w or len(w) > 4 for w in words):
        return None
    return tuple(words)


def _numbers(text: str, question: str, asks: str, both: bool) -> list[Vital]:
    """The gold's numbers and full dates of the kind the question asks for.

    A question asking for two things needs them all; one asking a quantity needs the non-year
    numbers, one asking a year or date the years and dates.
    """
    if range_gold(text):
        return []  # a range has its own rule; a value inside it is not judged here
    asked_numbers = {q.value for q in parse_quantities(question)}
    asked_numbers |= {d.year for d in parse_dates(question) if d.year}
    asked_days = {(d.month, d.day) for d in parse_dates(question)}
    dates = [d for d in parse_dates(text) if d.month and d.day]
    out = [
        Vital("date", text[d.start : d.end], date=d)
        for d in dates
        if (d.month, d.day) not in asked_days and (both or asks != "quantity")
    ]
    years = {d.year for d in dates}
    for q in range_quantities(text):
        inside = any(d.start <= q.start < d.end for d in dates)
        if inside or q.value in asked_numbers or (q.year_like and int(q.value) in years):
            continue
        if both or asks == "unknown" or q.year_like == (asks != "quantity"):
            out.append(Vital("number", text[q.start : q.end], quantity=q))
    return out


def _parts_of(text: str, question: str, every_kind: bool = False) -> list[Vital]:
    """The vital parts of one form of the gold (its main text or a bracketed alias).

    In a gold sentence read for a question that asks one thing, its numbers and its names are
    each alternatives: one of them carried is enough (the others may only describe it).
    """
    asks = question_asks(question)
    both = is_multi_part_question(question)
    form = analyse_gold(text, question)
    polar = form.kind == "yes_no" or re.match(r"^\W*(?:yes|no)\s*[,;:!]", text, re.I)
    if polar and not both:
        return []  # "Yes, London" to a yes/no question: the yes is the answer, London detail
    loose = form.kind == "sentence" and not both
    out: list[Vital] = []
    # A gold that is one quantity or date has its own rules, which know rounding and bounds.
    if (every_kind or form.kind not in ("quantity", "date")) and (
        asks in ("quantity", "year", "date", "unknown") or both
    ):
        out += [replace(v, any_of=loose) for v in _numbers(text, question, asks, both)]
    items = _items(text)
    if items:
        out += [Vital("item", " ".join(w), words=w) for w in items]
    if asks not in ("quantity", "year", "date") or both:
        asked = {norm_word(w) for w in WORD.findall(question)}
        asked |= {singular(w) for w in asked}
        if form.kind in ("list", "name"):
            names = [(p.text, p.main) for p in form.parts]
        else:
            names = [] if items else name_runs(text)
        for name, words in names:
            words = tuple(w for w in words if w.isalpha() and len(w) > 1 and w not in _NOT_NAMES)
            if words and not all(w in asked or singular(w) in asked for w in words):
                lone = form.kind == "name" and _PERSON_ASKED.search(question) is not None
                out.append(Vital("name", name, words=words, whole_name=lone, any_of=loose))
    return out


def vital_parts(question: str, gold: str, *, every_kind: bool = False) -> list[list[Vital]]:
    """The gold's vital parts, one list per form of it (the main text, then bracketed aliases).

    A response carries the gold when it carries every part of one of the lists. The number of
    a gold that is one quantity or date is left out unless ``every_kind``: its own rules
    (the ``quantity`` and ``date`` steps) compare it, rounding and bounds included.
    """
    text = " ".join(re.sub(r"[*_]{1,2}", "", fold(gold)).split()).rstrip(" .;!")
    question = fold(question)
    sentences = _sentences(text)
    if len(sentences) > 1 and not is_multi_part_question(question):
        text = sentences[-1].rstrip(" .;!")  # an explanation ending in its answer
    aliases = [a for a in BRACKETED.findall(text) if WORD.search(a)]
    main = BRACKETED.sub("", text).strip(" ,;")
    forms = [_parts_of(main, question, every_kind)]
    forms += [_parts_of(a, question, every_kind) for a in aliases]
    return [f for f in forms if f] if forms[0] else []
