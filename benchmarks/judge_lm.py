"""How the LM judge does on the items the rules leave: its written verdict against P(TRUE).

Run ``python -m benchmarks.judge_lm [--labels FILE] [--judge-model SPEC] [--out RAW.jsonl]``
(``--labels`` defaults to ``FRAMES_JUDGE_LABELS``, else the project's ``judge_dev`` items), or
``--from RAW.jsonl`` to analyse a saved run again without calling the model.

Every labelled item the rules do not decide goes to the judge, built as a run builds it
(:func:`frames_dspy.run.session.make_judge`), once; the judge's written TRUE/FALSE, its P(TRUE)
at the decision token and the seconds are kept. Then two ways of deciding are compared on
those same replies:

- ``text``: the TRUE or FALSE the judge wrote;
- ``p_true``: P(TRUE) against a threshold calibrated on labels, and measured only on items it
  was not calibrated on: on each half of a split by question (the sorted question ids
  shuffled with ``random.Random(seed)``) with the threshold fitted on the other half, and
  leave-one-question-out (fitted on every other question).

A threshold is fitted by maximising accuracy over the midpoints between observed P(TRUE)
values; among equally good thresholds the one nearest 0.5 wins. The overall accuracy adds the
rules' verdicts, which do not depend on the mode.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from frames_dspy.judge.autorater import Autorater
from frames_dspy.judge.labels import LabelledItem, labels_file, load_labels, split_by_question
from frames_dspy.judge.rules import decide


def collect(items: Sequence[LabelledItem], autorater: Autorater) -> list[dict[str, Any]]:
    """One record per item: the rule's verdict, or the judge's (text, P(TRUE), seconds)."""
    records = []
    for item in items:
        record: dict[str, Any] = {"case": item.case, "id": item.id, "kind": item.kind}
        record["label"] = item.label
        rule = decide(item.question, item.gold, item.response)
        if rule is not None:
            records.append({**record, "method": rule.rule, "text": rule.correct})
            continue
        started = time.perf_counter()
        verdict = autorater.lm_verdict(item.question, item.gold, item.response)
        records.append(
            {
                **record,
                "method": verdict.method,
                "text": verdict.correct,
                "p_true": verdict.p_true,
                "seconds": round(time.perf_counter() - started, 3),
                "explanation": verdict.explanation,
            }
        )
        print(f"\r{len(records)}/{len(items)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return records


def fit_threshold(records: Sequence[dict[str, Any]]) -> float:
    """The P(TRUE) threshold with the best accuracy on ``records`` (nearest 0.5 on ties)."""
    scored = sorted({r["p_true"] for r in records if r.get("p_true") is not None})
    candidates = [0.0] + [(a + b) / 2 for a, b in zip(scored, scored[1:], strict=False)] + [1.01]
    return max(candidates, key=lambda t: (_correct(records, t), -abs(t - 0.5)))


def _said(record: dict[str, Any], threshold: float | None) -> bool:
    if threshold is None or record.get("p_true") is None:
        return record["text"] is True
    return record["p_true"] >= threshold


def _correct(records: Sequence[dict[str, Any]], threshold: float | None) -> int:
    return sum(_said(r, threshold) == r["label"] for r in records)


def _key(record: dict[str, Any]) -> Any:
    return record["id"] if record.get("id") is not None else record["case"]


def analyse(records: list[dict[str, Any]], items: Sequence[LabelledItem], seed: int = 0):
    """Text against P(TRUE), held out both ways; a JSON-ready report."""
    lm = [r for r in records if r["method"] in ("judge", "judge_error")]
    rules = [r for r in records if r not in lm]
    rules_correct = sum((r["text"] is True) == r["label"] for r in rules)
    by_case = {r["case"]: r for r in lm}
    design, held_out = split_by_question(items, seed)
    halves = [[by_case[i.case] for i in part if i.case in by_case] for part in (design, held_out)]
    split_rows = []
    for fit_on, score_on, name in ((0, 1, "fit design, score held-out"), (1, 0, "the reverse")):
        threshold = fit_threshold(halves[fit_on])
        split_rows.append(
            {
                "direction": name,
                "threshold": threshold,
                "items": len(halves[score_on]),
                "p_true_correct": _correct(halves[score_on], threshold),
                "text_correct": _correct(halves[score_on], None),
            }
        )
    loqo_correct, loqo_thresholds = 0, []
    for key in {_key(r) for r in lm}:
        rest = [r for r in lm if _key(r) != key]
        threshold = fit_threshold(rest)
        loqo_thresholds.append(threshold)
        loqo_correct += _correct([r for r in lm if _key(r) == key], threshold)
    seconds = [r["seconds"] for r in lm if r.get("seconds") is not None]
    n, n_lm = len(records), len(lm)
    split_p = sum(row["p_true_correct"] for row in split_rows)
    text_correct = _correct(lm, None)
    return {
        "items": n,
        "rule_verdicts": len(rules),
        "rules_correct": rules_correct,
        "lm_items": n_lm,
        "lm_with_p_true": sum(r.get("p_true") is not None for r in lm),
        "judge_errors": sum(r["method"] == "judge_error" for r in lm),
        "median_seconds": statistics.median(seconds) if seconds else None,
        "text": {
            "lm_accuracy": text_correct / n_lm if n_lm else None,
            "overall_accuracy": (rules_correct + text_correct) / n,
        },
        "p_true_split_halves": {
            "rows": split_rows,
            "lm_accuracy": split_p / n_lm if n_lm else None,
            "overall_accuracy": (rules_correct + split_p) / n,
        },
        "p_true_leave_one_question_out": {
            "lm_accuracy": loqo_correct / n_lm if n_lm else None,
            "overall_accuracy": (rules_correct + loqo_correct) / n,
            "thresholds": {
                "min": min(loqo_thresholds, default=None),
                "median": statistics.median(loqo_thresholds) if loqo_thresholds else None,
                "max": max(loqo_thresholds, default=None),
            },
        },
        "threshold_fitted_on_all (in-sample, not a held-out number)": fit_threshold(lm),
        "lm_per_kind": _per_kind(lm),
    }


def _per_kind(lm: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in lm:
        row = out.setdefault(r["kind"] or "-", {"items": 0, "text_correct": 0, "p_true": []})
        row["items"] += 1
        row["text_correct"] += (r["text"] is True) == r["label"]
        if r.get("p_true") is not None:
            row["p_true"].append(round(r["p_true"], 3))
    return dict(sorted(out.items()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=Path, default=None, help="labelled JSONL")
    parser.add_argument("--judge-model", default="local", help="judge spec (default local)")
    parser.add_argument("--out", type=Path, default=None, help="save the raw records here")
    parser.add_argument("--from", dest="saved", type=Path, default=None, help="saved records")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split by question")
    args = parser.parse_args(argv)
    items = load_labels(labels_file(args.labels))
    if args.saved:
        records = [json.loads(line) for line in args.saved.read_text().splitlines() if line]
    else:
        from frames_dspy.lm.cache import use_cache
        from frames_dspy.run.session import make_judge
        from frames_dspy.run.settings import ModelDataSettings

        use_cache("off")  # every reply is the model's own, timed
        _, autorater = make_judge(ModelDataSettings(model=args.judge_model))
        records = collect(items, autorater)
        if args.out:
            args.out.write_text("".join(json.dumps(r) + "\n" for r in records))
    print(json.dumps(analyse(records, items, args.seed), indent=2))


if __name__ == "__main__":
    main()
