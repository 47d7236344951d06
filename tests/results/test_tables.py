"""Tests for frames_dspy.results.tables on hand-made prediction records."""

from __future__ import annotations

import json
import math

import pytest

from frames_dspy.programs.trajectory import AgentStep
from frames_dspy.results import tables
from frames_dspy.results.records import QuestionRecord, read_records, record_fields
from frames_dspy.results.summary import summary_to_json
from frames_dspy.results.tables import (
    PAPER_ACCURACY,
    accuracy_by_article_count,
    accuracy_by_reasoning_type,
    failure_breakdown,
    summarize,
    table3_markdown,
    wilson_interval,
    write_reports,
)


def record(condition, qid, correct, **extra):
    """A complete record: every field is named, so a field added to the record fails here
    until the helper (and what the tests assume of it) says what it holds."""
    base = {
        "condition": condition,
        "id": qid,
        "question": f"question {qid}",
        "gold_answer": "gold",
        "answer": "gold" if correct else "other",
        "correct": correct,
        "judge_method": "exact" if correct else "judge",
        "judge_p_true": None,
        "judge_explanation": "",
        "error": None,
        "error_kind": None,
        "reasoning_types": ["Numerical reasoning"],
        "n_gold": 2,
        "gold_ids": [],
        "gold_titles": [],
        "context_ids": [],
        "recall": None,
        "queries": [],
        "query_stats": None,
        "query_repetition_rate": None,
        "near_repeat_rate": None,
        "trajectory": None,
        "stop_reason": None,
        "packing": None,
        "answer_in_context": None,
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "lm_calls": 1,
        "cached_calls": 0,
        "failed_calls": 0,
        "retries": 0,
        "metered_tokens": 110,
        "judge_calls": 0,
        "judge_cached_calls": 0,
        "judge_prompt_tokens": 0,
        "judge_completion_tokens": 0,
        "seconds": 1.0,
        "cost_usd": None,
    }
    assert set(base) == set(record_fields()), "the helper must build a full record"
    unknown = set(extra) - set(base)
    assert not unknown, f"not record fields: {unknown}"
    base.update(extra)
    return QuestionRecord(**base)


@pytest.fixture
def records():
    return [
        # naive: 1 of 3 right; its failures have no context.
        record("naive", 1, True, recall=[], reasoning_types=["Numerical reasoning"]),
        record("naive", 2, False, recall=[], reasoning_types=["Tabular reasoning"]),
        record("naive", 3, False, recall=None, n_gold=7),
        # oracle: one right, one judge error, one reasoning miss.
        record("oracle", 1, True, recall=[1.0]),
        record(
            "oracle",
            2,
            None,
            judge_method="judge_error",
            recall=[1.0],
            reasoning_types=["Tabular reasoning"],
        ),
        record("oracle", 3, False, recall=[1.0], n_gold=7),
        # multi-step: recall per round; one run stopped after one round.
        record(
            "multistep-planning",
            1,
            True,
            recall=[0.5, 1.0, 1.0],
            lm_calls=4,
            query_repetition_rate=0.0,
            reasoning_types=["Numerical reasoning", "Tabular reasoning"],
        ),
        record(
            "multistep-planning",
            2,
            False,
            recall=[0.5, 0.5, 0.5],
            lm_calls=4,
            query_repetition_rate=0.5,
            reasoning_types=["Tabular reasoning"],
        ),
        record(
            "multistep-planning",
            3,
            False,
            recall=[0.0],
            error="RuntimeError('boom')",
            judge_method="empty",
            lm_calls=0,
            prompt_tokens=0,
            completion_tokens=0,
            metered_tokens=0,
            n_gold=7,
        ),
    ]


# Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I
# (Wilson score interval without continuity correction), plus 5/10 from the usual examples.
@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
        (29, 29, 0.8830, 1.0),
        (5, 10, 0.2366, 0.7634),
    ],
)
def test_wilson_interval_known_values(successes, n, low, high):
    result = wilson_interval(successes, n)
    assert result == pytest.approx((low, high), abs=1e-4)


def test_wilson_interval_edge_cases():
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    low, high = wilson_interval(30, 100, z=2.576)
    narrow = wilson_interval(30, 100)
    assert low < narrow[0] and high > narrow[1]


def test_summarize_run(records):
    summary = summarize(records)
    assert list(summary) == ["naive", "oracle", "multistep-planning"]

    naive = summary["naive"]
    assert naive.n == 3 and naive.correct == 1
    assert naive.accuracy == pytest.approx(1 / 3)
    assert naive.ci95 == pytest.approx(wilson_interval(1, 3))
    assert naive.recall_by_round == []

    oracle = summary["oracle"]
    # A judge error counts as not correct, but is left out of accuracy_judged.
    assert oracle.accuracy == pytest.approx(1 / 3)
    assert oracle.accuracy_judged == pytest.approx(1 / 2)
    assert oracle.judge_errors == 1
    assert oracle.judge_calls == 2
    assert oracle.recall_by_round == [1.0]

    multi = summary["multistep-planning"]
    assert multi.program_errors == 1
    # The stopped run keeps its last recall (0.0) for rounds 2 and 3.
    assert multi.recall_by_round == pytest.approx([1 / 3, 0.5, 0.5])
    assert multi.lm_calls_per_question == pytest.approx(8 / 3)
    assert multi.tokens_per_question == pytest.approx(220 / 3)
    assert multi.reported_tokens_per_question == pytest.approx(220 / 3)
    assert multi.query_repetition_rate == pytest.approx(0.25)
    json.dumps(summary_to_json(summary))  # the summary is written as JSON


def test_summarize_no_records():
    assert summarize([]) == {}


def test_tokens_are_metered_tokens_and_reported_ones_are_named_so():
    # A cached call reports no tokens but is metered: tokens/q counts it.
    cached = record("naive", 1, True, prompt_tokens=0, completion_tokens=0, metered_tokens=500)
    fresh = record("naive", 2, True, prompt_tokens=480, completion_tokens=20, metered_tokens=510)
    row = summarize([cached, fresh])["naive"]
    assert row.tokens_per_question == pytest.approx(505)
    assert row.reported_tokens_per_question == pytest.approx(250)
    assert "| 505 |" in table3_markdown({"naive": row})


def test_table3_markdown_has_the_papers_column(records):
    summary = summarize(records)
    table = table3_markdown(summary, model="qwen-0.5b")
    header, rule, *rows = table.strip().splitlines()
    assert "accuracy (qwen-0.5b)" in header
    assert header.rstrip(" |").endswith("paper (Gemini-Pro-1.5)")
    assert len(rows) == 3
    paper = {row.split("|")[1].strip(): row.split("|")[-2].strip() for row in rows}
    assert paper == {
        "naive": f"{PAPER_ACCURACY['naive']:.3f}",
        "oracle": f"{PAPER_ACCURACY['oracle']:.3f}",
        "multistep-planning": f"{PAPER_ACCURACY['multistep-planning']:.3f}",
    }
    assert "| naive | 3 | 0.333 |" in table


def test_table3_shows_a_dash_where_the_paper_has_no_figure():
    summary = summarize([record("bm25-2", 1, True)])
    row = table3_markdown(summary).strip().splitlines()[-1]
    assert row.split("|")[-2].strip() == "—"


def test_accuracy_by_reasoning_type_explodes_multi_type_rows(records):
    table = accuracy_by_reasoning_type(records)
    assert set(table.index) == {"Numerical reasoning", "Tabular reasoning"}
    # Question 1 carries both types under multistep-planning and counts in both rows.
    assert table.loc["Tabular reasoning", "multistep-planning"] == pytest.approx(1 / 2)
    assert table.loc["Numerical reasoning", "multistep-planning"] == pytest.approx(1 / 2)
    assert table.loc["Tabular reasoning", "oracle"] == 0.0
    assert table.loc["Numerical reasoning", "naive"] == pytest.approx(1 / 2)
    assert table.loc["Tabular reasoning", "questions"] == 2
    assert table.loc["Numerical reasoning", "questions"] == 2


def test_accuracy_by_article_count_bins_six_and_more(records):
    table = accuracy_by_article_count(records)
    assert list(table.index) == ["2", "6+"]
    assert table.loc["6+", "questions"] == 1
    assert table.loc["2", "oracle"] == pytest.approx(1 / 2)


def test_failure_breakdown(records):
    failures = failure_breakdown(records)
    kinds = {(str(r.condition), r.id): r.failure for r in failures.itertuples()}
    assert kinds == {
        ("naive", 2): "retrieval miss",
        ("naive", 3): "no gold in corpus",
        ("oracle", 2): "judge error",
        ("oracle", 3): "reasoning miss",
        ("multistep-planning", 2): "retrieval miss",
        ("multistep-planning", 3): "program error",  # it failed: no miss to blame
    }


def test_read_records_ignores_a_torn_last_line_only(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_text(record("naive", 1, True).to_json() + "\n" + '{"condition": "na')
    assert [r.id for r in read_records(path)] == [1]
    path.write_text('{"broken\n' + record("naive", 1, True).to_json() + "\n")
    with pytest.raises(ValueError, match="line 1"):
        read_records(path)
    assert read_records(tmp_path / "absent.jsonl") == []


def test_write_reports(tmp_path, records):
    with (tmp_path / "predictions.jsonl").open("w") as handle:
        for row in records:
            handle.write(row.to_json() + "\n")
    summary = write_reports(tmp_path, model="tiny")
    names = {p.name for p in tmp_path.iterdir()}
    assert {
        "summary.json",
        "table.md",
        "by_reasoning_type.md",
        "by_article_count.md",
        "accuracy_by_reasoning_type.png",
        "recall_by_round.png",
    } <= names
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written == json.loads(json.dumps(summary_to_json(summary)))
    assert "accuracy (tiny)" in (tmp_path / "table.md").read_text()
    assert "Tabular reasoning" in (tmp_path / "by_reasoning_type.md").read_text()
    for png in ("accuracy_by_reasoning_type.png", "recall_by_round.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_question_recorded_twice_counts_once_and_the_table_says_so(tmp_path, records):
    # An older version let two runs append to one folder: every naive record twice, the
    # second time with another verdict (the last one counts).
    naive = [r for r in records if r.condition == "naive"]
    again = [QuestionRecord(**{**r.__dict__, "correct": True}) for r in naive]
    with (tmp_path / "predictions.jsonl").open("w") as handle:
        for row in [*records, *again]:
            handle.write(row.to_json() + "\n")
    summary = write_reports(tmp_path)
    assert summary["naive"].n == 3 and summary["naive"].correct == 3
    assert summary["naive"].duplicates_ignored == 3
    assert summary["oracle"].n == 3 and summary["oracle"].duplicates_ignored == 0
    table = (tmp_path / "table.md").read_text()
    assert "> DUPLICATES IGNORED: 3 record(s) repeat a (condition, question) already " in table
    assert "(naive 3)" in table and "| naive | 3 | 1.000 |" in table
    assert "DUPLICATES" not in table3_markdown(summarize(records))


def test_a_failed_report_write_leaves_the_previous_files(tmp_path, records, monkeypatch):
    with (tmp_path / "predictions.jsonl").open("w") as handle:
        for row in records:
            handle.write(row.to_json() + "\n")
    write_reports(tmp_path, notes=["first"])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tables, "plot_recall_by_round", full)
    with pytest.raises(OSError) as info:
        write_reports(tmp_path, notes=["second"])
    assert info.value.filename == str(tmp_path / "recall_by_round.png")
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert set(after) == set(before)  # no temporary file left behind
    assert after["recall_by_round.png"] == before["recall_by_round.png"]
    assert b"second" in after["table.md"]  # each file is whole: the new one or the old one


def test_write_reports_on_an_empty_run(tmp_path):
    assert write_reports(tmp_path) == {}
    assert json.loads((tmp_path / "summary.json").read_text()) == {}


def test_condition_order_follows_the_paper():
    summary = summarize([record(c, 1, True) for c in ["program", "oracle", "naive"]])
    assert list(summary) == ["naive", "oracle", "program"]
    assert tables.CONDITION_ORDER[0] == "naive"


def test_failure_table_counts_each_outcome_per_type_and_condition(records):
    table = tables.failure_table(records)
    oracle = table.xs("oracle", level="condition").sum()
    assert oracle["answers"] == 3
    assert (oracle["correct"], oracle["judge error"], oracle["reasoning miss"]) == (1, 1, 1)
    assert (table["answers"] == table.drop(columns="answers").sum(axis=1)).all()
    assert tables.failure_table([]).empty


def test_failure_examples_name_the_gold_articles_never_in_context():
    rows = [
        record("bm25-2", 1, False, gold_ids=["a", "b"], context_ids=[["a", "x"]], recall=[0.5],
               question="q", gold_answer="g", answer="wrong", judge_explanation="no"),
    ]  # fmt: skip
    examples = tables.failure_examples(rows)
    assert examples.loc[:, "missing_gold"].tolist() == [["b"]]
    assert examples.iloc[0]["failure"] == "retrieval miss"


def test_plot_failures_by_type_writes_a_png(tmp_path, records):
    tables.plot_failures_by_type(records, tmp_path / "failures.png")
    assert (tmp_path / "failures.png").stat().st_size > 1000


def test_an_overruled_verdict_still_counts_as_a_judge_call():
    rows = [
        record("naive", 1, False, judge_method="judge_overruled"),
        record("naive", 2, True, judge_method="exact"),
        record("naive", 3, False, judge_method="judge"),
    ]
    assert summarize(rows)["naive"].judge_calls == 2


def test_summary_and_table_say_who_decided(records):
    records[3].judge_p_true = None
    records[5].judge_p_true = 0.31  # the oracle's LM verdict that had logprobs
    summary = summarize(records)
    oracle = summary["oracle"]
    assert oracle.verdicts_by_method == {"exact": 1, "judge": 1, "judge_error": 1}
    assert oracle.rule_verdicts == 1 and oracle.lm_verdicts == 2
    assert oracle.lm_verdicts_with_p_true == 1
    multi = summary["multistep-planning"]
    assert multi.verdicts_by_method == {"empty": 1, "exact": 1, "judge": 1}
    assert multi.rule_verdicts == 2 and multi.lm_verdicts == 1
    table = table3_markdown(summary)
    assert "verdicts rules/LM" in table.splitlines()[0]
    assert "| oracle | 3 | 0.333 | [0.06, 0.79] | 0 | 1 | 1/2 |" in table


def test_an_old_runs_deterministic_match_counts_as_a_rule_verdict():
    rows = [record("naive", 1, True, judge_method="contains")]
    summary = summarize(rows)
    assert summary["naive"].rule_verdicts == 1  # the old deterministic match was a rule
    assert "| naive | 1 | 1.000 | [0.21, 1.00] | 0 | 0 | 1/0 |" in table3_markdown(summary)


# --- how the LM searched: repetition for every condition, an agent's steps ----------------------


def agent_steps(*actions):
    """Steps from (action, argument, outcome, article ids) tuples."""
    return [AgentStep(a, arg, outcome, "", ids, 100) for a, arg, outcome, ids in actions]


@pytest.fixture
def search_records():
    looped = agent_steps(*[("search", "Bell birthplace", "ok", ["bell", "x"])] * 4)
    good = agent_steps(
        ("search", "Bell birthplace", "ok", ["bell"]),
        ("read", "Alexander Graham Bell", "ok", ["bell"]),
        ("lookup", "Edinburgh", "unknown_tool", []),
        ("read", "Edinburgh", "ok", ["edinburgh"]),
        ("finish", "", "ok", []),
    )
    gold = {"gold_ids": ["bell", "edinburgh"]}
    kept = {"packing": {"kept_fraction": {"bell": 0.5, "edinburgh": 0.0}}}
    return [
        record("agent", 1, False, trajectory=looped, stop_reason="steps", near_repeat_rate=0.75,
               query_repetition_rate=0.75, **gold),
        record("agent", 2, True, trajectory=good, stop_reason="finish", near_repeat_rate=0.0,
               query_repetition_rate=0.0, **gold, **kept),
        record("multistep-planning", 1, True, near_repeat_rate=0.5, query_repetition_rate=0.25),
        record("multistep-planning", 2, False, near_repeat_rate=None),
        record("bm25-2", 1, True),
    ]  # fmt: skip


def test_the_summary_sums_what_the_agent_did_and_repetition_everywhere(search_records):
    summary = summarize(search_records)
    agent = summary["agent"]
    assert agent.agent_n == 2
    assert agent.steps_per_question == 4.5 and agent.searches_per_question == 2.5
    assert agent.articles_read_per_question == 1.0
    assert agent.malformed_calls_per_question == 0.5
    assert agent.near_repeat_rate == 0.375 and agent.query_repetition_rate == 0.375
    assert agent.gold_searched == 0.5  # question 1's searches showed bell, question 2's too
    assert agent.gold_read == 0.5  # 0 and 1
    assert agent.gold_used == 0.25  # edinburgh was packed to nothing: 0 and 1/2
    assert agent.stop_reasons == {"finish": 1, "steps": 1}
    # The multi-step condition's repetition is measured the same way; it has no steps.
    planning = summary["multistep-planning"]
    assert planning.near_repeat_rate == 0.5 and planning.agent_n == 0
    assert planning.steps_per_question is None and planning.stop_reasons is None
    assert summary["bm25-2"].near_repeat_rate is None


def test_the_search_table_shows_dashes_not_zeros_where_a_condition_has_no_figure(
    search_records,
):
    summary = summarize(search_records)
    text = tables.search_markdown(summary)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()[2:4]}
    assert set(rows) == {"multistep-planning", "agent"}  # bm25-2's LM chose no query
    assert rows["agent"] == (
        "| agent | 2 | 110 | 0.38 | 0.38 | 4.5 | 2.5 | 1.0 | 0.5 | 0.50 | 0.50 | 0.25 "
        "| finish 1, steps 1 |"
    )
    assert rows["multistep-planning"] == (
        "| multistep-planning | 2 | 110 | 0.50 | 0.25 | — | — | — | — | — | — | — | — |"
    )
    assert "near-repeated queries: the share" in text
    # A retrieval-only run ran no answer step: nothing was "used".
    assert "| 0.50 | 0.50 | — | finish 1" in tables.search_markdown(
        summary, accuracy_measured=False
    )
    assert tables.search_markdown(summarize([record("naive", 1, True)])) == ""


def test_table_md_carries_the_search_table(tmp_path, search_records):
    for r in search_records:
        (tmp_path / "predictions.jsonl").open("a").write(r.to_json() + "\n")
    write_reports(tmp_path)
    table = (tmp_path / "table.md").read_text()
    assert "| condition | n | tokens/q | near-repeated queries |" in table
    assert table.index("| agent | 2 | 110 | 0.38") > table.index("paper (Gemini-Pro-1.5)")
