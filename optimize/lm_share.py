"""What the LM adds to a compiled program: its recall beside its no-LM parts alone (the same
program with the query writer off, no LM call) and the no-LM references ``bm25-N`` and
``phrases-N`` at each question's own article count, on dev (from the chosen trial) and held out
(from the test run, with a paired interval), each said in one plain line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from frames_dspy.programs import NoLMReferences, lm_queries_per_round
from frames_dspy.results.records import QuestionRecord, read_records
from frames_dspy.results.stats import paired_bootstrap_ci
from frames_dspy.results.summary import ConditionSummary
from optimize.scores import ChosenTrial, TestScore, TrialFigures

__all__ = [
    "dev_lm_share",
    "dev_share_check",
    "held_out_verdict",
    "lm_queries_line",
    "lm_shown",
    "lm_verdict",
    "test_lm_share",
]


def dev_lm_share(chosen: TrialFigures, spec) -> dict[str, Any]:
    """The chosen trial's no-LM figures on dev (see :meth:`optimize.study.Objective.lm_share`),
    as the :class:`~optimize.scores.ChosenTrial` fields of those names; an agent has no no-LM
    parts and no rounds of written queries (both None)."""
    agent = spec.kind == "agent"
    return {
        "kind": spec.kind,
        "lm_queries_per_round": None if agent else lm_queries_per_round(spec),
        "dev_no_lm_recall": chosen.no_lm_recall,
        "dev_references": {"bm25": chosen.ref_bm25, "phrases": chosen.ref_phrases},
        "dev_lift": chosen.lift,
    }


def lm_verdict(chosen: ChosenTrial) -> str:
    """One plain line on what the LM added to the pick on dev."""
    if chosen.kind == "agent":
        line = (
            "the pick is the agent: every article it reads, its LM chose, so it has no no-LM "
            "parts to weigh (--lm-queries does not apply)"
        )
        if isinstance(chosen.dev_lift, int | float):
            line += (
                f"; dev lift over the stronger no-LM reference at the articles it read "
                f"{chosen.dev_lift:+.3f}"
            )
        return line
    n = chosen.lm_queries_per_round
    if not n:
        return (
            "the LM added nothing: the pick sends no LM query (its articles come from the "
            "question and its phrases alone)"
        )
    line = f"the pick's LM writes {n} {'query' if n == 1 else 'queries'} a round"
    alone, recall = chosen.dev_no_lm_recall, chosen.dev_recall
    if isinstance(alone, int | float) and isinstance(recall, int | float):
        line += (
            f"; dev recall {recall:.3f} against {alone:.3f} for its no-LM parts alone at the "
            f"same budget (the LM's share {recall - alone:+.3f})"
        )
    if isinstance(chosen.dev_lift, int | float):
        line += f"; lift over the stronger no-LM reference {chosen.dev_lift:+.3f}"
    return line


def test_lm_share(
    summary: Mapping[str, ConditionSummary], test_dir: Path, retriever
) -> dict[str, Any]:
    """The test run's no-LM figures: the program's no-LM parts alone (its ``program-no-lm``
    row, when it writes queries) and bm25-N / phrases-N at each question's own count, as
    the :class:`~optimize.scores.TestScore` fields of those names."""
    every = read_records(test_dir / "predictions.jsonl")
    records = [r for r in every if r.condition == "program"]
    refs = NoLMReferences(retriever).strongest(records)
    alone = summary.get("program-no-lm")
    return {
        "no_lm_recall": alone.final_recall if alone else None,
        "references": {"bm25": refs["bm25"], "phrases": refs["phrases"]},
        **_paired_lm_share(records, [r for r in every if r.condition == "program-no-lm"]),
    }


def _paired_lm_share(program: Sequence[QuestionRecord], alone: Sequence[QuestionRecord]):
    """The LM's share held out: final recall of the program minus its no-LM parts alone on
    the same questions (those with a gold article), with a paired bootstrap 95% interval."""
    by_id = {r.id: r for r in alone}
    return _paired_share(
        (by_id[r.id].final_recall or 0.0, r.final_recall or 0.0)
        for r in program
        if r.id in by_id and (r.final_recall is not None or by_id[r.id].final_recall is not None)
    )


def _paired_share(pairs: Iterable[tuple[float, float]]) -> dict[str, Any]:
    """``lm_share`` (mean of program minus no-LM parts), its paired 95% interval and ``n``
    from (no-LM parts, program) recall pairs; {} when there is none."""
    pairs = list(pairs)
    if not pairs:
        return {}
    xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
    return {
        "lm_share": round(sum(ys) / len(ys) - sum(xs) / len(xs), 6),
        "lm_share_ci95": paired_bootstrap_ci(xs, ys),
        "lm_share_n": len(pairs),
    }


def dev_share_check(records: Sequence[QuestionRecord], alone: dict[str, float]) -> dict[str, Any]:
    """The pick's LM share on dev, paired by question: its records' final recall against
    ``alone`` (its no-LM parts' recall by question id, see
    :func:`frames_dspy.programs.no_lm_recalls`); {} when they share no question."""
    return _paired_share((alone[r.id], r.final_recall or 0.0) for r in records if r.id in alone)


def lm_shown(check: dict[str, Any]) -> bool:
    """Whether a share check shows the LM adding recall (paired 95% interval above 0)."""
    ci = check.get("lm_share_ci95")
    return bool(ci) and ci[0] > 0


def lm_queries_line(weighed: dict[str, Any]) -> str:
    """One plain line on the ``--lm-queries if-shown`` decision: ``weighed`` holds ``kept``
    and, when the dev records could be paired, a :func:`dev_share_check`."""
    if "lm_share" not in weighed:
        return "the LM's share on dev could not be paired: program.json keeps the LM's queries"
    ci = weighed["lm_share_ci95"]
    share = (
        f"the LM's share on dev {weighed['lm_share']:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}] "
        f"(paired 95% interval, {weighed['lm_share_n']} questions)"
    )
    if weighed["kept"]:
        return f"{share} is above 0: program.json keeps the LM's queries"
    return (
        f"{share} is not shown above 0: program.json is the pick's no-LM parts alone (no LM "
        "call); the LM program is program-lm.json (--lm-queries always keeps it)"
    )


def held_out_verdict(test: TestScore) -> str:
    """The test recall beside the no-LM parts alone and both references; for a program that
    writes queries, a second line: the LM's share held out, with its paired interval."""
    refs = test.references or {}
    parts = [f"test recall {test.figures.final_recall or 0.0:.3f}"]
    if isinstance(test.no_lm_recall, int | float):
        parts.append(f"its no-LM parts alone {test.no_lm_recall:.3f}")
    for kind in ("bm25", "phrases"):
        if isinstance(refs.get(kind), int | float):
            parts.append(f"{kind}-N {refs[kind]:.3f}")
    line = "; ".join(parts) + " (references at each question's own article count N, no LM)"
    ci = test.lm_share_ci95
    if isinstance(test.lm_share, int | float) and ci:
        if ci[0] > 0:
            said = "the LM added recall"
        elif ci[1] < 0:
            said = "the LM lost recall: its no-LM parts alone find more, at no token cost"
        else:
            said = "the LM added nothing shown: its no-LM parts alone do as well, at no token cost"
        line += (
            f"\nheld out, the LM's share (recall minus its no-LM parts alone, paired 95% "
            f"interval, {test.lm_share_n} questions): {test.lm_share:+.3f} "
            f"[{ci[0]:+.3f}, {ci[1]:+.3f}]: {said}"
        )
    return line
