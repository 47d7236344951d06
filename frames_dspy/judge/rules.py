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
from collections.abc import Callable
from dataclasses import dataclass

from frames_dspy.judge.answer_forms import (
    compare_quantities,
    fold,
    parse_dates,
)
from frames_dspy.judge.coverage import moved_on, range_gold, uncovered
from frames_dspy.judge.gold_forms import (
    GoldForm,
    Part,
    analyse_gold,
    norm_tokens,
    same_words,
    tokens,
)
from frames_dspy.judge.mentions import (
    CONTRAST,
    FUNCTION_WORDS,
    HEDGE_WORDS,
    Mention,
    Response,
    find_mentions,
    hedge,
    listed,
    position,
    refusal,
    stated,
)
from frames_dspy.judge.names import names_another, same_name_word
from frames_dspy.judge.number_rules import (
    candidates,
    decide_date,
    decide_quantity,
    decide_range,
)
from frames_dspy.judge.place_names import is_place_name
from frames_dspy.judge.verdict import RuleVerdict
from frames_dspy.judge.words import NAME_TITLES

__all__ = ["Case", "PIPELINE", "RULES", "Rule", "RuleVerdict", "WHOLE_RESPONSE_RULES", "decide"]


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
    "other_option": 'FALSE: a multiple-choice gold ("A) ...") answered with another option',
    "no_quantity": "FALSE: a count or measure answered with no number, or with years only",
    "different_name": "FALSE: the gold names someone or something and the response carries no "
    "form of that name (no word of it, another spelling, nor its initials)",
    "moved_on": "FALSE: the response names the gold, then commits to another answer of its kind",
    "uncovered": "FALSE: a vital part of the gold (a number, full date, name or listed item the "
    "question asks for) has no trace in the response",
}

#: Rules that read the whole response for the gold's vital parts; a span the LM extracted from
#: it may leave out what the response says elsewhere, so they do not judge an extraction.
WHOLE_RESPONSE_RULES = frozenset({"moved_on", "uncovered"})

# --- response-wide rules ---------------------------------------------------------------------


def _refusal(resp: Response, present: bool) -> RuleVerdict | None:
    if present or (phrase := refusal(resp)) is None:
        return None
    return RuleVerdict(False, "refusal", f"the response declines to answer ({phrase!r})")


def _hedge(form: GoldForm, resp: Response, question: str) -> RuleVerdict | None:
    if form.has_or or (why := hedge(resp, question)) is None:
        return None  # a gold that itself reads "A or B" makes "or" no sign of a hedge
    return RuleVerdict(False, "hedge", f"the response does not commit: {why}")


_OPTION = r"\(?([A-Ha-h])[).:](?=[\s:,]|$)"
_GOLD_OPTION = re.compile(rf"^\s*{_OPTION}")
_RESPONSE_OPTION = re.compile(
    rf"^\W*(?:(?:the\s+)?(?:correct\s+|final\s+)?(?:answer|option)(?:\s+is)?\s*:?\s*)?{_OPTION}",
    re.IGNORECASE,
)


def _other_option(gold: str, resp: Response) -> RuleVerdict | None:
    """A gold that is a lettered option ("A) ...") answered by opening with another letter."""
    g, r = _GOLD_OPTION.match(fold(gold)), _RESPONSE_OPTION.match(resp.text)
    if not g or not r or g.group(1).casefold() == r.group(1).casefold():
        return None
    why = f"the gold is option {g.group(1)}; the response chooses {r.group(1)}"
    return RuleVerdict(False, "other_option", why)


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
    """The words name the part, with or without a qualifier, up to plural endings."""
    return same_words(words, part.main) or any(
        same_words(words, part.main + q) for q in part.qualifiers
    )


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


def _name_forms(core: tuple[str, ...], part: Part, question: str) -> RuleVerdict | None:
    """A response that is only a name, read against the gold's name word by word.

    TRUE when every word is the gold's in another spelling ("Dostoyevsky" for "Dostoevsky"),
    or when it is the last word of a two- or three-word name and the question asks who (a
    surname for a full name). FALSE (``different_name``) when it is as long as the gold's name,
    keeps some of its words and swaps others ("Ada Quill Brand" for "Ada Maria Brand"): each
    swapped word is five letters or more (not a nickname), begins with another letter, and is
    no title ("Pope" for "St.") and no number (their own rule).
    """
    gold = part.main
    if not core or len(core) > 6 or any(w in FUNCTION_WORDS for w in core if w not in gold):
        return None
    if len(core) == len(gold):
        pairs = [(a, b) for a, b in zip(core, gold, strict=True) if a != b]
        if pairs and all(same_name_word(b, a) for a, b in pairs):
            why = f"the response is {part.text!r} in another spelling"
            return RuleVerdict(True, "stated_answer", why)
        if (
            pairs
            and len(pairs) < len(gold)
            and all(
                min(len(a), len(b)) >= 5
                and a[0] != b[0]
                and not (a in NAME_TITLES or b in NAME_TITLES)
                and _numeral(a) is None
                and _numeral(b) is None
                for a, b in pairs
            )
        ):
            said = " ".join(a for a, _ in pairs)
            why = f"the response puts {said!r} in place of part of {part.text!r}"
            return RuleVerdict(False, "different_name", why)
    if _shortened(core, gold):
        why = f"the response is {part.text!r} with middle words left out"
        return RuleVerdict(True, "stated_answer", why)
    asks_who = re.search(r"\b(?:who|whom|whose)\b", question, re.IGNORECASE)
    if (
        asks_who
        and len(core) == 1
        and 2 <= len(gold) <= 3
        and len(core[0]) >= 4
        and core[0] == gold[-1]
    ):
        return RuleVerdict(
            True, "stated_answer", f"the response gives the surname of {part.text!r}"
        )
    return None


def _shortened(core: tuple[str, ...], gold: tuple[str, ...]) -> bool:
    """The gold's name with middle words left out, its first and last kept ("Ada Quill" for
    "Ada Maria Quill", "Sherman Act" for "Sherman Antitrust Act"); no number is left out."""
    if not 2 <= len(core) < len(gold) or core[0] != gold[0] or core[-1] != gold[-1]:
        return False
    if _numeral(gold[-1]) is not None:
        return False  # "John II" for "John Paul II" is another person of that number
    middle = list(gold[1:-1])
    for word in core[1:-1]:  # the kept middle words, in order
        if word not in middle:
            return False
        middle = middle[middle.index(word) + 1 :]
    dropped = [w for w in gold[1:-1] if w not in core]
    return not any(_numeral(w) is not None for w in dropped)


def _decide_name(form: GoldForm, resp: Response, question: str) -> RuleVerdict | None:
    part = form.parts[0]
    core = norm_tokens(_strip_frame(resp.text))
    if _matches_part(core, part):
        return RuleVerdict(True, "stated_answer", f"the response is the gold's core {part.text!r}")
    if verdict := _name_forms(core, part, question):
        return verdict
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


def _present(form: GoldForm, resp: Response, question: str) -> bool:
    """Whether the response names the gold answer anywhere (a refusal then is no refusal)."""
    if form.kind in ("name", "list"):
        return any(find_mentions(resp, p.main) for p in form.parts)
    if form.kind == "quantity":
        found = candidates(form, resp, question)
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


@dataclass(frozen=True)
class Case:
    """One item as the rules read it: the folded question, the gold verbatim and as a
    :class:`~frames_dspy.judge.gold_forms.GoldForm`, and the response."""

    question: str
    gold: str
    form: GoldForm
    resp: Response


@dataclass(frozen=True)
class Rule:
    """One step of the pipeline: its name, what it decides, when it applies, and the check.

    Attributes:
        name: The step's name (the verdict's ``rule`` is one of ``verdicts``).
        decides: What it decides, in one line (for docs and tables).
        verdicts: The rule names its verdicts carry (see :data:`RULES`).
        guard: Whether the step applies to a case at all; None: always.
        check: The verdict, or None to leave the case to the next step.
    """

    name: str
    decides: str
    verdicts: tuple[str, ...]
    check: Callable[[Case], RuleVerdict | None]
    guard: Callable[[Case], bool] | None = None

    def __call__(self, case: Case) -> RuleVerdict | None:
        if self.guard is not None and not self.guard(case):
            return None
        return self.check(case)


def _exact(case: Case) -> RuleVerdict | None:
    resp, form = case.resp, case.form
    if norm_tokens(resp.text) == norm_tokens(case.gold) or norm_tokens(
        _strip_frame(resp.text)
    ) == norm_tokens(_strip_frame(form.text)):
        return RuleVerdict(True, "exact", "the response is the gold answer after normalisation")
    return None


def _number_in_name(case: Case) -> RuleVerdict | None:
    main = norm_tokens(re.sub(r"\([^)]*\)", " ", _strip_frame(case.form.text)))
    if _number_changed(norm_tokens(_strip_frame(case.resp.text)), main):
        why = "the response is the gold with another number"
        return RuleVerdict(False, "different_number", why)
    return None


def _different_name(case: Case) -> RuleVerdict | None:
    if names := names_another(case.question, case.gold, case.resp.raw):
        return RuleVerdict(False, "different_name", f"the response names no form of {names!r}")
    return None


def _moved_on(case: Case) -> RuleVerdict | None:
    if found := moved_on(case.question, case.gold, case.resp.raw):
        other, where = found
        why = f"the response names the gold on the way, then commits to {other!r} ({where!r})"
        return RuleVerdict(False, "moved_on", why)
    return None


def _uncovered(case: Case) -> RuleVerdict | None:
    if missing := uncovered(case.question, case.gold, case.resp.raw):
        return RuleVerdict(False, "uncovered", f"the response leaves out {missing}")
    return None


def _of_kind(*kinds: str) -> Callable[[Case], bool]:
    return lambda case: case.form.kind in kinds


def _by_form(decider: Callable[[GoldForm, Response, str], RuleVerdict | None]):
    return lambda case: decider(case.form, case.resp, case.question)


#: The rules in the order they are tried; the first verdict wins.
PIPELINE: tuple[Rule, ...] = (
    Rule(
        "refusal",
        "the response declines and names no form of the gold",
        ("refusal",),
        lambda c: _refusal(c.resp, _present(c.form, c.resp, c.question)),
    ),
    Rule(
        "other_option",
        "a lettered-option gold answered with another letter",
        ("other_option",),
        lambda c: _other_option(c.gold, c.resp),
    ),
    Rule("exact", "the gold (or its core) after normalisation", ("exact",), _exact),
    Rule(
        "hedge",
        "two or more candidates, no commitment (not when the gold itself says 'or')",
        ("hedge",),
        lambda c: _hedge(c.form, c.resp, c.question),
        guard=lambda c: not c.form.has_or,
    ),
    Rule(
        "number_in_name",
        "the gold's name with another number in it",
        ("different_number",),
        _number_in_name,
        guard=lambda c: c.form.kind not in ("quantity", "date"),  # their own rules decide
    ),
    Rule(
        "range",
        "a range gold: the same range in any unit of its kind, or its digits in another unit",
        ("same_quantity", "unit_or_scale_mismatch"),
        lambda c: decide_range(c.gold, c.resp),
        guard=lambda c: range_gold(c.gold) is not None,
    ),
    Rule(
        "list",
        "every part of a list gold, or only some of them",
        ("stated_answer", "partial"),
        _by_form(_decide_list),
        guard=_of_kind("list"),
    ),
    Rule(
        "name",
        "a name gold stated, spelled otherwise, swapped, rejected or offered as one option",
        ("stated_answer", "different_name", "different_number", "rejected_option", "hedge"),
        _by_form(_decide_name),
        guard=_of_kind("name"),
    ),
    Rule(
        "yes_no",
        "a yes/no gold answered alike or with the opposite word",
        ("stated_answer", "opposite_yes_no"),
        _by_form(_decide_yes_no),
        guard=_of_kind("yes_no"),
    ),
    Rule(
        "quantity",
        "a number gold: the same value, another one, another unit or scale, or none",
        (
            "same_quantity",
            "different_number",
            "unit_or_scale_mismatch",
            "rejected_option",
            "no_quantity",
        ),
        _by_form(decide_quantity),
        guard=_of_kind("quantity"),
    ),  # fmt: skip
    Rule(
        "date",
        "a date gold: the same date, another one, or a year or month only",
        ("same_date", "different_date", "year_for_full_date"),
        _by_form(decide_date),
        guard=_of_kind("date"),
    ),
    Rule(
        "different_name",
        "the gold names someone or something the response has no form of",
        ("different_name",),
        _different_name,
    ),
    Rule(
        "moved_on",
        "the gold named on the way, then another answer of its kind committed to",
        ("moved_on",),
        _moved_on,
    ),
    Rule(
        "uncovered",
        "a vital part of the gold (number, full date, name, listed item) with no trace",
        ("uncovered",),
        _uncovered,
    ),
)


def decide(question: str, gold: str, response: str) -> RuleVerdict | None:
    """Decide whether ``response`` carries ``gold``, or None when no rule is sure.

    The response is read once; then each rule of :data:`PIPELINE` is tried in turn.

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
    case = Case(question, gold, analyse_gold(gold, question), resp)
    for rule in PIPELINE:
        if verdict := rule(case):
            return verdict
    return None
