"""The notebooks run headless, end to end, on the real data and the embedded model.

Each notebook is executed with nbclient after its "parameters" cell gets test values appended
(papermill-style: the defaults stay, the overrides win), so the sizes are tiny. 01 and 03 are
chained: 03 analyses the run folder 01 wrote. The executed copies are kept in ``tmp_path`` for
inspection; a cell that raises fails the test with its traceback. The notebooks read their data
from a local copy (``FRAMES_DATA_DIR``, with its distractor summaries: the ``local_data``
fixture).

The committed notebooks must carry no outputs; that check runs offline.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ["01_reproduce_frames.ipynb", "02_optimize.ipynb", "03_error_analysis.ipynb"]
CELL_TIMEOUT = 900  # seconds; one cell may run a whole study on a slow shared CPU

# A smaller article budget than the notebooks' default; MAX_TOKENS stays at 128 because the judge
# shares the program's LM and a shorter limit cuts its verdicts (judge errors).
SMALL = {"CONTEXT_TOKENS": 300}


def _read(name: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOKS / name, as_version=4)


def _parameter_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "a notebook needs exactly one cell tagged 'parameters'"
    return cells[0]


def execute(name: str, workdir: Path, **overrides) -> tuple[nbformat.NotebookNode, float]:
    """Run a notebook with its parameters overridden; return it (with outputs) and seconds."""
    from nbclient import NotebookClient

    nb = _read(name)
    cell = _parameter_cell(nb)
    lines = [f"{key} = {value!r}" for key, value in overrides.items()]
    injected = "\n\n# overrides injected by tests/project/test_notebooks.py\n"
    cell.source += injected + "\n".join(lines)
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
    )
    started = time.perf_counter()
    try:
        client.execute()
    finally:
        # Kept even when a cell fails, so the outputs up to the failure can be read.
        nbformat.write(nb, workdir / name)
    seconds = time.perf_counter() - started
    print(f"{name}: {seconds:.0f} s", file=sys.stderr)
    return nb, seconds


def _outputs(nb: nbformat.NotebookNode, output_type: str) -> list[dict]:
    return [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == output_type
    ]


def _pngs(nb: nbformat.NotebookNode) -> int:
    return sum("image/png" in o.get("data", {}) for o in _outputs(nb, "execute_result"))


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_committed_clean(name):
    nb = _read(name)
    nbformat.validate(nb)
    _parameter_cell(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{name}: a code cell has outputs; clear them"
            assert cell.execution_count is None, f"{name}: clear the execution counts"


@pytest.fixture(scope="module")
def reproduce(tmp_path_factory, local_data, real_model_path):
    """Notebook 01 on one question, all six conditions; its run folder feeds notebook 03."""
    workdir = tmp_path_factory.mktemp("nb01")
    run_dir = workdir / "run"
    nb, seconds = execute(
        "01_reproduce_frames.ipynb",
        workdir,
        N_QUESTIONS=1,
        ROUNDS=1,
        K=2,
        N_DOCS=2,
        OUT=str(run_dir),
        **SMALL,
    )
    return nb, run_dir, seconds


@pytest.mark.real
def test_01_reproduce_runs_six_conditions(reproduce):
    nb, run_dir, _ = reproduce
    summary = json.loads((run_dir / "summary.json").read_text())
    assert list(summary) == [
        "naive", "bm25-2", "bm25-4", "oracle", "multistep-vanilla", "multistep-planning",
    ]  # fmt: skip
    assert all(row["n"] == 1 for row in summary.values())
    assert _pngs(nb) == 2  # accuracy by reasoning type, recall by round
    table = "".join(o["data"].get("text/markdown", "") for o in _outputs(nb, "execute_result"))
    assert "paper (Gemini-Pro-1.5)" in table and "0.729" in table


@pytest.mark.real
def test_03_error_analysis_reads_the_run_of_01(reproduce, tmp_path):
    _, run_dir, _ = reproduce
    nb, _ = execute("03_error_analysis.ipynb", tmp_path, RUN_DIR=str(run_dir))
    assert (run_dir / "failures_by_reasoning_type.png").is_file()
    assert _pngs(nb) == 1


@pytest.mark.real
def test_02_optimize_runs_a_study_and_the_baselines(tmp_path, local_data, real_model_path):
    out = tmp_path / "opt"
    nb, _ = execute(
        "02_optimize.ipynb",
        tmp_path,
        TRAIN=2,
        DEV=1,
        TEST_LIMIT=1,
        TRIALS=2,
        ROUNDS=(1, 1),
        K=(1, 2),
        N_DOCS=(1, 2),
        OPTIMIZER="bootstrap-rs",
        MAX_DEMOS=1,
        CANDIDATES=1,
        BASELINE_ROUNDS=1,
        BASELINE_K=2,
        BASELINE_N_DOCS=2,
        OUT=str(out),
        **SMALL,
    )
    for name in ("trials.csv", "pareto.md", "pareto.png", "program.json", "test_score.json"):
        assert (out / name).is_file(), name
    baselines = json.loads((out / "baselines" / "summary.json").read_text())
    assert set(baselines) == {"multistep-vanilla", "multistep-planning"}
    assert _pngs(nb) == 1  # the Pareto plot
