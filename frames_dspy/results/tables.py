"""Turning a run folder into numbers, tables and plots.

Shared by ``python -m frames_dspy.evaluate``, ``python -m optimize.compile`` and the notebooks,
so every view of a run is computed one way. A run folder holds ``predictions.jsonl`` with one
record per question x condition (:class:`frames_dspy.results.records.QuestionRecord`); its figures
come from :func:`frames_dspy.results.summary.summarize`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from frames_dspy.base.files import atomic_path, atomic_write_json, atomic_write_text
from frames_dspy.programs import PAPER_ACCURACY
from frames_dspy.results.records import QuestionRecord, read_records, records_frame, unique_records
from frames_dspy.results.run_folder import load_records
from frames_dspy.results.summary import (
    CONDITION_ORDER,
    ConditionSummary,
    ordered_conditions,
    summarize,
    summary_to_json,
    wilson_interval,
)

logger = logging.getLogger(__name__)

__all__ = [
    "PAPER_ACCURACY",
    "CONDITION_ORDER",
    "load_records",
    "read_records",
    "records_frame",
    "wilson_interval",
    "summarize",
    "table3_cells",
    "table3_markdown",
    "SEARCH_NOTE",
    "search_cells",
    "search_markdown",
    "duplicates_note",
    "accuracy_by_reasoning_type",
    "accuracy_by_article_count",
    "failure_kind",
    "failure_breakdown",
    "FAILURE_KINDS",
    "failure_table",
    "failure_examples",
    "plot_failures_by_type",
    "plot_accuracy_by_type",
    "plot_recall_by_round",
    "write_reports",
]


def _fmt(value: float | None, digits: int = 3) -> str:
    return (
        "—"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:.{digits}f}"
    )


def _answer_in_context_text(row: ConditionSummary) -> str:
    checked = row.answer_in_context_n
    if not checked:
        return "—"
    return f"{_fmt(row.answer_in_context)} ({checked})"


def table3_cells(
    summary: Mapping[str, ConditionSummary], *, model: str = "", accuracy_measured: bool = True
) -> tuple[list[str], list[list[str]]]:
    """The header and the formatted cells of :func:`table3_markdown`, one list per condition
    (the HTML report shows the same cells). A run that measured no accuracy (retrieval only:
    no answer step, no judge) shows "—" for it and its interval."""
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
        recall = row.final_recall
        recall_text = f"{_fmt(recall)} ({row.recall_n})" if recall is not None else "—"
        low, high = row.ci95
        calls, cached = row.lm_calls, row.cached_calls
        cached_text = f"{cached}/{calls}" if calls else str(cached)
        rows.append(
            [
                name,
                str(row.n),
                _fmt(row.accuracy if accuracy_measured else None),
                f"[{_fmt(low, 2)}, {_fmt(high, 2)}]" if accuracy_measured else "—",
                str(row.program_errors),
                str(row.judge_errors),
                f"{row.rule_verdicts}/{row.lm_verdicts}",
                cached_text,
                str(row.retries),
                recall_text,
                _answer_in_context_text(row),
                f"{row.tokens_per_question:.0f}",
                f"{row.lm_calls_per_question:.1f}",
                _fmt(PAPER_ACCURACY.get(name)),
            ]
        )
    return header, rows


def table3_markdown(
    summary: Mapping[str, ConditionSummary],
    *,
    model: str = "",
    notes: Sequence[str] = (),
    accuracy_measured: bool = True,
) -> str:
    """The paper's Table 3 shape: accuracy per setup, ours beside Gemini-Pro-1.5's.

    Every row also shows what could flatter it: questions whose program failed (counted
    wrong), judge errors (counted wrong), how many verdicts the autorater's rules and its LM
    judge gave, LM calls answered from the cache, retried faults, and how many questions the
    recall is averaged over; and how often the gold answer was in the answer step's context
    (over the questions where that can be checked). ``notes`` are printed above it, and a
    :func:`duplicates_note` when records were left out; ``accuracy_measured`` False (a
    retrieval-only run) shows "—" for accuracy.
    """
    extra = duplicates_note(summary)
    lines = [f"> {note}" for note in [*notes, *([extra] if extra else [])]]
    if lines:
        lines.append("")
    header, rows = table3_cells(summary, model=model, accuracy_measured=accuracy_measured)
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|---|---:|---:|---|" + "---:|" * (len(header) - 4))
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines) + "\n"


#: What the search table's columns mean, printed under it.
SEARCH_NOTE = (
    "near-repeated queries: the share of the queries the LM chose (the agent's searches, a "
    "multi-step program's written queries) whose content words overlap an earlier one's by "
    "3/4 or more; exact: repeated word for word. Steps, searches, articles read, malformed "
    "calls and gold searched/read/used (the share of gold articles the agent's searches "
    "showed it, it read, the answer step saw) are an agent's; a condition without a "
    "trajectory shows —. Stopped by: why each question's agent stopped."
)


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _stops(row: ConditionSummary) -> str:
    stops = row.stop_reasons
    return ", ".join(f"{reason} {n}" for reason, n in stops.items()) if stops else "—"


def search_cells(
    summary: Mapping[str, ConditionSummary], *, accuracy_measured: bool = True
) -> tuple[list[str], list[list[str]]]:
    """How each condition's LM searched, for the conditions whose LM chose queries or that
    have a trajectory: repetition (near and exact), an agent's steps, searches, articles
    read, malformed calls, the gold it searched up, read and used, why it stopped, and the
    tokens. A figure a condition does not have is "—" (no misleading zeros); ``gold used``
    too when no answer step ran (``accuracy_measured`` False)."""
    header = [
        "condition", "n", "tokens/q", "near-repeated queries", "exact repeats", "steps/q",
        "searches/q", "articles read/q", "malformed calls/q", "gold searched", "gold read",
        "gold used", "stopped by",
    ]  # fmt: skip
    rows = []
    for name in [c for c in CONDITION_ORDER if c in summary] + sorted(
        set(summary) - set(CONDITION_ORDER)
    ):
        row = summary[name]
        if row.near_repeat_rate is None and not row.agent_n:
            continue
        per_q = [row.steps_per_question, row.searches_per_question]
        per_q += [row.articles_read_per_question, row.malformed_calls_per_question]
        used = row.gold_used if accuracy_measured else None
        rows.append(
            [
                name,
                str(row.n),
                f"{row.tokens_per_question:.0f}",
                _share(row.near_repeat_rate),
                _share(row.query_repetition_rate),
                *(_fmt(v, 1) for v in per_q),
                _share(row.gold_searched),
                _share(row.gold_read),
                _share(used),
                _stops(row),
            ]
        )
    return header, rows


def search_markdown(
    summary: Mapping[str, ConditionSummary], *, accuracy_measured: bool = True
) -> str:
    """:func:`search_cells` as a markdown table with its note; "" when no condition's LM
    chose a query."""
    header, rows = search_cells(summary, accuracy_measured=accuracy_measured)
    if not rows:
        return ""
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * 11 + "---|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join([*lines, "", SEARCH_NOTE]) + "\n"


def duplicates_note(summary: Mapping[str, ConditionSummary]) -> str | None:
    """What a table says when questions were recorded more than once (None when none were)."""
    ignored = {name: row.duplicates_ignored for name, row in summary.items()}
    if not any(ignored.values()):
        return None
    where = ", ".join(f"{name} {n}" for name, n in ignored.items() if n)
    return (
        f"DUPLICATES IGNORED: {sum(ignored.values())} record(s) repeat a (condition, question) "
        f"already recorded ({where}); each question counts once, by its last record"
    )


def failure_kind(record: QuestionRecord) -> str | None:
    """None for a correct answer; otherwise a retrieval miss (some gold article never reached
    the context) or a reasoning miss (every gold article the corpus has was in context, still
    wrong).

    Naive has no context, so all its failures count as retrieval misses; a question without a
    gold article in the corpus is ``no gold in corpus``; a question whose program failed is a
    ``program error`` and a verdict the judge could not give a ``judge error``.
    """
    if record.is_correct:
        return None
    if record.failed:
        return "program error"
    if record.judge_failed:
        return "judge error"
    final = record.final_recall
    if final is None:
        return "no gold in corpus"
    return "reasoning miss" if record.recall and final >= 1.0 else "retrieval miss"


def _gold_bin(n_gold: int) -> str:
    return "6+" if n_gold >= 6 else str(int(n_gold))


def _outcomes(records: Sequence[QuestionRecord]) -> pd.DataFrame:
    """One row per (record, reasoning type) with what the tables pivot on."""
    rows = [
        {
            "cond": r.condition,
            "qid": r.id,
            "reasoning_type": kind,
            "gold_articles": _gold_bin(r.n_gold),
            "hit": float(r.is_correct),
            "outcome": failure_kind(r) or "correct",
        }
        for r in records
        for kind in (r.reasoning_types or [None])
    ]
    frame = pd.DataFrame(rows)
    order = ordered_conditions(frame["cond"]) if rows else []
    frame["cond"] = pd.Categorical(frame.get("cond", []), categories=order, ordered=True)
    return frame


def _pivot_accuracy(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    table = frame.pivot_table(
        index=column, columns="cond", values="hit", aggfunc="mean", observed=True
    )
    table.columns.name = "condition"
    counts = frame.groupby(column, observed=True)["qid"].nunique()
    table.insert(0, "questions", counts)
    return table


def accuracy_by_reasoning_type(records: Sequence[QuestionRecord]) -> pd.DataFrame:
    """Accuracy per reasoning type (rows) and condition (columns); a question counts once per
    type it carries."""
    return _pivot_accuracy(_outcomes(records), "reasoning_type")


def accuracy_by_article_count(records: Sequence[QuestionRecord]) -> pd.DataFrame:
    """Accuracy by the number of gold articles a question links (2, 3, 4, 5, 6+)."""
    once = _outcomes(records).drop_duplicates(["cond", "qid"])
    return _pivot_accuracy(once, "gold_articles")


def failure_breakdown(records: Sequence[QuestionRecord]) -> pd.DataFrame:
    """The wrong answers (every field, as :func:`~frames_dspy.results.records.records_frame`) with
    their :func:`failure_kind` in a ``failure`` column."""
    wrong = [r for r in records if not r.is_correct]
    frame = records_frame(wrong)
    frame["failure"] = [failure_kind(r) for r in wrong]
    return frame


def plot_accuracy_by_type(records: Sequence[QuestionRecord], path: str | Path | None = None):
    """Grouped bars: accuracy per reasoning type, one bar per condition. Returns the figure."""
    import matplotlib.pyplot as plt

    table = accuracy_by_reasoning_type(records).drop(columns="questions")
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


def plot_recall_by_round(summary: Mapping[str, ConditionSummary], path: str | Path | None = None):
    """Mean gold-article recall after each retrieval round, one line per condition."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    curves = {name: row.recall_by_round for name, row in summary.items()}
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


def failure_table(records: Sequence[QuestionRecord]) -> pd.DataFrame:
    """Answers, correct ones and each failure kind, per (reasoning type, condition).

    A question counts once under every reasoning type it carries.
    """
    columns = ["answers", "correct", *FAILURE_KINDS]
    if not records:
        return pd.DataFrame(columns=columns)
    table = _outcomes(records).pivot_table(
        index=["reasoning_type", "cond"],
        columns="outcome",
        values="qid",
        aggfunc="count",
        fill_value=0,
        observed=True,
    )
    table.index = table.index.set_names(["reasoning_type", "condition"])
    table = table.reindex(columns=columns[1:], fill_value=0)
    table.insert(0, "answers", table.sum(axis=1))
    table.columns.name = None
    return table.astype(int)


def failure_examples(records: Sequence[QuestionRecord], store=None) -> pd.DataFrame:
    """The wrong answers, one row each, with the gold articles that never reached the context
    (``missing_gold``: titles when an ``ArticleStore`` is given, else ids)."""
    columns = [
        "condition", "id", "reasoning_types", "question", "gold_answer", "answer",
        "failure", "n_gold", "missing_gold", "judge_explanation",
    ]  # fmt: skip

    def name(article_id: str) -> str:
        return store[article_id].title if store is not None and article_id in store else article_id

    def missing(record: QuestionRecord) -> list[str]:
        seen = {i for ids in record.context_ids for i in ids}
        return [name(i) for i in record.gold_ids if i not in seen]

    order = {name: n for n, name in enumerate(ordered_conditions(r.condition for r in records))}
    wrong = sorted(
        (r for r in records if not r.is_correct),
        key=lambda r: (failure_kind(r), order[r.condition], r.id),
    )
    rows = [
        (
            r.condition, r.id, r.reasoning_types, r.question, r.gold_answer, r.answer,
            failure_kind(r), r.n_gold, missing(r), r.judge_explanation,
        )
        for r in wrong
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


_OUTCOME_COLOURS = {
    "correct": "tab:green",
    "retrieval miss": "tab:orange",
    "reasoning miss": "tab:red",
    "no gold in corpus": "0.6",
    "judge error": "tab:purple",
    "program error": "black",
}


def plot_failures_by_type(records: Sequence[QuestionRecord], path: str | Path | None = None):
    """One panel per condition: each reasoning type's answers stacked as correct and each
    failure kind."""
    import matplotlib.pyplot as plt

    table = failure_table(records)
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


def _accuracy_markdown(table: pd.DataFrame, measured: bool) -> str:
    if measured:
        return table.round(3).to_markdown() + "\n"
    table = table.astype(object)  # every answer is empty by design: "—", not zeros
    table.loc[:, table.columns[1:]] = "—"
    return table.to_markdown() + "\n"


def write_reports(
    run_dir: str | Path,
    *,
    model: str = "",
    notes: Sequence[str] = (),
    accuracy_measured: bool = True,
) -> dict[str, ConditionSummary]:
    """Write ``summary.json``, ``table.md``, per-type and per-article-count tables and plots.

    ``notes`` (how the run was made: judge, cache, an early stop) head ``table.md``. A run
    that measured no accuracy (``accuracy_measured`` False: retrieval only) shows "—" for it
    in the tables and gets no accuracy plot.
    """
    run_dir = Path(run_dir)
    records = load_records(run_dir)
    summary = summarize(records)  # each question once; it says how many records it left out
    records, _ = unique_records(records)
    atomic_write_json(run_dir / "summary.json", summary_to_json(summary))
    if not records:
        return summary
    table = table3_markdown(summary, model=model, notes=notes, accuracy_measured=accuracy_measured)
    search = search_markdown(summary, accuracy_measured=accuracy_measured)
    atomic_write_text(run_dir / "table.md", table + (f"\n{search}" if search else ""))
    atomic_write_text(
        run_dir / "by_reasoning_type.md",
        _accuracy_markdown(accuracy_by_reasoning_type(records), accuracy_measured),
    )
    atomic_write_text(
        run_dir / "by_article_count.md",
        _accuracy_markdown(accuracy_by_article_count(records), accuracy_measured),
    )
    if accuracy_measured:
        with atomic_path(run_dir / "accuracy_by_reasoning_type.png") as tmp:
            plot_accuracy_by_type(records, tmp)
    with atomic_path(run_dir / "recall_by_round.png") as tmp:
        plot_recall_by_round(summary, tmp)
    return summary
