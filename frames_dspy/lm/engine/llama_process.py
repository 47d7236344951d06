"""The embedded model in a child process, so that a native crash of llama.cpp never ends a run.

llama.cpp is C++: a bug in one of its CPU kernels (``ggml_backend_amx_mul_mat`` segfaults on
some Xeons with AMX), an abort or the kernel's out-of-memory killer ends whatever process it
runs in, with no Python exception to catch. :class:`EngineProcess` runs it in a worker
process (:func:`~frames_dspy.lm.engine.llama_worker.main`) and talks to it over a socket pair; when
the worker dies, the call that was running raises :class:`EngineCrashed` naming the signal,
the CPU and where it happened (the worker's faulthandler stack, kept in a log file), and
:class:`EngineHost` starts a new worker for the next call. :func:`start_worker` also probes
the model with one short generation, and falls back to llama.cpp's plain CPU buffers when the
faster extra buffers crash.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NoReturn

from frames_dspy.base.paths import cache_dir
from frames_dspy.lm.engine.llama_worker import (
    PROBE_MESSAGES,
    EngineSettings,
    Generation,
    generate,
    load_llama,
)
from frames_dspy.lm.errors import LMCallError, LMSetupError

__all__ = [
    "EXTRA_BUFFERS",
    "EXTRA_BUFFERS_ENV",
    "MAX_CONSECUTIVE_CRASHES",
    "EngineCrashed",
    "EngineHost",
    "EngineProcess",
    "cpu_summary",
    "start_worker",
]

logger = logging.getLogger(__name__)

#: llama.cpp's extra CPU buffers (AMX, repacked weights): "auto" uses them unless they crash
#: the probe or a call (then the engine restarts without them), "on" and "off" force.
EXTRA_BUFFERS = ("auto", "on", "off")
EXTRA_BUFFERS_ENV = "FRAMES_DSPY_EXTRA_BUFFERS"
#: Crashes in a row after which the engine gives up: every question would fail the same way.
MAX_CONSECUTIVE_CRASHES = 2


#: CPU flags that decide which llama.cpp kernels run, as /proc/cpuinfo spells them.
_KERNEL_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8")

_SIGNALS = {
    signal.SIGSEGV: "a segmentation fault (SIGSEGV)",
    signal.SIGABRT: "an abort (SIGABRT)",
    signal.SIGBUS: "a bus error (SIGBUS)",
    signal.SIGILL: "an illegal instruction (SIGILL)",
    signal.SIGFPE: "an arithmetic fault (SIGFPE)",
    signal.SIGKILL: "SIGKILL (most often the out-of-memory killer)",
}


def cpu_summary() -> str:
    """The CPU's model name and the kernel-relevant flags it has (Linux; else the platform)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    name = flags = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and not name:
            name = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = value
    have = [flag for flag in _KERNEL_FLAGS if flag in flags.split()]
    return f"{name or 'unknown CPU'} ({', '.join(have) or 'none of ' + ', '.join(_KERNEL_FLAGS)})"


def describe_exit(returncode: int | None) -> str:
    """What a worker's exit status means, in words."""
    if returncode is None:
        return "no exit status (it stopped answering)"
    if returncode < 0:
        number = -returncode
        try:
            name = signal.Signals(number)
        except ValueError:
            return f"signal {number}"
        return _SIGNALS.get(name, f"signal {name.name}")
    return f"exit status {returncode}"


class EngineCrashed(RuntimeError):
    """The worker process died while loading or running the model.

    Attributes:
        returncode: The worker's exit status (negative: the signal that ended it).
        where: The innermost Python frame the worker's faulthandler printed, if any.
        log: The worker's log file (its stderr), kept after a crash.
        extra_buffers: Whether the crashed worker had llama.cpp's extra buffers on.
    """

    def __init__(
        self,
        message: str,
        *,
        returncode: int | None,
        where: str | None,
        log: Path | None,
        extra_buffers: bool,
    ):
        super().__init__(message)
        self.returncode = returncode
        self.where = where
        self.log = log
        self.extra_buffers = extra_buffers

    @property
    def cause(self) -> str:
        return describe_exit(self.returncode)


def _innermost_frame(log_text: str) -> str | None:
    """The innermost frame of the crashing thread in a faulthandler report, if any.

    faulthandler heads the thread that crashed "Current thread ..." (the others "Thread ...")
    and lists each thread's frames innermost first.
    """
    lines = [line.strip() for line in log_text.splitlines()]
    starts = [i for i, line in enumerate(lines) if line.startswith("Current thread")]
    for line in lines[starts[-1] if starts else 0 :]:
        if line.startswith('File "'):
            return line
    return None


_WORKER_MAIN = "from frames_dspy.lm.engine.llama_worker import main; main()"


#: Crashed workers' logs kept (the oldest go first); a clean worker removes its own.
KEPT_LOGS = 20


def _log_path() -> Path:
    folder = cache_dir("engine-logs")
    folder.mkdir(parents=True, exist_ok=True)
    old = sorted(folder.glob("worker-*.log"), key=lambda path: path.stat().st_mtime)
    for path in old[: max(0, len(old) - KEPT_LOGS + 1)]:
        with contextlib.suppress(OSError):
            path.unlink()
    return folder / f"worker-{os.getpid()}-{time.time_ns()}.log"


class EngineProcess:
    """One worker process hosting one model; requests are answered one at a time.

    The caller serialises requests (the engine holds a lock per model). Call :meth:`close`
    when done; a worker whose parent dies exits when its socket closes.
    """

    def __init__(self, settings: EngineSettings):
        self.settings = settings
        self.log = _log_path()
        self.load_seconds: float | None = None
        self.system_info = ""
        parent, child = socket.socketpair()
        env = dict(os.environ)
        # The worker imports this same code (a checkout, a test's fakes), whatever is installed.
        env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _WORKER_MAIN, str(child.fileno())],
                pass_fds=[child.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                # Its own session: a Ctrl-C at the terminal reaches the run, which finishes
                # the calls in flight, and not the worker running them.
                start_new_session=True,
            )
        child.close()
        self._conn = Connection(parent.detach())

    @property
    def pid(self) -> int:
        return self.process.pid

    def request(self, op: str, payload: Any) -> Any:
        """Send one request and return the worker's answer.

        Raises:
            EngineCrashed: the worker died before answering.
            Exception: what the worker raised for this request (e.g. a prompt over the window).
        """
        try:
            self._conn.send((op, payload))
            ok, value = self._conn.recv()
        except (EOFError, OSError) as exc:
            raise self._crashed() from exc
        if not ok:
            raise value
        return value

    def load(self) -> None:
        """Load the model in the worker (its seconds and llama.cpp's system info are kept)."""
        self.load_seconds, self.system_info = self.request("load", self.settings)

    def probe(self) -> None:
        """One short greedy generation: the step that crashes where a CPU kernel is broken."""
        kwargs = {"max_tokens": 2, "temperature": 0.0, "top_k": 1, "seed": self.settings.seed}
        self.request("complete", (list(PROBE_MESSAGES), kwargs, None, None))

    def _crashed(self) -> EngineCrashed:
        try:
            returncode = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            returncode = None
        with contextlib.suppress(OSError):
            self._conn.close()
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        where = _innermost_frame(text)
        buffers = "on" if self.settings.extra_buffers else "off"
        message = (
            f"the embedded model's engine (llama.cpp, worker process {self.pid}) died with "
            f"{describe_exit(returncode)}"
            + (f" at {where}" if where else "")
            + f"; CPU: {cpu_summary()}; llama.cpp extra buffers {buffers}; log: {self.log}"
        )
        return EngineCrashed(
            message,
            returncode=returncode,
            where=where,
            log=self.log,
            extra_buffers=self.settings.extra_buffers,
        )

    def close(self) -> None:
        """Stop the worker and remove its log (a crashed worker's log is kept)."""
        with contextlib.suppress(OSError):
            self._conn.close()
        if self.process.poll() is None:
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.returncode == 0:
            with contextlib.suppress(OSError):
                self.log.unlink()


def start_worker(settings: EngineSettings, *, fallback: bool) -> tuple[EngineProcess, str | None]:
    """A worker with the model loaded and probed, and why extra buffers were dropped (or None).

    With ``fallback``, a worker whose probe crashes with llama.cpp's extra buffers on is
    replaced by one with them off (slower prompt processing, the plain CPU kernels).

    Raises:
        EngineCrashed: the model crashed the worker with the buffers it was given.
    """
    try:
        return _probed(settings), None
    except EngineCrashed as crash:
        if not (fallback and settings.extra_buffers):
            raise
        reason = f"the probe with extra buffers on died with {crash.cause}"
        logger.warning("%s; restarting the engine with them off (%s)", reason, crash.log)
    return _probed(replace(settings, extra_buffers=False)), reason


def _probed(settings: EngineSettings) -> EngineProcess:
    worker = EngineProcess(settings)
    try:
        worker.load()
        worker.probe()
    except Exception:
        worker.close()
        raise
    return worker


def _import_llama_cpp():
    try:
        return importlib.import_module("llama_cpp")
    except ImportError as exc:
        raise LMSetupError(
            "the embedded model needs llama-cpp-python, which is not installed (or failed to "
            f'load: {exc}); install the local extra: pip install -e ".[local]"'
        ) from exc


class EngineHost:
    """Where one model runs; the engine holds ``lock`` around every use of it.

    ``worker`` is None for a model in this process (``llama`` is then the model) and the
    current :class:`~frames_dspy.lm.engine.llama_process.EngineProcess` otherwise (replaced after a
    crash). ``llama`` also serves the tokenizer: for a worker it is a vocabulary-only copy
    loaded here on first use.
    """

    def __init__(self, settings: EngineSettings, *, isolation: str, extra_buffers: str):
        self.settings = settings
        self.isolation = isolation
        self.extra_buffers = extra_buffers
        self.lock = threading.Lock()
        self.llama: Any = None
        self.worker: EngineProcess | None = None
        self.load_seconds: float | None = None
        self.fallback_reason: str | None = None
        self.system_info = ""
        self.crashes = 0  # in a row
        self.restarts = 0

    @classmethod
    def injected(cls, llama: Any, settings: EngineSettings) -> EngineHost:
        host = cls(settings, isolation="inline", extra_buffers="auto")
        host.llama, host.load_seconds = llama, 0.0
        return host

    # -- starting ----------------------------------------------------------------------------

    def start(self) -> None:
        """Load the model (inline) or start a probed worker, once; under ``lock``."""
        if self.isolation == "inline":
            if self.llama is None:
                self._load_inline()
            return
        if self.worker is not None:
            return
        started = time.perf_counter()
        try:
            worker, reason = start_worker(self.settings, fallback=self.extra_buffers == "auto")
        except EngineCrashed as crash:
            raise LMSetupError(
                _give_up(crash, "while loading the model and answering a probe")
            ) from crash
        except Exception as exc:
            raise _load_error(self.settings, exc) from exc
        if reason:
            self.fallback_reason = reason
        self.settings = worker.settings
        self.worker, self.system_info = worker, worker.system_info
        self.load_seconds = time.perf_counter() - started
        logger.info(
            "started engine worker %d for %s (n_ctx=%d, %d threads, extra buffers %s) in %.2f s",
            worker.pid,
            self.settings.model_path,
            self.settings.n_ctx,
            self.settings.n_threads,
            "on" if self.settings.extra_buffers else "off",
            self.load_seconds,
        )

    def _load_inline(self) -> None:
        llama_cpp = _import_llama_cpp()
        started = time.perf_counter()
        if self.extra_buffers == "auto" and self.settings.extra_buffers:
            # A crash here would end this process: let a throwaway worker try them first.
            try:
                worker, reason = start_worker(self.settings, fallback=True)
            except EngineCrashed as crash:
                raise LMSetupError(_give_up(crash, "while probing the model")) from crash
            worker.close()
            self.settings, self.fallback_reason = worker.settings, reason
        try:
            self.llama = load_llama(self.settings, llama_cpp)
        except (ValueError, RuntimeError) as exc:
            raise _load_error(self.settings, exc) from exc
        self.load_seconds = time.perf_counter() - started

    def tokenizer(self) -> Any:
        """A Llama that can tokenize and detokenize (the model, or a vocabulary-only copy)."""
        if self.llama is None:
            with self.lock:
                if self.llama is None and self.isolation == "inline":
                    self._load_inline()
                elif self.llama is None:
                    self.llama = _vocabulary(_import_llama_cpp(), self.settings.model_path)
        return self.llama

    # -- running -----------------------------------------------------------------------------

    def generate(self, messages, kwargs, top: int | None, timeout: float | None) -> Generation:
        """One completion; under ``lock``. A worker crash raises LMCallError or LMSetupError."""
        self.start()
        if self.worker is None:
            return generate(self.llama, messages, kwargs, top_logprobs=top, timeout=timeout)
        try:
            generation = self.worker.request("complete", (messages, kwargs, top, timeout))
        except EngineCrashed as crash:
            self._after_crash(crash)
        self.crashes = 0
        return generation

    def _after_crash(self, crash: EngineCrashed) -> NoReturn:
        self.worker.close()
        self.worker = None
        self.crashes += 1
        self.restarts += 1
        if crash.extra_buffers and self.extra_buffers == "auto":
            self.settings = replace(self.settings, extra_buffers=False)
            self.fallback_reason = f"a call with extra buffers on died with {crash.cause}"
            next_try = "the next call starts a new worker with extra buffers off"
        else:
            next_try = "the next call starts a new worker"
        if self.crashes >= MAX_CONSECUTIVE_CRASHES:
            raise LMSetupError(_give_up(crash, f"{self.crashes} calls in a row"))
        raise LMCallError(
            f"{crash}. This call failed (a run records its question as failed, counted as "
            f"wrong) and {next_try}"
        ) from crash

    def record(self) -> dict[str, Any]:
        """How the model runs, for a run's config."""
        return {
            "isolation": self.isolation,
            **self.settings.record(),
            "extra_buffers_mode": self.extra_buffers,
            "extra_buffers_fallback": self.fallback_reason,
            "worker_restarts": self.restarts,
            "cpu": cpu_summary(),
            "llama_cpp_system_info": self.system_info,
        }

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def _vocabulary(llama_cpp: Any, model_path: str) -> Any:
    """The model's vocabulary alone, loaded here: tokenizing needs no weights and no context.

    llama-cpp-python's ``_internals.LlamaModel`` loads just the model (``Llama`` would also
    create a context, and print about it); a llama_cpp without it gets a vocab-only ``Llama``.
    """
    internals = getattr(llama_cpp, "_internals", None)
    if internals is None:
        return llama_cpp.Llama(model_path=model_path, vocab_only=True, verbose=False)
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    return internals.LlamaModel(path_model=model_path, params=params, verbose=False)


def _load_error(settings: EngineSettings, exc: Exception) -> LMSetupError:
    if isinstance(exc, LMSetupError):
        return exc
    return LMSetupError(
        f"llama-cpp-python could not load {settings.model_path} with n_ctx={settings.n_ctx} "
        f"({exc}); check that it is a GGUF file of a supported architecture and that "
        "there is memory for the context (try a smaller n_ctx)"
    )


def _give_up(crash: EngineCrashed, when: str) -> str:
    if crash.extra_buffers:
        fix = (
            f"set {EXTRA_BUFFERS_ENV}=off (llama.cpp's AMX and repacked-weight kernels are "
            "the usual cause on Xeons with AMX)"
        )
    else:
        fix = (
            "if it was SIGKILL, free memory or lower n_ctx; otherwise try another "
            "llama-cpp-python build (pip install --force-reinstall --no-cache-dir "
            "llama-cpp-python) and report the log"
        )
    return (
        f"{crash} ({when}). The embedded model cannot run on this machine as set up: {fix}. "
        "Finished questions are saved; the same command resumes the run"
    )
