"""Does a response name the gold answer's entity in any form? Aliases and spellings count.

The FRAMES paper's judge asks whether the meaning and vital facts of the gold answer are in a
response. When the gold answer names someone or something (a person, place, work, team), a
response that carries no form of that name at all has named something else: "Taco Barn" for
"Grand Union Bakery", "Ilse Brandt" for "Irena Novikova". A small LM judge says
TRUE to such answers (measured on judge_dev: the embedded 0.5B judge accepted 11 of 11 wrong
entities), so :func:`names_another` checks it without one.

It replaces the overlap guard of earlier versions, which kept a judge's TRUE only when half the
gold's content words were in the response and so rejected "GUB", "John Henry Dalton" for
"J. H. Dalton" and "Pope Aldric II" for "St. Aldric II". Here a single name word of the
gold in any of these forms is enough:

- the same word ("Okafor" for "Grace Okafor", "Herons" for "The Dayton Herons");
- another spelling or inflection: one starts with the other (``Marlowe``/``Marlow``), or
  they begin alike and are one edit apart (two for long words: ``Dostoyevsky``/``Dostoevsky``;
  but ``Hart`` is not ``Bart``);
- initials: "GUB" for "Grand Union Bakery" ("USA", which begins with them, for "United
  States"), and "NASA" in a gold for its words spelled out.

Only the gold's name words count: words the question already contains are left out (a
response may repeat the question), and so are function words; a gold with no name word left
(a number, a date, lower-case words) is not checked, nor is a response that shares a number
with the gold (a sentence gold "Ames was 61 and Bell 47" is answered by "61 and 47").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal

from frames_dspy.judge.answer_forms import fold, parse_quantities
from frames_dspy.judge.gold_forms import analyse_gold
from frames_dspy.judge.words import FUNCTION_WORDS, NAME_TITLES, PLACE_NOUNS, WORD

__all__ = ["carries_name", "gold_name_words", "names_another", "same_name_word"]

# Words that start a sentence or title a name without being the name.
_NOT_NAMES = FUNCTION_WORDS | NAME_TITLES | PLACE_NOUNS
_KINDS_WITHOUT_NAMES = ("yes_no", "date", "quantity")
_CONNECTORS = frozenset({"of", "and", "the", "for", "&"})


def _words(text: str) -> list[str]:
    return [m.group() for m in WORD.finditer(fold(text))]


def _norm(word: str) -> str:
    return re.sub(r"['’]s?$", "", word.casefold())


def _edits(a: str, b: str, limit: int) -> int:
    """Levenshtein distance of ``a`` and ``b``, or ``limit + 1`` once it is over ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


def same_name_word(gold_word: str, word: str) -> bool:
    """Whether ``word`` is ``gold_word`` in another spelling or inflection (both normalised)."""
    if gold_word == word:
        return True
    if min(len(gold_word), len(word)) >= 4 and (
        gold_word.startswith(word) or word.startswith(gold_word)
    ):
        return True
    if min(len(gold_word), len(word)) >= 5 and gold_word[0] == word[0]:
        limit = 2 if len(gold_word) >= 8 else 1
        return _edits(gold_word, word, limit) <= limit
    return False


def _initials(words: Iterable[str]) -> set[str]:
    """Initials of each run of two or more capitalised words ("Grand Union Bakery": gub)."""
    out, run = set(), []
    for word in [*words, ""]:
        if word.casefold() in _CONNECTORS:
            continue  # "The National Aeronautics and Space Administration": NASA
        if word[:1].isupper():
            run.append(word[0].casefold())
            continue
        if len(run) >= 2:
            out.add("".join(run))
        run = []
    return out


def gold_name_words(gold: str, question: str = "") -> list[str]:
    """The gold answer's name words (normalised) that its question does not contain.

    Empty when the gold is a yes/no, a date or a quantity, or has no capitalised word of its
    own (nothing to check), and when it is an explanation of two or more sentences (its
    capitalised words may only lead up to the answer). Of a name with a place after it
    ("Foo, Ohio"), only the name's own words count: another town in Ohio is another answer.
    """
    form = analyse_gold(gold, question)
    if form.kind in _KINDS_WITHOUT_NAMES or _explanation(gold):
        return []
    if form.kind == "name" and form.parts[0].qualifiers:
        gold = form.parts[0].text
    asked = {_norm(w) for w in _words(question)}
    names = []
    for word in _words(gold):
        norm = _norm(word)
        if not word[:1].isupper() or norm in _NOT_NAMES or len(norm) < 2:
            continue
        if norm in asked or norm.rstrip("s") in asked:
            continue
        names.append(norm)
    return names


def _explanation(gold: str) -> bool:
    """A gold of two or more sentences ("Both visits were in May. So three times.")."""
    return len(re.findall(r"\w\w[.!?]\s+[A-Z]", fold(gold).strip())) >= 1


def _numbers(text: str) -> set[Decimal]:
    """The values of the numbers in ``text``, in digits or words ("three" is 3)."""
    return {q.value for q in parse_quantities(text) if not q.weak}


def names_another(question: str, gold: str, response: str) -> str | None:
    """The gold's name words when the response carries none of them in any form, else None.

    None also when there is nothing to check (see :func:`gold_name_words`) or the response
    shares a number with the gold (in digits or words).
    """
    names = gold_name_words(gold, question)
    if not names:
        return None
    said = _words(response)
    if _numbers(gold) & _numbers(response):
        return None
    said_norm = {_norm(w) for w in said if not w[0].isdigit()}
    if any(same_name_word(name, word) for name in names for word in said_norm):
        return None
    # Initials either way: "GUB" for Grand Union Bakery, "National Aeronautics and Space
    # Administration" for NASA.
    gold_initials = _initials(_words(gold))
    if gold_initials & said_norm or _initials(said) & set(names):
        return None
    # An abbreviation that begins with the initials: "USA" for United States.
    capitals = {w.casefold() for w in said if len(w) >= 2 and w.isupper()}
    if any(c.startswith(i) for c in capitals for i in gold_initials):
        return None
    return " ".join(dict.fromkeys(names))


def carries_name(words: Iterable[str], name: str, response: str) -> bool:
    """Whether ``response`` carries a name in any form: one of its ``words`` (normalised) in
    another spelling or inflection, or the initials of ``name`` as written ("GUB", "USA")."""
    said = _words(response)
    said_norm = {_norm(w) for w in said if not w[0].isdigit()}
    if any(same_name_word(word, s) for word in words for s in said_norm):
        return True
    initials = _initials(_words(name))
    capitals = {w.casefold() for w in said if len(w) >= 2 and w.isupper()}
    return bool(initials & said_norm) or any(c.startswith(i) for c in capitals for i in initials)
