"""Tests for frames_dspy.judge.names: a response that carries no form of the gold's name."""

from __future__ import annotations

import pytest

from frames_dspy.judge.names import gold_name_words, names_another, same_name_word
from frames_dspy.judge.rules import decide


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        ("Which food chain?", "Grand Union Bakery", "GUB."),
        ("Which agency?", "NASA", "The National Aeronautics and Space Administration."),
        ("Which prime minister?", "J. H. Dalton", "John Henry Dalton."),
        ("Which pope?", "St. Aldric II, whose Latin name was Aldrik", "Pope Aldrik II."),
        ("Which gymnast?", "Svetlana Boginskaya", "Svetlana Boguinskaya."),
        ("Who was the queen?", "Violant of Castile", "Violante of Castile."),
        ("Which team?", "The Dayton Herons", "That's the Herons."),
        ("Which captain?", "Steve Yzerman", "Yzerman."),
        ("Which city?", "Prague, Czech Republic", "Prague"),
        ("Who created the show?", "Ivan Stroud and Nora Pell", "Stroud and Pell."),
        # A sentence gold whose numbers the response gives is left to the other rules.
        ("How old were the two architects?", "Edgar Ames was 61 and Walter Bell was 47.",
         "61 and 47."),
    ],
)  # fmt: skip
def test_aliases_spellings_and_initials_are_the_same_name(question, gold, response):
    assert names_another(question, gold, response) is None


@pytest.mark.parametrize(
    ("question", "gold", "response", "names"),
    [
        ("Which food chain?", "Grand Union Bakery", "Taco Barn.",
         "grand union bakery"),
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
        ("Is the capital Paris or Nantes?", "Paris", "Nantes"),  # the question names the gold
        ("What do the birds eat?", "raspberries", "cannabis seeds"),  # no capitalised name
    ],
)
def test_nothing_to_check(question, gold, response):
    assert names_another(question, gold, response) is None


def test_name_words_leave_out_the_question_and_title_words():
    assert gold_name_words("Pope Gregory the Great", "Which pope?") == ["gregory", "great"]
    assert gold_name_words("The Tale of Doctor Wendle", "Which Tale?") == [
        "doctor",
        "wendle",
    ]
    assert gold_name_words("1999") == []


def test_same_name_word():
    assert same_name_word("violant", "violante") and same_name_word("boginskaya", "boguinskaya")
    assert same_name_word("aldric", "aldrik") and same_name_word("herons", "heron")
    assert not same_name_word("gutsu", "gupta") and not same_name_word("ann", "anna")
    assert not same_name_word("hawks", "herons") and not same_name_word("bart", "hart")


def test_the_rule_decides_only_what_the_other_rules_leave():
    assert decide("Which chain?", "Grand Union Bakery", "Taco Barn.") == (
        decide("Which chain?", "Grand Union Bakery", "Taco Barn.")
    )
    verdict = decide("Which chain?", "Grand Union Bakery", "Taco Barn.")
    assert verdict.correct is False and verdict.rule == "different_name"
    assert decide("Which chain?", "Grand Union Bakery", "GUB.") is None  # the judge decides
    refusal = decide("Which chain?", "Grand Union Bakery", "I cannot determine the chain.")
    assert refusal.rule == "refusal"
