"""frames_dspy.results.stats: the exact McNemar test and the paired bootstrap, by hand values."""

from __future__ import annotations

import pytest

from frames_dspy.results.stats import mcnemar_exact, paired_bootstrap_ci


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (0, 6, 0.03125),  # 2 * (1/2)^6
        (6, 0, 0.03125),
        (5, 5, 1.0),
        (0, 0, 1.0),
        (1, 5, 0.21875),  # 2 * (1 + 6) / 64
        (2, 10, 0.03857421875),  # 2 * (1 + 12 + 66) / 4096
        (0, 1, 1.0),
    ],
)
def test_mcnemar_exact_hand_computed(b, c, expected):
    assert mcnemar_exact(b, c) == pytest.approx(expected, abs=1e-12)


def test_mcnemar_exact_large_counts_stay_finite():
    p = mcnemar_exact(300, 420)
    assert 0 < p < 0.001
    assert mcnemar_exact(400, 400) == 1.0


def test_mcnemar_rejects_negative_counts():
    with pytest.raises(ValueError, match="b=-1"):
        mcnemar_exact(-1, 3)


def test_bootstrap_is_seeded_and_covers_the_observed_difference():
    a = [1, 0, 1, 1, 0, 0, 1, 0, 1, 0] * 4
    b = [1, 1, 1, 0, 0, 1, 1, 1, 1, 0] * 4
    observed = sum(b) / len(b) - sum(a) / len(a)
    first = paired_bootstrap_ci(a, b, resamples=2000, seed=3)
    assert first == paired_bootstrap_ci(a, b, resamples=2000, seed=3)
    assert first != paired_bootstrap_ci(a, b, resamples=2000, seed=4)
    assert first[0] <= observed <= first[1]


def test_bootstrap_excludes_zero_for_a_clear_gain():
    # 30 of 40 questions flip A wrong -> B right, none flip back.
    a = [0] * 30 + [1] * 10
    b = [1] * 40
    low, high = paired_bootstrap_ci(a, b, resamples=5000, seed=0)
    assert 0 < low <= 0.75 <= high


def test_bootstrap_includes_zero_for_a_balanced_swap():
    # 10 flip each way: same accuracy, different questions right.
    a = [1] * 10 + [0] * 10 + [1] * 20
    b = [0] * 10 + [1] * 10 + [1] * 20
    low, high = paired_bootstrap_ci(a, b, resamples=5000, seed=0)
    assert low < 0 < high


def test_bootstrap_of_nothing_is_none_and_lengths_must_match():
    assert paired_bootstrap_ci([], []) is None
    with pytest.raises(ValueError, match="one length"):
        paired_bootstrap_ci([1, 0], [1])
