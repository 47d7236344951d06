"""What the command lines share: argument types, argparse options from the declared settings,
the output flags.

Every command line adds its settings' options with :func:`add_settings`, from the declarations
(:func:`frames_dspy.base.settings.setting`): ``python -m frames_dspy.evaluate`` and
``python -m optimize.compile`` take the same model and data options (declared once in
:class:`frames_dspy.run.settings.ModelDataSettings`), ``judge validate`` the judge's, so a flag
means one thing everywhere.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from frames_dspy.base.redaction import RedactingFilter, redact_text
from frames_dspy.base.settings import options, setting
from frames_dspy.programs import condition_names

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
    "add_settings",
    "option_group",
    "id_list",
    "condition_list",
    "add_output_arguments",
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


def int_list(name: str, *, minimum: int = 1):
    """An argparse type for a comma-separated list of whole numbers >= ``minimum``."""

    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(part) for part in text.split(",") if part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} {text!r} is not a comma-separated list of numbers (e.g. 200,1000)"
            ) from None
        if not values or min(values) < minimum:
            raise argparse.ArgumentTypeError(f"{name} {text!r}: give numbers of at least {minimum}")
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


def id_list(name: str):
    """An argparse type for question ids and inclusive ranges, e.g. ``0,5,7-9``."""

    def parse(text: str) -> list[int]:
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
                    f"{name} {text!r}: {part!r} is not an id or a range like 3-7"
                ) from None
        if not ids:
            raise argparse.ArgumentTypeError(f"{name} {text!r} selects no question")
        return ids

    return parse


def condition_list(name: str):
    """An argparse type for comma-separated condition names (bm25-N, phrases-N included)."""

    def parse(text: str) -> tuple[str, ...]:
        try:
            return condition_names(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    return parse


_KIND_TYPES: dict[str, Callable[[str], Callable[[str], Any]]] = {
    "int": lambda flag: int,
    "float": lambda flag: float,
    "positive_int": positive_int,
    "non_negative_int": non_negative_int,
    "positive_float": positive_float,
    "fraction": fraction,
    "int_range": lambda flag: int_range,
    "int_list": int_list,
    "count_list": lambda flag: int_list(flag, minimum=0),
    "limit_or_all": limit_or_all,
    "condition_list": condition_list,
    "id_list": id_list,
}


def option_group(parser: argparse.ArgumentParser, title: str):
    """The parser's section called ``title`` (made if it has none yet)."""
    for group in parser._action_groups:  # noqa: SLF001 - reuse a section by its title
        if group.title == title:
            return group
    return parser.add_argument_group(title)


def add_settings(
    parser: argparse.ArgumentParser,
    config_type: type,
    entry: str,
    *,
    defaults: Any = None,
    groups: Sequence[str] | None = None,
    skip: Sequence[str] = (),
    types: dict[str, Callable[[str], Any]] | None = None,
    section: str | None = None,
) -> None:
    """Add the options ``entry`` takes of ``config_type``'s declared settings
    (:func:`frames_dspy.base.settings.setting`), each under its group's section.

    Args:
        defaults: The values shown and used as defaults (default: the declared ones).
        groups: Only the settings of these groups (default: all).
        skip: Field names not to add.
        types: Parsers of the value kinds only this entry point knows (e.g. ``pick``).
        section: The ``--help`` section for all of them (default: each one's group).
    """
    for name, option, default in options(config_type, entry):
        if name in skip or (groups is not None and option.group not in groups):
            continue
        if defaults is not None:
            default = getattr(defaults, name)
        kwargs: dict[str, Any] = {"dest": name, "help": option.help}
        if option.kind == "flag":
            kwargs.update(action="store_true", default=bool(default))
        elif option.kind == "no_flag":
            kwargs.update(action="store_false", default=bool(default))
        elif option.kind == "on_off":
            kwargs.update(action=argparse.BooleanOptionalAction, default=default)
        else:
            kwargs["default"] = default
            if option.kind == "optional_value":
                kwargs.update(nargs="?", const=option.const)
            elif option.kind == "choice_list":
                what = option.flag[2:].replace("-", " ").removesuffix("s") + "(s)"
                kwargs["type"] = choice_list(option.choices, what)
            elif option.kind in _KIND_TYPES:
                kwargs["type"] = _KIND_TYPES[option.kind](option.flag)
            elif option.kind in (types or {}):
                kwargs["type"] = types[option.kind]
            elif option.kind != "str":
                raise ValueError(f"{option.flag}: no parser for value kind {option.kind!r}")
            if option.choices is not None and option.kind != "choice_list":
                kwargs["choices"] = list(option.choices)
            if option.metavar is not None:
                kwargs["metavar"] = option.metavar
        option_group(parser, section or option.group).add_argument(option.flag, **kwargs)


def settings_from(args: argparse.Namespace, config_type: type, entry: str, **given: Any) -> Any:
    """A ``config_type`` of the values parsed for the settings :func:`add_settings` added for
    ``entry``, and of ``given`` (the fields without a flag, or values the command settles
    itself): the option list and the config are made from the one declaration."""
    values = {name: getattr(args, name) for name, _, _ in options(config_type, entry)}
    return config_type(**{**values, **given})


@dataclass
class CommandOutput:
    """How a command line prints: the output flags several commands share, declared once."""

    json: bool = setting(
        False,
        kind="flag",
        group="options",
        entries=("compare", "data", "validate"),
        help="print one JSON object instead",
    )
    quiet: bool = setting(
        False,
        kind="flag",
        group="options",
        entries=("evaluate", "compile", "validate", "wikipedia"),
        help="no progress bars or lines on stderr",
    )


def add_output_arguments(
    parser: argparse.ArgumentParser, entry: str, *, section: str | None = None
) -> None:
    """The :class:`CommandOutput` flags ``entry`` takes (``--json``, ``--quiet``)."""
    add_settings(parser, CommandOutput, entry, section=section)


def start_command(*, verbose: bool = False) -> None:
    """What every command line does first: log to stderr (INFO with ``--verbose``, else
    WARNING) with URLs' credentials redacted, and print a native crash's stack.

    ``faulthandler`` prints where a segfault or abort happened (every thread's Python stack)
    instead of a bare "Segmentation fault"; the embedded model runs in a worker process with
    its own handler, so this covers crashes in this process itself.
    """
    if sys.__stderr__ is not None:  # the process's own stderr, even when sys.stderr is replaced
        faulthandler.enable(file=sys.__stderr__, all_threads=True)
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # no password or key in any log line
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


def add_verbose_argument(parser: argparse.ArgumentParser) -> None:
    """``--verbose``: the library's log on stderr, and a failure's whole traceback."""
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="log what is done (downloads included) and show a failure's full traceback",
    )


def report_error(error: BaseException, *, verbose: bool = False, status: int = 2) -> int:
    """Print an expected failure as one line, its URLs' credentials redacted (after its
    traceback with ``--verbose``), and return ``status`` (default 2, for bad input)."""
    if verbose:
        print(redact_text("".join(traceback.format_exception(error))), file=sys.stderr, end="")
    print(f"error: {redact_text(str(error))}", file=sys.stderr)
    return status
