"""optimize.cost: the estimate printed before any LM call follows the program's shape."""

from __future__ import annotations

from optimize.cost import estimate_cost, question_cost
from optimize.optimizers import OptimizerSettings
from optimize.study import SearchSpace


def test_cost_estimate_follows_the_program_shape():
    one = {"rounds": 3, "k": 1, "n_docs": 4, "prompt": "planning"}
    assert question_cost(one, context_tokens=1000)[0] == 1  # k=1: the question is the query
    calls, tokens = question_cost({**one, "k": 3}, context_tokens=1000)
    assert calls == 4 and tokens > 1000
    estimate = estimate_cost(
        space=SearchSpace(),
        trials=10,
        n_train=5,
        n_dev=20,
        n_test=50,
        context_tokens=2000,
        optimizer=OptimizerSettings(name="mipro"),
    )
    assert [p.name for p in estimate.phases] == ["study", "mipro", "test"]
    assert estimate.calls > 10 * 20 and "assumptions" in "\n".join(estimate.lines())
