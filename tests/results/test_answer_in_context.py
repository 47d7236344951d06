"""Tests for frames_dspy.results.answer_in_context: the gold answer looked for in the context."""

from __future__ import annotations

import pytest

from frames_dspy.results.answer_in_context import answer_in_context


@pytest.mark.parametrize(
    ("question", "gold", "context", "expected"),
    [
        # names: a run of words, accents and case folded as the judge folds them
        ("Who won?", "Novak Djokovic", "[1] Tennis\nNovak Djoković won the final.", True),
        ("Who won?", "Novak Djokovic", "Novak won; Djokovic lost.", False),
        ("Who won?", "Novak Djokovic", "Rafael Nadal won.", False),
        # lists: every part must be there
        ("Name them", "Naruto Uzumaki, Minato Namikaze and Jiraiya.",
         "Naruto Uzumaki and Jiraiya met Minato Namikaze.", True),
        ("Name them", "Naruto Uzumaki, Minato Namikaze and Jiraiya.",
         "Naruto Uzumaki and Jiraiya.", False),
        # quantities in another spelling, scale or unit
        ("How many people live there?", "2.5 million", "The population is 2,500,000.", True),
        ("How many people live there?", "2.5 million", "The population is 3,500,000.", False),
        ("How tall is it?", "10 km", "It rises 10,000 metres above the plain.", True),
        # a year inside a full date still counts; a day number is no quantity
        ("In what year was it founded?", "1592", "It was founded on 3 March 1592.", True),
        ("How many were there?", "3", "It opened on 3 March 1592.", False),
        # dates: day and month, and the year when the gold has one
        ("When was he born?", "August 25th, 1972", "Joe Wright (born 25 August 1972)", True),
        ("When was he born?", "August 25th, 1972", "Joe Wright (born 25 August 1971)", False),
    ],
)  # fmt: skip
def test_finds_the_gold_in_the_forms_the_judge_reads(question, gold, context, expected):
    assert answer_in_context(question, gold, context) is expected


def test_cannot_tell_without_context_or_for_yes_no_and_sentence_golds():
    assert answer_in_context("Who won?", "Novak Djokovic", None) is None
    assert answer_in_context("Is it so?", "Yes", "yes, it is") is None
    sentence = "He was the first to do so because the rules changed after the war ended."
    assert answer_in_context("Why was he first?", sentence, sentence) is None
    assert answer_in_context("Who won?", "  ", "anything") is None


def test_an_empty_context_has_nothing_in_it():
    assert answer_in_context("Who won?", "Novak Djokovic", "") is False
