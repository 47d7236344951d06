"""Reading FRAMES gold answers: what kind of answer each is and its core."""

from __future__ import annotations

from decimal import Decimal

import pytest

from frames_dspy.judge.gold_forms import analyse_gold, is_multi_part_question, question_asks
from frames_dspy.judge.place_names import is_place_name


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("How old was Akira Toriyama when Pokemon Diamond and Pearl was released?", "quantity"),
        ("If the person who played the joker had children, how old will they be?", "quantity"),
        ("In what year was the former South Korean prime minister born?", "year"),
        ("What is the birth year of the American President?", "year"),
        ("One of her novels was adapted in 2005. When was the director born?", "date"),
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
        ("This was Mesut Ozil.", "Which football player...?", ("mesut", "ozil")),
        ("The Weeknd", "Tell me the singer.", ("weeknd",)),
        ("Prague, Czech Republic", "Which major city in Europe?", ("prague",)),
        ("Starman (1984)", "Which film?", ("starman",)),
        ("St. Sylvester I, whose Latin name was Silvester", "Which Pope?",
         ("st", "sylvester", "i")),
        ("The largest city of the 9th largest country in Europe is Warsaw.",
         "As of August 1, 2024, what is the largest city of the 9th largest country by land area "
         "in Europe?", ("warsaw",)),
        ("Didier Drogba scored 20 goals in the the 2006-2007 English Premier League season and "
         "won the  'Chelsea Players Player of the Year' award in 2007.",
         "Which player scored 20 goals in the English Premier League in the 2006-2007 season and "
         "won 'Chelsea Players Player of the Year' award in 2007?", ("didier", "drogba")),
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
        ("Miley Cyrus and Billy Ray Cyrus", [("miley", "cyrus"), ("billy", "ray", "cyrus")]),
        ("Naruto Uzumaki, Minato Namikaze and Jiraiya.", [("naruto", "uzumaki"),
         ("minato", "namikaze"), ("jiraiya",)]),
        ("Bowens, Thomas, & Madison ", [("bowens",), ("thomas",), ("madison",)]),
        ("Sydney, Australia, and Athens, Greece", [("sydney",), ("athens",)]),
        ("Cleveland Indians, New York Yankees, Texas Rangers, Toronto Blue Jays",
         [("cleveland", "indians"), ("new", "york", "yankees"), ("texas", "rangers"),
          ("toronto", "blue", "jays")]),
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
        ("Bill Clinton was president beginning in 1993, the same year that Mary Elizabeth Butt "
         "passed away.", "Who was the president of the USA when the wife of the CEO died?"),
    ],
)  # fmt: skip
def test_a_number_beside_other_content_is_no_quantity_gold(gold, question):
    assert analyse_gold(gold, question).kind != "quantity"


def test_date_and_yes_no_golds():
    form = analyse_gold("Joe Wright was born on August 25th, 1972.", "When was he born?")
    assert form.kind == "date" and (form.date.year, form.date.month, form.date.day) == (1972, 8, 25)
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
