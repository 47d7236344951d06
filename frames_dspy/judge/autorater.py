"""The FRAMES autorater: deterministic rules first, then an LM judge for what they leave.

The paper scores a response with an LM that decides whether the meaning and vital facts of the
gold answer are present in it. Here the rules of :mod:`frames_dspy.judge.rules` decide first:
an empty response, a refusal, a hedge, another number or date, the gold answer stated in any
common form. An item they decide makes no LM call; everything else goes to the judge
(:class:`~frames_dspy.programs.signatures.JudgeAnswer`), which explains and then says TRUE or FALSE.

Where the judge's backend returns log-probabilities (the embedded llama.cpp model does, and so
do OpenAI-style APIs), the autorater reads P(TRUE) at the decision token and keeps it with the
verdict. It can decide from it against a threshold (``decide_by="p_true"``) or from the text
(``decide_by="text"``); :data:`DEFAULT_DECISION` is the one that measured better on labelled
items (see the constants below). A judge reply that cannot be parsed is a judge error, never a
silent FALSE.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from frames_dspy.judge.protocols import (
    JUDGE_PROTOCOLS,
    ExtractAnswer,
    grounded,
    no_answer,
    widen,
)
from frames_dspy.judge.rules import WHOLE_RESPONSE_RULES, decide
from frames_dspy.programs.signatures import JudgeAnswer

logger = logging.getLogger(__name__)

__all__ = [
    "AUTORATER",
    "Autorater",
    "Judgement",
    "JUDGE_METHODS",
    "DECISION_MODES",
    "DEFAULT_DECISION",
    "P_TRUE_THRESHOLD",
    "TOP_LOGPROBS",
    "decision_probability",
    "is_rule_method",
    "method_counts",
]

#: Methods that mean the judge LM was called; every other method is a rule's name.
#: ``extract`` is a rule's verdict on the answer the LM extracted (``rules+extract``),
#: ``extract_none`` the LM's finding that the response commits to no answer.
#: ``judge_overruled`` is the old overlap guard's verdict, kept so old run folders still count.
JUDGE_METHODS = frozenset({"judge", "judge_error", "judge_overruled", "extract", "extract_none"})

#: How an LM verdict is decided: from the TRUE/FALSE the judge wrote, or from P(TRUE).
DECISION_MODES = ("text", "p_true")

#: P(TRUE) at or above this is TRUE when deciding by probability (``decide_by="p_true"``).
#: Calibrated with ``python -m benchmarks.judge_lm`` on the 39 items of judge_dev that the
#: rules leave to the embedded 0.5B judge: the accuracy-maximising threshold fitted
#: leave-one-question-out had median 0.52 (range 0.50-0.52); fitted on one half of the question
#: ids (split seed 0) it was 0.44 and 0.60 for the two halves.
P_TRUE_THRESHOLD = 0.52

#: How LM verdicts are decided by default. Measured on the same 39 items, each scored only by a
#: threshold fitted on other questions: the written TRUE/FALSE was right on 26, P(TRUE) on 23
#: (threshold from the other half, both ways) and 26 (leave-one-question-out). P(TRUE) never
#: did better, so the text decides; P(TRUE) is still recorded with every LM verdict.
DEFAULT_DECISION = "text"

#: Alternatives asked for at each generated token (OpenAI allows up to 20).
TOP_LOGPROBS = 10

#: What scores a run, as its settings record it: a run folder or study scored by another
#: autorater (the overlap guard of earlier versions, another decision mode) is not resumed.
#: Raise the number when a change to the rules or the judge's prompt changes verdicts.
#: How the LM is used (the protocol) is recorded beside it as the ``judge_protocol`` setting.
AUTORATER = "rules+judge/4:" + (
    DEFAULT_DECISION if DEFAULT_DECISION == "text" else f"p_true>={P_TRUE_THRESHOLD:g}"
)


def is_rule_method(method: str | None) -> bool:
    """Whether a verdict's method names a rule (or ``empty``), not the LM judge."""
    return bool(method) and method not in JUDGE_METHODS


@dataclass(frozen=True)
class Judgement:
    """One verdict.

    Attributes:
        correct: None when the judge's reply could not be parsed (a judge error).
        method: The rule that decided, ``judge`` or ``judge_error``.
        explanation: The rule's reason or the judge's explanation.
        p_true: The judge's probability of TRUE at its decision token, when the backend
            returned log-probabilities; None for rule verdicts.
    """

    correct: bool | None
    method: str
    explanation: str = ""
    p_true: float | None = None

    @property
    def error(self) -> bool:
        return self.correct is None

    @property
    def by_rule(self) -> bool:
        return is_rule_method(self.method)


_DECISION_HEADER = re.compile(r"\[\[\s*##\s*decision\s*##\s*\]\]\s*|\"decision\"\s*:\s*\"?\s*")
_VERDICT_WORD = re.compile(r"\b(?:TRUE|FALSE)\b", re.IGNORECASE)


def _entries(logprobs: Any) -> list[Mapping[str, Any]]:
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else logprobs
    return [entry for entry in content or () if isinstance(entry, Mapping)]


def decision_probability(logprobs: Any) -> float | None:
    """P(TRUE) at the judge's decision token, from an OpenAI-shaped ``logprobs`` value.

    ``logprobs`` is what DSPy puts in ``Prediction.logprobs`` when the LM was asked for them:
    ``{"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}, ...]}, ...]}``.
    The decision token is the first one after the ``decision`` field's marker (the chat
    format's ``[[ ## decision ## ]]`` or a JSON key), else the last TRUE or FALSE written. The
    probability mass of the alternatives there that begin TRUE (``T``, ``True``, ``TRUE``) is
    set against the mass of those that begin FALSE; None when neither is among them.
    """
    entries = _entries(logprobs)
    if not entries:
        return None
    tokens = [str(entry.get("token") or "") for entry in entries]
    text = "".join(tokens)
    headers = list(_DECISION_HEADER.finditer(text))
    words = list(_VERDICT_WORD.finditer(text))
    if headers:
        offset = headers[-1].end()
    elif words:
        offset = words[-1].start()
    else:
        return None
    end = 0
    for token, entry in zip(tokens, entries, strict=True):
        end += len(token)
        if end > offset and token[max(0, len(token) - (end - offset)) :].strip(" \n\t\"'"):
            return _true_share(entry)
    return None


def _true_share(entry: Mapping[str, Any]) -> float | None:
    alternatives = {str(entry.get("token") or ""): entry.get("logprob")}
    for top in entry.get("top_logprobs") or ():
        alternatives.setdefault(str(top.get("token") or ""), top.get("logprob"))
    mass = {"TRUE": 0.0, "FALSE": 0.0}
    for token, logprob in alternatives.items():
        word = token.strip(" \n\t\"'").upper()
        if not word or logprob is None:
            continue
        for verdict in mass:
            if verdict.startswith(word) or word.startswith(verdict):
                mass[verdict] += math.exp(float(logprob))
    total = mass["TRUE"] + mass["FALSE"]
    return mass["TRUE"] / total if total > 0 else None


class Autorater:
    """The FRAMES autorater as a DSPy metric.

    Args:
        judge_lm: The judge; None uses the LM configured in ``dspy.settings`` at call time. Keep
            it separate from the program's LM where you can.
        protocol: How the LM is used (:data:`~frames_dspy.judge.protocols.JUDGE_PROTOCOLS`):
            ``rules+extract`` (rules; then the LM extracts the response's answer and the rules
            compare it; then the LM's verdict), ``rules+lm`` (rules, then the verdict) or
            ``lm`` (the paper's: the verdict on every item). Runs use
            :data:`~frames_dspy.judge.protocols.DEFAULT_PROTOCOL`
            (:func:`frames_dspy.run.session.make_judge`); a bare ``Autorater`` asks for verdicts.
        use_rules: False is the ``lm`` protocol (kept for callers of earlier versions).
        decide_by: ``text`` (the judge's written TRUE/FALSE) or ``p_true`` (P(TRUE) against
            ``threshold``; the text decides when the backend returns no log-probabilities).
        threshold: The P(TRUE) threshold for ``decide_by="p_true"``.
        logprobs: Ask the judge for log-probabilities; None asks when the LM says it supports
            them (``"logprobs" in lm.supported_params``).

    Call it as a metric, ``autorater(example, pred, trace=None)``: a float (1.0 or 0.0) for
    evaluation, a bool while an optimizer bootstraps (``trace`` set). ``judge()`` returns the
    full :class:`Judgement`. ``calls`` counts LM judge calls and ``errors`` unparseable replies;
    one autorater may serve many threads.
    """

    def __init__(
        self,
        judge_lm: dspy.BaseLM | None = None,
        *,
        protocol: str = "rules+lm",
        use_rules: bool = True,
        decide_by: str = DEFAULT_DECISION,
        threshold: float = P_TRUE_THRESHOLD,
        logprobs: bool | None = None,
    ):
        if protocol not in JUDGE_PROTOCOLS:
            raise ValueError(f"protocol={protocol!r}; choose one of {', '.join(JUDGE_PROTOCOLS)}")
        if decide_by not in DECISION_MODES:
            raise ValueError(f"decide_by={decide_by!r}; choose one of {', '.join(DECISION_MODES)}")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold={threshold!r} must be between 0 and 1")
        self.judge_lm = judge_lm
        self.protocol = protocol if use_rules else "lm"
        self.use_rules = self.protocol != "lm"
        self.decide_by = decide_by
        self.threshold = threshold
        self.logprobs = logprobs
        self._predict = dspy.Predict(JudgeAnswer)
        self._extract = dspy.Predict(ExtractAnswer)
        self._lock = threading.Lock()
        self.errors = 0
        self.calls = 0

    def __deepcopy__(self, memo):
        return self

    def _wants_logprobs(self, lm: Any) -> bool:
        if self.logprobs is not None:
            return self.logprobs
        try:
            return "logprobs" in (getattr(lm, "supported_params", None) or ())
        except Exception as err:  # a provider DSPy cannot describe: judge from the text
            logger.debug("cannot tell whether %s returns logprobs: %s", lm, err)
            return False

    def rule_verdict(self, question: str, gold: str, response: str) -> Judgement | None:
        """The rules' verdict, or None when they leave the item to the LM judge."""
        if not str(response or "").strip():
            return Judgement(False, "empty", "the response is empty")
        if not self.use_rules:
            return None
        verdict = decide(question, gold, str(response))
        if verdict is None:
            return None
        return Judgement(verdict.correct, verdict.rule, verdict.reason)

    def judge(self, question: str, gold: str, response: str) -> Judgement:
        """Decide whether ``response`` carries the meaning and vital facts of ``gold``."""
        ruled = self.rule_verdict(question, gold, response)
        if ruled is not None:
            return ruled
        if self.protocol == "rules+extract":
            extracted = self.extract_verdict(question, gold, str(response))
            if extracted is not None:
                return extracted
        return self.lm_verdict(question, gold, str(response))

    def extract_verdict(self, question: str, gold: str, response: str) -> Judgement | None:
        """Ask the LM which answer the response commits to and let the rules compare it.

        FALSE (``extract_none``) when the LM finds no answer; None (the verdict question
        decides) when its reply cannot be parsed, its answer is not in the response, or the
        rules cannot decide on it.
        """
        with self._lock:
            self.calls += 1
        try:
            with dspy.context(lm=self.judge_lm) if self.judge_lm else nullcontext():
                out = self._extract(question=question, response=response)
        except (AdapterParseError, ValueError) as err:
            logger.warning("extraction reply could not be parsed: %s", err)
            return None
        answer = " ".join(str(out.answer or "").split())
        if no_answer(answer):
            return Judgement(False, "extract_none", "the response commits to no single answer")
        if not grounded(answer, response):
            logger.debug("extracted %r is not in the response; asking for a verdict", answer)
            return None
        answer = widen(answer, response)
        verdict = decide(question, gold, answer)
        if verdict is None or verdict.rule in WHOLE_RESPONSE_RULES:
            return None  # the span may leave out what the response carries elsewhere
        why = f"the response commits to {answer!r}; {verdict.rule}: {verdict.reason}"
        return Judgement(verdict.correct, "extract", why)

    def lm_verdict(self, question: str, gold: str, response: str) -> Judgement:
        """Ask the judge LM (no rules): the verdict, with P(TRUE) where the backend gives it."""
        with self._lock:
            self.calls += 1
        lm = self.judge_lm or dspy.settings.lm
        config = (
            {"logprobs": True, "top_logprobs": TOP_LOGPROBS} if self._wants_logprobs(lm) else {}
        )
        try:
            with dspy.context(lm=self.judge_lm) if self.judge_lm else nullcontext():
                out = self._predict(
                    question=question, gold_answer=gold, response=response, config=config
                )
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
        p_true = decision_probability(out.get("logprobs")) if config else None
        correct = decision == "TRUE"
        if self.decide_by == "p_true" and p_true is not None:
            correct = p_true >= self.threshold
        return Judgement(correct, "judge", str(out.explanation).strip(), p_true)

    def __call__(self, example: Any, pred: Any, trace: Any = None) -> float | bool:
        verdict = self.judge(example.question, example.answer, getattr(pred, "answer", ""))
        correct = bool(verdict.correct)
        return correct if trace is not None else float(correct)


def method_counts(methods: Sequence[str | None]) -> dict[str, int]:
    """Verdicts per method, most frequent first (for reports)."""
    counts: dict[str, int] = {}
    for method in methods:
        key = method or "unknown"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
