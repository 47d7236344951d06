"""The embedded llama.cpp engine: a GGUF model behind DSPy's engine extension point.

DSPy calls an engine with a canonical ``Request`` and expects a ``Response``
(``dspy.LM(model, engine=...)``), so DSPy's response cache, history and usage tracking work for
the embedded model as for any provider. This module is the DSPy side: it translates requests
into chat completions and responses back, and keeps one model host per file, context size and
kernel settings for the whole process. The model itself runs in a worker process by default
(:mod:`~frames_dspy.lm.engine.llama_process`, running
:mod:`~frames_dspy.lm.engine.llama_worker`), so a native crash of llama.cpp fails one call, not
the run; ``isolation="inline"`` runs it in this process (the fast tests' fake ``llama_cpp``).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dspy.lm15 import (
    ContextLengthError,
    Message,
    Request,
    Response,
    TextPart,
    ThinkingPart,
    TokenLogprob,
    TopLogprob,
    UnsupportedFeatureError,
    Usage,
    response_to_events,
)
from dspy.lm15 import TimeoutError as LM15TimeoutError

from frames_dspy.lm.engine.llama_process import (
    EXTRA_BUFFERS,
    EXTRA_BUFFERS_ENV,
    EngineHost,
)
from frames_dspy.lm.engine.llama_worker import EngineSettings, Generation
from frames_dspy.lm.engine.prompt_cache import DEFAULT_MB
from frames_dspy.lm.specs import DEFAULT_N_CTX

__all__ = ["LlamaCppEngine", "loaded_models"]

logger = logging.getLogger(__name__)


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


#: Where the model runs unless told: "process" (a worker process; a native crash fails one
#: call, not the run) or "inline" (this process; the fast tests' fake llama_cpp).
DEFAULT_ISOLATION = "process"
#: What builds the model in a worker process (tests name a stand-in that crashes on purpose).
DEFAULT_FACTORY = EngineSettings.factory
ISOLATIONS = ("process", "inline")

_OVERFLOW = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")


_HOSTS: dict[tuple[str, int, bool, bool, int], EngineHost] = {}
_HOSTS_LOCK = threading.Lock()


class LlamaCppEngine:
    """A DSPy engine that runs a GGUF model with llama-cpp-python.

    The model runs in a worker process (``isolation="process"``, the default), so a native
    crash of llama.cpp fails the call that was running (recorded as that question's error)
    instead of killing the run; the next call starts a new worker, and after
    :data:`MAX_CONSECUTIVE_CRASHES` crashes in a row the engine raises :class:`LMSetupError`
    (the run stops, keeping what finished). The worker is started on the first call (so a
    fully cached run never loads the model), loads the model, and answers a probe; if the
    probe crashes with llama.cpp's extra CPU buffers (AMX, repacked weights), the worker is
    replaced by one without them. Every engine in the process with the same file and context
    size shares one worker. Calls on one model are serialised (llama.cpp contexts are not
    thread-safe); consecutive calls reuse the KV cache for their shared prompt prefix.

    Args:
        model_path: The GGUF file.
        n_ctx: Context window in tokens.
        n_threads: CPU threads; defaults to all cores available to this process.
        seed: Sampling seed used when a request does not carry one.
        timeout: Seconds a call may generate before it is stopped (None: no limit).
        isolation: ``"process"`` or ``"inline"`` (in this process); None means
            :data:`DEFAULT_ISOLATION`.
        extra_buffers: ``"auto"``, ``"on"`` or ``"off"``; None reads ``FRAMES_DSPY_EXTRA_BUFFERS``
            (default ``"auto"``).
        flash_attn: Use llama.cpp's flash attention (off by default; see
            :class:`~frames_dspy.lm.engine.llama_worker.EngineSettings`).
        lookup_decoding: Draft tokens copied from the context and verify them in one batch
            (:mod:`~frames_dspy.lm.engine.lookup_decoding`; faster replies that copy the prompt).
        prefix_states_mb: MiB of recent prompts' KV states kept to resume from
            (:mod:`~frames_dspy.lm.engine.prompt_cache`); 0 keeps only the live cache.
        llama: An already constructed ``llama_cpp.Llama``-like object, run inline (tests).
    """

    #: Marks an engine that runs the model on this machine; code that must not import this
    #: module (``errors``, to avoid an import cycle) asks for it instead of ``isinstance``.
    embedded = True

    #: Request settings this engine honours (DSPy reads them as ``lm.supported_params``).
    #: ``response_format`` is left out on purpose: DSPy's JSONAdapter would then ask for
    #: structured output, which changes what the programs send.
    supported_params = frozenset(
        {
            "temperature",
            "max_tokens",
            "top_p",
            "top_k",
            "stop",
            "seed",
            "frequency_penalty",
            "presence_penalty",
            "logit_bias",
            "logprobs",
            "top_logprobs",
        }
    )

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        seed: int = 0,
        timeout: float | None = None,
        isolation: str | None = None,
        extra_buffers: str | None = None,
        flash_attn: bool = False,
        lookup_decoding: bool = True,
        prefix_states_mb: int = DEFAULT_MB,
        llama: Any | None = None,
    ):
        isolation = isolation or DEFAULT_ISOLATION
        if n_ctx < 256:
            raise ValueError(f"n_ctx={n_ctx} is too small for a chat prompt; use 2048 or more")
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation={isolation!r}; choose one of {', '.join(ISOLATIONS)}")
        extra_buffers = extra_buffers or os.environ.get(EXTRA_BUFFERS_ENV) or "auto"
        if extra_buffers not in EXTRA_BUFFERS:
            raise ValueError(
                f"extra buffers {extra_buffers!r} (extra_buffers= or {EXTRA_BUFFERS_ENV}); "
                f"choose one of {', '.join(EXTRA_BUFFERS)}"
            )
        self.model_path = str(Path(model_path).expanduser())
        self.n_ctx = int(n_ctx)
        self.n_threads = n_threads or _cpu_count()
        self.seed = seed
        self.timeout = timeout
        self.isolation = isolation
        self.extra_buffers = extra_buffers
        self.flash_attn = bool(flash_attn)
        self.lookup_decoding = bool(lookup_decoding)
        if prefix_states_mb < 0:
            raise ValueError(f"prefix_states_mb={prefix_states_mb} must be 0 (off) or more")
        self.prefix_states_mb = int(prefix_states_mb)
        self._injected = EngineHost.injected(llama, self._settings()) if llama is not None else None

    def _key(self) -> tuple[str, int, bool, bool, int]:
        # Engines with the same file, window and kernels share one loaded model.
        return (
            self.model_path,
            self.n_ctx,
            self.flash_attn,
            self.lookup_decoding,
            self.prefix_states_mb,
        )

    def _settings(self) -> EngineSettings:
        return EngineSettings(
            model_path=self.model_path,
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            seed=self.seed,
            extra_buffers=self.extra_buffers != "off",
            flash_attn=self.flash_attn,
            lookup_decoding=self.lookup_decoding,
            prefix_states_mb=self.prefix_states_mb,
            factory=DEFAULT_FACTORY,
        )

    # -- loading ---------------------------------------------------------------------------

    def _host(self) -> EngineHost:
        if self._injected is not None:
            return self._injected
        key = self._key()
        host = _HOSTS.get(key)
        if host is None:
            with _HOSTS_LOCK:
                host = _HOSTS.get(key)
                if host is None:
                    host = EngineHost(
                        self._settings(), isolation=self.isolation, extra_buffers=self.extra_buffers
                    )
                    _HOSTS[key] = host
        return host

    def load(self) -> dict[str, Any]:
        """Load the model now (it otherwise loads on the first call); returns :meth:`record`."""
        host = self._host()
        with host.lock:
            host.start()
        return host.record()

    def inline_llama(self) -> Any:
        """The loaded ``llama_cpp.Llama`` of an inline engine (benchmarks compare against it).

        Raises:
            ValueError: the model runs in a worker process.
        """
        host = self._host()
        if host.isolation != "inline":
            raise ValueError("the model runs in a worker process; build the engine inline")
        with host.lock:
            host.start()
        return host.llama

    def record(self) -> dict[str, Any]:
        """How the model runs (isolation, threads, extra buffers and any fallback, the CPU)."""
        return self._host().record()

    @property
    def load_seconds(self) -> float | None:
        """Seconds the model took to load (and probe), or None if it is not loaded yet."""
        host = self._injected or _HOSTS.get(self._key())
        return host.load_seconds if host is not None else None

    # -- tokens ----------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` in this model's vocabulary (no chat-template overhead).

        Takes no lock: tokenizing reads only the vocabulary, never the context a running
        generation is using, so counting does not wait behind other threads' calls.
        """
        llama = self._host().tokenizer()
        return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    # -- the engine contract ---------------------------------------------------------------

    def complete(self, request: Request) -> Response:
        """Run one chat completion for a DSPy request.

        Args:
            request: The canonical DSPy (lm15) request.

        Returns:
            The response, with prompt and completion token counts in ``usage``.

        Raises:
            dspy.lm15.ContextLengthError: The prompt does not fit in the context window.
            dspy.lm15.TimeoutError: Generation ran past ``timeout``.
            dspy.lm15.UnsupportedFeatureError: The request needs tools or images.
            LMCallError: The engine crashed during this call (the next call restarts it).
            LMSetupError: llama-cpp-python is missing, the model cannot be loaded, or the
                engine keeps crashing.
        """
        from dspy.clients.engines.base import validate_request

        validate_request(request)
        kwargs = _generation_kwargs(request, default_seed=self.seed)
        messages = _chat_messages(request)
        host = self._host()
        top = request.config.logprobs
        with host.lock:
            try:
                generation = host.generate(messages, kwargs, top, self.timeout)
            except ValueError as exc:
                match = _OVERFLOW.search(str(exc))
                if match is None:
                    raise
                prompt_tokens, window = int(match.group(1)), int(match.group(2))
                raise ContextLengthError(
                    f"the prompt is {prompt_tokens} tokens but the embedded model's context "
                    f"window is {window} tokens (n_ctx); lower the program's context budget "
                    "(fewer or shorter articles) or load the model with a larger n_ctx",
                    provider="llama-cpp",
                ) from exc
        if generation.timed_out:
            raise LM15TimeoutError(
                f"the embedded model was still generating after {self.timeout:g} s (timeout=); "
                "raise timeout, lower max_tokens, or shorten the prompt",
                provider="llama-cpp",
            )
        logprobs = (
            _token_logprobs(generation, host.tokenizer(), _text(generation.out), top)
            if generation.steps is not None
            else None
        )
        return _response(request, generation, logprobs)

    def stream(self, request: Request) -> Iterator[Any]:
        """Stream events of a completed response (llama.cpp output is not streamed through)."""
        return response_to_events(self.complete(request))

    def close(self) -> None:
        """Nothing to release: the model stays loaded for other LMs in this process."""

    def dump_state(self) -> dict[str, Any]:
        """Settings to rebuild this engine when a program saves its LM (no secrets)."""
        return {
            "model_path": self.model_path,
            "n_ctx": self.n_ctx,
            "seed": self.seed,
            "timeout": self.timeout,
            "isolation": self.isolation,
            "extra_buffers": self.extra_buffers,
            "flash_attn": self.flash_attn,
            "lookup_decoding": self.lookup_decoding,
            "prefix_states_mb": self.prefix_states_mb,
        }

    @classmethod
    def load_state(cls, state: Mapping[str, Any]) -> LlamaCppEngine:
        """Rebuild an engine from :meth:`dump_state` output."""
        return cls(
            state["model_path"],
            n_ctx=state.get("n_ctx", DEFAULT_N_CTX),
            seed=state.get("seed", 0),
            timeout=state.get("timeout"),
            isolation=state.get("isolation"),
            extra_buffers=state.get("extra_buffers"),
            flash_attn=state.get("flash_attn", False),
            lookup_decoding=state.get("lookup_decoding", True),
            prefix_states_mb=state.get("prefix_states_mb", DEFAULT_MB),
        )


def _token_logprobs(
    generation: Generation, llama: Any, text: str, top: int
) -> tuple[TokenLogprob, ...]:
    """The generated tokens that make up ``text``, each with its top alternatives.

    The recorder does not see the last sampled token; it is taken as that step's most likely
    one (exact for greedy decoding, which is what the judge uses). Steps past the text (the
    end of generation, or a stop string) are cut.
    """
    steps = generation.steps or []
    chosen = list(generation.chosen)
    if len(chosen) < len(steps):
        chosen.append(steps[-1][0])
    pieces: dict[int, bytes] = {}

    def piece(token: int) -> bytes:
        if token not in pieces:
            pieces[token] = bytes(llama.detokenize([token]))
        return pieces[token]

    out: list[TokenLogprob] = []
    length = 0
    for (token, logprob), alternatives in zip(chosen, steps, strict=False):
        if length >= len(text):
            break
        raw = piece(token)
        word = raw.decode("utf-8", errors="ignore")
        length += len(word)
        out.append(
            TokenLogprob(
                token=word,
                logprob=logprob,
                bytes=tuple(raw),
                token_id=token,
                top=tuple(
                    TopLogprob(
                        token=piece(i).decode("utf-8", errors="ignore"),
                        logprob=lp,
                        bytes=tuple(piece(i)),
                        token_id=i,
                    )
                    for i, lp in alternatives[: int(top)]
                ),
            )
        )
    return tuple(out)


def _part_text(part: Any, role: str) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, ThinkingPart) and role == "assistant":
        return ""
    raise UnsupportedFeatureError(
        f"the embedded model takes text only; got a {getattr(part, 'type', type(part).__name__)} "
        f"part in a {role} message",
        feature=str(getattr(part, "type", "content")),
    )


def _chat_messages(request: Request) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = []
    if request.system is not None:
        system = request.system
        text = (
            system
            if isinstance(system, str)
            else "".join(_part_text(part, "system") for part in system)
        )
        messages.append({"role": "system", "content": text})
    for message in request.messages:
        role = "system" if message.role == "developer" else message.role
        if role not in {"system", "user", "assistant"}:
            raise UnsupportedFeatureError(
                f"the embedded model has no {message.role!r} messages (no tool calling)",
                feature="tools",
            )
        messages.append(
            {"role": role, "content": "".join(_part_text(p, role) for p in message.parts)}
        )
    return messages


def _generation_kwargs(request: Request, *, default_seed: int) -> dict[str, Any]:
    config = request.config
    if request.tools:
        raise UnsupportedFeatureError("the embedded model does no tool calling", feature="tools")
    kwargs: dict[str, Any] = {
        "temperature": 0.0 if config.temperature is None else float(config.temperature),
        "max_tokens": config.max_tokens,
        "stop": list(config.stop),
        "seed": default_seed if config.seed is None else config.seed,
    }
    if config.temperature is None or config.temperature == 0:
        # Greedy decoding; llama-cpp-python's own defaults (top_k=40, min_p=0.05) are moot.
        kwargs["top_k"] = 1
    if config.top_p is not None:
        kwargs["top_p"] = config.top_p
    if config.top_k is not None:
        kwargs["top_k"] = config.top_k
    if config.frequency_penalty is not None:
        kwargs["frequency_penalty"] = config.frequency_penalty
    if config.presence_penalty is not None:
        kwargs["presence_penalty"] = config.presence_penalty
    fmt = config.response_format
    if fmt:
        kind = fmt.get("type")
        if kind == "json_schema":
            schema = (fmt.get("json_schema") or {}).get("schema")
            kwargs["response_format"] = {
                "type": "json_object",
                **({"schema": schema} if schema else {}),
            }
        elif kind == "json_object":
            kwargs["response_format"] = dict(fmt)
    extensions = dict(config.extensions or {})
    if "logit_bias" in extensions:
        # OpenAI's wire spells token ids as strings; llama-cpp-python wants ints.
        kwargs["logit_bias"] = {int(k): float(v) for k, v in extensions.pop("logit_bias").items()}
    if extensions:
        names = sorted(extensions)
        raise UnsupportedFeatureError(
            f"the embedded engine does not take {names}", feature=names[0]
        )
    return kwargs


def _text(out: Mapping[str, Any]) -> str:
    return (out["choices"][0].get("message") or {}).get("content") or ""


def _response(
    request: Request,
    generation: Generation,
    logprobs: tuple[TokenLogprob, ...] | None = None,
) -> Response:
    out = generation.out
    choice = out["choices"][0]
    text = _text(out)
    finish = "length" if choice.get("finish_reason") == "length" else "stop"
    usage = out.get("usage") or {}
    return Response(
        id=out.get("id") or None,
        model=request.model,
        message=Message.assistant(text),
        finish_reason=finish,
        usage=Usage(
            input_tokens=usage.get("prompt_tokens"), output_tokens=usage.get("completion_tokens")
        ),
        logprobs=logprobs,
        provider_data={
            "backend": "llama-cpp-python",
            "seconds": round(generation.seconds, 4),
            **(generation.perf or {}),
        },
    )


def loaded_models() -> dict[tuple[str, int, bool, bool, int], float]:
    """Models loaded in this process: ``{(path, n_ctx, flash_attn, lookup_decoding,
    prefix_states_mb): load seconds}``."""
    return {key: host.load_seconds for key, host in _HOSTS.items() if host.load_seconds is not None}


def _reset_loaded_models() -> None:
    """Stop every worker and forget loaded models (tests, benchmarks, interpreter exit)."""
    with _HOSTS_LOCK:
        for host in _HOSTS.values():
            host.close()
        _HOSTS.clear()


atexit.register(_reset_loaded_models)
