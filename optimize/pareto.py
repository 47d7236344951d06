"""The study's results as files: the trials table, the Pareto front, the pick, and a plot."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
from optuna.trial import FrozenTrial, TrialState

from optimize.scores import TrialFigures
from optimize.space import trial_kind, trial_label

logger = logging.getLogger(__name__)

__all__ = [
    "RETRIEVAL_OBJECTIVES",
    "PickRule",
    "parse_pick",
    "complete_trials",
    "pareto_front",
    "pick_trial",
    "trials_frame",
    "pareto_markdown",
    "plot_pareto",
]

# Large or internal attributes left out of trials.csv.
_HIDDEN_ATTRS = ("program_state",)


@dataclass(frozen=True)
class PickRule:
    """How the final configuration is chosen from the Pareto front.

    ``best``: the highest value of the study's objective on dev; ties go to fewer tokens.
    ``cheapest-within``: the fewest tokens per question among front trials whose objective
    value is at most ``tolerance`` below the best.
    """

    name: str = "best"
    tolerance: float = 0.0

    def __str__(self) -> str:
        return self.name if self.name == "best" else f"{self.name}:{self.tolerance:g}"


def parse_pick(text: str) -> PickRule:
    """``best`` or ``cheapest-within:TOL`` (TOL an accuracy difference such as 0.02)."""
    text = text.strip()
    if text == "best":
        return PickRule()
    name, _, value = text.partition(":")
    if name == "cheapest-within":
        try:
            tolerance = float(value)
        except ValueError:
            tolerance = -1.0
        if 0.0 <= tolerance <= 1.0:
            return PickRule(name, tolerance)
    raise ValueError(
        f"--pick {text!r} is not understood; use 'best' or 'cheapest-within:TOL' with TOL an "
        "accuracy difference in [0, 1], e.g. cheapest-within:0.02"
    )


def complete_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The study's complete trials, by number."""
    return sorted(
        study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), key=lambda t: t.number
    )


def pareto_front(study: optuna.Study) -> list[FrozenTrial]:
    """``study.best_trials`` (no trial beats them on both objectives), cheapest first.

    Of several front trials with identical values (a repeated configuration), the earliest
    stands for them.
    """
    front: list[FrozenTrial] = []
    seen: set[tuple[float, ...]] = set()
    for t in sorted(study.best_trials, key=lambda t: (t.values[1], -t.values[0], t.number)):
        if tuple(t.values) not in seen:
            seen.add(tuple(t.values))
            front.append(t)
    return front


def pick_trial(front: Sequence[FrozenTrial], rule: PickRule) -> FrozenTrial:
    """The front trial the rule chooses (see :class:`PickRule`); ties go to the earlier trial."""
    if not front:
        raise ValueError("no complete trial to pick from: run some trials first")
    best_acc = max(t.values[0] for t in front)
    floor = best_acc - (rule.tolerance if rule.name == "cheapest-within" else 0.0)
    eligible = [t for t in front if t.values[0] >= floor - 1e-12]
    return min(eligible, key=lambda t: (t.values[1], -t.values[0], t.number))


def trials_frame(study: optuna.Study) -> pd.DataFrame:
    """``study.trials_dataframe()`` with every user attribute except the large ones."""
    frame = study.trials_dataframe(multi_index=False)
    hidden = [f"user_attrs_{name}" for name in _HIDDEN_ATTRS]
    return frame.drop(columns=[c for c in hidden if c in frame.columns])


def _or(value: Any, missing: Any) -> Any:
    return missing if value is None else value


def _figure(value: float | None) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) else "—"


#: Objectives that depend on the retrieval half alone: trials run no answer step, so their
#: accuracy is not measured (shown as "—").
RETRIEVAL_OBJECTIVES = ("recall", "lift")
#: Objectives the Pareto table already has a column for; any other gets a column of its own.
_COLUMN_OBJECTIVES = ("accuracy", "recall")


def _shape(t: FrozenTrial, agents: bool) -> str:
    """The trial's program columns: prompt, rounds, k, n_docs, and the agent's limits when
    the front holds an agent (an agent's prompt column says ``agent``)."""
    p = t.params
    if trial_kind(p) == "agent":
        limits = f" {p['max_steps']} / {p['max_articles']} / {p['max_agent_tokens']} |"
        return f" agent | — | — | {p['n_docs']} |{limits}"
    shape = f" {p['prompt']} | {p['rounds']} | {p['k']} | {p['n_docs']} |"
    return shape + (" — |" if agents else "")


def _row(t: FrozenTrial, chosen: FrozenTrial | None, metric: str, agents: bool) -> str:
    a = TrialFigures.of(t)
    mark = " ◀ chosen" if chosen is not None and t.number == chosen.number else ""
    objective = f"{t.values[0]:.3f}"
    own = "" if metric in _COLUMN_OBJECTIVES else f" {objective} |"
    if metric == "accuracy":
        accuracy = objective
    else:
        accuracy = "—" if metric in RETRIEVAL_OBJECTIVES else _figure(a.accuracy)
    recall = objective if metric == "recall" else _figure(a.recall)
    return (
        f"| {t.number}{mark} |{_shape(t, agents)}{own} {accuracy} | {recall} | "
        f"{_figure(a.no_lm_recall)} | {_figure(a.ref_bm25)} | "
        f"{_figure(a.ref_phrases)} | {t.values[1]:.0f} | "
        f"{_or(a.lm_calls_per_q, float('nan')):.2f} | {_or(a.judge_errors, '—')} | "
        f"{_or(a.n_questions, '—')} |"
    )


def pareto_markdown(
    front: Sequence[FrozenTrial],
    chosen: FrozenTrial | None,
    *,
    rule: PickRule,
    n_trials: int,
    metric: str = "accuracy",
) -> str:
    """The Pareto front as a markdown table, cheapest first. The objective is the accuracy or
    recall column, or (``lift``, ``accuracy+recall``) a column of its own."""
    own = "" if metric in _COLUMN_OBJECTIVES else f" {metric} |"
    agents = any(trial_kind(t.params) == "agent" for t in front)
    limits = " agent steps / articles / tokens |" if agents else ""
    lines = [
        f"# Pareto front ({len(front)} of {n_trials} complete trials)",
        "",
        f"The objective `{metric}` on the dev split against metered tokens per question",
        "(program LM, prompt + completion, counted whether or not the call was cached); accuracy",
        "is the autorater's (— where trials ran retrieval only), recall the gold articles found",
        f"after the last round. Pick rule: "
        f"`{rule}`. What the LM adds, with no LM call: `no-LM parts` is the program's",
        "question and phrase queries alone at the same article budget (— when it writes no",
        "query); `bm25-N` and `phrases-N` are the no-LM references at each dev question's own",
        "article count N"
        + (" (an agent's N: the articles it read; it has no no-LM parts)." if agents else "."),
        "",
        f"| trial | prompt | rounds | k | n_docs |{limits}{own} accuracy | recall | no-LM parts | "
        "bm25-N | phrases-N | tokens/q | LM calls/q | judge errors | questions |",
        "|---|---|---:|---:|---:|" + "---:|" * (9 + bool(own) + agents),
    ]
    ordered = sorted(front, key=lambda t: (t.values[1], t.number))
    lines += [_row(t, chosen, metric, agents) for t in ordered]
    return "\n".join(lines) + "\n"


def plot_pareto(
    trials: Sequence[FrozenTrial],
    front: Sequence[FrozenTrial],
    chosen: FrozenTrial | None,
    path: str | Path,
    *,
    title: str = "",
    metric: str = "accuracy",
) -> None:
    """The objective against tokens per question: all trials grey, the front highlighted."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.scatter(
        [t.values[1] for t in trials],
        [t.values[0] for t in trials],
        color="0.7",
        s=25,
        label=f"all trials ({len(trials)})",
    )
    ordered = sorted(front, key=lambda t: t.values[1])
    ax.step(
        [t.values[1] for t in ordered],
        [t.values[0] for t in ordered],
        where="post",
        color="tab:blue",
        linewidth=1.2,
    )
    ax.scatter(
        [t.values[1] for t in ordered],
        [t.values[0] for t in ordered],
        color="tab:blue",
        s=45,
        zorder=3,
        label=f"Pareto front ({len(ordered)})",
    )
    for t in ordered:
        ax.annotate(
            f"#{t.number} {trial_label(t.params)}",
            (t.values[1], t.values[0]),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=7,
        )
    if chosen is not None:
        ax.scatter(
            [chosen.values[1]],
            [chosen.values[0]],
            marker="*",
            s=220,
            color="tab:red",
            zorder=4,
            label=f"chosen (trial {chosen.number})",
        )
    ax.set_xlabel("tokens per question (dev split, program LM)")
    ax.set_ylabel(f"{metric} (dev split)")
    ax.set_ylim(-0.03, max(1.03, max((t.values[0] for t in trials), default=0) + 0.03))
    ax.set_title(title or f"FRAMES programs: {metric} vs cost")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
