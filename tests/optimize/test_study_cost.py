"""optimize.study_cost: the estimate printed before any LM call follows the program's shape."""

from __future__ import annotations

import pytest

from frames_dspy.run.cost import agent_cost
from optimize.optimizers import OptimizerSettings
from optimize.space import SearchSpace
from optimize.study_cost import estimate_cost, question_cost


def test_cost_estimate_follows_the_program_shape():
    one = {"rounds": 3, "k": 1, "n_docs": 4, "prompt": "planning"}
    assert question_cost(one, context_tokens=1000)[0] == 1  # k=1: the question is the query
    calls, tokens = question_cost({**one, "k": 3}, context_tokens=1000)
    assert calls == 4 and tokens > 1000
    estimate = small_estimate(
        space=SearchSpace(),
        trials=10,
        n_dev=20,
        n_test=50,
        context_tokens=2000,
        optimizer=OptimizerSettings(name="mipro"),
    )
    assert [p.name for p in estimate.phases] == ["study", "mipro", "test"]
    assert estimate.calls > 10 * 20 and "assumptions" in "\n".join(estimate.lines())


def test_without_the_question_as_a_query_every_round_writes_queries():
    one = {"rounds": 3, "k": 1, "n_docs": 4, "prompt": "vanilla"}
    assert question_cost(one, context_tokens=1000)[0] == 1
    assert question_cost(one, context_tokens=1000, include_question=False)[0] == 4


def test_tokens_grow_with_the_prompt_the_rounds_and_the_budget():
    def tokens(**changes) -> float:
        params = {"rounds": 3, "k": 3, "n_docs": 4, "prompt": "vanilla", **changes}
        budget = params.pop("context_tokens", 1000)
        return question_cost(params, context_tokens=budget)[1]

    assert tokens(prompt="planning") > tokens()
    assert tokens(rounds=4) > tokens()
    # Every article budget token is an answer prompt token.
    assert tokens(context_tokens=3000) - tokens() == pytest.approx(2000)
    # Later rounds see more found articles, up to the compact view's cap.
    assert tokens(n_docs=10) > tokens(n_docs=1)
    assert tokens(n_docs=100) == tokens(n_docs=1000)


def small_estimate(**overrides):
    values = dict(
        space=SearchSpace(rounds=(1, 2), k=(1, 2), n_docs=(1, 2)),
        trials=4,
        n_train=5,
        n_dev=10,
        n_test=20,
        context_tokens=1000,
        optimizer=OptimizerSettings(name="bootstrap-rs"),
    )
    values.update(overrides)
    return estimate_cost(**values)


def test_the_phases_follow_where_prompts_are_optimised():
    final = small_estimate()
    assert [p.name for p in final.phases] == ["study", "bootstrap-rs", "test"]
    assert [p.questions for p in final.phases] == [40, 15, 20]
    inside = small_estimate(optimize_in_trials=True)
    assert [p.name for p in inside.phases] == ["study", "test"]
    assert inside.phases[0].calls > final.phases[0].calls  # every trial compiles
    assert "each compiling with bootstrap-rs" in inside.phases[0].note
    workers = small_estimate(final=False)
    assert [p.name for p in workers.phases] == ["study"]
    none = small_estimate(optimizer=OptimizerSettings())
    assert [p.name for p in none.phases] == ["study", "test"]
    assert none.calls < final.calls


def test_the_estimate_adds_up_and_says_what_it_assumes():
    estimate = small_estimate()
    assert estimate.calls == pytest.approx(sum(p.calls for p in estimate.phases))
    assert estimate.tokens == pytest.approx(sum(p.tokens for p in estimate.phases))
    mean_calls, mean_tokens = estimate.per_question_mean
    max_calls, max_tokens = estimate.per_question_max
    assert 1 < mean_calls <= max_calls and mean_tokens <= max_tokens
    # Each study question costs the mean configuration's calls (the judge included).
    assert estimate.phases[0].calls == pytest.approx(4 * 10 * mean_calls)
    lines = estimate.lines()
    assert lines[0].startswith("Cost estimate")
    assert lines[-2].lstrip().startswith("total")
    assert lines[-1].startswith("  assumptions:")
    assert small_estimate(trials=0).phases[0].calls == 0  # a finished study costs nothing more


def test_a_recall_compile_is_priced_without_answers_or_verdicts():
    space = SearchSpace(rounds=(2, 2), k=(2, 2), n_docs=(3, 3), prompts=("vanilla",))
    kwargs = dict(space=space, trials=1, n_train=10, n_dev=40, n_test=60, context_tokens=2000)
    recall = estimate_cost(
        optimizer=OptimizerSettings(name="gold-demos", objective="recall"), **kwargs
    )
    judged = estimate_cost(optimizer=OptimizerSettings(name="gold-demos"), **kwargs)
    # Two query calls per question (the question is one of the k=2 queries), nothing else.
    assert recall.per_question_mean[0] == 2
    assert judged.per_question_mean[0] == 4  # + the answer and the judge
    assert recall.tokens < judged.tokens / 2
    assert [p.calls for p in recall.phases] == [80, 80, 120]  # gold-demos itself calls no LM


AGENT = {"kind": "agent", "max_steps": 4, "max_articles": 3, "max_agent_tokens": 8000, "n_docs": 5}


def test_an_agent_trial_is_priced_at_its_limits():
    calls, tokens = question_cost(AGENT, context_tokens=1000)
    limits = agent_cost(4, 5, 600, 8000, context_tokens=1000)  # read_chars: the default
    assert (calls, tokens) == (limits.calls, limits.tokens) == (5, limits.tokens)
    assert question_cost({**AGENT, "max_steps": 8}, context_tokens=1000)[0] == 9
    assert question_cost(AGENT, context_tokens=1000, answer=False)[0] == 4


def test_a_study_with_the_agent_prices_each_kind_alike_and_the_reference():
    multihop = SearchSpace(rounds=(1, 2), k=(1, 3), n_docs=(1, 2))
    agent = SearchSpace(kinds=("agent",), max_steps=(2, 3), max_articles=(2, 2), n_docs=(1, 2))
    both = SearchSpace(
        kinds=("multihop", "agent"), rounds=(1, 2), k=(1, 3), n_docs=(1, 2), max_steps=(2, 3),
        max_articles=(2, 2),
    )  # fmt: skip
    means = [small_estimate(space=s, optimizer=OptimizerSettings()) for s in (multihop, agent)]
    mixed = small_estimate(space=both, optimizer=OptimizerSettings())
    # The sampler chooses a kind first: each kind weighs half, however many settings it has.
    assert mixed.per_question_mean[0] == pytest.approx(
        (means[0].per_question_mean[0] + means[1].per_question_mean[0]) / 2
    )
    assert [p.name for p in means[0].phases] == ["study", "test"]
    assert [p.name for p in means[1].phases] == ["study", "test", "reference"]
    reference = means[1].phases[-1]
    assert reference.questions == 20 and reference.note == "multistep-planning at r5 k5 n10, once"
    assert mixed.phases[-1].note.startswith("if the pick is an agent; multistep-planning")
    # The paper's 5 x 5 x 10: five query calls, the answer and the judge per question.
    assert reference.calls == 20 * 7
