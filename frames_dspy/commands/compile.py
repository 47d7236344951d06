"""``python -m optimize.compile``: find good MultiHop settings and prompts, at a known cost.

The command line over :mod:`optimize.compilation`, which runs the study, picks, compiles and
tests the program.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence

import optuna

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
from frames_dspy.results.run_folder import WRITE_ERRNOS, FolderWriteError, write_error
from frames_dspy.run.runner import RunAborted
from optimize.compilation import outcome_lines, run_compile
from optimize.config import COMPILE_EXAMPLES, CompileConfig, NoCompleteTrials
from optimize.pareto import parse_pick

#: The program name its help and errors show; ``frames-dspy compile`` passes its own.
PROG = "python -m optimize.compile"

__all__ = ["build_parser", "main"]


def _pick(text: str) -> str:
    try:
        return str(parse_pick(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    defaults = CompileConfig()
    parser = CommandParser(
        prog=prog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Tune the FRAMES multi-step retrieval program (MultiHop) for quality AND cost.\n\n"
            "1. An Optuna study tries configurations: rounds 1-5, queries per round k 1-5,\n"
            "   articles per query n_docs 1-10, query prompt vanilla or planning. Each trial is\n"
            "   scored on the dev split: the --objective (maximised: autorater accuracy,\n"
            "   gold-article recall, or accuracy with ties broken by recall) and metered\n"
            "   tokens per question (minimised). The study keeps the Pareto front.\n"
            "2. One configuration is picked from the front (--pick) and, with --optimizer, its\n"
            "   prompts are optimised on the train split by a DSPy optimizer against the same\n"
            "   objective (kept only if its dev score does not drop).\n"
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
        epilog=COMPILE_EXAMPLES,
    )
    # Every setting CompileConfig declares (frames_dspy.base.settings), in its sections.
    add_settings(parser, CompileConfig, "compile", defaults=defaults, types={"pick": _pick})
    add_output_arguments(parser, "compile", section="storage, workers and limits")
    add_verbose_argument(option_group(parser, "storage, workers and limits"))
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    start_command(verbose=args.verbose)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    config = settings_from(args, CompileConfig, "compile")
    try:
        config.validate()
    except ValueError as err:
        parser.error(str(err))
    show = None if args.quiet else functools.partial(print, flush=True)
    try:
        result = run_compile(config, progress=show)
    except NoCompleteTrials as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except (
        DatasetError,
        CorpusError,
        DownloadError,
        ValueError,
        LMSetupError,
        RunAborted,
        FolderInUse,
    ) as err:
        return report_error(err, verbose=args.verbose)
    except FolderWriteError as err:  # the test run's folder: 4 if only its reports failed
        return report_error(err, verbose=args.verbose, status=4 if err.records_complete else 3)
    except OSError as err:
        if err.errno not in WRITE_ERRNOS:
            raise
        failed = write_error(
            err, path=config.out, kept="the study keeps every finished trial", rerun="rerun"
        )
        return report_error(failed, verbose=args.verbose, status=3)
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
    for line in outcome_lines(result, config.objective):
        print(line)
    print(f"output: {result.out}")
    if result.command:
        print("reproduce the test score with:")
        print(f"  {result.command}")
    return 0
