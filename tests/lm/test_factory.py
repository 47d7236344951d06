"""Tests for frames_dspy.lm.factory: make_lm, FramesLM and the set-up errors it raises.

Covers the LiteLLM set-up checks (frames_dspy.lm.litellm_setup) and the translation of DSPy's
errors (frames_dspy.lm.errors) too. The test marked ``real`` serves the embedded model behind
llama-cpp-python's OpenAI-compatible server.
"""

from __future__ import annotations

import copy
import hashlib
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import dspy
import pytest
from dspy.utils.exceptions import LMAuthError

import frames_dspy.lm.litellm_setup as litellm_setup
from frames_dspy.lm import (
    FramesLM,
    LlamaCppEngine,
    LMCallError,
    LMSetupError,
    context_window,
    make_lm,
    parse_spec,
)
from frames_dspy.lm.errors import classify
from tests.ports import free_port

FIXTURES = Path(__file__).parents[1] / "fixtures"


def test_api_options_are_refused_for_embedded_models(fake_llama_cpp, gguf):
    with pytest.raises(ValueError, match="api_base"):
        make_lm(f"local:{gguf}", api_base="http://127.0.0.1:1/v1")


def test_missing_extra_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(LMSetupError, match=r'pip install -e "\.\[local\]"'):
        make_lm("local")


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


def test_refused_connection_at_call_time_is_a_failed_call():
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
    # Not a set-up error: the server answered at start (or was not checked), so a dropped
    # connection is this call's fault; a run records it and goes on.
    with pytest.raises(LMCallError, match="could not reach the server"):
        lm("hello")
    assert time.perf_counter() - started < 10


def test_missing_api_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LMSetupError, match="set OPENAI_API_KEY in the environment") as err:
        make_lm("openai/gpt-4o-mini")
    # The command lines have no key option: the fix a user is told is the variable.
    assert "pass api_key" not in str(err.value)


def test_settings_a_provider_refuses_are_a_setup_error():
    with pytest.raises(LMSetupError, match="does not accept these settings"):
        make_lm("openai/gpt-5-mini", api_key="x", max_tokens=256)


def test_local_server_without_key_gets_a_placeholder(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lm = make_lm("openai/served", api_base="http://127.0.0.1:9/v1", check_connection=False)
    assert lm.kwargs["api_key"] == litellm_setup._PLACEHOLDER_KEY


def test_gguf_spec_checks_the_file(fake_llama_cpp, tmp_path):
    with pytest.raises(LMSetupError, match="does not exist"):
        make_lm(f"local:{tmp_path / 'missing.gguf'}")
    not_gguf = tmp_path / "weights.bin"
    not_gguf.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(LMSetupError, match="not a GGUF"):
        make_lm(f"local:{not_gguf}")


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
            str(FIXTURES / "llama_server_plain_buffers.py"),
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


def test_lm_keeps_its_spec_and_window_through_copies(fake_llama_cpp, gguf):
    local = make_lm(f" local:{gguf} ", n_ctx=4096)
    served = make_lm(
        "openai/my-served-model",
        api_base="http://h:1/v1",
        api_key="x",
        check_connection=False,
        n_ctx=32_768,
    )
    for lm, spec, window in ((local, f"local:{gguf}", 4096), (served, served.model, 32_768)):
        assert lm.model_spec == parse_spec(spec)
        assert lm.spec == spec
        assert lm.declared_context_window == window
        # Optimizers and callers copy LMs (lm.copy(...), deepcopy of a program's state).
        for copied in (lm.copy(cache=False), lm.copy(temperature=0.5), copy.deepcopy(lm)):
            assert copied is not lm
            assert copied.model_spec == lm.model_spec
            assert copied.declared_context_window == window
            assert context_window(copied) == window
    assert local.copy(cache=False).cache is False
    with pytest.raises(AttributeError):
        local.spec = "local"  # read-only: it follows model_spec


def test_rollout_copies_sample_with_their_own_seed(fake_llama_cpp, gguf, tmp_path):
    # SIMBA asks for lm.copy(rollout_id=r, temperature=1.0) per sample; DSPy keeps the id out
    # of the request, so with one fixed seed the embedded sampler drew the same sample each time.
    lm = make_lm(f"local:{gguf}")
    rollouts = [lm.copy(rollout_id=r, temperature=1.0) for r in range(3)]
    assert [r.kwargs["seed"] for r in rollouts] == [0, 1, 2]
    assert lm.copy(rollout_id=2, seed=7).kwargs["seed"] == 7  # an explicit seed wins
    assert rollouts[2].copy(rollout_id=5).kwargs["seed"] == 5  # from the base seed, not 2 + 5
    assert lm.copy(temperature=0.5).kwargs["seed"] == 0
    for rollout in rollouts:
        rollout(f"one prompt for every rollout {tmp_path.name}")
    sent = [kwargs["seed"] for llama in fake_llama_cpp.instances for _, kwargs in llama.calls]
    assert sent == [0, 1, 2]


def test_frames_lm_without_a_spec():
    lm = FramesLM("openai/gpt-4o-mini", api_key="x")
    assert lm.model_spec is None and lm.spec is None and lm.declared_context_window is None
    assert "model_spec" not in lm.kwargs and "context_window" not in lm.kwargs


def test_rejected_credentials_stop_the_run_and_name_the_variable():
    lm = SimpleNamespace(model="openai/gpt-4o-mini", kwargs={})
    error = LMAuthError("Incorrect API key provided")
    error.env_keys = ("OPENAI_API_KEY",)
    verdict = classify(lm, error)
    assert isinstance(verdict, LMSetupError)
    assert "check OPENAI_API_KEY in the environment" in str(verdict)
    assert "pass api_key" not in str(verdict)
