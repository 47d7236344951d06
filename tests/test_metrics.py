"""Tests for frames_dspy.metrics: the autorater's rules, its judge path, and retrieval metrics.

The judge is a DummyLM. A reply DSPy cannot parse is retried once through the JSONAdapter, so
a failing judge call shows up as two LM history entries.
"""

from __future__ import annotations

import math

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from frames_dspy.lm import parse_spec
from frames_dspy.metrics import (
    Autorater,
    Judgement,
    answer_overlap,
    default_min_overlap,
    deterministic_match,
    extract_numbers,
    gold_recall,
    normalize_answer,
    query_repetition_rate,
)

# --- normalisation and numbers ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Eiffel Tower.", "eiffel tower"),
        ("Atlético Madrid", "atletico madrid"),
        ("1,234,567 people", "1234567 people"),
        ("12 May 1990", "1990-05-12"),
        ("May 12th, 1990", "1990-05-12"),
        ("the 3rd of March 2020", "2020-03-03"),
        ("1990-5-2", "1990-05-02"),
        ("Sept. 1990", "1990-09"),
        ("3.14", "3.14"),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("331 feet", [331.0]),
        ("1,234 and 5.5", [1234.0, 5.5]),
        ("the 37th president", [37.0]),
        ("2.5 million people", [2_500_000.0]),
        ("$1.2 billion", [1_200_000_000.0]),
        ("-4 degrees", [-4.0]),
        ("no numbers here", []),
        ("version2 and A4", []),
    ],
)
def test_extract_numbers(text, expected):
    assert extract_numbers(text) == expected


def test_scaled_decimals_equal_their_written_out_form():
    # BUG (metrics.extract_numbers): 2.01 * 1e6 is 2009999.9999999998 in floating point, so
    # "2.01 million" and "2,010,000" do not compare equal (84 of the 1,998 values
    # x.yy million/billion for x.yy in 0.01..9.99 fail this way).
    assert extract_numbers("2.01 million") == extract_numbers("2,010,000")
    assert deterministic_match("2.01 million", "2,010,000") == "number"
    assert deterministic_match("1.07 billion", "1,070,000,000") == "number"


# --- the deterministic check ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gold", "response", "rule"),
    [
        ("Novak Djokovic", "novak djokovic.", "exact"),
        ("The Beatles", "Beatles", "exact"),
        ("1,234", "1234", "exact"),
        ("No", "no.", "exact"),
        ("331 feet", "331", "number"),
        ("2", "2 years", "number"),
        ("3rd", "3", "number"),
        ("37th", "He was the 37th president", "number"),
        ("2.5 million", "2,500,000", "number"),
        ("$1.2 billion", "1,200,000,000 dollars", "number"),
        ("0.7", "0.70", "number"),
        ("12 May 1990", "1990-05-12", "exact"),
        ("May 12, 1990", "12th of May 1990", "exact"),
        ("1990-05-12", "May 12, 1990", "exact"),
        ("Atlético Madrid", "He played for Atletico Madrid at the time.", "contains"),
        ("Water of Leith", "The river is the Water of Leith", "contains"),
    ],
)
def test_deterministic_match_says_true(gold, response, rule):
    assert deterministic_match(gold, response) == rule


@pytest.mark.parametrize(
    ("gold", "response"),
    [
        ("Yes", "Yes, he did"),
        ("No", "No, she was not, but yes later"),
        ("3", "3 or 4"),
        ("331 feet", "330 feet"),
        # Units must agree: an abbreviation or another unit goes to the judge.
        ("331 feet", "The average is 331 ft"),
        ("15 years", "15 months"),
        ("Paris", "It is not Paris"),
        ("2", "It took 2 years, from 1980 to 1982"),
        ("third", "3rd"),
        ("Marie Curie and Grazia Deledda", "Grazia Deledda and Marie Curie"),
        ("The first woman to win two Nobel Prizes in Physics", "Marie Curie"),
        ("1990", "12 May 1990"),
        ("", "anything"),
        ("Paris", ""),
        ("Paris", "Not Paris 2"),
    ],
)
def test_deterministic_match_defers_to_the_judge(gold, response):
    assert deterministic_match(gold, response) is None


def test_numbers_from_the_question_do_not_block_a_match():
    question = "How many years passed between 1990 and 1995?"
    assert deterministic_match("5", "From 1990 to 1995 is 5 years") is None
    assert deterministic_match("5", "From 1990 to 1995 is 5 years", question) == "number"


def test_negative_numbers_keep_their_sign():
    # BUG (metrics.normalize_answer): the minus sign is stripped as punctuation, so a gold
    # "-5" and a response "5" are an "exact" match.
    assert normalize_answer("-5") != normalize_answer("5")
    assert deterministic_match("-5", "5") is None
    assert deterministic_match("−12 °C", "12 °C") is None


# --- the autorater: rules, judge, errors ------------------------------------------------------


def judge_lm(*replies: dict) -> DummyLM:
    return DummyLM(list(replies))


def verdict(decision: str, why: str = "compared") -> dict:
    return {"explanation": why, "decision": decision}


QUESTION = "Who won the 2021 French Open men's singles?"


def test_rules_answer_without_calling_the_judge():
    lm = judge_lm()
    rater = Autorater(lm)
    result = rater.judge(QUESTION, "Novak Djokovic", "It was Novak Djokovic.")
    assert result == Judgement(True, "contains", "deterministic match (contains)")
    assert not result.error
    assert rater.calls == 0
    assert lm.history == []


@pytest.mark.parametrize("response", ["", "   ", None])
def test_empty_response_is_false_without_a_judge_call(response):
    lm = judge_lm(verdict("TRUE"))
    rater = Autorater(lm)
    result = rater.judge(QUESTION, "Novak Djokovic", response)
    assert result.correct is False
    assert result.method == "empty"
    assert rater.calls == 0
    assert lm.history == []


@pytest.mark.parametrize("decision", ["TRUE", "FALSE"])
def test_judge_decides_when_no_rule_applies(decision):
    lm = judge_lm(verdict(decision, "The response names Djokovic by nickname."))
    rater = Autorater(lm)
    result = rater.judge(QUESTION, "Novak Djokovic", "Nole")
    assert result.correct is (decision == "TRUE")
    assert result.method == "judge"
    assert result.explanation == "The response names Djokovic by nickname."
    assert rater.calls == 1 and rater.errors == 0
    assert len(lm.history) == 1
    prompt = lm.history[0]["messages"][-1]["content"]
    assert "Novak Djokovic" in prompt and "Nole" in prompt


def test_yes_no_and_hedged_answers_go_to_the_judge():
    lm = judge_lm(verdict("TRUE"), verdict("FALSE"))
    rater = Autorater(lm)
    assert rater.judge("Was he born in May?", "Yes", "Yes, in May").method == "judge"
    hedged = rater.judge("How many?", "3", "3 or 4")
    assert hedged.method == "judge" and hedged.correct is False
    assert rater.calls == 2 == len(lm.history)


def test_without_rules_every_answer_is_judged():
    lm = judge_lm(verdict("TRUE"))
    rater = Autorater(lm, use_rules=False)
    assert rater.judge(QUESTION, "Novak Djokovic", "Novak Djokovic").method == "judge"
    assert rater.calls == 1


def test_judge_lm_is_used_instead_of_the_configured_lm():
    program_lm = judge_lm()  # would answer "No more responses" if asked
    judge = judge_lm(verdict("TRUE"))
    with dspy.context(lm=program_lm):
        result = Autorater(judge).judge(QUESTION, "Novak Djokovic", "Nole")
    assert result.correct is True
    assert program_lm.history == []
    assert len(judge.history) == 1


def test_without_a_judge_lm_the_configured_lm_judges():
    configured = judge_lm(verdict("FALSE"))
    with dspy.context(lm=configured):
        result = Autorater().judge(QUESTION, "Novak Djokovic", "Rafael Nadal")
    assert result.correct is False
    assert len(configured.history) == 1


@pytest.mark.parametrize(
    "reply",
    [
        {"explanation": "I cannot tell."},
        verdict("MAYBE"),
        {"answer": "TRUE"},
    ],
    ids=["no-decision", "maybe", "wrong-fields"],
)
def test_unparseable_judge_reply_is_a_judge_error(reply):
    lm = judge_lm(reply, reply)  # the ChatAdapter try and its JSONAdapter retry
    rater = Autorater(lm)
    result = rater.judge(QUESTION, "Novak Djokovic", "Nole")
    assert result.correct is None
    assert result.error
    assert result.method == "judge_error"
    assert result.explanation
    assert rater.errors == 1
    assert rater.calls == 1


def test_metric_returns_float_or_bool_with_trace():
    example = dspy.Example(question=QUESTION, answer="Novak Djokovic").with_inputs("question")
    right = dspy.Prediction(answer="Novak Djokovic")
    wrong = dspy.Prediction(answer="Rafael Nadal")
    lm = judge_lm(verdict("FALSE"), verdict("FALSE"))
    rater = Autorater(lm)
    assert rater(example, right) == 1.0 and isinstance(rater(example, right), float)
    assert rater(example, right, trace=[]) is True
    assert rater(example, wrong) == 0.0
    assert rater(example, wrong, trace=[]) is False
    assert rater.calls == 2


def test_metric_counts_a_judge_error_as_not_correct():
    example = dspy.Example(question=QUESTION, answer="Novak Djokovic").with_inputs("question")
    pred = dspy.Prediction(answer="Nole")
    bad = {"explanation": "unsure", "decision": "MAYBE"}
    rater = Autorater(judge_lm(bad, bad, bad, bad))
    score = rater(example, pred)
    assert score == 0.0 and isinstance(score, float)
    assert rater(example, pred, trace=[]) is False
    assert rater.errors == 2


def test_metric_with_a_prediction_lacking_an_answer():
    example = dspy.Example(question=QUESTION, answer="Novak Djokovic")
    assert Autorater(judge_lm())(example, dspy.Prediction()) == 0.0


def test_autorater_is_shared_not_copied():
    import copy

    rater = Autorater(judge_lm())
    assert copy.deepcopy(rater) is rater


# --- retrieval and query metrics --------------------------------------------------------------


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


# --- guarding a small judge's TRUE --------------------------------------------------------------


@pytest.mark.parametrize(
    ("gold", "response", "expected"),
    [
        ("Jane Ballou", "The future wife's name is Sarah.", 0.0),
        ("87", "1997", 0.0),
        ("Jane Ballou", "Her name is Jane Smith", 0.5),
        ("37th", "It ranks 37", 1.0),
        ("The Battle of Hastings.", "Hastings", 0.5),
    ],
)
def test_answer_overlap_counts_gold_content_words_and_numbers(gold, response, expected):
    assert answer_overlap(gold, response) == pytest.approx(expected)


def test_min_overlap_overrules_an_unsupported_true_from_the_judge():
    # Measured on the embedded 0.5B judge: it accepted "Sarah" for "Jane Ballou".
    rater = Autorater(judge_lm(verdict("TRUE")), min_overlap=0.5)
    result = rater.judge("Who is my future wife?", "Jane Ballou", "Her name is Sarah Smith")
    assert result == Judgement(False, "judge_overruled", result.explanation)
    assert "0%" in result.explanation and rater.calls == 1


def test_min_overlap_keeps_a_supported_true_and_every_false():
    rater = Autorater(judge_lm(verdict("TRUE"), verdict("FALSE")), min_overlap=0.5)
    supported = rater.judge("q", "Battle of Hastings", "it was the Hastings battle, 1066")
    assert supported.correct is True and supported.method == "judge"
    assert rater.judge("q", "Jane Ballou", "Sarah").correct is False


def test_min_overlap_defaults_on_only_for_the_embedded_judge():
    assert default_min_overlap(parse_spec("local")) == 0.5
    assert default_min_overlap(parse_spec("local-1.5b")) == 0.5
    assert default_min_overlap(parse_spec("openai/gpt-4o")) == 0.0
    with pytest.raises(ValueError, match="min_overlap"):
        Autorater(min_overlap=1.5)
