"""Tests for frames_dspy.results.metrics: gold-article recall and query repetition.

The autorater's tests are in ``tests/judge/test_autorater.py``.
"""

from __future__ import annotations

import math

from frames_dspy.results.metrics import gold_recall, mean_recall, query_repetition_rate


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
