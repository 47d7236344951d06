"""Step ``name``: a gold that names someone or something, read against the response.

TRUE (``stated_answer``) when the response is the gold's core, the same name in another
spelling, the name with middle words left out, a surname when the question asks who, or states
the name as its answer. FALSE when it swaps some of the name's words (``different_name``),
changes a number in it (``different_number``), names the gold only to reject it
(``rejected_option``) or only as one of alternatives (``hedge``).
"""

from __future__ import annotations

import re

from frames_dspy.judge.gold_forms import Part, norm_tokens
from frames_dspy.judge.mentions import FUNCTION_WORDS, find_mentions, position
from frames_dspy.judge.names import same_name_word
from frames_dspy.judge.steps.base import Case, Rule, of_kind
from frames_dspy.judge.steps.forms import matches_part, number_changed, numeral, strip_frame
from frames_dspy.judge.verdict import RuleVerdict
from frames_dspy.judge.words import NAME_TITLES

__all__ = ["STEP"]

_ASKS_WHO = re.compile(r"\b(?:who|whom|whose)\b", re.IGNORECASE)


def _swapped(pairs: list[tuple[str, str]]) -> bool:
    """Each swapped word is five letters or more (not a nickname), begins with another letter,
    and is no title ("Pope" for "St.") and no number (their own rule)."""
    return all(
        min(len(a), len(b)) >= 5
        and a[0] != b[0]
        and not (a in NAME_TITLES or b in NAME_TITLES)
        and numeral(a) is None
        and numeral(b) is None
        for a, b in pairs
    )


def _name_forms(core: tuple[str, ...], part: Part, question: str) -> RuleVerdict | None:
    """A response that is only a name, read against the gold's name word by word.

    TRUE when every word is the gold's in another spelling ("Dostoyevsky" for "Dostoevsky"),
    or when it is the last word of a two- or three-word name and the question asks who (a
    surname for a full name). FALSE (``different_name``) when it is as long as the gold's name,
    keeps some of its words and swaps others ("Ada Quill Brand" for "Ada Maria Brand"): see
    :func:`_swapped`.
    """
    gold = part.main
    if not core or len(core) > 6 or any(w in FUNCTION_WORDS for w in core if w not in gold):
        return None
    if len(core) == len(gold):
        pairs = [(a, b) for a, b in zip(core, gold, strict=True) if a != b]
        if pairs and all(same_name_word(b, a) for a, b in pairs):
            why = f"the response is {part.text!r} in another spelling"
            return RuleVerdict(True, "stated_answer", why)
        if pairs and len(pairs) < len(gold) and _swapped(pairs):
            said = " ".join(a for a, _ in pairs)
            why = f"the response puts {said!r} in place of part of {part.text!r}"
            return RuleVerdict(False, "different_name", why)
    if _shortened(core, gold):
        why = f"the response is {part.text!r} with middle words left out"
        return RuleVerdict(True, "stated_answer", why)
    asks_who = _ASKS_WHO.search(question)
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
    if numeral(gold[-1]) is not None:
        return False  # "John II" for "John Paul II" is another person of that number
    middle = list(gold[1:-1])
    for word in core[1:-1]:  # the kept middle words, in order
        if word not in middle:
            return False
        middle = middle[middle.index(word) + 1 :]
    dropped = [w for w in gold[1:-1] if w not in core]
    return not any(numeral(w) is not None for w in dropped)


def _check(case: Case) -> RuleVerdict | None:
    resp, question = case.resp, case.question
    part = case.form.parts[0]
    core = norm_tokens(strip_frame(resp.text))
    if matches_part(core, part):
        return RuleVerdict(True, "stated_answer", f"the response is the gold's core {part.text!r}")
    if verdict := _name_forms(core, part, question):
        return verdict
    mentions = find_mentions(resp, part.main)
    if not mentions:
        if number_changed(core, part.main):
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


STEP = Rule(
    "name",
    "a name gold stated, spelled otherwise, swapped, rejected or offered as one option",
    ("stated_answer", "different_name", "different_number", "rejected_option", "hedge"),
    _check,
    guard=of_kind("name"),
)
