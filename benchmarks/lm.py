"""Embedded-model speed: make_lm + DSPy against raw llama-cpp-python, measured in the same run.

Run ``python -m benchmarks.lm [--json] [--spec local] [--prompt-tokens 400] [--gen-tokens 64]``.

What it measures, on the same loaded model and the same chat messages:

* model load: ``make_lm`` (assembly check, fingerprint) and the llama.cpp load, plus the
  process's resident memory before and after;
* prompt processing tokens/s: a call with ``max_tokens=1`` on a cleared KV cache;
* generation tokens/s: the extra time of a ``max_tokens=N`` call over the prompt-only call;
* both through ``make_lm`` + DSPy (``lm(prompt)``, DSPy cache off) and through raw
  ``Llama.create_chat_completion``; the DSPy / raw time ratio is the DSPy overhead;
* prefix reuse: the time of a prompt that extends an earlier one (as a multi-hop round's prompt
  extends the previous round's), once right after the earlier prompt (llama.cpp reuses the KV
  cache of the shared prefix) and once on a cleared cache.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import resource
import statistics
import time
from dataclasses import asdict, dataclass
from importlib.metadata import version
from typing import Any

from frames_dspy.lm import FramesLM, LlamaCppEngine, count_tokens, make_lm
from frames_dspy.lm.engine import llama_engine

logger = logging.getLogger("benchmarks.lm")

_SENTENCES = (
    "The river rises in the northern hills and reaches the sea after four hundred kilometres.",
    "In 1887 the town council approved a stone bridge, which opened three years later.",
    "Her second novel sold poorly at first but was reprinted twice after the war.",
    "The observatory recorded the comet on six nights before clouds covered the valley.",
    "Most of the railway workers came from villages along the eastern coast.",
    "A museum in the old customs house now holds the expedition's maps and journals.",
    "The team won the regional cup in 1954 and again, after a long wait, in 1978.",
    "Farmers in the district grow barley, potatoes and, on the southern slopes, grapes.",
    "The composer left the orchestra in 1921 to teach at the conservatory in the capital.",
    "During the flood of 1910 the water reached the steps of the cathedral.",
    "The treaty fixed the border along the ridge rather than along the river.",
    "Two of the original twelve towers survive; the rest were pulled down for stone.",
)


@dataclass
class BenchConfig:
    """Knobs of one benchmark run.

    Attributes:
        spec: The embedded model spec passed to ``make_lm``.
        prompt_tokens: Approximate tokens of each context in the measured prompts.
        gen_tokens: Output tokens asked for in the generation measurement.
        extension_tokens: Tokens the extended prompt adds to the earlier one.
        attention_tokens: Prompt tokens of the flash-attention comparison (an answer prompt
            with the embedded model's 2,000-token article budget is about this long).
        repeats: Repetitions of each measurement (the median is reported).
        n_ctx: Context window the model is loaded with.
        seed: Seed of the random.Random that builds the prompt texts.
    """

    spec: str = "local"
    prompt_tokens: int = 400
    gen_tokens: int = 64
    extension_tokens: int = 120
    attention_tokens: int = 2000
    repeats: int = 3
    n_ctx: int = 4096
    seed: int = 0


def _status_kb(field: str) -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def _rss_mb() -> float:
    kb = _status_kb("VmRSS")
    if kb is None:  # not Linux: fall back to the peak
        kb = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return round(kb / 1024, 1)


def _peak_rss_mb() -> float:
    kb = _status_kb("VmHWM") or float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return round(kb / 1024, 1)


def _text(lm, rng: random.Random, tokens: int) -> str:
    """Deterministic English-like text of roughly ``tokens`` tokens in the model's vocabulary."""
    sentences: list[str] = []
    while True:
        sentences.append(rng.choice(_SENTENCES))
        if len(sentences) % 4 == 0 and count_tokens(lm, " ".join(sentences)) >= tokens:
            return " ".join(sentences)


def _prompt(context: str, task: str) -> str:
    return f"Context:\n{context}\n\nTask: {task}"


class _Paths:
    """The two ways to run one chat prompt on the same loaded model."""

    def __init__(self, lm):
        self.lm = lm
        self.llama = lm.engine.inline_llama()

    def reset(self) -> None:
        """Forget the KV cache so the next prompt is processed from its first token."""
        self.llama.reset()

    def raw(self, prompt: str, max_tokens: int) -> tuple[float, dict[str, int]]:
        started = time.perf_counter()
        out = self.llama.create_chat_completion(
            messages=[{"role": "user", "content": prompt}],
            max_tokens=max_tokens,
            temperature=0.0,
            top_k=1,
            seed=0,
        )
        return time.perf_counter() - started, dict(out["usage"])

    def dspy(self, prompt: str, max_tokens: int) -> tuple[float, dict[str, int]]:
        started = time.perf_counter()
        self.lm(prompt, max_tokens=max_tokens)
        seconds = time.perf_counter() - started
        usage = self.lm.history[-1]["usage"]
        return seconds, {k: usage[k] for k in ("prompt_tokens", "completion_tokens")}


WAYS = ("raw", "dspy")


def _orders(repeats: int) -> list[tuple[str, ...]]:
    """Alternate which way goes first, so a change in machine load hits both alike."""
    return [WAYS if i % 2 == 0 else WAYS[::-1] for i in range(repeats)]


def _speed(paths: _Paths, prompts: list[str], config: BenchConfig) -> dict[str, Any]:
    """Prompt and generation throughput of both ways, interleaved, medians over runs."""
    samples: dict[str, dict[str, list[float]]] = {
        way: {"prompt_rate": [], "gen_rate": [], "prompt_s": [], "full_s": []} for way in WAYS
    }
    for order in _orders(config.repeats):
        for prompt in prompts:
            for way in order:
                run, got = getattr(paths, way), samples[way]
                paths.reset()
                seconds_1, usage_1 = run(prompt, 1)
                paths.reset()
                seconds_n, usage_n = run(prompt, config.gen_tokens)
                extra = usage_n["completion_tokens"] - usage_1["completion_tokens"]
                got["prompt_rate"].append(usage_1["prompt_tokens"] / seconds_1)
                if extra > 0 and seconds_n > seconds_1:
                    got["gen_rate"].append(extra / (seconds_n - seconds_1))
                got["prompt_s"].append(seconds_1)
                got["full_s"].append(seconds_n)
    return {
        way: {
            "prompt_tokens_per_s": round(statistics.median(got["prompt_rate"]), 1),
            "gen_tokens_per_s": (
                round(statistics.median(got["gen_rate"]), 1) if got["gen_rate"] else None
            ),
            "prompt_call_s": round(statistics.median(got["prompt_s"]), 3),
            "full_call_s": round(statistics.median(got["full_s"]), 3),
            "runs": len(got["prompt_s"]),
        }
        for way, got in samples.items()
    }


def _prefix(paths: _Paths, base: str, extended: str, repeats: int) -> dict[str, Any]:
    """Seconds of the extended prompt right after the base one, and on a cleared cache."""
    reused: dict[str, list[float]] = {way: [] for way in WAYS}
    cold: dict[str, list[float]] = {way: [] for way in WAYS}
    tokens = {way: 0 for way in WAYS}
    for order in _orders(repeats):
        for way in order:
            run = getattr(paths, way)
            paths.reset()
            run(base, 1)
            seconds, usage = run(extended, 1)
            reused[way].append(seconds)
            paths.reset()
            seconds, usage = run(extended, 1)
            cold[way].append(seconds)
            tokens[way] = usage["prompt_tokens"]
    report = {}
    for way in WAYS:
        reused_s, cold_s = statistics.median(reused[way]), statistics.median(cold[way])
        report[way] = {
            "extended_prompt_tokens": tokens[way],
            "with_prefix_reuse_s": round(reused_s, 3),
            "without_prefix_reuse_s": round(cold_s, 3),
            "speedup": round(cold_s / reused_s, 2),
        }
    return report


class _InstantLlama:
    """A stand-in Llama that answers at once, so only the DSPy side of a call is timed."""

    reply = {
        "id": "chatcmpl-0",
        "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13},
    }

    def create_chat_completion(self, messages, **kwargs):
        return self.reply

    def token_eos(self) -> int:
        return 0


def _pure_overhead(model_path: str, calls: int = 500) -> dict[str, float]:
    """Microseconds DSPy adds per call (request building, history, usage) on an instant model."""
    llama = _InstantLlama()
    engine = LlamaCppEngine(model_path, llama=llama)
    lm = FramesLM("local/instant", engine=engine, cache=False, temperature=0.0, num_retries=0)
    lm("warm up")
    started = time.perf_counter()
    for i in range(calls):
        llama.create_chat_completion([{"role": "user", "content": f"q{i}"}], temperature=0.0)
    raw = (time.perf_counter() - started) / calls
    started = time.perf_counter()
    for i in range(calls):
        lm(f"q{i}")
    through = (time.perf_counter() - started) / calls
    return {"calls": calls, "dspy_us_per_call": round(1e6 * (through - raw), 1)}


def _flash_attention(spec: str, n_ctx: int, prompt: str, repeats: int) -> dict[str, Any]:
    """Prompt tokens/s with llama.cpp's flash attention off and on, same prompt, interleaved.

    Two inline models differing only in ``flash_attn`` (the engine's default is off); each
    prompt is processed on a cleared KV cache, alternating which goes first.
    """
    llamas = {
        on: make_lm(
            spec, n_ctx=n_ctx, cache=False, isolation="inline", flash_attn=on
        ).engine.inline_llama()
        for on in (False, True)
    }
    tokens = llamas[False].tokenize(prompt.encode("utf-8"))
    rates: dict[bool, list[float]] = {False: [], True: []}
    for i in range(repeats):
        for on in (False, True) if i % 2 == 0 else (True, False):
            llamas[on].reset()
            started = time.perf_counter()
            llamas[on].eval(tokens)
            rates[on].append(len(tokens) / (time.perf_counter() - started))
    off, on = statistics.median(rates[False]), statistics.median(rates[True])
    return {
        "prompt_tokens": len(tokens),
        "off_tokens_per_s": round(off, 1),
        "on_tokens_per_s": round(on, 1),
        "speedup": round(on / off, 3),
    }


def instant_llama(settings) -> _InstantLlama:
    """A worker factory (``benchmarks.lm:instant_llama``) for :func:`_worker_overhead`."""
    return _InstantLlama()


def _worker_overhead(model_path: str, calls: int = 300) -> dict[str, float]:
    """Microseconds a worker process adds per call (pickling, the socket) on an instant model.

    The same DSPy call goes to an instant model in this process and to one in a worker.
    """
    inline = FramesLM(
        "local/instant",
        engine=LlamaCppEngine(model_path, llama=_InstantLlama()),
        cache=False,
        temperature=0.0,
    )
    previous = llama_engine.DEFAULT_FACTORY
    llama_engine.DEFAULT_FACTORY = "benchmarks.lm:instant_llama"
    try:
        engine = LlamaCppEngine(model_path, n_ctx=512, isolation="process", extra_buffers="off")
        worker = FramesLM("local/instant-worker", engine=engine, cache=False, temperature=0.0)
        worker("warm up")
    finally:
        llama_engine.DEFAULT_FACTORY = previous
    inline("warm up")
    times = {}
    for name, lm in (("inline", inline), ("worker", worker)):
        started = time.perf_counter()
        for i in range(calls):
            lm(f"q{i}")
        times[name] = (time.perf_counter() - started) / calls
    llama_engine._reset_loaded_models()
    extra = times["worker"] - times["inline"]
    return {"calls": calls, "worker_us_per_call": round(1e6 * extra, 1)}


def run(config: BenchConfig) -> dict[str, Any]:
    """Run every measurement and return the report as plain data."""
    rss_start = _rss_mb()
    started = time.perf_counter()
    # Inline: the raw path and the DSPy path share one loaded model (the worker process's own
    # cost is measured apart, by _worker_overhead).
    lm = make_lm(
        config.spec,
        n_ctx=config.n_ctx,
        cache=False,
        max_tokens=config.gen_tokens,
        isolation="inline",
    )
    make_lm_s = time.perf_counter() - started
    started = time.perf_counter()
    paths = _Paths(lm)
    load_s = time.perf_counter() - started
    rss_loaded = _rss_mb()
    logger.info("loaded %s in %.2f s (make_lm %.2f s)", lm.model, load_s, make_lm_s)

    rng = random.Random(config.seed)
    task = "Retell the context above as a long, detailed story."
    prompts = [_prompt(_text(lm, rng, config.prompt_tokens), task) for _ in range(2)]
    paths.raw("warm up", 4)  # first-call allocations are not what either way costs

    logger.info("throughput, raw and dspy interleaved")
    load_avg_start = os.getloadavg()[0]
    speed = _speed(paths, prompts, config)
    ratio = {
        "prompt_call_dspy_over_raw": round(
            speed["dspy"]["prompt_call_s"] / speed["raw"]["prompt_call_s"], 3
        ),
        "full_call_dspy_over_raw": round(
            speed["dspy"]["full_call_s"] / speed["raw"]["full_call_s"], 3
        ),
        "dspy_overhead_ms_per_call": round(
            1000 * (speed["dspy"]["prompt_call_s"] - speed["raw"]["prompt_call_s"]), 1
        ),
    }

    context = _text(lm, rng, config.prompt_tokens)
    more = _text(lm, rng, config.extension_tokens)
    question = "Task: which bridge opened three years after it was approved?"
    base = f"Context:\n{context}\n\n{question}"
    extended = (
        f"Context:\n{context}\n{more}\n\nQueries so far: stone bridge; council 1887\n\n{question}"
    )
    logger.info("prefix reuse, raw and dspy interleaved")
    prefix = _prefix(paths, base, extended, config.repeats)

    engine = lm.engine.record()
    logger.info("flash attention off and on, %d-token prompt", config.attention_tokens)
    attention = _flash_attention(
        config.spec,
        config.n_ctx,
        _prompt(_text(lm, rng, config.attention_tokens), task),
        config.repeats,
    )
    overhead = _pure_overhead(lm.engine.model_path)
    worker = _worker_overhead(lm.engine.model_path)

    return {
        "config": asdict(config),
        "model": lm.model,
        "model_path": lm.engine.model_path,
        "machine": {
            "cpus": os.cpu_count(),
            "threads": lm.engine.n_threads,
            "python": platform.python_version(),
            "llama_cpp_python": version("llama-cpp-python"),
            "dspy": version("dspy"),
            # Other work on the machine slows llama.cpp's threads; read ratios, not absolutes.
            "load_avg_start": round(load_avg_start, 2),
            "load_avg_end": round(os.getloadavg()[0], 2),
        },
        "load": {
            "make_lm_s": round(make_lm_s, 3),
            "model_load_s": round(load_s, 3),
            "rss_before_mb": rss_start,
            "rss_after_load_mb": rss_loaded,
            "rss_end_mb": _rss_mb(),
            "peak_rss_mb": _peak_rss_mb(),
        },
        "speed": speed,
        "dspy_vs_raw": ratio,
        "dspy_overhead_instant_model": overhead,
        "worker_process_overhead": worker,
        "flash_attention": attention,
        "engine": engine,
        "prefix_reuse": prefix,
    }


def render(report: dict[str, Any]) -> str:
    """The report as a short text table."""
    load, speed, ratio = report["load"], report["speed"], report["dspy_vs_raw"]
    lines = [
        f"model {report['model']} ({report['machine']['threads']} threads, "
        f"llama-cpp-python {report['machine']['llama_cpp_python']}, "
        f"dspy {report['machine']['dspy']}; load average {report['machine']['load_avg_start']}"
        f" -> {report['machine']['load_avg_end']})",
        f"make_lm {load['make_lm_s']:.2f} s; model load {load['model_load_s']:.2f} s; "
        f"RSS {load['rss_before_mb']:.0f} -> {load['rss_after_load_mb']:.0f} MB after load, "
        f"{load['rss_end_mb']:.0f} MB at end (peak {load['peak_rss_mb']:.0f} MB)",
        "",
        f"{'path':<6} {'prompt tok/s':>13} {'gen tok/s':>10} {'prompt call s':>14} "
        f"{'full call s':>12}",
    ]
    for way in ("raw", "dspy"):
        row = speed[way]
        gen = f"{row['gen_tokens_per_s']:.1f}" if row["gen_tokens_per_s"] else "n/a"
        lines.append(
            f"{way:<6} {row['prompt_tokens_per_s']:>13.1f} {gen:>10} "
            f"{row['prompt_call_s']:>14.3f} {row['full_call_s']:>12.3f}"
        )
    lines += [
        f"DSPy / raw time: prompt call x{ratio['prompt_call_dspy_over_raw']:.3f}, "
        f"full call x{ratio['full_call_dspy_over_raw']:.3f} "
        f"({ratio['dspy_overhead_ms_per_call']:+.1f} ms per call; on an instant stand-in model "
        f"DSPy adds {report['dspy_overhead_instant_model']['dspy_us_per_call']:.0f} us per call; "
        f"the worker process adds {report['worker_process_overhead']['worker_us_per_call']:.0f} "
        "us per call)",
        f"engine: extra buffers {'on' if report['engine']['extra_buffers'] else 'off'}"
        + (
            f" ({report['engine']['extra_buffers_fallback']})"
            if report["engine"]["extra_buffers_fallback"]
            else ""
        )
        + f"; CPU {report['engine']['cpu']}",
        f"flash attention on a {report['flash_attention']['prompt_tokens']}-token prompt: "
        f"{report['flash_attention']['off_tokens_per_s']:.1f} tokens/s off, "
        f"{report['flash_attention']['on_tokens_per_s']:.1f} on "
        f"(x{report['flash_attention']['speedup']:.3f})",
        "",
        f"{'path':<6} {'extended prompt':>16} {'reused prefix s':>16} {'cold s':>8} {'speedup':>8}",
    ]
    for way in ("raw", "dspy"):
        row = report["prefix_reuse"][way]
        lines.append(
            f"{way:<6} {row['extended_prompt_tokens']:>12} tok {row['with_prefix_reuse_s']:>16.3f} "
            f"{row['without_prefix_reuse_s']:>8.3f} {row['speedup']:>7.2f}x"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--spec", default=BenchConfig.spec, help="embedded model spec")
    parser.add_argument(
        "--prompt-tokens", type=int, default=BenchConfig.prompt_tokens, help="context tokens"
    )
    parser.add_argument(
        "--gen-tokens", type=int, default=BenchConfig.gen_tokens, help="generated tokens"
    )
    parser.add_argument(
        "--repeats", type=int, default=BenchConfig.repeats, help="repetitions (median)"
    )
    parser.add_argument("--n-ctx", type=int, default=BenchConfig.n_ctx, help="context window")
    parser.add_argument("--seed", type=int, default=BenchConfig.seed, help="prompt-text seed")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # Every max_tokens=1 call is "truncated" on purpose; DSPy would warn about each one.
    logging.getLogger("dspy.clients.lm").setLevel(logging.ERROR)
    config = BenchConfig(
        spec=args.spec,
        prompt_tokens=args.prompt_tokens,
        gen_tokens=args.gen_tokens,
        repeats=args.repeats,
        n_ctx=args.n_ctx,
        seed=args.seed,
    )
    report = run(config)
    print(json.dumps(report, indent=2) if args.json else render(report))


if __name__ == "__main__":
    main()
