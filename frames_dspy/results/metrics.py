"""Retrieval and query metrics: gold-article recall per round and query repetition.

The autorater (answer correctness) lives in :mod:`frames_dspy.judge`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["gold_recall", "mean_recall", "query_repetition_rate"]


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
