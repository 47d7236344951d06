"""benchmarks.reproduce: experiment files, figures re-scored from run folders, exit statuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.reproduce import ExperimentError, load_experiment, main
from tests.results.test_compare import outcomes, write_run


def experiment(tmp_path, figures, **extra):
    folder = tmp_path / "exp"
    folder.mkdir(parents=True)
    payload = {"title": "tiny", "commands": {}, "tolerance": 0.05, "figures": figures, **extra}
    (folder / "experiment.json").write_text(json.dumps(payload), encoding="utf-8")
    return folder


FIGURES = [
    {"name": "base acc", "run": "base", "condition": "c", "metric": "accuracy"},
    {"name": "new recall", "run": "new", "condition": "c", "metric": "recall_round1"},
    {"name": "new n", "run": "new", "condition": "c", "metric": "n", "tolerance": 0},
    {
        "name": "diff",
        "compare": {"a": "base", "b": "new", "condition": "c", "condition_b": "c"},
        "metric": "accuracy_diff",
    },
    {
        "name": "diff low",
        "compare": {"a": "base", "b": "new", "condition": "c", "condition_b": "c"},
        "metric": "accuracy_ci95",
        "index": 0,
    },
]


def timed(records):
    """Records as a run writes them: with the seconds each question took."""
    return [{**r, "seconds": 1.0} for r in records]


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    write_run(root / "base", timed(outcomes("c", "1100")))
    new = timed(outcomes("c", "1110"))
    new[0]["recall"] = [0.0, 1.0]
    write_run(root / "new", new)
    return root


def test_written_figures_rescore_exactly_and_a_changed_record_is_caught(tmp_path, runs, capsys):
    folder = experiment(tmp_path, FIGURES)
    assert main([str(folder), "--runs", str(runs), "--write"]) == 0
    stored = json.loads((folder / "experiment.json").read_text())
    expected = [f["expected"] for f in stored["figures"]]
    assert expected[:4] == [0.5, 0.375, 4, 0.25]  # (0 + .5 + .5 + .5) / 4 after round 1
    assert "benchmarks.reproduce" in stored["expected_written"]["command"]
    capsys.readouterr()
    assert main([str(folder), "--runs", str(runs)]) == 0
    assert "all 5 figures within tolerance" in capsys.readouterr().out
    # One more question right in the new run: re-scoring must notice.
    write_run(runs / "new", timed(outcomes("c", "1111")))
    assert main([str(folder), "--runs", str(runs)]) == 1
    captured = capsys.readouterr()
    assert "OUTSIDE" in captured.out and "outside tolerance" in captured.err


def test_how_the_lm_searched_is_a_figure_too(tmp_path, capsys):
    # The near-repeat share is what an agent experiment reports beside accuracy and recall.
    root = tmp_path / "runs"
    records = timed(outcomes("c", "1100"))
    for record, rate in zip(records, (0.5, 0.0, 1.0, 0.5), strict=True):
        record["near_repeat_rate"] = rate
    write_run(root / "base", records)
    figure = {"name": "repeats", "run": "base", "condition": "c", "metric": "near_repeat_rate"}
    folder = experiment(tmp_path, [figure])
    assert main([str(folder), "--runs", str(root), "--write"]) == 0
    stored = json.loads((folder / "experiment.json").read_text())
    assert stored["figures"][0]["expected"] == 0.5
    records[2]["near_repeat_rate"] = 0.0
    write_run(root / "base", records)
    capsys.readouterr()
    assert main([str(folder), "--runs", str(root)]) == 1


def test_missing_runs_and_bad_experiments_exit_2_with_the_reason(tmp_path, runs, capsys):
    folder = experiment(tmp_path, FIGURES)
    assert main([str(folder), "--runs", str(tmp_path / "nowhere")]) == 2
    assert "run the experiment's commands first (add --rerun)" in capsys.readouterr().err
    assert main([str(tmp_path / "absent")]) == 2
    bad = experiment(tmp_path / "b", [{"run": "base", "condition": "c", "metric": "speed"}])
    with pytest.raises(ExperimentError, match="metric 'speed'; choose one of n, accuracy"):
        load_experiment(bad)
    wrong = experiment(tmp_path / "w", [{"run": "base", "condition": "x", "metric": "n"}])
    assert main([str(wrong), "--runs", str(runs)]) == 2
    assert "has no condition 'x' (it has: c)" in capsys.readouterr().err


def run_maker(tmp_path):
    """A command line writing a one-record run to its ``--out`` (and its argv beside it)."""
    script = tmp_path / "make_run.py"
    script.write_text(
        "import json, sys, pathlib\n"
        "out = pathlib.Path(sys.argv[sys.argv.index('--out') + 1])\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from tests.results.test_compare import record, write_run\n"
        "write_run(out, [record('c', 0, True, seconds=1.0)])\n"
        "(out / 'argv.json').write_text(json.dumps(sys.argv))\n",
        encoding="utf-8",
    )
    return ["python", str(script), str(Path(__file__).resolve().parents[2])]


def test_rerun_runs_the_commands_with_the_runs_folder_and_cache_setting(tmp_path, runs):
    figures = [{"name": "n", "run": "made", "condition": "c", "metric": "n", "expected": 1}]
    commands = {"make": [*run_maker(tmp_path), "--out", "{runs}/made"]}
    folder = experiment(tmp_path, figures, commands=commands)
    fresh = tmp_path / "fresh"
    assert main([str(folder), "--runs", str(fresh), "--rerun", "--cache", "off"]) == 0
    argv = json.loads((fresh / "made" / "argv.json").read_text())
    assert argv[-2:] == ["--cache", "off"] and argv[argv.index("--out") + 1] == f"{fresh}/made"


def test_only_reruns_the_named_commands_and_checks_just_their_figures(tmp_path, capsys):
    figures = [
        {"name": "cheap n", "run": "x/cheap", "condition": "c", "metric": "n", "expected": 1},
        {"name": "slow n", "run": "x/slow/test_run", "condition": "c", "metric": "n"},
        {
            "name": "pair",
            "compare": {"a": "x/cheap", "b": "x/slow/test_run", "condition": "c"}
            | {"condition_b": "c"},
            "metric": "n",
        },
    ]
    commands = {
        "cheap": [*run_maker(tmp_path), "--out", "{runs}/x/cheap"],
        "slow": ["python", "-c", "raise SystemExit(9)", "--out", "{runs}/x/slow"],
    }
    folder = experiment(tmp_path, figures, commands=commands)
    fresh = tmp_path / "fresh"
    argv = [str(folder), "--runs", str(fresh)]
    assert main([*argv, "--rerun", "--only", "cheap"]) == 0  # the failing command never ran
    out = capsys.readouterr().out
    assert "1 of 3 figures, from the runs of cheap; 2 not checked" in out
    assert "all 1 figures within tolerance (2 of 3 not checked)" in out
    assert "== cheap" in out and "== slow" not in out
    # The same folder checked later, without re-running, with the re-run tolerances.
    (folder / "experiment.json").write_text(
        json.dumps(
            {"commands": commands, "tolerance": 0.5, "figures": [figures[0] | {"expected": 1.4}]}
        ),
        encoding="utf-8",
    )
    assert main([*argv, "--only", "cheap"]) == 1  # 1 vs 1.4 is outside the re-scoring tolerance
    assert main([*argv, "--only", "cheap", "--tolerance", "rerun"]) == 0
    assert "re-scored with the re-run tolerances" in capsys.readouterr().out
    assert main([*argv, "--only", "fast"]) == 2
    assert "no command 'fast' in this experiment; choose from cheap, slow" in (
        capsys.readouterr().err
    )
    # --write with --only stores just the chosen figures and says which part it wrote.
    two = {"commands": commands, "figures": [figures[0] | {"expected": 7}, figures[1]]}
    (folder / "experiment.json").write_text(json.dumps(two), encoding="utf-8")
    assert main([*argv, "--only", "cheap", "--write"]) == 0
    stored = json.loads((folder / "experiment.json").read_text())
    assert stored["figures"][0]["expected"] == 1 and "expected" not in stored["figures"][1]
    assert stored["expected_written_parts"][0]["figures"] == 1
    assert "expected_written" not in stored
