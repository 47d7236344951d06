"""The settings of ``python -m optimize.compile``, its plan, and what a run of it returns."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import dspy

from frames_dspy.base.settings import declared_defaults, resume_keys, setting
from frames_dspy.data.questions import Splits
from frames_dspy.lm import make_lm
from frames_dspy.run.settings import RunSettings
from optimize.optimizers import OPTIMIZER_HELP, OPTIMIZERS, OptimizerSettings
from optimize.pareto import PickRule, parse_pick
from optimize.scores import ChosenTrial, TestScore
from optimize.space import KINDS, PAPER_PROMPTS, PROMPTS, SearchSpace, check_kinds
from optimize.study import OBJECTIVES

__all__ = [
    "COMPILE_EXAMPLES",
    "SAMPLERS",
    "STUDY_KEYS",
    "CompileConfig",
    "CompilePlan",
    "CompileResult",
    "NoCompleteTrials",
]


SAMPLERS = ("tpe", "nsga2", "random")


#: The examples and exit statuses ``python -m optimize.compile --help`` ends with.
COMPILE_EXAMPLES = (
    "examples:\n"
    "  # a quick look with the embedded model (offline)\n"
    "  python -m optimize.compile --train 4 --dev 6 --trials 6 --test-limit 10 \\\n"
    "      --context-tokens 800 --out runs/opt-small\n"
    "  # an API model, a stronger judge, MIPROv2 on the chosen configuration;\n"
    "  # after an interruption, run the same command again to resume\n"
    "  python -m optimize.compile --model openai/gpt-4o-mini --judge-model "
    "openai/gpt-4o \\\n"
    "      --trials 30 --optimizer mipro --max-lm-calls 20000 "
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
    "One main command writes an output folder at a time: a second one on the same --out\n"
    "is refused (it names the process that holds it); --workers-only joins it instead.\n\n"
    "exit status: 0 done (or stopped cleanly by --max-lm-calls/--timeout), 1 no trial\n"
    "completed, 2 bad input, an output folder in use or an LM that cannot run, 3 a file\n"
    "could not be written (a full disk...; rerun to resume), 4 the test run's records are\n"
    "complete but its reports could not be written, 130 interrupted."
)


class NoCompleteTrials(RuntimeError):
    """The study holds no complete trial, so nothing can be picked."""


_COMPILE = ("compile",)
_SPLITS = "splits (the same seeded split as frames_dspy.evaluate)"
_SEARCH, _PROMPTS, _RUN = "search", "prompt optimisation", "storage, workers and limits"


@dataclass(frozen=True)
class CompileConfig(RunSettings):
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
        pick: ``best`` or ``cheapest-within:TOL`` (on the objective's value).
        objective: What trials maximise and the DSPy optimizer optimises: ``accuracy``,
            ``recall`` or ``accuracy+recall`` (see :data:`optimize.study.OBJECTIVES`).
        lm_queries: ``if-shown`` (with a recall or lift objective, the pick keeps its LM-written
            queries only when dev shows a paired gain over its no-LM parts alone) or
            ``always``.
        optimizer: One of :data:`optimize.optimizers.OPTIMIZERS`.
        teacher_model: An LM spec (as ``--model``) that bootstraps demos (bootstrap-rs,
            gold-bootstrap, MIPROv2: DSPy's ``teacher_settings``) and writes the optimizers' prompts
            (MIPROv2's ``prompt_model``, GEPA's reflection, SIMBA's rules); None leaves
            bootstrapping to the program's model and prompt writing to the judge's. It is
            never the judge.
        optimize_in_trials: Compile prompts inside every trial instead of once at the end.
        optimizer_budget: A small explicit budget instead of the optimizer's preset (MIPROv2
            trials, GEPA metric calls, SIMBA steps).
        max_demos, demo_chars, instructions_only, optimizer_candidates: Optimizer limits;
            ``instructions_only`` None means True for the embedded model.
        storage: Optuna RDB URL; None means ``sqlite:///OUT/study.db``.
        study_name: Name of the study in the storage.
        workers_only: Run trials only (no pick, compile or test): for extra workers.
        out: Output folder; None means ``runs/opt-<timestamp>``.
        found_tokens, lead_chars: Choices the study tries for the query writer's view of the
            articles found so far: its token budget, and the characters of each lead (also
            of each search result the agent sees).
        kinds, max_steps, max_articles, max_agent_tokens: The program kinds tried
            (:data:`optimize.space.KINDS`) and the agent's limits (``n_docs``: its results).

    Declared with evaluate's (:mod:`frames_dspy.run.settings`): ``include_question`` and
    ``cot`` (fixed for the whole study; ``search_question_query`` makes the study try the
    question as a query both ways) and ``max_lm_calls`` in ``RunSettings``; ``threads`` and
    ``context_tokens`` (None: chosen by the model when the run starts) in
    ``ModelDataSettings``.
    """

    train: int = setting(
        20,
        kind="int",
        group=_SPLITS,
        entries=_COMPILE,
        help="train questions, for the DSPy optimizer (default %(default)s; evaluate's default "
        "is 50, different on purpose: every trial scores the dev split, so small splits keep a "
        "study affordable, and the reproduce command passes these to evaluate)",
        resume=("compile",),
    )
    dev: int = setting(
        20,
        kind="int",
        group=_SPLITS,
        entries=_COMPILE,
        help="dev questions, scoring every trial (default %(default)s; evaluate's is 50, see "
        "--train)",
        resume=("compile",),
    )
    test_limit: int | None = setting(
        50,
        kind="limit_or_all",
        group=_SPLITS,
        entries=_COMPILE,
        help="test questions scored at the end: the first N of the test split (~780 "
        "questions with the defaults), or 'all' (default %(default)s)",
    )
    seed: int = setting(
        0,
        kind="int",
        group=_SPLITS,
        entries=_COMPILE,
        help="split, sampler and optimizer seed (default %(default)s)",
        resume=("compile",),
    )
    trials: int = setting(
        20,
        kind="int",
        group=_SEARCH,
        entries=_COMPILE,
        help="target number of complete trials in the study; a rerun runs only the missing "
        "ones (default %(default)s)",
    )
    timeout: float | None = setting(
        None,
        kind="float",
        group=_SEARCH,
        entries=_COMPILE,
        help="seconds after which no new trial starts (a running one finishes)",
    )
    sampler: str = setting(
        "tpe",
        group=_SEARCH,
        entries=_COMPILE,
        choices=SAMPLERS,
        help="Optuna sampler, seeded with --seed (default %(default)s)",
    )
    rounds: tuple[int, int] = setting(
        (1, 5),
        kind="int_range",
        group=_SEARCH,
        entries=_COMPILE,
        help="range of rounds to search, e.g. 1-3 or 2 (default 1-5; evaluate's --rounds is "
        "one number, as it runs one configuration)",
    )
    k: tuple[int, int] = setting(
        (1, 5),
        kind="int_range",
        group=_SEARCH,
        entries=_COMPILE,
        help="range of queries per round (default 1-5)",
    )
    n_docs: tuple[int, int] = setting(
        (1, 10),
        kind="int_range",
        group=_SEARCH,
        entries=_COMPILE,
        help="range of articles per query, and of an agent's results per search (default 1-10)",
    )
    prompts: tuple[str, ...] = setting(
        PAPER_PROMPTS,
        kind="choice_list",
        group=_SEARCH,
        entries=_COMPILE,
        choices=PROMPTS,
        help="query prompts to try, comma-separated: vanilla and planning (the paper's), "
        "titles (ours: the titles of the missing articles) (default vanilla,planning)",
    )
    search_question_query: bool = setting(
        False,
        kind="flag",
        group=_SEARCH,
        entries=_COMPILE,
        help="search whether the question is one of each round's queries (both ways)",
    )
    found_tokens: tuple[int, ...] = setting(
        (1000,),
        kind="int_list",
        group=_SEARCH,
        entries=_COMPILE,
        help="query writer's found-articles view budgets to try, comma-separated "
        "(default %(default)s)",
    )
    lead_chars: tuple[int, ...] = setting(
        (120,),
        kind="int_list",
        group=_SEARCH,
        entries=_COMPILE,
        help="lead lengths to try (the query writer's view, an agent's search results), "
        "comma-separated (default %(default)s)",
    )
    question_docs: tuple[int, ...] = setting(
        (),
        kind="int_list",
        group=_SEARCH,
        entries=_COMPILE,
        help="articles the question's own query brings per round, choices to try, "
        "comma-separated; it also fills the slots the written queries leave unused, so a "
        "round adds exactly question_docs + (k-1) x n_docs articles (default: unset, the "
        "question gets n_docs like any query)",
    )
    phrase_docs: tuple[int, ...] = setting(
        (),
        kind="count_list",
        group=_SEARCH,
        entries=_COMPILE,
        help="articles the question's capitalised phrases bring per round (a no-LM query "
        "source), choices to try, comma-separated; 0 = no phrase queries. Needs "
        "--question-docs; a round then adds question_docs + phrase_docs + (k-1) x n_docs "
        "articles, and --k 1 means no LM query at all (default: unset, no phrase source)",
    )
    lm_from_round: tuple[int, ...] = setting(
        (),
        kind="int_list",
        group=_SEARCH,
        entries=_COMPILE,
        help="the first round whose queries the LM writes, choices to try, comma-separated "
        "(e.g. 1,2: with 2 round 1 sends only the question and its phrases, and the LM first "
        "sees what they found) (default: unset, the LM writes from round 1)",
    )
    kinds: tuple[str, ...] = setting(
        ("multihop",),
        kind="choice_list",
        group=_SEARCH,
        entries=_COMPILE,
        choices=KINDS,
        help="program kinds to try, comma-separated: multihop (rounds of written queries) and "
        "agent (the LM searches, reads and stops by itself) (default multihop)",
    )
    max_steps: tuple[int, int] = setting(
        (4, 12),
        kind="int_range",
        group=_SEARCH,
        entries=_COMPILE,
        help="agent trials: range of steps before it must answer (default 4-12)",
    )
    max_articles: tuple[int, int] = setting(
        (2, 8),
        kind="int_range",
        group=_SEARCH,
        entries=_COMPILE,
        help="agent trials: range of articles it may read (default 2-8)",
    )
    max_agent_tokens: tuple[int, ...] = setting(
        (8000,),
        kind="int_list",
        group=_SEARCH,
        entries=_COMPILE,
        help="agent trials: metered token budgets of its steps to try, comma-separated "
        "(default 8000); --n-docs is its results per search, --lead-chars their leads",
    )
    pick: str = setting(
        "best",
        kind="pick",
        group=_SEARCH,
        entries=_COMPILE,
        help="'best' (highest dev objective, ties -> fewer tokens) or 'cheapest-within:TOL' "
        "(fewest tokens within TOL of the best objective, e.g. 0.02) (default %(default)s)",
    )
    objective: str = setting(
        "accuracy+recall",
        group=_SEARCH,
        entries=_COMPILE,
        choices=tuple(OBJECTIVES),
        help="; ".join(f"{k}: {v}" for k, v in OBJECTIVES.items()) + " (default %(default)s)",
        resume=("compile",),
    )
    lm_queries: str = setting(
        "if-shown",
        group=_SEARCH,
        entries=_COMPILE,
        choices=("if-shown", "always"),
        help="with --objective recall or lift, whether program.json keeps the pick's LM-written "
        "queries: if-shown keeps them only when dev shows they add recall beyond the pick's "
        "no-LM parts alone (paired 95%% interval above 0); otherwise program.json is those parts "
        "alone (no LM call; with --question-docs the question fills the LM's article slots) "
        "and the LM program is program-lm.json; "
        "always keeps them (default %(default)s)",
    )
    optimizer: str = setting(
        "none",
        group=_PROMPTS,
        entries=_COMPILE,
        choices=tuple(OPTIMIZERS),
        help=OPTIMIZER_HELP + " (default %(default)s)",
    )
    teacher_model: str | None = setting(
        None,
        group=_PROMPTS,
        entries=_COMPILE,
        help="LM (as --model) that bootstraps demos (bootstrap-rs, gold-bootstrap, mipro) and "
        "writes the optimizers' prompts, instead of the program's model and the judge; e.g. "
        "local-1.5b",
    )
    optimize_in_trials: bool = setting(
        False,
        kind="flag",
        group=_PROMPTS,
        entries=_COMPILE,
        help="compile every trial's program on train before scoring it (costs one compile "
        "per trial; see the estimate)",
    )
    max_demos: int = setting(
        2,
        kind="int",
        group=_PROMPTS,
        entries=_COMPILE,
        help="bootstrapped demos per predictor; labeled demos are never used (default %(default)s)",
    )
    demo_chars: int = setting(
        1500,
        kind="int",
        group=_PROMPTS,
        entries=_COMPILE,
        help="cut longer demo fields (article text) to this many characters (default %(default)s)",
    )
    instructions_only: bool | None = setting(
        None,
        kind="on_off",
        group=_PROMPTS,
        entries=_COMPILE,
        help="MIPROv2/SIMBA tune instructions only, no demos (default: on for the embedded "
        "model, whose window is small)",
    )
    optimizer_candidates: int = setting(
        4,
        kind="positive_int",
        group=_PROMPTS,
        entries=_COMPILE,
        help="bootstrap-rs candidate programs / MIPROv2 instruction candidates (with "
        "--optimizer-budget) / SIMBA candidates (default %(default)s)",
    )
    optimizer_budget: int | None = setting(
        None,
        kind="positive_int",
        group=_PROMPTS,
        entries=_COMPILE,
        help="a small explicit budget instead of the optimizer's 'light' preset: MIPROv2 "
        "trials, GEPA metric calls (program runs), SIMBA steps (default: the presets; GEPA "
        "light is ~730+ program runs)",
    )
    storage: str | None = setting(
        None,
        group=_RUN,
        entries=_COMPILE,
        help="Optuna RDB URL shared by all workers, e.g. sqlite:///study.db or "
        "postgresql://user:pw@host/db (default: sqlite:///OUT/study.db)",
    )
    study_name: str = setting(
        "frames-multihop",
        group=_RUN,
        entries=_COMPILE,
        help="study name (default %(default)s)",
    )
    workers_only: bool = setting(
        False,
        kind="flag",
        group=_RUN,
        entries=_COMPILE,
        help="only run trials (no pick, compile or test); for extra workers joining a study "
        "(a worker seeds its sampler with --seed plus its pid: such a study is not re-run "
        "trial for trial)",
    )
    out: str | None = setting(
        None,
        group=_RUN,
        entries=_COMPILE,
        help="output folder (default runs/opt-<timestamp>); an existing one is resumed",
    )

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
            (
                self.threads is None or self.threads >= 1,
                f"--threads {self.threads} must be at least 1",
            ),
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
                self.objective in OBJECTIVES,
                f"unknown objective {self.objective!r}; choose one of {', '.join(OBJECTIVES)}",
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
            (
                not any(self.phrase_docs) or bool(self.question_docs),
                "--phrase-docs needs --question-docs (the question's own budget fixes the "
                "round size the phrases share)",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        check_kinds(vars(self), declared_defaults(CompileConfig))
        parse_pick(self.pick)
        self.search_space()  # a bad range fails here, before any model or corpus loads
        self.optimizer_settings(embedded=False)

    def search_space(self) -> SearchSpace:
        """The study's search space these settings describe."""
        return SearchSpace(
            rounds=tuple(self.rounds),
            k=tuple(self.k),
            n_docs=tuple(self.n_docs),
            prompts=tuple(self.prompts),
            question_query=(True, False)
            if self.search_question_query
            else (self.include_question,),
            found_tokens=tuple(self.found_tokens),
            lead_chars=tuple(self.lead_chars),
            question_docs=tuple(self.question_docs),
            phrase_docs=tuple(self.phrase_docs),
            lm_from_round=tuple(self.lm_from_round),
            kinds=tuple(self.kinds),
            max_steps=tuple(self.max_steps),
            max_articles=tuple(self.max_articles),
            max_agent_tokens=tuple(self.max_agent_tokens),
        )

    def make_teacher(self) -> dspy.BaseLM | None:
        """The ``--teacher-model`` LM (built like the program's), or None without one."""
        if not self.teacher_model:
            return None
        return make_lm(
            self.teacher_model,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            timeout=self.lm_timeout,
        )

    def optimizer_settings(self, *, embedded: bool) -> OptimizerSettings:
        """The optimizer's settings (of resolved settings: ``threads`` set); ``embedded`` says
        whether the program model runs on this machine (then ``instructions_only`` defaults
        to True)."""
        instructions_only = self.instructions_only
        if instructions_only is None:
            # A small local window has no room for demos cut from whole articles.
            instructions_only = embedded
        return OptimizerSettings(
            name=self.optimizer,
            max_demos=self.max_demos,
            demo_chars=self.demo_chars,
            instructions_only=instructions_only,
            candidates=self.optimizer_candidates,
            threads=self.threads,
            seed=self.seed,
            # Lift is recall minus a reference the optimizer cannot change: it optimises recall.
            objective="recall" if self.objective == "lift" else self.objective,
            budget=self.optimizer_budget,
        )


#: Settings that change what a trial's numbers mean: a study resumes only when they match
#: (declared with ``resume``).
STUDY_KEYS = resume_keys(CompileConfig, "compile")


@dataclass(frozen=True)
class CompilePlan:
    """What a compile run works on, fixed before its first trial.

    Attributes:
        config: The run's resolved settings (``Session.settings``).
        storage_url: The study's storage (``--storage``, or ``OUT/study.db``).
        space: The search space the settings describe.
        splits: The seeded train/dev/test split.
        test: The test questions scored at the end (the first ``--test-limit``).
        opt: The prompt optimizer's settings.
        rule: The pick rule.
        sampler_seed: The sampler's seed (``--seed``, plus the pid in an extra worker).
    """

    config: CompileConfig
    storage_url: str
    space: SearchSpace
    splits: Splits
    test: list[dspy.Example]
    opt: OptimizerSettings
    rule: PickRule
    sampler_seed: int

    @classmethod
    def of(
        cls, settings: CompileConfig, splits: Splits, test: list[dspy.Example], *, embedded: bool
    ) -> CompilePlan:
        """The plan of resolved ``settings``; ``embedded``: the program model runs here."""
        out = Path(settings.out)
        return cls(
            config=settings,
            storage_url=settings.storage or f"sqlite:///{(out / 'study.db').resolve()}",
            space=settings.search_space(),
            splits=splits,
            test=test,
            opt=settings.optimizer_settings(embedded=embedded),
            rule=parse_pick(settings.pick),
            # Extra workers add their pid so they do not propose the same points.
            sampler_seed=settings.seed + (os.getpid() if settings.workers_only else 0),
        )


@dataclass
class CompileResult:
    """What a run produced; the files in ``out`` hold the details."""

    out: Path
    study_name: str
    storage: str
    complete_trials: int
    lm_calls: int
    chosen: ChosenTrial | None = None
    test: TestScore | None = None
    stopped: str | None = None
    command: str | None = None
    config: CompileConfig | None = None
