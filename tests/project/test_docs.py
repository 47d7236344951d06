"""The README stays a short guide and the generated docs pages stay generated.

``mkdocs build --strict`` (in ``.ci/run``) checks the site's links and pages; these check
what it cannot: the README's length and commands, that the committed generated pages are what
their generators print today, that every command line of the getting-started recipes parses
with its real argument parser (so a flag misspelt on the page, or renamed in the code, fails
here), and that every benchmark the docs name still imports.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
import runpy
import shlex
import sys
from pathlib import Path

import pytest

from frames_dspy.judge.rules import PIPELINE
from frames_dspy.judge.rules_page import rules_markdown
from optimize.config import CompileConfig

REPO = Path(__file__).resolve().parents[2]

#: The README's three commands, character for character (.ci/run runs the first and last).
SETUP = 'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[local,dev]"'
MAIN = "python -m frames_dspy.evaluate --limit 10"
TEST = "pytest"


def test_docs_autorater_rules_md_is_generated_from_the_pipeline():
    written = (REPO / "docs" / "autorater-rules.md").read_text(encoding="utf-8")
    assert written == rules_markdown(), (
        "run: python -m frames_dspy.judge.rules_doc > docs/autorater-rules.md"
    )


def test_the_rules_page_lists_every_step_in_order():
    page = rules_markdown()
    rows = [line for line in page.splitlines() if line.startswith("| ") and "` |" in line]
    steps = [row.split("|")[2].strip(" `") for row in rows[: len(PIPELINE)]]
    assert steps == [rule.name for rule in PIPELINE]
    assert all(rule.decides in page for rule in PIPELINE)


def test_readme_is_a_short_guide_with_its_three_commands():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    blocks = text.split("```bash\n")[1:]
    commands = [block.split("```")[0].strip() for block in blocks]
    assert SETUP in commands and MAIN in commands and TEST in commands


def test_every_docs_page_the_readme_links_to_exists():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    for target in {part.split(")")[0].split("#")[0] for part in text.split("](")[1:]}:
        if target.startswith(("http://", "https://")) or not target:
            continue
        assert (REPO / target).exists(), target


def test_the_readme_layout_names_every_package_and_test_folder():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    layout = text.split("## Layout\n", 1)[1].split("\n## ", 1)[0]
    packages = sorted(
        d.name
        for d in (REPO / "frames_dspy").iterdir()
        if (d / "__init__.py").exists() and d.name != "__pycache__"
    )
    assert packages, "no packages found under frames_dspy/"
    missing = [name for name in packages if f"{name}/" not in layout]
    assert not missing, f"README's layout leaves out frames_dspy/{missing}"
    for top in ("optimize/", "benchmarks/", "experiments/", "tests/"):
        assert top in layout
    tests = sorted(d.name for d in (REPO / "tests").iterdir() if (d / "__init__.py").exists())
    assert all(f"{name}/" in layout or name in packages for name in tests), tests


# --- the getting-started recipes: every command line parses with its real parser ------------

GETTING_STARTED = REPO / "docs" / "getting-started.md"


class _Parsed(Exception):
    """Raised in place of running a command, once its argument parser accepted the line."""

    def __init__(self, namespace: argparse.Namespace):
        super().__init__()
        self.namespace = namespace


def _recipes() -> dict[str, str]:
    """Each recipe (a ``###`` heading of the page's Recipes section) and its text."""
    text = GETTING_STARTED.read_text(encoding="utf-8")
    if "\n## Recipes\n" not in text:
        return {}  # the count test below fails, naming what it found
    section = text.split("\n## Recipes\n", 1)[1].split("\n## ", 1)[0]
    parts = section.split("\n### ")[1:]
    return {part.split("\n", 1)[0]: part for part in parts}


def _command_lines(recipe: str) -> list[list[str]]:
    """The ``python ...`` lines of a recipe's bash blocks, continuations joined, leading
    ``NAME=value`` assignments and comments dropped (sample output is in ``text`` blocks)."""
    lines = []
    for block in recipe.split("```bash\n")[1:]:
        body = block.split("```", 1)[0].replace("\\\n", " ")
        for line in body.splitlines():
            words = shlex.split(line, comments=True)
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]
            if words[:1] == ["python"]:
                lines.append(words)
    return lines


def _module(words: list[str]) -> tuple[str, list[str]]:
    """The module a ``python -m NAME ...`` or ``python path/to/file.py ...`` line runs, and
    its arguments."""
    if words[1] == "-m":
        return words[2], words[3:]
    return words[1].removesuffix(".py").replace("/", "."), words[2:]


def test_the_getting_started_page_has_three_recipes_each_with_a_command():
    recipes = _recipes()
    assert len(recipes) == 3, list(recipes)
    for title, recipe in recipes.items():
        assert _command_lines(recipe), f"recipe {title!r} names no python command"
        assert "```text\n" in recipe, f"recipe {title!r} shows no sample of its output"


@pytest.mark.parametrize(
    "words",
    [
        pytest.param(words, id=f"{title.split()[0]}:{' '.join(words[:4])}")
        for title, recipe in _recipes().items()
        for words in _command_lines(recipe)
    ],
)
def test_a_recipe_command_parses_with_its_real_argument_parser(words, monkeypatch, capsys):
    name, args = _module(words)
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        raise _Parsed(original(self, args, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    monkeypatch.setattr(sys, "argv", [name, *args])
    spec = importlib.util.find_spec(name)
    path = (
        Path(spec.submodule_search_locations[0], "__main__.py")  # a package run with -m
        if spec.submodule_search_locations
        else Path(spec.origin)
    )
    try:  # the file as `python -m` runs it (a command's shim, a benchmark, a test server)
        runpy.run_path(str(path), run_name="__main__")
    except _Parsed as parsed:
        namespace = parsed.namespace
    except SystemExit as exit_:
        pytest.fail(f"{' '.join(words)}\nexits {exit_.code}: {capsys.readouterr().err}")
    else:
        pytest.fail(f"{name} ran without parsing its arguments")
    if name == "optimize.compile":  # the checks compile makes before any work
        values = {k: v for k, v in vars(namespace).items() if k not in ("quiet", "verbose")}
        CompileConfig(**values).validate()


def test_every_benchmark_the_docs_name_imports():
    pages = [
        REPO / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "experiments").glob("*/README.md")),
    ]
    named = sorted(
        {
            name
            for page in pages
            for name in re.findall(r"python -m (benchmarks\.\w+)", page.read_text(encoding="utf-8"))
        }
    )
    assert "benchmarks.threads" in named, named
    for name in named:  # a module that moved or lost an import fails here, not in a reader's shell
        assert callable(importlib.import_module(name).main), name
