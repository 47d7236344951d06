"""The gold's vital parts: what a response leaves out, and a gold named on the way elsewhere.

Every question, gold and response here is invented for these tests (no labelled item's words;
``python -m benchmarks.judge_leaks`` checks).
"""

from __future__ import annotations

import pytest

from frames_dspy.judge.coverage import range_quantities, vital_parts
from frames_dspy.judge.rules import decide
from frames_dspy.judge.steps.moved_on import moved_on
from frames_dspy.judge.steps.uncovered import uncovered

Q_FLAG = "How many colours does the flag of Veltria have, and what are they?"
Q_PRIZE = "Who won the Harlow Prize first, and in what year?"
Q_TOWER = "On what date did the Tarn Tower open? How many years after the great storm was that?"
Q_KEEPER = "What is the full name of the first keeper of the Orlo lighthouse?"
Q_RIVERS = "Which rivers meet at Dunmore?"
Q_SONG = "Which song led the Brell chart in the week the ferry sank?"
Q_KEY = "In what key is the third Vell sonata written?"
Q_FERN = "How long are the leaves of the Ostra fern?"
Q_DAM = "Which company built the Kell dam?"
Q_POPULATION = "What was the population of the Vessa district in 2011?"
Q_SEAT = "Which town was the seat of the Orlan council on the day its founder died?"
Q_MURAL = "Who painted the mural in the old ferry terminal?"


@pytest.mark.parametrize(
    ("question", "gold", "response", "missing"),
    [
        (Q_FLAG, "3 - green, gold, black", "Three colours.", ["green", "gold", "black"]),
        (Q_PRIZE, "Ada Quill, 1911", "Ada Quill won it first.", ["1911"]),
        (
            Q_TOWER,
            "It opened on March 3rd, 2009. That was 13 years after the storm.",
            "It opened in 2009, 13 years after the storm.",
            ["March 3rd, 2009"],
        ),
        (Q_KEEPER, "Bertil Hanska", "His name was Bertil.", ["Bertil Hanska"]),
        (Q_RIVERS, "Avon, Tane and Orrin", "The Avon and the Tane.", ["Orrin"]),
        (Q_KEY, "C major", "It is in C minor.", ["C major"]),
        ("Is there a town larger than Vessa, and which is it?", "Yes, Tessby", "Yes.", ["Tessby"]),
    ],
)
def test_a_vital_part_left_out(question, gold, response, missing):
    assert uncovered(question, gold, response) == missing


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        (Q_FLAG, "3 - green, gold, black", "Three: green, gold and black."),
        (Q_PRIZE, "Ada Quill, 1911", "Ada Quill, in 1911."),
        (
            Q_TOWER,
            "It opened on March 3rd, 2009. That was 13 years after the storm.",
            "It opened on 3 March 2009, thirteen years after the storm.",
        ),
        (
            Q_TOWER,
            "It opened on March 3rd, 2009. That was 13 years after the great storm.",
            "it opened on march 3, 2009, 13 years after the storm.",
        ),
        ("Is there a town in Orlo larger than Vessa?", "Yes, Tessby", "Yes."),
        ("Did the Orlo team win more than twice?", "Yes, 3 times", "Yes, they did."),
        (Q_KEEPER, "Bertil Hanska", "Hanska."),
        # A first word alone is too little only for a person ("who", "name").
        ("Which club won the Orlo cup in 1990?", "Vessa Football Club", "Vessa."),
        (Q_RIVERS, "Avon, Tane and Orrin", "Avon, Tane and Orrin."),
        (Q_SONG, "Grey Lantern No. 4 (Evening Bell)", 'Mara Lind\'s "Evening Bell".'),
        (Q_FERN, "20-40 millimetres", "About 2 to 4 cm."),
        (Q_FERN, "20-40 millimetres (0.8-1.6 in)", "They grow to 0.8-1.6 inches."),
        # One of a sentence's names is enough when the question asks one thing.
        (Q_DAM, "Morrow Works built it for the Halden Council.", "Morrow Works."),
        # An explanation is read for its last sentence.
        (
            "How many times did the comet pass between 1900 and 2000?",
            "It passed in 1910 and 1986. So two times.",
            "2",
        ),
        # Initials and another spelling carry a name.
        (Q_DAM, "Grand Orme Engineering", "GOE, the engineering company."),
    ],
)
def test_every_vital_part_carried(question, gold, response):
    assert uncovered(question, gold, response) is None


def test_a_gold_is_never_uncovered_in_its_own_words():
    for question, gold in [
        (Q_FLAG, "3 - green, gold, black"),
        (Q_PRIZE, "Ada Quill, 1911"),
        (Q_SONG, "Grey Lantern No. 4 (Evening Bell)"),
        (Q_KEEPER, "Bertil Hanska"),
        (Q_DAM, "Morrow Works built it for the Halden Council."),
    ]:
        for response in (gold, f"The answer is {gold}.", f"{gold} - as the clues show."):
            assert uncovered(question, gold, response) is None
            assert moved_on(question, gold, response) is None


def test_bracketed_forms_are_alternatives():
    forms = vital_parts(Q_SONG, "Grey Lantern No. 4 (Evening Bell)")
    assert [[v.text for v in form] for form in forms] == [["Grey Lantern No. 4"], ["Evening Bell"]]


def test_a_range_gives_its_unit_to_both_ends():
    low, high = range_quantities("2 to 4 cm")
    assert (low.unit, high.unit) == ("cm", "cm")


@pytest.mark.parametrize(
    ("question", "gold", "response", "other"),
    [
        (
            Q_POPULATION,
            "48,210",
            "48,210 was its population in the 2001 census; in 2011 it was 51,377.",
            "51,377",
        ),
        (
            Q_SEAT,
            "Tessby",
            "Tessby had already stopped being the seat by then; the seat was Marrow.",
            "Marrow",
        ),
        (
            Q_MURAL,
            "Ada Quill",
            "Ada Quill is often credited, but the painter was Bea Marsh.",
            "Bea Marsh",
        ),
        (
            Q_MURAL,
            "Ada Quill",
            "Ada Quill trained the painters of the terminal; the answer is Bea Marsh.",
            "Bea Marsh",
        ),
    ],
)
def test_the_gold_named_on_the_way_to_another_answer(question, gold, response, other):
    found = moved_on(question, gold, response)
    assert found is not None and found[0] == other
    verdict = decide(question, gold, response)
    assert verdict is not None and not verdict.correct


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        # Another time than the question's: context, not another answer.
        (Q_POPULATION, "48,210", "48,210 in 2011; in 2001 it was 45,902."),
        (Q_POPULATION, "48,210", "It was 48,210; it later grew to 51,377."),
        # Another role than the one asked about.
        (Q_MURAL, "Ada Quill", "Ada Quill painted it; the building was the Orme Hall."),
        (Q_MURAL, "Ada Quill", "Ada Quill painted it in 1931; it was later restored by Bea Marsh."),
        # A figure met on the way: another size, or a role the gold's clause did not have.
        (
            "What is the difference between the 2020 populations of Orlo and Vessa?",
            "84,512",
            "The difference is 84,512; Orlo's population was 737,015.",
        ),
        (Q_MURAL, "Ada Quill", "Ada Quill painted it; the mural's owner was Bea Marsh."),
        # No later clause.
        (Q_SEAT, "Tessby", "Tessby was the seat, as Marrow was too small."),
    ],
)
def test_context_after_the_gold_is_no_other_answer(question, gold, response):
    assert moved_on(question, gold, response) is None


@pytest.mark.parametrize(
    ("gold", "response", "expected"),
    [
        ("20-40 millimetres", "About 2 to 4 cm.", (True, "same_quantity")),
        ("20-40 mm (0.8-1.6 in)", "They grow 20-40 centimetres long.",
         (False, "unit_or_scale_mismatch")),
        ("Between 5 and 7 metres", "From 500 to 700 cm.", (True, "same_quantity")),
        # A value inside the range, or a range beside another number: not decided here.
        ("5 to 7 metres", "6 metres", None),
        ("20-40 mm", "Between 20 and 40 mm, but not 50 mm.", None),
    ],
)  # fmt: skip
def test_a_range_gold(gold, response, expected):
    verdict = decide(Q_FERN, gold, response)
    assert (verdict and (verdict.correct, verdict.rule)) == expected
