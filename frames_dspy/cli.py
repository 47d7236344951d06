"""What the command lines share: argument types and the model and data option groups.

``python -m frames_dspy.evaluate`` and ``python -m optimize.compile`` take the same model and
data options (their values land in :class:`frames_dspy.session.ModelDataSettings`); both add
them from here so a flag means one thing everywhere.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from frames_dspy.lm.cache import CACHE_MODES
from frames_dspy.tracking import DEFAULT_STORE

__all__ = [
    "CommandParser",
    "non_negative_int",
    "fraction",
    "positive_int",
    "positive_float",
    "choice_list",
    "int_list",
    "int_range",
    "limit_or_all",
    "add_model_arguments",
    "add_tracking_arguments",
    "add_data_arguments",
    "start_command",
    "add_verbose_argument",
    "report_error",
]


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line naming the bad value, with exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _number(name: str, kind: type, ok: Callable[[float], bool], rule: str):
    """An argparse type reading ``kind`` (int or float) that must satisfy ``ok``; errors name
    the flag, the value and the ``rule`` it breaks."""
    what = "a whole number" if kind is int else "a number"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} {text!r} is not {what}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{name} {value:g} must be {rule}")
        return value

    return parse


def positive_int(name: str):
    """An argparse type for a whole number >= 1 whose error names the flag."""
    return _number(name, int, lambda v: v >= 1, "at least 1")


def non_negative_int(name: str):
    """An argparse type for a whole number >= 0 whose error names the flag."""
    return _number(name, int, lambda v: v >= 0, "0 or more")


def positive_float(name: str):
    """An argparse type for a number > 0 whose error names the flag."""
    return _number(name, float, lambda v: v > 0, "more than 0")


def fraction(name: str):
    """An argparse type for a number in [0, 1] whose error names the flag."""
    return _number(name, float, lambda v: 0.0 <= v <= 1.0, "between 0 and 1")


def limit_or_all(name: str):
    """An argparse type for a positive count or ``all`` (also ``none``/``0``: None)."""

    def parse(text: str) -> int | None:
        if text.strip().lower() in ("all", "none", "0"):
            return None
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} {text!r} is not a number; give N or 'all'"
            ) from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} {value} must be at least 1 (or 'all')")
        return value

    return parse


def int_list(name: str):
    """An argparse type for a comma-separated list of whole numbers >= 1."""

    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(part) for part in text.split(",") if part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} {text!r} is not a comma-separated list of numbers (e.g. 200,1000)"
            ) from None
        if not values or min(values) < 1:
            raise argparse.ArgumentTypeError(f"{name} {text!r}: give numbers of at least 1")
        return values

    return parse


def int_range(text: str) -> tuple[int, int]:
    """An argparse type for an inclusive range ``LOW-HIGH`` (or one number), both >= 1."""
    try:
        low, _, high = text.partition("-")
        bounds = (int(low), int(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a range like 1-5 or a number") from None
    if not 1 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"range {text!r} must satisfy 1 <= low <= high")
    return bounds


def choice_list(choices: Sequence[str], what: str):
    """An argparse type for a comma-separated list drawn from ``choices`` (a tuple, in order)."""

    def parse(text: str) -> tuple[str, ...]:
        names = tuple(name.strip() for name in text.split(",") if name.strip())
        unknown = [name for name in names if name not in choices]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {unknown or [text]}; choose from {', '.join(choices)}"
            )
        return names

    return parse


def add_model_arguments(parser: argparse.ArgumentParser, defaults: Any) -> None:
    """``--model``, ``--api-base``, the judge's options, ``--temperature``, ``--max-tokens``,
    and the MLflow options of :func:`add_tracking_arguments`."""
    models = parser.add_argument_group("models")
    models.add_argument(
        "--model",
        default=defaults.model,
        help="program LM: 'local' (embedded, offline), 'local-1.5b', 'local:/path.gguf', or a "
        "LiteLLM model string such as openai/gpt-4o-mini (default %(default)s)",
    )
    models.add_argument(
        "--api-base",
        default=None,
        help="OpenAI-compatible server for --model (vLLM, Ollama, llama.cpp)",
    )
    models.add_argument(
        "--judge-model",
        default=None,
        help="autorater LM for the items its rules leave (default: the same as --model, which "
        "inflates scores; a run says so)",
    )
    models.add_argument("--judge-api-base", default=None, help="server for --judge-model")
    models.add_argument("--temperature", type=float, default=defaults.temperature)
    models.add_argument(
        "--lm-timeout",
        type=positive_float("--lm-timeout"),
        default=None,
        metavar="SECONDS",
        help="seconds one LM call may take; a slower call is retried (API models) and then "
        "recorded as that question's error (default: the provider's; none for the embedded "
        "model)",
    )
    models.add_argument(
        "--cache",
        choices=CACHE_MODES,
        default=defaults.cache,
        help="DSPy's response cache for program and judge calls: on (reuse answers; they are "
        "counted as cached in the table), off (no reads, no writes), refresh (no reads, "
        "overwrite). Keyed by model file and API base (default %(default)s)",
    )
    models.add_argument(
        "--max-tokens",
        type=positive_int("--max-tokens"),
        default=defaults.max_tokens,
        help="output tokens per program LM call (default %(default)s)",
    )
    # Every command that runs models can log them to MLflow.
    add_tracking_arguments(parser, defaults)


def add_tracking_arguments(parser: argparse.ArgumentParser, defaults: Any) -> None:
    """``--mlflow [URI]``, ``--mlflow-experiment``, ``--mlflow-traces`` (MLflow is optional)."""
    tracking = parser.add_argument_group("tracking (optional: pip install -e '.[mlflow]')")
    tracking.add_argument(
        "--mlflow",
        nargs="?",
        const=DEFAULT_STORE,
        default=None,
        metavar="URI",
        help="log the run to MLflow: a tracking URI (sqlite:///..., http://...) or a folder "
        f"for a local SQLite store (default when given alone: {DEFAULT_STORE}/)",
    )
    tracking.add_argument(
        "--mlflow-experiment",
        default=defaults.mlflow_experiment,
        help="MLflow experiment name (default %(default)s)",
    )
    tracking.add_argument(
        "--mlflow-traces",
        action="store_true",
        help="also record DSPy's traces of every LM call (mlflow.dspy.autolog; implies --mlflow)",
    )


def add_data_arguments(parser: argparse.ArgumentParser, defaults: Any) -> None:
    """``--dataset``, ``--revision``, ``--corpus``, ``--aliases``, ``--distractors``,
    ``--wiki-api``, ``--retriever``."""
    data = parser.add_argument_group("data")
    data.add_argument(
        "--dataset",
        default=defaults.dataset,
        help="hub id or local .tsv/.csv (default: %(default)s)",
    )
    data.add_argument("--revision", default=None, help="hub revision to pin")
    data.add_argument(
        "--corpus",
        default=None,
        help="articles JSONL(.gz) (default: frames_wiki/pages.jsonl.gz under $FRAMES_DATA_DIR)",
    )
    data.add_argument(
        "--aliases",
        default=None,
        help="link -> page_id TSV (default: frames_link_to_page.tsv beside the corpus)",
    )
    data.add_argument(
        "--distractors",
        default=None,
        help="distractor summaries JSON added to the index, or 'none' (default: the Vital "
        "Articles summaries under $FRAMES_DATA_DIR, with the default corpus only)",
    )
    data.add_argument(
        "--wiki-api",
        default=None,
        metavar="URL",
        help="MediaWiki API to fetch the corpus from when none is given (default: "
        "Wikipedia's; the fetch goes to the user cache once, FRAMES_DSPY_CACHE moves it)",
    )
    data.add_argument(
        "--retriever",
        choices=["bm25s", "rank-bm25"],
        default=defaults.retriever,
        help="BM25 backend (default %(default)s)",
    )


def start_command(*, verbose: bool = False) -> None:
    """What every command line does first: log to stderr (INFO with ``--verbose``, else
    WARNING), and print a native crash's stack.

    ``faulthandler`` prints where a segfault or abort happened (every thread's Python stack)
    instead of a bare "Segmentation fault"; the embedded model runs in a worker process with
    its own handler, so this covers crashes in this process itself.
    """
    if sys.__stderr__ is not None:  # the process's own stderr, even when sys.stderr is replaced
        faulthandler.enable(file=sys.__stderr__, all_threads=True)
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def add_verbose_argument(parser: argparse.ArgumentParser) -> None:
    """``--verbose``: the library's log on stderr, and a failure's whole traceback."""
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="log what is done (downloads included) and show a failure's full traceback",
    )


def report_error(error: BaseException, *, verbose: bool = False) -> int:
    """Print an expected failure as one line (after its traceback with ``--verbose``) and
    return the exit status for bad input, 2."""
    if verbose:
        traceback.print_exception(error, file=sys.stderr)
    print(f"error: {error}", file=sys.stderr)
    return 2
