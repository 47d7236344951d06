"""frames_dspy.base.settings: each setting declared once; options, records and commands derived."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from frames_dspy.base.settings import Option, command_args, options, setting, settings_markdown
from frames_dspy.commands import evaluate
from frames_dspy.run.evaluation import EvalConfig
from frames_dspy.run.settings import ModelDataSettings

REPO = Path(__file__).resolve().parents[2]


def test_every_evaluate_setting_is_declared_with_an_option():
    undeclared = [f.name for f in dataclasses.fields(EvalConfig) if "option" not in f.metadata]
    assert undeclared == []
    flags = [option.flag for _, option, _ in options(EvalConfig, "evaluate")]
    assert len(flags) == len(set(flags))  # one flag, one setting
    assert "--autorater" not in flags  # a record, not an option


def test_the_command_of_a_config_parses_back_to_it():
    config = EvalConfig(
        conditions=["naive", "bm25-12"], split="dev", train=7, dev=3, limit=4, ids=[1, 2, 5],
        rounds=2, k=1, n_docs=3, include_question=False, cot=True, retrieval_only=True,
        threads=2, out="runs/x y", seed=9, max_failure_rate=0.5, max_lm_calls=10,
        max_cost=1.5, model="openai/m", judge_model="openai/j", temperature=0.3,
        max_tokens=99, lm_timeout=30.0, cache="off", context_tokens=800,
        dataset="data/f.csv", corpus="c.jsonl", distractors="none", retriever="rank-bm25",
        mlflow="mlruns", mlflow_traces=True,
    )  # fmt: skip
    args = command_args(config, "evaluate")
    parsed = evaluate.build_parser().parse_args(args)
    for name, _, _ in options(EvalConfig, "evaluate"):
        got, want = getattr(parsed, name), getattr(config, name)
        assert (list(got) if isinstance(got, tuple) else got) == want, name


def test_only_values_that_differ_from_the_defaults_are_written():
    assert command_args(EvalConfig(), "evaluate") == []
    # In declaration order: --cot is declared with compile's, before evaluate's own --k.
    assert command_args(EvalConfig(cot=True, k=2), "evaluate") == ["--cot", "--k", "2"]
    pinned = command_args(EvalConfig(), "evaluate", only=("seed",), always=("seed",))
    assert pinned == ["--seed", "0"]


def test_a_declaration_names_its_entry_points_and_kind():
    with pytest.raises(ValueError, match="unknown entry point"):
        Option("--x", "help", entries=frozenset({"nowhere"}))
    with pytest.raises(ValueError, match="unknown option kind"):
        setting(1, help="h", kind="complex")
    judge_only = {name for name, _, _ in options(ModelDataSettings, "validate")}
    assert {"judge_model", "cache", "threads"} <= judge_only  # judge validate runs the judge
    assert not {"model", "corpus"} & judge_only  # and no program, on no corpus


def test_the_docs_table_comes_from_the_declarations():
    table = settings_markdown(EvalConfig, "evaluate")
    assert "| `--no-question-query` | `True` |" in table
    assert "| `--train` | `50` |" in table and "different on purpose" in table


def _added_flags(path: Path) -> list[str]:
    flags = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            flags += [a.value for a in node.args if isinstance(a, ast.Constant)]
    return flags


def test_the_command_lines_declare_no_setting_by_hand():
    # Only options that are not settings (how the command shows progress) are added by hand.
    for module in ("frames_dspy/commands/evaluate.py", "frames_dspy/commands/compile.py"):
        assert set(_added_flags(REPO / module)) <= {"--quiet"}, module


def test_docs_settings_md_is_generated_from_the_declarations():
    from frames_dspy.commands.settings_doc import settings_doc

    written = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    assert written == settings_doc(), "run: python -m frames_dspy.settings_doc > docs/settings.md"


def test_the_resume_keys_come_from_the_declarations():
    from frames_dspy.run.evaluation import RESUME_KEYS
    from frames_dspy.run.settings import SESSION_KEYS
    from optimize.config import STUDY_KEYS

    session = {"model", "api_base", "judge_model", "judge_api_base", "autorater",
               "temperature", "max_tokens", "retriever", "context_tokens"}  # fmt: skip
    # The keys once kept by hand are all declared (a new setting may add to them).
    assert session <= set(SESSION_KEYS)
    assert session | {
        "dataset", "corpus", "distractors", "rounds", "k", "n_docs", "include_question",
        "cot", "program", "retrieval_only",
    } <= set(RESUME_KEYS)  # fmt: skip
    assert session | {"train", "dev", "seed", "include_question", "cot",
                      "objective"} <= set(STUDY_KEYS)  # fmt: skip
    assert not {"threads", "out", "mlflow", "trials", "max_lm_calls"} & set(STUDY_KEYS)
