"""Whole runs with the agent condition: beside the paper's multi-step pipeline, through the
command line, killed and resumed, and on a Wikipedia snapshot.

The LMs are DummyLMs. The agent's replies are keyed on what its prompt shows: a question and
no step yet -> search for it; one search made -> read the first result; a read made ->
finish. The data are the three-question fixture (the ``data`` fixture of ``tests/conftest.py``).
"""

from __future__ import annotations

import json
from collections import Counter

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from frames_dspy.data.snapshot import parse_snapshot
from frames_dspy.programs import build_program
from frames_dspy.results.records import read_records
from frames_dspy.retrieval.disk_index import SnapshotRetriever, open_snapshot
from frames_dspy.run.evaluation import run_evaluation
from tests.commands.test_evaluate import (
    LEITH,
    _load_kill_script,
    call_main,
    config_for,
    judge,
    kill_run,
    lines_of,
    program_lm,
)
from tests.retrieval.test_snapshot_index import write_snapshot

#: What the agent searches first, by a phrase of each fixture question.
FIRST_SEARCH = {
    "New York City FC won its first MLS Cup?": "MLS Cup finals",
    "publication of Dracula?": "Trinity College Dublin",
    "Alexander Graham Bell was born?": "Alexander Graham Bell",
}


def act(tool: str, argument: str = "") -> dict:
    return {"thought": "next", "tool": tool, "argument": argument}


def agent_replies() -> dict[str, dict]:
    """DummyLM keys (first match wins) for the agent's three steps on every question."""
    replies = {"\n2. read: 1\n": act("finish"), "\n1. search: ": act("read", "1")}
    for phrase, query in FIRST_SEARCH.items():
        # Only a step prompt has the steps field right after the question.
        replies[f"{phrase}\n\n[[ ## steps ## ]]\n(nothing yet)"] = act("search", query)
    return replies


def agent_lm() -> DummyLM:
    """The agent's replies, then program_lm's (planning queries, answers)."""
    return DummyLM({**agent_replies(), **program_lm(LEITH).answers})


# --- beside the paper's pipeline ----------------------------------------------------------


def test_the_agent_and_multistep_planning_run_side_by_side(data, tmp_path):
    out = tmp_path / "run"
    config = config_for(data, out, conditions=["agent", "multistep-planning"], max_steps=5)
    summary = run_evaluation(config, lm=agent_lm(), judge_lm=judge(), progress=False)

    assert list(summary.rows) == ["multistep-planning", "agent"]
    agent, planning = summary.rows["agent"], summary.rows["multistep-planning"]
    assert agent.n == planning.n == 3 and agent.program_errors == 0
    assert agent.steps_per_question == 3.0 and agent.articles_read_per_question == 1.0
    assert agent.stop_reasons == {"finish": 3}
    assert agent.near_repeat_rate == 0.0  # one search a question
    assert planning.near_repeat_rate is not None and planning.steps_per_question is None
    assert agent.tokens_per_question > 0 and planning.tokens_per_question > 0
    # Question 0's answer "Novak Djokovic" is right by rule in both conditions.
    records = {(r.condition, r.id): r for r in read_records(out)}
    first = records[("agent", 0)]
    assert first.is_correct and first.stop_reason == "finish"
    assert [s.action for s in first.trajectory] == ["search", "read", "finish"]
    assert first.read_ids == [first.gold_ids[0]]  # the MLS Cup list, a gold article
    assert first.recall == [0.0, 0.5, 0.5] and first.used_ids == first.read_ids
    config_json = json.loads((out / "config.json").read_text())
    assert config_json["record_schema"] == 3
    assert config_json["programs"]["agent"]["max_steps"] == 5
    assert config_json["settings"]["max_agent_tokens"] == 8000
    table = (out / "table.md").read_text()
    assert "| agent | 3 |" in table and "| finish 3 |" in table


def test_evaluate_prints_both_rows_with_steps_reads_repetition_and_tokens(
    data, tmp_path, capsys, monkeypatch
):
    import frames_dspy.run.session

    lm = DummyLM({**agent_replies(), **judge().answers, **program_lm(LEITH).answers})
    monkeypatch.setattr(frames_dspy.run.session, "make_lm", lambda spec, **kwargs: lm)
    code, stdout, stderr = call_main(
        [
            "--conditions", "agent,multistep-planning", "--dataset", str(data["dataset"]),
            "--corpus", str(data["corpus"]), "--distractors", "none", "--limit", "2",
            "--rounds", "2", "--k", "2", "--max-steps", "4", "--out", str(tmp_path / "run"),
        ],
        capsys,
    )  # fmt: skip
    assert code == 0, stderr
    assert "agent" in stderr and "multistep-planning" in stderr  # the estimate names both
    table3 = [line for line in stdout.splitlines() if line.startswith("| ")]
    assert any(line.startswith("| multistep-planning | 2 |") for line in table3)
    assert any(line.startswith("| agent | 2 |") for line in table3)
    header = next(line for line in table3 if "near-repeated queries" in line)
    for column in ("tokens/q", "steps/q", "articles read/q", "stopped by"):
        assert column in header
    agent_row = [line for line in table3 if line.startswith("| agent | 2 |")][-1]
    assert "| 3.0 | 1.0 | 1.0 | 0.0 |" in agent_row  # steps, searches, reads, malformed
    planning_row = [line for line in table3 if line.startswith("| multistep-planning")][-1]
    assert planning_row.endswith("| — | — | — | — | — | — | — | — |")


def test_a_bad_agent_limit_is_a_one_line_error(data, capsys):
    code, _, stderr = call_main(
        ["--conditions", "agent", "--dataset", str(data["dataset"]), "--max-steps", "0"], capsys
    )
    assert code == 2 and "--max-steps" in stderr and "Traceback" not in stderr


# --- killed mid-trajectory, resumed --------------------------------------------------------


def test_a_run_killed_mid_trajectory_resumes_without_a_record_twice(tmp_path):
    out = tmp_path / "killed"
    # Into the next question's steps (each LM call takes 0.2 s) before the kill.
    complete = kill_run(out, "--delay", "0.2", "--conditions", "agent", settle=0.3)
    script = _load_kill_script()
    assert 2 <= len(complete) < len(script.QUESTIONS)

    script.run(str(out), delay=0.0, conditions=["agent"])
    lines = lines_of(out)
    assert lines[: len(complete)] == complete
    keys = Counter((r["condition"], r["id"]) for r in map(json.loads, lines))
    assert set(keys) == {("agent", i) for i in range(len(script.QUESTIONS))}
    assert set(keys.values()) == {1}
    for record in read_records(out):
        # The fixture's model searches until its three steps are spent, every time.
        assert record.stop_reason == "steps" and len(record.trajectory) == 3
        assert record.near_repeat_rate == pytest.approx(2 / 3)


# --- on a Wikipedia snapshot --------------------------------------------------------------


def test_the_agent_runs_on_a_snapshot_and_reads_through_its_title_lookup(data, tmp_path):
    snapshot = write_snapshot(tmp_path / "snapshot.parquet")
    out = tmp_path / "run"
    config = config_for(data, out, conditions=["agent"], corpus=str(snapshot))
    summary = run_evaluation(config, lm=agent_lm(), judge_lm=judge(), progress=False)
    assert summary.rows["agent"].n == 3 and summary.rows["agent"].program_errors == 0
    recorded = json.loads((out / "config.json").read_text())
    assert recorded["settings"]["retriever"] == "tantivy"
    # Every fixture question's first search put a gold article first; the agent read it.
    assert summary.rows["agent"].gold_read > 0 and summary.rows["agent"].stop_reasons == {
        "finish": 3
    }

    # A read by title goes through the snapshot store's own title lookup.
    store = open_snapshot(parse_snapshot(str(snapshot)), index_dir=tmp_path / "idx")
    agent = build_program({"kind": "agent"}, retriever=SnapshotRetriever(store), context_tokens=300)
    lm = DummyLM(
        [
            act("read", "water of leith"),  # the store's title key: case does not matter
            act("read", "Filler 0"),
            act("read", "No Such Article"),
            act("finish"),
            {"answer": "Water of Leith"},
        ]
    )
    with dspy.context(lm=lm):
        pred = agent(question="Which river flows through Edinburgh?")
    assert [s.outcome for s in pred.trajectory] == ["ok", "ok", "unknown_title", "ok"]
    assert [store[i].title for i in pred.context_ids[-1]] == ["Water of Leith", "Filler 0"]
