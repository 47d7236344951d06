"""How the deterministic autorater rules do on hand-labelled items: coverage and precision.

Run ``python -m benchmarks.judge_rules [--labels FILE] [--seed 23] [--split dev] [--json]
[--show wrong]``; the labels are ``--labels``, else ``FRAMES_JUDGE_LABELS``, else the project's
own ``judge_dev`` items (:func:`frames_dspy.judge.labels.labels_file`).

It prints coverage (the share of items the rules decide) and precision (the share of those
verdicts that agree with the label) on one half of a split by question (sorted question ids
shuffled with ``random.Random(seed)``, by default the project's fixed split: the first half is
``dev``, the second is held out and only ever scored), then per rule, per response kind, the
items the rules get wrong and the items they leave to the LM judge. ``--split`` picks the half:
``dev`` by default, so that nothing of the held-out half is shown by accident; ``held-out``
when it is scored; ``all`` for both halves and their sum (``--json`` always holds all three
totals).
Nothing is written to disk: the labelled file is read-only and is never copied.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tabulate import tabulate

from frames_dspy.base import paths
from frames_dspy.judge.labels import (
    SPLIT_SEED,
    RulesReport,
    labels_file,
    load_labels,
    score_rules,
    select_split,
    split_by_question,
)
from frames_dspy.judge.rules import RULES


def _half(report: RulesReport) -> dict[str, Any]:
    return {
        "items": report.items,
        "decided": report.decided,
        "correct": report.correct,
        "coverage": round(report.coverage, 4),
        "precision": round(report.precision, 4),
    }


def run(labels: Path, seed: int = SPLIT_SEED, split: str = "dev") -> dict[str, Any]:
    """Score the rules on every item and on both halves; a JSON-ready report.

    The totals cover both halves; per rule, per kind and the items listed are of ``split``.
    """
    items = load_labels(labels)
    design, held_out = split_by_question(items, seed)
    full = score_rules(select_split(items, split, seed))
    return {
        "labels": str(labels),
        "seed": seed,
        "split": split,
        "all": _half(score_rules(items)),
        "design": _half(score_rules(design)),
        "held_out": _half(score_rules(held_out)),
        "per_rule": {
            rule: dict(full.per_rule.get(rule, {"verdicts": 0, "correct": 0})) for rule in RULES
        },
        "per_kind": {kind: dict(c) for kind, c in sorted(full.per_kind.items())},
        "wrong": [
            {
                "case": i.case,
                "kind": i.kind,
                "label": i.label,
                "rule": v.rule,
                "reason": v.reason,
                "gold": i.gold,
                "response": i.response,
            }
            for i, v in full.wrong
        ],
        "abstained": [
            {
                "case": i.case,
                "kind": i.kind,
                "label": i.label,
                "gold": i.gold,
                "response": i.response,
            }
            for i in full.abstained
        ],
    }


def render(report: dict[str, Any], show: str = "wrong") -> str:
    """Markdown tables of a :func:`run` report."""
    named = (("all", "all"), ("dev half", "design"), ("held-out half", "held_out"))
    shown = {"dev": ("design",), "held-out": ("held_out",)}.get(report.get("split", "all"))
    named = tuple((n, k) for n, k in named if shown is None or k in shown)
    halves = [
        [
            name,
            h["items"],
            h["decided"],
            h["correct"],
            f"{h['coverage']:.3f}",
            f"{h['precision']:.3f}",
        ]
        for name, h in ((name, report[key]) for name, key in named)
    ]
    out = [
        f"labels: {report['labels']} (split seed {report['seed']}; per rule, per kind and items "
        f"listed: {report['split']})",
        "",
        tabulate(halves, ["items", "n", "decided", "correct", "coverage", "precision"], "github"),
        "",
        tabulate(
            [[r, c["verdicts"], c["correct"], RULES[r]] for r, c in report["per_rule"].items()],
            ["rule", "verdicts", "correct", "what it decides"],
            "github",
        ),
        "",
        tabulate(
            [
                [
                    k,
                    c.get("items", 0),
                    c.get("decided", 0),
                    c.get("correct", 0),
                    c.get("abstained", 0),
                ]
                for k, c in report["per_kind"].items()
            ],
            ["kind", "items", "decided", "correct", "abstained"],
            "github",
        ),
        "",
        f"wrong verdicts: {len(report['wrong'])}",
    ]
    rows = report["wrong"] if show in ("wrong", "all") else []
    rows += report["abstained"] if show in ("abstained", "all") else []
    for row in rows:
        rule = row.get("rule", "abstain")
        out.append(
            f"- case {row['case']} [{row['kind']}, label {row['label']}] {rule}: "
            f"gold {row['gold'][:70]!r} / response {row['response'][:120]!r}"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--labels",
        type=Path,
        default=None,
        help=f"labelled JSONL (default: ${paths.JUDGE_LABELS_ENV}, else judge_dev)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=SPLIT_SEED,
        help="seed of the split by question (default %(default)s)",
    )
    parser.add_argument(
        "--split",
        choices=("dev", "held-out", "all"),
        default="dev",
        help="the half whose rules, kinds and items are detailed (default %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--show",
        choices=("none", "wrong", "abstained", "all"),
        default="wrong",
        help="which items to list after the tables",
    )
    args = parser.parse_args(argv)
    labels = labels_file(args.labels)
    if not labels.is_file():
        sys.exit(f"no labelled file {labels}: pass --labels FILE or set {paths.JUDGE_LABELS_ENV}")
    report = run(labels, args.seed, args.split)
    print(json.dumps(report, indent=2) if args.json else render(report, args.show))


if __name__ == "__main__":
    main()
