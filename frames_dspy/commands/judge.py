"""``python -m frames_dspy.judge validate``: how far the autorater agrees with hand labels.

    python -m frames_dspy.judge validate --split dev
    python -m frames_dspy.judge validate --labels FILE --judge-model openai/gpt-4o \
        --judge-protocol rules+extract,lm --json

The autorater is built exactly as ``python -m frames_dspy.evaluate`` builds it
(:func:`frames_dspy.run.session.make_judge`), so the agreement printed is that of a run's
autorater. Only the judge's options are offered: validation runs no program model. Several
protocols (comma-separated) are measured on the same items and shown side by side.

The labelled file (``--labels``, else ``FRAMES_JUDGE_LABELS``, else the project's own
``judge_dev`` labels installed with the package; the report names the one used) is JSONL with
``question``, ``gold``, ``response``, ``label`` (a JSON boolean) and optionally ``kind``, ``id``
and ``case``. A file that cannot be used (missing, empty, a line that is not JSON or lacks a
field, a label that is not a boolean) is reported in one line naming the file and line, with
exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from frames_dspy.base import paths
from frames_dspy.base.settings import options
from frames_dspy.commands.common import (
    CommandParser,
    add_output_arguments,
    add_settings,
    option_group,
    start_command,
)
from frames_dspy.judge.labels import (
    SPLIT_SEED,
    SPLITS,
    LabelError,
    labels_file,
    load_labels,
    select_split,
)
from frames_dspy.judge.protocols import DEFAULT_PROTOCOL, JUDGE_PROTOCOLS
from frames_dspy.judge.validate import ItemResult, render, render_side_by_side, validate
from frames_dspy.lm import LMSetupError, parse_spec
from frames_dspy.lm.cache import use_cache
from frames_dspy.run.session import make_judge
from frames_dspy.run.settings import ModelDataSettings

#: The program name its help and errors show; ``frames-dspy judge`` passes its own.
PROG = "python -m frames_dspy.judge"


def build_parser(prog: str = PROG) -> CommandParser:
    parser = CommandParser(
        prog=prog,
        description="Check the autorater against hand-labelled items.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check = commands.add_parser(
        "validate",
        help="agreement of the autorater with a labelled JSONL file",
        description="Run the autorater, built as evaluate builds it, over labelled items and "
        "print accuracy, Cohen's kappa, the confusion matrix, agreement per kind and per "
        "method (each rule and the LM judge) and the items it gets wrong.",
    )
    check.add_argument(
        "--labels",
        default=None,
        metavar="FILE.jsonl",
        help=f"labelled items: question, gold, response, label[, kind] (default: "
        f"${paths.JUDGE_LABELS_ENV}, else the project's 160 judge_dev items)",
    )
    check.add_argument(
        "--split",
        choices=SPLITS,
        default="all",
        help=f"which items: the dev half (rules may be developed on it), the held-out half (only "
        f"ever scored) or all; halves are cut by question with seed {SPLIT_SEED} "
        "(default %(default)s)",
    )
    # The judge's model, server, timeout, cache and threads, declared once with evaluate's.
    add_settings(check, ModelDataSettings, "validate", section="judge")
    option_group(check, "judge").add_argument(
        "--judge-protocol",
        type=_protocols,
        default=[DEFAULT_PROTOCOL],
        metavar="P[,P...]",
        help=f"how the autorater uses its LM, one or several to compare: "
        f"{', '.join(JUDGE_PROTOCOLS)} (default {DEFAULT_PROTOCOL}; 'lm' is the paper's "
        "LM-only judge)",
    )
    check.add_argument(
        "--show",
        type=int,
        default=None,
        metavar="N",
        help="list at most N disagreeing items (default: all)",
    )
    add_output_arguments(check, "validate")
    return parser


def _protocols(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in JUDGE_PROTOCOLS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown protocol {', '.join(unknown) or repr(text)}; choose from "
            f"{', '.join(JUDGE_PROTOCOLS)}, comma-separated"
        )
    return list(dict.fromkeys(names))


def _settings(args) -> ModelDataSettings:
    # The judge is the only model: with no --judge-model it is the default model, judged
    # with itself, and make_judge gives it the judge's own limits (greedy, a short output).
    return ModelDataSettings(
        **{name: getattr(args, name) for name, _, _ in options(ModelDataSettings, "validate")}
    )


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    start_command()
    labels = labels_file(args.labels)
    try:
        items = select_split(load_labels(labels), args.split)
    except LabelError as err:
        # A file the environment named is not one the user typed: say where it came from.
        named = args.labels is None and paths.judge_labels_file() is not None
        source = f" (named by ${paths.JUDGE_LABELS_ENV})" if named else ""
        parser.exit(2, f"{parser.prog}: error: {err}{source}\n")
    settings = _settings(args)
    use_cache(settings.cache)
    reports = {}
    for protocol in args.judge_protocol:
        try:
            judge_lm, autorater = make_judge(settings, protocol=protocol)
        except (LMSetupError, ValueError) as err:
            parser.exit(2, f"{parser.prog}: error: {err}\n")
        done = 0

        def progress(result: ItemResult, protocol: str = protocol) -> None:
            nonlocal done
            done += 1
            if not args.quiet:
                print(
                    f"\r{protocol}: {done}/{len(items)} judged ({result.verdict.method})   ",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )

        try:
            judge_spec = parse_spec(settings.judge_model or settings.model)
            threads = settings.threads or judge_spec.default_threads
            report = validate(items, autorater, threads=threads, on_result=progress)
        except LMSetupError as err:
            parser.exit(2, f"\n{parser.prog}: error: the judge cannot run: {err}\n")
        if not args.quiet:
            print(file=sys.stderr)
        report.labels = str(Path(labels)) + ("" if args.split == "all" else f" ({args.split} half)")
        report.judge = getattr(judge_lm, "model", str(judge_lm))
        report.protocol = protocol
        reports[protocol] = report
    if args.json:
        out = {p: r.to_dict() for p, r in reports.items()}
        print(json.dumps(next(iter(out.values())) if len(out) == 1 else out, indent=2))
    elif len(reports) == 1:
        print(render(next(iter(reports.values())), show=args.show))
    else:
        print(render_side_by_side(reports))
        for report in reports.values():
            print("\n" + render(report, show=args.show))
    return 0
