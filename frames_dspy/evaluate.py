"""``python -m frames_dspy.evaluate``: the paper's setups x FRAMES questions -> a run folder.

A run folder holds ``config.json`` (every knob, seeds, data and corpus hashes, package
versions, model specs), ``predictions.jsonl`` (one line per question x condition, appended as
each finishes, so a killed run resumes where it stopped), ``summary.json``, ``table.md`` (the
paper's Table 3 shape), per-reasoning-type and per-article-count tables, and plots.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import dspy

from frames_dspy import report
from frames_dspy.cli import (
    ModelDataSettings,
    add_data_arguments,
    add_model_arguments,
    choice_list,
    load_store,
)
from frames_dspy.corpus import ArticleStore, CorpusError
from frames_dspy.data import DatasetError, dataset_fingerprint, load_frames, split_frames
from frames_dspy.metrics import (
    Autorater,
    default_min_overlap,
    gold_recall,
    query_repetition_rate,
)
from frames_dspy.programs import CONDITIONS, build_program, describe, load_program

logger = logging.getLogger(__name__)

#: Output tokens for an autorater call: an explanation of a sentence or two and the verdict.
JUDGE_MAX_TOKENS = 256

__all__ = [
    "EvalConfig",
    "RunFolder",
    "RunAborted",
    "run_evaluation",
    "run_question",
    "default_context_tokens",
    "package_versions",
    "main",
]

# Settings that change what a prediction means: a run folder only resumes when they match.
_RESUME_KEYS = (
    "model",
    "judge_model",
    "api_base",
    "dataset",
    "corpus",
    "distractors",
    "retriever",
    "rounds",
    "k",
    "n_docs",
    "include_question",
    "context_tokens",
    "cot",
    "program",
    "temperature",
    "max_tokens",
    "judge_min_overlap",
)


@dataclass
class EvalConfig(ModelDataSettings):
    """Every knob of an evaluation run (written to the run's ``config.json``)."""

    conditions: list[str] = field(default_factory=lambda: list(CONDITIONS))
    split: str = "all"
    train: int = 50
    dev: int = 50
    limit: int | None = None
    ids: list[int] | None = None
    rounds: int = 5
    k: int = 5
    n_docs: int = 10
    include_question: bool = True
    context_tokens: int | None = None
    cot: bool = False
    threads: int = 1
    program: str | None = None
    out: str | None = None
    seed: int = 0


class RunFolder:
    """A run's files; ``predictions.jsonl`` is appended under a lock and flushed per line."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.predictions = self.path / "predictions.jsonl"
        self._lock = threading.Lock()
        self._repair_tail()

    def _repair_tail(self) -> None:
        # A SIGKILL can leave half a line; cut it so the next append starts a fresh line.
        if not self.predictions.is_file():
            return
        data = self.predictions.read_bytes()
        if data and not data.endswith(b"\n"):
            keep = data.rfind(b"\n") + 1
            logger.warning("dropping an incomplete last line in %s", self.predictions)
            with self.predictions.open("r+b") as handle:
                handle.truncate(keep)

    def done(self) -> set[tuple[str, int]]:
        return {(r["condition"], int(r["id"])) for r in report.read_predictions(self.predictions)}

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self._lock, self.predictions.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def write_json(self, name: str, payload: Any) -> None:
        tmp = self.path / (name + ".tmp")
        tmp.write_text(
            json.dumps(payload, indent=2, ensure_ascii=False, default=str), encoding="utf-8"
        )
        tmp.replace(self.path / name)


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shape a result (for run configs)."""
    versions = {}
    for name in (
        "frames-dspy",
        "dspy",
        "bm25s",
        "rank-bm25",
        "llama_cpp_python",
        "litellm",
        "datasets",
        "optuna",
    ):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


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


def default_context_tokens(spec: str, window: int | None) -> int:
    """Article budget for the answer prompt, from the model's window and speed."""
    if spec.startswith("local"):
        # The embedded model reads ~130 prompt tokens/s on 2 cores: 2,000 tokens is ~15 s.
        return min(2000, (window or 4096) - 1500)
    if window:
        return max(1000, min(100_000, window - 4000))
    return 30_000


def _check_resume(run: RunFolder, config: dict[str, Any]) -> None:
    path = run.path / "config.json"
    if not path.is_file():
        return
    previous = json.loads(path.read_text(encoding="utf-8"))
    differences = [
        f"{key}: {previous.get('settings', {}).get(key)!r} -> {config['settings'].get(key)!r}"
        for key in _RESUME_KEYS
        if previous.get("settings", {}).get(key) != config["settings"].get(key)
    ]
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


class RunAborted(RuntimeError):
    """A set-up problem (no key, no server, no model) that would fail every question."""


def run_evaluation(
    config: EvalConfig,
    *,
    lm: dspy.BaseLM | None = None,
    judge_lm: dspy.BaseLM | None = None,
    examples: list[dspy.Example] | None = None,
    store: ArticleStore | None = None,
    retriever=None,
    progress: bool = True,
) -> dict[str, dict[str, Any]]:
    """Run every condition on every selected question, resuming an existing run folder.

    The LMs, examples, store and retriever can be injected (tests, notebooks); anything not
    given is built from ``config``. Returns the per-condition summary.
    """
    from frames_dspy.lm import context_window, make_lm

    config = replace(config)  # filled in below; the caller's object stays as it was
    unknown = [c for c in config.conditions if c not in CONDITIONS and c != "program"]
    if unknown:
        raise ValueError(f"unknown condition(s) {unknown}; choose from {list(CONDITIONS)}")
    if config.program and not Path(config.program).is_file():
        raise ValueError(f"--program {config.program!r} does not exist")
    if examples is None:
        examples = load_frames(config.dataset, revision=config.revision)
    selected = _select(examples, config)

    needs_corpus = any(c != "naive" for c in config.conditions)
    if store is None and (needs_corpus or config.corpus):
        store = load_store(config)
    kinds = {CONDITIONS[c]["kind"] if c in CONDITIONS else "program" for c in config.conditions}
    if retriever is None and store is not None and kinds & {"bm25", "multihop", "program"}:
        from frames_dspy.retrieval import build_retriever

        retriever = build_retriever(store, backend=config.retriever)

    if "oracle" in config.conditions and store is not None:
        reachable = [ex for ex in selected if store.resolve_many(ex.gold_urls)]
        if not reachable:
            raise ValueError(
                "the oracle condition needs gold articles, but the corpus has none for any "
                "selected question: check --corpus (and its alias table) or drop oracle"
            )
    # Build (and so validate) every program before any model is loaded; the budget that
    # depends on the model's window is set once the model is known.
    programs = {
        condition: _make_program(condition, config, retriever=retriever, store=store)
        for condition in config.conditions
    }

    lm = lm or make_lm(
        config.model,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        api_base=config.api_base,
    )
    if judge_lm is None:
        judge_spec = config.judge_model or config.model
        judge_base = config.judge_api_base if config.judge_model else config.api_base
        judge_lm = (
            # Same model: a copy with the judge's own limits (its verdicts are short).
            lm.copy(temperature=0.0, max_tokens=JUDGE_MAX_TOKENS)
            if (judge_spec == config.model and judge_base == config.api_base)
            else make_lm(
                judge_spec, temperature=0.0, max_tokens=JUDGE_MAX_TOKENS, api_base=judge_base
            )
        )
    if config.context_tokens is None:
        config.context_tokens = default_context_tokens(config.model, context_window(lm))
    if config.judge_min_overlap is None:
        config.judge_min_overlap = default_min_overlap(config.judge_model or config.model)
    for program in programs.values():
        if hasattr(program, "context_tokens"):
            program.context_tokens = config.context_tokens

    out = Path(config.out or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S"))
    config.out = str(out)
    run = RunFolder(out)
    run_config = {
        "settings": asdict(config),
        "selected_ids": [ex.id for ex in selected],
        "dataset_sha256": dataset_fingerprint(examples),
        "corpus_sha256": store.fingerprint if store is not None else None,
        "corpus_articles": len(store) if store is not None else 0,
        "program_sha256": _file_sha256(config.program) if config.program else None,
        "lm_model": getattr(lm, "model", str(lm)),
        "judge_model": getattr(judge_lm, "model", str(judge_lm)),
        "packages": package_versions(),
        "python": sys.version.split()[0],
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    _check_resume(run, run_config)
    run.write_json("config.json", run_config)
    logger.info("run folder: %s", out)

    autorater = Autorater(judge_lm, min_overlap=config.judge_min_overlap)
    done = run.done()
    for label, program in programs.items():
        todo = [ex for ex in selected if (label, ex.id) not in done]
        _run_condition(
            label,
            program,
            todo,
            len(selected),
            lm=lm,
            autorater=autorater,
            store=store,
            run=run,
            threads=config.threads,
            progress=progress,
        )

    summary = report.write_reports(out, model=config.model)
    return summary


def _file_sha256(path: str | Path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _make_program(condition: str, config: EvalConfig, *, retriever, store) -> dspy.Module:
    # A provisional budget: run_evaluation sets the real one once the model is known.
    budget = config.context_tokens or 1000
    if condition == "program":
        program, spec = load_program(
            config.program, retriever=retriever, store=store, context_tokens=budget
        )
        logger.info("loaded %s (%s)", config.program, describe(spec))
        return program
    spec = dict(CONDITIONS[condition])
    if spec["kind"] == "multihop":
        spec.update(
            rounds=config.rounds,
            k=config.k,
            n_docs=config.n_docs,
            include_question=config.include_question,
        )
    spec["cot"] = config.cot
    return build_program(spec, retriever=retriever, store=store, context_tokens=budget)


def run_question(label, program, example, *, lm, autorater, store) -> dict[str, Any]:
    """Run one question through a program, judge the answer, and return its record.

    A failure of the program is recorded in ``error`` (the question counts as wrong); a set-up
    problem that would fail every question raises :class:`RunAborted` instead.
    """
    started = time.perf_counter()
    inputs = {name: example[name] for name in program.input_fields}
    error = None
    try:
        with dspy.context(lm=lm):
            pred = program(**inputs)
    except Exception as err:  # one bad question must not end a long run; it is recorded
        if _is_setup_error(err):
            raise RunAborted(str(err)) from err
        logger.warning("question %s failed under %s: %s", example.id, label, err)
        pred, error = (
            dspy.Prediction(
                answer="",
                context_ids=[],
                queries=[],
                lm_calls=0,
                prompt_tokens=0,
                completion_tokens=0,
            ),
            repr(err),
        )
    verdict = autorater.judge(example.question, example.answer, pred.answer)
    gold_ids = [a.id for a in store.resolve_many(example.gold_urls)] if store else []
    context_ids = pred.get("context_ids") or []
    return {
        "condition": label,
        "id": example.id,
        "question": example.question,
        "gold_answer": example.answer,
        "answer": pred.answer,
        "correct": verdict.correct,
        "judge_method": verdict.method,
        "judge_explanation": verdict.explanation,
        "error": error,
        "reasoning_types": list(example.reasoning_types),
        "n_gold": len(example.gold_urls),
        "gold_ids": gold_ids,
        "context_ids": context_ids,
        "recall": gold_recall(gold_ids, context_ids) if context_ids else ([] if gold_ids else None),
        "queries": pred.get("queries") or [],
        "query_stats": pred.get("query_stats"),
        "query_repetition_rate": query_repetition_rate(pred.get("query_stats")),
        "packing": pred.get("packing"),
        "lm_calls": pred.get("lm_calls", 0),
        "prompt_tokens": pred.get("prompt_tokens", 0),
        "completion_tokens": pred.get("completion_tokens", 0),
        "seconds": round(time.perf_counter() - started, 3),
    }


def _is_setup_error(err: Exception) -> bool:
    try:
        from frames_dspy.lm import LMSetupError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(err, LMSetupError) and not getattr(err, "per_call", False)


def _run_condition(label, program, todo, total, *, lm, autorater, store, run, threads, progress):
    from tqdm.auto import tqdm

    bar = tqdm(
        total=total,
        initial=total - len(todo),
        desc=f"{label:<18}",
        disable=not progress,
        unit="q",
        dynamic_ncols=True,
    )
    correct = tokens = finished = 0
    try:
        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            futures = [
                pool.submit(
                    run_question, label, program, ex, lm=lm, autorater=autorater, store=store
                )
                for ex in todo
            ]
            for future in as_completed(futures):
                record = future.result()
                run.append(record)
                finished += 1
                correct += bool(record["correct"])
                tokens += record["prompt_tokens"] + record["completion_tokens"]
                bar.set_postfix(acc=f"{correct / finished:.2f}", tok_q=f"{tokens / finished:.0f}")
                bar.update(1)
    except RunAborted:
        for future in futures:
            future.cancel()
        raise
    finally:
        bar.close()


def _parse_ids(text: str) -> list[int]:
    ids: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                ids.extend(range(low, high + 1))
            else:
                ids.append(int(part))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--ids {text!r}: {part!r} is not an id or a range like 3-7"
            ) from None
    if not ids:
        raise argparse.ArgumentTypeError(f"--ids {text!r} selects no question")
    return ids


def build_parser() -> argparse.ArgumentParser:
    defaults = EvalConfig()
    parser = argparse.ArgumentParser(
        prog="python -m frames_dspy.evaluate",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Run the FRAMES paper's setups on FRAMES questions and score them with the\n"
            "autorater.\n\n"
            "Conditions: naive (question only), bm25-2 / bm25-4 (top 2 or 4 BM25 articles for\n"
            "the question), oracle (all gold articles), multistep-vanilla / multistep-planning\n"
            "(ROUNDS rounds of K LM-written queries, N_DOCS articles each, then one answer).\n"
            "Everything lands in a run folder (--out); rerun with the same --out to resume."
        ),
        epilog=(
            "examples:\n"
            "  python -m frames_dspy.evaluate --limit 10\n"
            "  python -m frames_dspy.evaluate --conditions naive,oracle --ids 0-4\n"
            "  python -m frames_dspy.evaluate --model openai/gpt-4o-mini --judge-model "
            "openai/gpt-4o --threads 8\n"
            "  python -m frames_dspy.evaluate --model openai/qwen --api-base "
            "http://localhost:8000/v1\n"
            "  python -m frames_dspy.evaluate --program runs/opt/program.json --split test"
        ),
    )
    what = parser.add_argument_group("what to run")
    what.add_argument(
        "--conditions",
        type=choice_list(tuple(CONDITIONS), "condition(s)"),
        default=None,
        help=f"comma-separated; default all: {','.join(CONDITIONS)}",
    )
    what.add_argument(
        "--program",
        default=None,
        help="a program.json from optimize.compile, run as condition 'program' "
        "(alone unless --conditions is also given)",
    )
    what.add_argument(
        "--rounds",
        type=int,
        default=defaults.rounds,
        help="multi-step rounds (default %(default)s, the paper's)",
    )
    what.add_argument(
        "--k", type=int, default=defaults.k, help="queries per round (default %(default)s)"
    )
    what.add_argument(
        "--n-docs",
        type=int,
        default=defaults.n_docs,
        help="articles per query per round (default %(default)s)",
    )
    what.add_argument(
        "--no-question-query",
        dest="include_question",
        action="store_false",
        help="do not use the question itself as one of each round's queries",
    )
    what.add_argument("--cot", action="store_true", help="answer with chain of thought")
    what.add_argument(
        "--context-tokens",
        type=int,
        default=None,
        help="token budget for articles in the answer prompt (default: from the "
        "model: 2000 for the embedded model, up to 100k for API models)",
    )
    add_model_arguments(parser, defaults)
    add_data_arguments(parser, defaults)
    sel = parser.add_argument_group("which questions")
    sel.add_argument(
        "--split",
        choices=["all", "train", "dev", "test"],
        default="all",
        help="a seeded stratified split (sizes --train/--dev; test is the rest)",
    )
    sel.add_argument("--train", type=int, default=defaults.train)
    sel.add_argument("--dev", type=int, default=defaults.dev)
    sel.add_argument("--limit", type=int, default=None, help="first N selected questions")
    sel.add_argument("--ids", type=_parse_ids, default=None, help="question ids, e.g. 0,5,7-9")
    run = parser.add_argument_group("run")
    run.add_argument(
        "--threads",
        type=int,
        default=defaults.threads,
        help="questions in parallel (the embedded model serialises its calls)",
    )
    run.add_argument(
        "--out",
        default=None,
        help="run folder (default runs/<timestamp>); an existing one is resumed",
    )
    run.add_argument("--seed", type=int, default=defaults.seed, help="split seed")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit {args.limit} must be at least 1")
    conditions = list(args.conditions or ()) or (["program"] if args.program else list(CONDITIONS))
    if args.program and args.conditions:
        conditions = [*args.conditions, "program"]
    values = {k: v for k, v in vars(args).items() if k not in ("conditions", "quiet")}
    config = EvalConfig(conditions=conditions, **values)
    from frames_dspy.lm import LMSetupError

    try:
        summary = run_evaluation(config, progress=not args.quiet)
    except (DatasetError, CorpusError, ValueError, LMSetupError, RunAborted) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted; rerun with --out {config.out} to resume", file=sys.stderr)
        return 130
    print()
    print(report.table3_markdown(summary, model=config.model))
    print(f"run folder: {config.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
