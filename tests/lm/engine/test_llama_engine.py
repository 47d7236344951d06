"""Tests for frames_dspy.lm.engine.llama_engine: the in-process engine through DSPy.

The fast tests run a fake ``llama_cpp`` (see ``lm_fakes``); the test marked ``real`` runs the
embedded 0.5B model in-process.
"""

from __future__ import annotations

import math
import threading
import types

import dspy
import pytest
from dspy.lm15 import ImagePart, Message, Request, UnsupportedFeatureError
from dspy.utils.exceptions import ContextWindowExceededError

import frames_dspy.lm.engine.llama_engine as llama_engine
from frames_dspy.lm import (
    DEFAULT_N_CTX,
    LlamaCppEngine,
    LMCallError,
    LMSetupError,
    count_tokens,
    make_lm,
)
from tests.lm_fakes import REPLY, ScriptedLlama, judge_pieces, patch_llama_cpp


def test_model_loads_lazily_once_per_process(fake_llama_cpp, gguf):
    first = make_lm(f"local:{gguf}", cache=False)
    second = make_lm(f"local:{gguf}", cache=False, temperature=0.5)
    assert fake_llama_cpp.instances == []
    first("one")
    second("two")
    assert len(fake_llama_cpp.instances) == 1
    llama = fake_llama_cpp.instances[0]
    assert llama.init_kwargs["n_ctx"] == DEFAULT_N_CTX
    assert llama.init_kwargs["n_threads"] >= 1 and llama.init_kwargs["verbose"] is False
    assert llama.init_kwargs["flash_attn"] is False
    make_lm(f"local:{gguf}", n_ctx=2048, cache=False)("three")
    assert len(fake_llama_cpp.instances) == 2  # another context size is another model
    make_lm(f"local:{gguf}", cache=False, flash_attn=True)("four")
    assert len(fake_llama_cpp.instances) == 3  # and other attention kernels too
    assert fake_llama_cpp.instances[2].init_kwargs["flash_attn"] is True


def test_generation_settings_reach_llama(fake_llama_cpp, gguf):
    lm = make_lm(f"local:{gguf}", seed=7, max_tokens=64, cache=False)
    lm("hi")
    _, kwargs = fake_llama_cpp.instances[0].calls[-1]
    assert kwargs["temperature"] == 0.0 and kwargs["top_k"] == 1
    assert kwargs["seed"] == 7 and kwargs["max_tokens"] == 64
    lm("hi", temperature=0.7, stop=["END"])
    _, kwargs = fake_llama_cpp.instances[0].calls[-1]
    assert kwargs["temperature"] == 0.7 and "top_k" not in kwargs and kwargs["stop"] == ["END"]


def test_calls_are_serialised(fake_llama_cpp, gguf):
    fake_llama_cpp.options = {"delay": 0.02}
    lm = make_lm(f"local:{gguf}", cache=False)
    threads = [threading.Thread(target=lm, args=(f"q{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    llama = fake_llama_cpp.instances[0]
    assert len(llama.calls) == 6 and llama.max_active == 1


def test_prompt_over_the_window_is_reported(fake_llama_cpp, gguf):
    fake_llama_cpp.options = {
        "error": ValueError("Requested tokens (9000) exceed context window of 8192")
    }
    lm = make_lm(f"local:{gguf}", cache=False)
    with pytest.raises(ContextWindowExceededError) as info:
        dspy.Predict("question -> answer")(question="long", lm=lm)
    message = str(info.value)
    assert "9000 tokens" in message and "8192" in message and "context budget" in message


def test_timeout_is_a_failed_call_not_retried(fake_llama_cpp, gguf):
    fake_llama_cpp.options = {"delay": 0.05}
    lm = make_lm(f"local:{gguf}", timeout=0.01, cache=False, num_retries=3)
    with pytest.raises(LMCallError, match=r"stopped after 0\.01 s") as info:
        lm("write an essay")
    # A greedy local model that ran out of time would run out again: one try only.
    assert info.value.attempts == 1 and len(fake_llama_cpp.instances[0].calls) == 1
    assert make_lm(f"local:{gguf}", timeout=30, cache=False)("hi") == [REPLY]


def scripted(fake_llama_cpp, pieces, alternatives=None, reply=None):
    def build(**kwargs):
        llama = ScriptedLlama(pieces, alternatives)
        if reply is not None:
            llama.reply = reply
        fake_llama_cpp.instances.append(llama)
        return llama

    fake_llama_cpp.Llama = build


def test_logprobs_come_from_the_scores_of_each_generated_token(fake_llama_cpp, gguf):
    pieces = judge_pieces("TRUE")
    scripted(fake_llama_cpp, pieces, {4: {"TRUE": 0.7, "FALSE": 0.2, "True": 0.1}})
    lm = make_lm(f"local:{gguf}", cache=False, timeout=30)
    (out,) = lm("judge this", logprobs=True, top_logprobs=2)
    assert out["text"] == "".join(pieces)
    tokens = out["logprobs"]["content"]
    assert [t["token"] for t in tokens] == pieces  # the end-of-generation token is left out
    decision = tokens[4]
    assert math.exp(decision["logprob"]) == pytest.approx(0.7)
    top = [(t["token"], round(math.exp(t["logprob"]), 3)) for t in decision["top_logprobs"]]
    assert top == [("TRUE", 0.7), ("FALSE", 0.2)]
    assert math.exp(tokens[0]["logprob"]) == pytest.approx(1.0)
    _, kwargs = fake_llama_cpp.instances[0].calls[-1]
    # The recorder reads the model's scores before the timeout's processor can mask them.
    assert type(kwargs["logits_processor"][0]).__name__ == "StepScores"
    assert type(kwargs["logits_processor"][1]).__name__ == "Deadline"


def test_logprobs_without_alternatives_and_cut_at_a_stop(fake_llama_cpp, gguf):
    pieces = ["Par", "is", " is", " the", " answer"]
    scripted(fake_llama_cpp, pieces, reply="Paris is")  # a stop string cut the text here
    lm = make_lm(f"local:{gguf}", cache=False)
    (out,) = lm("capital?", logprobs=True, top_logprobs=0)
    tokens = out["logprobs"]["content"]
    assert [t["token"] for t in tokens] == ["Par", "is", " is"]
    assert all(t["top_logprobs"] == [] for t in tokens)


def test_no_logprobs_no_recorder(fake_llama_cpp, gguf):
    scripted(fake_llama_cpp, ["Paris"])
    lm = make_lm(f"local:{gguf}", cache=False)
    assert lm("capital?") == ["Paris"]
    _, kwargs = fake_llama_cpp.instances[0].calls[-1]
    assert "logits_processor" not in kwargs
    assert {"logprobs", "top_logprobs"} <= lm.supported_params
    assert "response_format" not in lm.supported_params  # the JSONAdapter stays as it was


def test_cached_answers_keep_their_logprobs(fake_llama_cpp, gguf):
    scripted(fake_llama_cpp, judge_pieces("FALSE"), {4: {"FALSE": 0.6, "TRUE": 0.4}})
    lm = make_lm(f"local:{gguf}", cache=True)
    first = lm("judge this once", logprobs=True, top_logprobs=3)
    again = lm("judge this once", logprobs=True, top_logprobs=3)
    assert len(fake_llama_cpp.instances[0].calls) == 1
    assert (
        again[0]["logprobs"]["content"][4]["top_logprobs"]
        == (first[0]["logprobs"]["content"][4]["top_logprobs"])
    )


def test_load_failure_is_a_setup_error(monkeypatch, model_dir, gguf):
    def broken(**kwargs):
        raise ValueError("Failed to load model from file")

    patch_llama_cpp(monkeypatch, types.SimpleNamespace(Llama=broken))
    llama_engine._reset_loaded_models()
    lm = make_lm(f"local:{gguf}", cache=False)
    with pytest.raises(LMSetupError, match="could not load"):
        lm("hi")


def test_messages_map_to_chat_roles():
    request = Request(
        model="local/x",
        system="Be brief.",
        messages=(
            Message.developer("Answer in English."),
            Message.user("Hi"),
            Message.assistant("Hello"),
            Message.user("Bye"),
        ),
    )
    assert llama_engine._chat_messages(request) == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Answer in English."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Bye"},
    ]
    image = Request(
        model="local/x",
        messages=(Message(role="user", parts=(ImagePart(url="http://x/y.png"),)),),
    )
    with pytest.raises(UnsupportedFeatureError, match="text only"):
        llama_engine._chat_messages(image)


def test_engine_state_round_trips(gguf):
    engine = LlamaCppEngine(gguf, n_ctx=4096, seed=3, timeout=60)
    again = LlamaCppEngine.load_state(engine.dump_state())
    assert again.dump_state() == engine.dump_state()


@pytest.mark.real
def test_embedded_model_answers_a_frames_question(real_model_path, real_data):
    # A whole gold article, not a distractor summary standing in for a missing one.
    example, article = next(
        (ex, found[0])
        for ex in real_data.examples
        if (
            found := [a for a in real_data.store.resolve_many(ex.gold_urls) if a.source == "frames"]
        )
    )
    lm = make_lm("local", max_tokens=96)
    excerpt = article.text[:2400]
    while count_tokens(lm, excerpt) > 600:
        excerpt = excerpt[: int(len(excerpt) * 0.9)]
    context = f"{article.title}: {excerpt}"
    predict = dspy.Predict("context, question -> answer")
    with dspy.context(lm=lm):
        prediction = predict(context=context, question=example.question)
    assert isinstance(prediction.answer, str) and prediction.answer.strip()
    usage = lm.history[-1]["usage"]
    assert usage == {} or usage["prompt_tokens"] > 300  # {} when DSPy's cache answered
