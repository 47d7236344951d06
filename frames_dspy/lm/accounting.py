"""LM accounting shared by every runner: a call budget and a per-question meter.

Both work through DSPy callbacks attached to LM instances, which fire before DSPy asks its
cache, so calls answered from the cache are counted too: a budget that skipped cached calls
could not bound a run that later stops hitting the cache, and a token cost that skipped them
would make a configuration that repeats earlier calls look cheaper than it is.

The meter of the question a thread is running also collects what the LM layer reports from
below: cache hits (:func:`note_cache_hit`) and retried faults (:func:`note_retry`). A program
that must stop at a token budget meters its own calls the same way (:func:`own_meter`).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback

__all__ = [
    "CHARS_PER_TOKEN",
    "CallBudget",
    "QuestionMeter",
    "TOKEN_METER",
    "TokenMeter",
    "attached_callbacks",
    "metered",
    "note_cache_hit",
    "note_retry",
    "own_meter",
]

#: English Wikipedia text runs close to 4 characters per token for the Qwen and GPT
#: tokenizers; budgets and metered costs use this ratio, so no tokenizer pass is needed.
CHARS_PER_TOKEN = 4.0


class CallBudget(BaseCallback):
    """Counts every call of the LMs it is attached to, against an optional limit.

    The count never stops a call; callers check :attr:`exhausted` at safe points (before each
    question, trial, optimizer run or final evaluation), so nothing is cut in half.
    """

    def __init__(self, limit: int | None = None):
        if limit is not None and limit < 1:
            raise ValueError(f"max_lm_calls={limit} must be at least 1 (or None for no limit)")
        self.limit = limit
        self.calls = 0
        self._lock = threading.Lock()

    def on_lm_start(self, call_id, instance, inputs):
        with self._lock:
            self.calls += 1

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.calls >= self.limit

    @property
    def remaining(self) -> int | None:
        return None if self.limit is None else max(0, self.limit - self.calls)


@dataclass
class QuestionMeter:
    """What the LM calls of one stretch of work (a question's program, its judge) cost.

    Attributes:
        calls: LM calls started (cached ones included).
        failed_calls: Calls that ended in an error (after their retries).
        cache_hits: Calls answered from DSPy's response cache.
        retries: Faults (rate limits, server errors, timeouts) retried by the LM layer.
        prompt_tokens, completion_tokens: Metered at :data:`CHARS_PER_TOKEN` characters per
            token, cache or not.
    """

    calls: int = 0
    failed_calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


_METER: ContextVar[QuestionMeter | None] = ContextVar("frames_question_meter", default=None)


def _text_of(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("content", "text"):
            if key in value:
                return _text_of(value[key])
        return ""
    if isinstance(value, list | tuple):
        return "".join(_text_of(v) for v in value)
    return str(value)


def _tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class TokenMeter(BaseCallback):
    """Meters an LM's calls into the current thread's :class:`QuestionMeter`, cache or not
    (or, given ``into``, into that meter: :func:`own_meter`)."""

    def __init__(self, into: QuestionMeter | None = None):
        self._into = into

    def _meter(self) -> QuestionMeter | None:
        return self._into if self._into is not None else _METER.get()

    def on_lm_start(self, call_id, instance, inputs):
        meter = self._meter()
        if meter is not None:
            prompt = inputs.get("messages") or inputs.get("prompt")
            meter.prompt_tokens += _tokens(_text_of(prompt))
            meter.calls += 1

    def on_lm_end(self, call_id, outputs, exception=None):
        meter = self._meter()
        if meter is None:
            return
        if exception is not None:
            meter.failed_calls += 1
        elif outputs is not None:
            meter.completion_tokens += _tokens(_text_of(outputs))


#: The one meter callback to attach: LMs attached twice would count every call twice.
TOKEN_METER = TokenMeter()


@contextlib.contextmanager
def metered() -> Iterator[QuestionMeter]:
    """Meter the LM calls this thread makes inside the block (LMs need a :class:`TokenMeter`)."""
    meter = QuestionMeter()
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


@contextlib.contextmanager
def own_meter() -> Iterator[QuestionMeter]:
    """Meter the LM calls this thread makes inside the block into a meter of the caller's own,
    beside the question's meter (which still counts them), whichever LM runs them.

    The meter rides on DSPy's per-thread callbacks (``dspy.context``), not on the LM
    instance, so it works whether or not a runner attached :data:`TOKEN_METER` (an
    optimizer calls programs without one) and never sees another thread's calls. It counts
    exactly as the question's meter does, so a program that stops at a token budget stops
    at the figure its record will show.
    """
    meter = QuestionMeter()
    callbacks = [*dspy.settings.get("callbacks", []), TokenMeter(into=meter)]
    with dspy.context(callbacks=callbacks):
        yield meter


def note_cache_hit() -> None:
    """Count a call answered from the cache against the current meter, if any."""
    meter = _METER.get()
    if meter is not None:
        meter.cache_hits += 1


def note_retry() -> None:
    """Count a retried fault against the current meter, if any."""
    meter = _METER.get()
    if meter is not None:
        meter.retries += 1


@contextlib.contextmanager
def attached_callbacks(lm: dspy.BaseLM, *callbacks: BaseCallback) -> Iterator[None]:
    """Attach callbacks to an LM instance for the duration of the block."""
    added = [cb for cb in callbacks if cb not in lm.callbacks]
    lm.callbacks.extend(added)
    try:
        yield
    finally:
        for cb in added:
            with contextlib.suppress(ValueError):
                lm.callbacks.remove(cb)
