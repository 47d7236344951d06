"""Find words of the held-out labelled items in the judge's code, comments and tests.

Run ``python -m benchmarks.judge_leaks [--labels FILE] [--data-dir DIR] [--json]`` (the labels
default to ``FRAMES_JUDGE_LABELS``, else the project's ``judge_dev`` items).

The autorater's rules are measured on the held-out half of the labelled items
(:func:`frames_dspy.judge.labels.split_by_question`, seed
:data:`~frames_dspy.judge.labels.SPLIT_SEED`). That measurement means something only if no rule,
word list, comment or test was written from those items. This script lists every place in the
judge's files where a word of a held-out item (its question, gold answer or response) occurs that
is neither in any dev item nor a common word. A word counts as common when it is in at least
``--common`` of the 10,033 Vital Article summaries of the FRAMES data (``FRAMES_DATA_DIR``).
Held-out items themselves are never printed, only the words found in code and where.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections import Counter
from pathlib import Path

from frames_dspy.base import paths
from frames_dspy.judge.answer_forms import fold
from frames_dspy.judge.gold_forms import word_set
from frames_dspy.judge.labels import LabelledItem, labels_file, load_labels, split_by_question
from frames_dspy.judge.place_names import is_place_name

REPO = Path(__file__).resolve().parent.parent

#: The files a leak matters in: the judge, its prompts, its tests and its benchmarks.
SCANNED = (
    "frames_dspy/judge/*.py",
    "frames_dspy/programs/signatures.py",
    "tests/judge/*.py",
    "tests/benchmarks/test_judge_*.py",
    "benchmarks/judge_*.py",
    "README.md",
    "docs/autorater*.md",
)

_WORD = re.compile(r"[A-Za-z]+|\d+")

#: Ordinary English the rules must read (verbs of refusal, number and month words, contractions,
#: titles); rare in encyclopaedic text, so the frequency test alone would flag them.
GENERAL = word_set(
    "say thirty february signature fast mrs isn wasn reliably reliable pick scoring ties identical "
    "samples happens"
)

#: Words in a row that, shared with a held-out item, mean its text was copied.
SHINGLE = 6


def words(text: str) -> set[str]:
    """Lower-cased words and digit runs of ``text`` (accents folded; "84,512" gives 84 and 512)."""
    return {w.casefold() for w in _WORD.findall(fold(text))}


def _item_words(item: LabelledItem) -> set[str]:
    return words(item.question) | words(item.gold) | words(item.response)


def common_words(data_dir: Path, min_docs: int, labelled: set[int]) -> set[str]:
    """Words found in at least ``min_docs`` of the distractor summaries, or in at least three
    FRAMES questions that have no labelled item (conversational words: "tell", "month")."""
    source = data_dir / "distractor_wiki_summaries" / "summaries_en-us.json"
    summaries = json.loads(source.read_text(encoding="utf-8"))
    docs: Counter[str] = Counter()
    for row in summaries.values():
        docs.update(words(row.get("extract") or ""))
    common = {w for w, n in docs.items() if n >= min_docs}
    with (data_dir / "frames" / "frames_test_set.csv").open(encoding="utf-8", newline="") as f:
        questions = [r["Prompt"] for r in csv.DictReader(f) if int(r["id"]) not in labelled]
    asked = Counter(w for q in questions for w in words(q))
    return common | {w for w, n in asked.items() if n >= 3}


def _is_common(word: str, common: set[str]) -> bool:
    """A word, or its form with or without a plural or past ending, is common."""
    forms = {word, word + "s", word + "es", word + "ed", word + "d", word.removesuffix("s")}
    forms |= {word.removesuffix("es"), word.removesuffix("ed"), word.removesuffix("d")}
    return bool(forms & common)


def held_out_only(items: list[LabelledItem], common: set[str]) -> set[str]:
    """Words of held-out items that no dev item has and that are not common."""
    dev, held_out = split_by_question(items)
    seen_dev = set().union(*map(_item_words, dev))
    rare = set().union(*map(_item_words, held_out)) - seen_dev
    # Single letters and one- or two-digit numbers are too general to name an item.
    return {
        w
        for w in rare
        if len(w) >= 3 and w not in GENERAL and not is_place_name(w) and not _is_common(w, common)
    }


def _shingles(text: str) -> set[tuple[str, ...]]:
    seq = [w.casefold() for w in _WORD.findall(fold(text))]
    return {tuple(seq[i : i + SHINGLE]) for i in range(len(seq) - SHINGLE + 1)}


def held_out_shingles(items: list[LabelledItem]) -> set[tuple[str, ...]]:
    """Runs of :data:`SHINGLE` words of held-out items that no dev item has."""
    dev, held_out = split_by_question(items)
    seen = set()
    for item in dev:
        seen |= _shingles(item.question) | _shingles(item.gold) | _shingles(item.response)
    out = set()
    for item in held_out:
        out |= _shingles(item.question) | _shingles(item.gold) | _shingles(item.response)
    return out - seen


def find_leaks(
    suspects: set[str], shingles: set[tuple[str, ...]] = frozenset(), root: Path = REPO
) -> list[dict[str, object]]:
    """Every line of the scanned files holding a suspect word, and every file holding a run of
    words copied from a held-out item (reported at line 0)."""
    out = []
    for pattern in SCANNED:
        for path in sorted(root.glob(pattern)):
            if path.resolve() == Path(__file__).resolve():
                continue
            text = path.read_text(encoding="utf-8")
            copied = _shingles(re.sub(r"[\"'\\]\s*\n\s*[\"']?", " ", text)) & shingles
            if copied:
                runs = sorted(" ".join(run) for run in copied)
                out.append({"file": str(path.relative_to(root)), "line": 0, "words": runs})
            for number, line in enumerate(text.splitlines(), 1):
                hits = sorted(words(line) & suspects)
                if hits:
                    out.append({"file": str(path.relative_to(root)), "line": number, "words": hits})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=Path, default=None)
    parser.add_argument("--data-dir", type=Path, default=None, help="default: $FRAMES_DATA_DIR")
    parser.add_argument(
        "--common", type=int, default=30, help="documents that make a word common (default 30)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    labels = labels_file(args.labels)
    data_dir = args.data_dir or paths.data_dir()
    if not labels.is_file():
        parser.exit(
            2, f"no labelled file {labels}: pass --labels or set {paths.JUDGE_LABELS_ENV}\n"
        )
    if data_dir is None:
        parser.exit(2, f"no distractor summaries: pass --data-dir or set {paths.DATA_DIR_ENV}\n")
    items = load_labels(labels)
    labelled = {item.id for item in items if item.id is not None}
    suspects = held_out_only(items, common_words(Path(data_dir), args.common, labelled))
    leaks = find_leaks(suspects, held_out_shingles(items))
    if args.json:
        print(json.dumps(leaks, indent=2))
    else:
        for leak in leaks:
            print(f"{leak['file']}:{leak['line']}: {', '.join(leak['words'])}")
        print(f"{len(leaks)} lines hold words found only in held-out items", file=sys.stderr)
    return 1 if leaks else 0


if __name__ == "__main__":
    sys.exit(main())
