"""Each setting declared once: its type, default, help and the entry points that take it.

A setting is a field of a config dataclass declared with :func:`setting`; the declaration
carries the command-line option (flag, value kind, help, group) and the entry points whose
command lines offer it (``evaluate``, ``compile``, ``validate``). From it come:

- the argparse options (``frames_dspy.commands.common.add_settings``, the only code that
  builds them),
- ``config.json`` (:func:`settings_record`: every field, as it is),
- the command that re-runs a configuration (:func:`command_args`: the flags whose values
  differ from the entry point's defaults),
- the docs (:func:`settings_markdown`).

Adding a setting is one :func:`setting` field in the config class plus the code that uses
it. No argparse here: value kinds are named (``positive_int``, ...) and
``frames_dspy.commands.common`` turns them into argparse types.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from typing import Any

__all__ = [
    "ENTRY_POINTS",
    "KINDS",
    "Option",
    "setting",
    "options",
    "resume_keys",
    "declared_defaults",
    "command_args",
    "settings_record",
    "settings_markdown",
]

#: The command lines that take settings, and what each one is.
ENTRY_POINTS = {
    "evaluate": "python -m frames_dspy.evaluate",
    "compile": "python -m optimize.compile",
    "validate": "python -m frames_dspy.judge validate",
    "compare": "python -m frames_dspy.compare",
    "report": "python -m frames_dspy.report html",
    "data": "python -m frames_dspy.data",
    "wikipedia": "python -m frames_dspy.wikipedia fetch",
}

#: Value kinds an option may have (frames_dspy.commands.common maps each to an argparse type).
KINDS = (
    "str",
    "int",
    "float",
    "positive_int",
    "non_negative_int",
    "positive_float",
    "fraction",
    "int_range",
    "int_list",
    "count_list",  # comma-separated whole numbers >= 0
    "limit_or_all",
    "condition_list",  # comma-separated condition names (frames_dspy.programs)
    "id_list",  # question ids and ranges: 0,5,7-9
    "choice_list",  # comma-separated values drawn from ``choices``
    "pick",  # optimize.compile's pick rule (the entry point supplies its parser)
    "flag",  # on when given (store_true)
    "no_flag",  # off when given (store_false): the flag names the negation
    "on_off",  # --x / --no-x, None when neither is given
    "optional_value",  # the flag alone means ``const``
)


@dataclass(frozen=True)
class Option:
    """How a setting appears on a command line.

    Attributes:
        flag: The option (``--model``); None for a setting no command line takes (a record).
        help: What it does; ``%(default)s`` is filled in by argparse.
        kind: One of :data:`KINDS`.
        group: The ``--help`` section it is listed under.
        entries: The entry points that take it (keys of :data:`ENTRY_POINTS`).
        choices: The allowed values, if a closed list.
        metavar: The value's name in ``--help``.
        const: The value of an ``optional_value`` flag given alone.
        resume: The entry points whose run folder or study is not resumed with another
            value of this setting (it changes what a prediction or a trial means).
        default_text: How the docs show a default that is chosen when the run starts (from
            the model, say); None shows the declared default.
    """

    flag: str | None
    help: str
    kind: str = "str"
    group: str = "settings"
    entries: frozenset[str] = frozenset({"evaluate", "compile"})
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    const: Any = None
    resume: frozenset[str] = frozenset()
    default_text: str | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown option kind {self.kind!r}; choose one of {KINDS}")
        unknown = (set(self.entries) | set(self.resume)) - set(ENTRY_POINTS)
        if unknown:
            raise ValueError(f"unknown entry point(s) {sorted(unknown)}; use {list(ENTRY_POINTS)}")


def setting(
    default: Any = MISSING,
    *,
    help: str,  # noqa: A002 - the word argparse and readers use
    flag: str | None = "",
    kind: str = "str",
    group: str = "settings",
    entries: Iterable[str] = ("evaluate", "compile"),
    choices: Iterable[str] | None = None,
    metavar: str | None = None,
    const: Any = None,
    resume: Iterable[str] = (),
    default_text: str | None = None,
    default_factory: Any = MISSING,
) -> Any:
    """A config dataclass field declared with its command-line option.

    ``flag`` defaults to ``--`` plus the field name with dashes (filled in by
    :func:`options`); None means no command line takes it.
    """
    option = Option(
        flag=flag,
        help=help,
        kind=kind,
        group=group,
        entries=frozenset(entries),
        choices=tuple(choices) if choices is not None else None,
        metavar=metavar,
        const=const,
        resume=frozenset(resume),
        default_text=default_text,
    )
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata={"option": option})
    return field(default=default, metadata={"option": option})


def _default(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def options(config_type: type, entry: str | None = None) -> Iterator[tuple[str, Option, Any]]:
    """``(field name, option, default)`` of each declared setting with a flag (of ``entry``
    only, if given), in declaration order."""
    for f in fields(config_type):
        option = f.metadata.get("option")
        if option is None or option.flag is None:
            continue
        if entry is not None and entry not in option.entries:
            continue
        flag = option.flag or "--" + f.name.replace("_", "-")
        yield f.name, Option(**{**asdict(option), "flag": flag}), _default(f)


def declared_defaults(config_type: type) -> dict[str, Any]:
    """Each declared option's default (computed ones computed now): what a run made before
    the option existed used. Records without a flag (``autorater``) have none: their
    absence means an older version, not the default."""
    return {
        f.name: _default(f)
        for f in fields(config_type)
        if "option" in f.metadata and f.metadata["option"].flag is not None
    }


def resume_keys(config_type: type, entry: str) -> tuple[str, ...]:
    """The settings of ``config_type`` whose change stops ``entry`` from resuming a run
    folder or study (declared with ``resume``), in declaration order."""
    return tuple(
        f.name
        for f in fields(config_type)
        if "option" in f.metadata and entry in f.metadata["option"].resume
    )


def _text(kind: str, value: Any) -> str:
    if kind == "int_range":
        low, high = value
        return str(low) if low == high else f"{low}-{high}"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def command_args(
    config: Any,
    entry: str,
    *,
    defaults: Any = None,
    only: Iterable[str] | None = None,
    skip: Iterable[str] = (),
    always: Iterable[str] = (),
) -> list[str]:
    """The flags of ``entry`` that set ``config``'s values where they differ from
    ``defaults`` (the entry point's config class made with no arguments, unless given).

    Args:
        only: Field names to consider (default: every setting ``entry`` takes).
        skip: Field names left out.
        always: Field names written even when they equal the default (pinned on purpose).
    """
    defaults = defaults if defaults is not None else type(config)()
    wanted = set(only) if only is not None else None
    pinned, skipped = set(always), set(skip)
    args: list[str] = []
    for name, option, _ in options(type(defaults), entry):
        if (wanted is not None and name not in wanted) or name in skipped:
            continue
        value = getattr(config, name)
        if value == getattr(defaults, name) and name not in pinned:
            continue
        if option.kind == "flag":
            args += [option.flag] if value else []
        elif option.kind == "no_flag":
            args += [] if value else [option.flag]
        elif option.kind == "on_off":
            if value is not None:
                args.append(option.flag if value else "--no-" + option.flag[2:])
        elif value is None:
            if option.kind == "limit_or_all":
                args += [option.flag, "all"]
        else:
            args += [option.flag, _text(option.kind, value)]
    return args


def settings_record(config: Any) -> dict[str, Any]:
    """Every field of a config, as ``config.json`` records it."""
    return asdict(config)


def settings_markdown(config_type: type, entry: str) -> str:
    """A markdown table of the settings ``entry`` takes: flag, default, help. A default
    computed when the config is made (from the environment) is shown as such."""
    computed = {f.name for f in fields(config_type) if f.default_factory is not MISSING}
    lines = ["| option | default | what it does |", "|---|---|---|"]
    for name, option, default in options(config_type, entry):
        if option.default_text is not None:
            shown = option.default_text
        elif name in computed:
            shown, default = "computed", "computed when the run starts"
        elif default is None or default is MISSING:
            shown = "—"
        else:
            shown = f"`{_text(option.kind, default)}`"
        text = (
            option.help.replace("%(default)s", str(default)).replace("%%", "%").replace("|", "\\|")
        )
        lines.append(f"| `{option.flag}` | {shown} | {text} |")
    return "\n".join(lines) + "\n"
