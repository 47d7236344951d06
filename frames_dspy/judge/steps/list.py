"""Step ``list``: a gold of several parts ("A and B") answered with every part (TRUE,
``stated_answer``), or with some of them and nothing else (FALSE, ``partial``).

A short list response ("Naruto Uzumaki and Minato Namikaze.") is read item by item; otherwise
the parts must be named as one list in one plain sentence, not taken back later. Partial only
when the list is closed ("... founded by Steve Jobs and Steve Wozniak.", not "Ada Lind and her
father") and no word of a missing part appears anywhere.
"""

from __future__ import annotations

import re

from frames_dspy.judge.gold_forms import norm_tokens
from frames_dspy.judge.mentions import (
    FUNCTION_WORDS,
    Mention,
    Response,
    find_mentions,
    listed,
    stated,
)
from frames_dspy.judge.place_names import is_place_name
from frames_dspy.judge.steps.base import Case, Rule, of_kind
from frames_dspy.judge.steps.forms import matches_part, strip_frame
from frames_dspy.judge.verdict import RuleVerdict

__all__ = ["STEP"]

_SENTENCE_BREAK = re.compile(r"\w\w[.!?;:]\s")
_ITEM_SEPARATOR = re.compile(r"\s*,\s*(?:and\s+|&\s+)?|\s+(?:and|&)\s+")
_LIST_GAP = re.compile(r"[\s,;&\"']*(?:and\s+)?(?:the\s+)?[\"']?", re.IGNORECASE)
_CLOSES = re.compile(r"^[\s\"')]*(?:[.!;]|$)")


def _items(text: str) -> list[tuple[str, ...]] | None:
    """The names of a short list response ("Naruto Uzumaki and Minato Namikaze.")."""
    text = strip_frame(text)
    if _SENTENCE_BREAK.search(text) or len(text.split()) > 30:
        return None
    raw = [p for p in _ITEM_SEPARATOR.split(text) if p.strip()]
    merged: list[str] = []
    for piece in raw:
        if merged and is_place_name(piece):
            continue  # "Sydney, Australia": the place only locates the name before it
        merged.append(piece)
    return [norm_tokens(p) for p in merged]


def _one_list(resp: Response, spots: list[Mention]) -> bool:
    """The mentions form one list in one plain sentence, with no other name listed beside it."""
    if len({m.sent for m in spots}) != 1 or not resp.clean(spots[0].sent):
        return False
    for a, b in zip(spots, spots[1:], strict=False):
        if not _LIST_GAP.fullmatch(resp.text[a.end : b.start]):
            return False
    s, e = resp.sentences[spots[0].sent]
    return not (
        listed(resp.text[s : spots[0].start], "") or listed("", resp.text[spots[-1].end : e])
    )


def _check(case: Case) -> RuleVerdict | None:
    parts, resp = case.form.parts, case.resp
    if (items := _items(resp.text)) is not None:
        hit = [next((i for i, p in enumerate(parts) if matches_part(w, p)), None) for w in items]
        if None not in hit and len(set(hit)) == len(hit):
            if len(hit) == len(parts):
                return RuleVerdict(True, "stated_answer", "the response lists every part")
            missing = [parts[i].text for i in range(len(parts)) if i not in hit]
            return RuleVerdict(False, "partial", f"the response leaves out {missing}")
    found = {i: find_mentions(resp, p.main) for i, p in enumerate(parts)}
    named = [i for i in found if found[i]]
    spots = sorted((found[i][0] for i in named), key=lambda m: m.start)
    if not spots or not _one_list(resp, spots) or resp.retracted_after(spots[0].sent):
        return None
    if len(named) == len(parts):
        if not stated(resp, spots[0].start, spots[-1].end, case.question):
            return None
        why = "the response names every part of the gold as one list"
        return RuleVerdict(True, "stated_answer", why)
    s_end = resp.sentences[spots[0].sent][1]
    if not _CLOSES.match(resp.text[spots[-1].end : s_end]):
        return None
    shared = {
        w for i, p in enumerate(parts) for w in p.main if any(w in q.main for q in parts[i + 1 :])
    }
    present = {t.norm for t in resp.toks}
    missing = [parts[i] for i in found if not found[i]]
    for part in missing:
        own = set(part.main) - shared - FUNCTION_WORDS
        if not own or own & present:
            return None
    why = f"the response names {len(named)} of {len(parts)} parts; it leaves out "
    return RuleVerdict(False, "partial", why + ", ".join(repr(p.text) for p in missing))


STEP = Rule(
    "list",
    "every part of a list gold, or only some of them",
    ("stated_answer", "partial"),
    _check,
    guard=of_kind("list"),
)
