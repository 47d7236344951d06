"""The DSPy LM for a model spec: :func:`make_lm` and the :class:`FramesLM` it returns."""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from pathlib import Path
from typing import Any

import dspy
from dspy.utils.exceptions import LMConfigurationError, LMError

from frames_dspy.lm.accounting import note_retry
from frames_dspy.lm.engine.llama_engine import LlamaCppEngine
from frames_dspy.lm.engine.llama_process import _import_llama_cpp
from frames_dspy.lm.engine.prompt_cache import DEFAULT_MB
from frames_dspy.lm.errors import RETRYABLE, LMSetupError, classify
from frames_dspy.lm.litellm_setup import (
    _check_reachable,
    _resolve_api_key,
    _use_packaged_model_map,
)
from frames_dspy.lm.specs import (
    BUNDLED_MODELS,
    DEFAULT_LOCAL_MAX_TOKENS,
    DEFAULT_SPEC,
    ModelSpec,
    parse_spec,
)
from frames_dspy.lm.weights import assemble_model, assembled_sha256, file_fingerprint

logger = logging.getLogger(__name__)

__all__ = ["FramesLM", "make_lm"]

#: The longest wait between two tries of one call.
MAX_BACKOFF = 60.0


class FramesLM(dspy.LM):
    """A ``dspy.LM`` that retries passing faults and says plainly what went wrong.

    Built by :func:`make_lm`; behaves like ``dspy.LM`` otherwise. Rate limits, server errors,
    dropped connections and API timeouts are retried ``max_retries`` times with exponential
    backoff (honouring a server's ``Retry-After``); each retry is counted against the current
    question's meter (:func:`frames_dspy.lm.accounting.note_retry`). A fault that outlives its
    retries raises :class:`LMCallError` (a run records it and goes on); a set-up problem
    (credentials, an unknown model) raises :class:`LMSetupError` at once (a run stops). The
    original DSPy error is the ``__cause__``.

    Args:
        model: The DSPy model string.
        *args: Passed to ``dspy.LM``.
        model_spec: The parsed spec the LM was built from, kept so callers need not parse the
            spec string again (``lm.model_spec.embedded``, ``.default_context_tokens(...)``).
        context_window: The window the caller declared (the embedded model's ``n_ctx``, or
            ``n_ctx`` given to :func:`make_lm` for an API model); stored as
            ``declared_context_window``, which :func:`~frames_dspy.lm.usage.context_window`
            reads first.
        max_retries: Tries after the first for a retryable fault (DSPy's own retries are off).
        retry_backoff: Seconds before the first retry; doubled for each further one.
        **kwargs: Passed to ``dspy.LM``.

    Attributes:
        model_spec: The parsed spec, or None when the LM was not built from one.
        declared_context_window: The declared window in tokens, or None.
    """

    def __init__(
        self,
        model: str,
        *args: Any,
        model_spec: ModelSpec | None = None,
        context_window: int | None = None,
        max_retries: int = 0,
        retry_backoff: float = 1.0,
        **kwargs: Any,
    ):
        if max_retries < 0 or retry_backoff < 0:
            raise ValueError(
                f"max_retries={max_retries} and retry_backoff={retry_backoff} must be >= 0"
            )
        kwargs["num_retries"] = 0  # retried here, where each retry can be counted
        super().__init__(model, *args, **kwargs)
        # Plain attributes set here, never patched on afterwards: dspy.LM.copy() copies the
        # instance, so a copy (e.g. lm.copy(cache=False)) keeps them.
        self.model_spec = model_spec
        self.declared_context_window = context_window
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff

    @property
    def spec(self) -> str | None:
        """The spec string the LM was built from (``model_spec.text``), or None."""
        return self.model_spec.text if self.model_spec is not None else None

    def _retry_wait(self, exc: LMError, attempt: int) -> float | None:
        """Seconds to wait before try ``attempt + 1``, or None when the call must not retry."""
        if attempt > self.max_retries or not isinstance(exc, RETRYABLE):
            return None
        if getattr(self.engine, "embedded", False):
            return None  # a greedy local model that ran out of time would run out again
        hint = getattr(exc, "retry_after", None)
        if isinstance(hint, int | float) and 0 <= hint <= MAX_BACKOFF:
            return float(hint)
        # Jitter keeps threads that failed together from retrying together.
        base = self.retry_backoff * 2 ** (attempt - 1)
        return min(MAX_BACKOFF, base) * random.uniform(0.5, 1.0)

    def _wait_or_raise(self, exc: LMError, attempt: int) -> float:
        """Seconds to wait before the next try; raises the error to report when done."""
        wait = self._retry_wait(exc, attempt)
        if wait is None:
            problem = classify(self, exc, attempts=attempt)
            if problem is None:
                raise exc
            raise problem from exc
        logger.info("retrying %s in %.2f s after: %s", self.model, wait, exc)
        note_retry()
        return wait

    def copy(self, **kwargs):
        """``dspy.LM.copy``, with the seed moved by the rollout id when one is given.

        Optimizers ask for different samples of one prompt with ``copy(rollout_id=r,
        temperature=1.0)`` (SIMBA; also BestOfN and Refine). DSPy keeps the id out of the
        request, so with this LM's fixed seed a seeded sampler (the embedded engine, or an API
        honouring ``seed``) draws the same sample for every rollout. The seed becomes the
        base seed plus the rollout id; an explicit ``seed=`` wins.
        """
        rollout = kwargs.get("rollout_id")
        seed = self.kwargs.get("seed")
        if rollout is not None and "seed" not in kwargs and seed is not None:
            kwargs["seed"] = seed - (self.kwargs.get("rollout_id") or 0) + rollout
        return super().copy(**kwargs)

    def __call__(self, *args, **kwargs):
        attempt = 0
        while True:
            attempt += 1
            try:
                return super().__call__(*args, **kwargs)
            except LMError as exc:
                time.sleep(self._wait_or_raise(exc, attempt))

    async def acall(self, *args, **kwargs):
        attempt = 0
        while True:
            attempt += 1
            try:
                return await super().acall(*args, **kwargs)
            except LMError as exc:
                await asyncio.sleep(self._wait_or_raise(exc, attempt))


def _bundled_or_file(parsed: ModelSpec) -> tuple[Path, str]:
    """(GGUF path, DSPy model string) for a bundled or file spec."""
    if parsed.kind == "bundled":
        bundle = BUNDLED_MODELS[parsed.value]
        path = assemble_model(bundle)
        sha = bundle.sha256 or assembled_sha256(path)
        return path, f"local/{bundle.name}-{sha[:12]}"
    path = Path(parsed.value).expanduser()
    if not path.is_file():
        raise LMSetupError(f"GGUF file {path} does not exist; pass 'local:/path/to/model.gguf'")
    with open(path, "rb") as handle:
        if handle.read(4) != b"GGUF":
            raise LMSetupError(
                f"{path} is not a GGUF file (llama.cpp needs GGUF; convert it with "
                "llama.cpp's convert_hf_to_gguf.py)"
            )
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).strip("-").lower() or "model"
    return path, f"local/{stem}-{file_fingerprint(path)[:12]}"


def make_lm(
    spec: str = DEFAULT_SPEC,
    *,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    n_ctx: int | None = None,
    seed: int | None = 0,
    cache: bool = True,
    api_base: str | None = None,
    api_key: str | None = None,
    timeout: float | None = None,
    num_retries: int | None = None,
    retry_backoff: float = 1.0,
    n_threads: int | None = None,
    extra_buffers: str | None = None,
    isolation: str | None = None,
    flash_attn: bool = False,
    lookup_decoding: bool = True,
    prefix_states_mb: int = DEFAULT_MB,
    check_connection: bool = True,
    **kwargs: Any,
) -> dspy.BaseLM:
    """Build the DSPy LM for a model spec.

    Args:
        spec: ``"local"`` (embedded Qwen2.5-Coder-0.5B-Instruct), ``"local-1.5b"``,
            ``"local:/path/to/model.gguf"`` or a LiteLLM model string (``"openai/gpt-4o-mini"``,
            ``"gemini/..."``, ``"anthropic/..."``, ``"ollama_chat/..."``, ``"openai/<name>"`` with
            ``api_base`` for vLLM or a llama.cpp server).
        temperature: Sampling temperature; 0 is greedy (the default, for reproducible runs).
        max_tokens: Output token limit; None means 1024 for embedded models and the provider's
            default for API models.
        n_ctx: Context window. Embedded models: the llama.cpp context size (default 8192).
            API models: the window to assume when LiteLLM does not know the model (e.g. a vLLM
            server); reported by :func:`context_window`.
        seed: Sampling seed (sent to providers that take one; part of the cache key).
        cache: Whether DSPy caches responses.
        api_base: Base URL of an OpenAI-compatible (or other LiteLLM-supported) server.
        api_key: API key; by default the provider's environment variable is used.
        timeout: Seconds a call may take; a call that runs longer is retried (API models) and
            then raises :class:`LMCallError`.
        num_retries: Retries of passing faults (rate limits, server errors, dropped
            connections, timeouts); None means 0 for embedded models (a local failure repeats)
            and 3 for API models.
        retry_backoff: Seconds before the first retry, doubled for each further one.
        n_threads, extra_buffers, isolation, flash_attn, lookup_decoding, prefix_states_mb:
            Embedded models only, passed to :class:`LlamaCppEngine` (see there): CPU threads
            (default: all available cores); llama.cpp's extra CPU buffers (``"auto"``, the
            default or ``FRAMES_DSPY_EXTRA_BUFFERS``: on unless they crash; ``"on"``, ``"off"``);
            ``"process"`` isolation (a worker process, the default: a native crash fails one
            call, not the caller) or ``"inline"``; flash attention (off: on this CPU it made
            multi-step conditions slower); drafts copied from the prompt, verified in one batch;
            MiB of recent prompts' KV states kept to resume from (0: only the live cache).
        check_connection: Check at once that ``api_base`` accepts connections.
        **kwargs: Further generation settings sent with every request (e.g. ``top_p``,
            ``top_k``, ``frequency_penalty``); they are part of DSPy's cache key.

    Returns:
        A ``dspy.LM`` (a :class:`FramesLM`) carrying the parsed spec as ``lm.model_spec``;
        embedded models run through a :class:`LlamaCppEngine` reachable as ``lm.engine``.

    Raises:
        ValueError: The spec is malformed.
        LMSetupError: The model cannot run as configured (the message says how to fix it).
    """
    parsed = parse_spec(spec)
    settings = {key: value for key, value in kwargs.items() if value is not None}
    if seed is not None:
        settings["seed"] = seed
    lm_args = {"temperature": temperature, "max_tokens": max_tokens, "cache": cache}
    lm_args.update(num_retries=num_retries, retry_backoff=retry_backoff, settings=settings)
    if not parsed.embedded:
        server = {"api_base": api_base, "api_key": api_key, "timeout": timeout}
        return _api_lm(parsed, server, n_ctx=n_ctx, check_connection=check_connection, **lm_args)
    engine = {"n_ctx": n_ctx, "n_threads": n_threads, "seed": seed, "timeout": timeout}
    engine.update(extra_buffers=extra_buffers, isolation=isolation, flash_attn=flash_attn)
    engine.update(lookup_decoding=lookup_decoding, prefix_states_mb=prefix_states_mb)
    return _embedded_lm(parsed, engine, spec=spec, server=(api_base, api_key), **lm_args)


def _embedded_lm(
    parsed: ModelSpec,
    engine_settings: dict[str, Any],
    *,
    spec: str,
    server: tuple[str | None, str | None],
    temperature: float,
    max_tokens: int | None,
    cache: bool,
    num_retries: int | None,
    retry_backoff: float,
    settings: dict[str, Any],
) -> FramesLM:
    """:func:`make_lm` for an embedded model: its weights, a llama.cpp engine, the LM."""
    if any(server):
        raise ValueError(
            f"api_base/api_key do not apply to the embedded model {spec!r}; "
            "for a llama.cpp server use make_lm('openai/<name>', api_base=...)"
        )
    _import_llama_cpp()
    path, model = _bundled_or_file(parsed)
    engine = LlamaCppEngine(
        path,
        n_ctx=engine_settings["n_ctx"] or parsed.default_n_ctx,
        n_threads=engine_settings["n_threads"],
        seed=engine_settings["seed"] or 0,
        timeout=engine_settings["timeout"],
        extra_buffers=engine_settings["extra_buffers"],
        isolation=engine_settings["isolation"],
        flash_attn=engine_settings["flash_attn"],
        lookup_decoding=engine_settings["lookup_decoding"],
        prefix_states_mb=engine_settings["prefix_states_mb"],
    )
    return FramesLM(
        model,
        engine=engine,
        temperature=temperature,
        max_tokens=max_tokens or DEFAULT_LOCAL_MAX_TOKENS,
        cache=cache,
        max_retries=0 if num_retries is None else num_retries,
        retry_backoff=retry_backoff,
        model_spec=parsed,
        context_window=engine.n_ctx,
        **settings,
    )


def _api_lm(
    parsed: ModelSpec,
    server: dict[str, Any],
    *,
    temperature: float,
    max_tokens: int | None,
    n_ctx: int | None,
    cache: bool,
    num_retries: int | None,
    retry_backoff: float,
    check_connection: bool,
    settings: dict[str, Any],
) -> FramesLM:
    """:func:`make_lm` for a LiteLLM model: reachability, the API key, the LM."""
    model = parsed.value
    api_base, api_key = server["api_base"], server["api_key"]
    _use_packaged_model_map()
    if api_base and check_connection:
        _check_reachable(api_base)
    key = _resolve_api_key(model, api_key, api_base)
    client = {"api_base": api_base, "api_key": key, "timeout": server["timeout"]}
    try:
        return FramesLM(
            model,
            temperature=temperature,
            max_tokens=max_tokens,
            cache=cache,
            max_retries=3 if num_retries is None else num_retries,
            retry_backoff=retry_backoff,
            model_spec=parsed,
            context_window=n_ctx,
            **{k: v for k, v in client.items() if v is not None},
            **settings,
        )
    except LMConfigurationError as exc:
        # e.g. OpenAI reasoning models take only temperature 1 and max_tokens >= 16000; a
        # reproduction should say so rather than quietly change the sampling settings.
        raise LMSetupError(
            f"{model!r} does not accept these settings: {exc.message}; pass them to make_lm "
            "(e.g. temperature=1.0, max_tokens=16000)"
        ) from exc
