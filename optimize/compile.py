"""``python -m optimize.compile``: find good MultiHop settings and prompts, at a known cost.

An Optuna study searches ``rounds`` (1-5), ``k`` (1-5), ``n_docs`` (1-10) and the query prompt
(vanilla or planning) for the best trade-off between dev-split accuracy (autorater) and tokens
per question, keeping the Pareto front. One configuration is then picked from the front, its
prompts optionally optimised on the train split with a DSPy optimizer, and the result saved as
``program.json`` and scored once on the held-out test split.

The output folder (``--out``) holds ``study.db`` (the default storage), ``config.json``,
``trials.csv``, ``pareto.md``, ``pareto.png``, ``program.json``, ``test_score.json``,
``test_run/`` (an ordinary ``frames_dspy.evaluate`` run folder) and ``dev_runs/`` (every dev
question of every trial). ``python -m frames_dspy.evaluate --program OUT/program.json ...``
with the command stored in ``config.json`` reproduces the test score.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import shlex
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dspy
import optuna
from optuna.trial import FrozenTrial, TrialState

from frames_dspy.cli import (
    ModelDataSettings,
    add_data_arguments,
    add_model_arguments,
    choice_list,
    load_store,
    positive_int,
)
from frames_dspy.corpus import ArticleStore, CorpusError
from frames_dspy.data import DatasetError, dataset_fingerprint, load_frames, split_frames
from frames_dspy.evaluate import (
    JUDGE_MAX_TOKENS,
    EvalConfig,
    RunFolder,
    default_context_tokens,
    package_versions,
    run_evaluation,
)
from frames_dspy.metrics import Autorater, default_min_overlap
from frames_dspy.programs import build_program, describe, save_program
from optimize.cost import estimate_cost
from optimize.optimizers import OPTIMIZERS, OptimizerSettings, compile_program
from optimize.pareto import (
    complete_trials,
    pareto_front,
    pareto_markdown,
    parse_pick,
    pick_trial,
    plot_pareto,
    trials_frame,
)
from optimize.study import (
    PROMPTS,
    CallBudget,
    Objective,
    SearchSpace,
    SurplusTrial,
    TokenMeter,
    attached_callbacks,
    count_active,
    reap_dead_local_trials,
    score_program,
    trial_spec,
)

logger = logging.getLogger(__name__)

__all__ = [
    "CompileConfig",
    "CompileResult",
    "NoCompleteTrials",
    "open_study",
    "reproduce_command",
    "run_compile",
    "build_parser",
    "main",
]

SAMPLERS = ("tpe", "nsga2", "random")

# Settings that change what a trial's numbers mean: a study resumes only when they match.
_STUDY_KEYS = (
    "model",
    "judge_model",
    "judge_min_overlap",
    "api_base",
    "temperature",
    "max_tokens",
    "retriever",
    "train",
    "dev",
    "seed",
    "context_tokens",
    "include_question",
    "cot",
)


class NoCompleteTrials(RuntimeError):
    """The study holds no complete trial, so nothing can be picked."""


@dataclass
class CompileConfig(ModelDataSettings):
    """Every knob of an ``optimize.compile`` run (written to the output's ``config.json``).

    Attributes:
        model, judge_model, api_base, judge_api_base, temperature, max_tokens: The program's
            LM and the autorater's, as in ``frames_dspy.evaluate``.
        dataset, revision, corpus, aliases, distractors, retriever: Data, as in evaluate.
        train, dev, seed: The seeded split (evaluate's ``--train/--dev/--seed``); the test
            split is the rest.
        test_limit: Test questions scored at the end (the first N of the test split); None
            scores the whole test split (~780 questions).
        trials: The study's target number of complete trials; a rerun or an extra worker
            runs trials until the study holds this many.
        timeout: Seconds after which this process starts no new trial.
        sampler: ``tpe`` (multi-objective TPE), ``nsga2`` or ``random``; seeded with ``seed``
            (workers add their pid so they do not propose the same points).
        pick: ``best`` or ``cheapest-within:TOL``.
        optimizer: One of :data:`optimize.optimizers.OPTIMIZERS`.
        optimize_in_trials: Compile prompts inside every trial instead of once at the end.
        max_demos, demo_chars, instructions_only, optimizer_candidates: Optimizer limits;
            ``instructions_only`` None means True for the embedded model.
        storage: Optuna RDB URL; None means ``sqlite:///OUT/study.db``.
        study_name: Name of the study in the storage.
        workers_only: Run trials only (no pick, compile or test): for extra workers.
        max_lm_calls: Stop cleanly once this process has made this many LM calls.
        context_tokens: Article budget of the answer prompt; None derives it from the model.
        include_question, cot: MultiHop options fixed for the whole study.
        threads: Questions scored in parallel.
        out: Output folder; None means ``runs/opt-<timestamp>``.
    """

    train: int = 20
    dev: int = 20
    test_limit: int | None = 50
    seed: int = 0
    trials: int = 20
    timeout: float | None = None
    sampler: str = "tpe"
    rounds: tuple[int, int] = (1, 5)
    k: tuple[int, int] = (1, 5)
    n_docs: tuple[int, int] = (1, 10)
    prompts: tuple[str, ...] = PROMPTS
    pick: str = "best"
    optimizer: str = "none"
    optimize_in_trials: bool = False
    max_demos: int = 2
    demo_chars: int = 1500
    instructions_only: bool | None = None
    optimizer_candidates: int = 4
    storage: str | None = None
    study_name: str = "frames-multihop"
    workers_only: bool = False
    max_lm_calls: int | None = None
    context_tokens: int | None = None
    include_question: bool = True
    cot: bool = False
    threads: int = 1
    out: str | None = None

    def validate(self) -> None:
        """Raise ValueError naming the first bad setting and how to fix it."""
        checks = [
            (self.train >= 0, f"--train {self.train} must be >= 0"),
            (self.dev >= 1, f"--dev {self.dev} must be at least 1 (trials are scored on dev)"),
            (
                self.test_limit is None or self.test_limit >= 1,
                f"--test-limit {self.test_limit} must be at least 1 (or 'all')",
            ),
            (self.trials >= 0, f"--trials {self.trials} must be >= 0"),
            (
                self.timeout is None or self.timeout > 0,
                f"--timeout {self.timeout} must be a positive number of seconds",
            ),
            (self.threads >= 1, f"--threads {self.threads} must be at least 1"),
            (
                self.max_lm_calls is None or self.max_lm_calls >= 1,
                f"--max-lm-calls {self.max_lm_calls} must be at least 1",
            ),
            (
                self.context_tokens is None or self.context_tokens >= 50,
                f"--context-tokens {self.context_tokens} must be at least 50",
            ),
            (self.max_tokens >= 1, f"--max-tokens {self.max_tokens} must be at least 1"),
            (
                self.sampler in SAMPLERS,
                f"unknown sampler {self.sampler!r}; choose one of {', '.join(SAMPLERS)}",
            ),
            (
                self.optimizer in OPTIMIZERS,
                f"unknown optimizer {self.optimizer!r}; choose one of {', '.join(OPTIMIZERS)}",
            ),
            (
                not self.optimize_in_trials or self.optimizer != "none",
                "--optimize-in-trials needs an --optimizer other than none",
            ),
            (
                self.optimizer == "none" or self.train >= 2,
                f"--optimizer {self.optimizer} needs at least 2 train questions (--train)",
            ),
            (
                not self.workers_only or bool(self.storage or self.out),
                "--workers-only needs the study to join: pass the main run's --storage URL "
                "or its --out folder",
            ),
            (bool(self.study_name.strip()), "--study-name must not be empty"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        parse_pick(self.pick)
        self.optimizer_settings()

    def optimizer_settings(self) -> OptimizerSettings:
        instructions_only = (
            self.model.startswith("local")
            if self.instructions_only is None
            else self.instructions_only
        )
        return OptimizerSettings(
            name=self.optimizer,
            max_demos=self.max_demos,
            demo_chars=self.demo_chars,
            instructions_only=instructions_only,
            candidates=self.optimizer_candidates,
            threads=self.threads,
            seed=self.seed,
        )


@dataclass
class CompileResult:
    """What a run produced; the files in ``out`` hold the details."""

    out: Path
    study_name: str
    storage: str
    complete_trials: int
    lm_calls: int
    chosen: dict[str, Any] | None = None
    test: dict[str, Any] | None = None
    stopped: str | None = None
    command: str | None = None
    config: CompileConfig | None = None


# --- storage and study --------------------------------------------------------------------------


def redact(url: str) -> str:
    """The storage URL without its password (for logs and config files)."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - anything unparsable is shown as given, minus nothing
        return url


def _storage(url: str, *, attempts: int = 4) -> optuna.storages.RDBStorage:
    from sqlalchemy.exc import ArgumentError, DBAPIError

    if "://" not in url:
        raise ValueError(
            f"--storage {url!r} is not a database URL; use e.g. sqlite:///study.db or "
            "postgresql://user:password@host/dbname"
        )
    engine_kwargs = (
        {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    )
    for attempt in range(attempts):
        try:
            # Heartbeats let Optuna fail the trials of workers that died on other machines.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    url, engine_kwargs=engine_kwargs, heartbeat_interval=30, grace_period=120
                )
        except ImportError as err:
            # Optuna hides the module's name in __cause__ ("No module named 'psycopg'").
            raise ValueError(
                f"--storage {redact(url)} needs a database driver that is not installed "
                f'({err.__cause__ or err}); for PostgreSQL: pip install -e ".[postgres]"'
            ) from err
        except ArgumentError as err:
            raise ValueError(
                f"--storage {redact(url)} cannot be used ({err}); use e.g. sqlite:///study.db "
                "or postgresql://user:password@host/dbname (with its driver installed)"
            ) from err
        except DBAPIError as err:  # "database is locked", two workers creating tables
            if attempt == attempts - 1:
                raise ValueError(f"cannot open --storage {redact(url)}: {err}") from err
            # Workers started together race to create the tables; the loser retries.
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def _sampler(name: str, seed: int, trials: int) -> optuna.samplers.BaseSampler:
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, min(20, trials)))
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    startup = min(10, max(3, trials // 2))
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup)


def open_study(
    storage_url: str,
    study_name: str,
    *,
    settings: dict[str, Any],
    sampler: optuna.samplers.BaseSampler,
) -> optuna.Study:
    """Create the two-objective study, or load it if it exists with the same settings.

    Raises:
        ValueError: the storage cannot be opened, or the stored study was made with other
            settings (another model, split, corpus...), whose trials are not comparable.
    """
    storage = _storage(storage_url)
    study = optuna.create_study(
        storage=storage,
        study_name=study_name,
        directions=["maximize", "minimize"],
        sampler=sampler,
        load_if_exists=True,
    )
    previous = study.user_attrs.get("settings")
    if previous is None:
        study.set_user_attr("settings", settings)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(["accuracy", "tokens_per_q"])
    else:
        differences = [
            f"{key}: {previous.get(key)!r} -> {settings.get(key)!r}"
            for key in sorted(set(previous) | set(settings))
            if previous.get(key) != settings.get(key)
        ]
        if differences:
            raise ValueError(
                f"study {study_name!r} in {redact(storage_url)} was made with other settings "
                f"({'; '.join(differences)}); rerun with the same settings, or choose another "
                "--study-name or --out"
            )
    return study


# --- helpers ------------------------------------------------------------------------------------


def _label(params: dict[str, Any]) -> str:
    return describe(trial_spec(params)).removeprefix("multihop ")


def trial_line(trial: FrozenTrial) -> str:
    """One progress line for a finished trial."""
    a = trial.user_attrs
    if a.get("surplus"):
        return f"trial {trial.number:>3}  skipped: the study already holds its trials"
    label = _label(trial.params) if len(trial.params) == 4 else "?"
    if trial.state == TrialState.COMPLETE:
        acc, tokens = trial.values
        line = (
            f"trial {trial.number:>3}  {label:<22} acc {acc:.3f}  tok/q {tokens:>8.0f}  "
            f"calls/q {a.get('lm_calls_per_q', 0):.1f}  judge err {a.get('judge_errors', 0)}  "
            f"{a.get('seconds', 0):.0f}s"
        )
        if "duplicate_of" in a:
            line += f"  (same as trial {a['duplicate_of']}, reused)"
        return line
    if trial.state == TrialState.PRUNED:
        return f"trial {trial.number:>3}  {label:<22} stopped: {a.get('stopped', 'pruned')}"
    return f"trial {trial.number:>3}  {label:<22} {trial.state.name.lower()}"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_json(path: Path, payload: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, ensure_ascii=False, default=str), "utf-8")
    tmp.replace(path)


def reproduce_command(config: CompileConfig, out: Path) -> str:
    """The ``frames_dspy.evaluate`` command that re-scores ``OUT/program.json`` on test."""
    args = [
        "python",
        "-m",
        "frames_dspy.evaluate",
        "--program",
        str(out / "program.json"),
        "--split",
        "test",
        "--train",
        str(config.train),
        "--dev",
        str(config.dev),
        "--seed",
        str(config.seed),
    ]
    if config.test_limit is not None:
        args += ["--limit", str(config.test_limit)]
    args += ["--model", config.model]
    for flag, value in (
        ("--api-base", config.api_base),
        ("--judge-model", config.judge_model),
        ("--judge-api-base", config.judge_api_base),
        ("--judge-min-overlap", config.judge_min_overlap),
        ("--revision", config.revision),
        ("--corpus", config.corpus),
        ("--aliases", config.aliases),
        ("--distractors", config.distractors),
    ):
        if value is not None:
            args += [flag, str(value)]
    args += [
        "--dataset",
        str(config.dataset),
        "--retriever",
        config.retriever,
        "--context-tokens",
        str(config.context_tokens),
        "--temperature",
        f"{config.temperature:g}",
        "--max-tokens",
        str(config.max_tokens),
        "--out",
        str(out / "test_rerun"),
    ]
    return shlex.join(args)


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


# --- the run ------------------------------------------------------------------------------------


def run_compile(
    config: CompileConfig,
    *,
    lm: dspy.BaseLM | None = None,
    judge_lm: dspy.BaseLM | None = None,
    examples: list[dspy.Example] | None = None,
    store: ArticleStore | None = None,
    retriever=None,
    progress: Callable[[str], None] | None = None,
) -> CompileResult:
    """Run (or resume, or join) the study, then pick, compile, save and test the program.

    LMs, examples, the store and the retriever can be injected (tests, notebooks); anything
    not given is built from ``config``. ``progress`` receives the cost estimate and one line
    per finished trial (the CLI prints them); without it they go to the log.

    Raises:
        ValueError: a bad setting, or a study made with other settings.
        NoCompleteTrials: nothing to pick (e.g. ``max_lm_calls`` ran out in the first trial).
        LMSetupError: the LM cannot run; DatasetError/CorpusError: unusable data files.
    """
    from frames_dspy.lm import context_window, make_lm

    config = dataclasses.replace(config)
    config.validate()
    say = progress or (lambda line: logger.info("%s", line))
    rule = parse_pick(config.pick)
    space = SearchSpace(
        rounds=tuple(config.rounds),
        k=tuple(config.k),
        n_docs=tuple(config.n_docs),
        prompts=tuple(config.prompts),
    )
    out = Path(config.out or Path("runs") / f"opt-{datetime.now():%Y%m%d-%H%M%S}")
    config.out = str(out)
    out.mkdir(parents=True, exist_ok=True)
    storage_url = config.storage or f"sqlite:///{(out / 'study.db').resolve()}"

    if examples is None:
        examples = load_frames(config.dataset, revision=config.revision)
    splits = split_frames(examples, train=config.train, dev=config.dev, seed=config.seed)
    test = splits.test if config.test_limit is None else splits.test[: config.test_limit]
    if not test and not config.workers_only:
        raise ValueError(
            "the test split is empty: lower --train/--dev so some questions remain for the test"
        )
    if store is None:
        store = load_store(config, needed_for="the MultiHop program and the study")
    if retriever is None:
        from frames_dspy.retrieval import build_retriever

        retriever = build_retriever(store, backend=config.retriever)

    lm = lm or make_lm(
        config.model,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        api_base=config.api_base,
    )
    if judge_lm is None:
        same = (
            config.judge_model in (None, config.model)
            and (config.judge_api_base if config.judge_model else config.api_base)
            == config.api_base
        )
        judge_lm = (
            None
            if same
            else make_lm(
                config.judge_model,
                temperature=0.0,
                max_tokens=JUDGE_MAX_TOKENS,
                api_base=config.judge_api_base,
            )
        )
    if judge_lm is None or judge_lm is lm:
        # Same model, separate instance: only the program's calls are metered as its tokens.
        judge_lm = lm.copy(temperature=0.0, max_tokens=JUDGE_MAX_TOKENS)
    if config.context_tokens is None:
        config.context_tokens = default_context_tokens(config.model, context_window(lm))
    if config.judge_min_overlap is None:
        config.judge_min_overlap = default_min_overlap(config.judge_model or config.model)
    opt = config.optimizer_settings()

    settings = {key: getattr(config, key) for key in _STUDY_KEYS}
    settings.update(
        dataset_sha256=dataset_fingerprint(examples),
        corpus_sha256=store.fingerprint,
        space=space.as_dict(),
        trial_optimizer=opt.name if config.optimize_in_trials else None,
    )
    sampler_seed = config.seed + (os.getpid() if config.workers_only else 0)
    study = open_study(
        storage_url,
        config.study_name,
        settings=settings,
        sampler=_sampler(config.sampler, sampler_seed, config.trials),
    )
    reap_dead_local_trials(study)
    new_trials = max(0, config.trials - count_active(study))

    estimate = estimate_cost(
        space=space,
        trials=new_trials,
        n_train=len(splits.train),
        n_dev=len(splits.dev),
        n_test=len(test),
        context_tokens=config.context_tokens,
        optimizer=opt,
        optimize_in_trials=config.optimize_in_trials,
        include_question=config.include_question,
        final=not config.workers_only,
    )
    say(
        f"study {config.study_name!r} in {redact(storage_url)}: "
        f"{count_active(study)} trial(s) so far, {new_trials} to run (target --trials "
        f"{config.trials}); splits train {len(splits.train)} / dev {len(splits.dev)} / test "
        f"{len(test)} of {len(splits.test)}; context budget {config.context_tokens} tokens"
    )
    for line in estimate.lines():
        say(line)

    record: dict[str, Any] = {
        "status": "running",
        "settings": {**asdict(config), "storage": redact(storage_url)},
        "storage": redact(storage_url),
        "study_name": config.study_name,
        "search_space": space.as_dict(),
        "models": {
            "program": getattr(lm, "model", str(lm)),
            "judge": getattr(judge_lm, "model", str(judge_lm)),
        },
        "seeds": {"split": config.seed, "sampler": sampler_seed, "optimizer": config.seed},
        "splits": {
            "train": len(splits.train),
            "dev": len(splits.dev),
            "test": len(splits.test),
            "test_scored": len(test),
            "test_limit": config.test_limit,
            "train_ids": [ex.id for ex in splits.train],
            "dev_ids": [ex.id for ex in splits.dev],
        },
        "dataset_sha256": settings["dataset_sha256"],
        "corpus_sha256": store.fingerprint,
        "corpus_articles": len(store),
        "optimizer": asdict(opt),
        "estimate": {
            "lm_calls": round(estimate.calls),
            "tokens": round(estimate.tokens),
            "phases": [asdict(p) for p in estimate.phases],
        },
        "packages": package_versions(),
        "python": sys.version.split()[0],
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if not config.workers_only:
        _write_json(out / "config.json", record)

    budget = CallBudget(config.max_lm_calls)
    autorater = Autorater(judge_lm, min_overlap=config.judge_min_overlap)
    sink = RunFolder(out / "dev_runs")

    def compile_fn(program, trainset):
        return compile_program(
            program,
            trainset,
            settings=opt,
            autorater=autorater,
            lm=lm,
            reflection_lm=judge_lm,
            store=store,
        )

    objective = Objective(
        space=space,
        dev=splits.dev,
        train=splits.train,
        lm=lm,
        autorater=autorater,
        store=store,
        retriever=retriever,
        context_tokens=config.context_tokens,
        budget=budget,
        target=config.trials,
        include_question=config.include_question,
        cot=config.cot,
        threads=config.threads,
        compile_fn=compile_fn if config.optimize_in_trials else None,
        sink=sink,
    )

    def after_trial(study: optuna.Study, trial: FrozenTrial) -> None:
        say(trial_line(trial))
        if budget.exhausted or count_active(study) >= config.trials:
            study.stop()

    stopped: str | None = None
    with attached_callbacks(lm, budget, TokenMeter()), attached_callbacks(judge_lm, budget):
        if new_trials > 0:
            study.optimize(
                objective,
                timeout=config.timeout,
                callbacks=[after_trial],
                catch=(SurplusTrial,),
            )
        if budget.exhausted:
            stopped = f"--max-lm-calls {config.max_lm_calls} reached"
        elif count_active(study) < config.trials and new_trials > 0:
            stopped = f"--timeout {config.timeout:g} s reached"
        result = CompileResult(
            out=out,
            study_name=config.study_name,
            storage=redact(storage_url),
            complete_trials=len(complete_trials(study)),
            lm_calls=budget.calls,
            stopped=stopped,
            config=config,
        )
        if config.workers_only:
            return result
        _final_stage(
            config,
            result,
            record,
            study=study,
            rule=rule,
            opt=opt,
            splits=splits,
            examples=examples,
            lm=lm,
            judge_lm=judge_lm,
            autorater=autorater,
            store=store,
            retriever=retriever,
            budget=budget,
            sink=sink,
            say=say,
            bars=progress is not None,
        )
    return result


def _final_stage(
    config: CompileConfig,
    result: CompileResult,
    record: dict[str, Any],
    *,
    study: optuna.Study,
    rule,
    opt: OptimizerSettings,
    splits,
    examples,
    lm,
    judge_lm,
    autorater: Autorater,
    store,
    retriever,
    budget: CallBudget,
    sink: RunFolder,
    say: Callable[[str], None],
    bars: bool,
) -> None:
    out = result.out
    phases = {"study": budget.calls}
    trials_frame(study).to_csv(out / "trials.csv", index=False)
    trials = complete_trials(study)
    if not trials:
        record.update(status="no complete trial", stopped=result.stopped, lm_calls=budget.calls)
        _write_json(out / "config.json", record)
        raise NoCompleteTrials(
            f"study {config.study_name!r} holds no complete trial"
            + (f" ({result.stopped})" if result.stopped else "")
            + "; nothing to pick. Rerun with a larger --max-lm-calls/--timeout to add trials"
        )
    front = pareto_front(study)
    chosen = pick_trial(front, rule)
    (out / "pareto.md").write_text(
        pareto_markdown(front, chosen, rule=rule, n_trials=len(trials)), encoding="utf-8"
    )
    plot_pareto(
        trials,
        front,
        chosen,
        out / "pareto.png",
        title=f"FRAMES MultiHop on {config.model}: dev accuracy vs tokens",
    )
    say(f"Pareto front: {len(front)} of {len(trials)} complete trials (see pareto.md)")
    say(f"chosen ({rule}): {trial_line(chosen)}")

    spec = trial_spec(chosen.params, include_question=config.include_question, cot=config.cot)
    program = build_program(
        spec, retriever=retriever, store=store, context_tokens=config.context_tokens
    )
    compiled_info: dict[str, Any] = {"optimizer": opt.name, "demos_per_predictor": opt.demos}
    if "program_state" in chosen.user_attrs:
        program.load_state(json.loads(chosen.user_attrs["program_state"]))
        compiled_info["compiled"] = "inside the trial"
    elif opt.name != "none":
        if budget.exhausted:
            compiled_info["compiled"] = "skipped: --max-lm-calls reached"
            result.stopped = result.stopped or f"--max-lm-calls {config.max_lm_calls} reached"
        else:
            say(
                f"compiling the chosen program with {opt.name} on {len(splits.train)} train "
                "questions ..."
            )
            started = time.perf_counter()
            compiled = compile_program(
                program,
                splits.train,
                settings=opt,
                autorater=autorater,
                lm=lm,
                reflection_lm=judge_lm,
                store=store,
            )
            score = score_program(
                compiled,
                splits.dev,
                lm=lm,
                autorater=autorater,
                store=store,
                label=f"compiled-{opt.name}",
                budget=budget,
                threads=config.threads,
                sink=sink,
            )
            compiled_info.update(
                seconds=round(time.perf_counter() - started, 1),
                dev_accuracy_before=chosen.values[0],
                dev_accuracy_after=score.accuracy if score.complete else None,
                dev_tokens_per_q_after=round(score.tokens_per_q, 1) if score.complete else None,
            )
            # The trial's dev accuracy won the search, so it flatters the uncompiled program a
            # little; a compiled program that still does at least as well is kept.
            if score.complete and score.accuracy >= chosen.values[0]:
                program = compiled
                compiled_info["compiled"] = "kept (dev accuracy not lower)"
            elif score.complete:
                compiled_info["compiled"] = "discarded (lower dev accuracy than uncompiled)"
            else:
                compiled_info["compiled"] = "discarded (--max-lm-calls reached while re-scoring)"
                result.stopped = result.stopped or f"--max-lm-calls {config.max_lm_calls} reached"
            phases[opt.name] = budget.calls - phases["study"]
            say(
                f"{opt.name}: dev accuracy {chosen.values[0]:.3f} -> "
                f"{score.accuracy:.3f} ({compiled_info['compiled']})"
            )

    chosen_info = {
        "trial": chosen.number,
        **chosen.params,
        "label": _label(chosen.params),
        "dev_accuracy": chosen.values[0],
        "dev_tokens_per_q": chosen.values[1],
        "dev_lm_calls_per_q": chosen.user_attrs.get("lm_calls_per_q"),
        "pick": str(rule),
        "pareto_size": len(front),
        "compile": compiled_info,
    }
    result.chosen = chosen_info
    program_path = out / "program.json"
    save_program(
        program,
        str(program_path),
        extra={
            "optimize": {
                **chosen_info,
                "study_name": config.study_name,
                "model": config.model,
                "context_tokens": config.context_tokens,
                "split": {"train": config.train, "dev": config.dev, "seed": config.seed},
            }
        },
    )
    command = reproduce_command(config, out)
    result.command = command

    if budget.exhausted:
        result.stopped = result.stopped or f"--max-lm-calls {config.max_lm_calls} reached"
        say(
            f"{result.stopped}: the test split was not scored; rerun the same command with a "
            "larger --max-lm-calls to finish"
        )
    else:
        test_dir = out / "test_run"
        _prepare_test_dir(test_dir, _sha256(program_path))
        say(
            f"scoring the chosen program once on {len(splits.test[: config.test_limit])} test "
            "questions ..."
        )
        eval_config = EvalConfig(
            conditions=["program"],
            program=str(program_path),
            **config.model_data_settings(),
            split="test",
            train=config.train,
            dev=config.dev,
            limit=config.test_limit,
            context_tokens=config.context_tokens,
            threads=config.threads,
            out=str(test_dir),
            seed=config.seed,
        )
        summary = run_evaluation(
            eval_config,
            lm=lm,
            judge_lm=judge_lm,
            examples=examples,
            store=store,
            retriever=retriever,
            progress=bars,
        )["program"]
        result.test = {
            "split": "test",
            "n": summary["n"],
            "correct": summary["correct"],
            "accuracy": summary["accuracy"],
            "ci95": summary["ci95"],
            "judge_errors": summary["judge_errors"],
            "program_errors": summary["program_errors"],
            "tokens_per_question": summary["tokens_per_question"],
            "lm_calls_per_question": summary["lm_calls_per_question"],
            "seconds_per_question": summary["seconds_per_question"],
            "test_limit": config.test_limit,
            "test_split_size": len(splits.test),
            "program": "program.json",
            "program_sha256": _sha256(program_path),
            "run_folder": "test_run",
            "reproduce": command,
        }
        _write_json(out / "test_score.json", result.test)
        phases["test"] = budget.calls - sum(phases.values())

    result.lm_calls = budget.calls
    record.update(
        status="stopped" if result.stopped else "done",
        stopped=result.stopped,
        settings={**asdict(config), "storage": redact(config.storage or record["storage"])},
        chosen=chosen_info,
        study={
            "complete_trials": len(trials),
            "all_trials": len(study.trials),
            "pareto_trials": [t.number for t in front],
        },
        test=result.test,
        lm_calls=budget.calls,
        lm_calls_by_phase=phases,
        reproduce=command,
        finished=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    _write_json(out / "config.json", record)


# --- the command line ---------------------------------------------------------------------------


def _test_limit(text: str) -> int | None:
    if text.strip().lower() in ("all", "none", "0"):
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--test-limit {text!r} is not a number; give N or 'all'"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--test-limit {value} must be at least 1 (or 'all')")
    return value


def _pick(text: str) -> str:
    try:
        return str(parse_pick(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _int_range(text: str) -> tuple[int, int]:
    try:
        low, _, high = text.partition("-")
        bounds = (int(low), int(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a range like 1-5 or a number") from None
    if not 1 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"range {text!r} must satisfy 1 <= low <= high")
    return bounds


def build_parser() -> argparse.ArgumentParser:
    defaults = CompileConfig()
    parser = argparse.ArgumentParser(
        prog="python -m optimize.compile",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Tune the FRAMES multi-step retrieval program (MultiHop) for accuracy AND cost.\n\n"
            "1. An Optuna study tries configurations: rounds 1-5, queries per round k 1-5,\n"
            "   articles per query n_docs 1-10, query prompt vanilla or planning. Each trial is\n"
            "   scored on the dev split with the autorater: accuracy (maximised) and metered\n"
            "   tokens per question (minimised). The study keeps the Pareto front.\n"
            "2. One configuration is picked from the front (--pick) and, with --optimizer, its\n"
            "   prompts are optimised on the train split by a DSPy optimizer (kept only if\n"
            "   its dev accuracy does not drop).\n"
            "3. The program is saved (program.json) and scored ONCE on the test split.\n\n"
            "A cost estimate is printed before any LM call. The study lives in --storage\n"
            "(default OUT/study.db): rerun the same command to resume after an interruption\n"
            "(--trials is the study's target, not a per-run count). More workers on this or\n"
            "other machines join with the same --storage (or --out) plus --workers-only; they\n"
            "run trials only, and the main command does the pick, compile and test.\n\n"
            "Files in OUT: config.json (settings, seeds, split sizes, data hashes, the test\n"
            "command), trials.csv, pareto.md, pareto.png, program.json, test_score.json,\n"
            "test_run/ (an evaluate run folder), dev_runs/ (every dev answer of every trial)."
        ),
        epilog=(
            "examples:\n"
            "  # a quick look with the embedded model (offline)\n"
            "  python -m optimize.compile --train 4 --dev 6 --trials 6 --test-limit 10 \\\n"
            "      --context-tokens 800 --out runs/opt-small\n"
            "  # an API model, a stronger judge, MIPROv2 on the chosen configuration;\n"
            "  # after an interruption, run the same command again to resume\n"
            "  python -m optimize.compile --model openai/gpt-4o-mini --judge-model "
            "openai/gpt-4o \\\n"
            "      --trials 30 --optimizer mipro --threads 8 --max-lm-calls 20000 "
            "--out runs/opt-4o\n"
            "  # extra workers (same settings) sharing a PostgreSQL study from other machines\n"
            "  python -m optimize.compile --model openai/gpt-4o-mini --judge-model "
            "openai/gpt-4o \\\n"
            "      --trials 30 --storage postgresql://u:pw@db/optuna --study-name frames-4o "
            "--workers-only\n"
            "  # the same study, a cheaper pick: no new trials, only the final step reruns\n"
            "  python -m optimize.compile --model openai/gpt-4o-mini --judge-model "
            "openai/gpt-4o \\\n"
            "      --trials 30 --optimizer mipro --out runs/opt-4o --pick "
            "cheapest-within:0.02\n\n"
            "exit status: 0 done (or stopped cleanly by --max-lm-calls/--timeout), 1 no trial\n"
            "completed, 2 bad input or an LM that cannot run, 130 interrupted."
        ),
    )
    add_model_arguments(parser, defaults)
    add_data_arguments(parser, defaults)
    split = parser.add_argument_group("splits (the same seeded split as frames_dspy.evaluate)")
    split.add_argument(
        "--train",
        type=int,
        default=defaults.train,
        help="train questions, for the DSPy optimizer (default %(default)s)",
    )
    split.add_argument(
        "--dev",
        type=int,
        default=defaults.dev,
        help="dev questions, scoring every trial (default %(default)s)",
    )
    split.add_argument(
        "--test-limit",
        type=_test_limit,
        default=defaults.test_limit,
        help="test questions scored at the end: the first N of the test split (~780 "
        "questions with the defaults), or 'all' (default %(default)s)",
    )
    split.add_argument(
        "--seed",
        type=int,
        default=defaults.seed,
        help="split, sampler and optimizer seed (default %(default)s)",
    )
    search = parser.add_argument_group("search")
    search.add_argument(
        "--rounds",
        type=_int_range,
        default=defaults.rounds,
        help="range of rounds to search, e.g. 1-3 or 2 (default 1-5)",
    )
    search.add_argument(
        "--k", type=_int_range, default=defaults.k, help="range of queries per round (default 1-5)"
    )
    search.add_argument(
        "--n-docs",
        type=_int_range,
        default=defaults.n_docs,
        help="range of articles per query (default 1-10)",
    )
    search.add_argument(
        "--prompts",
        type=choice_list(PROMPTS, "prompt(s)"),
        default=defaults.prompts,
        help="query prompts to try, comma-separated (default vanilla,planning)",
    )
    search.add_argument(
        "--trials",
        type=int,
        default=defaults.trials,
        help="target number of complete trials in the study; a rerun runs only the missing "
        "ones (default %(default)s)",
    )
    search.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds after which no new trial starts (a running one finishes)",
    )
    search.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default=defaults.sampler,
        help="Optuna sampler, seeded with --seed (default %(default)s)",
    )
    search.add_argument(
        "--pick",
        type=_pick,
        default=defaults.pick,
        help="'best' (highest dev accuracy, ties -> fewer tokens) or 'cheapest-within:TOL' "
        "(fewest tokens within TOL accuracy of the best, e.g. 0.02) (default %(default)s)",
    )
    search.add_argument(
        "--context-tokens",
        type=positive_int("--context-tokens"),
        default=None,
        help="article budget of the answer prompt (default: from the model: 2000 for the "
        "embedded model, up to 100k for API models)",
    )
    search.add_argument(
        "--no-question-query",
        dest="include_question",
        action="store_false",
        help="do not use the question itself as one of each round's queries",
    )
    search.add_argument("--cot", action="store_true", help="answer with chain of thought")
    prompts = parser.add_argument_group("prompt optimisation")
    prompts.add_argument(
        "--optimizer",
        choices=list(OPTIMIZERS),
        default=defaults.optimizer,
        help="; ".join(f"{k}: {v}" for k, v in OPTIMIZERS.items()) + " (default %(default)s)",
    )
    prompts.add_argument(
        "--optimize-in-trials",
        action="store_true",
        help="compile every trial's program on train before scoring it (costs one compile "
        "per trial; see the estimate)",
    )
    prompts.add_argument(
        "--max-demos",
        type=int,
        default=defaults.max_demos,
        help="bootstrapped demos per predictor; labeled demos are never used (default %(default)s)",
    )
    prompts.add_argument(
        "--demo-chars",
        type=int,
        default=defaults.demo_chars,
        help="cut longer demo fields (article text) to this many characters (default %(default)s)",
    )
    prompts.add_argument(
        "--instructions-only",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="MIPROv2/SIMBA tune instructions only, no demos (default: on for the embedded "
        "model, whose window is small)",
    )
    prompts.add_argument(
        "--optimizer-candidates",
        type=positive_int("--optimizer-candidates"),
        default=defaults.optimizer_candidates,
        help="bootstrap-rs candidate programs / SIMBA candidates (default %(default)s)",
    )
    run = parser.add_argument_group("storage, workers and limits")
    run.add_argument(
        "--storage",
        default=None,
        help="Optuna RDB URL shared by all workers, e.g. sqlite:///study.db or "
        "postgresql://user:pw@host/db (default: sqlite:///OUT/study.db)",
    )
    run.add_argument(
        "--study-name", default=defaults.study_name, help="study name (default %(default)s)"
    )
    run.add_argument(
        "--workers-only",
        action="store_true",
        help="only run trials (no pick, compile or test); for extra workers joining a study",
    )
    run.add_argument(
        "--max-lm-calls",
        type=positive_int("--max-lm-calls"),
        default=None,
        help="stop cleanly after this many LM calls in this process (program, judge and "
        "optimizer calls, cached ones included); finished trials are kept",
    )
    run.add_argument(
        "--threads",
        type=positive_int("--threads"),
        default=defaults.threads,
        help="questions scored in parallel (default %(default)s)",
    )
    run.add_argument(
        "--out",
        default=None,
        help="output folder (default runs/opt-<timestamp>); an existing one is resumed",
    )
    run.add_argument("--quiet", action="store_true", help="no progress lines or bars")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    values = {k: v for k, v in vars(args).items() if k != "quiet"}
    config = CompileConfig(**values)
    try:
        config.validate()
    except ValueError as err:
        parser.error(str(err))
    from frames_dspy.lm import LMSetupError

    def show(line: str) -> None:
        print(line, flush=True)

    try:
        result = run_compile(config, progress=None if args.quiet else show)
    except NoCompleteTrials as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except (DatasetError, CorpusError, ValueError, LMSetupError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted; rerun the same command to resume the study", file=sys.stderr)
        return 130
    print()
    print(
        f"study {result.study_name!r}: {result.complete_trials} complete trial(s); "
        f"{result.lm_calls} LM calls in this run"
    )
    if result.stopped:
        print(f"stopped early: {result.stopped}")
    if config.workers_only:
        return 0
    if result.chosen:
        c = result.chosen
        print(
            f"chosen: trial {c['trial']} ({c['label']}), dev accuracy "
            f"{c['dev_accuracy']:.3f}, {c['dev_tokens_per_q']:.0f} tokens/q"
        )
    if result.test:
        t = result.test
        print(
            f"test: accuracy {t['accuracy']:.3f} on {t['n']} questions "
            f"(95% CI {t['ci95'][0]:.2f}-{t['ci95'][1]:.2f}), "
            f"{t['tokens_per_question']:.0f} tokens/q"
        )
    print(f"output: {result.out}")
    if result.command:
        print("reproduce the test score with:")
        print(f"  {result.command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
