"""The Optuna side of ``optimize.compile``: search space, LM accounting, scoring, the objective.

A trial picks ``rounds``, ``k``, ``n_docs`` and the query prompt (vanilla or planning), builds
the :class:`~frames_dspy.programs.MultiHop` program (optionally compiling its prompts with a
DSPy optimizer on the train split), scores it on the dev split with the autorater, and returns
two objectives: accuracy (maximised) and tokens per question (minimised).

Tokens per question are *metered*: every call of the program's LM is counted at
``CHARS_PER_TOKEN`` characters per token (prompt plus completion), whether or not DSPy served
it from its cache. The LM's own usage figures are kept as ``reported_tokens_per_q`` but cannot
be the objective: a cache hit reports no tokens, so a configuration that repeats earlier calls
(round one is the same for many configurations) would look cheaper than it is.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import dspy
import optuna
from dspy.utils.callback import BaseCallback
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from frames_dspy.evaluate import RunAborted, RunFolder, run_question
from frames_dspy.metrics import JUDGE_METHODS, Autorater
from frames_dspy.programs import CHARS_PER_TOKEN, build_program, describe

logger = logging.getLogger(__name__)

__all__ = [
    "PROMPTS",
    "SearchSpace",
    "CallBudget",
    "TokenMeter",
    "attached_callbacks",
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
PROMPTS = ("vanilla", "planning")


@dataclass(frozen=True)
class SearchSpace:
    """Inclusive integer ranges for the MultiHop knobs, and the prompts to try."""

    rounds: tuple[int, int] = (1, 5)
    k: tuple[int, int] = (1, 5)
    n_docs: tuple[int, int] = (1, 10)
    prompts: tuple[str, ...] = PROMPTS

    def __post_init__(self):
        for name in ("rounds", "k", "n_docs"):
            low, high = getattr(self, name)
            if not 1 <= low <= high:
                raise ValueError(f"search range {name}={low}..{high} must satisfy 1 <= low <= high")
        unknown = [p for p in self.prompts if p not in PROMPTS]
        if unknown or not self.prompts:
            raise ValueError(f"unknown prompt(s) {unknown}; choose from {list(PROMPTS)}")

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        """Ask the trial for one configuration (parameter names as stored in the study)."""
        return {
            "rounds": trial.suggest_int("rounds", *self.rounds),
            "k": trial.suggest_int("k", *self.k),
            "n_docs": trial.suggest_int("n_docs", *self.n_docs),
            "prompt": trial.suggest_categorical("prompt", list(self.prompts)),
        }

    def configurations(self) -> Iterator[dict[str, Any]]:
        """Every configuration in the space (used by the cost estimate)."""
        for rounds in range(self.rounds[0], self.rounds[1] + 1):
            for k in range(self.k[0], self.k[1] + 1):
                for n_docs in range(self.n_docs[0], self.n_docs[1] + 1):
                    for prompt in self.prompts:
                        yield {"rounds": rounds, "k": k, "n_docs": n_docs, "prompt": prompt}

    def as_dict(self) -> dict[str, Any]:
        return {
            "rounds": list(self.rounds),
            "k": list(self.k),
            "n_docs": list(self.n_docs),
            "prompts": list(self.prompts),
        }


def trial_spec(
    params: dict[str, Any], *, include_question: bool = True, cot: bool = False
) -> dict[str, Any]:
    """The ``build_program`` spec for a trial's parameters."""
    return {
        "kind": "multihop",
        "rounds": int(params["rounds"]),
        "k": int(params["k"]),
        "n_docs": int(params["n_docs"]),
        "planning": params["prompt"] == "planning",
        "include_question": include_question,
        "cot": cot,
    }


# --- LM accounting ------------------------------------------------------------------------------


class CallBudget(BaseCallback):
    """Counts every call of the LMs it is attached to, against an optional limit.

    Calls answered from DSPy's cache count too: the callback fires before the cache is asked.
    The count never stops a call; callers check :attr:`exhausted` at safe points (before each
    trial, before each question, before an optimizer or the test evaluation starts).
    """

    def __init__(self, limit: int | None = None):
        if limit is not None and limit < 1:
            raise ValueError(f"max_lm_calls={limit} must be at least 1 (or None for no limit)")
        self.limit = limit
        self.calls = 0
        self._lock = threading.Lock()

    def on_lm_start(self, call_id, instance, inputs):
        with self._lock:
            self.calls += 1

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.calls >= self.limit

    @property
    def remaining(self) -> int | None:
        return None if self.limit is None else max(0, self.limit - self.calls)


# Per-question accumulator [prompt tokens, completion tokens, calls], set by the thread running
# the question; LM calls made outside a question (optimizers) are not metered.
_QUESTION_METER: ContextVar[list[int] | None] = ContextVar("frames_question_meter", default=None)


def _text_of(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("content", "text"):
            if key in value:
                return _text_of(value[key])
        return ""
    if isinstance(value, list | tuple):
        return "".join(_text_of(v) for v in value)
    return str(value)


def _tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class TokenMeter(BaseCallback):
    """Meters the program LM's calls per question, independent of DSPy's cache."""

    def on_lm_start(self, call_id, instance, inputs):
        meter = _QUESTION_METER.get()
        if meter is not None:
            prompt = inputs.get("messages") or inputs.get("prompt")
            meter[0] += _tokens(_text_of(prompt))
            meter[2] += 1

    def on_lm_end(self, call_id, outputs, exception=None):
        meter = _QUESTION_METER.get()
        if meter is not None and outputs is not None:
            meter[1] += _tokens(_text_of(outputs))


@contextlib.contextmanager
def attached_callbacks(lm: dspy.BaseLM, *callbacks: BaseCallback) -> Iterator[None]:
    """Attach callbacks to an LM instance for the duration of the block."""
    added = [cb for cb in callbacks if cb not in lm.callbacks]
    lm.callbacks.extend(added)
    try:
        yield
    finally:
        for cb in added:
            with contextlib.suppress(ValueError):
                lm.callbacks.remove(cb)


# --- scoring a program on a split ---------------------------------------------------------------


@dataclass
class DevScore:
    """A program's score on a list of questions (possibly cut short by the call budget)."""

    n: int = 0
    wanted: int = 0
    correct: int = 0
    judge_calls: int = 0
    judge_errors: int = 0
    program_errors: int = 0
    lm_calls: int = 0
    metered_tokens: int = 0
    reported_tokens: int = 0
    seconds: float = 0.0
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.n == self.wanted

    def _per_q(self, total: float) -> float:
        return total / self.n if self.n else 0.0

    @property
    def accuracy(self) -> float:
        return self._per_q(self.correct)

    @property
    def tokens_per_q(self) -> float:
        return self._per_q(self.metered_tokens)

    def attrs(self) -> dict[str, Any]:
        """The numbers stored as a trial's user attributes."""
        return {
            "accuracy": round(self.accuracy, 6),
            "tokens_per_q": round(self.tokens_per_q, 2),
            "reported_tokens_per_q": round(self._per_q(self.reported_tokens), 2),
            "lm_calls_per_q": round(self._per_q(self.lm_calls), 3),
            "judge_calls": self.judge_calls,
            "judge_errors": self.judge_errors,
            "program_errors": self.program_errors,
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
        LMSetupError: the LM cannot run (a missing key, a dead server); the message says why.
    """
    from frames_dspy.lm import LMSetupError

    started = time.perf_counter()

    def one(example: dspy.Example) -> dict[str, Any] | None:
        if budget is not None and budget.exhausted:
            return None
        meter = [0, 0, 0]
        token = _QUESTION_METER.set(meter)
        try:
            record = run_question(label, program, example, lm=lm, autorater=autorater, store=store)
        finally:
            _QUESTION_METER.reset(token)
        record["metered_tokens"] = meter[0] + meter[1]
        if sink is not None:
            sink.append(record)
        return record

    score = DevScore(wanted=len(examples))
    try:
        if threads <= 1:
            results = [one(ex) for ex in examples]
        else:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                results = list(pool.map(one, examples))
    except RunAborted as err:
        raise LMSetupError(str(err)) from err
    for record in results:
        if record is None:
            continue
        score.records.append(record)
        score.n += 1
        score.correct += record["correct"] is True
        score.judge_calls += record["judge_method"] in JUDGE_METHODS
        score.judge_errors += record["judge_method"] == "judge_error"
        score.program_errors += record["error"] is not None
        score.lm_calls += int(record["lm_calls"] or 0)
        score.metered_tokens += int(record["metered_tokens"])
        score.reported_tokens += int(record["prompt_tokens"] or 0) + int(
            record["completion_tokens"] or 0
        )
    score.seconds = time.perf_counter() - started
    return score


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
        owner = str(trial.user_attrs.get("worker", ""))
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

    def __call__(self, trial: optuna.Trial) -> tuple[float, float]:
        trial.set_user_attr("worker", worker_id())
        if count_active(trial.study, below=trial.number) >= self.target:
            trial.set_user_attr("surplus", True)
            raise SurplusTrial(f"the study already holds {self.target} trials")
        params = self.space.suggest(trial)
        spec = trial_spec(params, include_question=self.include_question, cot=self.cot)
        trial.set_user_attr("label", describe(spec))
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
        program = build_program(
            spec, retriever=self.retriever, store=self.store, context_tokens=self.context_tokens
        )
        if self.compile_fn is not None:
            program = self.compile_fn(program, self.train)
            trial.set_user_attr("program_state", json.dumps(program.dump_state(), default=str))
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
        trial.set_user_attr("lm_calls_total", self.budget.calls - calls_before)
        trial.set_user_attr("seconds", round(time.perf_counter() - started, 2))
        if not score.complete:
            trial.set_user_attr(
                "stopped", f"max-lm-calls reached after {score.n}/{score.wanted} dev questions"
            )
            raise optuna.TrialPruned("--max-lm-calls reached")
        return score.accuracy, score.tokens_per_q

    @staticmethod
    def _same_params(trial: optuna.Trial, params: dict[str, Any]) -> FrozenTrial | None:
        for earlier in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            if earlier.params == params:
                return earlier
        return None
