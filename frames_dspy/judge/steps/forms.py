"""Readings of a short response that several steps share: the answer without its frame ("It
was X." is X), whether words name a part of the gold, and numbers inside names.

Read by the ``exact``, ``number_in_name``, ``list`` and ``name`` steps.
"""

from __future__ import annotations

import re

from frames_dspy.judge.gold_forms import Part, same_words

__all__ = ["ROMAN", "matches_part", "number_changed", "numeral", "strip_frame"]

_FRAME = re.compile(
    r"^\W*(?:(?:the answer is|answer:|it is|it's|it was|this is|this was|that is|that's|"
    r"that would be|they are|they were|he is|he was|she is|she was)\s+)",
    re.IGNORECASE,
)


def strip_frame(text: str) -> str:
    """The text without an opening answer frame ("It was ...") and a closing stop."""
    text = _FRAME.sub("", text.strip())
    return text.strip().rstrip(".!")


def matches_part(words: tuple[str, ...], part: Part) -> bool:
    """The words name the part, with or without a qualifier, up to plural endings."""
    return same_words(words, part.main) or any(
        same_words(words, part.main + q) for q in part.qualifiers
    )


#: A Roman numeral, lower case (it also matches the empty string and a lone c, d, l or m).
ROMAN = re.compile(r"m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})")
_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}


def numeral(word: str) -> float | None:
    """The value of a token in digits or Roman numerals ("2", "ii"), or None for a word."""
    if word[0].isdigit():
        try:
            return float(word)
        except ValueError:
            return None
    if not ROMAN.fullmatch(word) or (len(word) == 1 and word not in "ivx"):
        return None  # a lone C, D, L or M is an initial ("Dwight D Eisenhower")
    values = [_ROMAN_VALUES[c] for c in word]
    return float(sum(-v if v < n else v for v, n in zip(values, [*values[1:], 0], strict=True)))


def number_changed(words: tuple[str, ...], gold: tuple[str, ...]) -> bool:
    """The same name with another number in it ("Blue Yodel No. 2" for "Blue Yodel No. 1").

    Roman numerals count as numbers ("Richard III" for "Richard II", "LXXVIII" for "LXXIX").
    """
    if len(words) != len(gold) or words == gold or all(w[0].isdigit() for w in gold):
        return False  # a gold that is only digits is a quantity, compared by its own rules
    changed = [i for i, (a, b) in enumerate(zip(words, gold, strict=True)) if a != b]
    values = [(numeral(words[i]), numeral(gold[i])) for i in changed]
    return all(a is not None and b is not None and a != b for a, b in values)
