"""Paired statistics for comparing two runs: an exact McNemar test, a paired bootstrap."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["mcnemar_exact", "paired_bootstrap_ci"]


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value for ``b`` and ``c`` discordant pairs.

    Under "A and B are equally accurate" each discordant question is equally likely to favour
    either side, so ``min(b, c)`` follows a Binomial(b + c, 1/2) tail:
    ``p = min(1, 2 * P(X <= min(b, c)))``, and 1 when nothing flipped. Computed exactly
    with integers, so it holds for any number of questions.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)


def paired_bootstrap_ci(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> list[float] | None:
    """Percentile bootstrap interval for ``mean(b) - mean(a)`` over paired values.

    Questions (pairs) are drawn with replacement, so each resample keeps a question's A and B
    values together. Seeded with ``numpy.random.default_rng(seed)``: the same inputs and seed
    give the same interval.

    Returns:
        ``[low, high]``, or None when there are no pairs.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired values must be two lists of one length, got {a.shape}, {b.shape}")
    diff = b - a
    n = diff.size
    if n == 0:
        return None
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    # Draw in blocks so 10,000 resamples of 824 questions stay a few MB.
    block = max(1, 1_000_000 // n)
    for start in range(0, resamples, block):
        stop = min(resamples, start + block)
        means[start:stop] = diff[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return [float(low), float(high)]
