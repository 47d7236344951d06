"""DSPy prompt optimizers for the FRAMES programs, with short demos.

Whole Wikipedia articles make long demos: one bootstrapped demo of the answer step carries the
full packed context (thousands of tokens), and a few of them overflow a small model's window.
So labeled demos are never used (a FRAMES question without its articles teaches little),
bootstrapped demos are capped (``max_demos``, default 2), and every string field of a demo
longer than ``demo_chars`` is cut after compiling. ``instructions_only`` (the default for the
embedded model) keeps MIPROv2 and SIMBA to instructions and rules, with no demos at all.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from frames_dspy.judge.autorater import Autorater
from optimize.gold_demos import TaughtBootstrap, drop_empty_rounds, with_gold_demos

logger = logging.getLogger(__name__)

__all__ = [
    "GOLD_OPTIMIZERS",
    "answer_predictor_names",
    "OPTIMIZERS",
    "OPTIMIZER_HELP",
    "OptimizerSettings",
    "ObjectiveMetric",
    "QueriesFoundMore",
    "FeedbackMetric",
    "compile_program",
    "trim_demos",
    "rough_calls",
]

#: ``--optimizer`` choices and the DSPy class each one runs.
OPTIMIZERS = {
    "none": "no prompt optimisation",
    "bootstrap-rs": "dspy.BootstrapFewShotWithRandomSearch (bootstrapped demos)",
    "mipro": "dspy.MIPROv2, auto='light' (instructions, and demos unless instructions-only)",
    "gepa": "dspy.GEPA, auto='light' (reflective instruction evolution with judge feedback)",
    "simba": "dspy.SIMBA (self-reflective rules, and demos unless instructions-only)",
    "gold-demos": "dspy.LabeledFewShot with query-writer demos built from the train split's "
    "gold articles (the titles still missing each round; no LM call)",
    "gold-bootstrap": "dspy.BootstrapFewShot run by a teacher that holds gold-demos: the "
    "teacher program (--teacher-model, gold demos in its prompt) runs train questions until "
    "its written queries found a gold article the question alone misses, and those rounds "
    "become the demos",
}

#: The optimizers whose demos are built for the multi-step query writer from gold titles.
GOLD_OPTIMIZERS = ("gold-demos", "gold-bootstrap")

#: ``--optimizer``'s help: the choices, and which model writes the optimizers' prompts.
OPTIMIZER_HELP = (
    "; ".join(f"{name}: {what}" for name, what in OPTIMIZERS.items())
    + ". The optimizer's own prompt writing (MIPROv2's proposals, GEPA's reflection, SIMBA's "
    "rules) uses --teacher-model if given, else --judge-model; bootstrap-rs, gold-bootstrap "
    "and MIPROv2 also bootstrap their demos with --teacher-model"
)


@dataclass(frozen=True)
class OptimizerSettings:
    """How an optimizer runs.

    Attributes:
        name: One of :data:`OPTIMIZERS`.
        max_demos: Bootstrapped demos per predictor (labeled demos are always 0).
        demo_chars: String fields of demos longer than this are cut (an ellipsis marks it).
        instructions_only: MIPROv2 and SIMBA add no demos (GEPA never does;
            bootstrap-rs only adds demos, so it ignores this).
        candidates: Candidate programs (bootstrap-rs) or candidates per step (SIMBA).
        threads: Threads the optimizer evaluates with.
        seed: The optimizer's seed.
        objective: What the optimizer maximises (see :class:`ObjectiveMetric`).
        budget: A small, explicit budget instead of the optimizer's "light" preset: MIPROv2
            trials (minibatches of at most the train size), GEPA metric calls (program runs),
            SIMBA steps. None keeps the presets (MIPROv2/GEPA ``auto='light'``, SIMBA 4 steps).
    """

    name: str = "none"
    max_demos: int = 2
    demo_chars: int = 1500
    instructions_only: bool = False
    candidates: int = 4
    threads: int = 1
    seed: int = 0
    objective: str = "accuracy"
    budget: int | None = None

    def __post_init__(self):
        if self.name not in OPTIMIZERS:
            raise ValueError(
                f"unknown optimizer {self.name!r}; choose one of {', '.join(OPTIMIZERS)}"
            )
        if self.max_demos < 0:
            raise ValueError(f"max_demos={self.max_demos} must be >= 0")
        if self.name in ("bootstrap-rs", "gold-demos", "gold-bootstrap") and self.max_demos == 0:
            raise ValueError(
                f"{self.name} only adds demos, so max_demos=0 would leave the program "
                "unchanged; set --max-demos 1 or more, or choose --optimizer mipro/gepa/simba"
            )
        if self.demo_chars < 100:
            raise ValueError(f"demo_chars={self.demo_chars} is too small (at least 100)")
        if self.candidates < 1:
            raise ValueError(f"candidates={self.candidates} must be at least 1")
        if self.budget is not None and self.budget < 1:
            raise ValueError(f"optimizer budget={self.budget} must be at least 1 (or None)")

    @property
    def demos(self) -> int:
        """Bootstrapped demos the chosen optimizer may add."""
        if self.name in ("none", "gepa"):
            return 0
        if self.instructions_only and self.name in ("mipro", "simba"):
            return 0
        return self.max_demos


def _final_context(pred: Any) -> list[str]:
    rounds = getattr(pred, "context_ids", None) or []
    return list(rounds[-1]) if rounds else []


class ObjectiveMetric:
    """The study's objective as a DSPy metric ``(example, pred, trace=None)``.

    ``accuracy``: the autorater's verdict. ``recall``: the share of the example's gold
    articles (those the corpus has) in context after the last round. ``accuracy+recall``:
    the verdict plus recall divided by ``len(trainset) + 1``, so recall only breaks ties. While
    an optimizer bootstraps (``trace`` set) it answers a bool: correct, or every gold article
    found (for ``recall``: every gold article found).
    """

    def __init__(self, objective: str, autorater: Autorater, store=None, *, n: int = 1):
        if objective not in ("accuracy", "recall", "accuracy+recall"):
            raise ValueError(
                f"unknown objective {objective!r}; choose accuracy, recall or accuracy+recall"
            )
        if objective != "accuracy" and store is None:
            raise ValueError(f"the {objective} objective needs the article store")
        self.objective = objective
        self.autorater = autorater
        self.store = store
        self.n = max(1, n)

    def __deepcopy__(self, memo):
        return self

    def recall(self, example: Any, pred: Any) -> float:
        gold = {a.id for a in self.store.resolve_many(example.get("gold_urls", []))}
        if not gold:
            return 0.0
        return len(gold & set(_final_context(pred))) / len(gold)

    def __call__(self, example: Any, pred: Any, trace: Any = None) -> float | bool:
        recall = self.recall(example, pred) if self.objective != "accuracy" else 0.0
        if self.objective == "recall":
            return recall >= 1.0 if trace is not None else recall
        correct = bool(self.autorater(example, pred, trace))
        if trace is not None:
            return correct or (self.objective == "accuracy+recall" and recall >= 1.0)
        return float(correct) + (recall / (self.n + 1) if self.objective != "accuracy" else 0.0)


def answer_predictor_names(program: dspy.Module) -> frozenset[str]:
    """Names of the predictors of ``program``'s answer step, found by object: the
    predictors of its ``answer`` module (none when it has no answer step)."""
    answer = getattr(program, "answer", None)
    if not isinstance(answer, dspy.Module):
        return frozenset()
    mine = {id(p) for p in answer.predictors()}
    return frozenset(name for name, p in program.named_predictors() if id(p) in mine)


class FeedbackMetric:
    """GEPA's metric: the objective as a score, and feedback text that says what went wrong.

    The feedback gives the judge's verdict on the answer and, for the predictors that are not
    the answer step's (the query writer, the agent's step; ``answer_names``, from
    :func:`answer_predictor_names`), the gold articles the queries found (the agent read) and
    the ones they missed, by title, which is what those predictors decide.
    """

    def __init__(
        self,
        autorater: Autorater,
        store=None,
        *,
        objective: str = "accuracy",
        n=1,
        answer_names: frozenset[str] = frozenset(),
    ):
        self.metric = ObjectiveMetric(objective, autorater, store, n=n)
        self.autorater = autorater
        self.store = store
        self.answer_names = answer_names

    def __call__(self, gold, pred, trace=None, pred_name=None, pred_trace=None):
        parts = []
        if self.metric.objective == "recall":
            # Only retrieval counts (the answer step may not even have run): no judge call.
            score = float(self.metric(gold, pred))
        else:
            answer = getattr(pred, "answer", "")
            verdict = self.autorater.judge(gold.question, gold.answer, answer)
            if self.metric.objective == "accuracy":
                score = 1.0 if verdict.correct else 0.0
            else:
                score = float(self.metric(gold, pred))
            status = {True: "Correct", False: "Incorrect"}.get(verdict.correct, "Not judged")
            parts.append(
                f"{status}. The expected answer is {gold.answer!r}; the program answered "
                f"{answer!r}. Judge: {verdict.explanation}"
            )
        if self.store is not None and pred_name not in self.answer_names:
            gold_articles = self.store.resolve_many(gold.get("gold_urls", []))
            found = set(_final_context(pred))
            hit = [a.title for a in gold_articles if a.id in found]
            missed = [a.title for a in gold_articles if a.id not in found]
            if gold_articles and getattr(pred, "trajectory", None) is not None:
                # An agent's context is what it chose to read.
                parts.append(
                    f"The articles it read hold {len(hit)} of the {len(gold_articles)} "
                    "Wikipedia articles the question needs"
                    + (f" (read: {'; '.join(hit)})" if hit else "")
                    + (f"; it never read: {'; '.join(missed)}." if missed else ".")
                    + " Good steps search a few keywords naming the person, place, work or "
                    "event the question leads to, read the result that names it, and finish "
                    "once the needed articles are read."
                )
            elif gold_articles:
                parts.append(
                    f"The queries found {len(hit)} of the {len(gold_articles)} Wikipedia "
                    f"articles the question needs"
                    + (f" (found: {'; '.join(hit)})" if hit else "")
                    + (f"; they missed: {'; '.join(missed)}." if missed else ".")
                    + " Good queries name the people, places, works or events that lead to "
                    "the missing articles, a few keywords each, and never repeat an earlier "
                    "query."
                )
        if not parts:
            parts.append(f"Recall of the question's gold articles: {score:.2f}.")
        return dspy.Prediction(score=score, feedback=" ".join(parts))


class QueriesFoundMore:
    """Whether a run's written queries found a gold article the question alone misses.

    True when the final context holds a gold article (one the store resolves) that BM25 on
    the question does not return in its top N, N being the final context's size: the
    bootstrapping test of ``gold-bootstrap``, so a demo shows queries that added something
    rather than a round the question's own articles settled.
    """

    def __init__(self, retriever, store):
        self.retriever, self.store = retriever, store

    def __call__(self, example: Any, pred: Any, trace: Any = None) -> bool:
        final = _final_context(pred)
        gold = {a.id for a in self.store.resolve_many(example.get("gold_urls", []))}
        if not final or not gold:
            return False
        alone = {h.article_id for h in self.retriever.search(example.question, len(final))}
        return bool((gold & set(final)) - alone)


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[:limit].rstrip() + " …"
    return value


def trim_demos(program: dspy.Module, demo_chars: int) -> int:
    """Cut long string fields of every demo of ``program`` (in place); returns fields cut."""
    cut = 0
    for _, predictor in program.named_predictors():
        trimmed = []
        for demo in predictor.demos:
            items = dict(demo.items()) if isinstance(demo, dspy.Example) else dict(demo)
            short = {k: _cut(v, demo_chars) for k, v in items.items()}
            cut += sum(1 for k in items if short[k] is not items[k])
            if isinstance(demo, dspy.Example):
                trimmed.append(demo.copy(**short))
            else:
                trimmed.append(short)
        predictor.demos = trimmed
    return cut


def compile_program(
    program: dspy.Module,
    trainset: Sequence[dspy.Example],
    *,
    settings: OptimizerSettings,
    autorater: Autorater,
    lm: dspy.BaseLM,
    prompt_lm: dspy.BaseLM | None = None,
    teacher_lm: dspy.BaseLM | None = None,
    store=None,
) -> dspy.Module:
    """Optimise ``program``'s prompts on ``trainset`` with the chosen DSPy optimizer.

    Args:
        program: A frames_dspy program (not modified; optimizers work on copies).
        trainset: Examples with ``question`` as input and ``answer`` as label.
        settings: Which optimizer and its limits.
        autorater: The judge of answers (wrapped into ``settings.objective``'s metric).
        lm: The program's LM.
        prompt_lm: The LM that writes prompts for the optimizer: MIPROv2's instruction
            proposer, GEPA's reflection, SIMBA's rules and advice (default ``lm``). A small
            program model writes poor prompts (the 0.5B model's SIMBA advice does not parse);
            ``optimize.compile`` passes ``--teacher-model`` here, else the judge model.
        teacher_lm: The LM that runs the program while bootstrap-rs and MIPROv2 bootstrap
            demos (DSPy's ``teacher_settings``); None bootstraps with ``lm``. The demos it
            writes are then shown to ``lm``.
        store: Article store, for recall and for GEPA's retrieval feedback.

    Returns:
        The compiled program, demos trimmed to ``settings.demo_chars``.
    """
    name = settings.name
    trainset = list(trainset)
    if name == "none":
        return program
    if len(trainset) < 2:
        raise ValueError(f"--optimizer {name} needs at least 2 train examples; set --train 2+")
    student = program
    retrieval_only = settings.objective == "recall" and _query_writer_only(program)
    if retrieval_only:
        # Recall depends on the queries alone: optimise a copy without its answer step (no
        # answer call per run, and the optimizer sees just the query writer to change).
        student = copy.deepcopy(program)
        student.answer_step = False
        student.answer = None
    compiled = _run_optimizer(
        student, trainset, settings, autorater, lm, prompt_lm, store, teacher_lm=teacher_lm
    )
    if retrieval_only:
        compiled.answer = copy.deepcopy(program.answer)
        compiled.answer_step = True
    empty = drop_empty_rounds(compiled)
    if empty:
        logger.info("dropped %d demo(s) of rounds that wrote no query", empty)
    cut = trim_demos(compiled, settings.demo_chars)
    if cut:
        logger.info("cut %d long demo field(s) to %d characters", cut, settings.demo_chars)
    return compiled


def _query_writer_only(program: dspy.Module) -> bool:
    """Whether ``program`` has an answer step and, besides it, predictors of its own (a
    query writer), found by object rather than by name."""
    answer = answer_predictor_names(program)
    others = [name for name, _ in program.named_predictors() if name not in answer]
    return bool(answer) and bool(others)


def _run_optimizer(program, trainset, settings, autorater, lm, prompt_lm, store, *, teacher_lm):
    prompt_lm = prompt_lm or lm
    teacher = {"teacher_settings": {"lm": teacher_lm}} if teacher_lm is not None else {}
    name = settings.name
    demos = settings.demos
    threads = max(1, settings.threads)
    metric = ObjectiveMetric(settings.objective, autorater, store, n=len(trainset))
    if name in GOLD_OPTIMIZERS and store is None:
        raise ValueError(f"--optimizer {name} needs the article store (the gold articles)")
    if name in GOLD_OPTIMIZERS:
        gold = with_gold_demos(
            program, trainset, store, demos=demos, seed=settings.seed, optimizer=name
        )
        if name == "gold-demos":
            return gold
    with dspy.context(lm=lm):
        if name == "gold-bootstrap":
            optimizer = TaughtBootstrap(
                metric=QueriesFoundMore(program.retriever, store),
                max_bootstrapped_demos=demos,
                max_labeled_demos=0,
                max_rounds=1,
                **teacher,
            )
            return optimizer.compile(program, teacher=gold, trainset=trainset)
        if name == "bootstrap-rs":
            optimizer = dspy.BootstrapFewShotWithRandomSearch(
                metric=metric,
                max_bootstrapped_demos=demos,
                max_labeled_demos=0,
                num_candidate_programs=settings.candidates,
                num_threads=threads,
                **teacher,
            )
            compiled = optimizer.compile(program, trainset=trainset)
        elif name == "mipro":
            compiled = _mipro(program, trainset, settings, metric, lm, prompt_lm, teacher)
        elif name == "gepa":
            compiled = _gepa(program, trainset, settings, autorater, store, prompt_lm)
        else:  # simba
            bsize = min(32, len(trainset))
            optimizer = dspy.SIMBA(
                metric=metric,
                bsize=bsize,
                num_candidates=settings.candidates,
                max_steps=settings.budget or 4,
                max_demos=demos,
                prompt_model=prompt_lm,
                demo_input_field_maxlen=settings.demo_chars,
                num_threads=threads,
            )
            compiled = optimizer.compile(program, trainset=trainset, seed=settings.seed)
    return compiled


def _mipro(program, trainset, settings, metric, lm, prompt_lm, teacher: dict):
    """MIPROv2: instructions and demos proposed by ``prompt_lm``, searched on trainset."""
    threads = max(1, settings.threads)
    demos = settings.demos
    sized = (
        {"auto": None, "num_candidates": settings.candidates}
        if settings.budget
        else {"auto": "light"}
    )
    optimizer = dspy.MIPROv2(
        metric=metric,
        prompt_model=prompt_lm,
        task_model=lm,
        max_bootstrapped_demos=demos,
        max_labeled_demos=0,
        num_threads=threads,
        seed=settings.seed,
        verbose=False,
        track_stats=False,
        **teacher,
        **sized,
    )
    extra = (
        # MIPROv2 scores minibatches of its validation part, the last 80% of trainset.
        {"num_trials": settings.budget, "minibatch_size": _mipro_minibatch(trainset)}
        if settings.budget
        else {}
    )
    return optimizer.compile(program, trainset=trainset, seed=settings.seed, **extra)


def _gepa(program, trainset, settings, autorater, store, prompt_lm):
    """GEPA: prompts evolved by ``prompt_lm`` reflecting on the judge's feedback."""
    threads = max(1, settings.threads)
    sized = {"max_metric_calls": settings.budget} if settings.budget else {"auto": "light"}
    optimizer = dspy.GEPA(
        metric=FeedbackMetric(
            autorater,
            store,
            objective=settings.objective,
            n=len(trainset),
            answer_names=answer_predictor_names(program),
        ),
        reflection_lm=prompt_lm,
        num_threads=threads,
        seed=settings.seed,
        track_stats=False,
        **sized,
    )
    return optimizer.compile(program, trainset=trainset)


def _mipro_minibatch(trainset: Sequence[Any]) -> int:
    return min(35, max(1, int(len(trainset) * 0.8)))


def rough_calls(settings: OptimizerSettings, *, n_train: int, calls_per_q: float) -> float:
    """A rough count of the LM calls one compile makes (for the printed estimate).

    Counted in program runs ("rollouts", each ``calls_per_q`` program calls plus one judge
    call), following each optimizer's own budget rules for a two-predictor program:
    bootstrap-rs evaluates ``candidates + 3`` programs on the train split and bootstraps up to
    the whole split per candidate; MIPROv2 light runs 20 minibatch trials (10 when
    instructions-only) of up to 35 questions, ~5 full evaluations of its 80% validation part,
    6 bootstrapped sets and ~30 proposal calls; GEPA light uses ``GEPA.auto_budget`` (about
    ``6 x train + 730`` rollouts, whatever the train size) plus a reflection call per ~3;
    SIMBA runs 4 steps of ``2 x candidates`` minibatches plus a final pass per candidate. An
    explicit ``budget`` replaces the preset's trials, rollouts or steps. A ``recall`` compile
    runs the query writer alone: no answer call and no judge call per rollout.
    """
    per_q = calls_per_q + 1
    if settings.objective == "recall" and calls_per_q > 1:
        per_q = calls_per_q - 1
    n = max(n_train, 1)
    if settings.name in ("none", "gold-demos"):
        return 0.0
    if settings.name == "bootstrap-rs":
        return per_q * n * (2 * settings.candidates + 3)
    if settings.name == "gold-bootstrap":
        return per_q * n  # the teacher runs train questions until enough demos pass
    if settings.name == "mipro":
        valset = max(1, int(n * 0.8))
        trials = settings.budget or (10 if settings.demos == 0 else 20)
        return per_q * (trials * min(35, valset) + 5 * valset + 6 * n) + 30
    if settings.name == "gepa":
        rollouts = settings.budget or dspy.GEPA.auto_budget(
            None, num_preds=2, num_candidates=6, valset_size=n
        )
        return per_q * rollouts + rollouts / 3
    bsize = min(32, n)
    steps = settings.budget or 4
    return per_q * (steps * 2 * settings.candidates * bsize + (settings.candidates + 1) * n)
