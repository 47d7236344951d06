"""How the autorater uses its LM: the judge protocols, and the extraction step for small models.

Three protocols (:data:`JUDGE_PROTOCOLS`):

- ``rules+extract``: the rules of :mod:`frames_dspy.judge.rules` decide what they can; for the
  rest the LM is asked a question small models answer well, *which single answer does the
  response commit to* (:class:`ExtractAnswer`, never shown the gold), and the rules compare
  that answer with the gold. Only when they still cannot decide, or the LM's answer is not in
  the response, is the LM asked for a verdict
  (:class:`~frames_dspy.programs.signatures.JudgeAnswer`).
- ``rules+lm``: the rules, then the LM's verdict on the whole response.
- ``lm``: the FRAMES paper's autorater alone: the LM's verdict on every response, no rules
  (an empty response aside). For a strong judge and numbers comparable with the paper's.
"""

from __future__ import annotations

import re

import dspy

from frames_dspy.judge.answer_forms import fold, parse_dates, parse_quantities
from frames_dspy.judge.gold_forms import norm_tokens

__all__ = [
    "DEFAULT_PROTOCOL",
    "JUDGE_PROTOCOLS",
    "NO_ANSWER",
    "ExtractAnswer",
    "grounded",
    "no_answer",
    "widen",
]

JUDGE_PROTOCOLS = ("rules+extract", "rules+lm", "lm")

#: The protocol every run scores with unless told otherwise.
DEFAULT_PROTOCOL = "rules+extract"

#: What the extractor writes when the response commits to no answer.
NO_ANSWER = "none"


class ExtractAnswer(dspy.Signature):
    """Read a response to a question and copy out the one final answer it commits to.

    Copy the shortest phrase of the response that answers the question: a name, a number with
    its unit, a date, a list of names, or yes/no. Take the conclusion, not a name or number
    met on the way to it, and not one the response rejects. Write none if the response gives
    no answer, declines, or names several candidates without choosing one."""

    question: str = dspy.InputField()
    response: str = dspy.InputField(desc="the response to read")
    answer: str = dspy.OutputField(
        desc="the final answer, copied word for word from the response, or none"
    )


def no_answer(extracted: str) -> bool:
    """Whether the extractor said the response commits to nothing."""
    return extracted.strip(" .\"'").casefold() in (NO_ANSWER, "no answer", "n/a", "")


def grounded(extracted: str, response: str) -> bool:
    """Whether every word of the extracted answer is in the response (no invented answer)."""
    words = norm_tokens(extracted)
    return bool(words) and set(words) <= set(norm_tokens(response))


def widen(extracted: str, response: str) -> str:
    """The extracted answer grown to the whole numbers and dates of the response it cuts.

    A small extractor drops what follows a number ("7" out of "7 decades", "1,200" out of
    "1,200 km"), which turns another unit into the gold's. Where the answer is found in the
    response, it is widened to every quantity or date it overlaps; elsewhere it is unchanged.
    """
    text = " ".join(fold(response).split())
    answer = " ".join(fold(extracted).split()).strip(" .\"'")
    at = text.find(answer) if answer else -1
    if at < 0:
        return extracted
    start, end = at, at + len(answer)
    spans = [(d.start, d.end) for d in parse_dates(text)]
    spans += [(q.start, q.end) for q in parse_quantities(text, skip=spans)]
    for s, e in spans:
        if s < end and start < e:
            start, end = min(start, s), max(end, e)
    widened = text[start:end]
    return widened if re.search(r"\w", widened) else extracted
