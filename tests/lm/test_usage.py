"""Tests for frames_dspy.lm.usage: context windows, token counts and usage totals."""

from __future__ import annotations

import math

import dspy

from frames_dspy.lm import context_window, count_tokens, make_lm, usage_totals
from tests.lm_fakes import REPLY


def test_usage_history_and_cache(fake_llama_cpp, gguf):
    lm = make_lm(f"local:{gguf}")
    predict = dspy.Predict("question -> answer")
    with dspy.context(lm=lm), dspy.track_usage() as tracker:
        assert predict(question="Capital of France?").answer == "Paris"
        assert predict(question="Capital of France?").answer == "Paris"  # from DSPy's cache
    assert len(fake_llama_cpp.instances[0].calls) == 1
    fresh, cached = lm.history
    assert fresh["usage"]["prompt_tokens"] > 0
    assert fresh["usage"]["completion_tokens"] == len(REPLY.split())
    assert cached["usage"] == {}
    totals = usage_totals(lm.history)
    assert (totals.calls, totals.cached_calls) == (2, 1)
    assert totals.prompt_tokens == fresh["usage"]["prompt_tokens"]
    assert totals.total_tokens == fresh["usage"]["total_tokens"]
    tracked = tracker.get_total_tokens()[lm.model]
    assert tracked["prompt_tokens"] == fresh["usage"]["prompt_tokens"]


def test_context_window_and_token_counts(fake_llama_cpp, gguf):
    local = make_lm(f"local:{gguf}", n_ctx=4096)
    assert context_window(local) == 4096
    assert count_tokens(local, "three short words") == 3

    api = make_lm("openai/gpt-4o-mini", api_key="x")
    assert context_window(api) == 128_000
    assert count_tokens(api, "x" * 10) == math.ceil(10 / 4)
    served = make_lm(
        "openai/my-served-model", api_base="http://h:1/v1", api_key="x", check_connection=False
    )
    assert context_window(served) is None
    declared = make_lm(
        "openai/my-served-model",
        api_base="http://h:1/v1",
        api_key="x",
        check_connection=False,
        n_ctx=32_768,
    )
    assert context_window(declared) == 32_768
    assert context_window(dspy.utils.dummies.DummyLM([{"answer": "x"}])) is None


def test_usage_totals_tolerates_odd_entries():
    totals = usage_totals(
        [{"usage": {"prompt_tokens": 5, "completion_tokens": 2}}, {"usage": None}, {}]
    )
    assert (totals.calls, totals.cached_calls, totals.total_tokens) == (3, 2, 7)
