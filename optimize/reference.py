"""The held-out comparison an agent pick gets: the paper's multi-step condition beside it.

An agent chosen by ``optimize.compile`` is scored on the test split together with
``multistep-planning``, in the same evaluation run (the same questions, model, judge, index
and article budget). The reference runs at evaluate's settings for that condition, the
paper's 5 rounds x 5 queries x 10 articles with the planning prompt (and the run's
``--no-question-query`` and ``--cot``), not at the study's multi-step trials: an agent-only
study has none, and the paper's condition is the one every table names, so the line reads the
same in every compile run. The two are paired question by question
(:func:`frames_dspy.results.comparison.compare_conditions`): the accuracy and final-recall
differences with paired bootstrap 95% intervals and McNemar's exact test, said in one line
and kept as a :class:`~optimize.scores.PairedReference` (``test_score.json``'s ``reference``).

A multi-step pick gets no reference here: its own no-LM parts and ``bm25-N``/``phrases-N``
are its comparison (:mod:`optimize.lm_share`).
"""

from __future__ import annotations

from pathlib import Path

from frames_dspy.programs import ProgramSpec, condition
from frames_dspy.results.comparison import SMALL_N, compare_conditions, format_interval, load_run
from frames_dspy.run.eval_config import EvalConfig
from optimize.scores import PairedReference

__all__ = ["REFERENCE", "paired_reference", "reference_for", "reference_line", "reference_spec"]

#: The condition an agent pick is compared with on the test split.
REFERENCE = "multistep-planning"


def reference_for(spec: ProgramSpec) -> str | None:
    """The condition the test run adds beside a pick of ``spec``: :data:`REFERENCE` for an
    agent, None for the other kinds."""
    return REFERENCE if spec.kind == "agent" else None


def reference_spec(
    *, context_tokens: int, include_question: bool = True, cot: bool = False
) -> ProgramSpec:
    """The reference's spec as the test run builds it: evaluate's settings for it."""
    defaults = EvalConfig()
    configured = condition(REFERENCE).configured(
        rounds=defaults.rounds,
        k=defaults.k,
        n_docs=defaults.n_docs,
        include_question=include_question,
        cot=cot,
    )
    return configured.replace(context_tokens=context_tokens)


def paired_reference(test_dir: Path, reference: str) -> PairedReference:
    """The program against ``reference`` on the questions of the test run both answered
    (differences are the program's figure minus the reference's).

    Raises:
        CompareError: the run folder lacks one of the two conditions (it names which).
    """
    run = load_run(test_dir)
    pair = compare_conditions(run, run, reference, "program")
    spec = (run.config.get("programs") or {}).get(reference)
    return PairedReference(
        reference=reference,
        label=ProgramSpec.from_dict(spec).describe() if spec else reference,
        n=pair.n,
        accuracy_reference=pair.accuracy_a,
        accuracy_program=pair.accuracy_b,
        accuracy_diff=pair.accuracy_diff,
        accuracy_ci95=pair.accuracy_ci95,
        mcnemar_p=pair.mcnemar_p,
        recall_n=pair.recall_n,
        recall_reference=pair.recall_final_a,
        recall_program=pair.recall_final_b,
        recall_diff=pair.recall_final_diff,
        recall_ci95=pair.recall_final_ci95,
        tokens_per_q_reference=pair.tokens_per_q_a,
        tokens_per_q_program=pair.tokens_per_q_b,
    )


def _shows(ci: list[float] | None, what: str) -> str:
    if ci is None:
        return "nothing to pair"
    if ci[0] > 0:
        return f"the agent {what} more"
    if ci[1] < 0:
        return f"the reference {what} more"
    return "no difference shown"


def reference_line(ref: PairedReference) -> str:
    """One plain line: the agent against the reference held out, paired by question."""
    parts = []
    if ref.accuracy_diff is not None:
        parts.append(
            f"accuracy {ref.accuracy_program:.3f} against {ref.accuracy_reference:.3f}, "
            f"{ref.accuracy_diff:+.3f} {format_interval(ref.accuracy_ci95)} "
            f"(McNemar p = {ref.mcnemar_p:.3g}: {_shows(ref.accuracy_ci95, 'answers')})"
        )
    else:
        parts.append("accuracy not measured (retrieval only)")
    if ref.recall_diff is not None:
        parts.append(
            f"final recall {ref.recall_program:.3f} against {ref.recall_reference:.3f}, "
            f"{ref.recall_diff:+.3f} {format_interval(ref.recall_ci95)} "
            f"({_shows(ref.recall_ci95, 'finds')})"
        )
    tokens = ref.tokens_per_q_program, ref.tokens_per_q_reference
    if None not in tokens:
        parts.append(f"tokens/q {tokens[0]:.0f} against {tokens[1]:.0f}")
    if ref.n < SMALL_N:
        parts.append(f"with fewer than {SMALL_N} questions the intervals are too narrow to trust")
    return (
        f"held out, the agent against {ref.reference} ({ref.label}), paired over "
        f"{ref.n} questions (agent minus reference, 95% interval): " + "; ".join(parts)
    )
