"""Prompt-lookup decoding: draft the next tokens by copying from the context, verify in one batch.

A small model writing search queries copies long spans of its prompt (titles and opening lines
of the articles found so far), token by token, each token one full pass over the model. When the
last :data:`MATCH_TOKENS` tokens also occur earlier in the context, the tokens that followed
them there are a likely continuation: llama-cpp-python's ``generate`` evaluates them together
with the sampled token in one batch and keeps the prefix the model itself would have chosen, so
greedy output is unchanged (up to the floating-point order of batched sums: a near-tie can
tip, as with any change of batch size).

Measured on this 2-core AVX-512 machine with flash attention on (one thread, 1,000 tokens of
context): one token takes 89 ms, a batch of 2-63 tokens about 35 ms a token (llama.cpp's flash
attention has a slow path for fewer than 64 query rows), a batch of 64 only 700 ms. So drafts
are long (up to 63 tokens, filling one 64-token batch) and made only once the model is clearly
copying (a match of 6 tokens); without flash attention small batches are cheap and drafts of
15 tokens waste less. llama-cpp-python's own ``LlamaPromptLookupDecoding`` makes the model keep
logits for every prompt token (a 151,936-wide row each); the engine's ``eval``
(:func:`~frames_dspy.lm.engine.prompt_cache.cached_class`) asks for them only at a draft's
positions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["FAST_BATCH", "MATCH_TOKENS", "LookupDrafts", "draft_tokens_for"]

#: Tokens the end of the context must share with an earlier span before it is copied.
MATCH_TOKENS = 6

#: A batch this large leaves llama.cpp's slow small-batch attention path (see above).
FAST_BATCH = 64


def draft_tokens_for(flash_attn: bool) -> int:
    """The draft length that pays on this engine: one fast batch, or a short cheap one."""
    return FAST_BATCH - 1 if flash_attn else 15


class LookupDrafts:
    """A draft model for ``llama_cpp.Llama``: the continuation of the latest earlier match.

    Args:
        n_draft: Tokens to propose at most.
        match: Length of the context's final n-gram that must occur earlier.
    """

    def __init__(self, n_draft: int, match: int = MATCH_TOKENS):
        if n_draft < 1 or match < 1:
            raise ValueError(f"n_draft={n_draft} and match={match} must be at least 1")
        self.n_draft = int(n_draft)
        self.match = int(match)
        self.proposed = 0  # drafts made, for the tests and the curious

    def __call__(self, input_ids: Any, /, **_: Any) -> np.ndarray:
        ids = np.asarray(input_ids)
        n = len(ids)
        if n <= self.match:
            return np.array([], dtype=np.intc)
        tail = ids[n - self.match :]
        # Windows that start early enough to have at least one token after them.
        windows = np.lib.stride_tricks.sliding_window_view(ids[: n - 1], self.match)
        starts = np.flatnonzero((windows == tail).all(axis=1))
        starts = starts[starts + self.match < n]
        if not len(starts):
            return np.array([], dtype=np.intc)
        begin = int(starts[-1]) + self.match
        self.proposed += 1
        return ids[begin : min(begin + self.n_draft, n)].astype(np.intc)
