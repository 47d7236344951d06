"""Step ``refusal``: the response declines to answer ("I cannot determine ...") and names no
form of the gold. It goes first: a response that refuses has nothing else to judge.

Not a refusal: a response that goes on to guess ("I can't be sure, but it is X"; "I can't say
for certain. It is GUB."), whose guess is an answer, maybe a paraphrase of the gold; nor one
that names the gold anywhere.
"""

from __future__ import annotations

import re

from frames_dspy.judge.answer_forms import compare_quantities, parse_dates
from frames_dspy.judge.gold_forms import norm_tokens, tokens
from frames_dspy.judge.mentions import NEGATION, Response, find_mentions
from frames_dspy.judge.number_rules import candidates
from frames_dspy.judge.steps.base import Case, Rule
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["STEP", "refusal"]

_REFUSAL = re.compile(
    r"\b(?:i|we)(?:'m|'re| am| are)?\s+(?:currently\s+|simply\s+)?(?:unable|not able)\s+to\b"
    r"|\b(?:it is|it's|it was)\s+(?:not possible|impossible)\s+(?:for me\s+)?to\b"
    r"|\b(?:i|we)\s+(?:can ?not|can't|could ?not|couldn't|do not|don't|did not|didn't)\s+"
    r"(?:reliably\s+|definitively\s+|accurately\s+|currently\s+)?(?:know|find|determine|say|tell|"
    r"identify|answer|provide|confirm|verify|calculate|look|access|locate|pinpoint|work out|"
    r"figure|give|have|recall|browse)\b"
    r"|\b(?:can ?not|can't|impossible to|not possible to|no way to)\s+(?:be\s+)?(?:determined?|"
    r"answer(?:ed)?|say|tell|identif(?:y|ied)|know|known|calculated?|confirmed?|verif(?:y|ied))\b"
    r"|\b(?:not enough|insufficient|lack of|lacking|no reliable|without (?:more|further))\s+"
    r"(?:\w+\s+){0,2}(?:information|data|details|context|evidence|records|sources)\b",
    re.IGNORECASE,
)
_ENOUGH_TO_SAY = re.compile(r"\benough\b.{0,40}\bfor me to\b", re.IGNORECASE)
_COMMITS = re.compile(
    r"\b(?:but|however|though|although|likely|probably|perhaps|possibly|presumably|seems|"
    r"appears|best guess|my guess|if i had to|might be|may be|could be|i (?:think|believe|"
    r"suspect|guess))\b",
    re.IGNORECASE,
)
_GIVES_ANSWER = re.compile(
    r"\b(?:it is|it's|it was|the answer is|answer:|i'd say|i would say|my answer is)\s+"
    r"(?!not\b|unclear|impossible|possible|difficult|hard|unknown)",
    re.IGNORECASE,
)


def refusal(resp: Response) -> str | None:
    """The phrase by which the response declines to answer ("I cannot determine"), or None.

    None too when it goes on to guess ("I can't be sure, but it is X"; "I can't say for
    certain. It is GUB."): the guess is an answer, maybe a paraphrase of the gold.
    """
    text = resp.unquoted
    refused = _REFUSAL.search(text) or (NEGATION.search(text) and _ENOUGH_TO_SAY.search(text))
    if not refused or _COMMITS.search(text) or _GIVES_ANSWER.search(text):
        return None
    return refused.group()


def _present(case: Case) -> bool:
    """Whether the response names the gold answer anywhere (a refusal then is no refusal)."""
    form, resp, question = case.form, case.resp, case.question
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


def _check(case: Case) -> RuleVerdict | None:
    if _present(case) or (phrase := refusal(case.resp)) is None:
        return None
    return RuleVerdict(False, "refusal", f"the response declines to answer ({phrase!r})")


STEP = Rule(
    "refusal",
    "the response declines and names no form of the gold",
    ("refusal",),
    _check,
)
