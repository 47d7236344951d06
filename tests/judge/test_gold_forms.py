"""Reading FRAMES gold answers: what kind of answer each is and its core."""

from __future__ import annotations

from decimal import Decimal

import pytest

from frames_dspy.judge.gold_forms import analyse_gold, is_multi_part_question, question_asks
from frames_dspy.judge.place_names import is_place_name


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("How old was Akira Toriyama when Starfall Quest II was released?", "quantity"),
        ("If the person who played the joker had children, how old will they be?", "quantity"),
        ("In what year was the former South Korean prime minister born?", "year"),
        ("In which year was the senator born?", "year"),
        ("Her novel was filmed in 2005; when was its director born?", "date"),
        ("What day of the year do they all have in common?", "date"),
        ("Who was the president of the USA when the wife of the CEO died?", "entity"),
        ("As of August 3, 2024, what is the capital of the 7th largest country in Asia?", "entity"),
        ("Was the founder still alive?", "unknown"),
    ],
)
def test_question_asks(question, asks):
    assert question_asks(question) == asks


def test_multi_part_questions():
    assert is_multi_part_question("Which finale ran the longest and by how much?")
    assert is_multi_part_question("How old was he? If he was already deceased, how long?")
    assert not is_multi_part_question("Which player scored 20 goals and won the award?")


@pytest.mark.parametrize(
    ("gold", "question", "main"),
    [
        ("This was Lena Marsh.", "Which football player...?", ("lena", "marsh")),
        ("The Nightlarks", "Tell me the singer.", ("nightlarks",)),
        ("Prague, Czech Republic", "Which major city in Europe?", ("prague",)),
        ("Starman (1984)", "Which film?", ("starman",)),
        ("St. Aldric II, whose Latin name was Aldrik", "Which Pope?",
         ("st", "aldric", "ii")),
        ("The largest city of the 9th largest country in Europe is Warsaw.",
         "As of 2020, what is the largest city of the 9th largest country by land area "
         "in Europe?", ("warsaw",)),
        ("Rosa Quint netted 14 times in the the 1998-1999 Northern League and was "
         "named  Riverside's best player.",
         "Which striker netted 14 times in the Northern League during 1998-1999 and was "
         "named Riverside's best player?", ("rosa", "quint")),
    ],
)  # fmt: skip
def test_name_golds_and_their_core(gold, question, main):
    form = analyse_gold(gold, question)
    assert form.kind == "name" and form.parts[0].main == main


def test_place_qualifiers_are_optional_parts():
    form = analyse_gold("Calgary, Alberta, Canada", "Which city?")
    assert form.parts[0].main == ("calgary",)
    assert set(form.parts[0].qualifiers) == {("alberta",), ("canada",)}


@pytest.mark.parametrize(
    ("gold", "parts"),
    [
        ("Ada Lind and Bram Lind", [("ada", "lind"), ("bram", "lind")]),
        ("Naruto Uzumaki, Minato Namikaze and Jiraiya.", [("naruto", "uzumaki"),
         ("minato", "namikaze"), ("jiraiya",)]),
        ("Bowens, Thomas, & Madison ", [("bowens",), ("thomas",), ("madison",)]),
        ("Sydney, Australia, and Athens, Greece", [("sydney",), ("athens",)]),
        ("Cleveland Indians, New York Yankees, Texas Rangers, Albany Blue Herons",
         [("cleveland", "indians"), ("new", "york", "yankees"), ("texas", "rangers"),
          ("albany", "blue", "herons")]),
    ],
)  # fmt: skip
def test_list_golds(gold, parts):
    form = analyse_gold(gold, "Which ones?")
    assert form.kind == "list" and [p.main for p in form.parts] == parts


@pytest.mark.parametrize(
    "gold",
    [
        "Kool & the Gang",  # one band
        "Egg and tomato.",  # one dish, not two names
        "Edward Heath, September 1970",  # two comma parts: a name and its context
        "Tick, Tick... Boom!",
        "The Life & Casualty Tower",
    ],
)
def test_not_lists(gold):
    assert analyse_gold(gold, "What is it?").kind != "list"


@pytest.mark.parametrize(
    ("gold", "question", "value", "unit", "is_year"),
    [
        ("37th", "What rank?", "37", None, False),
        ("Two million.", "What is the population?", "2000000", None, False),
        ("2,851 Passengers", "What was the daily average passenger count?", "2851", None, False),
        ("1766", "What year was the auction house founded?", "1766", None, True),
        ("1135", "What is the total number of pages?", "1135", None, False),
        ("Akira Toriyama was 52.", "How old was Akira Toriyama when it was released?", "52", None,
         False),
        ("Donnie Darko grossed $517,375 in its initial run at the box office. ",
         "How much did the film gross in its initial run at the box office?", "517375", "USD",
         False),
    ],
)  # fmt: skip
def test_quantity_golds(gold, question, value, unit, is_year):
    form = analyse_gold(gold, question)
    assert form.kind == "quantity"
    got = (form.quantity.value, form.quantity.unit, form.is_year)
    assert got == (Decimal(value), unit, is_year)


@pytest.mark.parametrize(
    ("gold", "question"),
    [
        ("3, Russia, Nicaragua, and Syria.", "How many of them have active volcanoes?"),
        ("Season 36, Double Agents", "Which season and what was its theme?"),
        ("Ned Harlow was president beginning in 1993, the same year that Mary Elizabeth Butt "
         "passed away.", "Who was the president of the USA when the wife of the CEO died?"),
    ],
)  # fmt: skip
def test_a_number_beside_other_content_is_no_quantity_gold(gold, question):
    assert analyse_gold(gold, question).kind != "quantity"


def test_date_and_yes_no_golds():
    form = analyse_gold("Tom Avery was born on March 3rd, 1958.", "When was he born?")
    assert form.kind == "date" and (form.date.year, form.date.month, form.date.day) == (1958, 3, 3)
    assert analyse_gold("Yes", "Was he alive?").polarity == "yes"
    with_name = analyse_gold("Yes, London", "Are there any, and which cities are they?")
    assert with_name.kind == "yes_no" and with_name.parts[0].main == ("london",)
    assert analyse_gold("No one, he was the youngest.", "Who was older?").kind != "yes_no"


def test_golds_with_two_new_names_have_no_core():
    gold = "Mendelevium is named after Dmitri Mendeleev."
    question = "I have an element in mind; identify the person it was named after."
    assert analyse_gold(gold, question).kind == "sentence"


def test_place_names():
    assert is_place_name("Czech Republic") and is_place_name("the Netherlands")
    assert is_place_name("CA") and not is_place_name("ca") and not is_place_name("in")
    assert not is_place_name("Prague")
