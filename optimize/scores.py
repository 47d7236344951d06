"""What a study and a compile report, typed: a trial's dev figures, the pick, the test score.

A trial's figures live in Optuna's storage as user attributes, a string-keyed store that
:class:`optimize.study.Objective` writes (``DevScore.attrs`` and ``Objective.lm_share`` name
them); :meth:`TrialFigures.of` reads them back as one typed object, so the pick, the Pareto
table and the progress lines read attributes. :class:`ChosenTrial` and :class:`TestScore` are
what the final stage (:mod:`optimize.final`) hands to the command line, ``config.json``,
``program.json`` and ``test_score.json``; their ``to_dict`` writes those files' keys in the
order they always had. An agent pick's test score carries a :class:`PairedReference`: the
agent against the paper's multi-step condition on the same questions (:mod:`optimize.reference`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from optuna.trial import FrozenTrial

from frames_dspy.results.summary import ConditionSummary

__all__ = ["TrialFigures", "ChosenTrial", "PairedReference", "TestScore", "TEST_FIGURES"]


@dataclass(frozen=True)
class TrialFigures:
    """A trial's user attributes, typed; None where the trial stored none.

    Attributes:
        accuracy: Autorater accuracy on the dev questions it scored.
        recall: Mean gold-article recall after the last round.
        recall_round1: Mean recall after the first round (None without retrieval).
        tokens_per_q: Metered program-LM tokens per question.
        reported_tokens_per_q: Reported program-LM tokens per question.
        lm_calls_per_q: Program-LM calls per question.
        judge_calls: Verdicts the LM judge was asked for.
        judge_errors: Questions the judge gave no verdict on.
        program_errors: Questions whose program failed.
        n_questions: Dev questions scored.
        seconds: Wall time of the trial.
        lm_calls_total: LM calls the trial made (program, judge, compiling).
        ref_bm25: The bm25-N no-LM reference's recall on the same questions.
        ref_phrases: The phrases-N no-LM reference's recall on the same questions.
        ref_best: Which reference is the stronger (``bm25`` or ``phrases``).
        lift_reference: The stronger reference's recall.
        lift: Recall minus the stronger reference's.
        lm_queries_per_round: LM-written queries per round of the trial's program.
        no_lm_recall: Recall of the program's no-LM parts alone (a program that writes).
        lm_share: Recall minus its no-LM parts alone.
        label: The trial's program, described.
        worker: The host:pid that ran it.
        surplus: The study already held its trials; the trial ended at once.
        duplicate_of: The earlier trial with the same settings whose result it reused.
        stopped: Why the trial stopped before its dev questions were done.
        reaped: Why it was marked failed (its worker had died).
        reaped_by: The process that marked it.
        program_state: The trial's compiled program (DSPy state, JSON).
        teacher_report: What the teacher bootstrapped, when prompts were compiled in trials.
    """

    accuracy: float | None = None
    recall: float | None = None
    recall_round1: float | None = None
    tokens_per_q: float | None = None
    reported_tokens_per_q: float | None = None
    lm_calls_per_q: float | None = None
    judge_calls: int | None = None
    judge_errors: int | None = None
    program_errors: int | None = None
    n_questions: int | None = None
    seconds: float | None = None
    lm_calls_total: int | None = None
    ref_bm25: float | None = None
    ref_phrases: float | None = None
    ref_best: str | None = None
    lift_reference: float | None = None
    lift: float | None = None
    lm_queries_per_round: int | None = None
    no_lm_recall: float | None = None
    lm_share: float | None = None
    label: str | None = None
    worker: str | None = None
    surplus: bool | None = None
    duplicate_of: int | None = None
    stopped: str | None = None
    reaped: str | None = None
    reaped_by: str | None = None
    program_state: str | None = None
    teacher_report: dict[str, Any] | None = None

    @classmethod
    def of(cls, trial: FrozenTrial) -> TrialFigures:
        """The trial's attributes (any this version does not know are left out)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in trial.user_attrs.items() if k in known})


@dataclass
class ChosenTrial:
    """The trial picked from the Pareto front, its dev figures and what was made of it.

    Attributes:
        trial: Its number.
        params: Its search-space settings (written at the top level, after ``trial``).
        label: Its program, described.
        objective: The study's objective.
        dev_objective: Its objective on dev.
        dev_accuracy: Its dev accuracy (the objective when the trial stored none).
        dev_recall: Its dev recall after the last round.
        dev_tokens_per_q: Its metered tokens per dev question (the second objective).
        dev_lm_calls_per_q: Its program-LM calls per dev question.
        pick: The rule that chose it (``best``, ``cheapest-within:TOL``).
        pareto_size: Trials on the front.
        compile: What compiling its prompts did (optimizer, demos, kept or not, dev scores).
        kind: Its program kind (``multihop`` or ``agent``, :data:`optimize.space.KINDS`).
        lm_queries_per_round: LM-written queries per round of the program handed over (None
            for an agent: it writes no rounds of queries).
        dev_no_lm_recall: Dev recall of its no-LM parts alone.
        dev_references: Dev recall of bm25-N and phrases-N.
        dev_lift: Dev recall over the stronger of them.
        lm_queries: What ``--lm-queries`` weighed (None when the rule does not apply).
        program: What ``program.json`` holds, when it is not the pick itself (else None).
    """

    trial: int
    params: dict[str, Any]
    label: str
    objective: str
    dev_objective: float
    dev_accuracy: float | None
    dev_recall: float | None
    dev_tokens_per_q: float
    dev_lm_calls_per_q: float | None
    pick: str
    pareto_size: int
    compile: dict[str, Any]
    kind: str
    lm_queries_per_round: int | None
    dev_no_lm_recall: float | None
    dev_references: dict[str, float | None]
    dev_lift: float | None
    lm_queries: dict[str, Any] | None
    program: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """As ``config.json``'s ``chosen`` and ``program.json``'s ``optimize`` hold it."""
        row = {
            "trial": self.trial,
            **self.params,
            "label": self.label,
            "objective": self.objective,
            "dev_objective": self.dev_objective,
            "dev_accuracy": self.dev_accuracy,
            "dev_recall": self.dev_recall,
            "dev_tokens_per_q": self.dev_tokens_per_q,
            "dev_lm_calls_per_q": self.dev_lm_calls_per_q,
            "pick": self.pick,
            "pareto_size": self.pareto_size,
            "compile": self.compile,
            # A study that tries the agent has 'kind' among the params too (the same value),
            # which keeps the place it has there.
            "kind": self.kind,
            "lm_queries_per_round": self.lm_queries_per_round,
            "dev_no_lm_recall": self.dev_no_lm_recall,
            "dev_references": self.dev_references,
            "dev_lift": self.dev_lift,
            "lm_queries": self.lm_queries,
        }
        if self.program is not None:
            row["program"] = self.program
        return row


#: The test run's figures ``test_score.json`` carries, in its order, under their
#: :class:`~frames_dspy.results.summary.ConditionSummary` names.
TEST_FIGURES = (
    "n", "correct", "accuracy", "ci95", "judge_errors", "program_errors", "tokens_per_question",
    "recall_by_round", "lm_calls_per_question", "seconds_per_question",
)  # fmt: skip


@dataclass(frozen=True)
class PairedReference:
    """An agent pick against the reference condition on the test questions both answered
    (``test_score.json``'s ``reference``); each difference is the program's figure minus the
    reference's, with its paired bootstrap 95% interval.

    Attributes:
        reference: The reference condition (:data:`optimize.reference.REFERENCE`).
        label: Its program, described (``multihop planning r5 k5 n10``).
        n: The questions paired.
        accuracy_reference: The reference's accuracy on them (None: retrieval only).
        accuracy_program: The program's accuracy on them.
        accuracy_diff: The program's minus the reference's.
        accuracy_ci95: Its paired 95% interval.
        mcnemar_p: McNemar's exact p on the questions one got right and the other wrong.
        recall_n: The questions paired on final recall (a gold article in either run).
        recall_reference: The reference's final recall on them.
        recall_program: The program's final recall on them.
        recall_diff: The program's minus the reference's.
        recall_ci95: Its paired 95% interval.
        tokens_per_q_reference: The reference's metered tokens per question.
        tokens_per_q_program: The program's metered tokens per question.
    """

    reference: str
    label: str
    n: int
    accuracy_reference: float | None
    accuracy_program: float | None
    accuracy_diff: float | None
    accuracy_ci95: list[float] | None
    mcnemar_p: float | None
    recall_n: int
    recall_reference: float | None
    recall_program: float | None
    recall_diff: float | None
    recall_ci95: list[float] | None
    tokens_per_q_reference: float | None
    tokens_per_q_program: float | None

    def to_dict(self) -> dict[str, Any]:
        """As ``test_score.json`` holds it: the fields, in their order."""
        return asdict(self)


@dataclass(frozen=True)
class TestScore:
    """The chosen program scored once on the test split (``test_score.json``).

    Attributes:
        figures: The test run's summary of the program (its :data:`TEST_FIGURES` are written).
        test_limit: The ``--test-limit`` (None: the whole test split).
        test_split_size: Questions in the test split.
        program_sha256: The hash of the ``program.json`` scored.
        reproduce: The evaluate command that re-scores it.
        no_lm_recall: Test recall of the program's no-LM parts alone (None: it writes none).
        references: Test recall of bm25-N and phrases-N.
        lm_share: Test recall minus the no-LM parts', paired (None: nothing to pair).
        lm_share_ci95: Its paired bootstrap 95% interval.
        lm_share_n: The questions paired.
        reference: An agent pick against the reference condition, paired (None: not an agent).
        split, program, run_folder: ``test``, ``program.json``, ``test_run``.
    """

    __test__ = False  # a result, not a pytest class

    figures: ConditionSummary
    test_limit: int | None
    test_split_size: int
    program_sha256: str
    reproduce: str
    no_lm_recall: float | None
    references: dict[str, float | None]
    lm_share: float | None = None
    lm_share_ci95: list[float] | None = None
    lm_share_n: int | None = None
    reference: PairedReference | None = None
    split: str = "test"
    program: str = "program.json"
    run_folder: str = "test_run"

    def to_dict(self) -> dict[str, Any]:
        """``test_score.json``: the split, the figures, the program, how to re-score it."""
        figures = self.figures.to_dict()
        row = {"split": self.split, **{name: figures[name] for name in TEST_FIGURES}}
        row |= {
            "test_limit": self.test_limit,
            "test_split_size": self.test_split_size,
            "program": self.program,
            "program_sha256": self.program_sha256,
            "run_folder": self.run_folder,
            "reproduce": self.reproduce,
            "no_lm_recall": self.no_lm_recall,
            "references": self.references,
        }
        if self.lm_share_n is not None:
            row |= {
                "lm_share": self.lm_share,
                "lm_share_ci95": self.lm_share_ci95,
                "lm_share_n": self.lm_share_n,
            }
        if self.reference is not None:
            row["reference"] = self.reference.to_dict()
        return row
