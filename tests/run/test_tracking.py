"""Tests for frames_dspy.run.tracking: runs, conditions, trials and traces in a real MLflow store.

Every test writes a real local SQLite tracking store (MLflow's own client, no mock) in a
temporary folder and reads it back with MLflow's search API.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import mlflow
import pytest
from opt_helpers import quiet_optuna, run_tiny  # noqa: F401 (quiet_optuna: an autouse fixture)

from frames_dspy.commands import evaluate
from frames_dspy.run.evaluation import run_evaluation
from frames_dspy.run.tracking import TrackingUnavailable, check_tracking, store_uri
from tests.commands.test_evaluate import LEITH, config_for, judge, program_lm


@pytest.fixture(autouse=True)
def _leave_mlflow_as_found():
    yield
    mlflow.dspy.autolog(disable=True)
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri(None)


def runs_in(store: Path, experiment: str = "frames-dspy"):
    mlflow.set_tracking_uri(store_uri(str(store))[0])
    return mlflow.search_runs(experiment_names=[experiment], output_format="list")


def test_a_folder_is_a_sqlite_store_and_a_uri_is_kept(tmp_path):
    uri, artifacts = store_uri(str(tmp_path / "mlruns"))
    assert uri == f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    assert artifacts == (tmp_path / "mlruns" / "artifacts").as_uri()
    assert store_uri("http://127.0.0.1:5000") == ("http://127.0.0.1:5000", None)
    assert store_uri("sqlite:////tmp/x.db") == ("sqlite:////tmp/x.db", None)


def test_evaluate_logs_a_run_per_condition_with_the_folder_as_artifacts(data, tmp_path):
    store = tmp_path / "mlruns"
    out = tmp_path / "run"
    summary = run_evaluation(
        config_for(data, out, mlflow=str(store), mlflow_experiment="frames-dspy"),
        lm=program_lm(LEITH),
        judge_lm=judge(),
        progress=False,
    )
    runs = runs_in(store)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 6
    parent = parents[0]
    assert parent.data.params["settings.rounds"] == "2"
    assert parent.data.tags["frames.run_folder"] == str(out.resolve())
    by_condition = {r.data.tags["frames.condition"]: r for r in children}
    assert set(by_condition) == set(summary.rows)
    for name, row in summary.rows.items():
        child = by_condition[name]
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert child.data.metrics["accuracy"] == pytest.approx(row.accuracy)
        assert child.data.metrics["n"] == row.n
        assert (
            child.data.params["program.kind"]
            == json.loads((out / "config.json").read_text())["programs"][name]["kind"]
        )
    assert by_condition["oracle"].data.metrics["answer_in_context"] == pytest.approx(2 / 3)
    assert by_condition["multistep-vanilla"].data.metrics["recall_final"] == pytest.approx(1.0)
    vanilla = by_condition["multistep-vanilla"].data.metrics
    assert vanilla["near_repeat_rate"] == pytest.approx(
        summary.rows["multistep-vanilla"].near_repeat_rate
    )
    assert "steps_per_question" not in vanilla  # an agent's figure: not logged as a zero
    client = mlflow.MlflowClient()
    history = client.get_metric_history(
        by_condition["multistep-vanilla"].info.run_id, "recall_by_round"
    )
    assert [m.step for m in history] == [1, 2]
    files = {f.path for f in client.list_artifacts(parent.info.run_id, "run_folder")}
    for name in ("report.html", "predictions.jsonl", "summary.json", "config.json", "table.md"):
        assert f"run_folder/{name}" in files
    local = client.download_artifacts(parent.info.run_id, "run_folder/report.html", str(tmp_path))
    assert Path(local).read_bytes() == (out / "report.html").read_bytes()


def test_traces_of_dspy_calls_go_to_the_store(data, tmp_path):
    store = tmp_path / "mlruns"
    settings = config_for(
        data, tmp_path / "run", conditions=["naive"], mlflow=str(store), mlflow_traces=True
    )
    run_evaluation(settings, lm=program_lm(), judge_lm=judge(), progress=False)
    runs_in(store)
    experiment = mlflow.get_experiment_by_name("frames-dspy")
    traces = mlflow.search_traces(locations=[experiment.experiment_id], return_type="list")
    # Three naive questions: one program call each, and the judge for the answers no rule
    # decides; every one a trace with its spans.
    assert len(traces) >= 3
    names = {span.name for trace in traces for span in trace.data.spans}
    assert any(name.startswith("Naive") for name in names), names
    assert any("Predict" in name for name in names), names


def test_a_study_logs_one_run_per_complete_trial(tiny, tmp_path):
    store = tmp_path / "mlruns"
    result, _ = run_tiny(tiny, tmp_path / "opt", mlflow=str(store))
    runs = runs_in(store)
    study = [r for r in runs if r.data.tags.get("frames.kind") == "study"]
    trials = [r for r in runs if "frames.trial" in r.data.tags]
    evaluations = [r for r in runs if r.data.tags.get("frames.kind") == "evaluate"]
    assert len(study) == 1 and len(trials) == result.complete_trials == 2
    assert {r.data.tags["mlflow.parentRunId"] for r in trials} == {study[0].info.run_id}
    chosen = [r for r in trials if r.data.tags["frames.chosen"] == "true"]
    assert [int(r.data.tags["frames.trial"]) for r in chosen] == [result.chosen.trial]
    for trial in trials:
        assert {"trial.rounds", "trial.k", "trial.n_docs", "trial.prompt"} <= set(trial.data.params)
        assert {"objective", "tokens_per_question", "accuracy"} <= set(trial.data.metrics)
    # The held-out test run is an evaluation like any other, with its report.html.
    assert len(evaluations) == 1
    files = {
        f.path
        for f in mlflow.MlflowClient().list_artifacts(evaluations[0].info.run_id, "run_folder")
    }
    assert "run_folder/report.html" in files
    artifacts = {f.path for f in mlflow.MlflowClient().list_artifacts(study[0].info.run_id)}
    assert {"trials.csv", "pareto.md", "program.json", "config.json"} <= artifacts
    assert "study.db" not in artifacts


def test_without_mlflow_the_flag_fails_before_anything_runs(data, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow now fails
    settings = config_for(data, tmp_path / "run", mlflow="mlruns")
    with pytest.raises(TrackingUnavailable, match=r"pip install -e '\.\[mlflow\]'"):
        check_tracking(settings)
    code = evaluate.main(
        ["--dataset", str(data["dataset"]), "--corpus", str(data["corpus"]), "--distractors",
         "none", "--conditions", "naive", "--out", str(tmp_path / "run"), "--mlflow"]
    )  # fmt: skip
    assert code == 2
    assert "--mlflow needs MLflow" in capsys.readouterr().err
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def test_the_flags_parse():
    args = evaluate.build_parser().parse_args(["--mlflow"])
    assert args.mlflow == "mlruns" and args.mlflow_traces is False
    args = evaluate.build_parser().parse_args(["--mlflow", "sqlite:///x.db", "--mlflow-traces"])
    assert args.mlflow == "sqlite:///x.db" and args.mlflow_traces is True
    assert evaluate.build_parser().parse_args([]).mlflow is None
