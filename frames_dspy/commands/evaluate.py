"""``python -m frames_dspy.evaluate``: the paper's setups x FRAMES questions -> a run folder.

A run folder holds ``config.json`` (every knob, seeds, data and corpus hashes, package
versions, model specs, each condition's program spec), ``predictions.jsonl`` (one line per
question x condition, appended as each finishes, so a killed run resumes where it stopped),
``summary.json``, ``table.md`` (the paper's Table 3 shape), per-reasoning-type and
per-article-count tables, and plots. The work is done by :mod:`frames_dspy.run.evaluation`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from frames_dspy.base.locks import FolderInUse
from frames_dspy.commands.common import (
    CommandParser,
    add_output_arguments,
    add_settings,
    add_verbose_argument,
    option_group,
    report_error,
    settings_from,
    start_command,
)
from frames_dspy.data.corpus import CorpusError
from frames_dspy.data.download import DownloadError
from frames_dspy.data.questions import DatasetError
from frames_dspy.lm import LMSetupError
from frames_dspy.programs import CONDITIONS, MORE_CONDITIONS
from frames_dspy.results import tables
from frames_dspy.results.run_folder import WRITE_ERRNOS, FolderWriteError, write_error
from frames_dspy.run.evaluation import EvalConfig, run_evaluation
from frames_dspy.run.runner import RunAborted

#: The program name its help and errors show; ``frames-dspy evaluate`` passes its own.
PROG = "python -m frames_dspy.evaluate"

__all__ = ["EvalConfig", "run_evaluation", "build_parser", "main"]


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    # --conditions defaults to None here: alone, --program runs only the program.
    defaults = EvalConfig(conditions=None)
    conditions = "\n".join(
        f"  {name:<20} {c.summary}" for name, c in (CONDITIONS | MORE_CONDITIONS).items()
    )
    parser = CommandParser(
        prog=prog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Run the FRAMES paper's setups on FRAMES questions and score them with the\n"
            "autorater. Conditions (the first six by default; agent when named):\n"
            f"{conditions}\n\n"
            "Before any LM call it prints an estimate of LM calls, tokens and (for priced API\n"
            "models) dollars per condition; one bar then shows progress over the whole run\n"
            "with an ETA and what was spent. Everything lands in a run folder (--out): rerun\n"
            "with the same --out to resume a stopped or killed run. The table counts every\n"
            "question: failed programs and judge errors count as wrong and have columns of\n"
            "their own, as do LM calls answered from the cache and retried faults."
        ),
        epilog=(
            "examples:\n"
            "  python -m frames_dspy.evaluate --limit 10\n"
            "  python -m frames_dspy.evaluate --conditions naive,oracle --ids 0-4\n"
            "  python -m frames_dspy.evaluate --model openai/gpt-4o-mini --judge-model "
            "openai/gpt-4o --max-cost 5\n"
            "  python -m frames_dspy.evaluate --model openai/qwen --api-base "
            "http://localhost:8000/v1 --cache off\n"
            "  python -m frames_dspy.evaluate --program runs/opt/program.json --split test\n\n"
            "Without FRAMES_DATA_DIR the questions come from the Hugging Face hub (unless\n"
            "--dataset names a file) and, unless --corpus is given, the articles of all the\n"
            "dataset's links are fetched from Wikipedia once, into the user cache\n"
            "(~/.cache/frames-dspy/corpus; FRAMES_DSPY_CACHE moves it).\n\n"
            "One process writes a run folder at a time: a second one on the same --out is\n"
            "refused at once (it names the process that holds the folder).\n\n"
            "exit status: 0 done (or stopped cleanly by --max-lm-calls/--max-cost), 1 a\n"
            "condition failed on more than --max-failure-rate of its questions, 2 bad input,\n"
            "a run folder in use, a failed download or an LM that cannot run, 3 a file of the\n"
            "run folder could not be written (a full disk...) before every question was\n"
            "recorded, 4 every question is recorded but the reports could not be written,\n"
            "130 interrupted (finished questions are saved). After 3, 4 or 130 the same\n"
            "command resumes."
        ),
    )
    # Every setting EvalConfig declares (frames_dspy.base.settings), in its sections; the
    # settings it shares with compile come first, as frames_dspy.run.settings declares them.
    parser.add_argument_group("what to run")
    add_settings(parser, EvalConfig, "evaluate", defaults=defaults)
    add_output_arguments(parser, "evaluate", section="run")
    add_verbose_argument(option_group(parser, "run"))
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    start_command(verbose=args.verbose)
    conditions = list(args.conditions or ()) or (["program"] if args.program else list(CONDITIONS))
    if args.program and args.conditions:
        conditions = [*args.conditions, "program"]
    # Named here, so the interrupt message and the last line can say where the run is.
    out = args.out or str(Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S"))
    config = settings_from(args, EvalConfig, "evaluate", conditions=conditions, out=out)
    try:
        summary = run_evaluation(config, progress=not args.quiet, say=_stderr)
    except (*_BAD_INPUT, FolderInUse) as err:
        return report_error(err, verbose=args.verbose)
    except FolderWriteError as err:
        # 4: every question is recorded, only the reports are missing; 3: some are not.
        return report_error(err, verbose=args.verbose, status=4 if err.records_complete else 3)
    except OSError as err:
        if err.errno not in WRITE_ERRNOS:
            raise
        # A write outside the run folder (an index or corpus in the user cache, say).
        failed = write_error(
            err, path="a file", kept="the questions that finished are saved", rerun="rerun"
        )
        return report_error(failed, verbose=args.verbose, status=3)
    except KeyboardInterrupt:
        if not (Path(config.out) / "config.json").exists():
            # Stopped while loading (the corpus fetch, say): no run folder yet.
            print("\ninterrupted before any question ran", file=sys.stderr)
            return 130
        print(
            f"\ninterrupted: every finished question is saved in {config.out}; rerun with "
            f"--out {config.out} to resume",
            file=sys.stderr,
        )
        return 130
    print()
    measured = not config.retrieval_only
    print(
        tables.table3_markdown(
            summary.rows, model=config.model, notes=summary.notes, accuracy_measured=measured
        )
    )
    search = tables.search_markdown(summary.rows, accuracy_measured=measured)
    if search:
        print(search)
    print(f"run folder: {config.out}")
    if summary.stopped:
        print(f"stopped early: {summary.stopped}; rerun with --out {config.out} to continue")
    failing = summary.failing(config.max_failure_rate)
    for name, row in failing.items():
        kinds = ", ".join(f"{k} {v}" for k, v in row.program_errors_by_kind.items())
        print(
            f"FAILED: {name}: the program failed on {row.program_errors} of {row.n} "
            f"questions ({row.program_error_rate:.0%} > --max-failure-rate "
            f"{config.max_failure_rate:g}): {kinds}. Their errors are in "
            f"{config.out}/predictions.jsonl; they count as wrong in the table.",
            file=sys.stderr,
        )
    return 1 if failing else 0


_BAD_INPUT = (DatasetError, CorpusError, DownloadError, ValueError, LMSetupError, RunAborted)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
