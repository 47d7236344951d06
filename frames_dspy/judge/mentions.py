"""Reading a response: its sentences, and where and how it mentions the gold answer.

A mention of the gold in a response is not yet an answer: "It was not Italy", "Italy or Spain",
"Italy, Germany and France" and "raspberries rather than cannabis" all contain the gold.
:func:`position` says how a mention stands: ``asserted`` (given as the answer: opening the
response, or after "is"/"was"/"won by", ending its clause, in a sentence with no negation,
contrast or hedge), ``rejected`` (negated, compared away, called a guess or corrected by "but
... actually"), ``alternative`` (one side of an "or"), ``listed`` (one of several names) or
``neutral`` (anything else). The steps of the rule pipeline (:mod:`frames_dspy.judge.steps`)
decide from these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from frames_dspy.judge.answer_forms import Quantity, fold, parse_dates, parse_quantities
from frames_dspy.judge.gold_forms import Token, same_words, tokens
from frames_dspy.judge.place_names import is_place_name
from frames_dspy.judge.words import ARTICLES, FUNCTION_WORDS, NAME_TITLES, word_set

__all__ = [
    "Response",
    "Mention",
    "find_mentions",
    "position",
    "stated",
    "listed",
    "negated",
    "NEGATION",
    "CONTRAST",
    "HEDGE_WORDS",
    "FUNCTION_WORDS",
]

_ABBREVIATION = re.compile(
    r"(?:\b(?:St|Dr|Mr|Mrs|Ms|Mt|No|Nos|Jr|Sr|vs|Gen|Col|Lt|Capt|Rev|Prof|Inc|Co|Ltd|Ft|Sgt|"
    r"approx|ca|U\.S|e\.g|i\.e)|\b[A-Z])\.$"
)
NEGATION = re.compile(
    r"\b(?:not(?!\s+only\b)|never|neither|nor|none|nobody|nothing|cannot|no(?![.,]?\s*\d))\b|n't\b",
    re.IGNORECASE,
)
CONTRAST = re.compile(
    r"\b(?:but|however|although|though|whereas|instead|rather|actually|unlike|than|except|"
    r"wrong|incorrect|mistaken|mistake|misconception|myth|guess|assumed?|contrary|despite)\b",
    re.IGNORECASE,
)
HEDGE_WORDS = re.compile(
    r"\b(?:possibly|perhaps|maybe|might|could|either|or|unclear|uncertain|unsure|not sure|"
    r"debated|disputed|probably|likely)\b|\bmay\b",
)
_RETRACTION = re.compile(
    r"\b(?:actually|however|instead|correction|rather|alternatively|on second thought|wait|"
    r"or perhaps|or maybe|or possibly|incorrect|wrong|mistaken|but|(?:real|true|correct|right) "
    r"answer|not sure|unsure|uncertain|not certain)\b",
    re.IGNORECASE,
)


class Response:
    """A response folded once, with its sentences, quoted spans and tokens."""

    def __init__(self, response: str):
        self.raw = response
        self.text = " ".join(fold(response).replace("*", "").split())
        self.sentences = self._split(self.text)
        self.quotes = [(m.start(), m.end()) for m in re.finditer(r'"[^"]*"', self.text)]
        self.unquoted = re.sub(r'"[^"]*"', lambda m: " " * len(m.group()), self.text)
        self.toks = tokens(self.text)

    @staticmethod
    def _split(text: str) -> list[tuple[int, int]]:
        spans, start = [], 0
        for m in re.finditer(r"[.!?]+[\"')\]]*\s+|;\s*", text):
            if m.group().startswith(".") and _ABBREVIATION.search(text[start : m.start() + 1]):
                continue
            spans.append((start, m.end()))
            start = m.end()
        if start < len(text):
            spans.append((start, len(text)))
        return spans or [(0, 0)]

    def sentence_of(self, pos: int) -> int:
        return next(
            i for i, (s, e) in enumerate(self.sentences) if s <= pos < e or e == len(self.text)
        )

    def sentence(self, i: int, *, quoted: bool = False) -> str:
        s, e = self.sentences[i]
        return (self.text if quoted else self.unquoted)[s:e]

    def in_quotes(self, pos: int) -> bool:
        return any(s < pos < e for s, e in self.quotes)

    @cached_property
    def quantities(self) -> list[Quantity]:
        return parse_quantities(self.text, skip=[(d.start, d.end) for d in parse_dates(self.text)])

    def clean(self, i: int) -> bool:
        """Sentence ``i`` has no negation, contrast or hedge (quoted titles aside)."""
        text = self.sentence(i)
        return not (
            NEGATION.search(text)
            or CONTRAST.search(text)
            or HEDGE_WORDS.search(text)
            or text.rstrip().endswith("?")
        )

    def retracted_after(self, i: int) -> bool:
        return any(_RETRACTION.search(self.sentence(j)) for j in range(i + 1, len(self.sentences)))


# --- finding the gold in the response --------------------------------------------------------


@dataclass(frozen=True)
class Mention:
    """Where a name occurs: character span and the sentence it starts (and ends) in."""

    start: int
    end: int
    sent: int
    end_sent: int = -1


def _extends(a: Token, b: Token, text: str, *, after: bool) -> bool:
    """Whether token ``b`` continues a name through ``a`` ("George Washington University")."""
    gap = text[a.end : b.start] if after else text[b.end : a.start]
    if not re.fullmatch(r"[\s'-]*", gap) or "'" in gap and after:
        return False
    if b.norm in FUNCTION_WORDS or (not after and b.norm in NAME_TITLES):
        return False
    return b.text[0].isupper() or (after and b.text[0].isdigit() and gap.strip() == "")


def find_mentions(resp: Response, words: tuple[str, ...]) -> list[Mention]:
    """Where the words occur as a whole name (not inside a longer one), plurals aside."""
    toks, n, out = resp.toks, len(words), []
    for i in range(len(toks) - n + 1):
        if not same_words(tuple(t.norm for t in toks[i : i + n]), words):
            continue
        if i > 0 and _extends(toks[i], toks[i - 1], resp.text, after=False):
            continue
        if i + n < len(toks) and _extends(toks[i + n - 1], toks[i + n], resp.text, after=True):
            continue
        start, end = toks[i].start, toks[i + n - 1].end
        out.append(Mention(start, end, resp.sentence_of(start), resp.sentence_of(end - 1)))
    return out


_REJECT_BEFORE = re.compile(
    r"(?:\bnot|n't|\bnever|\bnor|\brather than|\bother than|\binstead of|\bunlike|"
    r"\bexcept(?: for)?|\bapart from|\bas opposed to)\s+"
    r"(?:(?:the|a|an|in|at|on|by|from|to|for|with|of)\s+)?[\"']?$",
    re.IGNORECASE,
)
_THAN_BEFORE = re.compile(r"\bthan\s+(?:(?:to|with|for|in|at|of|the)\s+){0,2}[\"']?$", re.I)
_REJECT_AFTER = re.compile(
    r"^(?:\s+[a-z]+){0,2}?[\"']?\s*(?:is|was|are|were|would be|seems?)\s+"
    r"(?:not\b|n't|wrong|incorrect|mistaken|an?\s+(?:\w+\s+)?(?:guess|misconception|mistake|"
    r"myth|red herring|error|confusion))|"
    r"^(?:\s+[a-z]+){0,2}?[\"']?\s*(?:isn't|wasn't|aren't|weren't)\b",
    re.IGNORECASE,
)
_BELIEF = re.compile(
    r"\b(?:assumes?|assumed|believes?|believed|thinks?|thought|guess(?:ed)?|supposes?|supposed|"
    r"mistak\w*|confuse[sd]?|often said|commonly said|popularly)\b",
    re.IGNORECASE,
)
_CORRECTION = re.compile(
    r"\b(?:actually|in fact|really|instead|rather|truly|correctly|(?:real|true|correct|right) "
    r"answer)\b",
    re.IGNORECASE,
)
_COPULA_BEFORE = re.compile(
    r"(?:\b(?:is|was|are|were|be|been|became|becomes|become|remains|remained)|"
    r"\b(?:it|that|this|what|here|there|who|answer)'s)\s+"
    r"(?:(?:called|named|known as|in|at|from|on|by)\s+)?(?:(?:the|a|an)\s+)?[\"'(]?$"
    r"|\b(?:is|was|are|were|be|been)\s+(?P<passive>(?:[\w,]+\s+){1,4})by\s+(?:the\s+)?[\"']?$"
    r"|:\s*[\"']?$",
    re.IGNORECASE,
)
_LEAD = re.compile(
    r"^\W*(?:(?:so|thus|therefore|hence|yes|final answer|answer)\W+)?"
    r"(?:(?:it|this|that|the answer|the correct answer|my answer)\s*(?:'s|is|was|would be|"
    r"will be|:)\s+|that would be\s+|i believe (?:it's|it is)\s+|(?:he|she|they) (?:is|was|are|"
    r"were)\s+)?(?:the\s+)?[\"'(]?$",
    re.IGNORECASE,
)
_AFTER_ANSWER = re.compile(
    r"^[\"')]*\s*(?:$|[.,;:!(]|-\s|\s-)"
    r"|^[\"')]*\s+(?:is|was) (?:the|my) (?:correct |final )?answer\b",
    re.IGNORECASE,
)
_OR_AFTER = re.compile(
    r"^[\"']?\s+or\s+(?!so\b|more\b|less\b|not\b|fewer\b|later\b|earlier\b|above\b|below\b|"
    r"simply\b|also\b|just\b)(?:the\s+)?([\w'-]+)",
    re.IGNORECASE,
)
_OR_BEFORE = re.compile(r"([\w'-]+)\s+or\s+(?:the\s+)?[\"']?$", re.IGNORECASE)
_NEXT_CORRECTS = r"\s*(?:however|actually|in fact|in reality)\b"
# After "X is GOLD": a closing phrase of place or time, up to the end of the sentence.
_PLACE_TIME = re.compile(r"^\s+(?:in|at|on|during|from|since)\s+[^,;:]*?[.!]?\s*$", re.IGNORECASE)
_CONCLUDES = re.compile(
    r"\b(?:so|thus|therefore|hence|which means|meaning)\s*,?\s*(?:that\s+)?[\"']?$", re.IGNORECASE
)
_ROLE = re.compile(
    r"^[\"']?\s+(?:is|was|are|were|would be|would have been|became|remains|remained)\s+"
    r"(?:the|a|an)\s+((?:[\w'-]+\s+){0,2}[\w'-]+)",
    re.IGNORECASE,
)


def _alternative(word: str, words: tuple[str, ...]) -> bool:
    """Whether ``word`` across an "or" is another candidate, not an alias of the gold."""
    if word.isupper() and len(word) > 1:
        return False  # "Grand Union Bakery or GUB": an acronym restates the answer
    low = word.casefold()
    if low == "either":
        return False
    return low not in words and not any(low[:4] == w[:4] for w in words if len(w) >= 4)


def negated(resp: Response, start: int, end: int) -> bool:
    """Whether the words around a span reject it.

    "not 317 years", "1874 isn't right", "2011 is a common guess, but ...", "Some say 1874,
    but in fact ...": negated, called wrong or a guess, or corrected after "but".
    """
    s_start, s_end = resp.sentences[resp.sentence_of(start)]
    before, after = resp.text[s_start:start], resp.text[end:s_end]
    if _REJECT_BEFORE.search(before) or _REJECT_AFTER.search(after):
        return True
    but = re.search(r"\bbut\b(.*)$", after, re.IGNORECASE)
    said = resp.text[start:end].casefold()
    corrected = but and (_CORRECTION.search(but.group(1)) or _BELIEF.search(before))
    return bool(corrected) and said not in but.group(1).casefold()


def position(resp: Response, m: Mention, words: tuple[str, ...], question: str) -> str:
    """How a mention of the gold stands: asserted, rejected, alternative, listed or neutral."""
    if m.end_sent != m.sent:
        return "neutral"  # a gold of two sentences ("Oro Valley. 12 towns.") met in one piece
    s_start, s_end = resp.sentences[m.sent]
    before, after = resp.text[s_start : m.start], resp.text[m.end : s_end]
    if negated(resp, m.start, m.end):
        return "rejected"
    if (than := _THAN_BEFORE.search(before)) and not NEGATION.search(resp.sentence(m.sent)):
        # "more related to mulberries than cannabis" rejects the gold only when the comparison
        # is the one the question asks about ("more related"); "younger than X" may not be.
        clause = re.split(r"[,;:]", before[: than.start()])[-1].casefold().split()
        compared = [w for w in clause if w in ("more", "less", "fewer") or w.endswith("er")]
        if compared and all(w in question.casefold().split() for w in compared):
            return "rejected"
    nxt = resp.sentence(m.sent + 1) if m.sent + 1 < len(resp.sentences) else ""
    if _BELIEF.search(before + after) and re.match(_NEXT_CORRECTS, nxt, re.IGNORECASE):
        return "rejected"
    if before.count("(") <= before.count(")"):  # an "or" inside brackets gives an alias
        if (o := _OR_AFTER.match(after)) and _alternative(o.group(1), words):
            return "alternative"
        o = _OR_BEFORE.search(before)
        if o and not before.rstrip().endswith(", or") and _alternative(o.group(1), words):
            return "alternative"
    if listed(before, after, resp.text[m.start : m.end]):
        return "listed"
    return "asserted" if stated(resp, m.start, m.end, question) else "neutral"


def stated(resp: Response, start: int, end: int, question: str) -> bool:
    """Whether a span sits where an answer is given, in a plain sentence.

    Where: opening the response ("Italy.", "It was Italy, ...", "The answer is Italy (...)");
    after "is"/"was"/"won by" and closing its clause ("... was won by Italy.", "... is LXXIX in
    Roman numerals."), with a subject that is a pronoun or names something the question asks
    about ("the runner-up was Italy" does not answer "Who won?"); or after "so"/"therefore"
    with the role the question asks for ("so Philadelphia was the capital on that day").
    """
    i = resp.sentence_of(start)
    if not resp.clean(i) or resp.sentence_of(max(start, end - 1)) != i:
        return False
    s_start, s_end = resp.sentences[i]
    before, after = resp.text[s_start:start], resp.text[end:s_end]
    if i == 0 and _LEAD.search(before) and _AFTER_ANSWER.match(after):
        return True
    copula = _COPULA_BEFORE.search(before)
    closes = _AFTER_ANSWER.match(after) or _PLACE_TIME.match(after)
    # "Apple was founded in 1976 by X" answers "Who founded that brand?" through its verb.
    asked = copula and (
        _subject_asked(before[: copula.start()], question)
        or (copula.group("passive") and _shares_word(copula.group("passive"), question))
    )
    if asked and closes:
        return True
    if _CONCLUDES.search(before) and (role := _ROLE.match(after)):
        asked = set(re.findall(r"[a-z]+", question.casefold())) - FUNCTION_WORDS
        return bool(asked & set(role.group(1).casefold().split()))
    return False


_PRONOUN_SUBJECT = word_set(
    "it this that which he she they who what answer correct final one i we think believe "
    "guess say would"
)


def _subject_asked(clause: str, question: str) -> bool:
    """Whether the words before "is/was" are a pronoun or share a word with the question."""
    clause = re.split(r"[,;:(]|\b(?:so|thus|therefore|hence|and|but)\b", clause, flags=re.I)[-1]
    words = set(re.findall(r"[a-z]+", clause.casefold())) - FUNCTION_WORDS - ARTICLES
    if not words - _PRONOUN_SUBJECT:
        return True
    return _shares_word(" ".join(words), question)


def _shares_word(text: str, question: str) -> bool:
    """Whether a content word of ``text`` is in the question (first five letters compared)."""

    def stems(t: str) -> set[str]:
        return {w[:5] for w in re.findall(r"[a-z]+", t.casefold())} - FUNCTION_WORDS - ARTICLES

    return bool(stems(text) & stems(question))


_NAME_RUN = r"[A-Z][\w'.-]*(?:\s+(?:of\s+|de\s+|the\s+)?[A-Z][\w'.-]*)*"


def listed(before: str, after: str, mention: str = "") -> bool:
    """Whether the mention sits in a list of names ("Spain and Italy", "Italy, Spain").

    A place after a comma only locates a mention that is not itself a country or region
    ("Prague, Czechia"); after a country it continues a list ("Italy, Germany and France").
    """
    if m := re.match(rf"^[\"')]*\s*(?:,|;|/|&|\band\b|\bor\b)\s*(?:the\s+)?({_NAME_RUN})", after):
        place = m.group(1).rstrip(".")
        locates = after.lstrip(" \"')").startswith(",") and is_place_name(place)
        if not locates or is_place_name(mention):
            return True
    m = re.search(rf"({_NAME_RUN})\s*(?:,|/|&|\band\b|\bor\b)\s*(?:the\s+)?[\"'(]?$", before)
    return bool(m) and m.group(1).casefold() not in FUNCTION_WORDS | {"yes", "no", "so", "well"}
