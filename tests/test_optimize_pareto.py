"""optimize.pareto: the Pareto front of (accuracy, tokens per question), the pick, the files."""

from __future__ import annotations

import optuna
import pytest

from optimize.pareto import PickRule, parse_pick, pick_trial


def test_pick_rules_choose_from_the_front():
    def trial(number, acc, tokens):
        made = optuna.trial.create_trial(values=[acc, tokens])
        made.number = number
        return made

    front = [trial(0, 0.50, 1000.0), trial(1, 0.60, 3000.0), trial(2, 0.59, 1500.0)]
    assert pick_trial(front, PickRule()).number == 1
    assert pick_trial(front, parse_pick("cheapest-within:0.02")).number == 2
    assert pick_trial(front, parse_pick("cheapest-within:0.2")).number == 0
    tie = [trial(3, 0.6, 2000.0), trial(4, 0.6, 1800.0)]
    assert pick_trial(tie, PickRule()).number == 4  # equal accuracy: fewer tokens
    with pytest.raises(ValueError, match="cheapest-within:TOL"):
        parse_pick("cheapest")
