"""A compile run, the library side of ``python -m optimize.compile``: find good MultiHop
settings and prompts, at a known cost.

An Optuna study searches ``rounds`` (1-5), ``k`` (1-5), ``n_docs`` (1-10) and the query prompt
(vanilla or planning) for the best trade-off between dev-split accuracy (autorater) and tokens
per question, keeping the Pareto front. One configuration is then picked from the front, its
prompts optionally optimised on the train split with a DSPy optimizer, and the result saved as
``program.json`` and scored once on the held-out test split (:mod:`optimize.final`).

The output folder (``--out``) holds ``study.db`` (the default storage), ``config.json``,
``trials.csv``, ``pareto.md``, ``pareto.png``, ``program.json``, ``test_score.json``,
``test_run/`` (an ordinary ``frames_dspy.evaluate`` run folder) and ``dev_runs/`` (every dev
question of every trial). ``python -m frames_dspy.evaluate --program OUT/program.json ...``
with the command stored in ``config.json`` reproduces the test score.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dspy
import optuna
from optuna.trial import FrozenTrial

from frames_dspy.base.files import atomic_write_json
from frames_dspy.base.locks import lock_folder
from frames_dspy.base.redaction import redact_settings
from frames_dspy.base.settings import declared_defaults
from frames_dspy.data.corpus import ArticleStore
from frames_dspy.data.questions import load_frames, split_frames
from frames_dspy.lm.accounting import CallBudget, attached_callbacks
from frames_dspy.results.records import SCHEMA_VERSION
from frames_dspy.results.run_folder import RunFolder, check_out
from frames_dspy.run.session import Session, open_articles, open_session
from frames_dspy.run.tracking import log_study
from optimize.config import (
    STUDY_KEYS,
    CompileConfig,
    CompilePlan,
    CompileResult,
    NoCompleteTrials,
)
from optimize.final import CompileRun, final_stage, trial_line
from optimize.pareto import RETRIEVAL_OBJECTIVES, complete_trials
from optimize.storage import make_sampler, open_study, redact
from optimize.study import (
    Objective,
    SurplusTrial,
    count_active,
    reap_dead_local_trials,
)
from optimize.study_cost import CostEstimate, estimate_cost

logger = logging.getLogger(__name__)

__all__ = [
    "CompileConfig",
    "CompileResult",
    "NoCompleteTrials",
    "run_compile",
    "outcome_lines",
]


def run_compile(
    config: CompileConfig,
    *,
    lm: dspy.BaseLM | None = None,
    judge_lm: dspy.BaseLM | None = None,
    teacher_lm: dspy.BaseLM | None = None,
    examples: list[dspy.Example] | None = None,
    store: ArticleStore | None = None,
    retriever=None,
    progress: Callable[[str], None] | None = None,
) -> CompileResult:
    """Run (or resume, or join) the study, then pick, compile, save and test the program.

    LMs, examples, the store and the retriever can be injected (tests, notebooks); anything
    not given is built from ``config``. ``progress`` receives the cost estimate and one line
    per finished trial (the CLI prints them); without it they go to the log.

    One main command holds the output folder (:func:`frames_dspy.base.locks.lock_folder`): a
    second one is refused with :class:`~frames_dspy.base.locks.FolderInUse`; ``workers_only``
    processes share the folder and its study, each recording only its own trials.

    Raises:
        ValueError: a bad setting, or a study made with other settings.
        FolderInUse: another main command holds the output folder.
        NoCompleteTrials: nothing to pick (e.g. ``max_lm_calls`` ran out in the first trial).
        LMSetupError: the LM cannot run; DatasetError/CorpusError: unusable data files.
    """
    config.validate()
    out = Path(config.out or Path("runs") / f"opt-{datetime.now():%Y%m%d-%H%M%S}")
    check_out(out)
    go = functools.partial(
        _compile,
        config,
        out=out,
        lm=lm,
        judge_lm=judge_lm,
        teacher_lm=teacher_lm,
        examples=examples,
        store=store,
        retriever=retriever,
        progress=progress,
    )
    if config.workers_only:  # workers share the folder (and its study) with the main command
        out.mkdir(parents=True, exist_ok=True)
        return go()
    with lock_folder(out, what="output folder", fix=IN_USE_FIX):
        return go()


#: What a second main command on an output folder in use is told to do.
IN_USE_FIX = (
    "wait for it to finish (then rerun to resume), choose another --out, or add "
    "--workers-only to run trials for it"
)


def _compile(
    config: CompileConfig,
    *,
    out: Path,
    lm: dspy.BaseLM | None,
    judge_lm: dspy.BaseLM | None,
    teacher_lm: dspy.BaseLM | None,
    examples: list[dspy.Example] | None,
    store: ArticleStore | None,
    retriever,
    progress: Callable[[str], None] | None,
) -> CompileResult:
    """:func:`run_compile` once the output folder is held (or shared, by a worker).

    The phases, top to bottom: split the questions, open the session (articles, LMs, judge;
    the settings resolved once), plan, open the study, announce its cost, record the
    settings, run the trials, then (the main command only) pick, compile and test the
    program and record the outcome. Nothing reads ``config`` once the session is open: every
    later step reads the plan's resolved settings.
    """
    say = progress or (lambda line: logger.info("%s", line))
    examples, splits, test = _split(config, examples)
    session = _open_session(
        config,
        examples=examples,
        out=out,
        lm=lm,
        judge_lm=judge_lm,
        store=store,
        retriever=retriever,
        progress=progress,
    )
    plan = CompilePlan.of(session.settings, splits, test, embedded=session.model.embedded)
    teacher_lm = teacher_lm or plan.config.make_teacher()
    provenance = session.provenance(examples)
    study = _open_the_study(plan, provenance)
    new_trials = max(0, plan.config.trials - count_active(study))
    estimate = _announce(plan, study, new_trials, say)
    record = _study_record(plan, provenance, teacher_lm, estimate)
    if not plan.config.workers_only:
        atomic_write_json(out / "config.json", redact_settings(record))

    run = CompileRun(
        plan=plan,
        session=session,
        examples=examples,
        budget=CallBudget(plan.config.max_lm_calls),
        sink=RunFolder(out / "dev_runs"),
        say=say,
        bars=progress is not None,
        teacher_lm=teacher_lm,
    )
    final, stopped = _run_trials(run, study, new_trials, record)
    if final is not None:
        _record_final(run, study, record, final)
    return CompileResult(
        out=out,
        study_name=plan.config.study_name,
        storage=redact(plan.storage_url),
        complete_trials=len(complete_trials(study)),
        lm_calls=run.budget.calls,
        chosen=final.chosen if final else None,
        test=final.test if final else None,
        stopped=final.stopped if final else stopped,
        command=final.command if final else None,
        config=plan.config,
    )


def _split(config: CompileConfig, examples: list[dspy.Example] | None):
    """The questions, their seeded train/dev/test splits, and the test questions scored."""
    if examples is None:
        examples = load_frames(config.dataset, revision=config.revision)
    splits = split_frames(examples, train=config.train, dev=config.dev, seed=config.seed)
    test = splits.test if config.test_limit is None else splits.test[: config.test_limit]
    if not test and not config.workers_only:
        raise ValueError(
            "the test split is empty: lower --train/--dev so some questions remain for the test"
        )
    return examples, splits, test


def _open_session(
    config: CompileConfig,
    *,
    examples: list[dspy.Example] | None,
    out: Path,
    lm: dspy.BaseLM | None,
    judge_lm: dspy.BaseLM | None,
    store: ArticleStore | None,
    retriever,
    progress: Callable[[str], None] | None,
) -> Session:
    """The articles, LMs, judge and retriever of the study (those not injected built), and
    the run's settings resolved; warns when the judge is the model under test."""
    articles = open_articles(
        config,
        needed=True,
        needed_for="the MultiHop program and the study",
        store=store,
        examples=examples,
        say=progress,
        progress=progress is not None,
    )
    session = open_session(
        config,
        articles=articles,
        retriever_needed=True,
        lm=lm,
        judge_lm=judge_lm,
        retriever=retriever,
        out=str(out),
    )
    if session.self_judging and config.objective not in RETRIEVAL_OBJECTIVES:
        logger.warning(
            "SELF-JUDGING: the autorater's LM judge is the model under test, which tends to "
            "inflate trial scores; pass --judge-model for numbers to compare"
        )
    return session


def _open_the_study(plan: CompilePlan, provenance: dict):
    """The Optuna study (created, or resumed if its settings match)."""
    config = plan.config
    # Stored with the study (and compared when it resumes) without credentials.
    settings = redact_settings({key: getattr(config, key) for key in STUDY_KEYS})
    settings.update(
        dataset_sha256=provenance["dataset_sha256"],
        corpus_sha256=provenance["corpus_sha256"],
        space=plan.space.as_dict(),
        trial_optimizer=plan.opt.name if config.optimize_in_trials else None,
    )
    study = open_study(
        plan.storage_url,
        config.study_name,
        settings=settings,
        sampler=make_sampler(config.sampler, plan.sampler_seed, config.trials),
        metric=config.objective,
        defaults=declared_defaults(CompileConfig),
    )
    reap_dead_local_trials(study)
    return study


def _announce(plan: CompilePlan, study, new_trials: int, say) -> CostEstimate:
    """Estimate the study's cost and say it, with the trials to run and the splits."""
    config, splits, test = plan.config, plan.splits, plan.test
    estimate = estimate_cost(
        space=plan.space,
        trials=new_trials,
        n_train=len(splits.train),
        n_dev=len(splits.dev),
        n_test=len(test),
        context_tokens=config.context_tokens,
        optimizer=plan.opt,
        optimize_in_trials=config.optimize_in_trials,
        include_question=config.include_question,
        final=not config.workers_only,
    )
    say(
        f"study {config.study_name!r} in {redact(plan.storage_url)}: "
        f"{count_active(study)} trial(s) so far, {new_trials} to run (target --trials "
        f"{config.trials}); splits train {len(splits.train)} / dev {len(splits.dev)} / test "
        f"{len(test)} of {len(splits.test)}; context budget {config.context_tokens} tokens"
    )
    for line in estimate.lines():
        say(line)
    return estimate


def _settings_record(plan: CompilePlan) -> dict[str, Any]:
    """The settings as ``config.json`` records them: every field, the storage redacted."""
    return {**asdict(plan.config), "storage": redact(plan.storage_url)}


def _study_record(
    plan: CompilePlan, provenance: dict, teacher_lm, estimate: CostEstimate
) -> dict[str, Any]:
    """``config.json`` as the study starts: settings, models, seeds, splits, the estimate."""
    config, splits = plan.config, plan.splits
    return {
        "status": "running",
        "record_schema": SCHEMA_VERSION,  # of dev_runs/predictions.jsonl
        "settings": _settings_record(plan),
        "storage": redact(plan.storage_url),
        "study_name": config.study_name,
        "search_space": plan.space.as_dict(),
        "models": {
            "program": provenance["lm_model"],
            "judge": provenance["judge_model"],
            "teacher": getattr(teacher_lm, "model", None),
        },
        "seeds": {"split": config.seed, "sampler": plan.sampler_seed, "optimizer": config.seed},
        "splits": {
            "train": len(splits.train),
            "dev": len(splits.dev),
            "test": len(splits.test),
            "test_scored": len(plan.test),
            "test_limit": config.test_limit,
            "train_ids": [ex.id for ex in splits.train],
            "dev_ids": [ex.id for ex in splits.dev],
        },
        **{k: v for k, v in provenance.items() if not k.endswith("_model")},  # hashes, versions
        "optimizer": asdict(plan.opt),
        "estimate": {
            "lm_calls": round(estimate.calls),
            "tokens": round(estimate.tokens),
            "phases": [asdict(p) for p in estimate.phases],
        },
    }


def _objective(run: CompileRun) -> Objective:
    """The Optuna objective: a trial's program scored on the dev split."""
    config, session, splits = run.plan.config, run.session, run.plan.splits
    return Objective(
        space=run.plan.space,
        dev=splits.dev,
        train=splits.train,
        lm=session.lm,
        autorater=session.autorater,
        store=session.store,
        retriever=session.retriever,
        context_tokens=config.context_tokens,
        budget=run.budget,
        target=config.trials,
        include_question=config.include_question,
        cot=config.cot,
        threads=config.threads,
        compile_fn=run.compile if config.optimize_in_trials else None,
        sink=run.sink,
        objective=config.objective,
    )


def _run_trials(run: CompileRun, study, new_trials: int, record: dict):
    """The trials, then (the main command) the final stage; returns it and why trials stopped.

    Every LM call is metered against the call budget; with no complete trial to pick from,
    ``config.json`` says so before :class:`NoCompleteTrials` propagates.
    """
    config, session, budget, teacher_lm = run.plan.config, run.session, run.budget, run.teacher_lm

    def after_trial(study: optuna.Study, trial: FrozenTrial) -> None:
        run.say(trial_line(trial))
        if budget.exhausted or count_active(study) >= config.trials:
            study.stop()

    stopped: str | None = None
    teacher_metered = attached_callbacks(teacher_lm, budget) if teacher_lm else nullcontext()
    with (
        attached_callbacks(session.lm, budget),
        attached_callbacks(session.judge_lm, budget),
        teacher_metered,
    ):
        if new_trials > 0:
            study.optimize(
                _objective(run),
                timeout=config.timeout,
                callbacks=[after_trial],
                catch=(SurplusTrial,),
            )
        if budget.exhausted:
            stopped = f"--max-lm-calls {config.max_lm_calls} reached"
        elif count_active(study) < config.trials and new_trials > 0:
            stopped = f"--timeout {config.timeout:g} s reached"
        if config.workers_only:
            return None, stopped
        try:
            return final_stage(run, study, stopped=stopped), stopped
        except NoCompleteTrials:
            record.update(status="no complete trial", stopped=stopped, lm_calls=budget.calls)
            atomic_write_json(Path(config.out) / "config.json", redact_settings(record))
            raise


def _record_final(run: CompileRun, study, record: dict, final) -> None:
    """``config.json`` completed with the pick, the test score and the reproduce command."""
    config = run.plan.config
    record.update(
        status="stopped" if final.stopped else "done",
        stopped=final.stopped,
        settings=_settings_record(run.plan),
        chosen=final.chosen.to_dict(),
        study=final.study,
        test=final.test.to_dict() if final.test else None,
        lm_calls=run.budget.calls,
        lm_calls_by_phase=final.phases,
        reproduce=final.command,
        finished=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    atomic_write_json(Path(config.out) / "config.json", redact_settings(record))
    if config.mlflow:
        log_study(study.trials, Path(config.out), config, chosen=final.chosen.trial)


def outcome_lines(result, objective: str) -> list[str]:
    """The pick and its test score in plain lines; a recall or lift study ran no answer step,
    so it shows final recall and no accuracy."""
    lines = []
    retrieval_only = objective in RETRIEVAL_OBJECTIVES
    if result.chosen:
        c = result.chosen
        measured = "" if retrieval_only else f"accuracy {c.dev_accuracy:.3f}"
        recall = f"recall {c.dev_recall:.3f}" if c.dev_recall is not None else ""
        lines.append(
            f"chosen: trial {c.trial} ({c.label}), dev {c.objective} "
            f"{c.dev_objective:.3f} ({', '.join(p for p in (measured, recall) if p)}), "
            f"{c.dev_tokens_per_q:.0f} tokens/q"
        )
    if result.test:
        t = result.test.figures
        if retrieval_only:
            final = t.final_recall
            shown = f"final recall {final:.3f}" if final is not None else "no recall"
            lines.append(
                f"test: {shown} on {t.n} questions (retrieval only: no accuracy measured), "
                f"{t.tokens_per_question:.0f} tokens/q"
            )
        else:
            lines.append(
                f"test: accuracy {t.accuracy:.3f} on {t.n} questions "
                f"(95% CI {t.ci95[0]:.2f}-{t.ci95[1]:.2f}), "
                f"{t.tokens_per_question:.0f} tokens/q"
            )
    return lines
