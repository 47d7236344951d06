"""Hand-labelled autorater items, and how well a decider does on them.

The project's own labels, ``judge_dev`` (160 answers to 80 FRAMES questions, written and
labelled by hand; ``judge_dev/README.md`` beside this module says how), are installed with the
package: :data:`JUDGE_DEV`. :func:`labels_file` picks the file a command measures on: the one it
is given, else ``FRAMES_JUDGE_LABELS`` (see :mod:`frames_dspy.base.paths`), else ``judge_dev``.
A labelled file is JSONL with one item a line: ``question``, ``gold``, ``response``, ``label``
(true when the response is correct), ``kind`` (what sort of response it is: exact, paraphrase,
hedge, ...) and optionally ``id`` (the FRAMES question id) and ``case``. :func:`score_rules`
measures a decider that may abstain (the rules of :mod:`frames_dspy.judge.rules`): how many items
it decides (coverage) and how many of those it gets right (precision), per rule and per kind.
:func:`split_by_question` cuts the items into two halves by question, so rules designed on one
half can be measured on the other.

The split of ``judge_dev`` is fixed (:data:`SPLIT_SEED`): the ``dev`` half is the one rules and
prompts may be read and developed against; the ``held-out`` half is only ever scored, and no
token of its items belongs in code, comments or tests. :func:`select_split` picks a half.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from frames_dspy.base.paths import judge_labels_file
from frames_dspy.judge.rules import RuleVerdict, decide

__all__ = [
    "JUDGE_DEV",
    "LabelError",
    "LabelledItem",
    "RulesReport",
    "SPLITS",
    "SPLIT_SEED",
    "labels_file",
    "load_labels",
    "select_split",
    "split_by_question",
    "score_rules",
]

_REQUIRED = ("question", "gold", "response", "label")


@dataclass(frozen=True)
class LabelledItem:
    """One labelled response to a FRAMES question."""

    question: str
    gold: str
    response: str
    label: bool
    kind: str = ""
    id: int | None = None
    case: int | None = None


class LabelError(ValueError):
    """A labelled file that cannot be used; the message names the file and the line."""


#: The project's hand-labelled items (package data, see ``judge_dev/README.md``).
JUDGE_DEV = Path(__file__).with_name("judge_dev") / "judge_dev.jsonl"


def labels_file(path: str | Path | None = None) -> Path:
    """The labelled file to measure on: ``path`` when given, else the file
    ``FRAMES_JUDGE_LABELS`` names, else the project's own :data:`JUDGE_DEV`."""
    if path:
        return Path(path).expanduser()
    return judge_labels_file() or JUDGE_DEV


def load_labels(path: str | Path) -> list[LabelledItem]:
    """Read a labelled JSONL file (blank lines are skipped).

    Raises:
        LabelError: the file is missing, unreadable or holds no items; a line is not a JSON
            object, lacks a required field, or has a label that is not a JSON boolean.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise LabelError(f"{path}: no such file; pass a labelled JSONL file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise LabelError(f"{path}: cannot be read ({err})") from err
    items = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise LabelError(
                f"{path}:{number}: invalid JSON on line {number} ({err.msg}, column {err.colno}); "
                "fix or remove it"
            ) from None
        if not isinstance(row, dict):
            raise LabelError(
                f"{path}:{number}: line {number} is a JSON {type(row).__name__}, not an object "
                f"with {', '.join(_REQUIRED)}"
            )
        missing = [k for k in _REQUIRED if k not in row]
        if missing:
            raise LabelError(
                f"{path}:{number}: line {number} lacks {missing}; every item needs "
                f"{', '.join(_REQUIRED)}"
            )
        if not isinstance(row["label"], bool):
            raise LabelError(
                f"{path}:{number}: line {number} has label {row['label']!r}; use true or false "
                "(JSON booleans)"
            )
        items.append(
            LabelledItem(
                question=str(row["question"]),
                gold=str(row["gold"]),
                response=str(row["response"] if row["response"] is not None else ""),
                label=row["label"],
                kind=str(row.get("kind") or ""),
                id=row.get("id"),
                case=row.get("case"),
            )
        )
    if not items:
        raise LabelError(f"{path}: the file holds no labelled items (it is empty)")
    return items


#: The seed of the one split of the labelled items by question (chosen once, for issue 23,
#: before any rule was changed against it): the sorted question ids are shuffled with
#: ``random.Random(SPLIT_SEED)``; the first half of them is ``dev``, the rest ``held-out``.
SPLIT_SEED = 23

#: The halves :func:`select_split` knows, and ``all``.
SPLITS = ("dev", "held-out", "all")


def split_by_question(
    items: Sequence[LabelledItem], seed: int = SPLIT_SEED
) -> tuple[list[LabelledItem], list[LabelledItem]]:
    """Two halves of the items with no question in both (dev half first, held-out second).

    The sorted question ids (the question text where an item has no id) are shuffled with
    ``random.Random(seed)``; the first half of them (rounded down) makes the dev half.
    """
    keys = list({_key(item) for item in items})
    # Integer ids sort as numbers (6 before 14); question texts, where ids are missing, as text.
    keys.sort(key=lambda k: (isinstance(k, str), k if isinstance(k, int) else 0, str(k)))
    random.Random(seed).shuffle(keys)
    design = set(keys[: len(keys) // 2])
    return (
        [item for item in items if _key(item) in design],
        [item for item in items if _key(item) not in design],
    )


def select_split(
    items: Sequence[LabelledItem], split: str, seed: int = SPLIT_SEED
) -> list[LabelledItem]:
    """The items of one half of :func:`split_by_question` (``dev``, ``held-out``) or ``all``."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    if split == "all":
        return list(items)
    dev, held_out = split_by_question(items, seed)
    return dev if split == "dev" else held_out


def _key(item: LabelledItem) -> int | str:
    return item.id if item.id is not None else item.question


@dataclass
class RulesReport:
    """How a decider that may abstain does on labelled items.

    Attributes:
        items: Items scored.
        decided: Items the decider gave a verdict on.
        correct: Verdicts that agree with the label.
        per_rule: rule -> Counter with ``verdicts`` and ``correct``.
        per_kind: kind -> Counter with ``items``, ``decided``, ``correct`` and ``abstained``.
        wrong: (item, verdict) for every verdict that disagrees with the label.
        abstained: The items with no verdict.
    """

    items: int = 0
    decided: int = 0
    correct: int = 0
    per_rule: dict[str, Counter] = field(default_factory=dict)
    per_kind: dict[str, Counter] = field(default_factory=dict)
    wrong: list[tuple[LabelledItem, RuleVerdict]] = field(default_factory=list)
    abstained: list[LabelledItem] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        return self.decided / self.items if self.items else 0.0

    @property
    def precision(self) -> float:
        return self.correct / self.decided if self.decided else 0.0

    def summary(self) -> str:
        """One line: coverage and precision with their counts."""
        return (
            f"coverage {self.coverage:.3f} ({self.decided}/{self.items}), "
            f"precision {self.precision:.3f} ({self.correct}/{self.decided})"
        )


def score_rules(
    items: Sequence[LabelledItem],
    decider: Callable[[str, str, str], RuleVerdict | None] = decide,
) -> RulesReport:
    """Run ``decider(question, gold, response)`` on every item and count against the labels."""
    report = RulesReport()
    for item in items:
        report.items += 1
        kind = report.per_kind.setdefault(item.kind, Counter())
        kind["items"] += 1
        verdict = decider(item.question, item.gold, item.response)
        if verdict is None:
            kind["abstained"] += 1
            report.abstained.append(item)
            continue
        ok = verdict.correct == item.label
        report.decided += 1
        report.correct += ok
        kind["decided"] += 1
        kind["correct"] += ok
        rule = report.per_rule.setdefault(verdict.rule, Counter())
        rule["verdicts"] += 1
        rule["correct"] += ok
        if not ok:
            report.wrong.append((item, verdict))
    return report
