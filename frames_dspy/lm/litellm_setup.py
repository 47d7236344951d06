"""Set-up checks for LiteLLM models, done before the first call so a mistake fails at once.

LiteLLM is told to use its packaged model map (no network fetch at import), ``api_base`` is
checked to accept connections, and the provider's API key is looked up, with a placeholder for
local OpenAI-compatible servers that need none.
"""

from __future__ import annotations

import logging
import os
import socket
import urllib.parse

from frames_dspy.lm.errors import KEY_FROM_PYTHON, LMSetupError

logger = logging.getLogger(__name__)

_CONNECT_TIMEOUT = 3.0
_PLACEHOLDER_KEY = "not-needed"


def _use_packaged_model_map() -> None:
    # LiteLLM (at import) and DSPy (at the first call) fetch the model/price map from GitHub
    # unless told not to: up to several seconds of retries offline, and prices that drift
    # between runs. The packaged snapshot keeps runs offline and their cost figures
    # reproducible; set LITELLM_LOCAL_MODEL_COST_MAP=False to fetch the live map.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _import_litellm():
    _use_packaged_model_map()
    import litellm

    return litellm


def _check_reachable(api_base: str) -> None:
    parts = urllib.parse.urlsplit(api_base)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise LMSetupError(
            f"api_base {api_base!r} is not an http(s) URL; e.g. api_base='http://127.0.0.1:8000/v1'"
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise LMSetupError(f"api_base {api_base!r} has an invalid port ({exc})") from exc
    try:
        with socket.create_connection((parts.hostname, port), timeout=_CONNECT_TIMEOUT):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise LMSetupError(
            f"nothing answers at api_base {api_base} ({reason}); start the server first (e.g. "
            f"`python -m llama_cpp.server --model FILE.gguf --port {port}`, `vllm serve MODEL "
            f"--port {port}` or `ollama serve`) or fix api_base"
        ) from exc


def _resolve_api_key(model: str, api_key: str | None, api_base: str | None) -> str | None:
    """The key to pass, after checking the environment has one when the provider needs it."""
    if api_key:
        return api_key
    litellm = _import_litellm()
    try:
        env = litellm.validate_environment(model=model)
    except Exception as exc:  # noqa: BLE001 - unknown providers: the first call will tell
        logger.debug("could not check the environment for %s: %s", model, exc)
        return None
    missing = [
        key
        for key in env.get("missing_keys") or []
        if not key.endswith(("_API_BASE", "_BASE_URL", "_URL"))
    ]
    if env.get("keys_in_environment") or not missing:
        return None
    if api_base:
        # Local OpenAI-compatible servers (vLLM, llama.cpp, Ollama) ignore the key, but the
        # client insists on one; a server that does check it answers 401 -> LMSetupError.
        logger.info("no API key for %s at %s; sending a placeholder", model, api_base)
        return _PLACEHOLDER_KEY
    raise LMSetupError(
        f"{model!r} needs an API key: set {' or '.join(missing)} in the environment "
        f"({KEY_FROM_PYTHON})"
    )
