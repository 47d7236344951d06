"""How the embedded model reuses work between calls: exact prefix reuse, and saved prompt states.

llama-cpp-python keeps one KV cache and, when a prompt starts like the one before, evaluates
only the rest. This module changes two things about that.

**Reuse is exact.** llama.cpp's matrix kernels work on tiles of a batch's rows, and rows at a
batch's ragged end go through other kernels, so a token's values depend slightly on where the
batch it was evaluated in began and ended. llama-cpp-python cuts the rest of a prompt into
batches counted from wherever the reuse stopped, so the same prompt could give different
logits after different earlier prompts and a greedy near-tie could tip: an answer depended on
which calls ran before it. Here a prompt reuses the cache only up to a multiple of
:data:`ALIGN` tokens and never past the prompt that was evaluated (a reply's tokens are
computed one or a few at a time), and every prompt is cut into batches at multiples of
``n_batch`` counted from its first token. Each token then lands in the same place of the same
kind of batch as in a fresh evaluation, and the prompt's logits are the same bit for bit (see
``tests/lm/engine/test_prompt_cache.py``).

**Recent prompts are saved.** The programs interleave prompts, so the one live cache is often
the wrong one: DSPy's JSON fallback (sent after a reply it cannot parse) has another system
message, so the next round's query prompt, which extends the round before the fallback, would
start from nothing; and each question's first query prompt follows the previous question's
answer prompt. :class:`PrefixStates` copies the KV cells out of llama.cpp after each call
(``llama_state_seq_get_data``, about 12 KB a token for the 0.5B model) and, before a call,
copies back the saved state that shares the longest usable prefix with the new prompt when that
beats the live cache.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "ALIGN",
    "DEFAULT_MB",
    "MIN_GAIN",
    "PrefixStates",
    "aligned_chunks",
    "cached_class",
    "common_prefix",
    "usable_prefix",
]

#: A reused prefix ends at a multiple of this many tokens (a multiple of the kernels' tiles).
ALIGN = 32

#: Memory the saved states may take unless told, in MiB: about fourteen 3,000-token prompts of
#: the 0.5B model (12 KB a token) or six of the 1.5B (28 KB), enough for a multi-step
#: question's rounds, their JSON fallbacks and the previous question's answer prompt.
DEFAULT_MB = 512

#: Restore a saved state only when it spares at least this many prompt tokens (a restore
#: copies the state's bytes: tens of milliseconds for thousands of tokens, about what a few
#: dozen prompt tokens take to evaluate on two cores).
MIN_GAIN = 32


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if len(differ) else n


def usable_prefix(shared: int, exact: int, prompt: int) -> int:
    """The cached tokens a prompt of ``prompt`` tokens may reuse: no more than it shares with
    the cache, than the cache holds of evaluated prompt (``exact``), or than leaves one token
    to evaluate for the logits, rounded down to a multiple of :data:`ALIGN`."""
    return max(0, min(shared, exact, prompt - 1)) // ALIGN * ALIGN


def aligned_chunks(start: int, count: int, size: int) -> list[int]:
    """Sizes of the batches that evaluate ``count`` tokens from position ``start``, cut at the
    multiples of ``size`` (so a fresh prompt and a resumed one are cut at the same places)."""
    sizes, at, end = [], start, start + count
    while at < end:
        step = min(end, (at // size + 1) * size) - at
        sizes.append(step)
        at += step
    return sizes


@dataclass(eq=False)  # compared by identity: list.remove must not compare token arrays
class _Saved:
    tokens: np.ndarray
    data: bytes
    exact: int  # leading tokens evaluated as prompt (the rest is a reply)


class PrefixStates:
    """The KV states of recent prompts (with their replies), least recently used first.

    A state that a later one extends is dropped when the later one is saved; past
    ``capacity_mb`` the least recently saved or restored states make room.

    Args:
        capacity_mb: Memory the saved states may take, in MiB.
        min_gain: Restore only when a state spares at least this many tokens.
        low: llama-cpp-python's ctypes module (tests pass a fake).
    """

    def __init__(self, capacity_mb: float, *, min_gain: int = MIN_GAIN, low: Any = None):
        if capacity_mb <= 0:
            raise ValueError(
                f"capacity_mb={capacity_mb} must be positive (0 means no saved states)"
            )
        self.capacity = int(capacity_mb * 2**20)
        self.min_gain = int(min_gain)
        self._low = low
        self._saved: list[_Saved] = []
        self.restored_tokens = 0  # prompt tokens the last restore spared (for perf counts)

    @property
    def low(self) -> Any:
        if self._low is None:
            self._low = sys.modules["llama_cpp.llama_cpp"]
        return self._low

    def __len__(self) -> int:
        return len(self._saved)

    @property
    def bytes(self) -> int:
        """Memory the saved states take."""
        return sum(len(s.data) for s in self._saved)

    def restore(self, llama: Any, tokens: Sequence[int], live: int) -> int:
        """Load the saved state that best starts ``tokens`` into ``llama``, if it beats the
        live cache's usable prefix ``live`` by ``min_gain`` tokens.

        Returns:
            The prompt tokens it spares over the live cache (0: nothing restored).
        """
        self.restored_tokens = 0
        best, length = None, live
        for saved in self._saved:
            usable = usable_prefix(common_prefix(saved.tokens, tokens), saved.exact, len(tokens))
            if usable > length:
                best, length = saved, usable
        if best is None or length - live < self.min_gain:
            return 0
        size = len(best.data)
        buffer = (ctypes.c_uint8 * size).from_buffer_copy(best.data)
        llama._ctx.kv_cache_seq_rm(-1, 0, -1)
        if self.low.llama_state_seq_set_data(llama._ctx.ctx, buffer, size, 0) != size:
            # Nothing usable is left in the cache: the prompt starts from scratch.
            llama._ctx.kv_cache_seq_rm(-1, 0, -1)
            llama.n_tokens, llama._exact_tokens = 0, 0
            return 0
        n = len(best.tokens)
        llama.input_ids[:n] = best.tokens
        llama.n_tokens, llama._exact_tokens = n, best.exact
        self._saved.remove(best)
        self._saved.append(best)  # most recently used
        self.restored_tokens = length - live
        return self.restored_tokens

    def save(self, llama: Any) -> None:
        """Copy the evaluated tokens' KV state out of ``llama`` into the newest slot."""
        n = int(llama.n_tokens)
        if n == 0:
            return
        # Cells past n_tokens (rejected drafts) are stale; llama-cpp-python drops them lazily.
        llama._ctx.kv_cache_seq_rm(-1, n, -1)
        context = llama._ctx.ctx
        size = int(self.low.llama_state_seq_get_size(context, 0))
        buffer = (ctypes.c_uint8 * size)()
        written = int(self.low.llama_state_seq_get_data(context, buffer, size, 0))
        if written <= 0 or written > size:
            return
        tokens, exact = np.array(llama.input_ids[:n], copy=True), min(llama._exact_tokens, n)
        self._saved = [
            s
            for s in self._saved
            if common_prefix(s.tokens, tokens) < len(s.tokens) or s.exact > exact
        ]
        self._saved.append(_Saved(tokens, ctypes.string_at(buffer, written), exact))
        while len(self._saved) > 1 and self.bytes > self.capacity:
            del self._saved[0]


@functools.cache
def cached_class(base: type) -> type:
    """A subclass of ``base`` (``llama_cpp.Llama``) that reuses cached prompts exactly.

    Its ``generate`` restores the best of the model's ``prefix_states`` (when it has them),
    keeps only the usable prefix of the cache (:func:`usable_prefix`) and saves the state when
    the generation ends (finished, stopped or abandoned). Its ``eval`` cuts a prompt at the
    multiples of ``n_batch`` (:func:`aligned_chunks`) with logits at the last token only, and
    evaluates a generation step (the sampled token and any draft of
    :mod:`~frames_dspy.lm.engine.lookup_decoding`) as one batch with logits at every position, which
    llama-cpp-python samples a draft's tokens from.
    """

    def generate(self, tokens, *args, **kwargs):
        tokens = list(tokens)
        states = getattr(self, "prefix_states", None)
        shared = common_prefix(self.input_ids[: self.n_tokens], tokens)
        live = usable_prefix(shared, self._exact_tokens, len(tokens))
        if states is not None:
            live += states.restore(self, tokens, live)  # what a restored state spares
        # llama-cpp-python reuses what it finds in input_ids[:n_tokens]: leave it just that.
        self._ctx.kv_cache_seq_rm(-1, live, -1)
        self.n_tokens = live
        self._exact_tokens = len(tokens)
        self._step = "prompt"
        try:
            yield from base.generate(self, tokens, *args, **kwargs)
        finally:
            self._step = None
            if states is not None:
                states.save(self)

    def eval(self, tokens):  # noqa: A001 - llama_cpp.Llama's method name
        self._ctx.kv_cache_seq_rm(-1, self.n_tokens, -1)
        if self._step == "reply":
            sizes, every = [len(tokens)], len(tokens) > 1
        else:  # a prompt (the first eval of a generation, or a call from outside one)
            sizes, every = aligned_chunks(self.n_tokens, len(tokens), self.n_batch), False
        if self._step == "prompt":
            self._step = "reply"
        at = 0
        for size in sizes:
            batch = list(tokens[at : at + size])
            at += size
            self._batch.set_batch(batch=batch, n_past=self.n_tokens, logits_all=every)
            self._ctx.decode(self._batch)
            self.input_ids[self.n_tokens : self.n_tokens + size] = batch
            self.n_tokens += size
        self._requires_eval = False

    return type(
        f"Cached{base.__name__}",
        (base,),
        {
            "generate": generate,
            "eval": eval,
            "_exact_tokens": 0,  # leading cached tokens evaluated as prompt
            "_step": None,  # in a generation: "prompt" before its first eval, then "reply"
        },
    )
