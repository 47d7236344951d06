"""Reading numbers, quantities and dates as FRAMES gold answers and responses write them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from frames_dspy.judge.answer_forms import compare_quantities, fold, parse_dates, parse_quantities
from frames_dspy.judge.units import unit_of


def one(text: str):
    found = [q for q in parse_quantities(text) if not q.weak]
    assert len(found) == 1, found
    return found[0]


def test_fold_removes_accents_and_plain_quotes():
    assert fold("Léna’s “Café”—1990–2005") == 'Lena\'s "Cafe" - 1990-2005'


@pytest.mark.parametrize(
    ("text", "value", "unit"),
    [
        ("84,512", "84512", None),
        ("Two million.", "2000000", None),
        ("Thirty-one years.", "31", "year"),
        ("twenty-first", "21", None),
        ("one hundred eighty-four billion nine hundred fifty-nine million four hundred forty "
         "thousand.", "184959440000", None),
        ("$517.375 million", "517375000", "USD"),
        ("517,375 US dollars", "517375", "USD"),
        ("£559.8 million", "559800000", "GBP"),
        ("$183m", "183000000", "USD"),
        ("75.68%", "75.68", "percent"),
        ("10.30 per cent", "10.30", "percent"),
        ("110,000cm.", "110000", "cm"),
        ("34.30 m/s", "34.30", "m/s"),
        ("75.5 cubic ft/s", "75.5", "cubic ft/s"),
        ("-63C", "-63", "celsius"),
        ("a dozen", "12", None),
        ("He won twice", "2", None),
        ("a .298 lifetime batting average", "0.298", None),
    ],
)  # fmt: skip
def test_parse_quantities(text, value, unit):
    q = one(text)
    assert q.value == Decimal(value) and q.unit == unit


def test_ordinals_years_and_roughness_are_marked():
    assert one("37th").ordinal and one("thirty-seventh").ordinal
    assert one("born in 1939").year_like and not one("1,946 people").year_like
    assert one("about 31.2 times").roughly and one("more than 30 goals").bound


def test_lone_one_is_weak_and_words_in_names_are_not_numbers():
    assert [q.weak for q in parse_quantities("one of the three")] == [True, False]
    assert parse_quantities("the 1980s, the 9K38 Igla and Vitamin B12") == []


def test_compound_durations_and_clock_times_are_one_quantity():
    (compound,) = parse_quantities("26 years, 8 months, and 26 days.")
    assert compound.parts == (("year", 26), ("month", 8), ("day", 26))
    (clock,) = parse_quantities("5:31")
    assert clock.clock and clock.value == 331


def test_dates_inside_text_are_skipped_as_quantities():
    text = "He was born on 3 March 1958 and died aged 50."
    dates = parse_dates(text)
    values = [q.value for q in parse_quantities(text, skip=[(d.start, d.end) for d in dates])]
    assert values == [50]


@pytest.mark.parametrize(
    ("gold", "response", "relation"),
    [
        ("Two million.", "Approximately 2,000,000 people", "same"),
        ("5 minutes and 31 seconds", "5:31", "same"),
        ("5 minutes and 31 seconds", "331 seconds", "same"),
        ("5 minutes and 31 seconds", "5 minutes 30 seconds", "different"),
        ("Twelve Years", "144 months", "same"),
        ("110,000cm.", "1.1 km", "same"),
        ("31 years", "Thirty-one.", "same"),
        ("7 years", "7 decades", "unit_or_scale"),
        ("3827 days", "3,827 hours", "unit_or_scale"),
        ("$517,375", "$517.375 million", "unit_or_scale"),
        ("Two million.", "two thousand", "unit_or_scale"),
        ("222 ft", "222 m", "unit_or_scale"),
        ("222 ft", "67.7 m", "incomparable"),
        ("31.5", "31.2", "different"),
        ("31.5", "about 31", "close"),
        ("84,512", "85,000", "close"),
        ("7 years", "7 years and 2 months", "close"),
        ("1939", "1938", "different"),
        ("7 years", "70 years", "different"),
    ],
)
def test_compare_quantities(gold, response, relation):
    assert compare_quantities(one(gold), one(response)) == relation


@pytest.mark.parametrize(
    ("text", "ymd"),
    [
        ("November 5, 2011", (2011, 11, 5)),
        ("5th November 2011", (2011, 11, 5)),
        ("the 12th of June, 1994", (1994, 6, 12)),
        ("Tom Avery was born on March 3rd, 1958.", (1958, 3, 3)),
        ("1990-05-12", (1990, 5, 12)),
        ("13/05/1990", (1990, 5, 13)),
        ("05/13/1990", (1990, 5, 13)),
        ("They are all born on June 20.", (None, 6, 20)),
        ("May 1990", (1990, 5, None)),
        ("They were all born in June.", (None, 6, None)),
    ],
)
def test_parse_dates(text, ymd):
    (d,) = parse_dates(text)
    assert (d.year, d.month, d.day) == ymd


def test_ambiguous_slashed_dates_and_lowercase_may_are_not_dates():
    assert parse_dates("12/05/1990") == []
    assert parse_dates("it may be 12 or so") == []


def test_unit_spellings():
    assert unit_of("kilometres") == unit_of("km") == "km"
    assert unit_of("Years") == "year" and unit_of("furlongs") is None
