"""How far an autorater agrees with hand labels: accuracy, Cohen's kappa, and where it errs.

:func:`validate` runs an :class:`~frames_dspy.judge.autorater.Autorater` over labelled items
(see :mod:`frames_dspy.judge.labels`) and returns a :class:`ValidationReport`: accuracy,
Cohen's kappa, the confusion matrix, agreement per response kind, verdicts per method (each
rule and the LM judge) with their precision, the LM judge's seconds per item, and the items it
got wrong. A judge error counts as a FALSE verdict, as it counts as not correct in a run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tabulate import tabulate

from frames_dspy.judge.autorater import Autorater, Judgement, is_rule_method
from frames_dspy.judge.labels import LabelledItem

__all__ = [
    "ItemResult",
    "ValidationReport",
    "cohen_kappa",
    "validate",
    "render",
    "render_side_by_side",
]


@dataclass(frozen=True)
class ItemResult:
    """One labelled item, the autorater's verdict on it and the seconds it took."""

    item: LabelledItem
    verdict: Judgement
    seconds: float

    @property
    def said(self) -> bool:
        """The verdict as a run counts it (a judge error is not correct)."""
        return self.verdict.correct is True

    @property
    def agrees(self) -> bool:
        return self.said == self.item.label


def cohen_kappa(labels: Sequence[bool], verdicts: Sequence[bool]) -> float | None:
    """Cohen's kappa of two binary raters; None when chance agreement is total (undefined)."""
    n = len(labels)
    if n == 0 or n != len(verdicts):
        raise ValueError(f"need two equally long, non-empty lists (got {n} and {len(verdicts)})")
    observed = sum(a == b for a, b in zip(labels, verdicts, strict=True)) / n
    p_label, p_verdict = sum(labels) / n, sum(verdicts) / n
    chance = p_label * p_verdict + (1 - p_label) * (1 - p_verdict)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1 - chance)


@dataclass
class ValidationReport:
    """Agreement of an autorater with labelled items (see :func:`validate`)."""

    results: list[ItemResult] = field(default_factory=list)
    judge: str = ""
    labels: str = ""
    protocol: str = ""

    @property
    def n(self) -> int:
        return len(self.results)

    @property
    def accuracy(self) -> float:
        return sum(r.agrees for r in self.results) / self.n if self.n else 0.0

    @property
    def kappa(self) -> float | None:
        if not self.results:
            return None
        return cohen_kappa([r.item.label for r in self.results], [r.said for r in self.results])

    def confusion(self) -> dict[str, int]:
        """``tp`` (label true, verdict true), ``fn``, ``fp``, ``tn``, and ``judge_errors``."""
        out = {"tp": 0, "fn": 0, "fp": 0, "tn": 0, "judge_errors": 0}
        for r in self.results:
            key = ("t" if r.said == r.item.label else "f") + ("p" if r.said else "n")
            out[key] += 1
            out["judge_errors"] += r.verdict.error
        return out

    def per_kind(self) -> dict[str, dict[str, int]]:
        """Items, agreements, disagreements and LM-judged items per response kind."""
        out: dict[str, dict[str, int]] = {}
        for r in self.results:
            row = out.setdefault(r.item.kind or "-", {"n": 0, "agree": 0, "disagree": 0, "lm": 0})
            row["n"] += 1
            row["agree" if r.agrees else "disagree"] += 1
            row["lm"] += not r.verdict.by_rule
        return dict(sorted(out.items()))

    def per_method(self) -> dict[str, dict[str, Any]]:
        """Verdicts per method (each rule, ``judge``, ``judge_error``) and their precision."""
        out: dict[str, dict[str, Any]] = {}
        for r in self.results:
            row = out.setdefault(r.verdict.method, {"verdicts": 0, "correct": 0})
            row["verdicts"] += 1
            row["correct"] += r.agrees
        for row in out.values():
            row["precision"] = row["correct"] / row["verdicts"]
        return dict(sorted(out.items(), key=lambda kv: (-kv[1]["verdicts"], kv[0])))

    def _part(self, by_rule: bool) -> dict[str, Any]:
        part = [r for r in self.results if r.verdict.by_rule == by_rule]
        correct = sum(r.agrees for r in part)
        seconds = [r.seconds for r in part]
        return {
            "verdicts": len(part),
            "share": len(part) / self.n if self.n else 0.0,
            "correct": correct,
            "precision": correct / len(part) if part else None,
            "median_seconds": statistics.median(seconds) if seconds else None,
            "total_seconds": sum(seconds),
        }

    @property
    def rules(self) -> dict[str, Any]:
        """The rules' verdicts: how many, their share of the items, their precision, time."""
        return self._part(True)

    @property
    def lm(self) -> dict[str, Any]:
        """The LM judge's verdicts (judge errors included): count, share, precision, time."""
        part = self._part(False)
        p_true = [r.verdict.p_true for r in self.results if r.verdict.p_true is not None]
        return {**part, "with_p_true": len(p_true)}

    def disagreements(self) -> list[ItemResult]:
        return [r for r in self.results if not r.agrees]

    def to_dict(self) -> dict[str, Any]:
        """Everything as one JSON-ready object."""
        return {
            "labels": self.labels,
            "judge": self.judge,
            "protocol": self.protocol,
            "n": self.n,
            "accuracy": self.accuracy,
            "kappa": self.kappa,
            "confusion": self.confusion(),
            "rules": self.rules,
            "lm": self.lm,
            "per_method": self.per_method(),
            "per_kind": self.per_kind(),
            "disagreements": [
                {
                    "case": r.item.case,
                    "id": r.item.id,
                    "kind": r.item.kind,
                    "label": r.item.label,
                    "verdict": r.verdict.correct,
                    "method": r.verdict.method,
                    "p_true": r.verdict.p_true,
                    "gold": r.item.gold,
                    "response": r.item.response,
                    "explanation": r.verdict.explanation,
                }
                for r in self.disagreements()
            ],
        }


def validate(
    items: Sequence[LabelledItem],
    autorater: Autorater,
    *,
    threads: int = 1,
    on_result: Callable[[ItemResult], None] | None = None,
) -> ValidationReport:
    """Judge every item with ``autorater`` and compare with the labels.

    Args:
        items: Labelled items (:func:`frames_dspy.judge.labels.load_labels`).
        autorater: The autorater to measure, built as a run builds it
            (:func:`frames_dspy.run.session.make_judge`).
        threads: Items judged at once (the embedded model serialises its calls anyway).
        on_result: Called with each result as it finishes (progress).
    """

    def one(item: LabelledItem) -> ItemResult:
        started = time.perf_counter()
        verdict = autorater.judge(item.question, item.gold, item.response)
        result = ItemResult(item, verdict, time.perf_counter() - started)
        if on_result is not None:
            on_result(result)
        return result

    if threads <= 1:
        return ValidationReport([one(item) for item in items])
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return ValidationReport(list(pool.map(one, items)))


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _snippet(text: str, width: int = 90) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render(report: ValidationReport, *, show: int | None = None) -> str:
    """The report as text tables; ``show`` limits the disagreeing items listed."""
    c = report.confusion()
    rules, lm = report.rules, report.lm
    lines = [
        f"labels: {report.labels}",
        f"judge: {report.judge}" + (f" (protocol {report.protocol})" if report.protocol else ""),
        "",
        f"items {report.n}: accuracy {report.accuracy:.3f}, Cohen's kappa {_num(report.kappa)}",
        f"rules decided {rules['verdicts']} ({rules['share']:.1%}), precision "
        f"{_num(rules['precision'])}; the LM judged {lm['verdicts']} ({lm['share']:.1%}), "
        f"precision {_num(lm['precision'])}, median {_num(lm['median_seconds'], 2)} s per item, "
        f"P(TRUE) known for {lm['with_p_true']}",
        "",
        tabulate(
            [["label TRUE", c["tp"], c["fn"]], ["label FALSE", c["fp"], c["tn"]]],
            ["", "verdict TRUE", "verdict FALSE"],
            "github",
        ),
        f"(judge errors, counted as FALSE: {c['judge_errors']})",
        "",
        tabulate(
            [
                [
                    m,
                    "rule" if is_rule_method(m) else "LM",
                    row["verdicts"],
                    row["correct"],
                    f"{row['precision']:.3f}",
                ]
                for m, row in report.per_method().items()
            ],  # fmt: skip
            ["method", "by", "verdicts", "agree", "precision"],
            "github",
        ),
        "",
        tabulate(
            [
                [k, row["n"], row["agree"], row["disagree"], row["lm"]]
                for k, row in report.per_kind().items()
            ],  # fmt: skip
            ["kind", "items", "agree", "disagree", "LM-judged"],
            "github",
        ),
        "",
    ]
    wrong = report.disagreements()
    lines.append(f"disagreements: {len(wrong)}")
    for r in wrong[:show] if show is not None else wrong:
        item = r.item
        where = f"case {item.case}" if item.case is not None else f"id {item.id}"
        p_true = f", P(TRUE) {r.verdict.p_true:.2f}" if r.verdict.p_true is not None else ""
        lines.append(
            f"- {where} [{item.kind or '-'}] label {item.label}, verdict {r.verdict.correct} "
            f"by {r.verdict.method}{p_true}: gold {_snippet(item.gold, 60)!r} / response "
            f"{_snippet(item.response)!r}"
        )
    return "\n".join(lines)


def render_side_by_side(reports: dict[str, ValidationReport]) -> str:
    """Several protocols' reports on the same items: overall figures, then agreement per kind."""
    names = list(reports)
    overall = [
        [
            name,
            r.n,
            f"{r.accuracy:.3f}",
            _num(r.kappa),
            f"{r.rules['verdicts']} ({_num(r.rules['precision'])})",
            f"{r.lm['verdicts']} ({_num(r.lm['precision'])})",
        ]
        for name, r in reports.items()
    ]
    kinds = sorted({k for r in reports.values() for k in r.per_kind()})
    per_kind = [
        [kind]
        + [
            f"{row['agree']}/{row['n']}" if (row := r.per_kind().get(kind)) else "—"
            for r in reports.values()
        ]
        for kind in kinds
    ]
    return "\n".join(
        [
            tabulate(
                overall,
                [
                    "protocol",
                    "items",
                    "accuracy",
                    "kappa",
                    "by rules (precision)",
                    "with the LM (precision)",
                ],
                "github",
            ),  # fmt: skip
            "",
            tabulate(per_kind, ["kind (agree/items)", *names], "github"),
        ]
    )
