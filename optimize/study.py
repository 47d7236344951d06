"""The Optuna side of ``optimize.compile``: search space, LM accounting, scoring, the objective.

A trial picks ``rounds``, ``k``, ``n_docs`` and the query prompt (vanilla, planning or
titles), builds the :class:`~frames_dspy.programs.MultiHop` program (optionally compiling its
prompts with a DSPy optimizer on the train split), scores it on the dev split with the
autorater, and returns two objectives: the chosen one (:data:`OBJECTIVES`: accuracy, recall,
or accuracy with ties broken by recall; maximised) and tokens per question (minimised).

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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy
import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from frames_dspy.judge.autorater import Autorater
from frames_dspy.lm.accounting import CallBudget
from frames_dspy.programs import (
    NoLMReferences,
    ProgramSpec,
    build_program,
    lm_queries_per_round,
    no_lm_recall,
)
from frames_dspy.results.records import QuestionRecord
from frames_dspy.results.run_folder import RunFolder
from frames_dspy.results.summary import ConditionSummary, objective_value, summarize_records
from frames_dspy.run.runner import Runner
from optimize.pareto import RETRIEVAL_OBJECTIVES
from optimize.scores import TrialFigures

logger = logging.getLogger(__name__)

__all__ = [
    "PROMPTS",
    "OBJECTIVES",
    "SearchSpace",
    "DevScore",
    "score_program",
    "trial_spec",
    "Objective",
    "SurplusTrial",
    "worker_id",
    "count_active",
    "reap_dead_local_trials",
]

#: The two query-writing prompts a trial chooses between.
PROMPTS = ("vanilla", "planning", "titles")
#: The paper's two prompts: what a study tries unless told otherwise.
PAPER_PROMPTS = PROMPTS[:2]

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


@dataclass(frozen=True)
class SearchSpace:
    """Inclusive integer ranges for the MultiHop knobs, and the choices for the others.

    ``rounds``, ``k`` and ``n_docs`` are ranges; ``prompts`` (vanilla, planning),
    ``question_query`` (whether the question is one of each round's queries),
    ``found_tokens`` (the budget of the found-articles view the query writer reads) and
    ``lead_chars`` (how much of each article's opening it shows) are lists of choices; a
    one-item list fixes that knob. ``question_docs`` (the articles the question's own query
    brings per round, see :class:`~frames_dspy.programs.MultiHop`) is a list of choices too;
    empty (the default) leaves it unset: the question gets ``n_docs`` like any query.
    ``phrase_docs`` (the articles the question's phrases bring per round; 0: none) likewise,
    with ``question_docs``, and ``lm_from_round`` (the first round the LM writes in). With
    the question as a query, ``k = 1`` is a program that sends
    no LM query, so a study can find that the LM adds nothing.
    """

    rounds: tuple[int, int] = (1, 5)
    k: tuple[int, int] = (1, 5)
    n_docs: tuple[int, int] = (1, 10)
    prompts: tuple[str, ...] = PAPER_PROMPTS
    question_query: tuple[bool, ...] = (True,)
    found_tokens: tuple[int, ...] = (1000,)
    lead_chars: tuple[int, ...] = (120,)
    question_docs: tuple[int, ...] = ()
    phrase_docs: tuple[int, ...] = ()
    lm_from_round: tuple[int, ...] = ()

    def __post_init__(self):
        for name in ("rounds", "k", "n_docs"):
            low, high = getattr(self, name)
            if not 1 <= low <= high:
                raise ValueError(f"search range {name}={low}..{high} must satisfy 1 <= low <= high")
        unknown = [p for p in self.prompts if p not in PROMPTS]
        if unknown or not self.prompts:
            raise ValueError(f"unknown prompt(s) {unknown}; choose from {list(PROMPTS)}")
        for name in ("question_query", "found_tokens", "lead_chars"):
            if not getattr(self, name):
                raise ValueError(f"search choices for {name} must not be empty")
        for name in ("found_tokens", "lead_chars", "question_docs", "lm_from_round"):
            bad = [v for v in getattr(self, name) if isinstance(v, bool) or v < 1]
            if bad:
                raise ValueError(f"search choices {name}={bad} must be whole numbers >= 1")
        if any(isinstance(v, bool) or v < 0 for v in self.phrase_docs):
            raise ValueError(f"search choices phrase_docs={self.phrase_docs} must be >= 0")

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        """Ask the trial for one configuration (parameter names as stored in the study)."""
        params = {
            "rounds": trial.suggest_int("rounds", *self.rounds),
            "k": trial.suggest_int("k", *self.k),
            "n_docs": trial.suggest_int("n_docs", *self.n_docs),
            "prompt": trial.suggest_categorical("prompt", list(self.prompts)),
            "question_query": trial.suggest_categorical(
                "question_query", list(self.question_query)
            ),
            "found_tokens": trial.suggest_categorical("found_tokens", list(self.found_tokens)),
            "lead_chars": trial.suggest_categorical("lead_chars", list(self.lead_chars)),
        }
        if self.question_docs:
            params["question_docs"] = trial.suggest_categorical(
                "question_docs", list(self.question_docs)
            )
        if self.phrase_docs:
            params["phrase_docs"] = trial.suggest_categorical("phrase_docs", list(self.phrase_docs))
        if self.lm_from_round:
            params["lm_from_round"] = trial.suggest_categorical(
                "lm_from_round", list(self.lm_from_round)
            )
        return params

    def configurations(self) -> Iterator[dict[str, Any]]:
        """Every configuration in the space (used by the cost estimate)."""
        for rounds in range(self.rounds[0], self.rounds[1] + 1):
            for k in range(self.k[0], self.k[1] + 1):
                for n_docs in range(self.n_docs[0], self.n_docs[1] + 1):
                    for prompt in self.prompts:
                        for question_query in self.question_query:
                            yield {
                                "rounds": rounds,
                                "k": k,
                                "n_docs": n_docs,
                                "prompt": prompt,
                                "question_query": question_query,
                                "found_tokens": self.found_tokens[0],
                                "lead_chars": self.lead_chars[0],
                                **(
                                    {"question_docs": self.question_docs[0]}
                                    if self.question_docs
                                    else {}
                                ),
                                **(
                                    {"phrase_docs": self.phrase_docs[0]} if self.phrase_docs else {}
                                ),
                                **(
                                    {"lm_from_round": self.lm_from_round[0]}
                                    if self.lm_from_round
                                    else {}
                                ),
                            }

    def as_dict(self) -> dict[str, Any]:
        return {
            "rounds": list(self.rounds),
            "k": list(self.k),
            "n_docs": list(self.n_docs),
            "prompts": list(self.prompts),
            "question_query": list(self.question_query),
            "found_tokens": list(self.found_tokens),
            "lead_chars": list(self.lead_chars),
            # Only when searched, so a study made before the knob existed still resumes.
            **({"question_docs": list(self.question_docs)} if self.question_docs else {}),
            **({"phrase_docs": list(self.phrase_docs)} if self.phrase_docs else {}),
            **({"lm_from_round": list(self.lm_from_round)} if self.lm_from_round else {}),
        }


def trial_spec(
    params: dict[str, Any],
    *,
    include_question: bool = True,
    cot: bool = False,
    context_tokens: int | None = None,
) -> ProgramSpec:
    """The program spec for a trial's parameters.

    ``include_question`` applies when the trial did not choose ``question_query`` (a study
    made before that was searched); the found view keeps the program's defaults likewise.
    """
    asks_question = bool(params.get("question_query", include_question))
    question_docs = params.get("question_docs") if asks_question else None
    phrases, from_round = params.get("phrase_docs"), params.get("lm_from_round", 1)
    return ProgramSpec(
        "multihop",
        rounds=int(params["rounds"]),
        k=int(params["k"]),
        n_docs=int(params["n_docs"]),
        planning=params["prompt"] == "planning",
        titles=params["prompt"] == "titles",
        include_question=asks_question,
        question_docs=int(question_docs) if question_docs else None,
        phrase_docs=int(phrases) if question_docs and phrases else None,
        lm_from_round=int(from_round) if from_round > 1 else None,
        cot=cot,
        context_tokens=context_tokens,
        found_tokens=params.get("found_tokens"),
        lead_chars=params.get("lead_chars"),
    )


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
        if self.compile_fn is not None and lm_queries_per_round(spec) > 0:
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
        parts alone at the same budget (``no_lm_recall``)."""
        if self.references is None:
            self.references = NoLMReferences(self.retriever)
        refs = self.references.strongest(score.records)
        score.reference = refs["value"]
        writes = lm_queries_per_round(program.spec)
        share = {
            "ref_bm25": refs["bm25"],
            "ref_phrases": refs["phrases"],
            "ref_best": refs["best"],
            "lift_reference": refs["value"],
            "lift": round(score.recall - refs["value"], 6),
            "lm_queries_per_round": writes,
        }
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
