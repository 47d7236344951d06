"""optimize.study: the search space, the objective and its call budget, resuming, workers.

The kill and worker tests run the study in child processes (tests/fixtures/opt_run_study.py)
with the fake LM; the others call ``run_compile`` or the study's parts directly.
"""

from __future__ import annotations

import json
import os
import signal
import time

import optuna
import pandas as pd
from opt_helpers import (
    load_study,
    quiet_optuna,  # noqa: F401 (an autouse fixture)
    run_tiny,
    spawn_study,
)
from optuna.trial import TrialState


def test_killed_study_resumes_where_it_stopped(tmp_path):
    first = spawn_study(tmp_path, 4, delay=0.15)
    seen = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = first.stdout.readline()
        seen.append(line)
        if line.startswith("trial   1"):
            break
        assert line or first.poll() is None, "".join(seen) + first.stderr.read()
    time.sleep(0.5)  # well inside trial 2 (each trial makes ~10 calls of 0.15 s)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    study = load_study(tmp_path)
    assert [t.state for t in study.trials][:2] == [TrialState.COMPLETE] * 2
    assert study.trials[-1].state == TrialState.RUNNING  # the trial the kill interrupted
    before = {t.number: t.params for t in study.trials[:2]}

    second = spawn_study(tmp_path, 4)
    stdout, stderr = second.communicate(timeout=60)
    assert second.returncode == 0, stderr
    study = load_study(tmp_path)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 4
    assert {t.number: t.params for t in complete[:2]} == before  # kept, not restarted
    interrupted = study.trials[2]
    assert interrupted.state == TrialState.FAIL and "reaped" in interrupted.user_attrs
    assert [t.number for t in complete] == [0, 1, 3, 4]
    assert (tmp_path / "test_score.json").is_file()


def test_two_workers_share_one_study_without_losing_trials(tiny, tmp_path):
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    workers = [
        spawn_study(tmp_path / f"w{i}", 4, "--workers-only", "--storage", storage, delay=0.08)
        for i in range(2)
    ]
    for worker in workers:
        stdout, stderr = worker.communicate(timeout=80)
        assert worker.returncode == 0, stderr
    study = optuna.load_study(study_name="frames-multihop", storage=storage)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 4
    assert not [t for t in study.trials if t.state == TrialState.RUNNING]
    # Anything else is a trial a worker started after the target was met, marked as such.
    assert all(t.user_attrs.get("surplus") for t in study.trials if t not in complete)
    assert len({t.user_attrs["worker"] for t in complete}) == 2
    assert not (tmp_path / "w0" / "test_score.json").exists()  # workers only run trials

    # The main command then joins the same study, adds nothing and does the final step.
    result, _ = run_tiny(tiny, tmp_path / "main", storage=storage, trials=4)
    assert result.complete_trials == 4 and result.test is not None


def test_max_lm_calls_stops_cleanly_and_keeps_the_trials(tiny, tmp_path):
    # Price the first trial (the seeded sampler proposes the same one again), then allow one
    # call more: the second trial starts, runs one question and is stopped before the next.
    run_tiny(tiny, tmp_path / "probe", trials=1)
    first_cost = load_study(tmp_path / "probe").trials[0].user_attrs["lm_calls_total"]
    limit = first_cost + 1
    result, lines = run_tiny(tiny, tmp_path, trials=10, max_lm_calls=limit)

    assert "max-lm-calls" in result.stopped
    study = load_study(tmp_path)
    states = [t.state for t in study.trials]
    assert states == [TrialState.COMPLETE, TrialState.PRUNED]
    assert "after 1/3 dev questions" in study.trials[1].user_attrs["stopped"]
    assert len(pd.read_csv(tmp_path / "trials.csv")) == 2
    assert (tmp_path / "program.json").is_file()  # the best trial so far, saved
    assert not (tmp_path / "test_score.json").exists()  # the test split was not touched
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["status"] == "stopped" and limit <= config["lm_calls"] < limit + 7
    assert any("max-lm-calls" in line for line in lines)

    # A rerun with more budget keeps both and carries on to the target.
    result, _ = run_tiny(tiny, tmp_path, trials=3)
    states = [t.state for t in load_study(tmp_path).trials]
    assert states.count(TrialState.COMPLETE) == 3 and states[:2] == [
        TrialState.COMPLETE,
        TrialState.PRUNED,
    ]
    assert result.test is not None


def test_search_space_ranges_bound_every_trial(tiny, tmp_path):
    run_tiny(tiny, tmp_path, rounds=(2, 2), k=(1, 2), n_docs=(3, 4), prompts=("vanilla",))
    trials = pd.read_csv(tmp_path / "trials.csv")
    assert set(trials["params_rounds"]) == {2}
    assert set(trials["params_k"]) <= {1, 2}
    assert set(trials["params_n_docs"]) <= {3, 4}
    assert set(trials["params_prompt"]) == {"vanilla"}
    space = json.loads((tmp_path / "config.json").read_text())["search_space"]
    assert space["rounds"] == [2, 2] and space["prompts"] == ["vanilla"]


def test_env_is_isolated():
    # conftest points the caches at temporary folders; subprocesses inherit them.
    assert "frames-dspy-tests-" in os.environ["FRAMES_DSPY_CACHE"]
