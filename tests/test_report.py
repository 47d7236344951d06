"""Tests for frames_dspy.report on hand-made prediction records."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from frames_dspy import report
from frames_dspy.report import (
    PAPER_ACCURACY,
    accuracy_by_article_count,
    accuracy_by_reasoning_type,
    failure_breakdown,
    predictions_frame,
    read_predictions,
    summarize_run,
    table3_markdown,
    wilson_interval,
    write_reports,
)


def record(condition, qid, correct, **extra):
    base = {
        "condition": condition,
        "id": qid,
        "correct": correct,
        "judge_method": "exact" if correct else "judge",
        "error": None,
        "reasoning_types": ["Numerical reasoning"],
        "n_gold": 2,
        "recall": None,
        "query_repetition_rate": None,
        "lm_calls": 1,
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "seconds": 1.0,
    }
    base.update(extra)
    return base


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
    summary = summarize_run(predictions_frame(records))
    assert list(summary) == ["naive", "oracle", "multistep-planning"]

    naive = summary["naive"]
    assert naive["n"] == 3 and naive["correct"] == 1
    assert naive["accuracy"] == pytest.approx(1 / 3)
    assert naive["ci95"] == pytest.approx(list(wilson_interval(1, 3)))
    assert naive["recall_by_round"] == []

    oracle = summary["oracle"]
    # A judge error counts as not correct, but is left out of accuracy_judged.
    assert oracle["accuracy"] == pytest.approx(1 / 3)
    assert oracle["accuracy_judged"] == pytest.approx(1 / 2)
    assert oracle["judge_errors"] == 1
    assert oracle["judge_calls"] == 2
    assert oracle["recall_by_round"] == [1.0]

    multi = summary["multistep-planning"]
    assert multi["program_errors"] == 1
    # The stopped run keeps its last recall (0.0) for rounds 2 and 3.
    assert multi["recall_by_round"] == pytest.approx([1 / 3, 0.5, 0.5])
    assert multi["lm_calls_per_question"] == pytest.approx(8 / 3)
    assert multi["tokens_per_question"] == pytest.approx(220 / 3)
    assert multi["query_repetition_rate"] == pytest.approx(0.25)
    json.dumps(summary)  # the summary is written as JSON


def test_summarize_empty_frame():
    assert summarize_run(pd.DataFrame()) == {}


def test_table3_markdown_has_the_papers_column(records):
    summary = summarize_run(predictions_frame(records))
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
    summary = summarize_run(predictions_frame([record("bm25-2", 1, True)]))
    row = table3_markdown(summary).strip().splitlines()[-1]
    assert row.split("|")[-2].strip() == "—"


def test_accuracy_by_reasoning_type_explodes_multi_type_rows(records):
    table = accuracy_by_reasoning_type(predictions_frame(records))
    assert set(table.index) == {"Numerical reasoning", "Tabular reasoning"}
    # Question 1 carries both types under multistep-planning and counts in both rows.
    assert table.loc["Tabular reasoning", "multistep-planning"] == pytest.approx(1 / 2)
    assert table.loc["Numerical reasoning", "multistep-planning"] == pytest.approx(1 / 2)
    assert table.loc["Tabular reasoning", "oracle"] == 0.0
    assert table.loc["Numerical reasoning", "naive"] == pytest.approx(1 / 2)
    assert table.loc["Tabular reasoning", "questions"] == 2
    assert table.loc["Numerical reasoning", "questions"] == 2


def test_accuracy_by_article_count_bins_six_and_more(records):
    table = accuracy_by_article_count(predictions_frame(records))
    assert list(table.index) == ["2", "6+"]
    assert table.loc["6+", "questions"] == 1
    assert table.loc["2", "oracle"] == pytest.approx(1 / 2)


def test_failure_breakdown(records):
    failures = failure_breakdown(predictions_frame(records))
    kinds = {(str(r.condition), r.id): r.failure for r in failures.itertuples()}
    assert kinds == {
        ("naive", 2): "retrieval miss",
        ("naive", 3): "no gold in corpus",
        ("oracle", 2): "judge error",
        ("oracle", 3): "reasoning miss",
        ("multistep-planning", 2): "retrieval miss",
        ("multistep-planning", 3): "program error",  # it failed: no miss to blame
    }


def test_read_predictions_ignores_a_torn_last_line_only(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_text(json.dumps(record("naive", 1, True)) + "\n" + '{"condition": "na')
    assert [r["id"] for r in read_predictions(path)] == [1]
    path.write_text('{"broken\n' + json.dumps(record("naive", 1, True)) + "\n")
    with pytest.raises(ValueError, match="line 1"):
        read_predictions(path)
    assert read_predictions(tmp_path / "absent.jsonl") == []


def test_write_reports(tmp_path, records):
    with (tmp_path / "predictions.jsonl").open("w") as handle:
        for row in records:
            handle.write(json.dumps(row) + "\n")
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
    assert json.loads((tmp_path / "summary.json").read_text()) == json.loads(json.dumps(summary))
    assert "accuracy (tiny)" in (tmp_path / "table.md").read_text()
    assert "Tabular reasoning" in (tmp_path / "by_reasoning_type.md").read_text()
    for png in ("accuracy_by_reasoning_type.png", "recall_by_round.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_write_reports_on_an_empty_run(tmp_path):
    assert write_reports(tmp_path) == {}
    assert json.loads((tmp_path / "summary.json").read_text()) == {}


def test_condition_order_follows_the_paper():
    frame = predictions_frame([record(c, 1, True) for c in ["program", "oracle", "naive"]])
    assert list(frame["condition"].cat.categories) == ["naive", "oracle", "program"]
    assert report.CONDITION_ORDER[0] == "naive"


def test_failure_table_counts_each_outcome_per_type_and_condition(records):
    table = report.failure_table(predictions_frame(records))
    oracle = table.xs("oracle", level="condition").sum()
    assert oracle["answers"] == 3
    assert (oracle["correct"], oracle["judge error"], oracle["reasoning miss"]) == (1, 1, 1)
    assert (table["answers"] == table.drop(columns="answers").sum(axis=1)).all()
    assert report.failure_table(pd.DataFrame()).empty


def test_failure_examples_name_the_gold_articles_never_in_context():
    rows = [
        record("bm25-2", 1, False, gold_ids=["a", "b"], context_ids=[["a", "x"]], recall=[0.5],
               question="q", gold_answer="g", answer="wrong", judge_explanation="no"),
    ]  # fmt: skip
    examples = report.failure_examples(predictions_frame(rows))
    assert examples.loc[:, "missing_gold"].tolist() == [["b"]]
    assert examples.iloc[0]["failure"] == "retrieval miss"


def test_plot_failures_by_type_writes_a_png(tmp_path, records):
    report.plot_failures_by_type(predictions_frame(records), tmp_path / "failures.png")
    assert (tmp_path / "failures.png").stat().st_size > 1000


def test_an_overruled_verdict_still_counts_as_a_judge_call():
    rows = [
        record("naive", 1, False, judge_method="judge_overruled"),
        record("naive", 2, True, judge_method="exact"),
        record("naive", 3, False, judge_method="judge"),
    ]
    assert summarize_run(predictions_frame(rows))["naive"]["judge_calls"] == 2


def test_summary_and_table_say_who_decided(records):
    records[3]["judge_p_true"] = None
    records[5]["judge_p_true"] = 0.31  # the oracle's LM verdict that had logprobs
    summary = summarize_run(predictions_frame(records))
    oracle = summary["oracle"]
    assert oracle["verdicts_by_method"] == {"exact": 1, "judge": 1, "judge_error": 1}
    assert oracle["rule_verdicts"] == 1 and oracle["lm_verdicts"] == 2
    assert oracle["lm_verdicts_with_p_true"] == 1
    multi = summary["multistep-planning"]
    assert multi["verdicts_by_method"] == {"empty": 1, "exact": 1, "judge": 1}
    assert multi["rule_verdicts"] == 2 and multi["lm_verdicts"] == 1
    table = table3_markdown(summary)
    assert "verdicts rules/LM" in table.splitlines()[0]
    assert "| oracle | 3 | 0.333 | [0.06, 0.79] | 0 | 1 | 1/2 |" in table


def test_old_runs_without_verdict_counts_still_render():
    rows = [record("naive", 1, True, judge_method="contains")]
    summary = summarize_run(predictions_frame(rows))
    assert summary["naive"]["rule_verdicts"] == 1  # the old deterministic match was a rule
    del summary["naive"]["rule_verdicts"]
    assert "| naive | 1 | 1.000 |" in table3_markdown(summary)
