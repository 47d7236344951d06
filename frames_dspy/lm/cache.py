"""Control over DSPy's response cache: on, off or refresh, keyed by server, counted per question.

DSPy caches every LM response on disk, keyed by the model string and the request. Two things
make that unsafe for a benchmark as it comes: the key leaves out the API base, so the same
``--model`` name behind another server replays the first server's answers; and nothing says
which answers came from the cache. :func:`use_cache` wraps DSPy's cache once per process so that

- the API base is part of the key (the embedded model's string already carries its file's
  SHA-256, so other weights behind the same name never match);
- ``off`` neither reads nor writes, ``refresh`` writes fresh answers over cached ones without
  reading, ``on`` reads and writes;
- every hit is counted against the current question's meter
  (:func:`frames_dspy.lm.accounting.note_cache_hit`), so a resumed or repeated run reports
  cached calls as cached, not as free ones.
"""

from __future__ import annotations

import threading
from typing import Any

import dspy

from frames_dspy.lm.accounting import note_cache_hit

__all__ = ["CACHE_MODES", "RunCache", "use_cache", "cache_mode"]

#: ``--cache`` choices.
CACHE_MODES = ("on", "off", "refresh")

# DSPy leaves these out of its cache key; the API base must stay in (a key is never stored).
_KEEP_IN_KEY = frozenset({"api_base", "base_url"})
_INSTALL = threading.Lock()


def _ignored(ignored: list[str] | None) -> list[str]:
    return [name for name in ignored or () if name not in _KEEP_IN_KEY]


class RunCache:
    """Wraps DSPy's cache object (``dspy.cache``); every other attribute is the wrapped one's.

    Args:
        inner: The cache DSPy built (memory and disk).
        mode: One of :data:`CACHE_MODES`.
    """

    def __init__(self, inner: Any, mode: str = "on"):
        self.inner = inner
        self.mode = mode

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, value: str) -> None:
        if value not in CACHE_MODES:
            raise ValueError(
                f"unknown cache mode {value!r}; choose one of {', '.join(CACHE_MODES)}"
            )
        self._mode = value

    def get(self, request: dict[str, Any], ignored_args_for_cache_key: list[str] | None = None):
        if self._mode != "on":
            return None
        value = self.inner.get(request, _ignored(ignored_args_for_cache_key))
        if value is not None:
            note_cache_hit()
        return value

    def put(
        self,
        request: dict[str, Any],
        value: Any,
        ignored_args_for_cache_key: list[str] | None = None,
        enable_memory_cache: bool = True,
    ) -> None:
        if self._mode == "off":
            return
        self.inner.put(request, value, _ignored(ignored_args_for_cache_key), enable_memory_cache)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def use_cache(mode: str = "on") -> RunCache:
    """Route DSPy's response cache through a :class:`RunCache` in ``mode`` (process-wide).

    Raises:
        ValueError: an unknown mode.
    """
    with _INSTALL:
        current = dspy.cache
        if not isinstance(current, RunCache):
            current = RunCache(current)
            dspy.cache = current
        current.mode = mode
    return current


def cache_mode() -> str:
    """The mode DSPy's cache runs in now (``on`` when it was never wrapped)."""
    current = dspy.cache
    return current.mode if isinstance(current, RunCache) else "on"
