"""A comparison of two run folders as readable markdown: what ``python -m frames_dspy.compare``
prints (with ``--json``, :func:`~frames_dspy.results.comparison.comparison_dict` instead).

Per condition pair (see :mod:`frames_dspy.results.comparison`): accuracy and recall differences
with paired bootstrap 95% intervals, an exact McNemar test and the questions that flipped each
way.
"""

from __future__ import annotations

from typing import Any

from frames_dspy.results.comparison import (
    SMALL_N,
    Comparison,
    PairComparison,
    format_interval,
    short_hash,
)

__all__ = ["format_text"]

#: In the text output, id lists longer than this are cut (``--json`` always lists every id).
_MAX_LISTED = 25


def _num(value: float | None, digits: int = 3, *, sign: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _accuracy_row(pair: PairComparison) -> str:
    if pair.accuracy_a is None and pair.accuracy_b is None:
        return "| accuracy | not measured | not measured | — | — |"
    return (
        f"| accuracy | {_num(pair.accuracy_a)} ({pair.correct_a}/{pair.n}) | "
        f"{_num(pair.accuracy_b)} ({pair.correct_b}/{pair.n}) | "
        f"{_num(pair.accuracy_diff, sign=True)} | {format_interval(pair.accuracy_ci95)} |"
    )


def _ids(ids: list[Any]) -> str:
    if not ids:
        return "none"
    shown = ", ".join(str(i) for i in ids[:_MAX_LISTED])
    more = len(ids) - _MAX_LISTED
    return shown + (f", … and {more} more (--json lists all)" if more > 0 else "")


def _spec_line(pair: PairComparison) -> list[str]:
    if pair.spec_differ is None:
        return []
    if not pair.spec_differ:
        return ["program specs: the same (instructions and demos are not part of the spec)"]
    changed = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in pair.spec_differ.items())
    return [f"program specs that differ: {changed}"]


def _search_rows(pair: PairComparison) -> list[str]:
    """How each side searched, for the pairs where a side has the figure ("—" where the
    other has none): near-repeated queries, an agent's steps and articles read."""
    rows = (
        ("near-repeated queries (share)", pair.near_repeat_a, pair.near_repeat_b, 2),
        ("agent steps / question", pair.steps_per_q_a, pair.steps_per_q_b, 1),
        ("articles read / question", pair.articles_read_per_q_a, pair.articles_read_per_q_b, 1),
    )
    lines = []
    for label, a, b, digits in rows:
        if a is None and b is None:
            continue
        diff = _num(b - a, digits, sign=True) if a is not None and b is not None else "—"
        lines.append(f"| {label} | {_num(a, digits)} | {_num(b, digits)} | {diff} | |")
    return lines


def _pair_text(pair: PairComparison) -> list[str]:
    title = (
        pair.condition_a
        if pair.condition_a == pair.condition_b
        else f"{pair.condition_a} (A) vs {pair.condition_b} (B)"
    )
    ea, eb = pair.errors["a"], pair.errors["b"]
    token_ratio = (
        f" (x{pair.tokens_per_q_b / pair.tokens_per_q_a:.2f})"
        if pair.tokens_per_q_a and pair.tokens_per_q_b is not None
        else ""
    )
    token_diff = (
        f"{pair.tokens_per_q_b - pair.tokens_per_q_a:+.0f}{token_ratio}"
        if pair.tokens_per_q_a is not None and pair.tokens_per_q_b is not None
        else "—"
    )
    lines = [
        f"## {title}",
        "",
        f"paired questions: {pair.n}; only in A: {len(pair.only_in_a)}"
        + (f" ({_ids(pair.only_in_a)})" if pair.only_in_a else "")
        + f"; only in B: {len(pair.only_in_b)}"
        + (f" ({_ids(pair.only_in_b)})" if pair.only_in_b else ""),
        *_spec_line(pair),
        "",
        "| on the paired questions | A | B | B - A | 95% interval (paired bootstrap) |",
        "|---|---:|---:|---:|---|",
        _accuracy_row(pair),
        f"| recall after last round (n={pair.recall_n}) | {_num(pair.recall_final_a)} | "
        f"{_num(pair.recall_final_b)} | {_num(pair.recall_final_diff, sign=True)} | "
        f"{format_interval(pair.recall_final_ci95)} |",
        f"| recall after round 1 (n={pair.recall_n}) | {_num(pair.recall_round1_a)} | "
        f"{_num(pair.recall_round1_b)} | {_num(pair.recall_round1_diff, sign=True)} | "
        f"{format_interval(pair.recall_round1_ci95)} |",
        f"| tokens / question | {_num(pair.tokens_per_q_a, 0)} | {_num(pair.tokens_per_q_b, 0)} "
        f"| {token_diff} | |",
        *_search_rows(pair),
        f"| program errors (counted wrong) | {ea.program} | {eb.program} | | |",
        f"| judge errors (counted wrong) | {ea.judge} | {eb.judge} | | |",
        "",
        f"recall: {pair.recall_no_gold} paired questions without a gold article in either run "
        f"left out; null in A only: {pair.recall_null_a_only}, in B only: "
        f"{pair.recall_null_b_only} (counted as 0 there)",
    ]
    if pair.mcnemar_p is not None:
        lines += [
            f"McNemar exact test: A wrong -> B right {pair.a_to_b.count}, A right -> B wrong "
            f"{pair.b_to_a.count}, p = {pair.mcnemar_p:.4g}",
            f"A wrong -> B right: {_ids(pair.a_to_b.ids)}",
            f"A right -> B wrong: {_ids(pair.b_to_a.ids)}",
        ]
    if ea.judge or eb.judge:
        lines.append(
            f"judge errors: A {_ids(ea.judge_ids)}; B {_ids(eb.judge_ids)} "
            "(re-judge them before trusting a small difference)"
        )
    if pair.n < SMALL_N:
        lines.append(
            f"note: only {pair.n} paired questions; the bootstrap interval runs narrow on so "
            "few, so lean on the McNemar p"
        )
    lines += ["", f"**{pair.verdict}**"]
    return lines


def format_text(comparison: Comparison) -> str:
    """The comparison as readable markdown: a header, then one block per condition pair."""
    banner = [f"**WARNING: {w}**" for w in comparison.warnings]
    lines = [
        "# Paired comparison (B - A)",
        "",
        *banner,
        *([""] if banner else []),
        f"A: {comparison.run_a}",
        f"B: {comparison.run_b}",
        f"dataset: {short_hash(comparison.dataset_sha256_a)}"
        + (
            ""
            if comparison.dataset_sha256_a == comparison.dataset_sha256_b
            else f" vs {short_hash(comparison.dataset_sha256_b)}"
        )
        + f"; corpus: {short_hash(comparison.corpus_sha256_a)}"
        + (
            ""
            if comparison.corpus_sha256_a == comparison.corpus_sha256_b
            else f" vs {short_hash(comparison.corpus_sha256_b)}"
        ),
        "settings that differ: "
        + (
            "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in comparison.settings_differ.items())
            or "none"
        ),
        f"bootstrap: {comparison.bootstrap} resamples of the paired questions, seed "
        f"{comparison.seed}",
    ]
    for pair in comparison.pairs:
        lines += ["", *_pair_text(pair)]
    if banner:
        lines += ["", *banner]
    return "\n".join(lines) + "\n"
