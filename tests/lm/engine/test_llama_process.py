"""Tests for frames_dspy.lm.engine.llama_process and llama_worker: the model in a worker process.

Worker processes here run stand-ins from ``fixtures/crashing_llama.py`` that segfault, abort or
are killed on purpose; the tests marked ``real`` run the embedded model in a worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from crashing_llama import TRIGGER

from frames_dspy.lm import LMCallError, LMSetupError, make_lm
from frames_dspy.lm.engine import llama_engine
from frames_dspy.lm.engine.llama_process import (
    EngineCrashed,
    EngineProcess,
    cpu_summary,
    describe_exit,
)
from frames_dspy.lm.engine.llama_worker import EngineSettings, load_llama


@pytest.fixture
def factory(monkeypatch):
    """Name the worker factory of the engines a test builds (``crashing_llama:<name>``)."""

    def use(name: str) -> None:
        monkeypatch.setattr(llama_engine, "DEFAULT_FACTORY", f"crashing_llama:{name}")

    yield use
    llama_engine._reset_loaded_models()


def _lm(gguf, extra_buffers="off"):
    llama_engine._reset_loaded_models()
    return make_lm(f"local:{gguf}", cache=False, extra_buffers=extra_buffers)


def test_a_worker_segfault_fails_that_call_and_the_next_call_restarts(factory, gguf):
    factory("on_trigger")
    lm = _lm(gguf)
    assert "Paris" in lm("before")[0]
    first_pid = lm.engine._host().worker.pid
    with pytest.raises(LMCallError) as info:
        lm(f"please {TRIGGER}")
    message = str(info.value)
    assert "segmentation fault (SIGSEGV)" in message
    assert "CPU: " in message and "log: " in message and "next call starts a new worker" in message
    assert "Paris" in lm("after")[0]
    record = lm.engine.record()
    assert record["worker_restarts"] == 1 and lm.engine._host().worker.pid != first_pid


@pytest.mark.parametrize(
    ("name", "cause"),
    [
        ("segfault", "a segmentation fault (SIGSEGV)"),
        ("abort", "an abort (SIGABRT)"),
        ("killed", "SIGKILL (most often the out-of-memory killer)"),
    ],
)
def test_an_engine_that_always_crashes_stops_with_the_cause_and_a_fix(factory, gguf, name, cause):
    factory(name)
    lm = _lm(gguf, extra_buffers="auto")
    with pytest.raises(LMSetupError) as info:
        lm("hello")
    message = str(info.value)
    assert cause in message and "while loading the model and answering a probe" in message
    assert cpu_summary() in message
    assert "Finished questions are saved" in message


def test_a_crash_with_extra_buffers_on_names_the_switch(factory, gguf):
    factory("amx_like")
    lm = _lm(gguf, extra_buffers="on")
    with pytest.raises(LMSetupError) as info:
        lm("hello")
    assert "FRAMES_DSPY_EXTRA_BUFFERS=off" in str(info.value)
    assert "extra buffers on" in str(info.value)


def test_auto_falls_back_without_extra_buffers_and_records_why(factory, gguf):
    factory("amx_like")
    lm = _lm(gguf, extra_buffers="auto")
    assert "Paris" in lm("hello")[0]
    record = lm.engine.record()
    assert record["extra_buffers"] is False and record["extra_buffers_mode"] == "auto"
    assert "SIGSEGV" in record["extra_buffers_fallback"]
    assert record["isolation"] == "process" and record["worker_restarts"] == 0


def test_auto_keeps_extra_buffers_where_they_work(factory, gguf):
    # A CPU without the broken kernels: the probe passes and the faster buffers stay on.
    factory("on_trigger")
    lm = _lm(gguf, extra_buffers="auto")
    assert "Paris" in lm("hello")[0]
    record = lm.engine.record()
    assert record["extra_buffers"] is True and record["extra_buffers_fallback"] is None


def test_a_call_that_crashes_with_extra_buffers_on_drops_them_for_the_restart(factory, gguf):
    factory("on_trigger")
    lm = _lm(gguf, extra_buffers="auto")
    lm("hello")
    with pytest.raises(LMCallError, match="extra buffers off"):
        lm(TRIGGER)
    lm("hello again")
    record = lm.engine.record()
    assert (
        record["extra_buffers"] is False
        and "a call with extra buffers" in (record["extra_buffers_fallback"])
    )


def test_the_crashed_workers_log_holds_where_it_happened(factory, gguf):
    factory("segfault")
    worker = EngineProcess(
        EngineSettings(str(gguf), 512, 1, extra_buffers=False, factory="crashing_llama:segfault")
    )
    worker.load()
    with pytest.raises(EngineCrashed) as info:
        worker.probe()
    crash = info.value
    assert crash.returncode == -11 and "string_at" in crash.where
    log = crash.log.read_text()
    assert "Segmentation fault" in log and "crashing_llama.py" in log
    worker.close()
    assert crash.log.exists()  # kept for the user to read


def test_a_clean_worker_exits_and_removes_its_log(gguf):
    worker = EngineProcess(
        EngineSettings(str(gguf), 512, 1, extra_buffers=False, factory="crashing_llama:on_trigger")
    )
    worker.load()
    worker.probe()
    worker.close()
    assert worker.process.returncode == 0 and not worker.log.exists()


def test_a_load_error_in_the_worker_is_a_setup_error(gguf, monkeypatch):
    # The default factory loads a real llama.cpp model; this file only starts like a GGUF.
    llama_engine._reset_loaded_models()
    lm = make_lm(f"local:{gguf}", cache=False, extra_buffers="off")
    with pytest.raises(LMSetupError, match="could not load"):
        lm("hello")
    llama_engine._reset_loaded_models()


def test_exit_descriptions():
    assert describe_exit(-9).startswith("SIGKILL")
    assert describe_exit(3) == "exit status 3"
    assert describe_exit(None).startswith("no exit status")


def test_extra_buffers_off_sets_the_model_parameter_for_the_load_only():
    seen = []

    class Params:
        use_extra_bufts = True

    low = types.SimpleNamespace(llama_model_default_params=Params)

    def build(**kwargs):
        seen.append(low.llama_model_default_params().use_extra_bufts)
        return kwargs

    module = types.SimpleNamespace(llama_cpp=low, Llama=build)
    settings = EngineSettings("m.gguf", 512, 2, extra_buffers=False)
    kwargs = load_llama(settings, module)
    load_llama(EngineSettings("m.gguf", 512, 2, extra_buffers=True), module)
    assert seen == [False, True]
    assert low.llama_model_default_params is Params  # restored
    assert kwargs["n_threads"] == kwargs["n_threads_batch"] == 2


def test_bad_engine_settings_are_named(gguf):
    with pytest.raises(ValueError, match="extra buffers 'maybe'"):
        llama_engine.LlamaCppEngine(gguf, extra_buffers="maybe")
    with pytest.raises(ValueError, match="isolation='thread'"):
        llama_engine.LlamaCppEngine(gguf, isolation="thread")


@pytest.mark.real
@pytest.mark.parametrize("extra_buffers", ["auto", "off"])
def test_the_embedded_model_answers_in_a_fresh_worker(real_model_path, extra_buffers):
    # Fails loudly where the engine cannot run: "auto" must find buffers that work here,
    # and "off" is the path every CPU without AMX kernels can take.
    llama_engine._reset_loaded_models()
    try:
        lm = make_lm(f"local:{real_model_path}", cache=False, extra_buffers=extra_buffers)
        reply = lm("What is the capital of France? Answer in one word.")[0]
        assert "paris" in reply.lower()
        record = lm.engine.record()
        assert record["isolation"] == "process"
        assert "AVX" in record["llama_cpp_system_info"]
        if extra_buffers == "off":
            assert record["extra_buffers"] is False and record["extra_buffers_fallback"] is None
    finally:
        llama_engine._reset_loaded_models()


def test_old_crash_logs_are_pruned(gguf, monkeypatch):
    from frames_dspy.lm.engine import llama_process

    monkeypatch.setattr(llama_process, "KEPT_LOGS", 2)
    logs = []
    for _ in range(4):
        worker = EngineProcess(
            EngineSettings(
                str(gguf), 512, 1, extra_buffers=False, factory="crashing_llama:segfault"
            )
        )
        worker.load()
        with pytest.raises(EngineCrashed):
            worker.probe()
        logs.append(worker.log)
    assert [log.exists() for log in logs] == [False, False, True, True]


def test_a_worker_leaves_when_its_run_is_killed_mid_call(gguf, tmp_path):
    # The run is SIGKILLed while its worker is in a long call: no socket close reaches the
    # worker in time, so it must notice that its parent is gone and leave by itself.
    script = tmp_path / "run.py"
    script.write_text(
        "import sys\n"
        "from frames_dspy.lm.engine.llama_process import EngineProcess\n"
        "from frames_dspy.lm.engine.llama_worker import EngineSettings\n"
        f"settings = EngineSettings({str(gguf)!r}, 512, 1, extra_buffers=False,"
        " factory='crashing_llama:slow')\n"
        "worker = EngineProcess(settings)\n"
        "worker.load()\n"
        "worker.probe()\n"
        "print(worker.pid, flush=True)\n"
        "worker.request('complete', ([{'role': 'user', 'content': 'x'}], {}, None, None))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p or os.getcwd() for p in sys.path)}
    run = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env)
    try:
        worker_pid = int(run.stdout.readline())
        time.sleep(0.5)  # the worker is now in its minute-long call
        run.kill()
        run.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(worker_pid):
            time.sleep(0.1)
        assert not _alive(worker_pid)
    finally:
        if run.poll() is None:
            run.kill()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"
