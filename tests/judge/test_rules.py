"""The deterministic autorater rules: each rule both ways.

Questions, gold answers and responses are written for these tests in the shapes FRAMES rows
take; none is copied from the held-out half of the labelled items
(``python -m benchmarks.judge_leaks`` checks). ``None`` means the rules abstain and the LM judge
decides.
"""

from __future__ import annotations

import dataclasses

import pytest

from frames_dspy.judge.gold_forms import analyse_gold
from frames_dspy.judge.labels import load_labels, score_rules, select_split
from frames_dspy.judge.mentions import Response
from frames_dspy.judge.names import names_another
from frames_dspy.judge.rules import PIPELINE, RULES, Case, RuleVerdict, decide

Q_CANNABIS = "Are mulberries more related to raspberries or cannabis?"
Q_WORLD_CUP = "Who won the FIFA World Cup in the year the Falklands War broke out?"
Q_PRAGUE = (
    "Which major city in Europe can be reached from New York City, if you use the total distance "
    "calculated through GPA coordinates (give or take 18 miles) from West Quoddy Light in Maine "
    "to Cape Sarichef Light in Alaska?"
)
Q_FINLAND = (
    "By how many years does the inception of the party to which former Finnish MP Lea Rakel "
    "Hiltunen last belonged predate the foundation of the Parliament of Finland itself?"
)
Q_TOM_AVERY = (
    "A novel by Clara Vance from 1847 became a 2005 film. On what date was that film's "
    "director born?"
)
Q_TULL = (
    "In what year was the founder of the band whose song is quoted in "
    "Mara Stone's song Lanterns born?"
)


def verdict(question: str, gold: str, response: str) -> tuple[bool, str] | None:
    v = decide(question, gold, response)
    return None if v is None else (v.correct, v.rule)


# --- the cases the issue names ---------------------------------------------------------------


def test_gold_offered_beside_the_other_option_is_a_hedge():
    response = "mulberries are more related to raspberries or cannabis."
    assert verdict(Q_CANNABIS, "Cannabis", response) == (False, "hedge")


def test_gold_after_than_in_the_asked_comparison_is_rejected():
    response = "Raspberries are more related to mulberries than cannabis."
    assert verdict(Q_CANNABIS, "Cannabis", response) == (False, "rejected_option")


def test_city_without_its_country_is_not_false():
    # TRUE: "Czech Republic" is in the place list, so it only locates Prague; the question asks
    # for a city and "Prague" names it. The rules never call this FALSE.
    assert verdict(Q_PRAGUE, "Prague, Czech Republic", "Prague") == (True, "stated_answer")
    assert verdict(Q_PRAGUE, "Prague, Czech Republic", "Prague, Czechia.") == (
        True,
        "stated_answer",
    )


# --- TRUE rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gold", "response"),
    [
        ("This was Lena Marsh.", "Léna Marsh"),
        ("C major", "C Major"),
        ("Dromore Cathedral and The Great Hall of Lambeth Palace", "Dromore Cathedral and the "
         "Great Hall of Lambeth Palace."),
        ("3827 days", "3,827 days."),
        ("Cannabis", "It was cannabis."),
    ],
)  # fmt: skip
def test_exact(gold, response):
    assert verdict("", gold, response) == (True, "exact")


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        ("What is the population, to the nearest million?", "Two million.",
         "Approximately 2,000,000 people."),
        ("How long is the song?", "5 minutes and 31 seconds", "5:31"),
        ("How long is the song?", "5 minutes and 31 seconds", "It runs 331 seconds."),
        ("How long after did he have his first child?", "Twelve Years", "12 years."),
        ("How long after did he have his first child?", "Twelve Years", "144 months later."),
        ("What rank?", "37th", "It ranked thirty-seventh."),
        ("What percentage?", "75.68%", "He lived 75.68 percent as long."),
        ("How tall is it in cm?", "110,000cm.", "1.1 km"),
        ("How much did it gross?", "$183 million", "183,000,000 dollars"),
        ("How many?", "one hundred eighty-four billion nine hundred fifty-nine million four "
         "hundred forty thousand.", "184,959,440,000"),
        ("What number would Alf Dobbs have had playing for Riverside FC?", "9",
         "Alf Dobbs would have had the number nine jersey at Riverside."),
        ("What is the difference between the populations?", "84,512",
         "737,015 - 652,503 = 84,512, so Seattle had 84,512 more residents."),
        (Q_TULL, "1939", "Owen Tull was born on 16 May 1939 in Kent."),
        ("How much did the film gross in its initial run?",
         "Donnie Darko grossed $517,375 in its initial run at the box office. ",
         "It grossed 517,375 US dollars."),
        ("What percentage?", "75.68%", "0.7568"),
    ],
)  # fmt: skip
def test_same_quantity(question, gold, response):
    assert verdict(question, gold, response) == (True, "same_quantity")


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        ("When was it featured?", "November 5, 2011", "It aired on 5th November 2011."),
        ("When was the song featured?", "November 5, 2011", "2011-11-05"),
        ("When was it released?", "May 23, 1985", "23/05/1985"),
        (Q_TOM_AVERY, "Tom Avery was born on March 3rd, 1958.", "3 March 1958."),
        ("What day of the year do they all share?", "They are all born on June 20.",
         "They all share a birthday: the 20th of June."),
    ],
)  # fmt: skip
def test_same_date(question, gold, response):
    assert verdict(question, gold, response) == (True, "same_date")


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        ("Which country was the Duke's birthplace?", "Portugal",
         "He was born at Olisipo, so today his birthplace is in Portugal."),
        ("Who is the animator?", "Kenji Arata",
         "Kenji Arata, the co-founder of Studio Kumo."),
        (Q_WORLD_CUP, "Italy", "The World Cup held in Spain that summer was won by Italy."),
        ("Which striker netted 14 times in the Northern League during 1998-1999 and was "
         "named Riverside's best player?",
         "Rosa Quint netted 14 times in the the 1998-1999 Northern League and was "
         "named  Riverside's best player.", "Rosa Quint."),
        ("As of 2020, what is the largest city of the 9th largest country by land "
         "area in Europe?", "The largest city of the 9th largest country in Europe is Warsaw.",
         "The answer is Warsaw."),
        ("Which Naruto characters can perfectly use the Rasengan technique?",
         "Naruto Uzumaki, Minato Namikaze and Jiraiya.",
         "Jiraiya, Minato Namikaze and Naruto Uzumaki."),
        ("In 2020, were there any cities in England that are more populated than "
         "Philadelphia, and which cities are they?", "Yes, London", "Yes, London is one."),
        ("Was the person alive when the party was founded?", "Yes", "Yes, he was."),
        ("What was the capital of the United States on the day George Washington died?",
         "Philadelphia, Pennsylvania",
         "The government sat there from 1790 to 1800, so Philadelphia was the capital that day."),
        ("What is the atomic number of gold in Roman numerals?", "LXXIX",
         "Gold's atomic number is 79, which is LXXIX in Roman numerals."),
    ],
)  # fmt: skip
def test_stated_answer(question, gold, response):
    assert verdict(question, gold, response) == (True, "stated_answer")


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        (Q_WORLD_CUP, "Italy", "Italy lost the final to West Germany."),  # not the answer
        (Q_WORLD_CUP, "Italy", "Italy, Germany and France all reached the semi-finals."),
        (Q_WORLD_CUP, "Italy", "It could be Italy."),  # one candidate, not committed
        (Q_WORLD_CUP, "Italy", "The World Cup was won by Italy, not by Germany as many think."),
        # "the runner-up" is not what the question asks about; neither, to these rules, is
        # "the winner" for "Who won" (no word in common), so both go to the judge
        (Q_WORLD_CUP, "Italy", "Spain hosted it; the runner-up was Italy."),
        (Q_WORLD_CUP, "Italy", "Spain hosted it; the winner was Italy."),
        ("What was the capital of the United States on the day George Washington died?",
         "Philadelphia, Pennsylvania", "So Philadelphia was the largest city."),
        (Q_FINLAND, "7 years.", "By 7 years, though some sources say 8 years."),
        (Q_FINLAND, "7 years.", "7 years and 2 months."),  # finer, not another answer
        ("Who was president?", "George Washington", "George Washington University."),
        ("Who directed it?", "Lynch", "David Lynch."),
        ("What is the title?", "Blue Yodel No. 1 (T for Texas)", "Blue Yodel No. 1"),
        ("When was it featured?", "November 5, 2011", "05/11/2011"),  # day or month first?
        (Q_TOM_AVERY, "Tom Avery was born on March 3rd, 1958.",
         "Tom Avery: 03.03.1958; the film came out on 7 September 2005."),  # 03.03.1958 unread
        ("Who?", "Dwight D Eisenhower", "Dwight C Eisenhower"),  # an initial, not a numeral
    ],
)  # fmt: skip
def test_true_rules_abstain_when_not_sure(question, gold, response):
    assert verdict(question, gold, response) is None


# --- FALSE rules -----------------------------------------------------------------------------


@pytest.mark.parametrize("response", ["", "   ", None, " . "])
def test_empty(response):
    assert verdict(Q_WORLD_CUP, "Italy", response) == (False, "empty")


@pytest.mark.parametrize(
    "response",
    [
        "I cannot determine which team won the World Cup in that year.",
        "I am unable to name the company in question.",
        "There is not enough information to determine this.",
        "I don't know.",
        "The records are not complete enough for me to name a country.",
    ],
)
def test_refusal(response):
    assert verdict(Q_WORLD_CUP, "Italy", response) == (False, "refusal")


@pytest.mark.parametrize(
    ("gold", "response"),
    [
        ("Italy", "I don't know, but I'd guess Italy."),  # a guess is an answer
        ("Grand Union Bakery", "I'm not sure, but I believe it's GUB."),
        ("Italy", "Brazil were unable to defend their title; the Argentine side won."),
        ("Grand Union Bakery", "I can't say for certain. It is GUB."),
    ],
)
def test_refusal_needs_no_answer_given(gold, response):
    # Not a refusal; "the Argentine side" names another team than Italy (different_name).
    assert verdict(Q_WORLD_CUP, gold, response) in (None, (False, "different_name"))


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        ("Which singer?", "The Nightlarks", "It's either The Nightlarks or Corvo."),
        (Q_TOM_AVERY, "Tom Avery was born on March 3rd, 1958.",
         "Tom Avery was born on either March 3 or March 4, 1958."),
        (Q_TULL, "1939", "1939 or 1940."),
        (Q_FINLAND, "7 years.", "7 or 8 years."),
        ("What percentage?", "75.68%", "Depending on whether the average is taken as 74 or 75 "
         "years, it's either 75.68% or 74.67%."),
        (Q_WORLD_CUP, "Italy", "Italy or Spain."),
        (Q_WORLD_CUP, "Italy", "Possibly Italy, but maybe Brazil."),
    ],
)  # fmt: skip
def test_hedge(question, gold, response):
    assert verdict(question, gold, response) == (False, "hedge")


@pytest.mark.parametrize(
    ("gold", "response"),
    [
        ("Grand Union Bakery", "Grand Union Bakery or GUB"),  # an acronym, not a rival
        ("13/3 or 4.333... (infinitely repeating decimal)", "13/3 or 4.333"),  # gold says "or"
    ],
)
def test_or_without_a_rival_is_no_hedge(gold, response):
    assert verdict("What is it?", gold, response) != (False, "hedge")


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        (Q_WORLD_CUP, "Italy", "It was not Italy."),
        ("Which Pope served the longest?", "St. Aldric II, whose Latin name was Aldrik",
         "Not St. Aldric II: the pope who served longest then was Bertinus."),
        ("Who was the wife of the founder?", "Violant of Castile",
         "Violant of Castile is a common guess, but Bilbao's founder was actually married to "
         "María Díaz de Haro."),
        ("What language is the main character's name in?", "Swahili",
         "People often assume Simba is a Swahili name, but it actually comes from Zulu."),
        (Q_WORLD_CUP, "Italy", "Italy is often said to have won, but it was actually Brazil."),
        ("How old would he have been?", "282 years",
         "Not 282 years: the donation came ten years earlier, so he would have been 272."),
        ("In which year was the senator born?", "1874",
         "It isn't 1874: the president who kept the goat was Ned Harlow, born in 1939."),
    ],
)  # fmt: skip
def test_rejected_option(question, gold, response):
    assert verdict(question, gold, response) == (False, "rejected_option")


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        # the comparison is reversed ("closely related ... than to raspberries"), so it says
        # cannabis; the rules do not read that far and abstain
        (Q_CANNABIS, "Cannabis", "Mulberries are more closely related to cannabis than to "
         "raspberries."),
        # "fewer ... than Italy" is not the comparison the question asks about ("more")
        ("Which country has won more titles, Italy or Spain?", "Italy",
         "Spain has won fewer titles than Italy."),
    ],
)  # fmt: skip
def test_than_outside_the_asked_comparison_is_not_rejected(question, gold, response):
    assert verdict(question, gold, response) is None


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        (Q_TULL, "1939", "Owen Tull, who founded Pale Lantern, was born in 1938."),
        ("How many times taller? Round to one decimal place.", "31.5",
         "It's about 31.2 times taller."),
        ("What year was the auction house founded?", "1766",
         "Salvator Mundi was sold at Sotheby's, which was founded in 1744."),
        ("What is the title of the song?", "Blue Yodel No. 1 (T for Texas)", "Blue Yodel No. 2."),
        ("What rank?", "37th", "38th"),
        (Q_FINLAND, "7 years.", "It predates it by 70 years."),
        ("Who was the king?", "Richard II", "Richard III."),
        ("What is it in Roman numerals?", "LXXIX", "The answer is LXXVIII."),
    ],
)  # fmt: skip
def test_different_number(question, gold, response):
    assert verdict(question, gold, response) == (False, "different_number")


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        ("What is the difference?", "84,512", "about 85,000"),  # 84,512 rounds to it
        ("To the nearest million?", "Two million.", "2.4 million"),  # the gold is rounded
        ("How tall is it?", "222 ft", "67.7 metres"),  # metric for imperial: not compared
        (Q_FINLAND, "7 years.", "Less than 7 years."),  # a bound
        ("How many are there?", "2", "Both of them."),
        ("How many are there?", "Zero", "None."),
    ],
)  # fmt: skip
def test_different_number_abstains_on_rounding_bounds_and_words(question, gold, response):
    assert verdict(question, gold, response) is None


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        (Q_FINLAND, "7 years.", "The party predates the parliament by 7 decades."),
        ("How many days after?", "3827 days", "The painter died 3,827 hours later."),
        ("How much did the film gross in its initial run?",
         "Donnie Darko grossed $517,375 in its initial run at the box office. ",
         "Donnie Darko grossed $517.375 million in its initial run."),
        ("How much?", "£559.8 million", "$559.8 million"),
        ("How much?", "£559.8 million", "£559.8 billion"),
        ("How tall is it?", "222 ft", "222 m"),
        ("To the nearest million?", "Two million.", "About two thousand."),
        ("How long after?", "Twelve Years", "About twelve months later."),
    ],
)  # fmt: skip
def test_unit_or_scale_mismatch(question, gold, response):
    assert verdict(question, gold, response) == (False, "unit_or_scale_mismatch")


def test_different_date():
    verdict_ = verdict("When was it featured?", "November 5, 2011", "November 6, 2011.")
    assert verdict_ == (False, "different_date")


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        (Q_TOM_AVERY, "Tom Avery was born on March 3rd, 1958.", "He was born in 1958."),
        (Q_TOM_AVERY, "Tom Avery was born on March 3rd, 1958.", "March 1958."),
        ("What day of the year do they all share?", "They are all born on June 20.",
         "They were all born in June."),
    ],
)  # fmt: skip
def test_year_for_full_date(question, gold, response):
    assert verdict(question, gold, response) == (False, "year_for_full_date")


def test_the_same_number_in_another_numeral_is_no_different_number():
    assert verdict("Which game?", "The Last of Us Part II", "The Last of Us Part 2") is None


def test_year_for_full_date_abstains_when_a_day_is_written_in_words():
    response = "It was in 2011, on the fifth of November."
    assert verdict("When was it featured?", "November 5, 2011", response) is None


@pytest.mark.parametrize(
    ("gold", "response"),
    [
        ("Ada Lind and Bram Lind", "Ada Lind."),
        ("Ivan Stroud and Nora Pell", "Nora Pell."),
        ("Naruto Uzumaki, Minato Namikaze and Jiraiya.", "Naruto Uzumaki and Minato Namikaze."),
        ("Steve Jobs, Steve Wozniak and Ronald Wayne",
         "Apple, which was founded by Steve Jobs and Steve Wozniak."),
        ("Eastfield Halt and Westmoor Halt.",
         "The nearest stop to the ward is Eastfield Halt."),
    ],
)  # fmt: skip
def test_partial(gold, response):
    assert verdict("Which ones?", gold, response) == (False, "partial")


@pytest.mark.parametrize(
    ("gold", "response"),
    [
        ("Ada Lind and Bram Lind", "Ada Lind and her father."),  # open list
        ("Ada Lind and Bram Lind", "Ada Lind and her father, Bram."),
        ("Naruto Uzumaki, Minato Namikaze and Jiraiya.", "Naruto, Minato and Jiraiya."),
    ],
)  # fmt: skip
def test_partial_needs_a_closed_list_and_no_trace_of_the_missing_part(gold, response):
    assert verdict("Which ones?", gold, response) is None


def test_a_list_part_never_named_is_uncovered_where_partial_is_unsure():
    gold = "Steve Jobs, Steve Wozniak and Ronald Wayne"
    response = "Apple was founded by Steve Jobs and Steve Wozniak (with a third co-founder)."
    assert verdict("Which ones?", gold, response) == (False, "uncovered")


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        ("Was the founder still alive when it acquired the bank?", "No", "Yes, he was."),
        ("In 2020, were there any cities in England that are more populated than "
         "Philadelphia, and which cities are they?", "Yes, London", "No."),
    ],
)  # fmt: skip
def test_opposite_yes_no(question, gold, response):
    assert verdict(question, gold, response) == (False, "opposite_yes_no")


def test_yes_and_no_is_not_decided():
    assert verdict("Was he alive?", "Yes", "Yes and no.") is None


# --- a response that is only a name, read word by word ----------------------------------------


@pytest.mark.parametrize(
    ("question", "gold", "response", "expected"),
    [
        ("Who?", "Katharina Wendt", "Katarina Wendt.", (True, "stated_answer")),  # spelling
        ("Who led the expedition?", "Edmund Carrow", "Carrow.", (True, "stated_answer")),
        ("Which ship?", "Edmund Carrow", "Carrow.", None),  # a surname answers "who" only
        ("Which treaty?", "The Treaty of Velmont", "The Treaty of Ardmore.",
         (False, "different_name")),
        ("Who?", "Ada Maria Brand", "Ada Quill Brand.", (False, "different_name")),
        ("Who?", "Robert Hale", "Bob Hale.", None),  # a nickname: too short to call a swap
        ("Who?", "Ada Maria Brand", "Ada Mirta Brand.", None),  # begins alike: maybe a spelling
        ("Which pope?", "St. Aldric II", "Pope Aldric II.", None),  # a title for a title
        ("Where?", "Oakdale, Ohio", "Fairview, Ohio.", (False, "different_name")),
        ("Where?", "Oakdale, Ohio", "Oakdale.", (True, "stated_answer")),
        ("Which team?", "The Dayton Herons", "The Dayton Heron.", (True, "stated_answer")),
    ],
)  # fmt: skip
def test_a_name_read_word_by_word(question, gold, response, expected):
    assert verdict(question, gold, response) == expected


@pytest.mark.parametrize(
    ("gold", "response", "expected"),
    [
        ("A) The red lantern", "B) The blue lantern", (False, "other_option")),
        ("(c) Twelve", "The answer is (a): eleven.", (False, "other_option")),
        ("A) The red lantern", "A) The red lantern", (True, "exact")),
        ("A) The red lantern", "A. The red one", None),  # the same letter: not decided here
        ("Route A", "B) Route B", None),  # the gold is no lettered option
    ],
)  # fmt: skip
def test_another_lettered_option(gold, response, expected):
    assert verdict("Which one? A) The red lantern B) The blue lantern", gold, response) == expected


def test_plural_and_singular_are_one_word():
    assert verdict("Which fruits?", "Apple and pear.", "Pears and apples.") is None  # not FALSE
    assert verdict("Which teams?", "Herons and Hawks", "The Hawk and the Heron.") == (
        True,
        "stated_answer",
    )


def test_an_explanation_gold_is_not_read_for_names():
    gold = "She visited in 1990 and 1994. So she went there three times."
    question = "How many times did she go to the island?"
    assert names_another(question, gold, "Twice, in spring.") is None  # "So" is no name
    assert verdict(question, gold, "3") == (True, "same_quantity")


# --- abstentions: paraphrases and wrong entities ---------------------------------------------


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        ("Which food chain?", "Grand Union Bakery", "GUB."),
        ("Which element, and who is it named after?", "Mendelevium is named after Dmitri "
         "Mendeleev.", "The element is mendelevium, which was named after Mendeleev."),
        ("Who are the two producers?", "Ivan Stroud and Nora Pell", "Stroud and Pell."),
        ("Which Pope?", "St. Aldric II, whose Latin name was Aldrik", "Pope Aldrik II."),
        ("Which country?", "United States", "USA"),
    ],
)  # fmt: skip
def test_paraphrases_are_left_to_the_judge(question, gold, response):
    assert verdict(question, gold, response) is None


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        (Q_CANNABIS, "Cannabis", "Raspberries."),
    ],
)  # fmt: skip
def test_wrong_entities_sharing_a_name_word_are_left_to_the_judge(question, gold, response):
    assert verdict(question, gold, response) is None


def test_a_name_with_its_one_word_swapped_is_uncovered():
    assert verdict("What key?", "C major", "C minor.") == (False, "uncovered")


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        ("Who was the third overall selection?", "Omar Reyes", "Tobias Kern."),
        ("Which food chain?", "Grand Union Bakery", "Taco Barn."),
        ("Which element?", "Mendelevium is named after Dmitri Mendeleev.",
         "The element is einsteinium, which was named after Albert Einstein."),
    ],
)  # fmt: skip
def test_wrong_entities_with_no_form_of_the_name_are_false(question, gold, response):
    assert verdict(question, gold, response) == (False, "different_name")


# --- the interface ---------------------------------------------------------------------------


def test_every_rule_is_documented():
    assert all(isinstance(d, str) and d for d in RULES.values())
    assert {"exact", "same_quantity", "same_date", "stated_answer"} <= set(RULES)
    for name, description in RULES.items():
        assert description.startswith(("TRUE:", "FALSE:")), name


def test_verdict_is_frozen_and_names_a_documented_rule():
    v = decide(Q_WORLD_CUP, "Italy", "Italy.")
    assert isinstance(v, RuleVerdict) and v.rule in RULES and v.reason
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.correct = False  # type: ignore[misc]


@pytest.mark.parametrize("gold", ["", "  ", None])
def test_empty_gold_is_an_error_that_names_it(gold):
    with pytest.raises(ValueError, match="gold answer"):
        decide(Q_WORLD_CUP, gold, "Italy")


def test_a_gold_of_signs_only_is_compared_as_written():
    assert verdict("What is it in Morse code?", "....-", "....-") == (True, "exact")
    assert verdict("What is it in Morse code?", "....-", "...--") is None


# --- the labelled file -----------------------------------------------------------------------


def test_rules_on_the_dev_half_of_the_labelled_judge_items(judge_labels):
    # The project's judge_dev labels (or FRAMES_JUDGE_LABELS'), rules alone: no model, no data.
    # Only the dev half: the held-out half is scored once, by hand, never by a test.
    items = select_split(load_labels(judge_labels), "dev")
    report = score_rules(items)
    assert report.items == len(items) > 0
    assert report.coverage >= 0.6, report.summary()
    assert report.precision >= 0.97, report.summary()


# --- a number or name that is not given as the answer ----------------------------------------


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        ("How many?", "83", "I considered 83 and Laraine Newman; I'm not sure which."),
        ("How many?", "83", "Laraine Newman is the answer; 83 was the runner-up."),
        ("How many?", "83", "83? No, it is 85."),
        ("How many?", "83", "Between 83 and 85, I would choose 85."),
        ("How many?", "83", "Bronze medalist and 83."),
        ("When was it?", "November 24, 1921", "November 24, 1921 is a common guess, but the real "
         "answer is different."),
        ("Was he alive?", "Yes", "Yes is a common guess, but the real answer is different."),
        ("Which states?", "Victoria and Tasmania",
         "Stephen Schwartz is the answer; Victoria and Tasmania was the runner-up."),
        ("How many times did it happen?", "Seven", "7 years."),  # the question asks no years
    ],
)  # fmt: skip
def test_a_gold_value_not_given_as_the_answer_is_never_true(question, gold, response):
    assert verdict(question, gold, response) not in ((True, r) for r in RULES)


@pytest.mark.parametrize(
    ("question", "gold", "response", "rule"),
    [
        ("When was the state founded?", "1818", "The fireboat that sank in 1908 was the "
         "Illinois. The state was admitted to the Union in 1818, so the answer is 1818.",
         "same_quantity"),
        ("How many years after publishing his paper did John Snow make the connection?",
         "Seven", "7 years.", "same_quantity"),
        ("Who founded that brand?", "Steve Jobs, Steve Wozniak and Ronald Wayne",
         "The brand was Apple. Apple was founded in 1976 by Steve Jobs, Steve Wozniak and "
         "Ronald Wayne.", "stated_answer"),
        ("How old was he?", "140 years old.", "140 years old is a common guess, but the real "
         "answer is different.", None),
    ],
)  # fmt: skip
def test_the_gold_value_given_as_the_answer(question, gold, response, rule):
    expected = (True, rule) if rule else (False, "rejected_option")
    assert verdict(question, gold, response) == expected


# --- a count or measure answered with no number ----------------------------------------------


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        ("Where would the building rank among the tallest?", "37th", "New York City"),
        ("How many years earlier would he have to be alive?", "87", "1997"),
        ("What was the population, to the nearest thousand?", "506000", "In 1990."),
    ],
)
def test_a_count_answered_with_no_number_or_a_year_only(question, gold, response):
    assert verdict(question, gold, response) == (False, "no_quantity")


@pytest.mark.parametrize(
    ("question", "gold", "response"),
    [
        ("How many times did she win?", "1", "Only one."),
        ("How many times did she win?", "0", "None."),
        ("How many were there?", "2", "A couple."),
        ("In what year was he born?", "1874", "Ned Harlow"),  # a year gold: not this rule
        ("How many goals did Apollo score?", "11", "Apollo 12 scored."),  # a number in a name
    ],
)
def test_no_quantity_needs_no_number_at_all(question, gold, response):
    assert verdict(question, gold, response) not in ((False, "no_quantity"),)


# --- the pipeline: one step per rule, each with its name, guard and verdicts ---------------------


def test_every_rule_name_has_a_home_in_the_pipeline():
    declared = {name for rule in PIPELINE for name in rule.verdicts}
    assert declared <= set(RULES)
    assert set(RULES) - declared == {"empty"}  # decided before the pipeline: nothing to read
    assert len({rule.name for rule in PIPELINE}) == len(PIPELINE)
    assert all(rule.decides for rule in PIPELINE)


def test_a_guarded_step_leaves_other_kinds_of_gold_alone():
    steps = {rule.name: rule for rule in PIPELINE}
    case = Case("How many?", "12", analyse_gold("12", "How many?"), Response("Fourteen."))
    assert steps["quantity"](case) == RuleVerdict(
        False, "different_number", "the response commits to 'Fourteen'"
    )
    for name in ("list", "name", "yes_no", "date", "number_in_name"):
        assert steps[name](case) is None


@pytest.mark.parametrize(
    ("gold", "response", "expected"),
    [
        ("The Harlow Antitrust Act", "The Harlow Act.", (True, "stated_answer")),
        ("Ada Maria Quill", "Ada Quill", (True, "stated_answer")),
        ("Ada Maria Quill", "Ada Maria Quill Brand", None),
        ("John Paul II", "John II", None),  # another person of that number
        ("Orme Route 9 Tunnel", "Orme Tunnel", None),  # a number left out
    ],
)  # fmt: skip
def test_a_shortened_name(gold, response, expected):
    assert verdict("Which one?", gold, response) == expected
