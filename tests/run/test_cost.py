"""frames_dspy.run.cost: per-question estimates by program shape, prices, and money spent."""

from __future__ import annotations

import pytest

from frames_dspy.lm import parse_spec
from frames_dspy.programs import ProgramSpec
from frames_dspy.results.records import QuestionRecord
from frames_dspy.run.cost import (
    ANSWER_OUTPUT,
    ANSWER_PROMPT,
    JUDGE_PROMPT,
    STEP_OUTPUT,
    STEP_PROMPT,
    Pricer,
    QuestionCost,
    SpendMeter,
    estimate_lines,
    question_cost,
)


def test_single_call_programs_cost_one_answer_call_with_their_budget():
    assert question_cost(ProgramSpec("naive")).calls == 1
    assert question_cost(ProgramSpec("naive")).prompt_tokens == ANSWER_PROMPT
    bm25 = question_cost(ProgramSpec("bm25", n_docs=4, context_tokens=2000))
    assert (bm25.calls, bm25.prompt_tokens, bm25.completion_tokens) == (
        1,
        ANSWER_PROMPT + 2000,
        ANSWER_OUTPUT,
    )


def test_multihop_costs_grow_with_rounds_and_not_with_a_question_only_round():
    base = dict(k=3, n_docs=2, context_tokens=1000, planning=False)
    one = question_cost(ProgramSpec("multihop", rounds=1, **base))
    three = question_cost(ProgramSpec("multihop", rounds=3, **base))
    assert (one.calls, three.calls) == (2, 4)
    assert three.prompt_tokens > one.prompt_tokens
    echo = question_cost(ProgramSpec("multihop", rounds=5, k=1, n_docs=2, context_tokens=1000))
    assert echo.calls == 1  # k=1 with the question as its query: no query-writing call
    # The paper's 5 x 5 x 10 with a 100k-token budget: ~100k prompt tokens per question.
    paper = question_cost(ProgramSpec("multihop", context_tokens=100_000))
    assert paper.prompt_tokens > 100_000
    # The question's own budget grows the found view later rounds read.
    small = question_cost(ProgramSpec("multihop", rounds=2, **base))
    wide = question_cost(ProgramSpec("multihop", rounds=2, question_docs=8, **base))
    assert wide.prompt_tokens - small.prompt_tokens == 40 * (8 - 2)
    titles = ProgramSpec("multihop", rounds=2, titles=True, **base)
    assert question_cost(titles).calls == 3


def test_the_agent_costs_its_steps_up_to_its_token_limit_then_one_answer():
    spec = ProgramSpec("agent", max_steps=4, max_agent_tokens=100_000, context_tokens=1000)
    four = question_cost(spec)
    assert four.calls == 5 and four.completion_tokens == 4 * STEP_OUTPUT + ANSWER_OUTPUT
    # Each step's prompt holds the latest results and grows with the steps before it.
    steps = four.prompt_tokens - ANSWER_PROMPT - 1000
    assert steps > 4 * (STEP_PROMPT + 10 * 40)
    assert question_cost(spec.replace(max_steps=8)).prompt_tokens > four.prompt_tokens
    # The token limit cuts the steps: the one that crosses it is the last.
    cut = question_cost(spec.replace(max_steps=50, max_agent_tokens=2000))
    assert cut.calls == 3 and cut.prompt_tokens - ANSWER_PROMPT - 1000 < 2000 + STEP_PROMPT + 500
    retrieval = question_cost(spec, answer=False)
    assert retrieval.calls == 4 and retrieval.tokens == four.tokens - ANSWER_PROMPT - 1000 - 20


def test_embedded_and_unknown_models_have_no_price():
    assert Pricer(parse_spec("local"))(1000, 100) is None
    assert Pricer(None)(1000, 100) is None


def test_a_known_api_model_is_priced_from_litellms_bundled_map():
    price = Pricer(parse_spec("openai/gpt-4o-mini"))
    dollars = price(1_000_000, 0)
    assert dollars is not None and 0.01 < dollars < 10
    assert Pricer(parse_spec("openai/no-such-model-xyz"))(1000, 10) is None


def test_spend_meter_adds_reported_tokens_and_dollars():
    spend = SpendMeter(lambda p, c: (p + c) / 1000, lambda p, c: None)
    record = QuestionRecord(
        "naive", 1, prompt_tokens=900, completion_tokens=100, judge_prompt_tokens=50
    )
    spend(record)
    # A cached answer costs nothing, whatever it was metered at.
    spend(QuestionRecord("naive", 2, prompt_tokens=0, completion_tokens=0, metered_tokens=999))
    assert record.cost_usd == pytest.approx(1.0)
    assert spend.dollars == pytest.approx(1.0) and spend.tokens == 1050
    unpriced = SpendMeter(lambda p, c: None, lambda p, c: None)
    unpriced(QuestionRecord("naive", 3, prompt_tokens=5, completion_tokens=5))
    assert unpriced.dollars is None and unpriced.tokens == 10


def test_estimate_lines_name_every_condition_and_the_total():
    specs = {
        "naive": ProgramSpec("naive"),
        "multistep-planning": ProgramSpec("multihop", context_tokens=2000),
    }
    lines = estimate_lines(
        specs, {"naive": 10, "multistep-planning": 10}, Pricer(None), Pricer(None)
    )
    text = "\n".join(lines)
    assert lines[0].startswith("Cost estimate before any LM call")
    assert "naive" in text and "multistep-planning" in text and "total" in text
    assert "no price known" in text and "assumptions:" in text
    naive_line = next(line for line in lines if "naive" in line)
    assert f"{10 * (ANSWER_PROMPT + JUDGE_PROMPT + 80):,}" in naive_line  # naive + judge


def test_retrieval_only_estimates_count_the_query_calls_alone():
    spec = ProgramSpec("multihop", rounds=2, k=3, n_docs=1, context_tokens=2000)
    whole, half = question_cost(spec), question_cost(spec, answer=False)
    assert (whole.calls, half.calls) == (3, 2)
    assert whole.prompt_tokens - half.prompt_tokens == ANSWER_PROMPT + 2000
    assert question_cost(ProgramSpec("bm25", n_docs=4, context_tokens=2000), answer=False) == (
        QuestionCost(0, 0, 0)
    )
    lines = estimate_lines(
        {"program": spec}, {"program": 10}, Pricer(None), Pricer(None), retrieval_only=True
    )
    assert "query calls only" in lines[0]
    assert "~      20 LM calls" in lines[1]  # 2 query calls a question, no answer, no judge
