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
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import dspy

from frames_dspy.base.files import sha256_file
from frames_dspy.base.locks import lock_folder
from frames_dspy.base.redaction import redact_settings
from frames_dspy.base.settings import declared_defaults
from frames_dspy.data.corpus import ArticleStore
from frames_dspy.data.disk_store import DiskArticleStore
from frames_dspy.data.questions import load_frames, split_frames, summarize
from frames_dspy.lm.accounting import CallBudget, attached_callbacks
from frames_dspy.programs import (
    PROGRAM_CLASSES,
    ProgramSpec,
    build_program,
    check_program_file,
    condition,
    lm_queries_per_round,
    load_program,
    without_lm,
)
from frames_dspy.results import tables
from frames_dspy.results.html_report import write_html_report
from frames_dspy.results.records import SCHEMA_VERSION, QuestionRecord
from frames_dspy.results.run_folder import RunFolder, RunSummary, check_out, setting_differences
from frames_dspy.results.summary import ConditionSummary
from frames_dspy.run.cost import Pricer, SpendMeter, estimate_lines, question_cost
from frames_dspy.run.eval_config import RESUME_KEYS, EvalConfig
from frames_dspy.run.progress import RunProgress
from frames_dspy.run.runner import Runner
from frames_dspy.run.session import Session, open_articles, open_session
from frames_dspy.run.tracking import log_evaluation

logger = logging.getLogger(__name__)

__all__ = ["EvalConfig", "RESUME_KEYS", "IN_USE_FIX", "RunSummary", "run_evaluation"]


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
            max_steps=config.max_steps,
            max_articles=config.max_articles,
            max_agent_tokens=config.max_agent_tokens,
            cot=config.cot,
        )
    return specs


def _check_resume(run: RunFolder, config: dict[str, Any]) -> None:
    previous = run.read_json("config.json")
    if previous is None:
        return
    previous = redact_settings(previous)  # compared as written (a folder from before redaction)
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


def _build(label: str, spec: ProgramSpec, session: Session, *, budget_given: bool) -> dspy.Module:
    settings = session.settings
    parts = {"retriever": session.retriever, "store": session.store}
    if label == "program":
        # The file's own budget stands unless --context-tokens was given.
        budget = settings.context_tokens if budget_given or spec.context_tokens is None else None
        program, spec, _ = load_program(settings.program, context_tokens=budget, **parts)
        logger.info("loaded %s (%s)", settings.program, spec.describe())
    else:
        if spec.takes("context_tokens"):
            spec = spec.replace(context_tokens=settings.context_tokens)
        program = build_program(spec, **parts)
    if settings.retrieval_only:
        # The answer is then "" (judged wrong by rule, no judge call) and costs no LM call.
        program.answer_step = False
    return program


def _programs(
    specs: dict[str, ProgramSpec], session: Session, *, budget_given: bool
) -> dict[str, dspy.Module]:
    """Each condition's program, built with the session's parts and settings; with
    ``no_lm_parts``, each LM-writing program's no-LM parts alone beside it."""
    programs = {
        label: _build(label, spec, session, budget_given=budget_given)
        for label, spec in specs.items()
    }
    if session.settings.no_lm_parts:
        programs |= {
            f"{label}-no-lm": without_lm(program)
            for label, program in programs.items()
            if lm_queries_per_round(program.spec) > 0
        }
    return programs


def _check_oracle(
    specs: dict[str, ProgramSpec], store: ArticleStore | None, selected: list[dspy.Example]
) -> None:
    """The oracle condition needs gold articles in the corpus (checked before any model is
    made: a wrong corpus should not cost a model load)."""
    if "oracle" in specs and store and not any(store.resolve_many(e.gold_urls) for e in selected):
        raise ValueError(
            "the oracle condition needs gold articles, but the corpus has none for any "
            "selected question: check --corpus (and its alias table) or drop oracle"
        )


def _notes(session: Session, settings: EvalConfig, selected: list[dspy.Example]) -> list[str]:
    lm_model = getattr(session.lm, "model", str(session.lm))
    judge_model = getattr(session.judge_lm, "model", str(session.judge_lm))
    notes = [f"program LM: {lm_model}; judge: {judge_model}; LM cache: {settings.cache}"]
    if isinstance(session.store, DiskArticleStore):
        notes.append(_snapshot_note(session.store, settings, selected))
    if session.self_judging and not settings.retrieval_only:  # no judge runs without answers
        notes.append(
            "SELF-JUDGING: the judge is the model under test, which tends to inflate scores; "
            "pass --judge-model for numbers to compare"
        )
    if settings.retrieval_only:
        notes.append(
            "RETRIEVAL ONLY: no answer step ran, so accuracy is not measured (every answer is "
            "empty); recall and the query writer's tokens are measured"
        )
    return notes


def _snapshot_note(store: DiskArticleStore, settings: EvalConfig, selected) -> str:
    """Which snapshot was searched, and how much of the gold it holds (recall counts only that)."""
    coverage = summarize(selected, store)["corpus"]
    engine = store.manifest["identity"]["engine"]
    links = len({url for ex in selected for url in ex.gold_urls})
    return (
        f"CORPUS: {settings.corpus} ({len(store):,} articles, {settings.retriever} BM25 "
        f"k1={engine['k1']}, b={engine['b']}): "
        f"gold links found {coverage['links_resolved']} of {links}, "
        f"{len(selected) - len(coverage['questions_not_fully_covered'])} of {len(selected)} "
        "questions fully covered; recall and oracle use the articles found. Not comparable "
        "with runs on the FRAMES corpus"
    )


def _write_reports(
    out: Path, settings: EvalConfig, notes: list[str]
) -> dict[str, ConditionSummary]:
    """summary.json, table.md, the plots, and report.html once a question has finished."""
    rows = tables.write_reports(
        out, model=settings.model, notes=notes, accuracy_measured=not settings.retrieval_only
    )
    if rows:
        write_html_report(out)
    return rows


#: What a run refused because its folder is in use is told to do.
IN_USE_FIX = "wait for it to finish (then rerun to resume), or choose another --out"


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
    checked before any model loads; a cost estimate goes to ``say`` before any LM call. The
    run folder is held (:func:`frames_dspy.base.locks.lock_folder`) from before anything loads
    until the reports are written, so a second run on it is refused before it costs anything.

    Returns:
        The per-condition summary (also in ``summary.json``), with how the run went.

    Raises:
        ValueError: a bad setting or selection, or a run folder made with other settings;
            FolderInUse: another process is writing the run folder;
            FolderWriteError: a file of the run folder could not be written (what was
            recorded stays; the message says what and how to carry on);
            RunAborted / LMSetupError: an LM that cannot run; DatasetError / CorpusError;
            KeyboardInterrupt: after the questions in flight were saved and the reports
            written for what finished.
    """
    say = say or (lambda line: logger.info("%s", line))
    specs = _condition_specs(config)
    # A program.json keeps its own article budget unless --context-tokens was given.
    budget_given = config.context_tokens is not None
    out = Path(config.out or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S"))
    check_out(out)
    with lock_folder(out, what="run folder", fix=IN_USE_FIX):
        if examples is None:
            examples = load_frames(config.dataset, revision=config.revision)
        selected = _select(examples, config)
        kinds = {spec.kind for spec in specs.values()}
        articles = open_articles(
            config,
            needed=kinds != {"naive"},
            store=store,
            examples=examples,
            say=say,
            progress=progress,
        )
        _check_oracle(specs, articles.store, selected)
        session = open_session(
            config,
            articles=articles,
            retriever_needed=any("retriever" in PROGRAM_CLASSES[k].NEEDS for k in kinds),
            lm=lm,
            judge_lm=judge_lm,
            retriever=retriever,
            out=str(out),
        )
        # From here on every step reads session.settings, the run's resolved settings.
        programs = _programs(specs, session, budget_given=budget_given)
        plan = _Plan(session, examples, selected, programs)
        return _evaluate(plan, progress=progress, say=say)


@dataclass
class _Plan:
    """What a run works on once everything is loaded, before any LM call."""

    session: Session
    examples: list[dspy.Example]
    selected: list[dspy.Example]
    programs: dict[str, dspy.Module]

    @property
    def keys(self) -> set[tuple[str, Any]]:
        """Every (condition, question id) the run records."""
        return {(label, ex.id) for label in self.programs for ex in self.selected}


def _open_run(plan: _Plan) -> tuple[RunFolder, dict[str, Any]]:
    """The run folder, checked for resuming and writable, with its ``config.json`` written
    (without credentials: :func:`frames_dspy.base.redaction.redact_settings`)."""
    settings = plan.session.settings
    if settings.max_cost is not None and Pricer(plan.session.model)(1000, 0) is None:
        raise ValueError(
            f"--max-cost needs prices, but LiteLLM's price map does not know {settings.model!r}; "
            "use --max-lm-calls to bound the run instead"
        )
    run = RunFolder(settings.out)
    run_config = {
        "record_schema": SCHEMA_VERSION,
        "settings": asdict(settings),
        "selected_ids": [ex.id for ex in plan.selected],
        "programs": {label: program.spec.to_dict() for label, program in plan.programs.items()},
        "program_sha256": sha256_file(settings.program) if settings.program else None,
        **plan.session.provenance(plan.examples),
    }
    written = redact_settings(run_config)
    _check_resume(run, written)
    try:
        run.check_writable()
        run.write_json("config.json", written)
    except OSError as err:
        raise run.write_failed(err, plan.keys) from err
    logger.info("run folder: %s", run.path)
    return run, run_config


def _evaluate(plan: _Plan, *, progress: bool, say: Callable[[str], None]) -> RunSummary:
    session, programs, selected = plan.session, plan.programs, plan.selected
    settings, out = session.settings, Path(session.settings.out)
    run, run_config = _open_run(plan)
    notes = _notes(session, settings, selected)
    for note in notes[1:]:
        logger.warning("%s", note)
    done = run.done()
    todo = {label: [ex for ex in selected if (label, ex.id) not in done] for label in programs}
    built = {label: program.spec for label, program in programs.items()}
    pricers = (Pricer(session.model), Pricer(session.judge))
    counts = {k: len(v) for k, v in todo.items()}
    for line in estimate_lines(built, counts, *pricers, retrieval_only=settings.retrieval_only):
        say(line)
    weights = {
        label: question_cost(spec, answer=not settings.retrieval_only).tokens + 400
        for label, spec in built.items()
    }
    spend = SpendMeter(*pricers)
    bar = RunProgress(
        counts, weights, spend=spend, enabled=progress, accuracy=not settings.retrieval_only
    )
    try:
        stopped = _run_conditions(plan, todo, run=run, spend=spend, bar=bar)
    except KeyboardInterrupt:
        notes.append("INTERRUPTED (Ctrl-C): the table holds the questions that finished")
        try:
            _write_reports(out, settings, notes)
        except OSError as err:
            logger.warning("the reports were not written: %s", err)
        raise
    finally:
        bar.close()
    if stopped:
        left = sum(counts.values()) - bar.finished
        notes.append(
            f"STOPPED EARLY ({stopped}): {left} question(s) not run; rerun with the same --out "
            "(and a larger budget) to finish"
        )
    try:
        rows = _write_reports(out, settings, notes)
    except OSError as err:
        raise run.write_failed(err, plan.keys) from err
    if settings.mlflow and rows:
        log_evaluation(out, rows, run_config, settings=settings)
    return RunSummary(rows=rows, out=out, stopped=stopped, notes=list(notes))


def _run_conditions(
    plan: _Plan,
    todo: dict[str, list[dspy.Example]],
    *,
    run: RunFolder,
    spend: SpendMeter,
    bar: RunProgress,
) -> str | None:
    """Run each condition's questions in turn, recording each as it finishes; why the run
    stopped early (a budget), or None."""
    session, settings = plan.session, plan.session.settings
    budget = CallBudget(settings.max_lm_calls)

    def stop() -> str | None:
        if budget.exhausted:
            return f"--max-lm-calls {settings.max_lm_calls} reached"
        if settings.max_cost is not None and (spend.dollars or 0.0) >= settings.max_cost:
            return f"--max-cost ${settings.max_cost:g} reached (spent ${spend.dollars:.2f})"
        return None

    def record(question: QuestionRecord) -> None:
        try:
            run.append(question)
        except OSError as err:
            raise run.write_failed(err, plan.keys) from err

    with contextlib.ExitStack() as stack:
        for each in {id(x): x for x in (session.lm, session.judge_lm)}.values():
            stack.enter_context(attached_callbacks(each, budget))
        for label, program in plan.programs.items():
            bar.start(label)
            runner = Runner(
                session.lm,
                session.autorater,
                session.store,
                threads=settings.threads,
                on_record=[spend, record, bar],
                stop=stop,
            )
            runner.run(label, program, todo[label])
            if runner.stopped:
                return runner.stopped
    return None
