"""optimize.compile: the study, resuming, workers, the call budget, optimizers, the files.

Everything runs offline on a fake LM that answers any signature (tests/fixtures/opt_fake.py)
and twelve two-hop questions over a tiny in-code corpus.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dspy
import optuna
import pandas as pd
import pytest
from optuna.trial import TrialState

from frames_dspy.evaluation import EvalConfig, run_evaluation
from frames_dspy.metrics import Autorater
from frames_dspy.programs import build_program, load_program, save_program
from frames_dspy.retrieval import build_retriever
from optimize import compile as opt_compile
from optimize.compile import CompileConfig, run_compile
from optimize.cost import estimate_cost, question_cost
from optimize.optimizers import (
    FeedbackMetric,
    ObjectiveMetric,
    OptimizerSettings,
    trim_demos,
)
from optimize.pareto import PickRule, parse_pick, pick_trial
from optimize.study import SearchSpace

FIXTURES = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))

from opt_fake import FakeLM, tiny_data  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCRIPT = FIXTURES / "opt_run_study.py"


@pytest.fixture(autouse=True)
def _quiet_optuna():
    optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(scope="module")
def tiny():
    examples, store, knowledge = tiny_data()
    return examples, store, knowledge, build_retriever(store)


def _config(out: Path, **overrides) -> CompileConfig:
    values = dict(
        model="fake",
        dataset="tiny-in-code",
        train=3,
        dev=3,
        test_limit=2,
        trials=2,
        context_tokens=400,
        out=str(out),
    )
    values.update(overrides)
    return CompileConfig(**values)


def _run(tiny, out: Path, **overrides):
    examples, store, knowledge, retriever = tiny
    lines: list[str] = []
    result = run_compile(
        _config(out, **overrides),
        lm=FakeLM(knowledge),
        examples=examples,
        store=store,
        retriever=retriever,
        progress=lines.append,
    )
    return result, lines


def _study(out: Path, name: str = "frames-multihop") -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{out / 'study.db'}")


def _spawn(out: Path, trials: int, *extra: str, delay: float = 0.0) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), "--out", str(out), "--trials", str(trials)]
        + ["--delay", str(delay), *extra],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_trial_study_writes_every_file_and_a_reproducible_test_score(tiny, tmp_path):
    result, lines = _run(tiny, tmp_path)

    for name in (
        "program.json",
        "config.json",
        "trials.csv",
        "pareto.md",
        "pareto.png",
        "test_score.json",
    ):
        assert (tmp_path / name).is_file(), name
    assert (tmp_path / "pareto.png").read_bytes()[:4] == b"\x89PNG"
    assert len(_study(tmp_path).trials) == 2
    trials = pd.read_csv(tmp_path / "trials.csv")
    assert len(trials) == 2 and set(trials["state"]) == {"COMPLETE"}
    for column in (
        "params_rounds",
        "params_k",
        "params_n_docs",
        "params_prompt",
        "user_attrs_accuracy",
        "user_attrs_tokens_per_q",
        "user_attrs_lm_calls_per_q",
        "user_attrs_judge_errors",
        "user_attrs_seconds",
    ):
        assert column in trials.columns, column
    assert "| trial | prompt |" in (tmp_path / "pareto.md").read_text()
    assert any(line.startswith("Cost estimate") for line in lines)
    assert sum(line.startswith("trial ") for line in lines) == 2

    config = json.loads((tmp_path / "config.json").read_text())
    assert config["status"] == "done"
    assert config["splits"]["train"] == 3 and config["splits"]["dev"] == 3
    assert config["seeds"]["split"] == 0 and config["dataset_sha256"]
    command = config["reproduce"]
    for part in ("--split test", "--train 3", "--dev 3", "--seed 0", "--limit 2"):
        assert part in command
    assert "program.json" in command
    # The budget travels inside program.json, so the command need not repeat it.
    saved = json.loads((tmp_path / "program.json").read_text())["frames_dspy_spec"]
    assert saved["context_tokens"] == 400 and "--context-tokens" not in command

    # The command's settings, run through evaluate's machinery, give the same test score.
    score = json.loads((tmp_path / "test_score.json").read_text())
    assert score["n"] == 2 and score["reproduce"] == command
    examples, store, knowledge, retriever = tiny
    rerun = run_evaluation(
        EvalConfig(
            conditions=["program"],
            program=str(tmp_path / "program.json"),
            model="fake",
            split="test",
            train=3,
            dev=3,
            seed=0,
            limit=2,
            out=str(tmp_path / "rerun"),
        ),
        lm=FakeLM(knowledge),
        examples=examples,
        store=store,
        retriever=retriever,
        progress=False,
    )["program"]
    assert rerun["accuracy"] == score["accuracy"] and rerun["n"] == score["n"]

    # Rerunning the finished command does no new trial and rescores nothing.
    again, lines = _run(tiny, tmp_path)
    assert len(_study(tmp_path).trials) == 2
    assert not any(
        line.startswith("trial ") and "acc" in line and "chosen" not in line for line in lines
    )
    assert again.test["accuracy"] == score["accuracy"]


def test_killed_study_resumes_where_it_stopped(tmp_path):
    first = _spawn(tmp_path, 4, delay=0.15)
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
    study = _study(tmp_path)
    assert [t.state for t in study.trials][:2] == [TrialState.COMPLETE] * 2
    assert study.trials[-1].state == TrialState.RUNNING  # the trial the kill interrupted
    before = {t.number: t.params for t in study.trials[:2]}

    second = _spawn(tmp_path, 4)
    stdout, stderr = second.communicate(timeout=60)
    assert second.returncode == 0, stderr
    study = _study(tmp_path)
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
        _spawn(tmp_path / f"w{i}", 4, "--workers-only", "--storage", storage, delay=0.08)
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
    result, _ = _run(tiny, tmp_path / "main", storage=storage, trials=4)
    assert result.complete_trials == 4 and result.test is not None


def test_compiled_program_round_trips_through_program_json(tiny, tmp_path):
    examples, store, knowledge, retriever = tiny
    lm = FakeLM(knowledge)
    spec = {"kind": "multihop", "rounds": 2, "k": 2, "n_docs": 2, "planning": True}
    program = build_program(spec, retriever=retriever, store=store, context_tokens=400)
    with dspy.context(lm=lm):
        compiled = dspy.BootstrapFewShot(
            metric=Autorater(lm), max_bootstrapped_demos=1, max_labeled_demos=0
        ).compile(program, trainset=examples[:3])
    assert trim_demos(compiled, 200) > 0  # the answer demo's context was cut
    assert all(len(d["context"]) <= 202 for d in compiled.answer.demos)
    path = tmp_path / "program.json"
    save_program(compiled, str(path), extra={"optimize": {"trial": 7}})

    loaded, saved_spec, info = load_program(
        str(path), retriever=retriever, store=store, context_tokens=400
    )
    assert info["optimize"] == {"trial": 7} and saved_spec.rounds == 2
    assert loaded.dump_state() == compiled.dump_state()
    with dspy.context(lm=lm):
        for example in examples[3:6]:
            a, b = compiled(question=example.question), loaded(question=example.question)
            assert (a.answer, a.queries, a.context_ids) == (b.answer, b.queries, b.context_ids)


def test_max_lm_calls_stops_cleanly_and_keeps_the_trials(tiny, tmp_path):
    # Price the first trial (the seeded sampler proposes the same one again), then allow one
    # call more: the second trial starts, runs one question and is stopped before the next.
    _run(tiny, tmp_path / "probe", trials=1)
    first_cost = _study(tmp_path / "probe").trials[0].user_attrs["lm_calls_total"]
    limit = first_cost + 1
    result, lines = _run(tiny, tmp_path, trials=10, max_lm_calls=limit)

    assert "max-lm-calls" in result.stopped
    study = _study(tmp_path)
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
    result, _ = _run(tiny, tmp_path, trials=3)
    states = [t.state for t in _study(tmp_path).trials]
    assert states.count(TrialState.COMPLETE) == 3 and states[:2] == [
        TrialState.COMPLETE,
        TrialState.PRUNED,
    ]
    assert result.test is not None


def test_bootstrap_random_search_runs_end_to_end(tiny, tmp_path):
    result, lines = _run(
        tiny,
        tmp_path,
        trials=1,
        optimizer="bootstrap-rs",
        max_demos=1,
        optimizer_candidates=1,
        demo_chars=300,
    )
    info = result.chosen["compile"]
    assert info["optimizer"] == "bootstrap-rs" and info["dev_accuracy_after"] is not None
    assert info["compiled"].startswith(("kept", "discarded"))
    info = json.loads((tmp_path / "program.json").read_text())["frames_dspy_info"]
    assert info["optimize"]["compile"]["optimizer"] == "bootstrap-rs"
    assert any("bootstrap-rs" in line for line in lines)  # in the estimate and the log
    assert (tmp_path / "test_score.json").is_file()


def test_a_study_made_with_other_settings_is_not_resumed(tiny, tmp_path):
    _run(tiny, tmp_path, trials=1, test_limit=1)
    with pytest.raises(ValueError, match="other settings.*context_tokens"):
        _run(tiny, tmp_path, trials=1, test_limit=1, context_tokens=500)


def test_pick_rules_choose_from_the_front():
    def trial(number, acc, tokens):
        made = optuna.trial.create_trial(values=[acc, tokens])
        made.number = number
        return made

    front = [trial(0, 0.50, 1000.0), trial(1, 0.60, 3000.0), trial(2, 0.59, 1500.0)]
    assert pick_trial(front, PickRule()).number == 1
    assert pick_trial(front, parse_pick("cheapest-within:0.02")).number == 2
    assert pick_trial(front, parse_pick("cheapest-within:0.2")).number == 0
    tie = [trial(3, 0.6, 2000.0), trial(4, 0.6, 1800.0)]
    assert pick_trial(tie, PickRule()).number == 4  # equal accuracy: fewer tokens
    with pytest.raises(ValueError, match="cheapest-within:TOL"):
        parse_pick("cheapest")


def test_cost_estimate_follows_the_program_shape():
    one = {"rounds": 3, "k": 1, "n_docs": 4, "prompt": "planning"}
    assert question_cost(one, context_tokens=1000)[0] == 1  # k=1: the question is the query
    calls, tokens = question_cost({**one, "k": 3}, context_tokens=1000)
    assert calls == 4 and tokens > 1000
    estimate = estimate_cost(
        space=SearchSpace(),
        trials=10,
        n_train=5,
        n_dev=20,
        n_test=50,
        context_tokens=2000,
        optimizer=OptimizerSettings(name="mipro"),
    )
    assert [p.name for p in estimate.phases] == ["study", "mipro", "test"]
    assert estimate.calls > 10 * 20 and "assumptions" in "\n".join(estimate.lines())


def test_gepa_feedback_metric_has_gepas_signature(tiny):
    examples, store, knowledge, _ = tiny
    metric = FeedbackMetric(Autorater(FakeLM(knowledge)), store)
    pred = dspy.Prediction(answer="1843", context_ids=[[]])
    out = metric(examples[0], pred, None, "generate.predict", None)
    assert out.score == 1.0 and "Correct" in out.feedback and "they missed:" in out.feedback
    gold = [a.title for a in store.resolve_many(examples[0].gold_urls)]
    assert gold and all(title in out.feedback for title in gold)  # the missed articles, named
    wrong = metric(examples[0], dspy.Prediction(answer="no idea"), None, None, None)
    assert wrong.score == 0.0 and "1843" in wrong.feedback
    found = [a.id for a in store.resolve_many(examples[0].gold_urls)]
    right = metric(examples[0], dspy.Prediction(answer="x", context_ids=[found]), None, None, None)
    assert "they missed" not in right.feedback and f"found {len(found)} of" in right.feedback


def test_objective_metrics_score_recall_and_break_ties(tiny):
    examples, store, knowledge, _ = tiny
    autorater = Autorater(FakeLM(knowledge))
    example = examples[0]
    gold = [a.id for a in store.resolve_many(example.gold_urls)]
    half = dspy.Prediction(answer="no idea", context_ids=[gold[:1]])
    full = dspy.Prediction(answer="1843", context_ids=[gold])
    recall = ObjectiveMetric("recall", autorater, store)
    assert recall(example, half) == pytest.approx(1 / len(gold))
    assert recall(example, full) == 1.0 and recall(example, full, trace=True) is True
    both = ObjectiveMetric("accuracy+recall", autorater, store, n=9)
    assert both(example, half) == pytest.approx(1 / len(gold) / 10)  # less than 1 question
    assert both(example, full) == pytest.approx(1.1)
    with pytest.raises(ValueError, match="needs the article store"):
        ObjectiveMetric("recall", autorater)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--trials", "-1"], "--trials -1"),
        (["--pick", "cheap"], "cheapest-within:TOL"),
        (["--optimizer", "magic"], "invalid choice"),
        (["--optimize-in-trials"], "needs an --optimizer"),
        (["--max-lm-calls", "0"], "at least 1"),
        (["--test-limit", "x"], "not a number"),
        (["--workers-only"], "needs the study to join"),
    ],
)
def test_bad_input_exits_non_zero_with_a_clear_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        opt_compile.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_help_teaches(capsys):
    with pytest.raises(SystemExit):
        opt_compile.main(["--help"])
    text = capsys.readouterr().out
    for word in ("--workers-only", "--max-lm-calls", "examples:", "Pareto", "--storage"):
        assert word in text


def test_missing_corpus_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("FRAMES_DATA_DIR", raising=False)
    csv = Path(__file__).parent / "fixtures" / "tiny" / "frames.csv"
    code = opt_compile.main(
        ["--dataset", str(csv), "--train", "1", "--dev", "1", "--out", str(tmp_path)]
    )
    assert code == 2 and "--corpus" in capsys.readouterr().err


def test_storage_url_must_be_a_database_url(tiny, tmp_path):
    with pytest.raises(ValueError, match="not a database URL"):
        _run(tiny, tmp_path, storage="study.db")


def test_env_is_isolated():
    # conftest points the caches at temporary folders; subprocesses inherit them.
    assert "frames-dspy-tests-" in os.environ["FRAMES_DSPY_CACHE"]


def test_search_space_ranges_bound_every_trial(tiny, tmp_path):
    _run(tiny, tmp_path, rounds=(2, 2), k=(1, 2), n_docs=(3, 4), prompts=("vanilla",))
    trials = pd.read_csv(tmp_path / "trials.csv")
    assert set(trials["params_rounds"]) == {2}
    assert set(trials["params_k"]) <= {1, 2}
    assert set(trials["params_n_docs"]) <= {3, 4}
    assert set(trials["params_prompt"]) == {"vanilla"}
    space = json.loads((tmp_path / "config.json").read_text())["search_space"]
    assert space["rounds"] == [2, 2] and space["prompts"] == ["vanilla"]
