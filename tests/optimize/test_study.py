"""optimize.study: the search space, the objective and its call budget, resuming, workers.

The kill and worker tests run the study in child processes (tests/fixtures/opt_run_study.py)
with the fake LM; the others call ``run_compile`` or the study's parts directly.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import fields

import optuna
import pandas as pd
import pytest
from opt_helpers import (
    load_study,
    quiet_optuna,  # noqa: F401 (an autouse fixture)
    run_tiny,
    spawn_study,
)
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from frames_dspy.lm.accounting import CallBudget
from frames_dspy.results.records import QuestionRecord
from optimize.scores import TrialFigures
from optimize.space import SearchSpace
from optimize.study import (
    DevScore,
    Objective,
    SurplusTrial,
    count_active,
    reap_dead_local_trials,
    worker_id,
)


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


# --- the study's parts, without running programs -----------------------------------------------


def test_a_dev_score_per_question():
    empty = DevScore(wanted=3)
    assert (empty.accuracy, empty.tokens_per_q, empty.complete) == (0.0, 0.0, False)
    records = [
        QuestionRecord("trial-0", 1, correct=True, lm_calls=3, metered_tokens=1000,
                       prompt_tokens=280, completion_tokens=20),
        QuestionRecord("trial-0", 2, correct=True, lm_calls=2, metered_tokens=1000),
        QuestionRecord("trial-0", 3, correct=None, judge_method="judge_error", lm_calls=2,
                       metered_tokens=1001, prompt_tokens=500, completion_tokens=100),
    ]  # fmt: skip
    score = DevScore(wanted=3, records=records)
    attrs = score.attrs()
    assert score.complete
    assert attrs["accuracy"] == round(2 / 3, 6)
    assert attrs["tokens_per_q"] == 1000.33
    assert attrs["reported_tokens_per_q"] == 300.0
    assert attrs["lm_calls_per_q"] == 2.333
    assert attrs["n_questions"] == 3
    assert attrs["judge_errors"] == 1 and attrs["judge_calls"] == 1


FIXED = {  # a search space with a single configuration
    "rounds": IntDistribution(2, 2),
    "k": IntDistribution(1, 1),
    "n_docs": IntDistribution(1, 1),
    "prompt": CategoricalDistribution(["vanilla"]),
    "question_query": CategoricalDistribution([True]),
    "found_tokens": CategoricalDistribution([1000]),
    "lead_chars": CategoricalDistribution([120]),
}
ONLY = {
    "rounds": 2,
    "k": 1,
    "n_docs": 1,
    "prompt": "vanilla",
    "question_query": True,
    "found_tokens": 1000,
    "lead_chars": 120,
}


def objective(budget: CallBudget, target: int = 5) -> Objective:
    """An objective whose programs must never run: these trials end before scoring."""
    return Objective(
        space=SearchSpace(rounds=(2, 2), k=(1, 1), n_docs=(1, 1), prompts=("vanilla",)),
        dev=[],
        train=[],
        lm=None,
        autorater=None,
        store=None,
        retriever=None,
        context_tokens=400,
        budget=budget,
        target=target,
    )


def study_with_one_trial() -> optuna.Study:
    study = optuna.create_study(directions=["maximize", "minimize"])
    study.add_trial(
        optuna.trial.create_trial(
            params=ONLY,
            distributions=FIXED,
            values=[0.7, 500.0],
            user_attrs={"accuracy": 0.7, "worker": "elsewhere:1", "seconds": 30.0},
        )
    )
    return study


def test_a_repeated_configuration_reuses_the_earlier_result():
    study = study_with_one_trial()
    budget = CallBudget()
    study.optimize(objective(budget), n_trials=1)
    repeat = study.trials[1]
    assert repeat.state == TrialState.COMPLETE and repeat.values == [0.7, 500.0]
    assert repeat.user_attrs["duplicate_of"] == 0
    assert repeat.user_attrs["accuracy"] == 0.7  # the result is copied ...
    assert repeat.user_attrs["worker"] == worker_id()  # ... but not who ran it or how long
    assert "seconds" not in repeat.user_attrs
    assert budget.calls == 0


def test_a_trial_beyond_the_target_is_surplus():
    study = study_with_one_trial()
    study.optimize(objective(CallBudget(), target=1), n_trials=1, catch=(SurplusTrial,))
    surplus = study.trials[1]
    assert surplus.state == TrialState.FAIL and surplus.user_attrs["surplus"] is True
    assert surplus.params == {}  # it ended before choosing a configuration


def test_a_spent_budget_prunes_the_next_trial_before_it_starts():
    budget = CallBudget(limit=1)
    budget.calls = 1
    study = optuna.create_study(directions=["maximize", "minimize"])
    study.optimize(objective(budget), n_trials=1)
    [trial] = study.trials
    assert trial.state == TrialState.PRUNED
    assert trial.user_attrs["stopped"] == "max-lm-calls reached before the trial started"


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_running_trials_of_dead_local_workers_are_reaped():
    host = socket.gethostname()
    study = optuna.create_study(directions=["maximize", "minimize"])
    owners = {
        "dead": f"{host}:{dead_pid()}",
        "alive": f"{host}:{os.getppid()}",
        "this process": worker_id(),
        "other host": "another-machine:12345",
        "unknown": "",
    }
    numbers = {}
    for name, owner in owners.items():
        trial = study.ask()
        trial.set_user_attr("worker", owner)
        numbers[name] = trial.number
    done = study.ask()
    study.tell(done, [0.5, 100.0])
    states = (TrialState.COMPLETE, TrialState.RUNNING)
    assert len(study.get_trials(states=states)) == 6

    assert reap_dead_local_trials(study) == [numbers["dead"]]
    reaped = study.trials[numbers["dead"]]
    assert reaped.state == TrialState.FAIL
    assert reaped.user_attrs["reaped"] == f"worker {owners['dead']} had died"
    running = [t.number for t in study.trials if t.state == TrialState.RUNNING]
    assert running == [numbers[n] for n in ("alive", "this process", "other host", "unknown")]
    assert count_active(study) == 5
    assert count_active(study, below=numbers["other host"]) == 2  # alive, this process
    assert reap_dead_local_trials(study) == []  # nothing left to reap


def test_a_lift_study_can_pick_a_program_that_sends_no_lm_query(tiny, tmp_path):
    result, lines = run_tiny(
        tiny,
        tmp_path,
        objective="lift",
        trials=4,
        sampler="random",
        rounds=(1, 1),
        k=(1, 2),
        n_docs=(1, 1),
        prompts=("vanilla",),
        question_docs=(1,),
        phrase_docs=(0, 1),
        optimizer="gold-demos",
        optimize_in_trials=True,
    )
    trials = pd.read_csv(tmp_path / "trials.csv")
    assert set(trials["params_phrase_docs"]) <= {0, 1}
    # Every attribute a trial stores is one TrialFigures reads back typed.
    stored = {c.removeprefix("user_attrs_") for c in trials if c.startswith("user_attrs_")}
    assert {"label", "worker", "lift", "ref_best", "no_lm_recall", "lm_calls_total"} <= stored
    assert stored <= {f.name for f in fields(TrialFigures)}
    # Every trial carries both no-LM references at its own article count and its lift.
    for _, row in trials[trials["state"] == "COMPLETE"].iterrows():
        best = max(row["user_attrs_ref_bm25"], row["user_attrs_ref_phrases"])
        assert row["user_attrs_lift"] == pytest.approx(row["user_attrs_recall"] - best, abs=1e-5)
        assert row["values_lift"] == pytest.approx(row["user_attrs_lift"], abs=1e-5)
        writes = row["params_k"] - 1
        assert row["user_attrs_lm_queries_per_round"] == writes
        assert pd.isna(row["user_attrs_no_lm_recall"]) == (writes == 0)
    chosen = result.chosen
    assert chosen.lm_queries_per_round == chosen.params["k"] - 1
    if chosen.lm_queries_per_round == 0:
        assert any("the LM added nothing" in line for line in lines)
    else:
        assert any("its no-LM parts alone at the same budget" in line for line in lines)
    test = json.loads((tmp_path / "test_score.json").read_text())
    assert set(test["references"]) == {"bm25", "phrases"}
    assert any(line.startswith("test recall") for line in lines)


def test_a_study_of_both_kinds_tries_both_and_its_front_shows_both(tiny, tmp_path):
    # The multi-step program here is the question alone (cheap, half the gold articles); the
    # fake's agent reads both articles (dearer, correct): neither dominates the other.
    result, lines = run_tiny(
        tiny,
        tmp_path,
        kinds=("multihop", "agent"),
        trials=4,
        rounds=(1, 1),
        k=(1, 1),
        n_docs=(1, 1),
        prompts=("vanilla",),
        max_steps=(5, 6),
        max_articles=(2, 3),
    )
    trials = pd.read_csv(tmp_path / "trials.csv")
    assert set(trials["params_kind"]) == {"multihop", "agent"}
    agents = trials[trials["params_kind"] == "agent"]
    assert agents["params_rounds"].isna().all() and agents["params_max_steps"].notna().all()
    # An agent trial stores no attribute TrialFigures does not read back typed.
    stored = {c.removeprefix("user_attrs_") for c in trials if c.startswith("user_attrs_")}
    assert stored <= {f.name for f in fields(TrialFigures)}
    rows = [
        line
        for line in (tmp_path / "pareto.md").read_text().splitlines()
        if line.startswith("| ") and line[2].isdigit()
    ]
    assert {row.split("|")[2].strip() for row in rows} == {"vanilla", "agent"}
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["search_space"]["kinds"] == ["multihop", "agent"]
    assert any(line.startswith("trial ") and " agent s" in line for line in lines)
    assert result.chosen.kind == "agent"  # the higher objective ("best")
