"""The DSPy LM for a model spec: :func:`make_lm` and the :class:`FramesLM` it returns."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import dspy
from dspy.utils.exceptions import LMConfigurationError, LMError

from frames_dspy.lm.errors import LMSetupError, _setup_error
from frames_dspy.lm.litellm_setup import (
    _check_reachable,
    _resolve_api_key,
    _use_packaged_model_map,
)
from frames_dspy.lm.llama_engine import LlamaCppEngine, _import_llama_cpp
from frames_dspy.lm.specs import (
    BUNDLED_MODELS,
    DEFAULT_LOCAL_MAX_TOKENS,
    DEFAULT_SPEC,
    ModelSpec,
    parse_spec,
)
from frames_dspy.lm.weights import assemble_model, assembled_sha256, file_fingerprint

__all__ = ["FramesLM", "make_lm"]


class FramesLM(dspy.LM):
    """A ``dspy.LM`` whose set-up failures surface as :class:`LMSetupError`.

    Built by :func:`make_lm`; behaves exactly like ``dspy.LM`` otherwise. Authentication,
    transport and timeout failures at call time are re-raised as :class:`LMSetupError` with the
    fix in the message (the original DSPy error is the ``__cause__``).

    Args:
        model: The DSPy model string.
        *args: Passed to ``dspy.LM``.
        model_spec: The parsed spec the LM was built from, kept so callers need not parse the
            spec string again (``lm.model_spec.embedded``, ``.default_context_tokens(...)``).
        context_window: The window the caller declared (the embedded model's ``n_ctx``, or
            ``n_ctx`` given to :func:`make_lm` for an API model); stored as
            ``declared_context_window``, which :func:`~frames_dspy.lm.usage.context_window`
            reads first.
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
        **kwargs: Any,
    ):
        super().__init__(model, *args, **kwargs)
        # Plain attributes set here, never patched on afterwards: dspy.LM.copy() copies the
        # instance, so a copy (e.g. lm.copy(cache=False)) keeps both.
        self.model_spec = model_spec
        self.declared_context_window = context_window

    @property
    def spec(self) -> str | None:
        """The spec string the LM was built from (``model_spec.text``), or None."""
        return self.model_spec.text if self.model_spec is not None else None

    def __call__(self, *args, **kwargs):
        try:
            return super().__call__(*args, **kwargs)
        except LMError as exc:
            translated = _setup_error(self, exc)
            if translated is None:
                raise
            raise translated from exc

    async def acall(self, *args, **kwargs):
        try:
            return await super().acall(*args, **kwargs)
        except LMError as exc:
            translated = _setup_error(self, exc)
            if translated is None:
                raise
            raise translated from exc


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
    n_threads: int | None = None,
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
        timeout: Seconds a call may take; a call that runs longer raises :class:`LMSetupError`.
        num_retries: Retries of transient failures; None means 0 for embedded models (a local
            failure repeats) and 3 for API models.
        n_threads: CPU threads for embedded models (default: all available cores).
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
    if parsed.embedded:
        if api_base or api_key:
            raise ValueError(
                f"api_base/api_key do not apply to the embedded model {spec!r}; "
                "for a llama.cpp server use make_lm('openai/<name>', api_base=...)"
            )
        _import_llama_cpp()
        path, model = _bundled_or_file(parsed)
        engine = LlamaCppEngine(
            path,
            n_ctx=n_ctx or parsed.default_n_ctx,
            n_threads=n_threads,
            seed=seed or 0,
            timeout=timeout,
        )
        return FramesLM(
            model,
            engine=engine,
            temperature=temperature,
            max_tokens=max_tokens or DEFAULT_LOCAL_MAX_TOKENS,
            cache=cache,
            num_retries=0 if num_retries is None else num_retries,
            model_spec=parsed,
            context_window=engine.n_ctx,
            **settings,
        )

    model = parsed.value
    _use_packaged_model_map()
    if api_base and check_connection:
        _check_reachable(api_base)
    key = _resolve_api_key(model, api_key, api_base)
    client = {"api_base": api_base, "api_key": key, "timeout": timeout}
    try:
        return FramesLM(
            model,
            temperature=temperature,
            max_tokens=max_tokens,
            cache=cache,
            num_retries=3 if num_retries is None else num_retries,
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
