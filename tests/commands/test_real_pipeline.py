"""End to end on the embedded model and the real data: the CLI a user runs, kept small.

Two questions, the naive prompt and multi-step planning with one short round, a small article
budget, on the data the ``real_data`` fixture found (a local copy with its distractor
summaries, or the fetched articles alone). It checks the run folder a user would read, not
whether the 0.5B model is right.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from frames_dspy.judge import JUDGE_METHODS, RULES

pytestmark = pytest.mark.real

# Two questions whose gold articles are all in the offline corpus.
QUESTION_IDS = "0,3"


def test_evaluate_cli_runs_the_embedded_model_on_real_questions(
    tmp_path, real_data, real_model_path
):
    out = tmp_path / "run"
    command = [
        sys.executable, "-m", "frames_dspy.evaluate",
        "--ids", QUESTION_IDS,
        "--conditions", "naive,multistep-planning",
        "--rounds", "1", "--k", "2", "--n-docs", "2",
        "--context-tokens", "500",
        "--max-tokens", "128",
        "--out", str(out),
        "--quiet",
        *real_data.cli_args(),
    ]  # fmt: skip
    # A cache of its own: an answer cached by another test must not stand in for a real call.
    env = {**os.environ, "DSPY_CACHEDIR": str(tmp_path / "dspy-cache")}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]

    records = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert sorted((r["condition"], r["id"]) for r in records) == [
        ("multistep-planning", 0), ("multistep-planning", 3), ("naive", 0), ("naive", 3),
    ]  # fmt: skip
    for record in records:
        assert record["error"] is None, record["error"]
        assert isinstance(record["answer"], str)
        assert record["judge_method"] in JUDGE_METHODS | set(RULES)
        assert record["prompt_tokens"] > 0
    multistep = [r for r in records if r["condition"] == "multistep-planning"]
    for record in multistep:
        assert len(record["queries"]) == 1 and 1 <= len(record["queries"][0]) <= 2
        assert record["queries"][0][0] == record["question"]
        assert 1 <= len(record["context_ids"][0]) <= 4
        assert record["packing"]["used_tokens"] <= 500
        assert record["recall"] is not None and 0.0 <= record["recall"][0] <= 1.0

    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"naive", "multistep-planning"}
    assert all(row["n"] == 2 for row in summary.values())
    config = json.loads((out / "config.json").read_text())
    assert config["settings"]["model"] == "local"
    # The FRAMES articles plus, from a local copy, its 10k distractor summaries: the store the
    # test's own fixture loaded, as the command line loaded it.
    assert config["corpus_articles"] == len(real_data.store)
    if real_data.distractors:
        assert config["corpus_articles"] > 12000
    table = (out / "table.md").read_text()
    assert "multistep-planning" in table and "0.660" in table
    assert "run folder" in done.stdout
