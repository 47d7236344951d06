"""Step ``moved_on``: the response names the gold, then commits to another answer of the same
kind in a later clause ("Ada Quill held it first; the record is now held by Bea Lord"). It reads
the gold's vital parts (:func:`frames_dspy.judge.coverage.vital_parts`) and, like
``uncovered``, runs late, FALSE only, on what no other step decided.
"""

from __future__ import annotations

import re

from frames_dspy.judge.answer_forms import Quantity, compare_quantities, fold
from frames_dspy.judge.coverage import (
    Vital,
    name_runs,
    norm_word,
    range_quantities,
    vital_parts,
)
from frames_dspy.judge.names import carries_name
from frames_dspy.judge.steps.base import Case, Rule
from frames_dspy.judge.verdict import RuleVerdict
from frames_dspy.judge.words import FUNCTION_WORDS, WORD, word_set

__all__ = ["STEP", "moved_on"]

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
    words = {w.casefold() for w in WORD.findall(subject)} - FUNCTION_WORDS
    words = {w for w in words if not w[0].isdigit()}
    if not words or words <= _PRONOUNS:
        return True
    asked = {w.casefold()[:5] for w in WORD.findall(question)}
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
    if names and (runs := name_runs(answer)):
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
    asked = {norm_word(w) for w in WORD.findall(question)}
    said = {norm_word(w) for w in WORD.findall(commitment)}
    numbers = {w for w in said if w[0].isdigit()}
    if _OTHER_TIME.search(commitment) or numbers - asked:
        return False
    before = {norm_word(w) for w in WORD.findall(gold_clause)}
    subject = _COMMITS.search(commitment)
    if subject and re.search(r"\banswer\b", subject.group("subject"), re.IGNORECASE):
        return True  # "...; the answer is X": said outright
    role = {norm_word(w) for w in WORD.findall(subject.group("subject"))} if subject else set()
    if (role - FUNCTION_WORDS - _PRONOUNS) & before:
        return True
    return bool((numbers & asked) - before)  # the question's year, not the gold clause's


def _check(case: Case) -> RuleVerdict | None:
    if found := moved_on(case.question, case.gold, case.resp.raw):
        other, where = found
        why = f"the response names the gold on the way, then commits to {other!r} ({where!r})"
        return RuleVerdict(False, "moved_on", why)
    return None


STEP = Rule(
    "moved_on",
    "the gold named on the way, then another answer of its kind committed to",
    ("moved_on",),
    _check,
)
