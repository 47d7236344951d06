"""What the LM adds, held out: the paired share beside the no-LM parts and its plain verdict."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from frames_dspy.results.records import QuestionRecord
from frames_dspy.results.summary import summarize_records
from optimize.lm_share import (
    _paired_lm_share,
    dev_share_check,
    held_out_verdict,
    lm_queries_line,
    lm_shown,
    lm_verdict,
)
from optimize.scores import ChosenTrial, TestScore


def rec(condition, qid, recall):
    return QuestionRecord(condition=condition, id=qid, recall=recall)


def scored(recall_by_round, **figures) -> TestScore:
    """A test score whose run recalled ``recall_by_round``, with the no-LM ``figures``."""
    summary = replace(summarize_records([]), recall_by_round=recall_by_round)
    defaults = {"no_lm_recall": None, "references": {}}
    return TestScore(summary, 10, 100, "sha", "python -m ...", **{**defaults, **figures})


def chosen(**figures) -> ChosenTrial:
    """A pick with the given dev figures (the others empty)."""
    empty = {f.name: None for f in fields(ChosenTrial)}
    return ChosenTrial(**{**empty, "params": {}, "compile": {}, **figures})


def test_the_share_pairs_questions_by_id_and_counts_an_empty_search_as_zero():
    program = [rec("program", 1, [0.5, 1.0]), rec("program", 2, []), rec("program", 3, None)]
    alone = [rec("program-no-lm", 2, [0.5]), rec("program-no-lm", 1, [0.5, 0.5])]
    share = _paired_lm_share(program, alone)
    # Question 3 has no gold article on either side and is left out.
    assert share["lm_share_n"] == 2
    assert share["lm_share"] == pytest.approx((1.0 + 0.0) / 2 - (0.5 + 0.5) / 2)
    low, high = share["lm_share_ci95"]
    assert low <= share["lm_share"] <= high
    assert _paired_lm_share(program, []) == {}


@pytest.mark.parametrize(
    "ci, said",
    [
        ([0.01, 0.05], "the LM added recall"),
        ([-0.015, 0.012], "the LM added nothing shown"),
        ([-0.05, -0.01], "the LM lost recall"),
    ],
)
def test_the_held_out_line_says_what_the_interval_shows(ci, said):
    test = scored(
        [0.85, 0.909],
        no_lm_recall=0.910,
        references={"bm25": 0.889, "phrases": 0.906},
        lm_share=-0.002,
        lm_share_ci95=ci,
        lm_share_n=100,
    )
    first, second = held_out_verdict(test).splitlines()
    assert first.startswith("test recall 0.909; its no-LM parts alone 0.910; bm25-N 0.889")
    assert "-0.002 [" in second and "100 questions" in second
    assert said in second


def test_a_program_without_lm_queries_gets_one_line_and_says_the_lm_added_nothing():
    assert held_out_verdict(scored([0.9], references={})).count("\n") == 0
    assert lm_verdict(chosen(lm_queries_per_round=0)).startswith("the LM added nothing")
    assert "writes 1 query a round" in lm_verdict(chosen(lm_queries_per_round=1))
    line = lm_verdict(chosen(lm_queries_per_round=2, dev_recall=0.8, dev_no_lm_recall=0.75))
    assert "writes 2 queries a round; dev recall 0.800 against 0.750" in line
    assert "(the LM's share +0.050)" in line


def test_an_agent_pick_is_said_to_have_no_no_lm_parts_and_keeps_its_lift():
    line = lm_verdict(chosen(kind="agent", dev_lift=0.125))
    assert line.startswith("the pick is the agent: every article it reads, its LM chose")
    assert line.endswith("at the articles it read +0.125")
    assert "--lm-queries does not apply" in lm_verdict(chosen(kind="agent"))


def test_the_dev_share_is_paired_by_question_and_shown_only_above_zero():
    program = [rec("trial-0", "a", [1.0]), rec("trial-0", "b", [0.5]), rec("trial-0", "c", None)]
    check = dev_share_check(program, {"a": 0.5, "b": 0.0, "x": 1.0})
    assert check["lm_share_n"] == 2  # c has no no-LM figure, x no program record
    assert check["lm_share"] == pytest.approx(0.5)
    assert lm_shown(check)  # both questions gained: every resample is above 0
    kept = lm_queries_line({**check, "kept": True})
    assert kept.endswith("is above 0: program.json keeps the LM's queries")
    level = dev_share_check(program, {"a": 1.0, "b": 0.0})
    assert not lm_shown(level) and not lm_shown({})
    line = lm_queries_line({**level, "kept": False})
    assert line.startswith("the LM's share on dev +0.250 [")
    assert "not shown above 0: program.json is the pick's no-LM parts alone" in line
    assert "could not be paired" in lm_queries_line({"kept": True})
