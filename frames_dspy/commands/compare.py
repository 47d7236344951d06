"""``python -m frames_dspy.compare``: is run B really better than run A, or is it noise?

Pairs two run folders question by question (see :mod:`frames_dspy.results.comparison`) and prints,
per condition pair, accuracy and recall differences with paired bootstrap 95% intervals, an
exact McNemar test and the questions that flipped each way
(:mod:`frames_dspy.results.comparison_text`); ``--json`` prints the same data.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from frames_dspy.commands.common import (
    add_output_arguments,
    add_settings,
    settings_from,
    start_command,
)
from frames_dspy.results.comparison import (
    CompareConfig,
    CompareError,
    compare_runs,
    comparison_dict,
)
from frames_dspy.results.comparison_text import format_text

#: The program name its help and errors show; ``frames-dspy compare`` passes its own.
PROG = "python -m frames_dspy.compare"

__all__ = ["build_parser", "main"]


_DESCRIPTION = """\
Compare two run folders of `python -m frames_dspy.evaluate` question by question, to tell a
real gain from noise.

Pairing: each question answered under condition A in RUN_A is matched with the same question
(same id) under condition B in RUN_B; only questions both runs answered count, and those in
one run only are listed. Without --condition every condition the two runs share is compared,
one block each. Differences are always B - A.

What the numbers say:
  accuracy interval  a paired bootstrap 95% interval for B - A: the questions are redrawn
                     with replacement --bootstrap times (seeded by --seed) and the middle
                     95% of the resampled differences is kept. If it excludes 0, the gain (or
                     loss) is unlikely to be luck of which questions were asked; if it
                     includes 0, the runs are not shown to differ (not shown to be equal).
  McNemar p          only questions that flipped matter: A wrong -> B right versus A right ->
                     B wrong. p is the exact chance of a split at least this lopsided if
                     either direction were equally likely; small p (< 0.05) means the flips
                     lean one way. With fewer than ~30 questions trust it over the interval.
  recall             share of gold articles in context after the last round and after round
                     1, paired the same way; questions without a gold article in either run
                     are left out (and counted), a null on one side counts as 0.
  errors             a program error or a judge error (correct = null) counts as not correct;
                     both are shown per side.
  retrieval only     a run made with --retrieval-only answered nothing: a pair with such a
                     run shows no accuracy, flips or McNemar p, and its verdict is on recall.
In --json, a_to_b holds the questions A got wrong and B got right, b_to_a the reverse.

The runs must share the dataset (dataset_sha256) and, when both record one, the corpus
(corpus_sha256). Exit status: 0 compared, 2 not comparable (the message says why)."""

_EPILOG = """\
examples:
  python -m frames_dspy.compare runs/base runs/new
  python -m frames_dspy.compare runs/base runs/opt --condition multistep-vanilla \\
      --condition-b program
  python -m frames_dspy.compare runs/r1 runs/r1 --condition bm25-4 --condition-b oracle
  python -m frames_dspy.compare runs/base runs/new --json | jq '.pairs[0].accuracy_ci95'"""


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_DESCRIPTION,
        epilog=_EPILOG,
    )
    parser.add_argument("run_a", metavar="RUN_A", help="the baseline run folder (A)")
    parser.add_argument("run_b", metavar="RUN_B", help="the run folder to compare with it (B)")
    add_settings(parser, CompareConfig, "compare")
    add_output_arguments(parser, "compare")
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    args = build_parser(prog).parse_args(argv)
    start_command()
    config = settings_from(args, CompareConfig, "compare", run_a=args.run_a, run_b=args.run_b)
    try:
        comparison = compare_runs(config)
    except CompareError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        for warning in comparison.warnings:
            # JSON goes to scripts; the person running one still sees the warning.
            print(f"WARNING: {warning}", file=sys.stderr)
        print(json.dumps(comparison_dict(comparison), indent=2, ensure_ascii=False))
    else:
        print(format_text(comparison), end="")
    return 0
