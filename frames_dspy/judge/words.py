"""The word lists the autorater's rules share, each defined once.

Lists that only one rule reads live beside that rule; the ones here are read by several modules
(reading the gold, finding mentions, comparing names), so a change to one changes them all.
"""

from __future__ import annotations

import re

__all__ = ["ARTICLES", "FUNCTION_WORDS", "NAME_TITLES", "PLACE_NOUNS", "WORD", "word_set"]


def word_set(words: str) -> frozenset[str]:
    """The set of the space-separated words of ``words``."""
    return frozenset(words.split())


#: A word as the rules count it: letters (with apostrophes), or digits ("1,200", "3.5").
WORD = re.compile(r"[A-Za-z][A-Za-z'’]*|\d+(?:[.,]\d+)*")

ARTICLES = word_set("a an the")

#: Words that carry no name or answer of their own: pronouns, auxiliaries, prepositions,
#: conjunctions, quantifiers and answer-frame words ("the final answer is ...").
FUNCTION_WORDS = word_set(
    "a an the this that these those it its is was are were be been being of in on at to for by "
    "with from as and or nor but which who whom whose what when where why how than then there "
    "here their his her he she they them we you i me my our your also only just even both all "
    "any some each other either neither has had have do does did can could will would shall "
    "should may might must not no never so such yes well however although though because since "
    "while if thus hence therefore into onto about after before during over under up down out "
    "between among through without same very more most less least now today answer final"
)

#: Titles written before a name ("Pope Aldric II", "Mount Foo"): they do not make it a longer
#: name, and a gold's title alone is no name word to look for.
NAME_TITLES = word_set(
    "st saint pope king queen president sir dr mr mrs ms lord lady prince princess general "
    "captain emperor empress duke duchess count mount mt lake river fort cape"
)

#: Nouns of kind that follow or precede place and institution names ("Foo City", "Foo Club").
PLACE_NOUNS = word_set("city county state university college school church team club")
