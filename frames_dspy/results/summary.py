"""Every figure of a set of prediction records, computed here and nowhere else.

``table.md``, ``summary.json``, the HTML report, a study's dev score, the final test score
and the comparison of two runs all take their numbers from :func:`summarize` (or, for one
question, from the properties of :class:`~frames_dspy.results.records.QuestionRecord`), so a figure
means the same wherever it is printed. A condition's figures are one typed
:class:`ConditionSummary`, read by attribute everywhere (``tests/results/test_summary.py`` scans
the code for string-key reads); ``summary.json`` is its :meth:`~ConditionSummary.to_dict`, key
for key as the file always had them.

Tokens per question are *metered* tokens of the program LM (every call, cached or not; see
:mod:`frames_dspy.results.records`); ``reported_tokens_per_question`` is what the LM reported
(cached calls count 0), shown for the money it stands for.

What an agent did (:func:`agent_figures`) is averaged over the questions that have a
trajectory; a condition without one gets None for each of those figures, never a zero.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from frames_dspy.judge.autorater import JUDGE_METHODS, is_rule_method, method_counts
from frames_dspy.programs import CONDITIONS, MORE_CONDITIONS
from frames_dspy.programs.trajectory import STOP_REASONS
from frames_dspy.results.metrics import mean_recall
from frames_dspy.results.records import QuestionRecord, unique_records

__all__ = [
    "CONDITION_ORDER",
    "ordered_conditions",
    "by_condition",
    "wilson_interval",
    "agent_figures",
    "ConditionSummary",
    "summary_to_json",
    "summary_from_json",
    "summarize_records",
    "summarize",
    "objective_value",
]

#: Tables list conditions in the order of :data:`frames_dspy.programs.CONDITIONS`, then
#: :data:`~frames_dspy.programs.MORE_CONDITIONS`.
CONDITION_ORDER = [*CONDITIONS, *MORE_CONDITIONS]


def ordered_conditions(names: Iterable[str]) -> list[str]:
    """The paper's conditions in table order, then any others sorted."""
    names = set(names)
    return [c for c in CONDITION_ORDER if c in names] + sorted(names - set(CONDITION_ORDER))


def by_condition(records: Iterable[QuestionRecord]) -> dict[str, list[QuestionRecord]]:
    """Records grouped by condition, conditions in table order."""
    groups: dict[str, list[QuestionRecord]] = {}
    for record in records:
        groups.setdefault(record.condition, []).append(record)
    return {name: groups[name] for name in ordered_conditions(groups)}


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


def _error_kinds(records: Sequence[QuestionRecord]) -> dict[str, int]:
    # Records written before error_kind existed: the type name leads the repr.
    kinds = Counter(r.error_kind or r.error.split("(")[0] for r in records if r.failed)
    return dict(kinds.most_common())


def _answer_in_context(records: Sequence[QuestionRecord]) -> dict[str, Any]:
    """How often the gold answer was in the answer step's context, over the questions where
    that could be checked, and how many wrong answers had it there (the model's failures)."""
    checked = [r for r in records if r.answer_in_context is not None]
    present = [r for r in checked if r.answer_in_context is True]
    return {
        "answer_in_context": len(present) / len(checked) if checked else None,
        "answer_in_context_n": len(checked),
        "wrong_with_answer_in_context": sum(not r.is_correct for r in present),
    }


#: The figures of :func:`agent_figures`, None for a condition without a trajectory.
AGENT_FIGURES = (
    "steps_per_question",
    "searches_per_question",
    "articles_read_per_question",
    "malformed_calls_per_question",
    "gold_searched",
    "gold_read",
    "gold_used",
)


def agent_figures(records: Sequence[QuestionRecord]) -> dict[str, Any]:
    """The agent's fields of a :class:`ConditionSummary`, by name: what the agent did, per
    question with a trajectory (``agent_n`` of them): steps, searches, articles read and
    malformed calls; the share of gold articles its searches showed it, it read, and the
    answer step saw after packing (over those with a gold article); and how many stopped for
    each reason (:data:`STOP_REASONS`)."""
    acted = [r for r in records if r.trajectory is not None]
    counts = [r.agent_counts for r in acted]
    stops = Counter(r.stop_reason or "error" for r in acted)

    def per_q(values: Iterable[float]) -> float | None:
        return sum(values) / len(acted) if acted else None

    return {
        "agent_n": len(acted),
        "steps_per_question": per_q(c.steps for c in counts),
        "searches_per_question": per_q(c.searches for c in counts),
        "articles_read_per_question": per_q(c.reads for c in counts),
        "malformed_calls_per_question": per_q(c.malformed for c in counts),
        "gold_searched": _mean(r.gold_share(r.searched_ids) for r in acted),
        "gold_read": _mean(r.gold_share(r.read_ids) for r in acted),
        "gold_used": _mean(r.gold_share(r.used_ids) for r in acted),
        "stop_reasons": {k: stops[k] for k in STOP_REASONS if stops[k]} if acted else None,
    }


@dataclass(frozen=True)
class ConditionSummary:
    """Every figure of one condition's records, as :func:`summarize_records` computes them.

    A row of ``summary.json`` (:meth:`to_dict` writes it, :meth:`from_dict` reads it back,
    key for key in this order); everywhere else reads the figures as attributes. The file
    carries no version of its own: it is drawn from ``predictions.jsonl``, whose records are
    versioned, and rewritten from them by every report.

    Attributes:
        n: Questions counted, each (condition, question) once; every question tried.
        correct: Questions judged correct.
        accuracy: ``correct / n``; None when no question was counted.
        ci95: The Wilson 95% interval of the accuracy; (nan, nan) when no question was counted.
        accuracy_judged: Accuracy over the questions the judge gave a verdict on.
        program_errors: Questions whose program failed (counted wrong).
        program_error_rate: ``program_errors / n`` (0 when no question was counted).
        program_errors_by_kind: Program errors per exception type, most frequent first.
        judge_errors: Questions the judge gave no verdict on (counted wrong).
        judge_calls: Verdicts the LM judge was asked for.
        verdicts_by_method: Verdicts per method (a rule's name, ``judge``, ``judge_error``).
        rule_verdicts: Verdicts an autorater rule gave without the LM judge.
        lm_verdicts: Verdicts the LM judge gave.
        lm_verdicts_with_p_true: LM verdicts that came with a P(TRUE).
        lm_calls: LM calls, program and judge, answered from the cache or not.
        cached_calls: Of ``lm_calls``, those answered from the cache.
        retries: Retried faults, program and judge.
        recall_by_round: Mean gold-article recall after each round; [] without retrieval.
        recall_n: The questions the recall is averaged over (those with a gold article).
        answer_in_context: The share of checkable questions whose gold answer was in context.
        answer_in_context_n: The questions where that could be checked.
        wrong_with_answer_in_context: Wrong answers whose gold answer was in context.
        tokens_per_question: The program LM's metered tokens per question.
        reported_tokens_per_question: The program LM's reported tokens per question.
        lm_calls_per_question: The program LM's calls per question.
        cost_usd: Dollars, when LiteLLM priced some question; else None.
        query_repetition_rate: Mean share of exactly repeated queries; None without queries.
        near_repeat_rate: Mean share of near-repeated LM queries; None when the LM chose none.
        agent_n: Questions with an agent trajectory (what the agent's figures average over).
        steps_per_question: An agent's steps per question; None without a trajectory.
        searches_per_question: An agent's searches per question; None without a trajectory.
        articles_read_per_question: Articles an agent read per question; None without one.
        malformed_calls_per_question: An agent's malformed calls per question; None without one.
        gold_searched: Mean share of gold articles the agent's searches showed it.
        gold_read: Mean share of gold articles the agent read.
        gold_used: Mean share of gold articles the answer step saw after packing.
        stop_reasons: Questions per reason the agent stopped; None without a trajectory.
        seconds_per_question: Wall time per question.
        duplicates_ignored: Records left out because their (condition, question) repeated.
    """

    n: int
    correct: int
    accuracy: float | None
    ci95: tuple[float, float]
    accuracy_judged: float | None
    program_errors: int
    program_error_rate: float
    program_errors_by_kind: dict[str, int]
    judge_errors: int
    judge_calls: int
    verdicts_by_method: dict[str, int]
    rule_verdicts: int
    lm_verdicts: int
    lm_verdicts_with_p_true: int
    lm_calls: int
    cached_calls: int
    retries: int
    recall_by_round: list[float]
    recall_n: int
    answer_in_context: float | None
    answer_in_context_n: int
    wrong_with_answer_in_context: int
    tokens_per_question: float
    reported_tokens_per_question: float
    lm_calls_per_question: float
    cost_usd: float | None
    query_repetition_rate: float | None
    near_repeat_rate: float | None
    agent_n: int
    steps_per_question: float | None
    searches_per_question: float | None
    articles_read_per_question: float | None
    malformed_calls_per_question: float | None
    gold_searched: float | None
    gold_read: float | None
    gold_used: float | None
    stop_reasons: dict[str, int] | None
    seconds_per_question: float
    duplicates_ignored: int

    @property
    def final_recall(self) -> float | None:
        """Recall after the last round; None without retrieval."""
        return self.recall_by_round[-1] if self.recall_by_round else None

    def program_errors_above(self, max_rate: float) -> bool:
        """Whether more than ``max_rate`` of the questions' programs failed."""
        return bool(self.n) and self.program_errors / self.n > max_rate

    def to_dict(self) -> dict[str, Any]:
        """The ``summary.json`` row: every field under its name, in declaration order."""
        row = {f.name: getattr(self, f.name) for f in fields(self)}
        row["ci95"] = list(self.ci95)
        return row

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> ConditionSummary:
        """A ``summary.json`` row read back.

        Raises:
            ValueError: the row lacks figures (a summary written by an older version) or has
                figures this version does not know; the message names them and the fix.
        """
        names = [f.name for f in fields(cls)]
        missing = [name for name in names if name not in row]
        unknown = [key for key in row if key not in names]
        if missing or unknown:
            raise ValueError(
                f"a summary row without {missing} or with unknown {unknown} figures; "
                "summary.json is drawn from predictions.jsonl: rerun the run's evaluate "
                "command with the same --out (nothing is left to run; it rewrites the reports)"
            )
        low, high = row["ci95"]
        return cls(**{**row, "ci95": (low, high)})


def summary_to_json(summary: Mapping[str, ConditionSummary]) -> dict[str, dict[str, Any]]:
    """``summary.json``'s content: each condition's row (:meth:`ConditionSummary.to_dict`)."""
    return {name: row.to_dict() for name, row in summary.items()}


def summary_from_json(data: Mapping[str, Mapping[str, Any]]) -> dict[str, ConditionSummary]:
    """``summary.json``'s content read back (see :meth:`ConditionSummary.from_dict`)."""
    return {name: ConditionSummary.from_dict(row) for name, row in data.items()}


def summarize_records(records: Sequence[QuestionRecord]) -> ConditionSummary:
    """The figures of one condition's records (see :func:`summarize`)."""
    records, duplicates = unique_records(records)
    n = len(records)
    correct = sum(r.is_correct for r in records)
    judge_errors = sum(r.judge_failed for r in records)
    program_errors = sum(r.failed for r in records)
    low, high = wilson_interval(correct, n)
    judged = n - judge_errors
    methods = [r.judge_method for r in records]
    recall, recall_n = mean_recall(r.recall for r in records)
    costs = [r.cost_usd for r in records if r.cost_usd is not None]

    def per_q(total: float) -> float:
        return total / n if n else 0.0

    return ConditionSummary(
        n=n,
        correct=correct,
        accuracy=correct / n if n else None,
        ci95=(low, high),
        accuracy_judged=correct / judged if judged else None,
        program_errors=program_errors,
        program_error_rate=program_errors / n if n else 0.0,
        program_errors_by_kind=_error_kinds(records),
        judge_errors=judge_errors,
        judge_calls=sum(m in JUDGE_METHODS for m in methods),
        verdicts_by_method=method_counts(methods),
        rule_verdicts=sum(is_rule_method(m) for m in methods),
        lm_verdicts=sum(m in JUDGE_METHODS for m in methods),
        lm_verdicts_with_p_true=sum(r.judge_p_true is not None for r in records),
        lm_calls=sum(r.lm_calls + r.judge_calls for r in records),
        cached_calls=sum(r.cached_calls + r.judge_cached_calls for r in records),
        retries=sum(r.retries for r in records),
        recall_by_round=recall,
        recall_n=recall_n,
        **_answer_in_context(records),
        tokens_per_question=per_q(sum(r.tokens for r in records)),
        reported_tokens_per_question=per_q(sum(r.reported_tokens for r in records)),
        lm_calls_per_question=per_q(sum(r.lm_calls for r in records)),
        cost_usd=sum(costs) if costs else None,
        query_repetition_rate=_mean(r.query_repetition_rate for r in records),
        near_repeat_rate=_mean(r.near_repeat_rate for r in records),
        **agent_figures(records),
        seconds_per_question=per_q(sum(r.seconds for r in records)),
        duplicates_ignored=duplicates,
    )


def summarize(records: Iterable[QuestionRecord]) -> dict[str, ConditionSummary]:
    """Per condition: accuracy with a 95% interval over every question tried, failures by
    kind, judge errors, who decided (verdicts per method, rules and LM), cached calls and
    retries, whether the gold answer was in the answer step's context, recall per round (over
    every question with a gold article), tokens, LM calls and seconds per question.

    A question counts once: a (condition, question) recorded more than once (by an older
    version, or two runs that wrote one folder at once) counts its last record, and
    ``duplicates_ignored`` says how many records that left out.

    A program error or a judge error counts as not correct, so ``n`` is every question tried
    and nothing is averaged over the successes only; ``accuracy_judged`` leaves judge errors
    out, for comparison. ``lm_calls`` and ``cached_calls`` count program and judge calls;
    ``lm_calls_per_question`` and the tokens count the program's alone.

    Repetition: ``query_repetition_rate`` (exact repeats, as a program counted them) and
    ``near_repeat_rate`` (:data:`~frames_dspy.results.metrics.NEAR_REPEAT` over the queries
    the LM chose), each the mean over the questions where the LM chose a query. The agent's
    figures come from :func:`agent_figures`.
    """
    return {name: summarize_records(group) for name, group in by_condition(records).items()}


def objective_value(row: ConditionSummary, objective: str) -> float:
    """A study's first objective from a :func:`summarize_records` row.

    ``accuracy`` and ``recall`` (after the last round) are 0 when nothing was measured;
    ``accuracy+recall`` adds recall as less than one question's worth of accuracy, so it
    only breaks ties.
    """
    accuracy = row.accuracy or 0.0
    recall = row.final_recall or 0.0
    if objective == "accuracy":
        return accuracy
    if objective == "recall":
        return recall
    if objective == "accuracy+recall":
        return accuracy + recall / (row.n + 1)
    raise ValueError(
        f"unknown objective {objective!r}; choose one of accuracy, recall, accuracy+recall"
    )
