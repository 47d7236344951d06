"""What a FRAMES gold answer asks for: a yes/no, a date, a quantity, a list of parts or a name.

FRAMES gold answers come in many shapes ("Two million.", "This was Lena Marsh.", "Tom Avery was
born on March 3rd, 1958.", "Naruto Uzumaki, Minato Namikaze and Jiraiya.", "Prague, Czech
Republic", "Yes, London"). :func:`analyse_gold` reads one, with its question, into a
:class:`GoldForm` that the rules in :mod:`frames_dspy.judge.rules` can compare a response with. It
extracts a core answer only where that is safe; otherwise the form is ``"sentence"`` and only
the rules that need no core (empty, refusal, hedge) apply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from frames_dspy.judge.answer_forms import (
    DateMention,
    Quantity,
    fold,
    parse_dates,
    parse_quantities,
)
from frames_dspy.judge.place_names import is_place_name
from frames_dspy.judge.words import ARTICLES, FUNCTION_WORDS, word_set

__all__ = [
    "BRACKETED",
    "GoldForm",
    "Part",
    "Token",
    "analyse_gold",
    "is_multi_part_question",
    "norm_tokens",
    "question_asks",
    "same_words",
    "singular",
    "tokens",
    "word_set",
]

# Currency signs are words here, so "$559.8 million" is not "£559.8 million".
_TOKEN = re.compile(r"[A-Za-z]+|\d+(?:[.,]\d+)*|[$£€¥]")


@dataclass(frozen=True)
class Token:
    """A word or number of a folded text: its normal form and where it is."""

    norm: str
    start: int
    end: int
    text: str


def tokens(text: str) -> list[Token]:
    """Words and numbers of an already folded text, lower-cased, articles dropped.

    Thousands separators are removed from numbers so "84,512" and "84512" are one token.
    """
    out = []
    for m in _TOKEN.finditer(text):
        norm = m.group().casefold()
        if norm in ARTICLES:
            continue
        if norm[0].isdigit():
            norm = norm.replace(",", "")
        out.append(Token(norm, m.start(), m.end(), m.group()))
    return out


def norm_tokens(text: str) -> tuple[str, ...]:
    """The normal forms of the words of ``text`` (folded here)."""
    return tuple(t.norm for t in tokens(fold(text)))


def singular(word: str) -> str:
    """A normalised word without a plural ending: "pears" -> "pear", "berries" -> "berry".

    Only regular endings, and only on words of four letters or more ("bus" and "gas" stay);
    "ss" is no plural ("Ross"). Numbers are left as they are.
    """
    if len(word) < 4 or word[0].isdigit() or word.endswith("ss"):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if re.search(r"(?:ch|sh|x|z|ss)es$", word):
        return word[:-2]
    return word[:-1] if word.endswith("s") else word


def same_words(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether two word sequences are the same words, up to regular plural endings."""
    return len(a) == len(b) and all(
        x == y or singular(x) == singular(y) for x, y in zip(a, b, strict=True)
    )


@dataclass(frozen=True)
class Part:
    """One name a response must give: its words, and qualifiers it may add or leave out.

    ``main`` of "Prague, Czech Republic" is ("prague",) and its qualifier ("czech", "republic").
    """

    main: tuple[str, ...]
    qualifiers: tuple[tuple[str, ...], ...] = ()
    text: str = ""


@dataclass(frozen=True)
class GoldForm:
    """A gold answer read for the rules.

    Attributes:
        kind: ``"yes_no"``, ``"date"``, ``"quantity"``, ``"list"``, ``"name"`` (one short
            answer, possibly extracted from a sentence) or ``"sentence"`` (no safe core).
        text: The folded gold answer.
        parts: For ``name``, one part; for ``list``, two or more. A ``yes_no`` gold may carry
            the name after it ("Yes, London") as a part.
        quantity: For ``quantity``, the gold quantity.
        is_year: For ``quantity``, whether it is a year.
        date: For ``date``, a date with at least a month and a day.
        polarity: For ``yes_no``, "yes" or "no".
        explained: For ``yes_no``, whether the text after the yes/no only explains it.
        has_or: The gold itself says "or" ("13/3 or 4.333"), so "X or Y" in a response is no
            sign of a hedge.
    """

    kind: str
    text: str
    parts: tuple[Part, ...] = ()
    quantity: Quantity | None = None
    is_year: bool = False
    date: DateMention | None = None
    polarity: str | None = None
    explained: bool = False
    has_or: bool = False


# --- the question ----------------------------------------------------------------------------

_WH = re.compile(
    r"\b(?P<how>how\s+(?:many|much|long|old|far|tall|high|big|large|wide|deep|heavy|fast|"
    r"often|late|early|soon))\b|\b(?P<when>when)\b|\b(?P<what>what|which)\b(?P<rest>[^?.,;]*)"
    r"|\b(?P<who>who|whom|whose|where)\b",
    re.IGNORECASE,
)
# A wh-word opening a sentence ("In what year ...") asks; one after a noun ("the person who
# played") or a comma (", which was later adapted") more often relates, so it counts last.
_SENTENCE_START = re.compile(
    r"(?:^|[.;:?!]\s+)(?:(?:in|on|at|by|during|for|from|of|to|until|since)\s+)?$", re.IGNORECASE
)
_CLAUSE_START = re.compile(r"(?:[,]\s*)(?:(?:in|on|at|by|during|of)\s+)?$", re.IGNORECASE)
_QUANTITY_NOUNS = word_set(
    "number population difference total sum average percentage percent distance height length "
    "age amount price cost speed area size ratio temperature weight mass"
)


def question_asks(question: str) -> str:
    """What the question's main wh-phrase asks for.

    The main wh-phrase is the first one that opens a sentence; failing that the first "how
    many/much/old..." phrase; then the first after a comma; then the first wh-word at all.

    Returns:
        ``"quantity"`` (how many/much/old..., what is the population...), ``"year"`` (what
        year, the birth year), ``"date"`` (when, what day, the birthday), ``"entity"`` (who,
        which, what else) or ``"unknown"`` (no wh-word, e.g. a yes/no question).
    """
    question = fold(question)
    found = list(_WH.finditer(question))
    if not found:
        return "unknown"
    opening = [m for m in found if _SENTENCE_START.search(question[: m.start()])]
    after_comma = [m for m in found if _CLAUSE_START.search(question[: m.start()])]
    how = [m for m in found if m.group("how")]
    m = (opening or how or after_comma or found)[0]
    if m.group("how"):
        return "quantity"
    if m.group("when"):
        return "date"
    if m.group("what"):
        for word in re.findall(r"[a-z]+", m.group("rest").casefold())[:6]:
            if word == "year":
                return "year"
            if word in ("date", "day", "birthday"):
                return "date"
            if word in _QUANTITY_NOUNS:
                return "quantity"
        return "entity"
    return "entity"


_MULTI_PART_QUESTION = re.compile(
    r"\b(?:and|also|as well as)\s+(?:by\s+)?(?:what|which|who|whom|when|where|how|name|list|"
    r"in what|in which)\b|\bif so\b|\bif yes\b|\bif not\b|\binclude\b|\?.*\?",
    re.IGNORECASE | re.DOTALL,
)


def is_multi_part_question(question: str) -> bool:
    """Whether the question asks for two things ("Who ... and how many ...?")."""
    return bool(_MULTI_PART_QUESTION.search(fold(question)))


# --- the gold answer -------------------------------------------------------------------------

_FRAME = re.compile(
    r"^(?:(?:this|it|that|he|she|they)\s+(?:was|is|were|are)|the answer is|answer:)\s+",
    re.IGNORECASE,
)
_YES_NO = re.compile(r"^(yes|no)\b(?!\s+one\b)(?![.,]?\s*\d)[\s,.;:!-]*(.*)$", re.IGNORECASE | re.S)
_RELATIVE = re.compile(r"^([^,]{1,60}),\s+(?:who|whose|whom|which|where)\b", re.IGNORECASE)
#: A bracketed aside, with the space before it; group 1 is what the brackets hold.
BRACKETED = re.compile(r"\s*\(([^()]*)\)")
_OPTIONAL_PAREN = re.compile(
    r"^\s*(?:\d{4}|(?:also|briefly|formerly|often|sometimes)?\s*(?:known as|called)\b.*|"
    r"or\b.*|a\.?k\.?a\.?\b.*)\s*$",
    re.IGNORECASE,
)


# Words that make a short gold a statement rather than a name ("Mendelevium is named after ...").
_FINITE_VERBS = word_set(
    "is was are were be been has had have will would did does do became becomes won scored "
    "played born died named called went made got took lived served held"
)
# Words around a number that do not change what the answer is ("2,851 passengers", "5 more").
_QUANTITY_FILLER = word_set(
    "old more less fewer times larger smaller younger older longer shorter higher lower bigger "
    "number no approximately about around roughly total increase decrease difference of in "
    "and per ppg points goals km long"
)


def _strip(text: str) -> str:
    text = re.sub(r"[*_]{1,2}", "", fold(text)).strip()
    text = re.sub(r"^[-\u2022]\s+", "", text)
    text = " ".join(text.split())
    text = re.sub(r"^[\"']+(.*?)[\"']+$", r"\1", text)
    return text.rstrip(" .;!")


def _sentence_like(text: str) -> bool:
    words = [t.norm for t in tokens(text)]
    return len(words) > 8 or any(w in _FINITE_VERBS for w in words)


def _part(text: str) -> Part | None:
    """A name with its optional qualifiers: a year or alias in brackets, a trailing place."""
    text = text.strip(" ,;.")
    qualifiers = []
    for inner in BRACKETED.findall(text):
        if not _OPTIONAL_PAREN.match(inner) and not is_place_name(inner):
            return None
        qualifiers.append(norm_tokens(re.sub(r"^(?:or|a\.?k\.?a\.?)\s+", "", inner, flags=re.I)))
    main = BRACKETED.sub("", text).strip(" ,")
    pieces = [p.strip() for p in main.split(",")]
    while len(pieces) > 1 and is_place_name(pieces[-1]):
        qualifiers.append(norm_tokens(pieces.pop()))
    if len(pieces) > 1:
        return None
    words = norm_tokens(pieces[0])
    return Part(words, tuple(q for q in qualifiers if q), pieces[0]) if words else None


def _list_parts(text: str) -> tuple[Part, ...] | None:
    """The parts of "A, B and C" when each part is a short name; None if not such a list."""
    if any(not re.fullmatch(r"\s*\d{4}\s*", inner) for inner in BRACKETED.findall(text)):
        return None  # only a year in brackets ("Starman (1984)") keeps a part a plain name
    # A list is one phrase: no sentence break, no dash ("Skeeter Newsome - Philadelphia ...").
    if (
        not re.search(r",|\band\b|&", text)
        or is_place_name(text)
        or re.search(r"\w\w\.\s| - ", text)
    ):
        return None
    # "&" joins names ("Kool & the Gang") unless the gold is a comma list ("A, B, & C").
    joiner = r"\s+(?:and|&)\s+" if "," in text else r"\s+and\s+"
    raw = [p for p in re.split(rf"\s*,\s*(?:and\s+|&\s+)?|{joiner}", text) if p.strip()]
    comma_only = not re.search(joiner, text) and not re.search(r",\s*(?:and|&)\s", text)
    # "Sydney, Australia, and Athens, Greece": a place after a comma locates the part before.
    merged: list[str] = []
    for piece in raw:
        if merged and is_place_name(piece) and not is_place_name(merged[-1].split(",")[0]):
            merged[-1] += ", " + piece
        else:
            merged.append(piece)
    # Two comma parts without "and" are as often a name and its context ("Edward Heath,
    # September 1970") as a list; from three on they are a list.
    if len(merged) < (3 if comma_only else 2) or len(merged) > 12:
        return None
    parts = []
    for piece in merged:
        part = _part(piece)
        # Each part must be a name ("Dromore Cathedral") or start with a digit; "Breast and
        # skin" or "Egg and tomato" is one answer, not two names.
        if part is None or len(part.main) > 6 or not re.match(r"[A-Z0-9]", piece.strip()):
            return None
        parts.append(part)
    return tuple(parts)


def _novel_span(gold: str, question: str) -> str | None:
    """The one run of capitalised words in a gold sentence that its question does not contain.

    "Rosa Quint scored 14 goals in the 1998-1999 ... season" for "Which player scored 14
    goals ...?" gives "Rosa Quint". Any other new content word makes it unsafe (None).
    """
    asked = {t.norm for t in tokens(fold(question))}
    asked |= {w.rstrip("s") for w in asked}
    toks = tokens(gold)
    novel = [
        t.norm not in asked and t.norm.rstrip("s") not in asked and t.norm not in FUNCTION_WORDS
        for t in toks
    ]
    spans: list[list[Token]] = []
    for i, tok in enumerate(toks):
        if not novel[i]:
            continue
        if not (tok.text[0].isupper() or tok.text[0].isdigit()):
            return None  # a new lower-case word: the sentence says more than one name
        joined = spans and spans[-1][-1] is toks[i - 1] if i else False
        connector = (
            i >= 2 and spans and spans[-1][-1] is toks[i - 2]
            and toks[i - 1].norm in ("of", "de", "la", "von", "van", "der", "del", "da", "du")
        )  # fmt: skip
        if joined:
            spans[-1].append(tok)
        elif connector:
            spans[-1] += [toks[i - 1], tok]
        else:
            spans.append([tok])
    if len(spans) != 1 or len(spans[0]) > 6:
        return None
    return gold[spans[0][0].start : spans[0][-1].end]


def _quantity_gold(core: str, question: str) -> tuple[Quantity, bool] | None:
    """The gold quantity and whether it is a year, or None if the gold is not one quantity."""
    dates = parse_dates(core)
    found = [
        q for q in parse_quantities(core, skip=[(d.start, d.end) for d in dates]) if not q.weak
    ]
    if not found or BRACKETED.search(core):
        return None
    asks = question_asks(question)
    if len(found) == 1 and not dates:
        q = found[0]
        rest = core[: q.start] + " " + core[q.end :]
        words = [t for t in tokens(rest) if t.norm not in _QUANTITY_FILLER]
        if len(words) <= 1 and "," not in rest:
            return q, q.year_like and asks != "quantity"
    # A sentence around one new number ("Akira Toriyama was 52.") answers a quantity question;
    # a list around one ("3, Russia, Nicaragua, and Syria.") may be a second required part.
    if (
        asks not in ("quantity", "year", "date")
        or not _sentence_like(core)
        or is_multi_part_question(question)
    ):
        return None
    is_year = asks != "quantity"
    asked = {q.value for q in parse_quantities(question)}
    new = [q for q in found if q.value not in asked and not (q.year_like and not is_year)]
    if len({(q.value, q.unit) for q in new}) != 1:
        return None
    return new[0], new[0].year_like and is_year


def analyse_gold(gold: str, question: str = "") -> GoldForm:
    """Read a gold answer (with its question) into the form the rules compare against.

    Args:
        gold: The FRAMES ``Answer`` text, verbatim.
        question: The FRAMES ``Prompt``; it tells a year from a count and which words of a
            gold sentence merely repeat the question.

    Returns:
        A :class:`GoldForm`; its ``kind`` is ``"sentence"`` when no core answer is safe to use.
    """
    text = _strip(gold)
    question = fold(question)
    has_or = bool(re.search(r"\bor\b", text, re.IGNORECASE))
    if m := _YES_NO.match(text):
        rest = m.group(2).strip()
        part = _part(rest) if rest and not _sentence_like(rest) else None
        explained = bool(rest) and part is None and not is_multi_part_question(question)
        return GoldForm(
            "yes_no",
            text,
            parts=(part,) if part else (),
            polarity=m.group(1).casefold(),
            explained=explained or not rest,
        )
    core = _FRAME.sub("", text).strip()
    dates = [d for d in parse_dates(core) if d.month and (d.day or d.year)]
    if len(dates) == 1 and dates[0].day:
        d = dates[0]
        rest = core[: d.start] + core[d.end :]
        asked = {t.norm for t in tokens(question)}
        extra = [t for t in tokens(rest) if t.norm not in asked and t.norm not in FUNCTION_WORDS]
        asks_date = question_asks(question) == "date"
        if not extra or (asks_date and not is_multi_part_question(question)):
            return GoldForm("date", text, date=d, has_or=has_or)
    if (found := _quantity_gold(core, question)) is not None:
        return GoldForm("quantity", text, quantity=found[0], is_year=found[1], has_or=has_or)
    if not any(t.norm in _FINITE_VERBS for t in tokens(core)) and (parts := _list_parts(core)):
        return GoldForm("list", text, parts=parts, has_or=has_or)
    # "St. Aldric II, whose Latin name was Aldricus": the clause only describes the name.
    if (
        (m := _RELATIVE.match(core))
        and not _sentence_like(m.group(1))
        and (part := _part(m.group(1)))
    ):
        return GoldForm("name", text, parts=(part,), has_or=has_or)
    if not _sentence_like(core):
        if (part := _part(core)) is not None and len(part.main) <= 8:
            return GoldForm("name", text, parts=(part,), has_or=has_or)
        return GoldForm("sentence", text, has_or=has_or)
    if (
        question_asks(question) == "entity"
        and not re.search(r"\bor\b", question)
        and not is_multi_part_question(question)
        and (span := _novel_span(core, question))
        and (part := _part(span))
    ):
        return GoldForm("name", text, parts=(part,), has_or=has_or)
    return GoldForm("sentence", text, has_or=has_or)
