"""A native engine crash in a whole run: python -m frames_dspy.evaluate's message, exit status
and records.

The embedded engine's worker builds a stand-in from ``fixtures/crashing_llama.py`` that
segfaults on purpose (on a question holding its trigger, or on every call); the GGUF file is a
fake that only starts like one. Nothing here loads a real model.
"""

from __future__ import annotations

import csv
import json

import pytest
from crashing_llama import TRIGGER

from frames_dspy.commands import evaluate
from frames_dspy.lm.engine import llama_engine

QUESTIONS = [
    ("Which city is the capital of France?", "Paris"),
    (f"Which city hosts the {TRIGGER} tower?", "Paris"),
    ("Which river flows through Paris?", "Seine"),
]


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "questions.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "Prompt", "Answer", "wikipedia_link_1", "reasoning_types"])
        for i, (question, answer) in enumerate(QUESTIONS):
            writer.writerow(
                [i, question, answer, "https://en.wikipedia.org/wiki/Paris", "Temporal"]
            )
    return path


def _run(monkeypatch, capsys, factory: str, argv: list[str]) -> tuple[int, str]:
    monkeypatch.setattr(llama_engine, "DEFAULT_FACTORY", f"crashing_llama:{factory}")
    llama_engine._reset_loaded_models()
    try:
        code = evaluate.main([*argv, "--quiet"])
    finally:
        llama_engine._reset_loaded_models()
    return code, capsys.readouterr().err


def _records(out):
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def test_a_crash_fails_one_question_and_a_dead_engine_loses_no_record(
    tmp_path, dataset, gguf, monkeypatch, capsys
):
    out = tmp_path / "run"
    argv = [
        "--model",
        f"local:{gguf}",
        "--dataset",
        str(dataset),
        "--conditions",
        "naive",
        "--out",
        str(out),
    ]
    code, err = _run(monkeypatch, capsys, "on_trigger", argv)
    records = {r["id"]: r for r in _records(out)}
    assert sorted(records) == [0, 1, 2]
    crashed = records[1]
    assert crashed["error_kind"] == "LMCallError" and crashed["correct"] is False
    assert "segmentation fault (SIGSEGV)" in crashed["error"] and "CPU: " in crashed["error"]
    assert records[0]["error"] is None and records[2]["error"] is None
    # One of three failed: over --max-failure-rate, so the run says so and exits 1.
    assert code == 1 and "FAILED: naive" in err and "LMCallError 1" in err
    config = json.loads((out / "config.json").read_text())
    assert config["engines"]["program"]["isolation"] == "process"
    assert config["engines"]["program"]["worker_restarts"] == 0  # written before the crash

    # The engine now dies on every call: the same command stops at once, with one clear line
    # and status 2, and every record of the first run is still there.
    before = (out / "predictions.jsonl").read_bytes()
    code, err = _run(monkeypatch, capsys, "segfault", argv)
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "segmentation fault (SIGSEGV)" in lines[0]
    assert "cannot run on this machine" in lines[0] and "the same command resumes" in lines[0]
    assert "Traceback" not in err
    assert (out / "predictions.jsonl").read_bytes() == before
