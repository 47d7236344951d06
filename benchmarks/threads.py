"""The main command against a slow OpenAI-compatible server: one thread against the default.

Run ``python -m benchmarks.threads [--questions 20] [--delay 1.0]`` from the checkout. It starts
``tests/fault_server.py`` on 127.0.0.1 with no faults and every request answered after
``--delay`` seconds (a hosted model's latency, no network), writes that many tiny questions
and their articles to a temporary folder, and times ``python -m frames_dspy.evaluate
--conditions naive,bm25-2`` against it twice in child processes: with ``--threads 1`` and with
the default an API model gets (read back from the run's ``config.json``). Every answer is
decided by the autorater's rules, so the judge makes no call; wall time is mostly waiting.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.commands.test_faults import _data
from tests.fault_server import FaultServer

REPO = Path(__file__).resolve().parents[1]


def _run(server: FaultServer, folder: Path, n: int, threads: int | None) -> tuple[float, int]:
    """Seconds the command took, and the threads its config.json records."""
    dataset, corpus = folder / "questions.csv", folder / "pages.jsonl"
    out = folder / f"run-{threads or 'default'}"
    command = [
        sys.executable, "-m", "frames_dspy.evaluate", "--model", "openai/slow-model",
        "--api-base", server.url, "--dataset", str(dataset), "--corpus", str(corpus),
        "--distractors", "none", "--conditions", "naive,bm25-2", "--limit", str(n),
        "--cache", "off", "--out", str(out), "--quiet",
    ]  # fmt: skip
    if threads is not None:
        command += ["--threads", str(threads)]
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["FRAMES_DSPY_CACHE"] = str(folder / "cache")
    started = time.perf_counter()
    subprocess.run(command, env=env, cwd=REPO, check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    used = json.loads((out / "config.json").read_text())["settings"]["threads"]
    return seconds, used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--delay", type=float, default=1.0, help="seconds per answer")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _data(folder, args.questions, set())
        # Every request's first try "stalls" for --delay and is then answered: no faults.
        with FaultServer(p_500=0, p_429=0, p_stall=1.0, stall=args.delay, max_faults=1) as server:
            for threads in (1, None):
                seconds, used = _run(server, folder, args.questions, threads)
                given = f"--threads {threads}" if threads else "default"
                print(
                    f"{given:>12}: {used} thread(s), {seconds:.1f} s for {args.questions} "
                    f"questions x 2 conditions ({args.delay:g} s per answer)"
                )


if __name__ == "__main__":
    main()
