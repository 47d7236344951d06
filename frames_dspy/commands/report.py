"""``python -m frames_dspy.report html RUN [RUN_B] [-o FILE]``: a run folder's ``report.html``.

``python -m frames_dspy.evaluate`` writes the page at the end of every run; this command
writes it for an existing folder (one made before the page existed, or after editing the
records), or for two runs with their flipped questions side by side.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from frames_dspy.commands.common import CommandParser, add_settings, settings_from
from frames_dspy.results.comparison import CompareConfig, CompareError
from frames_dspy.results.html_report import write_html_report

#: The program name its help and errors show; ``frames-dspy report`` passes its own.
PROG = "python -m frames_dspy.report"

__all__ = ["build_parser", "main"]


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = CommandParser(
        prog=prog,
        description="Write the self-contained HTML report of a run folder (no server, no "
        "network: open it from disk).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    page = commands.add_parser(
        "html",
        help="write report.html for a run folder, or for two runs compared",
        description="One row per question x condition with filters and link anchors, the "
        "run's header, Table 3 and plots. With RUN_B: B's rows too, and the questions that "
        "flipped each way under the intervals of python -m frames_dspy.compare.",
    )
    page.error = parser.error  # one-line errors, exit status 2, as for the main parser
    page.add_argument("run", metavar="RUN", help="a run folder (from frames_dspy.evaluate)")
    page.add_argument("run_b", metavar="RUN_B", nargs="?", help="a second run to compare")
    page.add_argument("-o", "--out", default=None, help="where to write (default RUN/report.html)")
    add_settings(page, CompareConfig, "report")
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    args = build_parser(prog).parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.run_b is None and (args.condition or args.condition_b):
        print("error: --condition and --condition-b need RUN_B (a second run)", file=sys.stderr)
        return 2
    compare = None
    if args.run_b is not None:
        compare = settings_from(args, CompareConfig, "report", run_a=args.run, run_b=args.run_b)
    try:
        path = write_html_report(args.run, args.run_b, out=args.out, compare=compare)
    except CompareError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: cannot write {args.out or args.run}: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0
