"""Check a reported experiment: re-score its run folders, or re-run it, against expected figures.

Run ``python -m benchmarks.reproduce experiments/NAME`` (re-score the run folders the
experiment's commands wrote under ``--runs``, default ``runs``) or add ``--rerun`` (run the
commands first, into ``--runs``; pick a fresh folder, e.g. ``--runs /tmp/repro``). ``--cache
off`` adds ``--cache off`` to every command so nothing is replayed from DSPy's response cache.

An experiment is a folder with ``experiment.json``:

- ``commands``: the exact command lines (argument lists) that made its runs; ``{runs}`` in an
  argument stands for the ``--runs`` folder;
- ``figures``: each reported number, where it comes from and its expected value.
  A run figure names ``run`` (a folder under ``{runs}``), ``condition`` and ``metric``, one of
  :data:`RUN_METRICS`, computed from ``predictions.jsonl`` as the run's table computes it
  (:func:`frames_dspy.results.summary.summarize`). A paired figure names ``compare`` (``a``, ``b``,
  ``condition``, ``condition_b``) and ``metric``, a field of
  :class:`frames_dspy.results.comparison.PairComparison`, with ``index`` for an interval's end;
  it is
  computed as ``python -m frames_dspy.compare`` computes it (same bootstrap seed and size);
- ``tolerance``: how far a re-run figure may land from the expected one (per figure, else the
  experiment's). Re-scoring the same records must match to :data:`RESCORE_TOLERANCE` (the
  expected values are stored rounded to 4 decimals).

Exit status: 0 every figure within tolerance, 1 some figure outside it (each one is listed),
2 the experiment or a run folder cannot be read (the message says which, and how to make it).
``--only NAME,...`` takes part of an experiment: with ``--rerun`` only those commands run, and
only the figures whose run folders those commands write are checked (the table says how many
were left out, and why). ``--tolerance rerun`` checks folders an earlier ``--rerun`` wrote (for
instance one resumed in parts) with the re-run tolerances instead of the re-scoring one.

``--write`` stores the figures just computed as the expected values (for the experiment's
author, after a run; the file says when and with which command line); with ``--only``, just
those figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frames_dspy.base.files import atomic_write_text
from frames_dspy.results.comparison import CompareConfig, CompareError, compare_runs
from frames_dspy.results.run_folder import load_records
from frames_dspy.results.summary import ConditionSummary, summarize

__all__ = [
    "RUN_METRICS",
    "RESCORE_TOLERANCE",
    "Figure",
    "load_experiment",
    "select",
    "score",
    "main",
]

#: How close a re-scored figure must be to the stored one (stored values have 4 decimals).
RESCORE_TOLERANCE = 5e-4

#: Run figures: an ``experiment.json`` metric name -> how it is read off a condition's
#: :class:`~frames_dspy.results.summary.ConditionSummary`. These names are the experiment
#: files' contract; they match the summary's fields (and ``summary.json``'s keys) but for the
#: two recall figures.
RUN_METRICS: dict[str, Callable[[ConditionSummary], Any]] = {
    "n": lambda s: s.n,
    "accuracy": lambda s: s.accuracy,
    "program_errors": lambda s: s.program_errors,
    "cached_calls": lambda s: s.cached_calls,
    "recall": lambda s: s.final_recall,
    "recall_round1": lambda s: s.recall_by_round[0] if s.recall_by_round else None,
    "tokens_per_question": lambda s: s.tokens_per_question,
    "reported_tokens_per_question": lambda s: s.reported_tokens_per_question,
    "lm_calls_per_question": lambda s: s.lm_calls_per_question,
    # How the LM searched (table.md's second table): the paper's loop, and the agent's steps.
    "query_repetition_rate": lambda s: s.query_repetition_rate,
    "near_repeat_rate": lambda s: s.near_repeat_rate,
    "steps_per_question": lambda s: s.steps_per_question,
    "searches_per_question": lambda s: s.searches_per_question,
    "articles_read_per_question": lambda s: s.articles_read_per_question,
    "malformed_calls_per_question": lambda s: s.malformed_calls_per_question,
    "gold_searched": lambda s: s.gold_searched,
    "gold_read": lambda s: s.gold_read,
    "gold_used": lambda s: s.gold_used,
}


class ExperimentError(ValueError):
    """An experiment file or one of its run folders cannot be used; the message says why."""


@dataclass(frozen=True)
class Figure:
    """One reported number: where it comes from, what it should be, and how far it may move."""

    name: str
    metric: str
    expected: float | None
    tolerance: float
    run: str | None = None
    condition: str | None = None
    compare: dict[str, str] | None = None
    index: int | None = None

    def describe(self) -> str:
        if self.compare:
            c = self.compare
            return f"{c['b']}:{c['condition_b']} - {c['a']}:{c['condition']} {self.metric}"
        return f"{self.run}:{self.condition} {self.metric}"


def load_experiment(folder: str | Path) -> tuple[dict[str, Any], list[Figure]]:
    """Read ``folder/experiment.json``; raises :class:`ExperimentError` naming what is wrong."""
    path = Path(folder) / "experiment.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExperimentError(f"{path} does not exist; pass an experiment folder") from None
    except json.JSONDecodeError as err:
        raise ExperimentError(f"{path} is not valid JSON (line {err.lineno}): {err.msg}") from None
    default = data.get("tolerance", 0.0)
    figures = []
    for i, item in enumerate(data.get("figures", []), start=1):
        metric = item.get("metric")
        if "compare" in item:
            missing = {"a", "b", "condition", "condition_b"} - set(item["compare"])
            if missing:
                raise ExperimentError(f"{path}: figure {i} compare lacks {sorted(missing)}")
        elif metric not in RUN_METRICS:
            raise ExperimentError(
                f"{path}: figure {i} has metric {metric!r}; choose one of "
                f"{', '.join(RUN_METRICS)} (or give 'compare' for a paired figure)"
            )
        elif not item.get("run") or not item.get("condition"):
            raise ExperimentError(f"{path}: figure {i} needs 'run' and 'condition'")
        figures.append(
            Figure(
                name=item.get("name") or f"figure {i}",
                metric=metric,
                expected=item.get("expected"),
                tolerance=float(item.get("tolerance", default)),
                run=item.get("run"),
                condition=item.get("condition"),
                compare=item.get("compare"),
                index=item.get("index"),
            )
        )
    if not figures:
        raise ExperimentError(f"{path} lists no figures")
    return data, figures


def _summary(
    run_dir: Path, cache: dict[Path, dict[str, ConditionSummary]]
) -> dict[str, ConditionSummary]:
    if run_dir not in cache:
        if not (run_dir / "predictions.jsonl").is_file():
            raise ExperimentError(
                f"{run_dir}/predictions.jsonl does not exist: run the experiment's commands "
                "first (add --rerun), or point --runs at the folder they wrote"
            )
        cache[run_dir] = summarize(load_records(run_dir))
    return cache[run_dir]


def score(figures: Sequence[Figure], runs: str | Path, *, bootstrap: int = 10_000) -> list[Any]:
    """Compute every figure from the run folders under ``runs`` (None where undefined)."""
    runs = Path(runs)
    summaries: dict[Path, dict[str, ConditionSummary]] = {}
    pairs: dict[tuple, Any] = {}
    values = []
    for figure in figures:
        if figure.compare:
            c = figure.compare
            key = (c["a"], c["b"], c["condition"], c["condition_b"])
            if key not in pairs:
                config = CompareConfig(
                    run_a=str(runs / c["a"]),
                    run_b=str(runs / c["b"]),
                    condition=c["condition"],
                    condition_b=c["condition_b"],
                    bootstrap=bootstrap,
                )
                try:
                    pairs[key] = compare_runs(config).pairs[0]
                except CompareError as err:
                    raise ExperimentError(str(err)) from None
            value = getattr(pairs[key], figure.metric)
            if figure.index is not None and value is not None:
                value = value[figure.index]
        else:
            summary = _summary(runs / figure.run, summaries)
            if figure.condition not in summary:
                raise ExperimentError(
                    f"{runs / figure.run} has no condition {figure.condition!r} (it has: "
                    f"{', '.join(summary) or 'none'})"
                )
            value = RUN_METRICS[figure.metric](summary[figure.condition])
        values.append(value)
    return values


def _within(value: Any, expected: Any, tolerance: float) -> bool:
    if value is None or expected is None:
        return value is None and expected is None
    return math.isclose(float(value), float(expected), rel_tol=0.0, abs_tol=tolerance + 1e-12)


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def command_outputs(data: dict[str, Any]) -> dict[str, str]:
    """Each command's name -> the folder under ``{runs}`` its ``--out`` names ("" if none)."""
    outputs = {}
    for name, argv in data.get("commands", {}).items():
        out = ""
        for flag, value in zip(argv, argv[1:], strict=False):
            if flag == "--out" and str(value).startswith("{runs}/"):
                out = str(value).removeprefix("{runs}/").strip("/")
        outputs[name] = out
    return outputs


def _under(run: str, folder: str) -> bool:
    return bool(folder) and (run == folder or run.startswith(folder + "/"))


def select(
    data: dict[str, Any], figures: Sequence[Figure], only: str | None
) -> tuple[list[str], list[Figure]]:
    """The commands ``--only`` names and the figures made from their runs alone.

    Without ``only``: every command and figure. A paired figure is kept when both its runs come
    from chosen commands. Raises :class:`ExperimentError` for a name the experiment lacks.
    """
    outputs = command_outputs(data)
    if not only:
        return list(outputs), list(figures)
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in outputs]
    if unknown or not names:
        raise ExperimentError(
            f"--only {only!r}: no command {', '.join(map(repr, unknown)) or 'named'} in this "
            f"experiment; choose from {', '.join(outputs) or 'none'}"
        )
    folders = [outputs[n] for n in names]

    def chosen(run: str) -> bool:
        return any(_under(run, folder) for folder in folders)

    kept = [
        f
        for f in figures
        if (chosen(f.compare["a"]) and chosen(f.compare["b"]) if f.compare else chosen(f.run))
    ]
    return names, kept


def run_commands(
    data: dict[str, Any], runs: Path, cache: str | None, names: Sequence[str] | None = None
) -> None:
    """Run the experiment's commands (``names``, else all) in order, ``{runs}`` replaced.

    Stops at the first failure.
    """
    for name, argv in data.get("commands", {}).items():
        if names is not None and name not in names:
            continue
        args = [str(a).replace("{runs}", str(runs)) for a in argv]
        if args and args[0] == "python":
            args[0] = sys.executable
        if cache:
            args += ["--cache", cache]
        print(f"== {name}: {shlex.join(args)}", flush=True)
        started = time.monotonic()
        done = subprocess.run(args, env=os.environ.copy())
        minutes = (time.monotonic() - started) / 60
        print(f"== {name}: exit {done.returncode} after {minutes:.1f} min", flush=True)
        if done.returncode not in (0,):
            raise SystemExit(
                f"{name} exited {done.returncode}; its run folder keeps every finished question "
                "(rerun the same command to resume)"
            )


def _write_expected(args, data, every, figures, values) -> int:
    """Store the computed figures as the expected ones (with --only, just those), saying
    when and with which command line."""
    path = Path(args.experiment) / "experiment.json"
    written = {id(f): v for f, v in zip(figures, values, strict=True)}
    for item, figure in zip(data["figures"], every, strict=True):
        if id(figure) in written:
            value = written[id(figure)]
            item["expected"] = round(value, 4) if isinstance(value, float) else value
    stamp = {
        "date": time.strftime("%Y-%m-%d"),
        "runs": str(args.runs),
        "command": shlex.join(["python", "-m", "benchmarks.reproduce", *sys.argv[1:]]),
    }
    if len(figures) < len(every):
        data.setdefault("expected_written_parts", []).append({**stamp, "figures": len(figures)})
    else:
        data["expected_written"] = stamp
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {len(figures)} expected figure(s) to {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.reproduce",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  python -m benchmarks.reproduce experiments/recall-demo\n"
        "  python -m benchmarks.reproduce experiments/recall-demo --rerun --runs /tmp/repro "
        "--cache off\n"
        "  python -m benchmarks.reproduce experiments/gold-demos --rerun --only references "
        "--runs /tmp/repro",
    )
    parser.add_argument("experiment", help="experiment folder holding experiment.json")
    parser.add_argument(
        "--runs", default="runs", help="folder the commands write their runs under (default runs)"
    )
    parser.add_argument(
        "--rerun", action="store_true", help="run the experiment's commands first (slow)"
    )
    parser.add_argument(
        "--cache",
        choices=["on", "off", "refresh"],
        help="with --rerun: pass --cache to every command (default: the commands' own)",
    )
    parser.add_argument(
        "--only",
        metavar="NAME,...",
        help="only these commands (with --rerun) and the figures from their runs, e.g. "
        "--only references,control; the table counts the figures left out",
    )
    parser.add_argument(
        "--tolerance",
        choices=["rescore", "rerun"],
        help="rescore: the records must give the stored figures to 4 decimals (default without "
        "--rerun); rerun: each figure's own re-run tolerance (default with --rerun; use it to "
        "check folders an earlier --rerun wrote)",
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="store the computed figures as the expected ones (experiment authors only; with "
        "--only, just those)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    runs = Path(args.runs)
    try:
        data, every = load_experiment(args.experiment)
        names, figures = select(data, every, args.only)
        if not figures:
            raise ExperimentError(
                f"--only {args.only}: no figure comes from these commands' runs alone"
            )
        if args.rerun:
            run_commands(data, runs, args.cache, names)
        values = score(figures, runs, bootstrap=int(data.get("bootstrap", 10_000)))
    except ExperimentError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    rerun_tolerance = (args.tolerance or ("rerun" if args.rerun else "rescore")) == "rerun"
    tolerance_of = (lambda f: f.tolerance) if rerun_tolerance else (lambda f: RESCORE_TOLERANCE)
    mode = "re-run" if args.rerun else "re-scored"
    if args.tolerance == "rerun" and not args.rerun:
        mode = "re-scored with the re-run tolerances"
    print(f"{data.get('title', args.experiment)} ({mode} from {runs})")
    partial = len(figures) < len(every)
    if partial:
        print(
            f"part of the experiment: {len(figures)} of {len(every)} figures, from the runs of "
            f"{', '.join(names)}; {len(every) - len(figures)} not checked"
        )
    print("| figure | source | expected | got | tolerance | |")
    print("|---|---|---|---|---|---|")
    bad = 0
    for figure, value in zip(figures, values, strict=True):
        ok = args.write or _within(value, figure.expected, tolerance_of(figure))
        bad += not ok
        print(
            f"| {figure.name} | {figure.describe()} | {_fmt(figure.expected)} | {_fmt(value)} "
            f"| ±{tolerance_of(figure):g} | {'ok' if ok else 'OUTSIDE'} |"
        )
    if args.write:
        return _write_expected(args, data, every, figures, values)
    left_out = f" ({len(every) - len(figures)} of {len(every)} not checked)" if partial else ""
    if bad:
        print(f"{bad} of {len(figures)} figure(s) outside tolerance{left_out}", file=sys.stderr)
        return 1
    print(f"all {len(figures)} figures within tolerance{left_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
