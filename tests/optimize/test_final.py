"""optimize.final: the chosen program compiled, saved and tested; progress lines; the command."""

from __future__ import annotations

import dataclasses
import json
import shlex

import dspy
import optuna
import pytest
from opt_fake import FakeLM
from opt_helpers import (
    quiet_optuna,  # noqa: F401 (an autouse fixture)
    run_tiny,
)
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from frames_dspy.commands import evaluate
from frames_dspy.judge import Autorater
from frames_dspy.programs import build_program, load_program, save_program
from optimize.config import CompileConfig, NoCompleteTrials
from optimize.final import reproduce_command, trial_line
from optimize.optimizers import trim_demos


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


def test_bootstrap_random_search_runs_end_to_end(tiny, tmp_path):
    result, lines = run_tiny(
        tiny,
        tmp_path,
        trials=1,
        optimizer="bootstrap-rs",
        max_demos=1,
        optimizer_candidates=1,
        demo_chars=300,
    )
    info = result.chosen.compile
    assert info["optimizer"] == "bootstrap-rs" and info["dev_accuracy_after"] is not None
    assert info["compiled"].startswith(("kept", "discarded"))
    info = json.loads((tmp_path / "program.json").read_text())["frames_dspy_info"]
    assert info["optimize"]["compile"]["optimizer"] == "bootstrap-rs"
    assert any("bootstrap-rs" in line for line in lines)  # in the estimate and the log
    assert (tmp_path / "test_score.json").is_file()


AGENT = {"kinds": ("agent",), "max_steps": (5, 6), "max_articles": (2, 3), "n_docs": (1, 2)}


@pytest.mark.parametrize("in_trials", [False, True])
def test_an_agent_pick_is_compiled_by_bootstrap_rs_and_saved(tiny, tmp_path, in_trials):
    examples, store, knowledge, retriever = tiny
    result, lines = run_tiny(
        tiny,
        tmp_path,
        trials=1,
        optimizer="bootstrap-rs",
        optimize_in_trials=in_trials,
        max_demos=1,
        optimizer_candidates=1,
        **AGENT,
    )
    info = result.chosen.compile
    expected = "inside the trial" if in_trials else ("kept", "discarded")
    assert info["compiled"].startswith(expected)  # compiled, not skipped for want of queries
    program, spec, saved = load_program(tmp_path / "program.json", retriever=retriever, store=store)
    assert spec.kind == "agent" and saved["optimize"]["compile"]["optimizer"] == "bootstrap-rs"
    assert {name for name, _ in program.named_predictors()} == {"choose", "answer"}
    assert result.test.reference.n == result.test.figures.n


PARAMS = {"rounds": 2, "k": 3, "n_docs": 4, "prompt": "vanilla"}
SPACE = {
    "rounds": IntDistribution(1, 5),
    "k": IntDistribution(1, 5),
    "n_docs": IntDistribution(1, 10),
    "prompt": CategoricalDistribution(["vanilla", "planning"]),
}


def frozen(number: int, state=TrialState.COMPLETE, values=None, **attrs):
    trial = optuna.trial.create_trial(
        state=state,
        values=values,
        params=PARAMS,
        distributions=SPACE,
        user_attrs={"lm_calls_per_q": 3.0, "judge_errors": 1, "seconds": 12.4, **attrs},
    )
    trial.number = number
    return trial


def test_a_progress_line_per_finished_trial():
    done = trial_line(frozen(4, values=[0.5, 1234.4]))
    assert done.startswith("trial   4  vanilla r2 k3 n4")
    for part in ("acc 0.500", "tok/q     1234", "calls/q 3.0", "judge err 1", "12s"):
        assert part in done
    assert "reused" not in done
    reused = trial_line(frozen(5, values=[0.5, 1234.4], duplicate_of=4))
    assert reused.endswith("(same as trial 4, reused)")
    stopped = trial_line(
        frozen(6, TrialState.PRUNED, stopped="max-lm-calls reached after 1/3 dev questions")
    )
    assert stopped.endswith("stopped: max-lm-calls reached after 1/3 dev questions")
    assert trial_line(frozen(7, TrialState.FAIL)).endswith("fail")
    surplus = optuna.trial.create_trial(state=TrialState.FAIL, user_attrs={"surplus": True})
    surplus.number = 8
    assert trial_line(surplus) == "trial   8  skipped: the study already holds its trials"


def evaluate_args(command: str):
    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "frames_dspy.evaluate"]
    return evaluate.build_parser().parse_args(argv[3:])


def test_the_reproduce_command_is_an_evaluate_command_with_the_same_settings(tmp_path):
    config = CompileConfig(
        model="openai/gpt-4o-mini",
        api_base="http://lm:8000/v1",
        judge_model="openai/gpt-4o",
        temperature=0.2,
        max_tokens=99,
        dataset="data/frames test.csv",
        corpus="data/pages.jsonl",
        distractors="none",
        retriever="rank-bm25",
        train=5,
        dev=7,
        seed=3,
        test_limit=9,
    )
    out = tmp_path / "opt run"  # a space, to check the quoting
    args = evaluate_args(reproduce_command(config, out))
    assert args.program == str(out / "program.json")
    assert (args.split, args.train, args.dev, args.seed, args.limit) == ("test", 5, 7, 3, 9)
    assert (args.model, args.api_base) == ("openai/gpt-4o-mini", "http://lm:8000/v1")
    assert (args.judge_model, args.judge_api_base) == ("openai/gpt-4o", None)
    assert (args.temperature, args.max_tokens) == (0.2, 99)
    assert (args.dataset, args.corpus, args.distractors) == (
        "data/frames test.csv",
        "data/pages.jsonl",
        "none",
    )
    assert args.retriever == "rank-bm25" and args.aliases is None
    assert args.out == str(out / "test_rerun")
    # The budget is in program.json; the whole test split is scored without a limit.
    assert args.context_tokens is None
    every = dataclasses.replace(config, test_limit=None)
    assert evaluate_args(reproduce_command(every, out)).limit is None


def test_a_study_without_a_complete_trial_stops_with_nothing_picked(tiny, tmp_path):
    with pytest.raises(NoCompleteTrials, match="holds no complete trial") as info:
        run_tiny(tiny, tmp_path, trials=1, max_lm_calls=1)
    assert "--max-lm-calls 1 reached" in str(info.value)
    assert "Rerun with a larger --max-lm-calls" in str(info.value)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["status"] == "no complete trial" and config["lm_calls"] >= 1
    assert (tmp_path / "trials.csv").is_file()
    assert not (tmp_path / "program.json").exists()
