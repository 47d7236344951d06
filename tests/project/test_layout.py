"""The layout docs/architecture.md describes holds: small modules and functions, packages in
layers, no cycles, CLIs at the top.

These read the source with ``ast`` (imports inside functions count too), so a change that
grows a module or a function past its limit, imports a package above its own or closes an
import loop fails here, not in a later review.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("frames_dspy", "optimize")
MAX_LINES = 600
MAX_FUNCTION_LINES = 80

#: The command-line modules: thin shells on top, nothing below imports them.
CLI_MODULES = {
    "frames_dspy.cli",
    "frames_dspy.evaluate",
    "frames_dspy.compare",
    "frames_dspy.report",
    "frames_dspy.wikipedia",
    "frames_dspy.data.__main__",
    "frames_dspy.judge.__main__",
    "frames_dspy.settings_doc",
    "optimize.compile",
}

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
)


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


def test_nothing_below_a_cli_imports_it():
    # The command-line modules sit at the top: libraries and other entry points import the
    # evaluation library (frames_dspy.run.evaluation), never the evaluate CLI.
    graph = _graph()
    importers = sorted(n for n, targets in graph.items() if "frames_dspy.evaluate" in targets)
    assert importers == []
    assert not [n for n, t in graph.items() if "optimize.compile" in t]
    assert not [n for n, t in graph.items() if any(x.endswith(".__main__") for x in t)]


def test_argparse_lives_only_in_command_line_modules():
    allowed = CLI_MODULES
    users = {
        name
        for name, path in _modules().items()
        if re.search(r"^\s*(import argparse|from argparse)", path.read_text(), re.MULTILINE)
    }
    assert users <= allowed, sorted(users - allowed)


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


def _layer(module: str) -> int:
    if module in CLI_MODULES:
        return len(LAYERS)
    for index, package in enumerate(LAYERS):
        if module == package or module.startswith(package + "."):
            return index
    if module == "frames_dspy":
        return 0
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS or CLI_MODULES")


def test_no_package_imports_one_above_it():
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in _graph().items()
        for target in targets
        if _layer(target) > _layer(name)
    )
    assert upward == [], upward


def test_the_layer_check_finds_a_planted_upward_import():
    assert _layer("frames_dspy.data.corpus") < _layer("frames_dspy.run.session")
    assert _layer("frames_dspy.evaluate") > _layer("optimize.final")
