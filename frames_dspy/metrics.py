"""The autorater metric, a deterministic answer check, and retrieval/query metrics.

The autorater follows the FRAMES paper: an LM judge decides whether a response carries the
meaning of the gold answer. A deterministic check runs first and can only say TRUE (same text
after normalisation, the same numbers, the same date, or a short gold answer contained in the
response); everything else goes to the judge. An empty response is FALSE without a judge
call. A judge reply that cannot be parsed is counted as a judge error, never as a silent FALSE.

A very small judge (the embedded 0.5B model) says TRUE to almost anything: measured here, it
accepted "Sarah" for "Jane Ballou" and "1997" for "87". With such a judge, ``min_overlap``
keeps a TRUE only when the response carries at least that share of the gold answer's content
words and numbers; otherwise the verdict is FALSE with method ``judge_overruled``. This trades
false positives for false negatives on paraphrases ("USA" for "United States"), so it is on by
default only for the embedded judge.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from frames_dspy.lm import ModelSpec
from frames_dspy.signatures import JudgeAnswer

logger = logging.getLogger(__name__)

__all__ = [
    "Judgement",
    "JUDGE_METHODS",
    "Autorater",
    "deterministic_match",
    "normalize_answer",
    "extract_numbers",
    "gold_recall",
    "answer_overlap",
    "default_min_overlap",
    "query_repetition_rate",
    "mean_recall",
]

_MONTHS = {
    m: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for m in names
}
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY_MONTH_YEAR = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_RE})\.?,?\s+(\d{{4}})\b"
)
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_MONTH_YEAR = re.compile(rf"\b({_MONTH_RE})\.?,?\s+(\d{{4}})\b")
_NUMBER = re.compile(
    r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?(?:st|nd|rd|th)?(?![\w])|(?<![\w.])[-+]?\.\d+"
)
_SCALE = {
    "thousand": Decimal(10**3),
    "million": Decimal(10**6),
    "billion": Decimal(10**9),
    "trillion": Decimal(10**12),
}
_NEGATIONS = {
    "not",
    "no",
    "never",
    "neither",
    "nor",
    "isn't",
    "wasn't",
    "aren't",
    "weren't",
    "didn't",
    "doesn't",
    "cannot",
    "can't",
    "unknown",
    "unclear",
}
_ARTICLES = {"a", "an", "the"}
_YES_NO = {"yes", "no", "true", "false"}


def _iso_dates(text: str) -> str:
    """Rewrite dates written in words as ISO (``1990-05-12``, ``1990-05``) so they compare."""

    def dmy(m):
        return f"{int(m[3]):04d}-{_MONTHS[m[2]]:02d}-{int(m[1]):02d}"

    def mdy(m):
        return f"{int(m[3]):04d}-{_MONTHS[m[1]]:02d}-{int(m[2]):02d}"

    text = _DAY_MONTH_YEAR.sub(dmy, text)
    text = _MONTH_DAY_YEAR.sub(mdy, text)
    text = _ISO_DATE.sub(lambda m: f"{int(m[1]):04d}-{int(m[2]):02d}-{int(m[3]):02d}", text)
    return _MONTH_YEAR.sub(lambda m: f"{int(m[2]):04d}-{_MONTHS[m[1]]:02d}", text)


def normalize_answer(text: str) -> str:
    """Lower-case, accents and punctuation removed, dates in ISO form, articles dropped."""
    text = unicodedata.normalize("NFKD", str(text).replace("\u2212", "-"))
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    text = _iso_dates(text)
    # Keep thousands and decimal separators inside numbers, and a minus sign or ISO dash before
    # a digit; every other punctuation mark becomes a space.
    text = re.sub(r"(?<=\d)[,](?=\d{3}\b)", "", text)
    text = re.sub(r"[^\w\s.\-]|(?<!\d)\.|\.(?!\d)|-(?!\d)", " ", text)
    return " ".join(t for t in text.split() if t not in _ARTICLES)


def extract_numbers(text: str) -> list[float]:
    """Numbers in a text, with thousands separators, ordinals and million/billion scales read."""
    text = str(text).replace("\u2212", "-").casefold()
    values = []
    for match in _NUMBER.finditer(text):
        raw = re.sub(r"(st|nd|rd|th)$", "", match.group()).replace(",", "")
        try:
            value = Decimal(raw)
        except InvalidOperation:
            continue
        following = text[match.end() : match.end() + 10].split()
        if following and following[0] in _SCALE:
            # Decimal keeps 2.01 million equal to 2,010,000 (a float product would not).
            value *= _SCALE[following[0]]
        values.append(float(value))
    return values


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def deterministic_match(gold: str, response: str, question: str = "") -> str | None:
    """The rule that shows ``response`` carries ``gold``, or None when no rule is sure.

    Rules: ``exact`` (same after normalisation), ``number`` (a numeric gold answer whose numbers
    and unit words all appear in a response that names no other number outside the question; a
    bare number may omit the unit),
    ``contains`` (a short gold answer, up to six words, appearing word for word in a response
    that names no number the gold lacks and has no negation). Yes/no gold answers must match
    exactly.
    """
    g, r = normalize_answer(gold), normalize_answer(response)
    if not g or not r:
        return None
    if g == r:
        return "exact"
    g_tokens, r_tokens = g.split(), r.split()
    if len(g_tokens) == 1 and g_tokens[0] in _YES_NO:
        return None
    gold_numbers = set(extract_numbers(gold))
    response_numbers = set(extract_numbers(response))
    question_numbers = set(extract_numbers(question))
    extra_numbers = response_numbers - gold_numbers - question_numbers
    if gold_numbers:
        # Units and other words of the gold answer must be in the response too ("15 years"
        # is not "15 months"); scale words are already folded into the numbers.
        words = [t for t in g_tokens if not re.search(r"\d", t) and t not in _SCALE]
        if (
            len(words) <= 3
            and gold_numbers <= response_numbers
            and not extra_numbers
            and (set(words) <= set(r_tokens) or all(re.search(r"\d", t) for t in r_tokens))
        ):
            return "number"
    negated = any(t in _NEGATIONS or t.endswith("n't") for t in r_tokens)
    if len(g_tokens) <= 6 and _contains(r_tokens, g_tokens) and not extra_numbers and not negated:
        return "contains"
    return None


_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "and",
        "or",
        "by",
        "with",
        "from",
        "is",
        "was",
        "were",
        "are",
        "be",
        "been",
        "as",
        "its",
        "it",
        "his",
        "her",
        "their",
        "this",
        "that",
        "which",
        "who",
        "whom",
        "whose",
        "what",
        "when",
        "where",
        "than",
        "then",
    ]
)


def _content_terms(text: str) -> set[str]:
    terms = {t for t in normalize_answer(text).split() if t not in _STOPWORDS}
    numbers = {f"#{n:g}" for n in extract_numbers(text)}
    return {t for t in terms if not re.fullmatch(r"[\d.,\-]+(st|nd|rd|th)?", t)} | numbers


def answer_overlap(gold: str, response: str) -> float:
    """Share of the gold answer's content words and numbers that the response contains."""
    gold_terms = _content_terms(gold)
    if not gold_terms:
        return 1.0
    return len(gold_terms & _content_terms(response)) / len(gold_terms)


def default_min_overlap(judge: ModelSpec) -> float:
    """0.5 for the embedded judges, whose TRUE needs support; 0 otherwise."""
    return 0.5 if judge.embedded else 0.0


#: Judgement methods that mean the judge LM was called (the others are rule-based).
JUDGE_METHODS = frozenset({"judge", "judge_error", "judge_overruled"})


@dataclass(frozen=True)
class Judgement:
    """One verdict: ``correct`` is None when the judge's reply could not be parsed."""

    correct: bool | None
    method: str
    explanation: str = ""

    @property
    def error(self) -> bool:
        return self.correct is None


class Autorater:
    """The FRAMES autorater as a DSPy metric.

    Args:
        judge_lm: The judge; None uses the LM configured in ``dspy.settings`` at call time. Keep
            it separate from the program's LM where you can.
        use_rules: Run the deterministic check first (saves judge calls).
        min_overlap: Keep a judge's TRUE only if the response holds at least this share of
            the gold answer's content words and numbers (see :func:`answer_overlap`); 0 trusts
            the judge. Use it with very small judges.

    Call it as a metric, ``autorater(example, pred, trace=None)``: a float (1.0 or 0.0) for
    evaluation, a bool while an optimizer bootstraps (``trace`` set). ``judge()`` returns the
    full :class:`Judgement`; ``errors`` counts unparseable judge replies.
    """

    def __init__(
        self,
        judge_lm: dspy.BaseLM | None = None,
        *,
        use_rules: bool = True,
        min_overlap: float = 0.0,
    ):
        if not 0.0 <= min_overlap <= 1.0:
            raise ValueError(f"min_overlap={min_overlap!r} must be between 0 and 1")
        self.judge_lm = judge_lm
        self.use_rules = use_rules
        self.min_overlap = min_overlap
        self._predict = dspy.Predict(JudgeAnswer)
        self._lock = threading.Lock()
        self.errors = 0
        self.calls = 0

    def __deepcopy__(self, memo):
        return self

    def judge(self, question: str, gold: str, response: str) -> Judgement:
        """Decide whether ``response`` carries the meaning of ``gold``."""
        if not str(response or "").strip():
            return Judgement(False, "empty", "the response is empty")
        if self.use_rules and (rule := deterministic_match(gold, response, question)):
            return Judgement(True, rule, f"deterministic match ({rule})")
        with self._lock:
            self.calls += 1
        try:
            with dspy.context(lm=self.judge_lm) if self.judge_lm else nullcontext():
                out = self._predict(question=question, gold_answer=gold, response=response)
            decision = str(out.decision).strip().upper()
            if decision not in ("TRUE", "FALSE"):
                raise AdapterParseError(
                    adapter_name="Autorater",
                    signature=JudgeAnswer,
                    lm_response=decision,
                    message=f"decision {decision!r} is neither TRUE nor FALSE",
                )
        except (AdapterParseError, ValueError) as err:
            with self._lock:
                self.errors += 1
            logger.warning("judge reply could not be parsed: %s", err)
            return Judgement(None, "judge_error", str(err)[:500])
        explanation = str(out.explanation).strip()
        if decision == "TRUE" and self.min_overlap > 0:
            overlap = answer_overlap(gold, response)
            if overlap < self.min_overlap:
                return Judgement(
                    False,
                    "judge_overruled",
                    f"the judge said TRUE, but the response holds {overlap:.0%} of the gold "
                    f"answer's content words (< {self.min_overlap:.0%}); judge: {explanation}",
                )
        return Judgement(decision == "TRUE", "judge", explanation)

    def __call__(self, example: Any, pred: Any, trace: Any = None) -> float | bool:
        verdict = self.judge(example.question, example.answer, getattr(pred, "answer", ""))
        correct = bool(verdict.correct)
        return correct if trace is not None else float(correct)


def gold_recall(
    gold_ids: Sequence[str], context_ids: Sequence[Sequence[str]]
) -> list[float] | None:
    """Fraction of the gold articles in context after each round; None without gold articles."""
    gold = set(gold_ids)
    if not gold:
        return None
    return [len(gold & set(ids)) / len(gold) for ids in context_ids]


def mean_recall(recalls: Iterable[Sequence[float] | None]) -> tuple[list[float], int]:
    """Mean gold-article recall per round, and how many questions it is averaged over.

    Every question with a gold article in the corpus counts (its recall a list): one that
    failed before retrieving anything, or retrieved nothing, counts as 0 in every round, so a
    run where most questions failed cannot show the recall of the few that worked. A question
    that stopped early keeps its last recall for the remaining rounds. Programs that never
    retrieve (no question has any round) have no recall: ``([], 0)``.
    """
    rows = [list(r) for r in recalls if isinstance(r, list | tuple)]
    if not any(rows):
        return [], 0
    depth = max(len(r) for r in rows)
    padded = [(r + [r[-1]] * (depth - len(r))) if r else [0.0] * depth for r in rows]
    return [sum(r[i] for r in padded) / len(padded) for i in range(depth)], len(padded)


def query_repetition_rate(query_stats: dict[str, int] | None) -> float | None:
    """Share of LM-written queries that repeat an earlier round's query (None if none written)."""
    if not query_stats or not query_stats.get("generated"):
        return None
    return query_stats.get("repeated", 0) / query_stats["generated"]
