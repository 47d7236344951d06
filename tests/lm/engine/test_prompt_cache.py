"""Tests for frames_dspy.lm.engine.prompt_cache: exact prefix reuse and saved prompt states.

The fast tests use a fake llama.cpp whose "KV cache" is the list of tokens it holds and whose
``generate`` reuses a cached prefix as llama-cpp-python's does; the tests marked ``real`` run
the embedded model.
"""

from __future__ import annotations

import ctypes
import types

import numpy as np
import pytest

from frames_dspy.lm.engine import llama_worker
from frames_dspy.lm.engine.prompt_cache import (
    ALIGN,
    PrefixStates,
    aligned_chunks,
    cached_class,
    common_prefix,
    usable_prefix,
)
from tests.lm_fakes import load_real_llama


class _Context:
    """A KV cache that holds token ids; ``ctx`` is itself, as the fake low-level API wants."""

    def __init__(self):
        self.cells: list[int] = []
        self.ctx = self
        self.fail_next_set = False
        self.decoded: list[tuple[int, int, bool]] = []  # (first position, size, logits_all)
        self.pending = None

    def kv_cache_seq_rm(self, seq, start, end):
        assert end == -1
        del self.cells[start:]
        return True

    def decode(self, batch):
        tokens, n_past, every = batch.last
        assert n_past == len(self.cells)
        self.cells.extend(tokens)
        self.decoded.append((n_past, len(tokens), every))


class _Batch:
    def set_batch(self, batch, n_past, logits_all):
        self.last = (list(batch), n_past, logits_all)


class _Low:
    """llama_state_seq_* over :class:`_Context`: four bytes a token."""

    @staticmethod
    def llama_state_seq_get_size(context, seq):
        return 4 * len(context.cells)

    @staticmethod
    def llama_state_seq_get_data(context, buffer, size, seq):
        data = np.asarray(context.cells, dtype=np.int32).tobytes()
        ctypes.memmove(buffer, data, len(data))
        return len(data)

    @staticmethod
    def llama_state_seq_set_data(context, buffer, size, seq):
        if context.fail_next_set:
            context.fail_next_set = False
            return 0
        context.cells = np.frombuffer(bytes(buffer), dtype=np.int32).tolist()
        return size


class _Llama:
    """What the cache touches of ``llama_cpp.Llama``; ``generate`` reuses the longest cached
    prefix (one token short of a whole prompt) and evaluates each sampled token, as
    llama-cpp-python does."""

    n_batch = 512

    def __init__(self):
        self._ctx, self._batch = _Context(), _Batch()
        self.input_ids = np.zeros(4096, dtype=np.intc)
        self.n_tokens = 0
        self._requires_eval = False
        self.draft_model = None

    def generate(self, tokens, reply=(9,)):
        tokens = list(tokens)
        if self.n_tokens > 0:
            longest = common_prefix(self.input_ids[: self.n_tokens], tokens)
            keep = longest - 1 if longest == len(tokens) else longest
            self._ctx.kv_cache_seq_rm(-1, keep, -1)
            self.n_tokens, tokens = keep, tokens[keep:]
        self.eval(tokens)
        for token in reply:
            yield token
            self.eval([token])


def _llama(capacity_mb=None, min_gain=ALIGN):
    llama = cached_class(_Llama)()
    if capacity_mb is not None:
        llama.prefix_states = PrefixStates(capacity_mb, min_gain=min_gain, low=_Low)
    return llama


def _run(llama, tokens, reply=(9,)):
    return list(llama.generate(tokens, reply=reply))


def _evaluated(llama):
    return sum(size for _, size, _ in llama._ctx.decoded)


def _prompt(seed, n):
    return [seed * 10_000 + i for i in range(n)]


def test_common_prefix_counts_leading_tokens():
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix(np.array([7, 1]), [8, 1]) == 0


def test_usable_prefix_is_aligned_inside_the_prompt_and_the_evaluated_prompt():
    assert usable_prefix(shared=100, exact=1000, prompt=500) == 96
    assert usable_prefix(shared=600, exact=1000, prompt=500) == 480  # one token is left
    assert usable_prefix(shared=100, exact=40, prompt=500) == 32  # not into a reply
    assert usable_prefix(shared=31, exact=100, prompt=100) == 0


def test_prompts_are_cut_at_the_multiples_of_the_batch_size():
    assert aligned_chunks(0, 1400, 512) == [512, 512, 376]
    assert aligned_chunks(416, 984, 512) == [96, 512, 376]
    assert aligned_chunks(512, 3, 512) == [3]
    assert aligned_chunks(512, 0, 512) == []


def test_a_resumed_prompt_is_cut_where_a_fresh_one_would_be():
    llama = _llama()
    first = _prompt(1, 600)
    _run(llama, first)
    llama._ctx.decoded.clear()
    second = first[:450] + _prompt(2, 650)  # shares 450 tokens, 1,100 in all
    _run(llama, second, reply=(9,))
    prompt_batches, reply_steps = llama._ctx.decoded[:3], llama._ctx.decoded[3:]
    assert prompt_batches == [(448, 64, False), (512, 512, False), (1024, 76, False)]
    assert reply_steps == [(1100, 1, False)] and llama._ctx.cells == second + [9]


def test_a_reply_is_never_reused_as_prompt():
    llama = _llama()
    prompt = _prompt(1, 100)
    _run(llama, prompt, reply=(7, 8, 9))  # the cache holds the prompt and two reply tokens
    llama._ctx.decoded.clear()
    _run(llama, prompt + [7, 8, 9] + _prompt(2, 50))
    assert llama._ctx.decoded[0][0] == 96  # reuse stops inside the prompt, at 96


def test_generation_steps_go_in_one_batch_with_logits_where_a_draft_may_be():
    llama = _llama()
    _run(llama, _prompt(1, 40))
    llama._step = "reply"
    llama.eval([5, 6, 7, 8])  # a sampled token and a three-token draft
    llama.eval([9])
    assert llama._ctx.decoded[-2:] == [(41, 4, True), (45, 1, False)]
    llama._step = None
    llama.eval(list(range(600)))  # outside a generation: a prompt
    assert [d[1] for d in llama._ctx.decoded[-2:]] == [512 - 46, 600 - (512 - 46)]


def test_a_prompt_resumes_the_saved_state_it_extends_after_another_prompt():
    llama = _llama(capacity_mb=1)
    round_one = _prompt(1, 200)
    _run(llama, round_one)
    _run(llama, _prompt(5, 100))  # another system message: the live cache is now this one
    before = _evaluated(llama)
    _run(llama, round_one + _prompt(2, 30))  # extends round one
    assert llama.prefix_states.restored_tokens == 192
    assert _evaluated(llama) - before == 230 - 192 + 1  # the rest, and the reply token
    assert llama._ctx.cells == round_one + _prompt(2, 30) + [9]
    assert llama.input_ids[: llama.n_tokens].tolist() == llama._ctx.cells


def test_no_restore_when_the_live_cache_is_as_good_or_the_gain_is_small():
    llama = _llama(capacity_mb=1)
    base = _prompt(1, 100)
    _run(llama, base)
    _run(llama, base + _prompt(2, 40))  # extends the live cache: nothing to restore
    assert llama.prefix_states.restored_tokens == 0
    _run(llama, base[:70] + _prompt(3, 40))  # live and saved states share 70 alike
    assert llama.prefix_states.restored_tokens == 0
    _run(llama, _prompt(4, 100))
    _run(llama, base[:50] + _prompt(5, 10))  # a saved state would spare 32 - 0 tokens
    assert llama.prefix_states.restored_tokens == 32
    _run(llama, base[:60] + _prompt(6, 10))  # 32 against a live 32: no gain
    assert llama.prefix_states.restored_tokens == 0


def test_a_state_that_a_later_one_extends_is_dropped():
    llama = _llama(capacity_mb=1)
    _run(llama, _prompt(1, 50))
    _run(llama, _prompt(1, 50) + [9] + _prompt(2, 10))
    assert len(llama.prefix_states) == 1


def test_past_the_capacity_the_least_recently_used_states_make_room():
    # Four bytes a token in the fake: two 101-token states fit in 900 bytes, three do not.
    llama = _llama(capacity_mb=900 / 2**20)
    chat, fallback = _prompt(1, 100), _prompt(2, 100)
    _run(llama, chat)
    _run(llama, fallback)
    _run(llama, chat + [9] + _prompt(3, 8))  # resumes chat, whose state it then replaces
    assert llama.prefix_states.restored_tokens == 96
    assert [s.tokens[0] for s in llama.prefix_states._saved] == [fallback[0], chat[0]]
    _run(llama, _prompt(4, 100))  # a third prompt: the fallback is the least recently used
    assert [s.tokens[0] for s in llama.prefix_states._saved] == [chat[0], _prompt(4, 1)[0]]
    assert llama.prefix_states.bytes <= 900


def test_a_restore_counts_as_use():
    llama = _llama(capacity_mb=900 / 2**20)
    first, second = _prompt(1, 100), _prompt(2, 100)
    _run(llama, first)
    _run(llama, second)
    _run(llama, first[:70] + _prompt(3, 20))  # restores the first without extending it
    assert llama.prefix_states.restored_tokens == 64
    assert [s.tokens[0] for s in llama.prefix_states._saved] == [first[0], first[0]]


def test_any_saved_state_can_be_restored_whatever_its_place_and_length():
    llama = _llama(capacity_mb=1)
    for seed, n in ((1, 70), (2, 40), (3, 130), (4, 35)):
        _run(llama, _prompt(seed, n))
    _run(llama, _prompt(3, 130) + [9] + _prompt(5, 3))  # the third of four states
    assert llama.prefix_states.restored_tokens == 128


def test_a_failed_restore_starts_the_prompt_from_scratch():
    llama = _llama(capacity_mb=1)
    _run(llama, _prompt(1, 100))
    _run(llama, _prompt(2, 100))
    llama._ctx.fail_next_set = True
    before = _evaluated(llama)
    _run(llama, _prompt(1, 100) + _prompt(3, 5))
    assert llama.prefix_states.restored_tokens == 0
    assert _evaluated(llama) - before == 105 + 1
    assert llama._ctx.cells == _prompt(1, 100) + _prompt(3, 5) + [9]


def test_a_generation_stopped_early_is_saved_without_stale_cells():
    llama = _llama(capacity_mb=1)
    generation = llama.generate(_prompt(1, 40), reply=(91, 92, 93))
    assert next(generation) == 91
    llama._ctx.cells.extend([7, 7])  # rejected draft tokens llama.cpp still holds
    generation.close()  # llama-cpp-python stops reading at a stop string or max_tokens
    (saved,) = llama.prefix_states._saved
    assert saved.tokens.tolist() == _prompt(1, 40) and saved.exact == 40
    assert llama._ctx.cells == _prompt(1, 40)


def test_bad_capacities_are_refused():
    with pytest.raises(ValueError, match="capacity_mb=0"):
        PrefixStates(0)


def test_loading_gives_the_model_exact_reuse_and_its_states(gguf):
    class Llama:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    fake = types.SimpleNamespace(Llama=Llama)
    settings = llama_worker.EngineSettings(model_path=str(gguf), n_ctx=512, n_threads=1)
    llama = llama_worker.load_llama(settings, fake)
    assert type(llama) is cached_class(Llama)
    assert llama.prefix_states.capacity == settings.prefix_states_mb * 2**20 > 0
    assert settings.record()["prefix_states_mb"] == settings.prefix_states_mb
    off = llama_worker.EngineSettings(
        model_path=str(gguf), n_ctx=512, n_threads=1, prefix_states_mb=0
    )
    assert not hasattr(llama_worker.load_llama(off, fake), "prefix_states")


def _real_llama(path, megabytes):
    return load_real_llama(path, lookup_decoding=False, prefix_states_mb=megabytes)


_FACTS = " ".join(f"Fact {i}: the river town number {i} has {i * 7} bridges." for i in range(45))
_KWARGS = {"max_tokens": 12, "temperature": 0.0, "top_k": 1, "seed": 0}


def _ask(llama, question):
    messages = [{"role": "user", "content": f"{_FACTS}\n{question}"}]
    return llama_worker.generate(llama, messages, dict(_KWARGS), top_logprobs=5)


@pytest.mark.real
def test_embedded_model_gives_the_same_logits_resumed_as_fresh(real_model_path):
    """A prompt after another that shares an unaligned prefix with it scores every token
    exactly as on an empty cache (llama-cpp-python's own reuse, on this very case, moved the
    top log-probabilities by up to 0.16)."""
    question = "How many bridges has town 3? Answer with the number."
    fresh = _ask(_real_llama(real_model_path, 0), question)
    llama = _real_llama(real_model_path, 0)
    _ask(llama, "Which town has 70 bridges?")  # shares the facts, not the question
    resumed = _ask(llama, question)
    assert resumed.perf["prompt_evaluated"] < fresh.perf["prompt_evaluated"] - 400
    assert resumed.steps == fresh.steps  # every generated token's top-5 log-probabilities


@pytest.mark.real
def test_embedded_model_restores_a_saved_state_and_scores_the_same(real_model_path):
    question = "How many bridges has town 5? Answer with the number."
    fresh = _ask(_real_llama(real_model_path, 0), question)
    llama = _real_llama(real_model_path, 64)
    _ask(llama, "Which town has 70 bridges?")
    llama_worker.generate(llama, [{"role": "user", "content": "Name a colour."}], dict(_KWARGS))
    resumed = _ask(llama, question)
    assert resumed.perf["prompt_restored"] > 400
    assert resumed.steps == fresh.steps
