"""The command lines, the top floor: one module per command, each a thin shell over the library
below it (its argparse parser, what it prints, its exit statuses); :func:`run`, which runs one
as the process; and :func:`main`, the ``frames-dspy`` command (``frames-dspy COMMAND ...``).

A command also runs by its documented name, ``python -m frames_dspy.evaluate`` say: that
module is a shim whose whole body is ``run("evaluate")`` (``tests/project/test_layout.py``
checks the shape), so both names run the same code; only the program name in its help and
errors differs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

__all__ = ["COMMANDS", "Command", "run", "build_parser", "main"]


@dataclass(frozen=True)
class Command:
    """One command line.

    Attributes:
        module: Its module in this package (its ``main(argv) -> int`` runs it).
        summary: What it does, in one line.
        exit_at_once: After a stop that abandoned work in worker threads (exit status 3 or 4:
            a failed write; 130: Ctrl-C), end without waiting for them: every record they
            could still add is on disk or cannot be written.
    """

    module: str
    summary: str
    exit_at_once: bool = False


#: Every command line, by the name it runs under.
COMMANDS: dict[str, Command] = {
    "evaluate": Command(
        "evaluate",
        "run the paper's setups on FRAMES questions into a run folder",
        exit_at_once=True,
    ),
    "compile": Command(
        "compile", "tune the multi-step program or agent for quality and cost; test once"
    ),
    "compare": Command("compare", "pair two run folders question by question: a gain, or noise?"),
    "report": Command("report", "write the self-contained report.html of a run folder (or two)"),
    "judge": Command("judge", "check the autorater against hand-labelled items (validate)"),
    "data": Command("data", "summarise a FRAMES dataset and, with a corpus, its coverage"),
    "wikipedia": Command("wikipedia", "fetch the article corpus from live Wikipedia (fetch)"),
    "settings-doc": Command("settings_doc", "print docs/settings.md from the declared settings"),
    "rules-doc": Command("rules_doc", "print docs/autorater-rules.md from the autorater's steps"),
}


def run(name: str, argv: Sequence[str] | None = None, *, prog: str | None = None) -> NoReturn:
    """Run the command ``name`` as this process: its ``main`` (on ``argv``, default the
    process's arguments; ``prog`` the program name it shows, default its documented one), then
    end with the status it returned."""
    command = COMMANDS[name]
    module = importlib.import_module(f"{__name__}.{command.module}")
    status = module.main(argv) if prog is None else module.main(argv, prog=prog)
    if command.exit_at_once and status in (3, 4, 130) and threading.active_count() > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


def build_parser() -> argparse.ArgumentParser:
    """``frames-dspy``'s own parser: the command's name; the command parses the rest."""
    from frames_dspy.commands.common import CommandParser

    width = max(len(name) for name in COMMANDS) + 2
    listing = "\n".join(f"  {name:<{width}}{c.summary}" for name, c in COMMANDS.items())
    parser = CommandParser(
        prog="frames-dspy",
        usage="%(prog)s COMMAND [ARGS ...]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The FRAMES reproduction's command lines. Each one also runs as python -m\n"
        "by the name the docs use (frames-dspy evaluate is python -m frames_dspy.evaluate,\n"
        "frames-dspy compile is python -m optimize.compile); frames-dspy COMMAND --help\n"
        "lists its options.",
        epilog=f"commands:\n{listing}",
    )
    parser.add_argument(
        "command", metavar="COMMAND", choices=list(COMMANDS), help=argparse.SUPPRESS
    )
    return parser


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """``frames-dspy COMMAND [ARGS ...]``: run ``COMMAND`` on ``ARGS`` (exit status 2 for a
    command that does not exist)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    name = build_parser().parse_args(argv[:1]).command
    run(name, argv[1:], prog=f"frames-dspy {name}")
