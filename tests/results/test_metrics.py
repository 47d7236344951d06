"""Tests for frames_dspy.results.metrics: gold-article recall and query repetition.

The autorater's tests are in ``tests/judge/test_autorater.py``.
"""

from __future__ import annotations

import math

import pytest

from frames_dspy.programs import ProgramSpec, lm_queries
from frames_dspy.results.metrics import (
    NEAR_REPEAT,
    gold_recall,
    mean_recall,
    query_repetition_rate,
)


def test_gold_recall_per_round():
    assert gold_recall(["a", "b"], [["a"], ["a", "x"], ["a", "x", "b"]]) == [0.5, 0.5, 1.0]
    assert gold_recall(["a", "a"], [["a"]]) == [1.0]
    assert gold_recall([], [["a"]]) is None
    assert gold_recall(["a"], []) == []


def test_query_repetition_rate():
    assert query_repetition_rate({"generated": 8, "repeated": 2}) == 0.25
    assert query_repetition_rate({"generated": 0, "repeated": 0}) is None
    assert query_repetition_rate(None) is None
    assert math.isclose(query_repetition_rate({"generated": 3}), 0.0)


def test_mean_recall_counts_failed_questions_and_pads_early_stops():
    assert mean_recall([[0.5, 1.0], [1.0], []]) == ([0.5, 2 / 3], 3)
    assert mean_recall([None, None]) == ([], 0)


@pytest.mark.parametrize(
    ("earlier", "query", "repeats"),
    [
        ("Edinburgh river", "river Edinburgh", True),  # word order
        ("Bell birthplace", "bell's BIRTHPLACE?", True),  # case, punctuation, a lone letter
        ("Willis Tower completion", "Willis Tower completion date", True),  # 3 of 4 words
        ("the tallest building in Chicago", "tallest building Chicago", True),  # small words
        ("Bell birthplace", "Alexander Graham Bell birthplace", False),  # 2 of 4 words
        ("Bell birthplace", "Edinburgh river", False),
        ("What is this?", "what is this", True),  # small words only: the same words in order
        ("What is this?", "this is what", False),
        ("Who is he?", "who was she", False),
    ],
)
def test_near_repeat_is_the_same_content_words(earlier, query, repeats):
    assert NEAR_REPEAT.repeats(query, [earlier]) is repeats


def test_near_repeat_share_of_a_questions_queries():
    loop = ["Bell birthplace"] * 5
    assert NEAR_REPEAT.share(loop) == pytest.approx(4 / 5)
    searches = ["Bell birthplace", "Edinburgh river", "river Edinburgh", "Water of Leith"]
    assert NEAR_REPEAT.share(searches) == 0.25
    # Exact repeats a program dropped before sending still count as the LM's repeats.
    assert NEAR_REPEAT.share(searches[:2], dropped_repeats=2) == 0.5
    assert NEAR_REPEAT.share([]) is None


def test_the_lm_queries_are_found_in_every_programs_rounds():
    question = "Which river flows through the capital where Alexander Graham Bell was born?"
    multihop = ProgramSpec("multihop", rounds=2, k=3, n_docs=2, planning=False)
    rounds = [[question, "Bell birthplace", "Edinburgh"], [question, "Edinburgh river"]]
    assert lm_queries(multihop, question, rounds) == [
        "Bell birthplace",
        "Edinburgh",
        "Edinburgh river",
    ]
    # With phrase_docs the question's capitalised phrases follow it: the program's, not the LM's.
    phrases = multihop.replace(question_docs=2, phrase_docs=2)
    sent = [[question, "Alexander Graham Bell", "Bell birthplace"]]
    assert lm_queries(phrases, question, sent) == ["Bell birthplace"]
    # Without the question as a query, a round that sent it alone had nothing written.
    alone = multihop.replace(include_question=False)
    assert lm_queries(alone, question, [[question], ["Edinburgh river"]]) == ["Edinburgh river"]
    assert lm_queries(ProgramSpec("bm25", n_docs=4), question, [[question]]) == []
    agent = ProgramSpec("agent")
    assert lm_queries(agent, question, [["Bell"], [], ["Bell"]]) == ["Bell", "Bell"]
