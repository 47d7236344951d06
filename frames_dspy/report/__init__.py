"""Turning a run folder into numbers, tables and plots.

Shared by ``python -m frames_dspy.evaluate``, ``python -m optimize.compile`` and the notebooks,
so every view of a run is computed one way. A run folder holds ``predictions.jsonl`` with one
JSON object per question x condition (see ``frames_dspy.evaluate``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from frames_dspy.files import atomic_write_json
from frames_dspy.judge.autorater import JUDGE_METHODS, is_rule_method, method_counts
from frames_dspy.metrics import mean_recall
from frames_dspy.programs import CONDITIONS, PAPER_ACCURACY
from frames_dspy.run_folder import read_predictions

logger = logging.getLogger(__name__)

__all__ = [
    "PAPER_ACCURACY",
    "CONDITION_ORDER",
    "read_predictions",
    "predictions_frame",
    "wilson_interval",
    "summarize_run",
    "table3_cells",
    "table3_markdown",
    "accuracy_by_reasoning_type",
    "accuracy_by_article_count",
    "failure_breakdown",
    "FAILURE_KINDS",
    "failure_table",
    "failure_examples",
    "plot_failures_by_type",
    "plot_accuracy_by_type",
    "plot_recall_by_round",
    "write_reports",
]

#: Tables list conditions in the order of :data:`frames_dspy.programs.CONDITIONS`.
CONDITION_ORDER = list(CONDITIONS)


def predictions_frame(run: str | Path | Iterable[dict[str, Any]]) -> pd.DataFrame:
    """A DataFrame of a run's predictions (a run folder, a jsonl path, or records)."""
    if isinstance(run, str | Path):
        path = Path(run)
        records = read_predictions(path / "predictions.jsonl" if path.is_dir() else path)
    else:
        records = list(run)
    frame = pd.DataFrame.from_records(records)
    if not frame.empty and "condition" in frame:
        order = [c for c in CONDITION_ORDER if c in set(frame["condition"])]
        order += sorted(set(frame["condition"]) - set(order))
        frame["condition"] = pd.Categorical(frame["condition"], categories=order, ordered=True)
    return frame


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval for a proportion (95% by default); (nan, nan) when n is 0."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(kept) / len(kept) if kept else None


def _total(group: pd.DataFrame, column: str) -> int:
    """Sum of a count column; records written before the column existed count 0."""
    return int(group[column].fillna(0).sum()) if column in group else 0


def _error_kinds(group: pd.DataFrame) -> dict[str, int]:
    if "error" not in group:
        return {}
    failed = group[group["error"].notna()]
    if "error_kind" in failed:
        kinds = failed["error_kind"].fillna(failed["error"].str.split("(").str[0])
    else:  # records written before error_kind existed: the type name leads the repr
        kinds = failed["error"].str.split("(").str[0]
    return {str(k): int(v) for k, v in kinds.value_counts().items()}


def _verdicts(group: pd.DataFrame) -> dict[str, Any]:
    """Who decided: verdicts per method, and how many came from rules and from the LM."""
    methods = [m if isinstance(m, str) else None for m in group["judge_method"]]
    p_true = group["judge_p_true"].dropna() if "judge_p_true" in group else pd.Series([])
    return {
        "verdicts_by_method": method_counts(methods),
        "rule_verdicts": sum(is_rule_method(m) for m in methods),
        "lm_verdicts": sum(m in JUDGE_METHODS for m in methods),
        "lm_verdicts_with_p_true": int(p_true.size),
    }


def _answer_in_context(group: pd.DataFrame) -> dict[str, Any]:
    """How often the gold answer was in the answer step's context, over the questions where
    that could be checked, and how many wrong answers had it there (the model's failures)."""
    if "answer_in_context" not in group:  # records written before the check existed
        flags = pd.Series([None] * len(group), index=group.index, dtype=object)
    else:
        flags = group["answer_in_context"]
    checked = flags.notna()
    present = flags.eq(True)
    return {
        "answer_in_context": float(present[checked].mean()) if checked.any() else None,
        "answer_in_context_n": int(checked.sum()),
        "wrong_with_answer_in_context": int((present & group["correct"].ne(True)).sum()),
    }


def summarize_run(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per condition: accuracy with a 95% interval over every question tried, failures by
    kind, judge errors, who decided (verdicts per method, rules and LM), cached calls and
    retries, whether the gold answer was in the answer step's context, recall per round (over
    every question with a gold article), tokens, LM calls and seconds per question.

    A program error or a judge error counts as not correct, so ``n`` is every question tried
    and nothing is averaged over the successes only; ``accuracy_judged`` leaves judge errors
    out, for comparison.
    """
    summary: dict[str, dict[str, Any]] = {}
    if frame.empty:
        return summary
    for condition, group in frame.groupby("condition", observed=True):
        n = len(group)
        correct = int((group["correct"] == True).sum())  # noqa: E712 - None must not count
        judge_errors = int(group["judge_method"].eq("judge_error").sum())
        program_errors = int(group["error"].notna().sum()) if "error" in group else 0
        low, high = wilson_interval(correct, n)
        judged = n - judge_errors
        tokens = group["prompt_tokens"].fillna(0) + group["completion_tokens"].fillna(0)
        recall, recall_n = mean_recall(group.get("recall", pd.Series(dtype=object)))
        lm_calls = _total(group, "lm_calls") + _total(group, "judge_calls")
        cached = _total(group, "cached_calls") + _total(group, "judge_cached_calls")
        summary[str(condition)] = {
            "n": n,
            "correct": correct,
            "accuracy": correct / n if n else None,
            "ci95": [low, high],
            "accuracy_judged": correct / judged if judged else None,
            "program_errors": program_errors,
            "program_error_rate": program_errors / n if n else 0.0,
            "program_errors_by_kind": _error_kinds(group),
            "judge_errors": judge_errors,
            "judge_calls": int(group["judge_method"].isin(JUDGE_METHODS).sum()),
            **_verdicts(group),
            "lm_calls": lm_calls,
            "cached_calls": cached,
            "retries": _total(group, "retries"),
            "recall_by_round": recall,
            "recall_n": recall_n,
            **_answer_in_context(group),
            "tokens_per_question": float(tokens.mean()),
            "prompt_tokens_per_question": float(group["prompt_tokens"].fillna(0).mean()),
            "metered_tokens_per_question": _total(group, "metered_tokens") / n,
            "lm_calls_per_question": float(group["lm_calls"].fillna(0).mean()),
            "cost_usd": float(group["cost_usd"].sum())
            if "cost_usd" in group and group["cost_usd"].notna().any()
            else None,
            "query_repetition_rate": _mean(group.get("query_repetition_rate", [])),
            "seconds_per_question": float(group["seconds"].mean()),
        }
    return summary


def _fmt(value: float | None, digits: int = 3) -> str:
    return (
        "—"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:.{digits}f}"
    )


def _answer_in_context_text(row: dict[str, Any]) -> str:
    checked = row.get("answer_in_context_n")
    if not checked:
        return "—"
    return f"{_fmt(row.get('answer_in_context'))} ({checked})"


def table3_cells(
    summary: dict[str, dict[str, Any]], *, model: str = ""
) -> tuple[list[str], list[list[str]]]:
    """The header and the formatted cells of :func:`table3_markdown`, one list per condition
    (the HTML report shows the same cells)."""
    header = [
        "condition", "n", f"accuracy ({model or 'this run'})", "95% CI", "failed",
        "judge errors", "verdicts rules/LM", "cached calls", "retries", "final recall (n)",
        "answer in context (n)", "tokens/q", "LM calls/q", "paper (Gemini-Pro-1.5)",
    ]  # fmt: skip
    names = [c for c in CONDITION_ORDER if c in summary] + sorted(
        set(summary) - set(CONDITION_ORDER)
    )
    rows = []
    for name in names:
        row = summary[name]
        recall = row["recall_by_round"][-1] if row["recall_by_round"] else None
        recall_text = f"{_fmt(recall)} ({row.get('recall_n', 0)})" if recall is not None else "—"
        low, high = row["ci95"]
        calls = row.get("lm_calls", 0)
        cached = row.get("cached_calls", 0)
        cached_text = f"{cached}/{calls}" if calls else str(cached)
        verdicts = f"{row['rule_verdicts']}/{row['lm_verdicts']}" if "rule_verdicts" in row else "—"
        rows.append(
            [
                name,
                str(row["n"]),
                _fmt(row["accuracy"]),
                f"[{_fmt(low, 2)}, {_fmt(high, 2)}]",
                str(row.get("program_errors", 0)),
                str(row["judge_errors"]),
                verdicts,
                cached_text,
                str(row.get("retries", 0)),
                recall_text,
                _answer_in_context_text(row),
                f"{row['tokens_per_question']:.0f}",
                f"{row['lm_calls_per_question']:.1f}",
                _fmt(PAPER_ACCURACY.get(name)),
            ]
        )
    return header, rows


def table3_markdown(
    summary: dict[str, dict[str, Any]], *, model: str = "", notes: Sequence[str] = ()
) -> str:
    """The paper's Table 3 shape: accuracy per setup, ours beside Gemini-Pro-1.5's.

    Every row also shows what could flatter it: questions whose program failed (counted
    wrong), judge errors (counted wrong), how many verdicts the autorater's rules and its LM
    judge gave, LM calls answered from the cache, retried faults, and how many questions the
    recall is averaged over; and how often the gold answer was in the answer step's context
    (over the questions where that can be checked). ``notes`` are printed above it.
    """
    lines = [f"> {note}" for note in notes]
    if lines:
        lines.append("")
    header, rows = table3_cells(summary, model=model)
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|---|---:|---:|---|" + "---:|" * (len(header) - 4))
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines) + "\n"


def _pivot_accuracy(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    table = frame.assign(correct_=frame["correct"].eq(True).astype(float)).pivot_table(
        index=column, columns="condition", values="correct_", aggfunc="mean", observed=True
    )
    counts = frame.groupby(column, observed=True)["id"].nunique()
    table.insert(0, "questions", counts)
    return table


def accuracy_by_reasoning_type(frame: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per reasoning type (rows) and condition (columns); a question counts once per
    type it carries."""
    exploded = frame.explode("reasoning_types").rename(
        columns={"reasoning_types": "reasoning_type"}
    )
    return _pivot_accuracy(exploded, "reasoning_type")


def accuracy_by_article_count(frame: pd.DataFrame) -> pd.DataFrame:
    """Accuracy by the number of gold articles a question links (2, 3, 4, 5, 6+)."""
    bins = frame["n_gold"].clip(upper=6).map(lambda n: "6+" if n >= 6 else str(int(n)))
    return _pivot_accuracy(frame.assign(gold_articles=bins), "gold_articles")


def failure_breakdown(frame: pd.DataFrame) -> pd.DataFrame:
    """Each wrong answer as a retrieval miss (some gold article never reached the context) or
    a reasoning miss (every gold article the corpus has was in context, still wrong).

    Naive has no context, so all its failures count as retrieval misses; rows whose gold
    articles are all absent from the corpus are ``no gold in corpus``; a question whose program
    failed is a ``program error`` and a verdict the judge could not give a ``judge error``.
    """
    wrong = frame[frame["correct"] != True].copy()  # noqa: E712

    def kind(row) -> str:
        if isinstance(row.get("error"), str):
            return "program error"
        if row.get("judge_method") == "judge_error":
            return "judge error"
        recall = row.get("recall")
        if not isinstance(recall, list):
            return "no gold in corpus"
        if not recall:
            return "retrieval miss"
        return "reasoning miss" if recall[-1] >= 1.0 else "retrieval miss"

    wrong["failure"] = wrong.apply(kind, axis=1)
    return wrong


def plot_accuracy_by_type(frame: pd.DataFrame, path: str | Path | None = None):
    """Grouped bars: accuracy per reasoning type, one bar per condition. Returns the figure."""
    import matplotlib.pyplot as plt

    table = accuracy_by_reasoning_type(frame).drop(columns="questions")
    fig, ax = plt.subplots(figsize=(9, 4.5))
    table.plot.bar(ax=ax, width=0.8)
    ax.set_xlabel("reasoning type")
    ax.set_ylabel("accuracy (autorater)")
    ax.set_ylim(0, 1)
    ax.set_title("Accuracy by reasoning type and condition")
    ax.legend(title="condition", fontsize="small")
    ax.tick_params(axis="x", rotation=20)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
        plt.close(fig)
    return fig


def plot_recall_by_round(summary: dict[str, dict[str, Any]], path: str | Path | None = None):
    """Mean gold-article recall after each retrieval round, one line per condition."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    curves = {name: row.get("recall_by_round") or [] for name, row in summary.items()}
    curves = {name: recall for name, recall in curves.items() if recall}
    depth = max((len(r) for r in curves.values()), default=1)
    markers = "osD^vPX*"
    for i, (name, recall) in enumerate(curves.items()):
        # Conditions often share a value after one round; shrinking markers keep each visible.
        ax.plot(
            range(1, len(recall) + 1),
            recall,
            marker=markers[i % len(markers)],
            markersize=max(4, 11 - 1.5 * i),
            alpha=0.85,
            label=name,
        )
    ax.set_xlabel("retrieval round")
    ax.set_ylabel("gold-article recall")
    ax.set_ylim(0, 1.05)
    ax.set_xlim(0.5, depth + 0.5)
    ax.set_xticks(range(1, depth + 1))
    ax.set_title("Gold articles in context after each round")
    if curves:
        ax.legend(title="condition", fontsize="small")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
        plt.close(fig)
    return fig


#: The kinds :func:`failure_breakdown` gives a wrong answer, in display order.
FAILURE_KINDS = [
    "retrieval miss",
    "reasoning miss",
    "no gold in corpus",
    "judge error",
    "program error",
]


def failure_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Answers, correct ones and each failure kind, per (reasoning type, condition).

    A question counts once under every reasoning type it carries.
    """
    columns = ["answers", "correct", *FAILURE_KINDS]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    outcome = failure_breakdown(frame)["failure"].reindex(frame.index).fillna("correct")
    exploded = (
        frame.assign(outcome=outcome)
        .explode("reasoning_types")
        .rename(columns={"reasoning_types": "reasoning_type"})
    )
    table = exploded.pivot_table(
        index=["reasoning_type", "condition"],
        columns="outcome",
        values="id",
        aggfunc="count",
        fill_value=0,
        observed=True,
    )
    table = table.reindex(columns=columns[1:], fill_value=0)
    table.insert(0, "answers", table.sum(axis=1))
    table.columns.name = None
    return table.astype(int)


def failure_examples(frame: pd.DataFrame, store=None) -> pd.DataFrame:
    """The wrong answers, one row each, with the gold articles that never reached the context
    (``missing_gold``: titles when an ``ArticleStore`` is given, else ids)."""
    columns = [
        "condition", "id", "reasoning_types", "question", "gold_answer", "answer",
        "failure", "n_gold", "missing_gold", "judge_explanation",
    ]  # fmt: skip
    wrong = failure_breakdown(frame)
    if wrong.empty:
        return pd.DataFrame(columns=columns)

    def name(article_id: str) -> str:
        return store[article_id].title if store is not None and article_id in store else article_id

    def missing(row) -> list[str]:
        seen = {i for ids in (row.get("context_ids") or []) for i in ids}
        return [name(i) for i in (row.get("gold_ids") or []) if i not in seen]

    wrong["missing_gold"] = [missing(row) for _, row in wrong.iterrows()]
    return wrong[[c for c in columns if c in wrong]].sort_values(["failure", "condition", "id"])


_OUTCOME_COLOURS = {
    "correct": "tab:green",
    "retrieval miss": "tab:orange",
    "reasoning miss": "tab:red",
    "no gold in corpus": "0.6",
    "judge error": "tab:purple",
    "program error": "black",
}


def plot_failures_by_type(frame: pd.DataFrame, path: str | Path | None = None):
    """One panel per condition: each reasoning type's answers stacked as correct and each
    failure kind."""
    import matplotlib.pyplot as plt

    table = failure_table(frame)
    present = [] if table.empty else list(table.index.get_level_values("condition"))
    conditions = list(dict.fromkeys(present)) or ["(no answers)"]
    cols = min(3, len(conditions))
    rows = -(-len(conditions) // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(4.2 * cols, 3.6 * rows), sharey=True, squeeze=False
    )
    for ax, condition in zip(axes.flat, conditions, strict=False):
        part = (
            table.xs(condition, level="condition")
            if condition in present
            else pd.DataFrame(columns=list(_OUTCOME_COLOURS))
        )
        bottom = pd.Series(0, index=part.index, dtype=float)
        for kind, colour in _OUTCOME_COLOURS.items():
            values = part[kind].astype(float) if kind in part else bottom * 0
            ax.bar(part.index, values, bottom=bottom, color=colour, label=kind)
            bottom = bottom + values
        ax.set_title(str(condition))
        ax.set_xlabel("reasoning type")
        ax.tick_params(axis="x", rotation=30, labelsize="small")
        ax.yaxis.get_major_locator().set_params(integer=True)
    for ax in axes[:, 0]:
        ax.set_ylabel("answers")
    for ax in list(axes.flat)[len(conditions) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, title="outcome", loc="upper right", fontsize="small")
    fig.suptitle("Correct answers and failure kinds by reasoning type, per condition")
    fig.tight_layout(rect=(0, 0, 0.86, 0.95))
    if path is not None:
        fig.savefig(path, dpi=120)
        plt.close(fig)
    return fig


def write_reports(
    run_dir: str | Path, *, model: str = "", notes: Sequence[str] = ()
) -> dict[str, dict[str, Any]]:
    """Write ``summary.json``, ``table.md``, per-type and per-article-count tables and plots.

    ``notes`` (how the run was made: judge, cache, an early stop) head ``table.md``.
    """
    run_dir = Path(run_dir)
    frame = predictions_frame(run_dir)
    summary = summarize_run(frame)
    atomic_write_json(run_dir / "summary.json", summary)
    if frame.empty:
        return summary
    table = table3_markdown(summary, model=model, notes=notes)
    (run_dir / "table.md").write_text(table, encoding="utf-8")
    (run_dir / "by_reasoning_type.md").write_text(
        accuracy_by_reasoning_type(frame).round(3).to_markdown() + "\n", encoding="utf-8"
    )
    (run_dir / "by_article_count.md").write_text(
        accuracy_by_article_count(frame).round(3).to_markdown() + "\n", encoding="utf-8"
    )
    plot_accuracy_by_type(frame, run_dir / "accuracy_by_reasoning_type.png")
    plot_recall_by_round(summary, run_dir / "recall_by_round.png")
    return summary
