"""The in-process llama.cpp engine: a GGUF model behind DSPy's engine extension point.

DSPy calls an engine with a canonical ``Request`` and expects a ``Response``
(``dspy.LM(model, engine=...)``), so DSPy's response cache, history and usage tracking work for
the embedded model as for any provider. This module translates requests into
llama-cpp-python chat completions and keeps one loaded model per file and context size for the
whole process.
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
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

from frames_dspy.lm.errors import LMSetupError
from frames_dspy.lm.specs import DEFAULT_N_CTX

__all__ = ["LlamaCppEngine", "loaded_models"]

logger = logging.getLogger(__name__)


def _import_llama_cpp():
    try:
        return importlib.import_module("llama_cpp")
    except ImportError as exc:
        raise LMSetupError(
            "the embedded model needs llama-cpp-python, which is not installed (or failed to "
            f'load: {exc}); install the local extra: pip install -e ".[local]"'
        ) from exc


@dataclass
class _Loaded:
    llama: Any
    lock: threading.Lock
    load_seconds: float


_LOADED: dict[tuple[str, int], _Loaded] = {}
_LOAD_LOCK = threading.Lock()


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_OVERFLOW = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")


class LlamaCppEngine:
    """A DSPy engine that runs a GGUF model in this process with llama-cpp-python.

    The model is loaded on the first call (so a fully cached run never loads it) and shared by
    every engine in the process with the same file and context size. llama.cpp contexts are not
    thread-safe and DSPy evaluates with threads, so calls on one model are serialised by a lock;
    consecutive calls reuse the KV cache for their shared prompt prefix.

    Args:
        model_path: The GGUF file.
        n_ctx: Context window in tokens.
        n_threads: CPU threads; defaults to all cores available to this process.
        seed: Sampling seed used when a request does not carry one.
        timeout: Seconds a call may generate before it is stopped (None: no limit).
        llama: An already constructed ``llama_cpp.Llama``-like object (tests inject a fake).
    """

    #: Marks an engine that runs the model in this process; code that must not import this
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
        llama: Any | None = None,
    ):
        if n_ctx < 256:
            raise ValueError(f"n_ctx={n_ctx} is too small for a chat prompt; use 2048 or more")
        self.model_path = str(Path(model_path).expanduser())
        self.n_ctx = int(n_ctx)
        self.n_threads = n_threads or _cpu_count()
        self.seed = seed
        self.timeout = timeout
        self._injected = _Loaded(llama, threading.Lock(), 0.0) if llama is not None else None

    # -- loading ---------------------------------------------------------------------------

    def _loaded(self) -> _Loaded:
        if self._injected is not None:
            return self._injected
        key = (self.model_path, self.n_ctx)
        loaded = _LOADED.get(key)
        if loaded is not None:
            return loaded
        with _LOAD_LOCK:
            loaded = _LOADED.get(key)
            if loaded is None:
                loaded = self._load_llama()
                _LOADED[key] = loaded
        return loaded

    def _load_llama(self) -> _Loaded:
        llama_cpp = _import_llama_cpp()
        if not Path(self.model_path).is_file():
            raise LMSetupError(f"model file {self.model_path} does not exist")
        started = time.perf_counter()
        try:
            llama = llama_cpp.Llama(
                model_path=self.model_path,
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                seed=self.seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise LMSetupError(
                f"llama-cpp-python could not load {self.model_path} with n_ctx={self.n_ctx} "
                f"({exc}); check that it is a GGUF file of a supported architecture and that "
                "there is memory for the context (try a smaller n_ctx)"
            ) from exc
        seconds = time.perf_counter() - started
        logger.info(
            "loaded %s (n_ctx=%d, %d threads) in %.2f s",
            self.model_path,
            self.n_ctx,
            self.n_threads,
            seconds,
        )
        return _Loaded(llama, threading.Lock(), seconds)

    def load(self) -> Any:
        """Load the model now (it otherwise loads on the first call) and return the Llama."""
        return self._loaded().llama

    @property
    def load_seconds(self) -> float | None:
        """Seconds the model took to load in this process, or None if it is not loaded yet."""
        loaded = self._injected or _LOADED.get((self.model_path, self.n_ctx))
        return loaded.load_seconds if loaded is not None else None

    # -- tokens ----------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` in this model's vocabulary (no chat-template overhead).

        Takes no lock: tokenizing reads only the vocabulary, never the context a running
        generation is using, so counting does not wait behind other threads' calls.
        """
        llama = self._loaded().llama
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
            LMSetupError: llama-cpp-python is missing or the model cannot be loaded.
        """
        from dspy.clients.engines.base import validate_request

        validate_request(request)
        kwargs = _generation_kwargs(request, default_seed=self.seed)
        messages = _chat_messages(request)
        loaded = self._loaded()
        scores = (
            _StepScores(request.config.logprobs) if request.config.logprobs is not None else None
        )
        with loaded.lock:
            started = time.perf_counter()
            deadline = None
            # The recorder comes first, so it sees the model's own scores.
            processors: list[Any] = [scores] if scores is not None else []
            if self.timeout is not None:
                deadline = _Deadline(started + self.timeout, loaded.llama.token_eos())
                processors.append(deadline)
            if processors:
                kwargs["logits_processor"] = processors
            try:
                out = loaded.llama.create_chat_completion(messages=messages, **kwargs)
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
            seconds = time.perf_counter() - started
        if deadline is not None and deadline.hit:
            raise LM15TimeoutError(
                f"the embedded model was still generating after {self.timeout:g} s (timeout=); "
                "raise timeout, lower max_tokens, or shorten the prompt",
                provider="llama-cpp",
            )
        logprobs = scores.token_logprobs(loaded.llama, _text(out)) if scores is not None else None
        return _response(request, out, seconds, logprobs)

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
        }

    @classmethod
    def load_state(cls, state: Mapping[str, Any]) -> LlamaCppEngine:
        """Rebuild an engine from :meth:`dump_state` output."""
        return cls(
            state["model_path"],
            n_ctx=state.get("n_ctx", DEFAULT_N_CTX),
            seed=state.get("seed", 0),
            timeout=state.get("timeout"),
        )


class _Deadline:
    """A llama-cpp-python logits processor that ends a generation once its time is up.

    Processors run inside a C callback where an exception cannot propagate, so instead every
    token but end-of-generation is masked; ``hit`` tells the caller to report a timeout.
    """

    def __init__(self, at: float, eos: int):
        self.at = at
        self.eos = eos
        self.hit = False

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.hit or time.perf_counter() > self.at:
            self.hit = True
            scores.fill(-math.inf)
            scores[self.eos] = 0.0
        return scores


class _StepScores:
    """A logits processor that keeps the top log-probabilities of every generated token.

    llama-cpp-python's own ``logprobs`` needs the model loaded with ``logits_all=True`` (a
    151,936-wide row of scores kept for every prompt token, the head run on every prompt
    token) and then sorts the whole vocabulary in Python for each generated token. Reading the
    scores the sampler is handed costs one log-softmax and a partial sort per generated token.

    Processors are not told which token was sampled; the next step's ``input_ids`` end with
    it. The last step's token is taken as its most likely one (exact for greedy decoding,
    which is what the judge uses), and :meth:`token_logprobs` cuts the steps to the text.
    """

    def __init__(self, top: int):
        self.top = int(top)  # alternatives to report; 0 means the chosen tokens only
        self.steps: list[list[tuple[int, float]]] = []
        self.chosen: list[tuple[int, float]] = []
        self._previous: np.ndarray | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self._previous is not None and input_ids is not None and len(input_ids):
            token = int(input_ids[-1])
            self.chosen.append((token, float(self._previous[token])))
        logits = np.asarray(scores, dtype=np.float64)
        peak = logits.max()
        logprobs = logits - (peak + np.log(np.exp(logits - peak).sum()))
        k = min(max(1, self.top), logprobs.size)
        best = np.argpartition(-logprobs, k - 1)[:k]
        best = best[np.argsort(-logprobs[best], kind="stable")]
        self.steps.append([(int(i), float(logprobs[i])) for i in best])
        self._previous = logprobs
        return scores

    def token_logprobs(self, llama: Any, text: str) -> tuple[TokenLogprob, ...]:
        """The generated tokens that make up ``text``, each with its top alternatives."""
        chosen = list(self.chosen)
        if len(chosen) < len(self.steps):
            chosen.append(self.steps[-1][0])
        pieces: dict[int, bytes] = {}

        def piece(token: int) -> bytes:
            if token not in pieces:
                pieces[token] = bytes(llama.detokenize([token]))
            return pieces[token]

        out: list[TokenLogprob] = []
        length = 0
        for (token, logprob), top in zip(chosen, self.steps, strict=False):
            if length >= len(text):
                break  # end of generation, or a stop string cut the text here
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
                        for i, lp in top[: self.top]
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
    out: Mapping[str, Any],
    seconds: float,
    logprobs: tuple[TokenLogprob, ...] | None = None,
) -> Response:
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
        provider_data={"backend": "llama-cpp-python", "seconds": round(seconds, 4)},
    )


def loaded_models() -> dict[tuple[str, int], float]:
    """Models loaded in this process: ``{(path, n_ctx): load seconds}``."""
    return {key: loaded.load_seconds for key, loaded in _LOADED.items()}


def _reset_loaded_models() -> None:
    """Forget loaded models (tests and benchmarks)."""
    with _LOAD_LOCK:
        _LOADED.clear()
