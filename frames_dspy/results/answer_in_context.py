"""Was the gold answer in front of the model? A check of the answer step's context, no LM.

A wrong answer has two very different causes: retrieval or packing lost the fact, or the model
failed with the fact in its prompt. :func:`answer_in_context` tells them apart by looking for
the gold answer in the text the answer step saw (the packed articles), in the normalised forms
the autorater's rules already read (:mod:`frames_dspy.judge.gold_forms`): a name or each part
of a list as a run of words, a quantity in any unit or spelling the judge's number parser
reads, a date with its day and month (and year when the gold has one).

It answers None where a literal search says nothing: yes/no golds, and golds that are whole
sentences with no safe core (the autorater's ``"sentence"`` form). An answer that must be
computed (a difference of two years, a count) is rarely written in any article, so False there
is expected; and a small bare number may occur by chance, so True for one is weak evidence.
"""

from __future__ import annotations

from collections.abc import Sequence

from frames_dspy.judge.answer_forms import compare_quantities, fold, parse_dates, parse_quantities
from frames_dspy.judge.gold_forms import GoldForm, analyse_gold, tokens

__all__ = ["CHECKED_KINDS", "answer_in_context"]

#: The gold forms (see :class:`~frames_dspy.judge.gold_forms.GoldForm`) the check can decide.
CHECKED_KINDS = ("name", "list", "quantity", "date")


def _contains_run(words: Sequence[str], run: Sequence[str]) -> bool:
    if not run:
        return False
    first, width = run[0], len(run)
    return any(
        words[i] == first and tuple(words[i : i + width]) == tuple(run)
        for i in range(len(words) - width + 1)
    )


def _names_in(form: GoldForm, text: str) -> bool:
    words = [t.norm for t in tokens(text)]
    return bool(form.parts) and all(_contains_run(words, part.main) for part in form.parts)


def _quantity_in(form: GoldForm, text: str) -> bool:
    # A date's day is no quantity; but a gold year may be written inside a full date.
    skip = [] if form.is_year else [(d.start, d.end) for d in parse_dates(text)]
    found = parse_quantities(text, skip=skip)
    return any(compare_quantities(form.quantity, q) in ("same", "close") for q in found)


def _date_in(form: GoldForm, text: str) -> bool:
    gold = form.date
    return any(
        (d.month, d.day) == (gold.month, gold.day) and (gold.year is None or d.year == gold.year)
        for d in parse_dates(text)
    )


def answer_in_context(question: str, gold: str, context: str | None) -> bool | None:
    """Whether the gold answer appears in ``context``, in any form the autorater's rules read.

    Args:
        question: The FRAMES question (it tells a year from a count, as for the judge).
        gold: The gold answer, verbatim.
        context: The text the answer step saw; None when it saw none (the naive setup).

    Returns:
        True or False, or None when there was no context or the gold's form cannot be looked
        for literally (yes/no, a whole sentence).
    """
    if context is None or not str(gold or "").strip():
        return None
    form = analyse_gold(gold, fold(question or ""))
    if form.kind not in CHECKED_KINDS:
        return None
    text = fold(context)
    if form.kind == "quantity":
        return _quantity_in(form, text)
    if form.kind == "date":
        return _date_in(form, text)
    return _names_in(form, text)
