"""Budgets and accounting: context windows, token counts and usage totals of LM calls."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dspy

from frames_dspy.lm.engine.llama_engine import LlamaCppEngine
from frames_dspy.lm.litellm_setup import _import_litellm

__all__ = ["UsageTotals", "context_window", "count_tokens", "usage_totals"]

logger = logging.getLogger(__name__)


def context_window(lm: dspy.BaseLM) -> int | None:
    """How many tokens the model can take (prompt plus output), if known.

    Args:
        lm: An LM from :func:`make_lm` or any ``dspy.LM``.

    Returns:
        The embedded model's ``n_ctx``; for API models the ``n_ctx`` given to :func:`make_lm`,
        else LiteLLM's ``max_input_tokens`` for the model; None when unknown.
    """
    engine = getattr(lm, "engine", None)
    if isinstance(engine, LlamaCppEngine):
        return engine.n_ctx
    declared = getattr(lm, "declared_context_window", None)
    if declared:
        return int(declared)
    model = getattr(lm, "model", None)
    if not isinstance(model, str) or "/" not in model or model.startswith("local/"):
        return None
    litellm = _import_litellm()
    try:
        info = litellm.get_model_info(model)
    except Exception as exc:  # noqa: BLE001 - LiteLLM raises plain Exception for unmapped models
        logger.debug("no context window known for %s: %s", model, exc)
        return None
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return int(window) if window else None


def count_tokens(lm: dspy.BaseLM, text: str) -> int:
    """Tokens of ``text`` for this LM: exact for embedded models, ``ceil(chars / 4)`` otherwise.

    Args:
        lm: An LM from :func:`make_lm` or any DSPy LM.
        text: The text.

    Returns:
        The token count (without chat-template overhead).
    """
    engine = getattr(lm, "engine", None)
    if isinstance(engine, LlamaCppEngine):
        return engine.count_tokens(text)
    return math.ceil(len(text) / 4)


@dataclass(frozen=True)
class UsageTotals:
    """Token and call counts over LM history entries.

    Attributes:
        calls: History entries counted.
        cached_calls: Entries answered from DSPy's cache (they carry no usage).
        prompt_tokens: Prompt tokens of the calls that reached the model.
        completion_tokens: Completion tokens of the calls that reached the model.
    """

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


def usage_totals(history: Iterable[Mapping[str, Any]]) -> UsageTotals:
    """Sum token usage over history entries (``lm.history`` or a slice of it).

    DSPy records an empty ``usage`` for a call answered from its cache, which is how cached
    calls are told apart: they count as calls and as cached calls but add no tokens.

    Args:
        history: History entries, each a mapping with a ``usage`` dict.

    Returns:
        The totals.
    """
    calls = cached = prompt = completion = 0
    for entry in history:
        calls += 1
        usage = entry.get("usage") or {}
        if not usage:
            cached += 1
            continue
        prompt += int(usage.get("prompt_tokens") or 0)
        completion += int(usage.get("completion_tokens") or 0)
    return UsageTotals(calls, cached, prompt, completion)
