"""frames_dspy.commands.common: argument types whose errors name the flag, and the shared
option groups.

Both command lines (``frames_dspy.evaluate`` and ``optimize.compile``) add the model and data
options from their declarations (:class:`~frames_dspy.run.settings.ModelDataSettings`), and
``judge validate`` the judge's, through :func:`frames_dspy.commands.common.add_settings`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from frames_dspy.commands import compile as opt_compile
from frames_dspy.commands import evaluate
from frames_dspy.commands import judge as judge_main
from frames_dspy.commands.common import add_settings, choice_list, positive_int
from frames_dspy.run.settings import ModelDataSettings


def shared_parser() -> argparse.ArgumentParser:
    """The options of the shared settings, as evaluate (and compile) take them."""
    parser = argparse.ArgumentParser(prog="probe")
    add_settings(parser, ModelDataSettings, "evaluate")
    return parser


def groups(parser: argparse.ArgumentParser) -> dict[str, list[tuple]]:
    """Group title -> [(option strings, default, help)] of each option in the group."""
    return {
        group.title: [(tuple(a.option_strings), a.default, a.help) for a in group._group_actions]
        for group in parser._action_groups
    }


def error_of(parser: argparse.ArgumentParser, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


# --- argument types ---------------------------------------------------------------------------


def test_positive_int_accepts_whole_numbers_from_one():
    parse = positive_int("--threads")
    assert parse("1") == 1 and parse("16") == 16


@pytest.mark.parametrize(
    "text, message",
    [
        ("0", "--threads 0 must be at least 1"),
        ("-4", "--threads -4 must be at least 1"),
        ("two", "--threads 'two' is not a whole number"),
        ("2.5", "--threads '2.5' is not a whole number"),
    ],
)
def test_positive_int_errors_name_the_flag_and_the_value(text, message):
    with pytest.raises(argparse.ArgumentTypeError) as info:
        positive_int("--threads")(text)
    assert str(info.value) == message


def test_a_positive_int_error_reaches_the_user(capsys):
    parser = argparse.ArgumentParser(prog="probe")
    parser.add_argument("--max-lm-calls", type=positive_int("--max-lm-calls"))
    err = error_of(parser, ["--max-lm-calls", "0"], capsys)
    assert "argument --max-lm-calls: --max-lm-calls 0 must be at least 1" in err


def test_choice_list_keeps_the_order_given_and_trims_spaces():
    parse = choice_list(("vanilla", "planning"), "prompt(s)")
    assert parse("planning, vanilla") == ("planning", "vanilla")
    assert parse("vanilla,,") == ("vanilla",)


@pytest.mark.parametrize(
    "text, named",
    [("naive,bm25-3", "['bm25-3']"), ("oracle,x,y", "['x', 'y']"), (",", "[',']"), ("", "['']")],
)
def test_choice_list_names_the_unknown_entries_and_the_choices(text, named):
    parse = choice_list(("naive", "bm25-2", "oracle"), "condition(s)")
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse(text)
    assert str(info.value) == f"unknown condition(s) {named}; choose from naive, bm25-2, oracle"


# --- the shared option groups -----------------------------------------------------------------


def test_the_model_and_data_groups_hold_their_options():
    found = groups(shared_parser())
    assert [options for options, _, _ in found["models"]] == [
        # In the order ModelDataSettings declares them (frames_dspy.base.settings).
        ("--model",),
        ("--judge-model",),
        ("--api-base",),
        ("--judge-api-base",),
        ("--judge-protocol",),
        ("--temperature",),
        ("--max-tokens",),
        ("--judge-max-tokens",),
        ("--lm-timeout",),
        ("--cache",),
    ]
    assert [options for options, _, _ in found["data"]] == [
        ("--dataset",),
        ("--revision",),
        ("--corpus",),
        ("--aliases",),
        ("--distractors",),
        ("--wiki-api",),
        ("--retriever",),
    ]


def test_no_options_give_the_default_settings():
    args = shared_parser().parse_args([])
    # Every option lands on a settings field of the same name, with the same default.
    assert ModelDataSettings(**vars(args)) == ModelDataSettings()
    assert (args.model, args.temperature, args.max_tokens) == ("local", 0.0, 256)
    assert args.retriever == "bm25s" and args.judge_model is None


def test_options_become_settings():
    argv = [
        "--model",
        "openai/gpt-4o-mini",
        "--judge-model",
        "openai/gpt-4o",
        "--max-tokens",
        "64",
        "--corpus",
        "pages.jsonl",
        "--distractors",
        "none",
        "--retriever",
        "rank-bm25",
    ]
    settings = ModelDataSettings(**vars(shared_parser().parse_args(argv)))
    assert settings.model == "openai/gpt-4o-mini" and settings.judge_model == "openai/gpt-4o"
    assert settings.max_tokens == 64
    assert (settings.corpus, settings.distractors) == ("pages.jsonl", "none")
    assert settings.retriever == "rank-bm25"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--max-tokens", "0"], "--max-tokens 0 must be at least 1"),
        (["--retriever", "faiss"], "invalid choice: 'faiss'"),
        (["--lm-timeout", "soon"], "--lm-timeout 'soon' is not a number"),
        (["--temperature", "hot"], "invalid float value: 'hot'"),
    ],
)
def test_bad_shared_options_are_refused(argv, message, capsys):
    assert message in error_of(shared_parser(), argv, capsys)


def test_both_command_lines_share_the_groups_word_for_word():
    # Evaluate and compile take the same model and data options; judge validate's (the
    # shared helper's) model options are those the declarations give it, a subset.
    found_eval, found_compile = groups(evaluate.build_parser()), groups(opt_compile.build_parser())
    assert found_eval["models"] == found_compile["models"]
    assert found_eval["data"] == found_compile["data"]
    shared = groups(shared_parser())
    assert found_eval["models"] == shared["models"] and found_eval["data"] == shared["data"]
    assert found_eval["run"][0] == found_compile["run"][0] == shared["run"][0]  # --threads


def test_judge_validate_takes_the_judges_options_from_the_same_declarations():
    found_eval = groups(evaluate.build_parser())
    evaluates = {option for group in found_eval.values() for option in group}
    judge = groups(judge_main.build_parser()._subparsers._group_actions[0].choices["validate"])
    declared = [o for o in judge["judge"] if o[0] != ("--judge-protocol",)]
    assert [o[0] for o in declared] == [
        ("--judge-model",),
        ("--judge-api-base",),
        ("--lm-timeout",),
        ("--cache",),
        ("--threads",),
    ]
    assert all(o in evaluates for o in declared)  # word for word: flag, default and help


def test_the_flags_several_commands_share_are_declared_once():
    # --condition, --bootstrap, --json, --quiet, --dataset ... come from setting() declarations
    # (CompareConfig, CommandOutput, ModelDataSettings), never from a command's own add_argument.
    shared = (
        "--condition",
        "--condition-b",
        "--bootstrap",
        "--allow-different-corpus",
        "--json",
        "--quiet",
        "--dataset",
        "--revision",
        "--judge-model",
        "--judge-api-base",
        "--lm-timeout",
        "--cache",
        "--threads",
    )
    shells = sorted((Path(__file__).resolve().parents[2] / "frames_dspy" / "commands").glob("*.py"))
    assert len(shells) >= 9, shells
    for shell in shells:
        text = shell.read_text(encoding="utf-8")
        retyped = [flag for flag in shared if f'"{flag}",' in text or f'"{flag}")' in text]
        assert retyped == [], f"{shell} declares {retyped} itself"
