"""Tests for frames_dspy.judge.autorater: rules first with no LM call, then the LM judge.

The judge is a DummyLM, or the embedded engine over a scripted fake llama (``lm_fakes``) when
the test needs log-probabilities. A reply DSPy cannot parse is retried once through the
JSONAdapter, so a failing judge call shows up as two LM history entries.
"""

from __future__ import annotations

import copy
import math
import threading

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from frames_dspy.judge import (
    JUDGE_METHODS,
    RULES,
    Autorater,
    Judgement,
    decision_probability,
    is_rule_method,
    method_counts,
)
from frames_dspy.lm import make_lm
from tests.lm_fakes import ScriptedLlama, judge_pieces

QUESTION = "Who won the 2021 French Open men's singles?"


def judge_lm(*replies: dict) -> DummyLM:
    return DummyLM(list(replies))


def verdict(decision: str, why: str = "compared") -> dict:
    return {"explanation": why, "decision": decision}


# --- rules decide first, with no LM call -------------------------------------------------------


@pytest.mark.parametrize(
    ("gold", "response", "correct", "rule"),
    [
        ("Novak Djokovic", "It was Novak Djokovic.", True, "exact"),
        ("Prague, Czech Republic", "Prague", True, "stated_answer"),
        ("Novak Djokovic", "I cannot determine who won.", False, "refusal"),
        ("Novak Djokovic", "Either Djokovic or Nadal.", False, "hedge"),
        ("331 feet", "330 feet", False, "different_number"),
        ("Novak Djokovic", "It was not Novak Djokovic but Rafael Nadal.", False, "rejected_option"),
        ("Novak Djokovic", "It was Rafael Nadal.", False, "different_name"),
    ],
)
def test_rules_decide_without_calling_the_lm(gold, response, correct, rule):
    lm = judge_lm()  # any call would answer "No more responses" and fail the parse
    rater = Autorater(lm)
    result = rater.judge(QUESTION, gold, response)
    assert result.correct is correct and result.method == rule and result.by_rule
    assert result.p_true is None and result.explanation
    assert rater.calls == 0 and rater.errors == 0
    assert lm.history == []


@pytest.mark.parametrize("response", ["", "   ", None])
def test_empty_response_is_false_without_a_judge_call(response):
    lm = judge_lm(verdict("TRUE"))
    for rater in (Autorater(lm), Autorater(lm, use_rules=False)):
        result = rater.judge(QUESTION, "Novak Djokovic", response)
        assert result == Judgement(False, "empty", "the response is empty")
        assert rater.calls == 0
    assert lm.history == []


def test_rule_verdict_alone_never_calls_the_lm():
    rater = Autorater(judge_lm())
    assert rater.rule_verdict(QUESTION, "Novak Djokovic", "Djokovic won it.") is None
    assert rater.rule_verdict(QUESTION, "Novak Djokovic", "Novak Djokovic").correct is True
    assert rater.calls == 0


# --- the LM judge ------------------------------------------------------------------------------


@pytest.mark.parametrize("decision", ["TRUE", "FALSE"])
def test_judge_decides_what_the_rules_leave(decision):
    lm = judge_lm(verdict(decision, "The surname names him."))
    rater = Autorater(lm)
    result = rater.judge(QUESTION, "Novak Djokovic", "Djokovic won it.")
    assert result == Judgement(decision == "TRUE", "judge", "The surname names him.")
    assert not result.by_rule and result.p_true is None  # DummyLM gives no logprobs
    assert rater.calls == 1 and rater.errors == 0 and len(lm.history) == 1
    prompt = lm.history[0]["messages"][-1]["content"]
    assert "Novak Djokovic" in prompt and "Djokovic won it." in prompt
    system = lm.history[0]["messages"][0]["content"]
    assert "ground-truth answer is present" in system and "substance" in system


def test_without_rules_every_answer_is_judged():
    lm = judge_lm(verdict("TRUE"))
    rater = Autorater(lm, use_rules=False)
    assert rater.judge(QUESTION, "Novak Djokovic", "Novak Djokovic").method == "judge"
    assert rater.calls == 1


def test_judge_lm_is_used_instead_of_the_configured_lm():
    program_lm = judge_lm()
    judge = judge_lm(verdict("TRUE"))
    with dspy.context(lm=program_lm):
        result = Autorater(judge).judge(QUESTION, "Novak Djokovic", "Djokovic won it.")
    assert result.correct is True
    assert program_lm.history == [] and len(judge.history) == 1


def test_without_a_judge_lm_the_configured_lm_judges():
    configured = judge_lm(verdict("FALSE"))
    with dspy.context(lm=configured):
        result = Autorater().judge(QUESTION, "Novak Djokovic", "Nadal beat Djokovic.")
    assert result.correct is False and len(configured.history) == 1


@pytest.mark.parametrize(
    "reply",
    [{"explanation": "I cannot tell."}, verdict("MAYBE"), {"answer": "TRUE"}],
    ids=["no-decision", "maybe", "wrong-fields"],
)
def test_unparseable_judge_reply_is_a_judge_error(reply):
    lm = judge_lm(reply, reply)  # the ChatAdapter try and its JSONAdapter retry
    rater = Autorater(lm)
    result = rater.judge(QUESTION, "Novak Djokovic", "Djokovic won it.")
    assert result.correct is None and result.error and result.method == "judge_error"
    assert result.explanation
    assert rater.errors == 1 and rater.calls == 1


def test_unknown_decision_mode_or_threshold_is_refused():
    with pytest.raises(ValueError, match="decide_by='ballot'"):
        Autorater(decide_by="ballot")
    with pytest.raises(ValueError, match="threshold=1.5"):
        Autorater(threshold=1.5)


# --- P(TRUE) from the embedded engine's log-probabilities --------------------------------------


def scripted_judge(fake_llama_cpp, gguf, decision="TRUE", odds=None):
    """The embedded engine over a fake that writes a judge reply with ``odds`` at the decision."""

    def build(**kwargs):
        llama = ScriptedLlama(judge_pieces(decision), {4: odds} if odds else None)
        fake_llama_cpp.instances.append(llama)
        return llama

    fake_llama_cpp.Llama = build
    return make_lm(f"local:{gguf}", cache=False)


def test_the_judge_reads_p_true_at_the_decision_token(fake_llama_cpp, gguf):
    lm = scripted_judge(fake_llama_cpp, gguf, "TRUE", {"TRUE": 0.6, "FALSE": 0.3, "True": 0.1})
    rater = Autorater(lm)
    result = rater.judge(QUESTION, "Novak Djokovic", "Djokovic won it.")
    assert result.correct is True and result.method == "judge"
    assert result.p_true == pytest.approx(0.7)
    _, kwargs = fake_llama_cpp.instances[0].calls[-1]
    assert kwargs["logits_processor"]  # logprobs were asked for


def test_deciding_by_p_true_overrides_the_written_decision(fake_llama_cpp, gguf):
    lm = scripted_judge(fake_llama_cpp, gguf, "TRUE", {"TRUE": 0.55, "FALSE": 0.45})
    strict = Autorater(lm, decide_by="p_true", threshold=0.6)
    result = strict.judge(QUESTION, "Novak Djokovic", "Djokovic won it.")
    assert result.correct is False and result.p_true == pytest.approx(0.55)
    lenient = Autorater(lm, decide_by="p_true", threshold=0.5)
    assert lenient.judge(QUESTION, "Novak Djokovic", "Djokovic won it.").correct is True


def test_without_logprobs_p_true_mode_falls_back_to_the_text():
    lm = judge_lm(verdict("TRUE"))
    result = Autorater(lm, decide_by="p_true", threshold=0.99).judge(QUESTION, "A", "B")
    assert result.correct is True and result.p_true is None


def test_logprobs_can_be_turned_off(fake_llama_cpp, gguf):
    lm = scripted_judge(fake_llama_cpp, gguf, "FALSE")
    result = Autorater(lm, logprobs=False).judge(QUESTION, "Novak Djokovic", "Djokovic won it.")
    assert result.correct is False and result.p_true is None
    _, kwargs = fake_llama_cpp.instances[0].calls[-1]
    assert "logits_processor" not in kwargs


# --- reading P(TRUE) ---------------------------------------------------------------------------


def entry(token, logprob=0.0, **alternatives):
    top = [{"token": t, "logprob": math.log(p)} for t, p in alternatives.items()]
    return {"token": token, "logprob": logprob, "top_logprobs": top}


def chat(decision_entry, explanation="TRUE to the facts, so"):
    return {
        "content": [
            entry("[[ ## explanation ## ]]\n"),
            entry(explanation),
            entry("\n\n[[ ## decision ## ]]"),
            entry("\n"),
            decision_entry,
            entry("\n\n[[ ## completed ## ]]"),
        ]
    }


def test_decision_probability_in_the_chat_format():
    lp = chat(entry("FALSE", math.log(0.8), FALSE=0.8, TRUE=0.1, T=0.05, maybe=0.05))
    # The explanation's own "TRUE" is not the decision.
    assert decision_probability(lp) == pytest.approx(0.15 / 0.95)


def test_decision_probability_in_json_and_bare_text():
    json_reply = {
        "content": [
            entry('{"explanation": "same", "decision": "'),
            entry("TRUE", math.log(0.9), TRUE=0.9, FALSE=0.1),
            entry('"}'),
        ]
    }
    assert decision_probability(json_reply) == pytest.approx(0.9)
    bare = {"content": [entry("It matches. "), entry(" True", math.log(0.5), true=0.2, FALSE=0.3)]}
    assert decision_probability(bare) == pytest.approx(0.7)


def test_decision_probability_is_none_without_a_decision():
    assert decision_probability(None) is None
    assert decision_probability({"content": []}) is None
    assert decision_probability({"content": [entry("no verdict here")]}) is None
    assert decision_probability(chat(entry("MAYBE", maybe=1.0))) is None


# --- metric use, sharing, threads --------------------------------------------------------------


def test_metric_returns_float_or_bool_with_trace():
    example = dspy.Example(question=QUESTION, answer="Novak Djokovic").with_inputs("question")
    right = dspy.Prediction(answer="Novak Djokovic")
    wrong = dspy.Prediction(answer="Nadal beat Djokovic.")
    rater = Autorater(judge_lm(verdict("FALSE"), verdict("FALSE")))
    assert rater(example, right) == 1.0 and isinstance(rater(example, right), float)
    assert rater(example, right, trace=[]) is True
    assert rater(example, wrong) == 0.0
    assert rater(example, wrong, trace=[]) is False
    assert rater.calls == 2  # the right answer never reached the LM


def test_metric_counts_a_judge_error_as_not_correct():
    example = dspy.Example(question=QUESTION, answer="Novak Djokovic").with_inputs("question")
    pred = dspy.Prediction(answer="Djokovic won it.")
    bad = verdict("MAYBE")
    rater = Autorater(judge_lm(bad, bad, bad, bad))
    assert rater(example, pred) == 0.0
    assert rater(example, pred, trace=[]) is False
    assert rater.errors == 2


def test_metric_with_a_prediction_lacking_an_answer():
    example = dspy.Example(question=QUESTION, answer="Novak Djokovic")
    assert Autorater(judge_lm())(example, dspy.Prediction()) == 0.0


def test_autorater_is_shared_not_copied():
    rater = Autorater(judge_lm())
    assert copy.deepcopy(rater) is rater


def test_counts_stay_right_across_threads():
    lm = DummyLM({"Djokovic won it.": verdict("TRUE")})
    rater = Autorater(lm)
    results = []

    def work():
        for response in ("Djokovic won it.", "Novak Djokovic", "I cannot determine it."):
            results.append(rater.judge(QUESTION, "Novak Djokovic", response))

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 18 and rater.calls == 6 == len(lm.history)
    assert method_counts([r.method for r in results]) == {"exact": 6, "judge": 6, "refusal": 6}


def test_methods_are_rules_or_the_judge():
    assert all(is_rule_method(rule) for rule in RULES)
    assert not any(is_rule_method(method) for method in JUDGE_METHODS)
    assert is_rule_method("contains")  # an old run's deterministic match
    assert not is_rule_method(None)


# --- the rules+extract protocol: the LM extracts, the rules compare ------------------------------

STEP = (
    "Djokovic reached the final after defeating Nadal; the title then went to Stefanos Tsitsipas."
)


def test_extract_then_compare_decides_with_the_rules():
    from frames_dspy.judge.rules import decide

    assert decide(QUESTION, "Novak Djokovic", STEP) is None  # the rules alone abstain
    lm = judge_lm({"answer": "Stefanos Tsitsipas"})
    rater = Autorater(lm, protocol="rules+extract")
    result = rater.judge(QUESTION, "Novak Djokovic", STEP)
    assert (result.correct, result.method) == (False, "extract")
    assert "'Stefanos Tsitsipas'" in result.explanation and "different_name" in result.explanation
    assert not result.by_rule and rater.calls == 1 and len(lm.history) == 1


def test_extract_finding_no_answer_is_false():
    rater = Autorater(judge_lm({"answer": "none"}), protocol="rules+extract")
    result = rater.judge(QUESTION, "Novak Djokovic", STEP)
    assert (result.correct, result.method) == (False, "extract_none")


@pytest.mark.parametrize(
    "extracted",
    ["Roger Federer", "Djokovic reached the final"],  # not in the response; rules cannot tell
)
def test_extract_falls_back_to_the_verdict(extracted):
    lm = judge_lm({"answer": extracted}, verdict("TRUE"))
    rater = Autorater(lm, protocol="rules+extract")
    result = rater.judge(QUESTION, "Novak Djokovic", STEP)
    assert (result.correct, result.method) == (True, "judge") and rater.calls == 2


def test_the_paper_protocol_asks_the_lm_about_everything():
    lm = judge_lm(verdict("FALSE"))
    rater = Autorater(lm, protocol="lm")
    result = rater.judge(QUESTION, "Novak Djokovic", "It was Novak Djokovic.")
    assert (result.correct, result.method) == (False, "judge")
    assert rater.judge(QUESTION, "Novak Djokovic", "  ").method == "empty"


def test_an_unknown_protocol_is_refused():
    with pytest.raises(ValueError, match="protocol='ballot'; choose one of rules"):
        Autorater(protocol="ballot")


def test_an_extracted_number_is_widened_to_its_unit():
    question = "By how many years does the Orlo charter predate the Vessa charter?"
    response = "Counting from both founding dates, the charter is older by 7 decades."
    lm = judge_lm({"answer": "7"})
    result = Autorater(lm, protocol="rules+extract").judge(question, "7 years", response)
    assert (result.correct, result.method) == (False, "extract")
    assert "'7 decades'" in result.explanation


def test_an_extracted_span_is_not_judged_for_what_it_leaves_out():
    question = "When did the Tarn Tower open, and how many years after the great storm?"
    gold = "It opened on March 3rd, 2009, 13 years after the great storm."
    response = "The tower opened on 3 March 2009 - which came thirteen years after the storm."
    lm = judge_lm({"answer": "3 March 2009"}, verdict("TRUE"))
    result = Autorater(lm, protocol="rules+extract").judge(question, gold, response)
    assert (result.correct, result.method) == (True, "judge")
