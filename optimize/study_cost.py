"""A cost estimate (LM calls and tokens) printed before ``optimize.compile`` starts work.

Per question, a MultiHop configuration (rounds ``r``, queries per round ``k``, articles per
query ``n``) makes one query-writing call per round (none when ``k`` is 1 and the question
itself is the only query), one answer call, and at most one judge call (the deterministic
check often settles the verdict without it); an agent configuration is priced at its limits
(:func:`frames_dspy.run.cost.agent_cost`: an upper bound). The token assumptions are stated in
:data:`ASSUMPTIONS`; they are rough by design, meant to tell an afternoon from a week.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import mean

from frames_dspy.programs import ProgramSpec
from frames_dspy.run.cost import ASSUMPTIONS, JUDGE_OUTPUT, JUDGE_PROMPT
from frames_dspy.run.cost import question_cost as spec_cost
from optimize.optimizers import OptimizerSettings, rough_calls
from optimize.reference import REFERENCE, reference_spec
from optimize.space import SearchSpace, trial_kind, trial_spec

__all__ = ["ASSUMPTIONS", "PhaseCost", "CostEstimate", "question_cost", "estimate_cost"]


def question_cost(
    params: dict, *, context_tokens: int, include_question: bool = True, answer: bool = True
) -> tuple[float, float]:
    """(program LM calls, program tokens) for one question under one trial's parameters
    (``answer=False``: the retrieval half alone, as a recall compile runs it)."""
    spec = trial_spec(params, include_question=include_question, context_tokens=context_tokens)
    cost = spec_cost(spec, answer=answer)
    return cost.calls, cost.tokens


@dataclass
class PhaseCost:
    name: str
    questions: int
    calls: float
    tokens: float
    note: str = ""


@dataclass
class CostEstimate:
    phases: list[PhaseCost] = field(default_factory=list)
    per_question_mean: tuple[float, float] = (0.0, 0.0)
    per_question_max: tuple[float, float] = (0.0, 0.0)

    @property
    def calls(self) -> float:
        return sum(p.calls for p in self.phases)

    @property
    def tokens(self) -> float:
        return sum(p.tokens for p in self.phases)

    def lines(self) -> list[str]:
        mean_calls, mean_tokens = self.per_question_mean
        max_calls, max_tokens = self.per_question_max
        out = [
            "Cost estimate (rough; program + judge LM):",
            f"  per dev question: {mean_calls:.1f} LM calls / {mean_tokens:,.0f} tokens on "
            f"average over the search space, up to {max_calls:.0f} / {max_tokens:,.0f}",
        ]
        for p in self.phases:
            note = f"  ({p.note})" if p.note else ""
            out.append(
                f"  {p.name:<12} {p.questions:>6} questions  ~{p.calls:>9,.0f} LM calls  "
                f"~{p.tokens:>13,.0f} tokens{note}"
            )
        out.append(
            f"  {'total':<12} {'':>6}            ~{self.calls:>9,.0f} LM calls  "
            f"~{self.tokens:>13,.0f} tokens"
        )
        out.append(
            f"  assumptions: {ASSUMPTIONS}; the search-space mean assumes the sampler spreads "
            "evenly over the space"
        )
        return out


def estimate_cost(
    *,
    space: SearchSpace,
    trials: int,
    n_train: int,
    n_dev: int,
    n_test: int,
    context_tokens: int,
    optimizer: OptimizerSettings,
    optimize_in_trials: bool = False,
    include_question: bool = True,
    final: bool = True,
) -> CostEstimate:
    """Estimate the LM calls and tokens of a whole ``optimize.compile`` run.

    Args:
        space: The search space (its mean configuration prices the study).
        trials: New trials this run will make.
        n_train, n_dev, n_test: Split sizes (``n_test`` after ``--test-limit``).
        context_tokens: The answer prompt's article budget.
        optimizer: The optimizer and its settings.
        optimize_in_trials: Whether every trial compiles its prompts.
        include_question: Whether the question is one of each round's queries.
        final: Whether the final compile and test evaluation run (not for ``--workers-only``).
    """

    def priced(answer: bool) -> dict[str, list[tuple[float, float]]]:
        shape = {"context_tokens": context_tokens, "include_question": include_question}
        return _costs_by_kind(space, answer=answer, **shape)

    # A recall compile runs the query writer alone on dev and test: no answer, no judge.
    recall = optimizer.objective == "recall"
    by_kind = priced(answer=not recall)
    costs = [c for kind in by_kind.values() for c in kind]
    # rough_calls counts program runs with their answer call and takes it off itself.
    program_calls = _spread(priced(answer=True) if recall else by_kind, 0)
    judge_calls, judge_tokens = (0, 0) if recall else (1, JUDGE_PROMPT + JUDGE_OUTPUT)
    mean_calls = _spread(by_kind, 0) + judge_calls
    mean_tokens = _spread(by_kind, 1) + judge_tokens
    max_calls = max(c for c, _ in costs) + judge_calls
    max_tokens = max(t for _, t in costs) + judge_tokens
    tokens_per_call = mean_tokens / mean_calls if mean_calls else 0.0
    estimate = CostEstimate(
        per_question_mean=(mean_calls, mean_tokens), per_question_max=(max_calls, max_tokens)
    )
    compile_calls = rough_calls(optimizer, n_train=n_train, calls_per_q=program_calls)
    study_calls = trials * n_dev * mean_calls
    note = f"{trials} trial(s) x {n_dev} dev questions"
    if optimize_in_trials and optimizer.name != "none":
        study_calls += trials * compile_calls
        note += f", each compiling with {optimizer.name} on {n_train} train questions"
    estimate.phases.append(
        PhaseCost("study", trials * n_dev, study_calls, study_calls * tokens_per_call, note)
    )
    if final and optimizer.name != "none" and not optimize_in_trials:
        calls = compile_calls + n_dev * mean_calls
        estimate.phases.append(
            PhaseCost(
                optimizer.name,
                n_train + n_dev,
                calls,
                calls * tokens_per_call,
                "compile on train, then re-score on dev",
            )
        )
    if final:
        calls = n_test * mean_calls
        estimate.phases.append(
            PhaseCost("test", n_test, calls, calls * tokens_per_call, "chosen program, once")
        )
    if final and "agent" in space.kinds:
        estimate.phases.append(_reference_phase(space, n_test, context_tokens, answer=not recall))
    return estimate


def _costs_by_kind(space: SearchSpace, **shape) -> dict[str, list[tuple[float, float]]]:
    """Each configuration's (calls, tokens) per question, by program kind."""
    costs: dict[str, list[tuple[float, float]]] = {}
    for params in space.configurations():
        costs.setdefault(trial_kind(params), []).append(question_cost(params, **shape))
    return costs


def _spread(costs: dict[str, list[tuple[float, float]]], which: int) -> float:
    """The mean over the kinds of each kind's mean (the sampler chooses a kind first)."""
    return mean(mean(c[which] for c in kind) for kind in costs.values())


def _reference_phase(space: SearchSpace, n_test: int, context_tokens: int, *, answer: bool):
    """The test run's reference beside an agent pick (:mod:`optimize.reference`)."""
    spec: ProgramSpec = reference_spec(context_tokens=context_tokens)
    cost = spec_cost(spec, answer=answer)
    judge = (1, JUDGE_PROMPT + JUDGE_OUTPUT) if answer else (0, 0)
    maybe = "" if space.kinds == ("agent",) else "if the pick is an agent; "
    return PhaseCost(
        "reference",
        n_test,
        n_test * (cost.calls + judge[0]),
        n_test * (cost.tokens + judge[1]),
        f"{maybe}{REFERENCE} at {spec.describe().removeprefix('multihop planning ')}, once",
    )
