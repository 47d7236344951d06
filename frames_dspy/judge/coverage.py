"""The gold's vital parts, and whether a response carries them or moves on to another answer.

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

Two FALSE-only rules of :data:`frames_dspy.judge.rules.PIPELINE` read these parts, last, on what
no other rule decided (a small LM judge says TRUE to nearly all of it):

- :func:`uncovered`: a vital part has no trace in the response ("in 2009, 13 years later" for
  "March 3, 2009; 13 years"; "Three colours" for "3 - red, white, blue"; a given name alone for
  a two-word name);
- :func:`moved_on`: the response names the gold, then commits to another answer of the same
  kind in a later clause ("Ada Quill held it first; the record is now held by Bea Lord").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from frames_dspy.judge.answer_forms import (
    MONTH_NAMES,
    DateMention,
    Quantity,
    compare_quantities,
    fold,
    parse_dates,
    parse_quantities,
)
from frames_dspy.judge.gold_forms import (
    analyse_gold,
    is_multi_part_question,
    question_asks,
    singular,
)
from frames_dspy.judge.names import carries_name
from frames_dspy.judge.words import FUNCTION_WORDS, NAME_TITLES, PLACE_NOUNS, word_set

__all__ = [
    "Vital",
    "moved_on",
    "range_gold",
    "range_quantities",
    "ranges",
    "uncovered",
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


_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*|\d+(?:[.,]\d+)*")
_PAREN = re.compile(r"\s*\(([^()]*)\)")
_MONTHS = frozenset(m.casefold().rstrip(".") for m in MONTH_NAMES)
# Capitalised words that are no name of their own.
_NOT_NAMES = FUNCTION_WORDS | NAME_TITLES | PLACE_NOUNS | _MONTHS | word_set("i")
# A count followed by what it counts: "3 - red, white, blue", "Two: Oslo and Bergen".
_COUNT_THEN_ITEMS = re.compile(r"^\s*(\w+)\s*(?:[-–—:]|\()\s*(?P<items>.+?)\)?\s*$")
_PERSON_ASKED = re.compile(r"\b(?:who|whom|whose|name)\b", re.IGNORECASE)
_CONNECTORS = word_set("of de la von van der del da du")
_ROMAN = re.compile(r"m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})")
_NUMERIC_DATE = re.compile(r"\b(\d{1,2})[/.-](\d{1,2})[/.-](\d{2}|\d{4})\b")
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


def _name_runs(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """Runs of capitalised name words (broken at punctuation): (text, normalised words)."""
    runs: list[list[re.Match]] = [[]]
    end = 0
    for m in _WORD.finditer(text):
        word, gap = m.group(), text[end : m.start()]
        end = m.end()
        norm = _norm(word)
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
        if run := [m for m in run if len(_norm(m.group())) > 1]:
            words = tuple(_norm(m.group()) for m in run)
            out.append((text[run[0].start() : run[-1].end()], words))
    return out


def _norm(word: str) -> str:
    return re.sub(r"['’]s?$", "", word.casefold())


def _items(text: str) -> tuple[tuple[str, ...], ...] | None:
    """The things a count is followed by, when there are two or more short ones."""
    m = _COUNT_THEN_ITEMS.match(text)
    if not m or not parse_quantities(m.group(1)):
        return None
    pieces = [p for p in re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", m.group("items")) if p.strip()]
    words = [
        tuple(w.casefold() for w in _WORD.findall(p) if w.casefold() not in FUNCTION_WORDS)
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
        asked = {_norm(w) for w in _WORD.findall(question)}
        asked |= {singular(w) for w in asked}
        if form.kind in ("list", "name"):
            names = [(p.text, p.main) for p in form.parts]
        else:
            names = [] if items else _name_runs(text)
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
    (:mod:`frames_dspy.judge.number_rules`) compare it, rounding and bounds included.
    """
    text = " ".join(re.sub(r"[*_]{1,2}", "", fold(gold)).split()).rstrip(" .;!")
    question = fold(question)
    sentences = _sentences(text)
    if len(sentences) > 1 and not is_multi_part_question(question):
        text = sentences[-1].rstrip(" .;!")  # an explanation ending in its answer
    aliases = [a for a in _PAREN.findall(text) if _WORD.search(a)]
    main = _PAREN.sub("", text).strip(" ,;")
    forms = [_parts_of(main, question, every_kind)]
    forms += [_parts_of(a, question, every_kind) for a in aliases]
    return [f for f in forms if f] if forms[0] else []


# --- does the response carry a part? -------------------------------------------------------


def _carries(vital: Vital, response: str, quantities: list[Quantity]) -> bool:
    if vital.kind == "number":
        relations = {compare_quantities(vital.quantity, q) for q in quantities}
        if relations & {"same", "close"} or "incomparable" in relations and vital.quantity.unit:
            return True  # another unit system ("0.8 in" for "20 mm") is not judged here
        years = {d.year for d in parse_dates(response) if d.year}
        return vital.quantity.year_like and int(vital.quantity.value) in years
    if vital.kind == "date":
        g = vital.date
        months = "|".join(sorted(_MONTHS, key=len, reverse=True))
        capital = re.sub(rf"\b(?:{months})\b", lambda m: m.group().title(), fold(response))
        if any(
            (d.month, d.day) == (g.month, g.day) and (d.year in (None, g.year) or g.year is None)
            for d in parse_dates(capital)  # "october 1" as well as "October 1"
        ):
            return True
        # "03/11/2009", "3.11.09": day and month in either order, not judged here.
        return any(
            {int(a), int(b)} == {g.month, g.day} and (g.year is None or str(g.year).endswith(y))
            for a, b, y in _NUMERIC_DATE.findall(response)
        )
    words = [_norm(w) for w in _WORD.findall(fold(response))]
    if vital.kind == "item":
        said = {singular(w) for w in words}
        return any(singular(w) in said for w in vital.words)
    if not carries_name(vital.words, vital.text, response):
        return False
    plain = [w for w in vital.words if len(w) >= 3 and not _ROMAN.fullmatch(w)]
    if vital.whole_name and 2 <= len(plain) <= 3 and len(plain) == len(vital.words):
        # "Ada" for "Ada Quill": a given name alone does not name the person.
        first, last = plain[0], plain[-1]
        return not (carries_name((first,), first, response)
                    and not carries_name((last,), last, response))  # fmt: skip
    return True


def uncovered(question: str, gold: str, response: str) -> list[str] | None:
    """The gold's vital parts the response leaves out (of its best-covered form), or None.

    None when the gold has no vital part this reads, or the response carries every part of
    one of the gold's forms.
    """
    forms = vital_parts(question, gold)
    if not forms:
        return None
    quantities = range_quantities(response)
    missing = []
    for form in forms:
        lost = [v for v in form if not _carries(v, response, quantities)]
        for kind in ("number", "date", "name"):
            loose = [v for v in form if v.any_of and v.kind == kind]
            if loose and any(v not in lost for v in loose):
                lost = [v for v in lost if v not in loose]
        missing.append([v.text for v in lost])
    best = min(missing, key=len)
    return best or None


# --- a gold named on the way to another answer ---------------------------------------------

_LATER_CLAUSE = re.compile(r"[;.!?]\s+|,\s+(?:but|while|whereas|and)\s+|\s+but\s+", re.I)
_COMMITS = re.compile(
    r"(?P<subject>[^,;:]*?)\b(?:is|was|were|are|would be|would have been|became|remains|"
    r"remained)\s+(?:actually\s+|really\s+|in fact\s+|instead\s+|now\s+)?(?:about\s+|around\s+|"
    r"roughly\s+|approximately\s+)?(?:the\s+)?(?P<answer>(?:[^,;:.!?]|[.,](?=\d))*)",
    re.IGNORECASE,
)
_PRONOUNS = word_set("it this that he she they which what answer")


def _mentions(vitals: list[Vital], response: str, quantities: list[Quantity]) -> list[int]:
    """Where the response names a vital part of the gold (character offsets, folded text)."""
    text = fold(response)
    ends = []
    for v in vitals:
        if v.kind == "number":
            ends += [
                q.end for q in quantities
                if compare_quantities(v.quantity, q) in ("same", "close")
            ]  # fmt: skip
        elif v.kind == "name":
            for w in v.words:
                ends += [m.end() for m in re.finditer(rf"\b{re.escape(w)}\b", text, re.I)]
    return sorted(ends)


def _subject_asked(subject: str, question: str) -> bool:
    words = {w.casefold() for w in _WORD.findall(subject)} - FUNCTION_WORDS
    words = {w for w in words if not w[0].isdigit()}
    if not words or words <= _PRONOUNS:
        return True
    asked = {w.casefold()[:5] for w in _WORD.findall(question)}
    return any(w[:5] in asked for w in words)


def _another(answer: str, vitals: list[Vital], question: str) -> str | None:
    """The answer a commitment gives, when it is another one of the gold's kind."""
    numbers = [v for v in vitals if v.kind == "number"]
    names = [v for v in vitals if v.kind == "name"]
    if numbers:
        found = range_quantities(answer)
        if not found or found[0].start > 2 or found[0].year_like != numbers[0].quantity.year_like:
            return None
        relations = {compare_quantities(v.quantity, found[0]) for v in numbers}
        gold, said = numbers[0].quantity.value, found[0].value
        near = gold > 0 and said > 0 and 0.5 <= said / gold <= 2  # a rival, not a step's figure
        return answer[: found[0].end] if relations == {"different"} and near else None
    if names and (runs := _name_runs(answer)):
        text, words = runs[0]
        if not answer.startswith(text.split()[0]) or fold(question).find(text) >= 0:
            return None
        if any(carries_name(v.words, v.text, answer) for v in names):
            return None
        return text if all(w not in FUNCTION_WORDS for w in words) else None
    return None


def moved_on(question: str, gold: str, response: str) -> tuple[str, str] | None:
    """(what the response commits to, where) when it names the gold and then another answer.

    The other answer must follow the gold's last mention in a later clause or sentence, after
    "is"/"was" with a subject that is a pronoun or names what the question asks about ("...;
    the capital was X", "...; in 2016 it was X"), and be of the gold's kind: another number of
    the same unit and scale, or a name with no word of the gold's.
    """
    forms = vital_parts(question, gold, every_kind=True)
    if len(forms) != 1:
        return None
    vitals = [v for v in forms[0] if v.kind in ("number", "name")]
    if not vitals or len({v.kind for v in vitals}) != 1:
        return None
    text = fold(response)
    quantities = range_quantities(text)
    ends = _mentions(vitals, text, quantities)
    if not ends:
        return None
    rest = text[ends[-1] :]
    breaks = list(_LATER_CLAUSE.finditer(rest))
    if not breaks:
        return None
    clause_start = max((b.end() for b in _LATER_CLAUSE.finditer(text[: ends[-1]])), default=0)
    gold_clause = text[clause_start : ends[-1] + breaks[0].start()]
    later = rest[breaks[0].end() :]
    for m in _COMMITS.finditer(later):
        if not _subject_asked(m.group("subject"), question):
            continue
        other = _another(m.group("answer").strip(), vitals, question)
        lead = breaks[0].group() + later[m.start() : m.start("answer")]
        if other and _anchored(gold_clause, lead, question):
            return other, m.group().strip()
    return None


_CORRECTS = re.compile(
    r"\b(?:actually|instead|in fact|but|however|rather|really|no longer|stopped|ceased|not)\b|"
    r"n't\b",
    re.IGNORECASE,
)
_OTHER_TIME = re.compile(
    r"\b(?:later|earlier|previously|formerly|before|after|until|since|then|once|originally|"
    r"first|next|last)\b",
    re.IGNORECASE,
)


def _anchored(gold_clause: str, commitment: str, question: str) -> bool:
    """Whether the later commitment (up to its answer) answers the question in place of the gold.

    It does when the response corrects itself ("had stopped being ...; the capital was X",
    "actually") or names its answer ("...; the answer is X"), when the later clause repeats
    the role the gold's clause gave ("... the capital ...; the capital was X"), or when it
    names the question's own condition (a year, a number) the gold's clause does not ("X in
    the 2011 census; in 2016 it was Y"). It does not when it moves to another time the
    question does not name ("later", "in 1990").
    """
    if _CORRECTS.search(gold_clause) or _CORRECTS.search(commitment):
        return True
    asked = {_norm(w) for w in _WORD.findall(question)}
    said = {_norm(w) for w in _WORD.findall(commitment)}
    numbers = {w for w in said if w[0].isdigit()}
    if _OTHER_TIME.search(commitment) or numbers - asked:
        return False
    before = {_norm(w) for w in _WORD.findall(gold_clause)}
    subject = _COMMITS.search(commitment)
    if subject and re.search(r"\banswer\b", subject.group("subject"), re.IGNORECASE):
        return True  # "...; the answer is X": said outright
    role = {_norm(w) for w in _WORD.findall(subject.group("subject"))} if subject else set()
    if (role - FUNCTION_WORDS - _PRONOUNS) & before:
        return True
    return bool((numbers & asked) - before)  # the question's year, not the gold clause's
