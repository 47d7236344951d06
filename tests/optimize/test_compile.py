"""optimize.compile: a whole run end to end, and its command line (bad input, help).

Everything runs offline on a fake LM that answers any signature (tests/fixtures/opt_fake.py)
and twelve two-hop questions over a tiny in-code corpus (tests/fixtures/opt_helpers.py).
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from opt_fake import FakeLM
from opt_helpers import (
    compile_refuses,
    config_of,
    load_study,
    quiet_optuna,  # noqa: F401 (an autouse fixture)
    run_tiny,
)

from frames_dspy.commands import compile as opt_compile
from frames_dspy.results.summary import summarize_records
from frames_dspy.run.evaluation import EvalConfig, run_evaluation
from optimize.compilation import outcome_lines
from optimize.scores import ChosenTrial, TestScore


def test_two_trial_study_writes_every_file_and_a_reproducible_test_score(tiny, tmp_path, caplog):
    result, lines = run_tiny(tiny, tmp_path)
    assert "SELF-JUDGING" in caplog.text  # no judge given: the program's model judges itself

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
    assert len(load_study(tmp_path).trials) == 2
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
    assert config["settings"]["threads"] == 1  # the number used is recorded
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
    ).rows["program"]
    assert rerun.accuracy == score["accuracy"] and rerun.n == score["n"]

    # Rerunning the finished command does no new trial and rescores nothing.
    again, lines = run_tiny(tiny, tmp_path)
    assert len(load_study(tmp_path).trials) == 2
    assert not any(
        line.startswith("trial ") and "acc" in line and "chosen" not in line for line in lines
    )
    assert again.test.figures.accuracy == score["accuracy"]


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
    assert message in compile_refuses(argv, capsys)


def test_help_teaches(capsys):
    with pytest.raises(SystemExit):
        opt_compile.main(["--help"])
    text = capsys.readouterr().out
    for word in ("--workers-only", "--max-lm-calls", "examples:", "Pareto", "--storage"):
        assert word in text


def test_missing_corpus_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("FRAMES_DATA_DIR", raising=False)
    csv = Path(__file__).parents[1] / "fixtures" / "tiny" / "frames.csv"
    code = opt_compile.main(
        ["--dataset", str(csv), "--train", "1", "--dev", "1", "--out", str(tmp_path)]
    )
    assert code == 2 and "--corpus" in capsys.readouterr().err


def test_ranges_limits_and_picks_parse_into_the_config():
    argv = ["--rounds", "2-4", "--k", "3", "--n-docs", "1-10", "--prompts", "planning"]
    argv += ["--test-limit", "all", "--pick", " cheapest-within:0.020 ", "--instructions-only"]
    config = config_of(argv)
    assert (config.rounds, config.k, config.n_docs) == ((2, 4), (3, 3), (1, 10))
    assert config.prompts == ("planning",) and config.test_limit is None
    assert config.pick == "cheapest-within:0.02" and config.instructions_only is True
    defaults = opt_compile.build_parser().parse_args([])
    assert (defaults.rounds, defaults.test_limit, defaults.instructions_only) == ((1, 5), 50, None)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--rounds", "0-2"], "range '0-2' must satisfy 1 <= low <= high"),
        (["--k", "4-2"], "range '4-2' must satisfy 1 <= low <= high"),
        (["--n-docs", "a-b"], "'a-b' is not a range like 1-5 or a number"),
        (["--prompts", "planning,magic"], "unknown prompt(s) ['magic']"),
        (["--test-limit", "-3"], "--test-limit -3 must be at least 1 (or 'all')"),
        (["--context-tokens", "0"], "--context-tokens 0 must be at least 1"),
        (["--sampler", "grid"], "invalid choice: 'grid'"),
    ],
)
def test_bad_search_options_are_refused(argv, message, capsys):
    assert message in compile_refuses(argv, capsys)


def test_the_outcome_of_a_recall_or_lift_study_shows_recall_and_no_accuracy():
    chosen = ChosenTrial(
        **{f.name: None for f in fields(ChosenTrial)}
        | dict(
            trial=0,
            label="titles r2 k2",
            objective="lift",
            dev_objective=0.033,
            dev_accuracy=0.0,
            dev_recall=0.906,
            dev_tokens_per_q=1360.0,
        )
    )
    figures = replace(
        summarize_records([]),
        n=100,
        accuracy=0.0,
        ci95=(0.0, 0.04),
        tokens_per_question=1449.0,
        recall_by_round=[0.849, 0.909],
    )
    test = TestScore(figures, 100, 824, "sha", "python -m ...", None, {})
    result = SimpleNamespace(chosen=chosen, test=test)
    lift = outcome_lines(result, "lift")
    assert lift == [
        "chosen: trial 0 (titles r2 k2), dev lift 0.033 (recall 0.906), 1360 tokens/q",
        "test: final recall 0.909 on 100 questions (retrieval only: no accuracy measured), "
        "1449 tokens/q",
    ]
    accuracy = outcome_lines(result, "accuracy")
    assert "(accuracy 0.000, recall 0.906)" in accuracy[0]
    assert accuracy[1].startswith("test: accuracy 0.000 on 100 questions (95% CI 0.00-0.04)")
