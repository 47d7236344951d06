"""The end of ``optimize.compile``: pick from the Pareto front, compile, save, test once.

:class:`CompileRun` holds what the study and the final stage share (the plan, the session, the
call budget, the dev-run sink); :func:`final_stage` reads as its steps: pick a configuration
from the front, optionally optimise its prompts on train (kept only if dev accuracy does not
drop), weigh its LM-written queries, save ``program.json`` and score it once on the test split
through ``frames_dspy.evaluate``. The steps share one :class:`FinalState` (why the run
stopped, LM calls per phase, what compiling did) instead of threading those through.
"""

from __future__ import annotations

import copy
import json
import logging
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import dspy
import optuna
from optuna.trial import FrozenTrial, TrialState

from frames_dspy.base.files import atomic_write_json, sha256_file
from frames_dspy.base.redaction import redact_text
from frames_dspy.base.settings import command_args
from frames_dspy.lm.accounting import CallBudget
from frames_dspy.programs import build_program, lm_queries_per_round, no_lm_recalls, save_program
from frames_dspy.results.records import QuestionRecord
from frames_dspy.results.run_folder import RunFolder
from frames_dspy.results.stats import paired_bootstrap_ci
from frames_dspy.run.evaluation import EvalConfig, run_evaluation
from frames_dspy.run.session import Session
from optimize.config import CompileConfig, CompilePlan, NoCompleteTrials
from optimize.lm_share import (
    dev_lm_share,
    dev_share_check,
    held_out_verdict,
    lm_queries_line,
    lm_shown,
    lm_verdict,
    test_lm_share,
)
from optimize.optimizers import compile_program
from optimize.pareto import (
    complete_trials,
    pareto_front,
    pareto_markdown,
    pick_trial,
    plot_pareto,
    trials_frame,
)
from optimize.reference import paired_reference, reference_for, reference_line
from optimize.scores import ChosenTrial, TestScore, TrialFigures
from optimize.space import searches_by_lm, trial_label, trial_spec
from optimize.study import RETRIEVAL_OBJECTIVES, score_program

logger = logging.getLogger(__name__)

__all__ = [
    "CompileRun",
    "FinalStage",
    "FinalState",
    "final_stage",
    "trial_line",
    "final_test_config",
    "reproduce_command",
    "paired_dev_check",
]


@dataclass
class CompileRun:
    """What the study and the final stage of one ``optimize.compile`` run share.

    Attributes:
        plan: The resolved settings, the splits, the search space, the optimizer and the pick
            rule (:class:`~optimize.config.CompilePlan`).
        session: Program LM, judge, autorater, store and retriever.
        examples: All questions.
        budget: The process-wide LM call budget.
        sink: The run folder of every dev question (``dev_runs/``).
        say: Where progress lines go.
        bars: Whether the test evaluation shows progress bars.
        teacher_lm: The ``--teacher-model`` LM, or None.
    """

    plan: CompilePlan
    session: Session
    examples: list[dspy.Example]
    budget: CallBudget
    sink: RunFolder
    say: Callable[[str], None]
    bars: bool = False
    teacher_lm: dspy.BaseLM | None = None

    def compile(self, program: dspy.Module, trainset: Sequence[dspy.Example]) -> dspy.Module:
        """Optimise ``program``'s prompts on ``trainset`` with the configured optimizer
        (prompts written by the teacher, else by the judge's LM)."""
        session, teacher = self.session, self.teacher_lm
        prompt_lm = teacher or session.judge_lm
        return compile_program(
            program,
            trainset,
            settings=self.plan.opt,
            autorater=session.autorater,
            lm=session.lm,
            prompt_lm=prompt_lm,
            teacher_lm=teacher,
            store=session.store,
        )

    def score(self, program: dspy.Module, examples: Sequence[dspy.Example], *, label: str):
        """Run and judge ``program`` on ``examples`` (dev answers go to ``sink``).

        For the recall and lift objectives only the retrieval half runs (no answer or judge
        call).
        """
        if self.plan.config.objective in RETRIEVAL_OBJECTIVES:
            program = copy.copy(program)
            program.answer_step = False
        return score_program(
            program,
            examples,
            lm=self.session.lm,
            autorater=self.session.autorater,
            store=self.session.store,
            label=label,
            budget=self.budget,
            threads=self.plan.config.threads,
            sink=self.sink,
        )


def trial_line(trial: FrozenTrial) -> str:
    """One progress line for a finished trial."""
    a = TrialFigures.of(trial)
    if a.surplus:
        return f"trial {trial.number:>3}  skipped: the study already holds its trials"
    suggested = "prompt" in trial.params or "max_steps" in trial.params
    label = trial_label(trial.params) if suggested else "?"
    if trial.state == TrialState.COMPLETE:
        acc = trial.values[0] if a.accuracy is None else a.accuracy
        line = (
            f"trial {trial.number:>3}  {label:<22} acc {acc:.3f}  "
            + (f"recall {a.recall:.3f}  " if isinstance(a.recall, int | float) else "")
            + f"tok/q {trial.values[1]:>8.0f}  calls/q {a.lm_calls_per_q or 0:.1f}  "
            f"judge err {a.judge_errors or 0}  {a.seconds or 0:.0f}s"
        )
        if isinstance(a.lift, int | float):
            line += f"  lift {a.lift:+.3f} over {a.ref_best}-N"
        if isinstance(a.no_lm_recall, int | float):
            line += f"  no-LM parts {a.no_lm_recall:.3f}"
        if a.duplicate_of is not None:
            line += f"  (same as trial {a.duplicate_of}, reused)"
        return line
    if trial.state == TrialState.PRUNED:
        return f"trial {trial.number:>3}  {label:<22} stopped: {a.stopped or 'pruned'}"
    return f"trial {trial.number:>3}  {label:<22} {trial.state.name.lower()}"


def final_test_config(
    config: CompileConfig, program: Path, out: Path, *, reference: str | None = None
) -> EvalConfig:
    """The evaluation that scores ``program`` once on the test split of ``config``'s split
    (the model and data settings, ``threads`` among them, as the compile run resolved them),
    with the condition ``reference`` beside it at evaluate's settings (an agent pick's, see
    :mod:`optimize.reference`; it runs instead of the no-LM parts, which an agent lacks)."""
    beside = {"include_question": config.include_question, "cot": config.cot}
    return EvalConfig(
        conditions=[*([reference] if reference else []), "program"],
        program=str(program),
        **config.model_data_settings(),
        split="test",
        train=config.train,
        dev=config.dev,
        limit=config.test_limit,
        out=str(out),
        seed=config.seed,
        retrieval_only=config.objective in RETRIEVAL_OBJECTIVES,
        no_lm_parts=reference is None,
        **(beside if reference else {}),
    )


#: Evaluate settings the reproduce command leaves out: they change no score (threads, the
#: cache, tracking) or travel inside program.json (the context budget).
_NOT_REPRODUCED = (
    "threads",
    "cache",
    "context_tokens",
    "mlflow",
    "mlflow_experiment",
    "mlflow_traces",
    "conditions",
)

#: Evaluate settings the command always names, default or not, so it reads on its own.
_ALWAYS_NAMED = (
    "program", "split", "train", "dev", "seed", "model", "dataset", "retriever",
    "temperature", "max_tokens", "out",
)  # fmt: skip


def reproduce_command(config: CompileConfig, out: Path, *, reference: str | None = None) -> str:
    """The ``frames_dspy.evaluate`` command that re-scores ``OUT/program.json`` on test
    (beside ``reference``, named then in ``--conditions``), generated from evaluate's setting
    declarations (:mod:`frames_dspy.base.settings`)."""
    rerun = final_test_config(config, out / "program.json", out / "test_rerun", reference=reference)
    skip = [name for name in _NOT_REPRODUCED if not (reference and name == "conditions")]
    # evaluate's command line adds condition 'program' for --program itself.
    rerun = replace(rerun, conditions=[c for c in rerun.conditions if c != "program"])
    args = command_args(rerun, "evaluate", defaults=EvalConfig(), skip=skip, always=_ALWAYS_NAMED)
    # Written to config.json and test_score.json: a password in a URL shows as ***.
    return redact_text(shlex.join(["python", "-m", "frames_dspy.evaluate", *args]))


def _question_value(record: QuestionRecord, objective: str, n: int) -> float:
    final = record.final_recall or 0.0
    correct = 1.0 if record.is_correct else 0.0
    if objective in RETRIEVAL_OBJECTIVES:
        # Lift subtracts the same reference from both programs (one spec, one budget).
        return final
    if objective == "accuracy+recall":
        return correct + final / (n + 1)
    return correct


def paired_dev_check(
    before: Sequence[QuestionRecord], after: Sequence[QuestionRecord], objective: str
) -> dict[str, Any] | None:
    """Compare two runs of the same dev questions, paired by question.

    Args:
        before, after: Dev records (the uncompiled trial's, the compiled program's).
        objective: Which per-question value to compare (see ``optimize.study.OBJECTIVES``).

    Returns:
        ``n`` paired questions, the mean difference ``after - before`` and its paired
        bootstrap 95% interval (:func:`frames_dspy.results.stats.paired_bootstrap_ci`, seed 0); None
        when the two runs share no question (e.g. the trial ran in another worker's folder).
    """
    n = max(len(before), len(after), 1)
    first = {r.id: _question_value(r, objective, n) for r in before}
    second = {r.id: _question_value(r, objective, n) for r in after}
    ids = sorted(set(first) & set(second))
    if not ids:
        return None
    a, b = [first[i] for i in ids], [second[i] for i in ids]
    return {
        "n": len(ids),
        "diff": sum(b) / len(ids) - sum(a) / len(ids),
        "ci95": paired_bootstrap_ci(a, b),
    }


def _prepare_test_dir(test_dir: Path, program_sha: str) -> None:
    # run_evaluation resumes a run folder whose settings match; the program *path* is the same
    # on every rerun, so a folder scored for an earlier program.json must not be resumed.
    marker = test_dir / "program.sha256"
    if test_dir.exists():
        previous = marker.read_text().strip() if marker.is_file() else None
        if previous == program_sha:
            return
        stale = test_dir.with_name(f"test_run-old-{datetime.now():%Y%m%d-%H%M%S}")
        logger.warning("program.json changed since %s was scored; moving it to %s", test_dir, stale)
        test_dir.rename(stale)
    test_dir.mkdir(parents=True)
    marker.write_text(program_sha + "\n")


@dataclass
class FinalStage:
    """What the final stage produced (``config.json`` and the CLI report it).

    Attributes:
        chosen: The picked trial, its dev figures and what compiling did.
        command: The evaluate command that re-scores ``program.json`` on test.
        test: The test score (also ``test_score.json``), or None when the budget ran out.
        stopped: Why the run stopped early (the study's reason, or the call budget), or None.
        phases: LM calls per phase (study, optimizer, test).
        study: Complete and all trials, and the Pareto front's trial numbers.
    """

    chosen: ChosenTrial
    command: str
    test: TestScore | None
    stopped: str | None
    phases: dict[str, int]
    study: dict[str, Any]


@dataclass
class FinalState:
    """What the final stage's steps share as they go, each adding its part.

    Attributes:
        stopped: Why the run stopped early (the study's reason, or the call budget), or None;
            the first reason stands.
        phases: LM calls per phase so far (study, the optimizer, test).
        compiled: What compiling the pick did (the optimizer, its demos, kept or discarded
            and why), as ``program.json`` and ``config.json`` carry it.
    """

    stopped: str | None
    phases: dict[str, int]
    compiled: dict[str, Any] = field(default_factory=dict)

    def stop(self, reason: str) -> None:
        """Record why the run stops early, unless an earlier reason already stands."""
        self.stopped = self.stopped or reason


@dataclass(frozen=True)
class Pick:
    """The study's complete trials, its Pareto front and the trial picked from it."""

    trials: list[FrozenTrial]
    front: list[FrozenTrial]
    chosen: FrozenTrial


def final_stage(run: CompileRun, study: optuna.Study, *, stopped: str | None) -> FinalStage:
    """Pick a trial from the Pareto front, optionally compile its prompts, save and test it.

    Writes ``trials.csv``, ``pareto.md``/``.png``, ``program.json``, ``test_score.json`` and
    ``test_run/`` into the output folder; ``stopped`` is why the study stopped early, if it
    did.

    Raises:
        NoCompleteTrials: the study holds no complete trial.
    """
    state = FinalState(stopped=stopped, phases={"study": run.budget.calls})
    pick = _pick_from_front(run, study, state)
    program = _compile_chosen(run, pick.chosen, state)
    program, lm_program, weighed = _weigh_lm_queries(run, program, pick.chosen, state)
    chosen_info, program_path = _save_chosen(run, pick, state, program, lm_program, weighed)
    config, reference = run.plan.config, reference_for(program.spec)
    command = reproduce_command(config, Path(config.out), reference=reference)
    test = _score_on_test(run, program_path, command, state, reference=reference)
    return FinalStage(
        chosen=chosen_info,
        command=command,
        test=test,
        stopped=state.stopped,
        phases=state.phases,
        study={
            "complete_trials": len(pick.trials),
            "all_trials": len(study.trials),
            "pareto_trials": [t.number for t in pick.front],
        },
    )


def _pick_from_front(run: CompileRun, study: optuna.Study, state: FinalState) -> Pick:
    """``trials.csv``, the Pareto front, the pick, ``pareto.md`` and the plot."""
    config, rule, say = run.plan.config, run.plan.rule, run.say
    out = Path(config.out)
    trials_frame(study).to_csv(out / "trials.csv", index=False)
    trials = complete_trials(study)
    if not trials:
        raise NoCompleteTrials(
            f"study {config.study_name!r} holds no complete trial"
            + (f" ({state.stopped})" if state.stopped else "")
            + "; nothing to pick. Rerun with a larger --max-lm-calls/--timeout to add trials"
        )
    front = pareto_front(study)
    chosen = pick_trial(front, rule)
    metric = config.objective
    (out / "pareto.md").write_text(
        pareto_markdown(front, chosen, rule=rule, n_trials=len(trials), metric=metric),
        encoding="utf-8",
    )
    plot_pareto(
        trials,
        front,
        chosen,
        out / "pareto.png",
        title=f"FRAMES {'/'.join(config.kinds)} on {config.model}: dev {metric} vs tokens",
        metric=metric,
    )
    say(f"Pareto front: {len(front)} of {len(trials)} complete trials (see pareto.md)")
    say(f"chosen ({rule}): {trial_line(chosen)}")
    return Pick(trials=trials, front=front, chosen=chosen)


def _compile_chosen(run: CompileRun, chosen: FrozenTrial, state: FinalState) -> dspy.Module:
    """The chosen trial's program, its prompts compiled (from the trial, or now) if asked."""
    config, opt, budget = run.plan.config, run.plan.opt, run.budget
    spec = trial_spec(
        chosen.params,
        include_question=config.include_question,
        cot=config.cot,
        context_tokens=config.context_tokens,
    )
    program = build_program(spec, retriever=run.session.retriever, store=run.session.store)
    state.compiled.update(optimizer=opt.name, demos_per_predictor=opt.demos)
    state_json = TrialFigures.of(chosen).program_state
    if state_json is not None:
        program.load_state(json.loads(state_json))
        state.compiled["compiled"] = "inside the trial"
    elif opt.name != "none" and not searches_by_lm(spec):
        state.compiled["compiled"] = "skipped: the program sends no LM query"
    elif opt.name != "none":
        if budget.exhausted:
            state.compiled["compiled"] = "skipped: --max-lm-calls reached"
            state.stop(f"--max-lm-calls {config.max_lm_calls} reached")
        else:
            program = _compile_and_check(run, program, chosen, state)
            state.phases[opt.name] = budget.calls - state.phases["study"]
    return program


def _trial_label(chosen: FrozenTrial) -> str:
    """The condition the chosen trial's dev records carry (a reused trial's are its twin's)."""
    twin = TrialFigures.of(chosen).duplicate_of
    return f"trial-{chosen.number if twin is None else twin}"


def _compile_and_check(run: CompileRun, program, chosen: FrozenTrial, state: FinalState):
    """Compile on train, re-score on dev, keep the compiled program unless it is lower."""
    config, opt, splits, say = run.plan.config, run.plan.opt, run.plan.splits, run.say
    compiled_info = state.compiled
    metric = config.objective
    say(f"compiling the chosen program with {opt.name} on {len(splits.train)} train questions ...")
    started = time.perf_counter()
    compiled = run.compile(program, splits.train)
    if getattr(compiled, "teacher_report", None):
        compiled_info["teacher"] = compiled.teacher_report
        say(
            "teacher: {passed} of {tried} train questions passed ({asked} demos asked "
            "for; {dropped_empty} more passed with a round that wrote nothing)".format(
                **compiled.teacher_report
            )
        )
    score_label = f"compiled-{opt.name}"
    score = run.score(compiled, splits.dev, label=score_label)
    figures = TrialFigures.of(chosen)
    score.reference = figures.lift_reference
    after = score.value(metric) if score.complete else None
    compiled_info.update(
        seconds=round(time.perf_counter() - started, 1),
        objective=metric,
        dev_objective_before=chosen.values[0],
        dev_objective_after=after,
        dev_accuracy_before=figures.accuracy,
        dev_accuracy_after=score.accuracy if score.complete else None,
        dev_recall_before=figures.recall,
        dev_recall_after=score.recall if score.complete else None,
        dev_tokens_per_q_after=round(score.tokens_per_q, 1) if score.complete else None,
    )
    # The trial's dev score won the search, so it flatters the uncompiled program a
    # little; the compiled program is kept unless a paired test on the same dev
    # questions says it is lower (a raw comparison on a few questions is noise).
    trial_records = [r for r in run.sink.records() if r.condition == _trial_label(chosen)]
    paired = paired_dev_check(trial_records, score.records, metric)
    compiled_info["dev_paired"] = paired
    lower = paired["ci95"][1] < 0 if paired else after < chosen.values[0]
    how = "paired 95% interval" if paired else "raw dev score"
    if score.complete and not lower:
        program = compiled
        compiled_info["compiled"] = f"kept (dev {metric} not lower: {how})"
        compiled_info["dev_records"] = score_label  # they now score the program handed over
    elif score.complete:
        compiled_info["compiled"] = f"discarded (lower dev {metric}: {how})"
    else:
        compiled_info["compiled"] = "discarded (--max-lm-calls reached while re-scoring)"
        state.stop(f"--max-lm-calls {config.max_lm_calls} reached")
    say(
        f"{opt.name}: dev {metric} {chosen.values[0]:.3f} -> "
        f"{score.value(metric):.3f} ({compiled_info['compiled']})"
    )
    return program


def _weigh_lm_queries(run: CompileRun, program, chosen: FrozenTrial, state: FinalState):
    """``--lm-queries``: with a recall or lift objective, the pick's LM share on dev (its
    recall minus its no-LM parts alone, paired by question; BM25 only, no LM call). Under
    ``if-shown`` a share whose 95% interval is not above 0 hands over the no-LM parts alone
    (the same spec with the LM never writing) and the LM program beside it.

    Returns the program to save as ``program.json``, the LM program (or None) and what was
    weighed (None when the rule does not apply).
    """
    config = run.plan.config
    if config.objective not in RETRIEVAL_OBJECTIVES or not lm_queries_per_round(program.spec):
        return program, None, None
    label = state.compiled.get("dev_records") or _trial_label(chosen)
    records = list({r.id: r for r in run.sink.records() if r.condition == label}.values())
    check = dev_share_check(records, no_lm_recalls(program, records))
    kept = config.lm_queries == "always" or not check or lm_shown(check)
    weighed = {"rule": config.lm_queries, "dev_records": label, **check, "kept": kept}
    if kept:
        return program, None, weighed
    spec = replace(program.spec, lm_from_round=program.spec.rounds + 1)
    alone = build_program(spec, retriever=run.session.retriever, store=run.session.store)
    return alone, program, weighed


def _save_chosen(run: CompileRun, pick: Pick, state: FinalState, program, lm_program, weighed):
    """``program.json`` (and ``program-lm.json`` when ``--lm-queries`` left the LM out),
    carrying how it was chosen and compiled; returns that and its path."""
    config, chosen = run.plan.config, pick.chosen
    figures = TrialFigures.of(chosen)
    chosen_info = ChosenTrial(
        trial=chosen.number,
        params=chosen.params,
        label=trial_label(chosen.params),
        objective=config.objective,
        dev_objective=chosen.values[0],
        dev_accuracy=chosen.values[0] if figures.accuracy is None else figures.accuracy,
        dev_recall=figures.recall,
        dev_tokens_per_q=chosen.values[1],
        dev_lm_calls_per_q=figures.lm_calls_per_q,
        pick=str(run.plan.rule),
        pareto_size=len(pick.front),
        compile=state.compiled,
        **dev_lm_share(figures, (lm_program or program).spec),
        lm_queries=weighed,
    )
    run.say(lm_verdict(chosen_info))
    if weighed and weighed["rule"] == "if-shown":
        run.say(lm_queries_line(weighed))
    extra = {
        "optimize": {
            **chosen_info.to_dict(),
            "study_name": config.study_name,
            "model": config.model,
            "context_tokens": config.context_tokens,
            "split": {"train": config.train, "dev": config.dev, "seed": config.seed},
        }
    }
    if lm_program is not None:
        save_program(lm_program, str(Path(config.out) / "program-lm.json"), extra=extra)
        chosen_info.program = "the no-LM parts alone (program-lm.json: with the LM)"
        extra["optimize"]["program"] = chosen_info.program
    program_path = Path(config.out) / "program.json"
    save_program(program, str(program_path), extra=extra)
    return chosen_info, program_path


def _score_on_test(
    run: CompileRun, program_path: Path, command: str, state: FinalState, *, reference=None
) -> TestScore | None:
    """The saved program scored once on the test split (unless the budget ran out), beside
    ``reference`` and paired with it by question when given."""
    config, budget, say, splits = run.plan.config, run.budget, run.say, run.plan.splits
    out = Path(config.out)
    if budget.exhausted:
        state.stop(f"--max-lm-calls {config.max_lm_calls} reached")
        say(
            f"{state.stopped}: the test split was not scored; rerun the same command with a "
            "larger --max-lm-calls to finish"
        )
        return None
    test_dir = out / "test_run"
    _prepare_test_dir(test_dir, sha256_file(program_path))
    say(f"scoring the chosen program once on {len(run.plan.test)} test questions ...")
    eval_config = final_test_config(config, program_path, test_dir, reference=reference)
    summary = run_evaluation(
        eval_config,
        lm=run.session.lm,
        judge_lm=run.session.judge_lm,
        examples=run.examples,
        store=run.session.store,
        retriever=run.session.retriever,
        progress=run.bars,
    )
    test = TestScore(
        figures=summary.rows["program"],
        test_limit=config.test_limit,
        test_split_size=len(splits.test),
        program_sha256=sha256_file(program_path),
        reproduce=command,
        **test_lm_share(summary.rows, test_dir, run.session.retriever),
        reference=paired_reference(test_dir, reference) if reference else None,
    )
    say(held_out_verdict(test))
    if test.reference is not None:
        say(reference_line(test.reference))
    atomic_write_json(out / "test_score.json", test.to_dict())
    state.phases["test"] = budget.calls - sum(state.phases.values())
    return test
