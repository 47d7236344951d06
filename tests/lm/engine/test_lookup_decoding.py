"""Tests for frames_dspy.lm.engine.lookup_decoding: drafts copied from the context, verified.

The fast tests use small fakes of llama-cpp-python's context and batch; the test marked
``real`` runs the embedded model with and without drafts on a prompt it has to copy from.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from frames_dspy.lm.engine import llama_worker
from frames_dspy.lm.engine.lookup_decoding import (
    FAST_BATCH,
    MATCH_TOKENS,
    LookupDrafts,
    draft_tokens_for,
)
from tests.lm_fakes import load_real_llama


def test_drafts_continue_the_latest_earlier_match():
    drafts = LookupDrafts(n_draft=3, match=2)
    #            earlier match ^^ then 7 8 9      later match ^^ then 5 6    the tail ^^
    ids = [1, 2, 3, 4, 7, 8, 9, 0, 3, 4, 5, 6, 0, 3, 4]
    assert drafts(np.array(ids)).tolist() == [5, 6, 0]
    assert drafts.proposed == 1


def test_no_draft_without_a_long_enough_match():
    drafts = LookupDrafts(n_draft=8)  # the default match is MATCH_TOKENS long
    ids = list(range(40)) + list(range(MATCH_TOKENS - 1))  # only MATCH_TOKENS - 1 repeat
    assert drafts(np.array(ids)).size == 0
    assert drafts(np.array([1, 2, 3])).size == 0  # shorter than the match itself
    assert drafts.proposed == 0


def test_a_draft_stops_at_the_end_of_the_context():
    drafts = LookupDrafts(n_draft=10, match=2)
    assert drafts(np.array([5, 6, 7, 5, 6])).tolist() == [7, 5, 6]


def test_bad_draft_settings_are_refused():
    with pytest.raises(ValueError, match="n_draft=0"):
        LookupDrafts(n_draft=0)


def test_draft_length_suits_the_attention_kernel():
    assert draft_tokens_for(flash_attn=True) + 1 == FAST_BATCH
    assert draft_tokens_for(flash_attn=False) < FAST_BATCH - 1


def test_calls_that_record_scores_go_without_drafts():
    seen = []

    class Llama:
        draft_model = "drafts"

        def create_chat_completion(self, messages, **kwargs):
            seen.append(self.draft_model)
            return {"choices": [{"message": {"content": "ok"}}]}

        def token_eos(self):
            return 0

    llama = Llama()
    llama_worker.generate(llama, [{"role": "user", "content": "hi"}], {})
    llama_worker.generate(llama, [{"role": "user", "content": "hi"}], {}, top_logprobs=2)
    assert seen == ["drafts", None] and llama.draft_model == "drafts"


def test_loading_sets_drafts_after_the_model(monkeypatch, gguf):
    built = []

    class Llama:
        def __init__(self, **kwargs):
            self.kwargs = kwargs
            built.append(self)

    fake = types.SimpleNamespace(Llama=Llama)
    settings = llama_worker.EngineSettings(model_path=str(gguf), n_ctx=512, n_threads=1)
    llama = llama_worker.load_llama(settings, fake)
    assert isinstance(llama, Llama) and type(llama) is not Llama
    assert "draft_model" not in llama.kwargs  # Llama() would keep every prompt logit
    assert llama.draft_model.n_draft == draft_tokens_for(False)
    plain = llama_worker.EngineSettings(
        model_path=str(gguf), n_ctx=512, n_threads=1, flash_attn=False, lookup_decoding=False
    )
    assert not hasattr(llama_worker.load_llama(plain, fake), "draft_model")
    assert settings.record()["lookup_decoding"] is True


@pytest.mark.real
def test_embedded_model_copies_with_drafts_and_writes_the_same(real_model_path):
    lines = [
        "Ada Lovelace: English mathematician known for work on the Analytical Engine",
        "Charles Babbage: English polymath who originated the idea of a programmable computer",
        "Alan Turing: English mathematician and pioneer of theoretical computer science",
    ]
    messages = [
        {
            "role": "user",
            "content": "Copy these three lines exactly, one per line:\n" + "\n".join(lines),
        }
    ]
    kwargs = {"max_tokens": 96, "temperature": 0.0, "top_k": 1, "seed": 0}
    texts, proposed = [], None
    for lookup in (False, True):
        llama = load_real_llama(real_model_path, n_ctx=1024, lookup_decoding=lookup)
        out = llama_worker.generate(llama, messages, dict(kwargs)).out
        texts.append(out["choices"][0]["message"]["content"])
        if lookup:
            proposed = llama.draft_model.proposed
        del llama
    assert "Charles Babbage" in texts[0]
    assert texts[1] == texts[0]
    assert proposed and proposed > 0
