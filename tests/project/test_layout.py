"""The layout docs/architecture.md describes holds: small modules and functions, packages in
layers, no cycles, the command lines on the top floor.

These read the source with ``ast`` (imports inside functions count too), so a change that
grows a module or a function past its limit, imports a package above its own or closes an
import loop fails here, not in a later review.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from frames_dspy.commands import COMMANDS

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("frames_dspy", "optimize")

#: Module names two modules may share: a package's ``__init__``; ``settings``, one idea on two
#: floors (how a setting is declared, base/settings.py; the run's settings so declared,
#: run/settings.py).
SHARED_NAMES = frozenset({"__init__", "settings"})
MAX_LINES = 600
MAX_FUNCTION_LINES = 80

#: The packages bottom to top: a module imports its own layer or the ones below, never above.
LAYERS = (
    "frames_dspy.base",  # paths, atomic files, folder locks, redaction
    "frames_dspy.data",  # questions, links, corpus, Wikipedia fetch, snapshots
    "frames_dspy.retrieval",  # BM25 in memory, the snapshot's index on disk
    "frames_dspy.lm",  # model specs, make_lm, cache, usage, accounting; engine/ fenced in
    "frames_dspy.programs",  # signatures and the dspy.Modules
    "frames_dspy.judge",  # the autorater
    "frames_dspy.results",  # records, run folders and every figure drawn from them
    "frames_dspy.run",  # settings, session, the question loop, the evaluation
    "optimize",  # the Optuna study over programs
    "frames_dspy.commands",  # the command lines: argparse, what they print, exit statuses
)


def shim_command(source: str) -> str | None:
    """The command a shim runs, or None if ``source`` is not a shim.

    A shim is a command under its documented name (``python -m frames_dspy.evaluate`` runs
    ``frames_dspy.commands.evaluate``): its whole body, docstring aside, is
    ``from frames_dspy.commands import run`` and ``if __name__ == "__main__": run("NAME")``.
    It sits where its name puts it but belongs to the top floor.
    """
    body = ast.parse(source).body
    match body:
        case [ast.Expr(value=ast.Constant(value=str())), *rest]:
            body = rest
    match body:
        case [
            ast.ImportFrom(
                module="frames_dspy.commands", names=[ast.alias(name="run", asname=None)], level=0
            ),
            ast.If(
                test=ast.Compare(
                    left=ast.Name(id="__name__"),
                    ops=[ast.Eq()],
                    comparators=[ast.Constant(value="__main__")],
                ),
                body=[
                    ast.Expr(
                        value=ast.Call(
                            func=ast.Name(id="run"),
                            args=[ast.Constant(value=str(name))],
                            keywords=[],
                        )
                    )
                ],
                orelse=[],
            ),
        ]:
            return name
    return None


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Project modules ``path`` imports (a package's ``__init__`` counts as its name)."""
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(path, name, known) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_module_is_over_the_line_limit():
    long = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_import_cycle():
    assert _cycle(_graph()) is None


def test_the_cycle_finder_finds_a_planted_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def _shims() -> dict[str, str]:
    """Every shim of the packages, by module name, and the command it runs."""
    found = {}
    for name, path in _modules().items():
        if (command := shim_command(path.read_text(encoding="utf-8"))) is not None:
            found[name] = command
    return found


def test_the_shim_rule_tells_a_shim_from_a_module():
    shim = 'from frames_dspy.commands import run\n\nif __name__ == "__main__":\n    run("data")\n'
    assert shim_command(shim) == "data"
    assert shim_command('"""A docstring."""\n\n' + shim) == "data"
    assert shim_command(shim + "print('more')\n") is None  # more than the call
    assert shim_command(shim.replace('run("data")', "run(name)")) is None  # names no command
    calls_main = (
        "from frames_dspy.commands.data import main\n\nif __name__ == '__main__':\n    main()\n"
    )
    assert shim_command(calls_main) is None  # not through run: another way to exit
    assert shim_command("import sys\n") is None


def test_every_shim_runs_a_command_and_every_command_has_its_module():
    shims = _shims()
    assert "frames_dspy.evaluate" in shims and "optimize.compile" in shims, shims
    assert set(shims.values()) <= set(COMMANDS), shims
    for name, command in COMMANDS.items():
        assert (REPO / "frames_dspy" / "commands" / f"{command.module}.py").is_file(), name


def test_command_lines_live_on_the_top_floor():
    # A module run as a program is a shim; argparse is used by the command modules alone.
    runnable = {
        name
        for name, path in _modules().items()
        if re.search(r"^if __name__ == .__main__.:", path.read_text(), re.MULTILINE)
    }
    assert runnable == set(_shims()), sorted(runnable ^ set(_shims()))
    users = {
        name
        for name, path in _modules().items()
        if re.search(r"^\s*(import argparse|from argparse)", path.read_text(), re.MULTILINE)
    }
    top = LAYERS.index("frames_dspy.commands")
    below = sorted(name for name in users if _layer(name) < top)
    assert users and below == [], below


def test_no_module_name_is_used_for_two_things():
    # One name, one thing: a reader who meets report.py knows which one is meant. A shim is
    # its command under the documented name, not a second thing.
    shims = {_modules()[name] for name in _shims()}
    paths: dict[str, list[str]] = {}
    for top in (*PACKAGES, "benchmarks"):
        for path in sorted((REPO / top).rglob("*.py")):
            if path not in shims:
                paths.setdefault(path.stem, []).append(str(path.relative_to(REPO)))
    twice = {name: found for name, found in paths.items() if len(found) > 1}
    assert set(twice) <= SHARED_NAMES, {n: f for n, f in twice.items() if n not in SHARED_NAMES}


def test_nothing_imports_a_shim():
    # A shim is an entry point only: code imports the command module (or the library) instead.
    shims = set(_shims())
    importers = sorted(f"{n} -> {t}" for n, targets in _graph().items() for t in targets & shims)
    assert importers == [], importers


def _functions() -> dict[str, int]:
    """Every function and method of the packages, by ``module:qualified name``, with its lines."""
    found = {}
    for name, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))

        def visit(node: ast.AST, prefix: str, name: str = name) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    qualified = f"{prefix}{child.name}"
                    if not isinstance(child, ast.ClassDef):
                        found[f"{name}:{qualified}"] = child.end_lineno - child.lineno + 1
                    visit(child, qualified + ".")
                else:
                    visit(child, prefix)

        visit(tree, "")
    return found


def test_no_function_is_over_the_line_limit():
    long = {name: n for name, n in _functions().items() if n > MAX_FUNCTION_LINES}
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def _layer(module: str, shims: frozenset[str] = frozenset()) -> int:
    if module in shims:
        return LAYERS.index("frames_dspy.commands")
    for index, package in enumerate(LAYERS):
        if module == package or module.startswith(package + "."):
            return index
    if module == "frames_dspy":
        return 0
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS")


def test_no_package_imports_one_above_it():
    shims = frozenset(_shims())
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in _graph().items()
        for target in targets
        if _layer(target, shims) > _layer(name, shims)
    )
    assert upward == [], upward


def test_the_layer_check_finds_a_planted_upward_import():
    shims = frozenset(_shims())
    assert _layer("frames_dspy.data.corpus") < _layer("frames_dspy.run.session")
    assert _layer("frames_dspy.commands.evaluate") > _layer("optimize.final")
    assert _layer("frames_dspy.data.__main__", shims) == _layer("frames_dspy.commands.data")
    assert _layer("frames_dspy.data.__main__") < _layer("frames_dspy.run.session")  # not a shim
