"""optimize.config: CompileConfig.validate names the bad setting; the optimizer's defaults."""

from __future__ import annotations

import dataclasses
import re

import pytest

from frames_dspy.lm import parse_spec
from frames_dspy.run.settings import SESSION_KEYS
from optimize.config import STUDY_KEYS, CompileConfig


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"train": -1}, "--train -1 must be >= 0"),
        ({"dev": 0}, "--dev 0 must be at least 1 (trials are scored on dev)"),
        ({"test_limit": 0}, "--test-limit 0 must be at least 1 (or 'all')"),
        ({"trials": -2}, "--trials -2 must be >= 0"),
        ({"timeout": 0.0}, "--timeout 0.0 must be a positive number of seconds"),
        ({"threads": 0}, "--threads 0 must be at least 1"),
        ({"max_lm_calls": 0}, "--max-lm-calls 0 must be at least 1"),
        ({"context_tokens": 49}, "--context-tokens 49 must be at least 50"),
        ({"max_tokens": 0}, "--max-tokens 0 must be at least 1"),
        ({"sampler": "grid"}, "unknown sampler 'grid'; choose one of tpe, nsga2, random"),
        ({"optimizer": "adam"}, "unknown optimizer 'adam'; choose one of none, bootstrap-rs"),
        ({"optimize_in_trials": True}, "--optimize-in-trials needs an --optimizer other than"),
        ({"optimizer": "mipro", "train": 1}, "--optimizer mipro needs at least 2 train"),
        ({"workers_only": True}, "--workers-only needs the study to join"),
        ({"study_name": "  "}, "--study-name must not be empty"),
        ({"pick": "cheapest"}, "--pick 'cheapest' is not understood"),
        ({"optimizer": "bootstrap-rs", "max_demos": 0}, "bootstrap-rs only adds demos"),
    ],
)
def test_validate_names_the_first_bad_setting(overrides, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        CompileConfig(**overrides).validate()


def test_the_defaults_and_a_joining_worker_are_valid():
    CompileConfig().validate()
    CompileConfig(test_limit=None, timeout=60.0, max_lm_calls=10).validate()
    CompileConfig(workers_only=True, storage="sqlite:///study.db").validate()
    CompileConfig(workers_only=True, out="runs/opt").validate()
    CompileConfig(optimizer="gepa", optimize_in_trials=True, train=2).validate()


@pytest.mark.parametrize(
    "model, expected", [("local", True), ("local:/m.gguf", True), ("openai/gpt-4o", False)]
)
def test_the_embedded_model_tunes_instructions_only_by_default(model, expected):
    config = CompileConfig(model=model, optimizer="mipro", max_demos=3, seed=5, threads=4)
    settings = config.optimizer_settings(embedded=parse_spec(model).embedded)
    assert settings.instructions_only is expected
    assert settings.demos == (0 if expected else 3)
    assert (settings.name, settings.seed, settings.threads) == ("mipro", 5, 4)
    # An explicit choice wins, and a test LM's name that is no model spec decides nothing.
    assert (
        not CompileConfig(model=model, instructions_only=False)
        .optimizer_settings(embedded=True)
        .instructions_only
    )


@pytest.mark.parametrize(
    "model, threads, expected",
    [("local", None, 1), ("local-1.5b", None, 1), ("openai/gpt-4o", None, 8), ("local", 3, 3)],
)
def test_threads_default_follows_the_model(model, threads, expected):
    config = CompileConfig(model=model, threads=threads)
    config.validate()
    resolved = config.resolved(model=parse_spec(model), window=None)  # as open_session does
    settings = resolved.optimizer_settings(embedded=parse_spec(model).embedded)
    assert settings.threads == resolved.threads == expected


def test_study_keys_are_settings_and_include_the_session_keys():
    names = {f.name for f in dataclasses.fields(CompileConfig)}
    assert set(STUDY_KEYS) <= names
    assert set(SESSION_KEYS) <= set(STUDY_KEYS)
    # What a trial's numbers depend on besides the model and data: the split and the fixed
    # program options. The search ranges are checked separately, as the study's space.
    assert {"train", "dev", "seed", "include_question", "cot"} <= set(STUDY_KEYS)
    assert not {"trials", "threads", "out", "max_lm_calls", "timeout"} & set(STUDY_KEYS)
