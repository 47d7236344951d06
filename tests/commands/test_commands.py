"""frames_dspy.commands: ``frames-dspy COMMAND`` runs exactly what ``python -m NAME`` runs.

Each command's help is captured both ways, in this process: ``python -m NAME`` by running the
shim's file as ``__main__`` (what ``python -m`` does), ``frames-dspy`` by calling the function
``[project.scripts]`` names. They must print the same text, the program name aside (and the
usage lines' wrapping, which follows its length).
"""

from __future__ import annotations

import importlib
import re
import runpy
import sys
import tomllib
from pathlib import Path

import pytest

from frames_dspy.commands import COMMANDS, main
from tests.project.test_layout import shim_command

REPO = Path(__file__).resolve().parents[2]

#: The commands that have commands of their own.
SUBCOMMANDS = {"report": ["html"], "judge": ["validate"], "wikipedia": ["fetch"]}


def _shims() -> dict[str, Path]:
    """Each command's shim (the file its python -m name runs), by command name."""
    found = {}
    for package in ("frames_dspy", "optimize"):
        for path in sorted((REPO / package).rglob("*.py")):
            if (name := shim_command(path.read_text(encoding="utf-8"))) is not None:
                found[name] = path
    return found


def _documented_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__main__" else parts)


def _output(run, argv: list[str], capsys) -> tuple[int, str]:
    """What ``run`` prints on stdout and the status it exits with, given ``argv``."""
    with pytest.raises(SystemExit) as exit_:
        run(argv)
    return exit_.value.code or 0, capsys.readouterr().out


def _as_python_m(path: Path, monkeypatch):
    def run(argv: list[str]) -> None:
        monkeypatch.setattr(sys, "argv", [str(path), *argv])
        runpy.run_path(str(path), run_name="__main__")

    return run


def _same_text(text: str, prog: str) -> str:
    """``text`` with the usage block's program name replaced and its spacing folded (the rest,
    examples that name the python -m form included, stays as it is)."""
    usage, _, rest = text.partition("\n\n")
    return " ".join(usage.replace(prog, "PROG", 1).split()) + "\n\n" + rest


def test_every_command_has_one_shim():
    assert set(_shims()) == set(COMMANDS)


@pytest.mark.parametrize(
    "words",
    [[name] for name in COMMANDS]
    + [[name, sub] for name, subs in SUBCOMMANDS.items() for sub in subs],
    ids=" ".join,
)
def test_help_is_the_same_under_both_names(words, monkeypatch, capsys):
    name, path = words[0], _shims()[words[0]]
    status, by_module = _output(_as_python_m(path, monkeypatch), [*words[1:], "--help"], capsys)
    assert status == 0
    status_script, by_script = _output(main, [*words, "--help"], capsys)
    assert status_script == 0
    assert by_module.strip(), words  # a page or a help text, not nothing
    documented = f"python -m {_documented_name(path)}"
    if COMMANDS[name].module in ("settings_doc", "rules_doc"):
        assert by_script == by_module  # the page itself: no program name in it
    else:
        assert by_module.startswith(f"usage: {' '.join([documented, *words[1:]])} ")
        assert by_script.startswith(f"usage: frames-dspy {' '.join(words)} ")
        assert _same_text(by_script, f"frames-dspy {name}") == _same_text(by_module, documented)


def test_the_comparison_would_see_a_changed_option():
    help_text = "usage: PROG [-h]\n\noptions:\n  -h, --help  show this help\n"
    assert _same_text(help_text, "PROG") != _same_text(
        help_text.replace("help\n", "hlep\n"), "PROG"
    )
    wrapped = "usage: python -m x [-h]\n                 [--a A]\n\nrest\n"
    assert _same_text(wrapped, "python -m x") == _same_text("usage: y [-h] [--a A]\n\nrest\n", "y")


def test_frames_dspy_help_lists_every_command_in_one_line(capsys):
    status, text = _output(main, ["--help"], capsys)
    assert status == 0 and text.startswith("usage: frames-dspy COMMAND")
    listing = text.split("\ncommands:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in listing] == list(COMMANDS)
    assert all(
        line.split(maxsplit=1)[1] == c.summary
        for line, c in zip(listing, COMMANDS.values(), strict=True)
    )


@pytest.mark.parametrize("argv", [[], ["bogus"], ["evaluate", "--limit", "x"], ["judge", "nope"]])
def test_bad_input_exits_2_naming_the_program(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert re.match(r"frames-dspy( \w+)?: error: ", err), err
    if argv[:1] == ["evaluate"]:
        assert "frames-dspy evaluate: error: argument --limit: --limit 'x'" in err


def test_a_command_exits_with_its_own_status(tmp_path, capsys):
    # compare refuses two folders that are no runs with 2 and one line, as python -m does.
    with pytest.raises(SystemExit) as exit_:
        main(["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.startswith("error: ")
    with pytest.raises(SystemExit) as exit_:
        main(["settings-doc"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == (REPO / "docs" / "settings.md").read_text(encoding="utf-8")


def test_the_console_script_is_this_main(monkeypatch, capsys):
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "scripts"
    ]
    module, _, function = scripts["frames-dspy"].partition(":")
    entry = getattr(importlib.import_module(module), function)
    assert entry is main
    # As the installed script calls it: no arguments, the process's argv.
    monkeypatch.setattr(sys, "argv", ["frames-dspy", "data", "--help"])
    with pytest.raises(SystemExit) as exit_:
        entry()
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("usage: frames-dspy data ")
