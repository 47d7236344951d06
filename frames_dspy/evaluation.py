"""The evaluation as a library: the paper's setups x FRAMES questions -> a run folder.

``python -m frames_dspy.evaluate`` (its command line) and ``optimize.compile`` (its test score)
both run it; notebooks call :func:`run_evaluation` with their own LMs or data.

A run folder holds ``config.json`` (every knob, seeds, data and corpus hashes, package
versions, model specs, each condition's program spec), ``predictions.jsonl`` (one line per
question x condition, appended as each finishes, so a killed run resumes where it stopped),
``summary.json``, ``table.md`` (the paper's Table 3 shape), per-reasoning-type and
per-article-count tables, plots, and ``report.html`` (every question x condition, to look at).
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import dspy

from frames_dspy import report
from frames_dspy.accounting import CallBudget, attached_callbacks
from frames_dspy.cost import Pricer, SpendMeter, estimate_lines, question_cost
from frames_dspy.data import load_frames, split_frames, summarize
from frames_dspy.disk_store import DiskArticleStore
from frames_dspy.files import sha256_file
from frames_dspy.lm.specs import API_THREADS, THREADS_DEFAULT
from frames_dspy.programs import (
    CONDITIONS,
    ProgramSpec,
    build_program,
    check_program_file,
    condition,
    lm_queries_per_round,
    load_program,
    without_lm,
)
from frames_dspy.progress import RunProgress
from frames_dspy.records import SCHEMA_VERSION
from frames_dspy.report.html_report import write_html_report
from frames_dspy.run_folder import RunFolder, setting_differences
from frames_dspy.runner import Runner
from frames_dspy.session import (
    ModelDataSettings,
    Session,
    load_store,
    open_session,
)
from frames_dspy.settings import declared_defaults, resume_keys, setting
from frames_dspy.tracking import log_evaluation

logger = logging.getLogger(__name__)

__all__ = ["EvalConfig", "RESUME_KEYS", "RunSummary", "run_evaluation"]

_EVALUATE = ("evaluate",)
_WHAT, _WHICH, _RUN = "what to run", "which questions", "run"


@dataclass
class EvalConfig(ModelDataSettings):
    """Every knob of an evaluation run (written to the run's ``config.json``).

    Attributes:
        conditions: Names from :data:`~frames_dspy.programs.CONDITIONS`, plus ``program``
            for a saved program (``program`` names its file).
        split, train, dev, seed: Which questions: all, or one part of the seeded split.
        limit, ids: The first N selected questions, or these ids.
        rounds, k, n_docs, include_question, question_docs, phrase_docs, cot: Multi-step
            knobs (``cot`` for every condition).
        no_lm_parts: Also run each LM-writing program's no-LM parts alone (``NAME-no-lm``).
        retrieval_only: Run only the retrieval half of every program (no answer call, so no
            judge call: accuracy is not measured, recall and query tokens are). Recall
            cannot depend on the answer step, so this measures it at a fraction of the cost.
        threads: Questions run at once; None chooses by the model when the run starts (1
            for an embedded model, 8 for an API model or server: ``ModelSpec.default_threads``).
        out: The run folder; None means ``runs/<timestamp>``.
        max_failure_rate: Above this share of failed questions in a condition the command
            reports the run as failed (exit status 1); the records stay.
        max_lm_calls, max_cost: Stop starting questions once this many LM calls (program and
            judge, cached ones included) were made, or this many dollars spent (API models
            LiteLLM can price); finished questions are kept and a rerun continues.
    """

    conditions: list[str] = setting(
        default_factory=lambda: list(CONDITIONS),
        kind="condition_list",
        group=_WHAT,
        entries=_EVALUATE,
        help=f"comma-separated; default all: {','.join(CONDITIONS)}; also bm25-N for the "
        "top N articles for the question (any N >= 1, e.g. bm25-12) and phrases-N (no LM: "
        "the question's capitalised phrases as extra queries, N articles)",
    )
    split: str = setting(
        "all",
        group=_WHICH,
        entries=_EVALUATE,
        choices=("all", "train", "dev", "test"),
        help="a seeded stratified split (sizes --train/--dev; test is the rest)",
    )
    train: int = setting(
        50,
        kind="non_negative_int",
        group=_WHICH,
        entries=_EVALUATE,
        help="train questions of the split (default %(default)s; optimize.compile's default is "
        "20, different on purpose: pass a compile run's --train/--dev to score its test split, "
        "as its reproduce command does)",
    )
    dev: int = setting(
        50,
        kind="non_negative_int",
        group=_WHICH,
        entries=_EVALUATE,
        help="dev questions of the split (default %(default)s; optimize.compile's is 20, see "
        "--train)",
    )
    limit: int | None = setting(
        None,
        kind="positive_int",
        group=_WHICH,
        entries=_EVALUATE,
        help="first N selected questions",
    )
    ids: list[int] | None = setting(
        None,
        kind="id_list",
        group=_WHICH,
        entries=_EVALUATE,
        help="question ids, e.g. 0,5,7-9",
    )
    rounds: int = setting(
        5,
        kind="positive_int",
        group=_WHAT,
        entries=_EVALUATE,
        help="multi-step rounds (default %(default)s, the paper's)",
        resume=("evaluate",),
    )
    k: int = setting(
        5,
        kind="positive_int",
        group=_WHAT,
        entries=_EVALUATE,
        help="queries per round (default %(default)s)",
        resume=("evaluate",),
    )
    n_docs: int = setting(
        10,
        kind="positive_int",
        group=_WHAT,
        entries=_EVALUATE,
        help="articles per query per round (default %(default)s)",
        resume=("evaluate",),
    )
    include_question: bool = setting(
        True,
        flag="--no-question-query",
        kind="no_flag",
        group=_WHAT,
        entries=_EVALUATE,
        help="do not use the question itself as one of each round's queries",
        resume=("evaluate",),
    )
    question_docs: int | None = setting(
        None,
        kind="positive_int",
        group=_WHAT,
        entries=_EVALUATE,
        help="articles the question's own query brings per round (default: --n-docs, like "
        "any query); it also fills the slots the written queries leave unused, so a round "
        "adds exactly question_docs + (k-1) x n_docs articles, comparable with bm25-N",
        resume=("evaluate",),
    )
    phrase_docs: int | None = setting(
        None,
        kind="positive_int",
        group=_WHAT,
        entries=_EVALUATE,
        help="articles the question's capitalised phrases bring per round, a no-LM query "
        "source beside the question and the LM (needs --question-docs; default: none)",
        resume=("evaluate",),
    )
    cot: bool = setting(
        False,
        kind="flag",
        group=_WHAT,
        entries=_EVALUATE,
        help="answer with chain of thought",
        resume=("evaluate",),
    )
    retrieval_only: bool = setting(
        False,
        kind="flag",
        group=_WHAT,
        entries=_EVALUATE,
        help="run only the retrieval half of each program: no answer and no judge call, so "
        "accuracy is not measured (every answer is empty) but recall and query tokens are",
        resume=("evaluate",),
    )
    no_lm_parts: bool = setting(
        False,
        kind="flag",
        group=_WHAT,
        entries=_EVALUATE,
        help="also run each program that writes LM queries with its query writer off "
        "(condition NAME-no-lm): its no-LM parts alone (the question, its phrases) at the "
        "same article budget, no query call, so the table shows what the LM's queries add",
        resume=("evaluate",),
    )
    threads: int | None = setting(
        None,
        kind="positive_int",
        group=_RUN,
        entries=_EVALUATE,
        default_text=f"`1` embedded, `{API_THREADS}` API",
        help=f"questions in parallel (default: {THREADS_DEFAULT}); config.json records the "
        "number used",
    )
    program: str | None = setting(
        None,
        group=_WHAT,
        entries=_EVALUATE,
        help="a program.json from optimize.compile, run as condition 'program' "
        "(alone unless --conditions is also given)",
        resume=("evaluate",),
    )
    out: str | None = setting(
        None,
        group=_RUN,
        entries=_EVALUATE,
        help="run folder (default runs/<timestamp>); an existing one is resumed",
    )
    seed: int = setting(0, kind="int", group=_RUN, entries=_EVALUATE, help="split seed")
    max_failure_rate: float = setting(
        0.05,
        kind="fraction",
        group=_RUN,
        entries=_EVALUATE,
        help="exit with status 1, loudly, when more than this share of a condition's "
        "questions failed (default %(default)s); the records stay",
    )
    max_lm_calls: int | None = setting(
        None,
        kind="positive_int",
        group=_RUN,
        entries=_EVALUATE,
        help="start no question after this many LM calls (program and judge, cached ones "
        "included); finished questions are kept, a rerun with the same --out continues",
    )
    max_cost: float | None = setting(
        None,
        kind="positive_float",
        group=_RUN,
        entries=_EVALUATE,
        metavar="DOLLARS",
        help="start no question once this much was spent (API models LiteLLM can price)",
    )


#: Settings that change what a prediction means: a run folder only resumes when they match
#: (declared with ``resume``).
RESUME_KEYS = resume_keys(EvalConfig, "evaluate")


def _select(examples: list[dspy.Example], config: EvalConfig) -> list[dspy.Example]:
    if config.split != "all":
        splits = split_frames(examples, train=config.train, dev=config.dev, seed=config.seed)
        examples = getattr(splits, config.split)
    if config.ids is not None:
        wanted = set(config.ids)
        unknown = sorted(wanted - {ex.id for ex in examples})
        if unknown:
            raise ValueError(
                f"--ids {unknown[:10]} are not in the selected questions "
                f"(split {config.split!r}, ids run {min(e.id for e in examples)}.."
                f"{max(e.id for e in examples)})"
            )
        examples = [ex for ex in examples if ex.id in wanted]
    if config.limit is not None:
        examples = examples[: config.limit]
    if not examples:
        raise ValueError("the selection is empty: check --split, --ids and --limit")
    return examples


def _condition_specs(config: EvalConfig) -> dict[str, ProgramSpec]:
    """Each condition's spec with the run's knobs applied, validated before anything loads."""
    for name in config.conditions:
        if name != "program":
            condition(name)  # raises on an unknown name or a bad bm25-N
    if config.retrieval_only and "naive" in config.conditions:
        raise ValueError(
            "--retrieval-only runs no answer step, and the naive condition has nothing else: "
            "drop naive from --conditions"
        )
    if config.question_docs is not None and not config.include_question:
        raise ValueError(
            "--question-docs is the question's own budget, and --no-question-query drops the "
            "question from the queries: give one of the two"
        )
    specs = {}
    for name in config.conditions:
        if name == "program":
            if not config.program:
                raise ValueError("condition 'program' needs --program FILE (a program.json)")
            if not Path(config.program).is_file():
                raise ValueError(f"--program {config.program!r} does not exist")
            specs[name] = check_program_file(config.program)
            continue
        specs[name] = condition(name).configured(
            rounds=config.rounds,
            k=config.k,
            n_docs=config.n_docs,
            include_question=config.include_question,
            question_docs=config.question_docs,
            phrase_docs=config.phrase_docs,
            cot=config.cot,
        )
    return specs


def _check_resume(run: RunFolder, config: dict[str, Any]) -> None:
    previous = run.read_json("config.json")
    if previous is None:
        return
    differences = setting_differences(
        previous.get("settings", {}),
        config["settings"],
        RESUME_KEYS,
        defaults=declared_defaults(EvalConfig),
    )
    for key in ("dataset_sha256", "corpus_sha256", "program_sha256"):
        # A naive-only run has no corpus hash; it can be extended with retrieval conditions.
        old, new = previous.get(key), config.get(key)
        if old is not None and new is not None and old != new:
            differences.append(f"{key} changed")
    if differences:
        raise ValueError(
            f"run folder {run.path} was made with other settings ({'; '.join(differences)}); "
            "resume with the same settings or choose a new --out"
        )


def _build(
    label: str, spec: ProgramSpec, config: EvalConfig, session: Session, *, budget_given: bool
) -> dspy.Module:
    parts = {"retriever": session.retriever, "store": session.store}
    if label == "program":
        # The file's own budget stands unless --context-tokens was given.
        override = session.context_tokens if budget_given or spec.context_tokens is None else None
        program, spec, _ = load_program(config.program, context_tokens=override, **parts)
        logger.info("loaded %s (%s)", config.program, spec.describe())
    else:
        if spec.takes("context_tokens"):
            spec = spec.replace(context_tokens=session.context_tokens)
        program = build_program(spec, **parts)
    if config.retrieval_only:
        # The answer is then "" (judged wrong by rule, no judge call) and costs no LM call.
        program.answer_step = False
    return program


class RunSummary(dict):
    """Per-condition summary rows (a dict, as ``summary.json`` holds them) and how the run went.

    Attributes:
        out: The run folder.
        stopped: Why the run stopped before every question was done (a budget, Ctrl-C), or None.
        notes: How the run was made (models, judge, cache, an early stop), as ``table.md`` says.
    """

    def __init__(self, rows: dict[str, dict[str, Any]], *, out: Path, stopped, notes):
        super().__init__(rows)
        self.out = out
        self.stopped = stopped
        self.notes = list(notes)

    def failing(self, max_rate: float) -> dict[str, dict[str, Any]]:
        """Conditions where more than ``max_rate`` of the questions' programs failed."""
        return {
            name: row
            for name, row in self.items()
            if row["n"] and row["program_errors"] / row["n"] > max_rate
        }


def _check_out(path: Path) -> None:
    """Refuse a run folder that cannot be written, before anything is loaded or created."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(20, "not a folder", str(existing))
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".frames-write-test-"):
            pass
    except OSError as err:
        raise ValueError(
            f"cannot write the run folder {path} ({err.strerror or err}: {existing}); choose "
            "another --out"
        ) from err


def _notes(session: Session, settings: EvalConfig, selected: list[dspy.Example]) -> list[str]:
    lm_model = getattr(session.lm, "model", str(session.lm))
    judge_model = getattr(session.judge_lm, "model", str(session.judge_lm))
    notes = [f"program LM: {lm_model}; judge: {judge_model}; LM cache: {settings.cache}"]
    if isinstance(session.store, DiskArticleStore):
        notes.append(_snapshot_note(session.store, settings, selected))
    if session.self_judging:
        notes.append(
            "SELF-JUDGING: the judge is the model under test, which tends to inflate scores; "
            "pass --judge-model for numbers to compare"
        )
    if settings.retrieval_only:
        notes.append(
            "RETRIEVAL ONLY: no answer step ran, so accuracy is not measured (every answer is "
            "empty); recall and the query writer's tokens are"
        )
    return notes


def _snapshot_note(store: DiskArticleStore, settings: EvalConfig, selected) -> str:
    """Which snapshot was searched, and how much of the gold it holds (recall counts only that)."""
    coverage = summarize(selected, store)["corpus"]
    links = len({url for ex in selected for url in ex.gold_urls})
    return (
        f"CORPUS: {settings.corpus} ({len(store):,} articles, {settings.retriever} BM25 "
        f"k1={store.manifest['key']['engine']['k1']}, b={store.manifest['key']['engine']['b']}): "
        f"gold links found {coverage['links_resolved']} of {links}, "
        f"{len(selected) - len(coverage['questions_not_fully_covered'])} of {len(selected)} "
        "questions fully covered; recall and oracle use the articles found. Not comparable "
        "with runs on the FRAMES corpus"
    )


def _write_reports(out: Path, settings: EvalConfig, notes: list[str]) -> dict[str, Any]:
    """summary.json, table.md, the plots, and report.html once a question has finished."""
    rows = report.write_reports(
        out, model=settings.model, notes=notes, accuracy_measured=not settings.retrieval_only
    )
    if rows:
        write_html_report(out)
    return rows


def run_evaluation(
    config: EvalConfig,
    *,
    lm: dspy.BaseLM | None = None,
    judge_lm: dspy.BaseLM | None = None,
    examples: list[dspy.Example] | None = None,
    store=None,
    retriever=None,
    progress: bool = True,
    say: Callable[[str], None] | None = None,
) -> RunSummary:
    """Run every condition on every selected question, resuming an existing run folder.

    The LMs, examples, store and retriever can be injected (tests, notebooks); anything not
    given is built from ``config``. Every condition, ``--program`` file and the run folder are
    checked before any model loads; a cost estimate goes to ``say`` before any LM call.

    Returns:
        The per-condition summary (also in ``summary.json``), with how the run went.

    Raises:
        ValueError: a bad setting or selection, or a run folder made with other settings;
            RunAborted / LMSetupError: an LM that cannot run; DatasetError / CorpusError;
            KeyboardInterrupt: after the questions in flight were saved and the reports
            written for what finished.
    """
    say = say or (lambda line: logger.info("%s", line))
    specs = _condition_specs(config)
    settings = replace(config)  # filled in below; the caller's object stays as it was
    out = Path(settings.out or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S"))
    settings.out = str(out)
    _check_out(out)
    if examples is None:
        examples = load_frames(config.dataset, revision=config.revision)
    selected = _select(examples, config)
    kinds = {spec.kind for spec in specs.values()}
    if store is None and (kinds != {"naive"} or settings.corpus):
        store = load_store(settings, examples=examples, say=say, progress=progress)
    # Checked before any model is made: a wrong corpus should not cost a model load.
    if "oracle" in specs and store and not any(store.resolve_many(e.gold_urls) for e in selected):
        raise ValueError(
            "the oracle condition needs gold articles, but the corpus has none for any "
            "selected question: check --corpus (and its alias table) or drop oracle"
        )
    session = open_session(
        settings,
        store_needed=False,
        retriever_needed=bool(kinds & {"bm25", "multihop"}),
        lm=lm,
        judge_lm=judge_lm,
        store=store,
        retriever=retriever,
    )
    settings = session.settings
    if settings.threads is None:
        settings.threads = session.model.default_threads
    budget_given = config.context_tokens is not None
    programs = {
        label: _build(label, spec, settings, session, budget_given=budget_given)
        for label, spec in specs.items()
    }
    if settings.no_lm_parts:
        programs |= {
            f"{label}-no-lm": without_lm(program)
            for label, program in programs.items()
            if lm_queries_per_round(program.spec) > 0
        }
    pricers = (Pricer(session.model), Pricer(session.judge))
    if settings.max_cost is not None and pricers[0](1000, 0) is None:
        raise ValueError(
            f"--max-cost needs prices, but LiteLLM's price map does not know {settings.model!r}; "
            "use --max-lm-calls to bound the run instead"
        )

    run = RunFolder(out)
    run_config = {
        "record_schema": SCHEMA_VERSION,
        "settings": asdict(settings),
        "selected_ids": [ex.id for ex in selected],
        "programs": {label: program.spec.to_dict() for label, program in programs.items()},
        "program_sha256": sha256_file(settings.program) if settings.program else None,
        **session.provenance(examples),
    }
    _check_resume(run, run_config)
    run.write_json("config.json", run_config)
    logger.info("run folder: %s", out)
    notes = _notes(session, settings, selected)
    for note in notes[1:]:
        logger.warning("%s", note)

    done = run.done()
    todo = {label: [ex for ex in selected if (label, ex.id) not in done] for label in programs}
    built = {label: program.spec for label, program in programs.items()}
    counts = {k: len(v) for k, v in todo.items()}
    for line in estimate_lines(built, counts, *pricers, retrieval_only=settings.retrieval_only):
        say(line)
    spend = SpendMeter(*pricers)
    budget = CallBudget(settings.max_lm_calls)
    weights = {
        label: question_cost(spec, answer=not settings.retrieval_only).tokens + 400
        for label, spec in built.items()
    }
    bar = RunProgress({k: len(v) for k, v in todo.items()}, weights, spend=spend, enabled=progress)

    def stop() -> str | None:
        if budget.exhausted:
            return f"--max-lm-calls {settings.max_lm_calls} reached"
        if settings.max_cost is not None and (spend.dollars or 0.0) >= settings.max_cost:
            return f"--max-cost ${settings.max_cost:g} reached (spent ${spend.dollars:.2f})"
        return None

    stopped = None
    try:
        with contextlib.ExitStack() as stack:
            for each in {id(x): x for x in (session.lm, session.judge_lm)}.values():
                stack.enter_context(attached_callbacks(each, budget))
            for label, program in programs.items():
                bar.start(label)
                runner = Runner(
                    session.lm,
                    session.autorater,
                    session.store,
                    threads=settings.threads,
                    on_record=[spend, run.append, bar],
                    stop=stop,
                )
                runner.run(label, program, todo[label])
                if runner.stopped:
                    stopped = runner.stopped
                    break
    except KeyboardInterrupt:
        notes.append("INTERRUPTED (Ctrl-C): the table holds the questions that finished")
        _write_reports(out, settings, notes)
        raise
    finally:
        bar.close()
    if stopped:
        left = sum(len(v) for v in todo.values()) - bar.finished
        notes.append(
            f"STOPPED EARLY ({stopped}): {left} question(s) not run; rerun with the same --out "
            "(and a larger budget) to finish"
        )
    rows = _write_reports(out, settings, notes)
    if settings.mlflow and rows:
        log_evaluation(out, rows, run_config)
    return RunSummary(rows, out=out, stopped=stopped, notes=notes)
