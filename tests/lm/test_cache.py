"""frames_dspy.lm.cache: the API base is part of the key; on/off/refresh; hits are counted."""

from __future__ import annotations

import dspy
import pytest

from frames_dspy.lm.accounting import metered
from frames_dspy.lm.cache import RunCache, cache_mode, use_cache


class MemoryCache:
    """Stands in for DSPy's cache: a dict keyed like DSPy keys (ignored arguments left out)."""

    def __init__(self):
        self.store: dict[str, object] = {}

    def _key(self, request, ignored):
        return repr(sorted((k, v) for k, v in request.items() if k not in (ignored or [])))

    def get(self, request, ignored_args_for_cache_key=None):
        return self.store.get(self._key(request, ignored_args_for_cache_key))

    def put(self, request, value, ignored_args_for_cache_key=None, enable_memory_cache=True):
        self.store[self._key(request, ignored_args_for_cache_key)] = value

    def reset_memory_cache(self):
        self.store.clear()


IGNORED = ["api_key", "api_base", "base_url"]  # what DSPy leaves out of its keys


def request(base: str) -> dict:
    return {"model": "openai/same-name", "messages": "hi", "api_base": base, "api_key": "k"}


def test_another_server_behind_the_same_name_is_not_replayed():
    cache = RunCache(MemoryCache())
    cache.put(request("http://a/v1"), "answer from a", IGNORED)
    assert cache.get(request("http://a/v1"), IGNORED) == "answer from a"
    assert cache.get(request("http://b/v1"), IGNORED) is None
    # The key is never stored, so it stays out of the key as DSPy intends.
    other_key = {**request("http://a/v1"), "api_key": "another"}
    assert cache.get(other_key, IGNORED) == "answer from a"


def test_modes_read_and_write_as_documented():
    inner = MemoryCache()
    cache = RunCache(inner, mode="off")
    cache.put(request("x"), "v", IGNORED)
    assert inner.store == {}
    cache.mode = "refresh"
    cache.put(request("x"), "fresh", IGNORED)
    assert cache.get(request("x"), IGNORED) is None  # refresh never reads ...
    cache.mode = "on"
    assert cache.get(request("x"), IGNORED) == "fresh"  # ... but writes for later runs
    with pytest.raises(ValueError, match="unknown cache mode 'sometimes'"):
        cache.mode = "sometimes"


def test_hits_are_counted_against_the_current_meter():
    cache = RunCache(MemoryCache())
    cache.put(request("x"), "v", IGNORED)
    with metered() as meter:
        cache.get(request("x"), IGNORED)
        cache.get(request("y"), IGNORED)  # a miss
    assert meter.cache_hits == 1
    cache.get(request("x"), IGNORED)  # outside a meter: nothing to count, no error


def test_other_attributes_are_the_wrapped_caches():
    inner = MemoryCache()
    cache = RunCache(inner)
    cache.put(request("x"), "v", IGNORED)
    cache.reset_memory_cache()
    assert inner.store == {}


def test_use_cache_wraps_dspy_once_and_sets_the_mode():
    original = dspy.cache
    try:
        first = use_cache("refresh")
        assert dspy.cache is first and cache_mode() == "refresh"
        assert use_cache("on") is first and cache_mode() == "on"
    finally:
        dspy.cache = original


def test_a_real_call_is_served_from_the_cache_and_counted(fake_llama_cpp, gguf, tmp_path):
    from frames_dspy.lm import make_lm
    from frames_dspy.lm.accounting import TOKEN_METER, attached_callbacks

    original = dspy.cache
    try:
        use_cache("on")
        lm = make_lm(f"local:{gguf}")
        prompt = f"a prompt only this test sends {tmp_path.name}"
        with attached_callbacks(lm, TOKEN_METER):
            with metered() as fresh:
                lm(prompt)
            with metered() as again:
                lm(prompt)
        engine_calls = len(fake_llama_cpp.instances[0].calls)
        assert engine_calls == 1  # the second answer came from the cache ...
        assert (fresh.calls, fresh.cache_hits) == (1, 0)
        assert (again.calls, again.cache_hits) == (1, 1)  # ... and is counted as cached
        use_cache("refresh")
        lm(prompt)
        assert len(fake_llama_cpp.instances[0].calls) == 2
        use_cache("off")
        lm(prompt)
        assert len(fake_llama_cpp.instances[0].calls) == 3
    finally:
        dspy.cache = original
