"""Where llama.cpp actually runs: load a GGUF model and generate, in whichever process hosts it.

The engine (:mod:`~frames_dspy.lm.engine.llama_engine`) normally hosts the model in a child process
(:mod:`~frames_dspy.lm.engine.llama_process` starts one that runs :func:`main`), so a
native crash of llama.cpp (a segfault, an abort, an out-of-memory kill) ends that child and not
the run. The same functions run in-process when the engine is told to (tests with a fake
``llama_cpp``, or ``isolation="inline"``).

Everything that must touch the live model is here: loading with the engine settings, the logits
processors (a deadline, the recorder of each generated token's scores), and one chat
completion. Results cross the process boundary as plain data (:class:`Generation`).
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frames_dspy.lm.engine.lookup_decoding import LookupDrafts, draft_tokens_for
from frames_dspy.lm.engine.prompt_cache import DEFAULT_MB, PrefixStates, cached_class

__all__ = [
    "EngineSettings",
    "Generation",
    "build_llama",
    "generate",
    "load_llama",
    "model_params_patched",
    "serve",
    "system_info",
]

#: Requests a probe sends: short, so a crash shows up in a second and a success costs little.
PROBE_MESSAGES = ({"role": "user", "content": "Say hi"},)


@dataclass(frozen=True)
class EngineSettings:
    """How llama.cpp is asked to run the model; recorded in each run's ``config.json``.

    Attributes:
        model_path: The GGUF file.
        n_ctx: Context window in tokens.
        n_threads: CPU threads for generation and prompt processing.
        seed: Sampling seed used when a request carries none.
        extra_buffers: Whether llama.cpp may put weights in its extra CPU buffer types (AMX
            tiles, repacked layouts). Faster where they work; ``ggml_backend_amx_mul_mat``
            segfaults on some AMX CPUs, so the engine probes and falls back to False.
        flash_attn: Whether llama.cpp uses its fused (flash) attention kernel. On this CPU it
            processed 2,000-3,000-token prompts 12-19% faster, but generated tokens about 20%
            more slowly and took about 35 ms a token for batches of 2-63 tokens (against 12
            ms without it), so the multi-step conditions ran slower with it; off by default.
            It sums in another order, so a greedy answer can differ in rare near-ties.
        lookup_decoding: Draft tokens by copying from the context and verify them in one
            batch (:mod:`~frames_dspy.lm.engine.lookup_decoding`); off for calls that record
            log-probabilities.
        prefix_states_mb: MiB of recent prompts' KV states to keep, so a call resumes
            whichever shares most of its prompt (:mod:`~frames_dspy.lm.engine.prompt_cache`); 0
            keeps only llama.cpp's live cache.
        factory: ``module:attribute`` of a function that builds the Llama from these settings
            in a worker process (tests name a fake that crashes on purpose).
    """

    model_path: str
    n_ctx: int
    n_threads: int
    seed: int = 0
    extra_buffers: bool = True
    flash_attn: bool = False
    lookup_decoding: bool = True
    prefix_states_mb: int = DEFAULT_MB
    factory: str = "frames_dspy.lm.engine.llama_worker:build_llama"

    def record(self) -> dict[str, Any]:
        """The settings that shape results and speed, for a run's config."""
        return {
            "n_ctx": self.n_ctx,
            "n_threads": self.n_threads,
            "extra_buffers": self.extra_buffers,
            "flash_attn": self.flash_attn,
            "lookup_decoding": self.lookup_decoding,
            "prefix_states_mb": self.prefix_states_mb,
        }


@dataclass
class Generation:
    """One chat completion as plain data.

    Attributes:
        out: llama-cpp-python's completion dict.
        seconds: Time spent generating (prompt processing included).
        timed_out: The deadline ended the generation early.
        steps: Per generated token, the top ``(token id, logprob)`` pairs (when asked).
        chosen: Per generated token but possibly the last, ``(token id, logprob)``.
        perf: llama.cpp's own counts for this call, when it keeps them: prompt tokens
            evaluated (a reused KV-cache prefix is not) and their milliseconds, tokens
            generated and theirs; with saved states, the prompt tokens a restored state spared
            (``prompt_restored``).
    """

    out: dict[str, Any]
    seconds: float
    timed_out: bool = False
    steps: list[list[tuple[int, float]]] | None = None
    chosen: list[tuple[int, float]] = field(default_factory=list)
    perf: dict[str, float] | None = None


def _resolve(factory: str) -> Any:
    module, _, name = factory.partition(":")
    return getattr(importlib.import_module(module), name)


@contextlib.contextmanager
def model_params_patched(llama_cpp: Any, extra_buffers: bool) -> Iterator[None]:
    """Make llama-cpp-python build its model parameters with ``use_extra_bufts`` set.

    ``Llama()`` takes no argument for it: it fills the C struct from
    ``llama_model_default_params()``, so that function is wrapped for the one load. The model
    is loaded under the engine's load lock (and alone in a worker process).
    """
    low = getattr(llama_cpp, "llama_cpp", None)
    defaults = getattr(low, "llama_model_default_params", None)
    if extra_buffers or defaults is None:
        yield
        return

    def without_extra_buffers():
        params = defaults()
        params.use_extra_bufts = False
        return params

    low.llama_model_default_params = without_extra_buffers
    try:
        yield
    finally:
        low.llama_model_default_params = defaults


def load_llama(settings: EngineSettings, llama_cpp: Any) -> Any:
    """Build ``llama_cpp.Llama`` for ``settings`` (``llama_cpp``: the module, or a fake)."""
    # Exact prefix reuse, drafts and saved states need methods of a subclass; a factory that
    # is not a class (a test's fake) runs without them.
    subclassable = isinstance(llama_cpp.Llama, type)
    drafts = settings.lookup_decoding and subclassable
    states = settings.prefix_states_mb > 0 and subclassable
    cls = cached_class(llama_cpp.Llama) if subclassable else llama_cpp.Llama
    with model_params_patched(llama_cpp, settings.extra_buffers):
        llama = cls(
            model_path=settings.model_path,
            n_ctx=settings.n_ctx,
            n_threads=settings.n_threads,
            n_threads_batch=settings.n_threads,
            seed=settings.seed,
            flash_attn=settings.flash_attn,
            verbose=False,
        )
    if drafts:
        # Set after loading: passed to Llama(), it would keep logits for every prompt token.
        llama.draft_model = LookupDrafts(draft_tokens_for(settings.flash_attn))
    if states:
        llama.prefix_states = PrefixStates(settings.prefix_states_mb)
    return llama


def build_llama(settings: EngineSettings) -> Any:
    """The default factory of a worker process: the real llama-cpp-python."""
    return load_llama(settings, importlib.import_module("llama_cpp"))


def system_info() -> str:
    """llama.cpp's own summary of the CPU features it was built for and detects."""
    try:
        llama_cpp = importlib.import_module("llama_cpp")
        return llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    except (ImportError, AttributeError):
        return ""


class Deadline:
    """A logits processor that ends a generation once its time is up.

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


class StepScores:
    """A logits processor that keeps the top log-probabilities of every generated token.

    llama-cpp-python's own ``logprobs`` needs the model loaded with ``logits_all=True`` (a
    151,936-wide row of scores kept for every prompt token) and then sorts the whole
    vocabulary in Python for each generated token. Reading the scores the sampler is handed
    costs one log-softmax and a partial sort per generated token.

    Processors are not told which token was sampled; the next step's ``input_ids`` end with
    it, so ``chosen`` lags ``steps`` by the last token (the engine takes that one as the most
    likely, exact for greedy decoding, which is what the judge uses).
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


def generate(
    llama: Any,
    messages: list[dict[str, str]],
    kwargs: dict[str, Any],
    *,
    top_logprobs: int | None = None,
    timeout: float | None = None,
) -> Generation:
    """One chat completion; llama-cpp-python's errors (e.g. a prompt over the window) propagate."""
    started = time.perf_counter()
    scores = StepScores(top_logprobs) if top_logprobs is not None else None
    # The recorder comes first, so it sees the model's own scores.
    processors: list[Any] = [scores] if scores is not None else []
    deadline = None
    if timeout is not None:
        deadline = Deadline(started + timeout, llama.token_eos())
        processors.append(deadline)
    if processors:
        kwargs = {**kwargs, "logits_processor": processors}
    counters = _PerfCounters(llama)
    # The score recorder takes the last of input_ids for the token just sampled; inside a
    # drafted batch the draft follows it, so calls that record scores go without drafts.
    drafts = getattr(llama, "draft_model", None)
    if scores is not None and drafts is not None:
        llama.draft_model = None
    try:
        out = llama.create_chat_completion(messages=messages, **kwargs)
    finally:
        if drafts is not None:
            llama.draft_model = drafts
    perf = counters.read()
    states = getattr(llama, "prefix_states", None)
    if perf is not None and states is not None:
        perf["prompt_restored"] = states.restored_tokens
    return Generation(
        out=dict(out),
        seconds=time.perf_counter() - started,
        timed_out=deadline is not None and deadline.hit,
        steps=scores.steps if scores is not None else None,
        chosen=scores.chosen if scores is not None else [],
        perf=perf,
    )


class _PerfCounters:
    """llama.cpp's per-context counters, reset when made and read after one call."""

    def __init__(self, llama: Any):
        context = getattr(getattr(llama, "_ctx", None), "ctx", None)
        self._low = sys.modules.get("llama_cpp.llama_cpp") if context is not None else None
        self._context = context
        if self._low is not None:
            self._low.llama_perf_context_reset(context)

    def read(self) -> dict[str, float] | None:
        if self._low is None:
            return None
        data = self._low.llama_perf_context(self._context)
        return {
            "prompt_evaluated": int(data.n_p_eval),
            "prompt_ms": round(float(data.t_p_eval_ms), 1),
            "generated": int(data.n_eval),
            "generate_ms": round(float(data.t_eval_ms), 1),
        }


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it pickles, else a RuntimeError carrying its type and message."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # any pickling failure: send the text instead
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def serve(conn: Any) -> None:
    """Answer requests on ``conn`` until it closes: ``(op, payload)`` -> ``(ok, value)``.

    Ops: ``load`` (:class:`EngineSettings`; replies with the load seconds and llama.cpp's
    system info), and ``complete`` (``(messages, kwargs, top_logprobs, timeout)``; replies with a
    :class:`Generation`). An error is sent back as ``(False, exception)``.
    """
    llama = None
    while True:
        try:
            op, payload = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if op == "load":
                started = time.perf_counter()
                llama = _resolve(payload.factory)(payload)
                value: Any = (time.perf_counter() - started, system_info())
            elif op == "complete":
                messages, kwargs, top, timeout = payload
                value = generate(llama, messages, kwargs, top_logprobs=top, timeout=timeout)
            else:
                raise ValueError(f"unknown engine request {op!r}")
        except Exception as exc:  # reported to the parent, which decides what it means
            conn.send((False, _portable(exc)))
            continue
        conn.send((True, value))


def _exit_with_parent(interval: float = 1.0) -> None:
    """Leave at once when the run that started this worker is gone (killed, say).

    A closed socket is only noticed between requests; a long generation would run on for
    nobody. llama.cpp releases the GIL while it computes, so this thread gets to look.
    """
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    """Serve the engine on an inherited socket: the worker process's entry point.

    Started as ``python -c "from frames_dspy.lm.engine.llama_worker import main; main()" FD`` rather
    than with ``-m``: run as ``__main__``, this module's classes would pickle under that name.
    """
    from multiprocessing.connection import Connection

    argv = sys.argv[1:] if argv is None else argv
    # A native crash prints the Python stack of every thread to stderr (the engine's log).
    faulthandler.enable(all_threads=True)
    _exit_with_parent()
    serve(Connection(int(argv[0])))
    return 0
