"""Tests for frames_dspy.judge.names: a response that carries no form of the gold's name."""

from __future__ import annotations

import pytest

from frames_dspy.judge.names import gold_name_words, names_another, same_name_word
from frames_dspy.judge.rules import decide


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        ("Which fast-food chain?", "Kentucky Fried Chicken", "KFC."),
        ("Which agency?", "NASA", "The National Aeronautics and Space Administration."),
        ("Which prime minister?", "R. B. Bennett", "Richard Bedford Bennett."),
        ("Which pope?", "St. Sylvester I, whose Latin name was Silvester", "Pope Silvester I."),
        ("Which gymnast?", "Svetlana Boginskaya", "Svetlana Boguinskaya."),
        ("Who was the queen?", "Violant of Castile", "Violante of Castile."),
        ("Which team?", "The Chicago Bulls", "That's the Bulls."),
        ("Which captain?", "Steve Yzerman", "Yzerman."),
        ("Which city?", "Prague, Czech Republic", "Prague"),
        ("Who created the show?", "David Crane and Marta Kauffman", "Crane and Kauffman."),
        # A sentence gold whose numbers the response gives is left to the other rules.
        ("How old were the two architects?", "Richmond Shreve was 52 and William Lamb was 46.",
         "52 and 46."),
    ],
)  # fmt: skip
def test_aliases_spellings_and_initials_are_the_same_name(question, gold, response):
    assert names_another(question, gold, response) is None


@pytest.mark.parametrize(
    ("question", "gold", "response", "names"),
    [
        ("Which fast-food chain?", "Kentucky Fried Chicken", "Pizza Hut.",
         "kentucky fried chicken"),
        ("Who won the final?", "Novak Djokovic", "It was Rafael Nadal.", "novak djokovic"),
        ("Which element, and after whom is it named?",
         "Mendelevium is named after Dmitri Mendeleev.",
         "The element is einsteinium, which was named after Albert Einstein.",
         "mendelevium dmitri mendeleev"),
        # A nickname that shares no word with the name is not recognised (a known limit).
        ("Who won the final?", "Novak Djokovic", "Nole.", "novak djokovic"),
    ],
)  # fmt: skip
def test_another_entity_is_named(question, gold, response, names):
    assert names_another(question, gold, response) == names


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        ("How many?", "83", "85"),
        ("When was it?", "March 3, 1999", "In June 2001."),
        ("Was he alive then?", "Yes", "No."),
        ("Is the capital Paris or Lyon?", "Paris", "Lyon"),  # the question names the gold
        ("What do the birds eat?", "raspberries", "cannabis seeds"),  # no capitalised name
    ],
)
def test_nothing_to_check(question, gold, response):
    assert names_another(question, gold, response) is None


def test_name_words_leave_out_the_question_and_title_words():
    assert gold_name_words("Pope Gregory the Great", "Which pope?") == ["gregory", "great"]
    assert gold_name_words("The Story of Doctor Dolittle", "Which Story?") == [
        "doctor",
        "dolittle",
    ]
    assert gold_name_words("1999") == []


def test_same_name_word():
    assert same_name_word("violant", "violante") and same_name_word("boginskaya", "boguinskaya")
    assert same_name_word("sylvester", "silvester") and same_name_word("bulls", "bull")
    assert not same_name_word("gutsu", "gupta") and not same_name_word("ann", "anna")
    assert not same_name_word("bucks", "bulls") and not same_name_word("valls", "walls")


def test_the_rule_decides_only_what_the_other_rules_leave():
    assert decide("Which chain?", "Kentucky Fried Chicken", "Pizza Hut.") == (
        decide("Which chain?", "Kentucky Fried Chicken", "Pizza Hut.")
    )
    verdict = decide("Which chain?", "Kentucky Fried Chicken", "Pizza Hut.")
    assert verdict.correct is False and verdict.rule == "different_name"
    assert decide("Which chain?", "Kentucky Fried Chicken", "KFC.") is None  # the judge decides
    refusal = decide("Which chain?", "Kentucky Fried Chicken", "I cannot determine the chain.")
    assert refusal.rule == "refusal"
