"""The judge's rules keep the layout that lets a reader find one in one place.

Each step of the pipeline is one module of ``frames_dspy/judge/steps/`` named after it, holding
its ``STEP``; no regular expression or word list is written in two judge modules; no function of
the judge is longer than 80 lines. These read the source with ``ast`` and ``importlib``.
"""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from pathlib import Path

from frames_dspy.judge.rules import PIPELINE

JUDGE = Path(__file__).resolve().parents[2] / "frames_dspy" / "judge"
STEPS = JUDGE / "steps"
#: Modules of the steps package that are no step: what every step is made of, and the readings
#: of a short response several steps share.
SHARED = {"__init__", "base", "forms"}
MAX_FUNCTION_LINES = 80


def _step_modules() -> list[str]:
    return sorted(p.stem for p in STEPS.glob("*.py") if p.stem not in SHARED)


def test_every_step_is_one_module_named_after_it():
    steps = {}
    for stem in _step_modules():
        module = importlib.import_module(f"frames_dspy.judge.steps.{stem}")
        assert module.STEP.name == stem, f"steps/{stem}.py holds the step {module.STEP.name!r}"
        assert module.__doc__ and f"Step ``{stem}``" in module.__doc__
        steps[stem] = module.STEP
    assert sorted(rule.name for rule in PIPELINE) == sorted(steps)
    assert all(rule is steps[rule.name] for rule in PIPELINE)


def _sources() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(JUDGE.rglob("*.py"))]


def test_no_judge_function_is_over_80_lines():
    long = [
        f"{path.relative_to(JUDGE)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1})"
        for path, tree in _sources()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long


def test_no_pattern_or_word_list_is_written_twice():
    where = defaultdict(set)
    for path, tree in _sources():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", getattr(node.func, "id", None))
                in ("compile", "word_set")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                where[node.args[0].value].add(str(path.relative_to(JUDGE)))
    assert {text: files for text, files in where.items() if len(files) > 1} == {}
