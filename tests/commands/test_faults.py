"""Runs against a server that fails on purpose: faults survived, counted, nothing lost.

The command line runs two conditions over 64 questions with 8 threads against
``tests/fault_server.py`` (500s, 429s and stalls drawn from a seeded stream, and a few
questions that always fail), is SIGKILLed half-way, and is resumed. Every (condition,
question) must be recorded exactly once, the questions that always fail must be counted as
failed in the table and the summary, and the command must exit non-zero because more than 5%
of a condition's questions failed.
"""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.fault_server import MODEL, POISON, FaultServer, evaluate_command

N_QUESTIONS = 64
POISONED = {i for i in range(N_QUESTIONS) if i % 10 == 7}  # 6 of 64: 9.4% > 5%
# A stall outlasts the client's timeout; the timeout is far above an answer's time even on a
# loaded machine, so only stalls time out.
TIMEOUT, STALL = 4.0, 6.0


def _data(folder: Path, n: int, poisoned: set[int]) -> tuple[Path, Path]:
    dataset, corpus = folder / "questions.csv", folder / "pages.jsonl"
    with dataset.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "Prompt", "Answer", "wikipedia_link_1", "reasoning_types"])
        for i in range(n):
            marker = f" {POISON}" if i in poisoned else ""
            writer.writerow(
                [
                    i,
                    f"What is the capital of Land {i}{marker}?",
                    "Paris",
                    f"https://en.wikipedia.org/wiki/Land_{i}",
                    "Multiple constraints",
                ]
            )
    with corpus.open("w", encoding="utf-8") as handle:
        for i in range(n):
            record = {
                "page_id": f"land{i}",
                "title": f"Land {i}",
                "url": f"https://en.wikipedia.org/wiki/Land_{i}",
                "text": f"Land {i} is a country. The capital of Land {i} is Paris.",
            }
            handle.write(json.dumps(record) + "\n")
    return dataset, corpus


def _command(server: FaultServer, dataset: Path, corpus: Path, out: Path, conditions: str):
    return evaluate_command(
        server, "--dataset", str(dataset), "--corpus", str(corpus), "--distractors", "none",
        "--conditions", conditions, "--threads", "8", "--lm-timeout", str(TIMEOUT),
        "--out", str(out),
    )  # fmt: skip


def _records(out: Path) -> list[dict]:
    path = out / "predictions.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def kill_once_recorded(run: subprocess.Popen, out: Path, n: int, *, within: float) -> int:
    """SIGKILL ``run`` (an evaluate writing into ``out``) once it has recorded ``n`` answers,
    or after ``within`` seconds (it must not end first); returns how many it had recorded."""
    deadline = time.monotonic() + within
    while len(_records(out)) < n and time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()[1][-3000:]
        time.sleep(0.1)
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=30)
    return len(_records(out))


def test_faults_are_retried_counted_and_survive_a_kill(tmp_path, env):
    dataset, corpus = _data(tmp_path, N_QUESTIONS, POISONED)
    out = tmp_path / "run"
    with FaultServer(seed=7, stall=STALL, lifetime=600) as server:
        command = _command(server, dataset, corpus, out, "naive,bm25-2")
        first = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        before_kill = kill_once_recorded(first, out, 40, within=240)
        assert 0 < before_kill < 2 * N_QUESTIONS

        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        injected = dict(server.counts)

    records = _records(out)
    keys = Counter((r["condition"], r["id"]) for r in records)
    expected = {(c, i) for c in ("naive", "bm25-2") for i in range(N_QUESTIONS)}
    duplicates = sum(n - 1 for n in keys.values() if n > 1)
    lost = len(expected - set(keys))
    failed = {(r["condition"], r["id"]) for r in records if r["error"]}
    summary = json.loads((out / "summary.json").read_text())
    retries = sum(r.get("retries", 0) for r in records)
    print(
        f"\nfault test: requests {injected.get('requests')}, injected 500 {injected.get('500', 0)}"
        f" / 429 {injected.get('429', 0)} / stall {injected.get('stall', 0)} / poisoned "
        f"{injected.get('poison', 0)}; retries recorded {retries}; records {len(records)} "
        f"({before_kill} before the kill); duplicates {duplicates}; lost {lost}; failed "
        f"{len(failed)}; exit {second.returncode}"
    )

    assert duplicates == 0 and lost == 0 and set(keys) == expected
    # Only the questions that always fail are failures: every other fault was retried away.
    poisoned = {(c, i) for c in ("naive", "bm25-2") for i in POISONED}
    unexpected = {(r["condition"], r["id"]): r["error"] for r in records if r["error"]}
    unexpected = {key: error for key, error in unexpected.items() if key not in poisoned}
    assert failed == poisoned, unexpected
    assert all(r["error_kind"] == "LMCallError" for r in records if r["error"])
    assert injected["500"] + injected["429"] + injected["stall"] > 20
    assert retries > 0
    for condition in ("naive", "bm25-2"):
        row = summary[condition]
        assert row["n"] == N_QUESTIONS and row["program_errors"] == len(POISONED)
        assert row["program_errors_by_kind"] == {"LMCallError": len(POISONED)}
        assert row["retries"] > 0
    # Recall is averaged over every question, failed ones at what they retrieved (BM25 ran
    # before the answer call failed, so a poisoned question still found its article).
    assert summary["bm25-2"]["recall_n"] == N_QUESTIONS
    table = (out / "table.md").read_text()
    assert f"| naive | {N_QUESTIONS} |" in table and "| failed |" in table
    assert second.returncode == 1, second.stderr[-3000:]
    assert "FAILED: naive" in second.stderr and "FAILED: bm25-2" in second.stderr


def test_a_run_whose_program_always_fails_counts_every_question_and_exits_non_zero(tmp_path, env):
    dataset, corpus = _data(tmp_path, 8, set(range(8)))
    out = tmp_path / "run"
    with FaultServer(p_500=0, p_429=0, p_stall=0, lifetime=300) as server:
        done = subprocess.run(
            _command(server, dataset, corpus, out, "naive"),
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 1, done.stderr[-3000:]
    assert "| naive | 8 | 0.000 |" in done.stdout
    assert "| 8 | 0 |" in done.stdout  # failed 8, judge errors 0
    assert "FAILED: naive: the program failed on 8 of 8 questions" in done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["naive"]["program_errors"] == 8 and summary["naive"]["correct"] == 0


# --- rate limits, one LM call at a time ---------------------------------------------------------


def _api_lm(server: FaultServer, **kwargs):
    from frames_dspy.lm import make_lm

    return make_lm(MODEL, api_base=server.url, cache=False, **kwargs)


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    """The waits FramesLM chooses between tries, recorded (and shortened to nothing)."""
    from frames_dspy.lm import factory

    chosen: list[float] = []
    original = factory.FramesLM._retry_wait

    def spy(self, exc, attempt):
        wait = original(self, exc, attempt)
        if wait is not None:
            chosen.append(wait)
            return 0.0
        return None

    monkeypatch.setattr(factory.FramesLM, "_retry_wait", spy)
    return chosen


def test_rate_limits_are_retried_with_backoff_and_counted(monkeypatch, waits):
    from frames_dspy.lm.accounting import metered

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # Every request is refused twice with HTTP 429 and no Retry-After, then answered.
    with FaultServer(p_500=0, p_429=1.0, p_stall=0, max_faults=2, retry_after=None) as server:
        lm = _api_lm(server, retry_backoff=1.0)
        with metered() as meter:
            reply = lm("the capital?")
        counts = dict(server.counts)
    assert reply and counts["429"] == 2 and counts["ok"] == 1
    assert meter.retries == 2  # each retry counted against the question, as in the table
    # Exponential backoff with jitter: 1 s then 2 s, each drawn from its upper half.
    assert len(waits) == 2 and 0.5 <= waits[0] <= 1.0 and 1.0 <= waits[1] <= 2.0


def test_a_rate_limit_honours_retry_after_and_then_fails_the_call(monkeypatch, waits):
    from frames_dspy.lm import LMCallError
    from frames_dspy.lm.accounting import metered

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FaultServer(p_500=0, p_429=1.0, p_stall=0, max_faults=10, retry_after="7") as server:
        lm = _api_lm(server)
        with metered() as meter, pytest.raises(LMCallError, match="rate-limited"):
            lm("the capital?")
        counts = dict(server.counts)
    assert waits == [7.0, 7.0, 7.0]  # the server's hint, three retries for an API model
    assert counts["429"] == 4 and meter.retries == 3
