"""The Optuna side of ``optimize.compile``: LM accounting, scoring, the objective.

A trial picks a configuration from the search space (:mod:`optimize.space`: the multi-step
program's rounds, k, n_docs and query prompt, or the agent's limits), builds that program
(optionally compiling its prompts with a DSPy optimizer on the train split), scores it on the
dev split with the autorater, and returns two objectives: the chosen one (:data:`OBJECTIVES`:
accuracy, recall, or accuracy with ties broken by recall; maximised) and tokens per question
(minimised).

Tokens per question are *metered* (:class:`frames_dspy.lm.accounting.TokenMeter`): every call
of the program's LM is counted at 4 characters per token (prompt plus completion), whether or
not DSPy served it from its cache. The LM's own usage figures are kept as
``reported_tokens_per_q`` but cannot be the objective: a cache hit reports no tokens, so a
configuration that repeats earlier calls (round one is the same for many configurations) would
look cheaper than it is.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import socket
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy
import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from frames_dspy.judge.autorater import Autorater
from frames_dspy.lm.accounting import CallBudget
from frames_dspy.programs import NoLMReferences, build_program, lm_queries_per_round, no_lm_recall
from frames_dspy.results.records import QuestionRecord
from frames_dspy.results.run_folder import RunFolder
from frames_dspy.results.summary import ConditionSummary, objective_value, summarize_records
from frames_dspy.run.runner import Runner
from optimize.pareto import RETRIEVAL_OBJECTIVES
from optimize.scores import TrialFigures
from optimize.space import SearchSpace, searches_by_lm, trial_spec

logger = logging.getLogger(__name__)

__all__ = [
    "OBJECTIVES",
    "DevScore",
    "score_program",
    "Objective",
    "SurplusTrial",
    "worker_id",
    "count_active",
    "reap_dead_local_trials",
]

#: What a study maximises (its second objective is always metered tokens per question).
OBJECTIVES = {
    "accuracy": "autorater accuracy on the dev split",
    "recall": "gold-article recall after the last round (every dev question with a gold "
    "article counts; retrieval only: no answer step and no judge call, so no accuracy)",
    "accuracy+recall": "accuracy, ties broken by recall (recall adds less than one "
    "question's worth of accuracy): with a strong model accuracy decides, with a weak one "
    "recall still separates trials",
    "lift": "final recall minus the stronger no-LM reference's (bm25-N or phrases-N, on the "
    "same dev questions, each at the article count N the program reached on it), so a "
    "larger article budget does not win by itself (retrieval only, like recall)",
}


# --- scoring a program on a split ---------------------------------------------------------------


@dataclass
class DevScore:
    """A program's score on a list of questions (possibly cut short by the call budget).

    Every figure comes from :func:`frames_dspy.results.summary.summarize_records` over ``records``.
    """

    wanted: int = 0
    records: list[QuestionRecord] = field(default_factory=list)
    seconds: float = 0.0
    #: The stronger no-LM reference's recall on the same questions (the ``lift`` objective).
    reference: float | None = None

    @functools.cached_property
    def figures(self) -> ConditionSummary:
        return summarize_records(self.records)

    @property
    def n(self) -> int:
        return len(self.records)

    @property
    def complete(self) -> bool:
        return self.n == self.wanted

    @property
    def accuracy(self) -> float:
        return self.figures.accuracy or 0.0

    @property
    def tokens_per_q(self) -> float:
        """Metered tokens per question (see :mod:`frames_dspy.results.records`)."""
        return self.figures.tokens_per_question

    @property
    def recall_by_round(self) -> list[float]:
        """Mean gold-article recall per round over every question with a gold article."""
        return self.figures.recall_by_round

    @property
    def recall(self) -> float:
        """Mean gold-article recall after the last round (0 when nothing was retrieved)."""
        by_round = self.recall_by_round
        return by_round[-1] if by_round else 0.0

    def value(self, objective: str) -> float:
        """The study's first objective: see :data:`OBJECTIVES`."""
        if objective not in OBJECTIVES:
            raise ValueError(
                f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}"
            )
        if objective == "lift":
            if self.reference is None:
                raise ValueError("the lift objective needs the no-LM reference's recall")
            return self.recall - self.reference
        return objective_value(self.figures, objective)

    def attrs(self) -> dict[str, Any]:
        """The numbers stored as a trial's user attributes."""
        f, by_round = self.figures, self.recall_by_round
        return {
            "accuracy": round(self.accuracy, 6),
            "recall": round(self.recall, 6),
            "recall_round1": round(by_round[0], 6) if by_round else None,
            "tokens_per_q": round(self.tokens_per_q, 2),
            "reported_tokens_per_q": round(f.reported_tokens_per_question, 2),
            "lm_calls_per_q": round(f.lm_calls_per_question, 3),
            "judge_calls": f.judge_calls,
            "judge_errors": f.judge_errors,
            "program_errors": f.program_errors,
            "n_questions": self.n,
            "seconds": round(self.seconds, 2),
        }


def score_program(
    program: dspy.Module,
    examples: Sequence[dspy.Example],
    *,
    lm: dspy.BaseLM,
    autorater: Autorater,
    store,
    label: str,
    budget: CallBudget | None = None,
    threads: int = 1,
    sink: RunFolder | None = None,
) -> DevScore:
    """Run and judge ``program`` on ``examples`` the way ``frames_dspy.evaluate`` does.

    Questions not yet started when ``budget`` runs out are skipped (``complete`` is then
    False). Each record is appended to ``sink`` (a run folder) with ``condition=label``.

    Raises:
        RunAborted: the LM cannot run (a missing key, a dead server); the message says why.
    """
    started = time.perf_counter()
    runner = Runner(
        lm,
        autorater,
        store,
        threads=threads,
        on_record=[sink.append] if sink is not None else [],
        stop=(lambda: "max-lm-calls reached" if budget.exhausted else None) if budget else None,
    )
    records = runner.run(label, program, examples)
    return DevScore(wanted=len(examples), records=records, seconds=time.perf_counter() - started)


# --- the study's bookkeeping --------------------------------------------------------------------


class SurplusTrial(Exception):
    """Raised inside a trial that another worker's trials made unnecessary."""


def worker_id() -> str:
    """``host:pid`` of this process, stored on each trial it runs."""
    return f"{socket.gethostname()}:{os.getpid()}"


def count_active(study: optuna.Study, *, below: int | None = None) -> int:
    """Complete trials plus trials still running (numbered below ``below`` if given).

    The trials of dead workers are first marked FAIL, so they do not count towards the target
    (the workers still alive would stop short of it): on this host at once
    (:func:`reap_dead_local_trials`), on other hosts once their heartbeat is older than the
    storage's grace period.
    """
    reap_dead_local_trials(study)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
    return sum(1 for t in trials if below is None or t.number < below)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_dead_local_trials(study: optuna.Study) -> list[int]:
    """Mark FAIL the RUNNING trials whose worker was a process on this host that has died.

    A worker killed mid-trial (SIGKILL, a crash, a reboot) leaves its trial RUNNING forever;
    it would count towards ``--trials`` and never finish. Trials of workers on other hosts
    are left to Optuna's heartbeat (``grace_period``). The trial's ``reaped_by`` attribute
    names the process that marked it (either one, if two reaped it at the same moment).

    Returns:
        The numbers of the trials this call marked FAIL.
    """
    host = socket.gethostname()
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    dead = []
    for trial in running:
        owner = str(TrialFigures.of(trial).worker or "")
        owner_host, _, pid = owner.rpartition(":")
        if owner_host != host or not pid.isdigit() or int(pid) == os.getpid():
            continue
        if not _pid_alive(int(pid)):
            dead.append((trial.number, owner))
    if not dead:
        return []
    storage = study._storage  # noqa: SLF001 - the study's own storage; no public accessor
    study_id = storage.get_study_id_from_name(study.study_name)
    reaped = []
    for number, owner in dead:
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, number)
        try:
            storage.set_trial_user_attr(trial_id, "reaped", f"worker {owner} had died")
            storage.set_trial_user_attr(trial_id, "reaped_by", worker_id())
            storage.set_trial_state_values(trial_id, TrialState.FAIL)
        except UpdateFinishedTrialError:
            continue  # another live worker (or the heartbeat) marked it first
        reaped.append(number)
    if reaped:
        logger.warning("marked trials %s FAIL: their worker process had died", reaped)
    return reaped


# --- the objective ------------------------------------------------------------------------------

#: Attributes that describe the trial's run rather than its result; not copied to duplicates.
_OWN_ATTRS = frozenset(
    {"worker", "seconds", "duplicate_of", "surplus", "stopped", "reaped", "reaped_by"}
)


@dataclass
class Objective:
    """The Optuna objective: build, (optionally compile), score on dev, return two values.

    Attributes:
        compile_fn: ``(program, trainset) -> program`` run before scoring when prompts are
            optimised inside trials; None scores the uncompiled program.
        target: The study's target number of trials (``--trials``): a trial numbered after
            ``target`` complete-or-running trials is surplus and ends at once.
    """

    space: SearchSpace
    dev: Sequence[dspy.Example]
    train: Sequence[dspy.Example]
    lm: dspy.BaseLM
    autorater: Autorater
    store: Any
    retriever: Any
    context_tokens: int
    budget: CallBudget
    target: int
    include_question: bool = True
    cot: bool = False
    threads: int = 1
    compile_fn: Callable[[dspy.Module, Sequence[dspy.Example]], dspy.Module] | None = None
    sink: RunFolder | None = None
    objective: str = "accuracy"
    references: NoLMReferences | None = None

    def __call__(self, trial: optuna.Trial) -> tuple[float, float]:
        trial.set_user_attr("worker", worker_id())
        if count_active(trial.study, below=trial.number) >= self.target:
            trial.set_user_attr("surplus", True)
            raise SurplusTrial(f"the study already holds {self.target} trials")
        params = self.space.suggest(trial)
        spec = trial_spec(
            params,
            include_question=self.include_question,
            cot=self.cot,
            context_tokens=self.context_tokens,
        )
        trial.set_user_attr("label", spec.describe())
        earlier = self._same_params(trial, params)
        if earlier is not None:
            # Re-running would cost the same calls and, with DSPy's cache, return the same
            # answers: reuse the result.
            for key, value in earlier.user_attrs.items():
                if key not in _OWN_ATTRS:
                    trial.set_user_attr(key, value)
            trial.set_user_attr("duplicate_of", earlier.number)
            return tuple(earlier.values)
        if self.budget.exhausted:
            trial.set_user_attr("stopped", "max-lm-calls reached before the trial started")
            raise optuna.TrialPruned("--max-lm-calls reached")

        started = time.perf_counter()
        calls_before = self.budget.calls
        program = build_program(spec, retriever=self.retriever, store=self.store)
        if self.compile_fn is not None and searches_by_lm(spec):
            # A program that sends no LM query has no prompt to compile.
            program = self.compile_fn(program, self.train)
            trial.set_user_attr("program_state", json.dumps(program.dump_state(), default=str))
            if getattr(program, "teacher_report", None):
                trial.set_user_attr("teacher_report", program.teacher_report)
        if self.objective in RETRIEVAL_OBJECTIVES:
            # Recall cannot depend on the answer: score the retrieval half alone (no answer
            # call, so no judge call either).
            program.answer_step = False
        score = score_program(
            program,
            self.dev,
            lm=self.lm,
            autorater=self.autorater,
            store=self.store,
            label=f"trial-{trial.number}",
            budget=self.budget,
            threads=self.threads,
            sink=self.sink,
        )
        for key, value in score.attrs().items():
            trial.set_user_attr(key, value)
        for key, value in self.lm_share(program, score).items():
            trial.set_user_attr(key, value)
        trial.set_user_attr("lm_calls_total", self.budget.calls - calls_before)
        trial.set_user_attr("seconds", round(time.perf_counter() - started, 2))
        if not score.complete:
            trial.set_user_attr(
                "stopped", f"max-lm-calls reached after {score.n}/{score.wanted} dev questions"
            )
            raise optuna.TrialPruned("--max-lm-calls reached")
        return score.value(self.objective), score.tokens_per_q

    def lm_share(self, program: dspy.Module, score: DevScore) -> dict[str, Any]:
        """What the LM added on these dev questions, with no LM call: both no-LM references
        at each question's own article count (``score.reference`` is set to the stronger),
        the lift over it, and for a program that writes queries the recall of its no-LM
        parts alone at the same budget (``no_lm_recall``). An agent's N is the articles it
        read; it has no no-LM parts (every article it reads, its LM chose), so it gets
        neither ``no_lm_recall`` nor ``lm_queries_per_round``."""
        if self.references is None:
            self.references = NoLMReferences(self.retriever)
        refs = self.references.strongest(score.records)
        score.reference = refs["value"]
        share = {
            "ref_bm25": refs["bm25"],
            "ref_phrases": refs["phrases"],
            "ref_best": refs["best"],
            "lift_reference": refs["value"],
            "lift": round(score.recall - refs["value"], 6),
        }
        if program.spec.kind == "agent":
            return share
        writes = share["lm_queries_per_round"] = lm_queries_per_round(program.spec)
        if writes:
            alone = no_lm_recall(program, score.records)
            share["no_lm_recall"] = alone
            share["lm_share"] = None if alone is None else round(score.recall - alone, 6)
        return share

    @staticmethod
    def _same_params(trial: optuna.Trial, params: dict[str, Any]) -> FrozenTrial | None:
        for earlier in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            if earlier.params == params:
                return earlier
        return None
