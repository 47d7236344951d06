"""frames_dspy.programs.signatures: what the prompts ask for, as the model sees it.

Checks go through DSPy's ChatAdapter on a DummyLM where the point is the rendered prompt or the
parsed reply, and read the signature classes where the point is their shape.
"""

from __future__ import annotations

from typing import Literal, get_args, get_origin

import dspy
import pytest
from dspy.utils.dummies import DummyLM
from dspy.utils.exceptions import AdapterParseError

from frames_dspy.programs.signatures import (
    AnswerFromKnowledge,
    AnswerWithContext,
    GenerateQueries,
    JudgeAnswer,
    PlanQueries,
)


def system_prompt(signature, reply: dict, **inputs) -> tuple[dspy.Prediction, str]:
    lm = DummyLM([reply])
    with dspy.context(lm=lm):
        out = dspy.Predict(signature)(**inputs)
    return out, lm.history[0]["messages"][0]["content"]


def described(field) -> bool:
    desc = (field.json_schema_extra or {}).get("desc") or ""
    # DSPy puts "${name}" where no description was given.
    return bool(desc.strip()) and not desc.startswith("${")


@pytest.mark.parametrize(
    "signature", [AnswerFromKnowledge, AnswerWithContext, GenerateQueries, PlanQueries]
)
def test_every_field_of_the_program_prompts_is_described(signature):
    assert signature.instructions.strip()
    undescribed = [name for name, field in signature.fields.items() if not described(field)]
    assert undescribed == []


def test_the_judges_reply_is_an_explanation_then_true_or_false():
    assert list(JudgeAnswer.output_fields) == ["explanation", "decision"]  # explain, then decide
    decision = JudgeAnswer.output_fields["decision"].annotation
    assert get_origin(decision) is Literal and get_args(decision) == ("TRUE", "FALSE")
    assert all(described(f) for f in JudgeAnswer.output_fields.values())
    assert described(JudgeAnswer.input_fields["gold_answer"])
    assert described(JudgeAnswer.input_fields["response"])

    question = {"question": "Who won?", "gold_answer": "Nadal", "response": "Rafael Nadal"}
    out, prompt = system_prompt(
        JudgeAnswer, {"explanation": "same player", "decision": "TRUE"}, **question
    )
    assert out.decision == "TRUE"
    assert "one of: TRUE; FALSE" in prompt


def test_a_judge_reply_other_than_true_or_false_does_not_parse():
    lm = DummyLM([{"explanation": "unsure", "decision": "maybe"}] * 2)
    with pytest.raises(AdapterParseError), dspy.context(lm=lm):
        dspy.Predict(JudgeAnswer)(question="Who won?", gold_answer="Nadal", response="Federer")


def test_the_planning_prompt_forbids_repeats_and_plans_first():
    assert "never repeat" in PlanQueries.instructions.lower()
    assert "never repeat" in PlanQueries.input_fields["past_queries"].json_schema_extra["desc"]
    assert "step by step" in PlanQueries.instructions
    assert list(PlanQueries.output_fields) == ["plan", "queries"]  # the plan comes first
    assert PlanQueries.instructions.count("round 1:") >= 2  # worked examples of query sequences
    # The vanilla prompt is the paper's baseline: no rule against repeats, no examples.
    assert "repeat" not in GenerateQueries.instructions.lower()
    assert "round 1" not in GenerateQueries.instructions
    assert list(GenerateQueries.output_fields) == ["queries"]


def test_both_query_prompts_take_the_same_inputs_and_give_a_list_of_queries():
    # MultiHop calls either one with the same arguments and reads `queries` from both.
    for signature in (GenerateQueries, PlanQueries):
        inputs = {name: f.annotation for name, f in signature.input_fields.items()}
        assert inputs == {
            "question": str,
            "found": str,
            "past_queries": list[str],
            "n_queries": int,
        }
        assert signature.output_fields["queries"].annotation == list[str]


def test_a_query_prompt_shows_past_queries_and_parses_a_list():
    inputs = {
        "question": "Which river flows through the capital of Scotland?",
        "found": "(nothing yet)",
        "past_queries": ["Scotland capital"],
        "n_queries": 2,
    }
    lm = DummyLM([{"plan": "find the river", "queries": ["Edinburgh river", "Water of Leith"]}])
    with dspy.context(lm=lm):
        out = dspy.Predict(PlanQueries)(**inputs)
    assert out.queries == ["Edinburgh river", "Water of Leith"]
    user = lm.history[0]["messages"][-1]["content"]
    assert '["Scotland capital"]' in user and "[[ ## n_queries ## ]]\n2" in user


def test_the_answer_prompts_ask_for_one_short_answer_and_no_refusal():
    for signature in (AnswerFromKnowledge, AnswerWithContext):
        text = " ".join(signature.instructions.split())
        assert "short, final answer" in text and "not a refusal" in text
        assert list(signature.output_fields) == ["answer"]
    assert list(AnswerWithContext.input_fields) == ["context", "question"]
    assert list(AnswerFromKnowledge.input_fields) == ["question"]  # the naive prompt: no articles
