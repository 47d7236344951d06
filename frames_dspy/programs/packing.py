"""Fitting articles into the answer prompt under a token budget.

Budgets are set in tokens and converted to characters at :data:`CHARS_PER_TOKEN`, so packing
needs no tokenizer pass. Every article keeps a fair share of the budget and none is dropped;
the result records how much of each article was kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from frames_dspy.data.corpus import Article
from frames_dspy.lm.accounting import CHARS_PER_TOKEN

__all__ = ["CHARS_PER_TOKEN", "PackedContext", "pack_articles"]


@dataclass
class PackedContext:
    """Articles rendered into one prompt field, with a record of what was cut."""

    text: str
    article_ids: list[str]
    budget_tokens: int
    used_tokens: int
    kept_fraction: dict[str, float] = field(default_factory=dict)

    @property
    def n_truncated(self) -> int:
        return sum(1 for f in self.kept_fraction.values() if f < 1.0)

    def summary(self) -> dict[str, Any]:
        return {
            "budget_tokens": self.budget_tokens,
            "used_tokens": self.used_tokens,
            "articles": len(self.article_ids),
            "truncated": self.n_truncated,
            "kept_fraction": {k: round(v, 4) for k, v in self.kept_fraction.items()},
        }


def _fair_shares(lengths: Sequence[int], budget: int) -> list[int]:
    # Water-filling: short articles keep all their text and leave the rest of their share to
    # the longer ones, which split what remains equally.
    shares = [0] * len(lengths)
    remaining, pending = budget, sorted(range(len(lengths)), key=lambda i: lengths[i])
    while pending:
        share = remaining // len(pending)
        i = pending[0]
        if lengths[i] <= share:
            shares[i] = lengths[i]
            remaining -= lengths[i]
            pending.pop(0)
        else:
            for j in pending:
                shares[j] = share
            break
    return shares


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit * 0.8:
        cut = cut[:space]
    return cut.rstrip() + " …"


def pack_articles(articles: Sequence[Article], budget_tokens: int) -> PackedContext:
    """Render articles in order, each cut to a fair share of the budget; none is dropped.

    Args:
        articles: In retrieval order; that order is kept in the prompt.
        budget_tokens: Tokens for the whole field (estimated at ``CHARS_PER_TOKEN``).

    Returns:
        The text and, per article, the fraction of its text kept.
    """
    if budget_tokens <= 0:
        raise ValueError(f"budget_tokens={budget_tokens} must be positive")
    headers = [f"[{i}] {a.title}\n" for i, a in enumerate(articles, start=1)]
    # Reserve the headers, the blank lines between articles and a " …" cut mark per article.
    overhead = sum(len(h) for h in headers) + 2 * max(len(articles) - 1, 0) + 2 * len(articles)
    budget_chars = int(budget_tokens * CHARS_PER_TOKEN) - overhead
    shares = _fair_shares([len(a.text) for a in articles], max(budget_chars, 0))
    parts, kept = [], {}
    for header, article, share in zip(headers, articles, shares, strict=True):
        body = _cut(article.text, share) if share > 0 else "…"
        parts.append(header + body)
        kept[article.id] = min(share, len(article.text)) / max(len(article.text), 1)
    text = "\n\n".join(parts)
    return PackedContext(
        text=text,
        article_ids=[a.id for a in articles],
        budget_tokens=budget_tokens,
        used_tokens=round(len(text) / CHARS_PER_TOKEN),
        kept_fraction=kept,
    )
