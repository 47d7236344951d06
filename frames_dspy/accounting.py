"""LM accounting shared by every runner: a call budget and a per-question token meter.

Both are DSPy callbacks attached to LM instances. They fire before DSPy asks its cache, so
calls answered from the cache are counted too: a budget that skipped cached calls could not
bound a run that later stops hitting the cache, and a token cost that skipped them would make
a configuration that repeats earlier calls look cheaper than it is.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback

from frames_dspy.programs.packing import CHARS_PER_TOKEN

__all__ = ["CallBudget", "TokenMeter", "attached_callbacks", "metered_question"]


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


# Per-question accumulator [prompt tokens, completion tokens, calls], set by the thread that
# runs the question; LM calls made outside a question (optimizers) are not metered.
_QUESTION_METER: ContextVar[list[int] | None] = ContextVar("frames_question_meter", default=None)


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
    """Meters an LM's calls per question (see :func:`metered_question`), cache or not."""

    def on_lm_start(self, call_id, instance, inputs):
        meter = _QUESTION_METER.get()
        if meter is not None:
            prompt = inputs.get("messages") or inputs.get("prompt")
            meter[0] += _tokens(_text_of(prompt))
            meter[2] += 1

    def on_lm_end(self, call_id, outputs, exception=None):
        meter = _QUESTION_METER.get()
        if meter is not None and outputs is not None:
            meter[1] += _tokens(_text_of(outputs))


@contextlib.contextmanager
def metered_question() -> Iterator[list[int]]:
    """Meter the LM calls this thread makes in the block: yields [prompt, completion, calls]."""
    meter = [0, 0, 0]
    token = _QUESTION_METER.set(meter)
    try:
        yield meter
    finally:
        _QUESTION_METER.reset(token)


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
