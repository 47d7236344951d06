"""Is run B really better than run A, or is it noise? (The library behind
``python -m frames_dspy.compare``.)

Two runs of ``python -m frames_dspy.evaluate`` are compared question by question: each
question answered under condition A in run A is paired with the same question under condition
B in run B. Pairing removes the question-to-question spread (some questions are easy for
every setup) so a real gain shows with far fewer questions than two independent accuracies
with their own intervals would need.

Per condition pair this module gives accuracy A and B, the difference B - A with a paired
bootstrap 95% interval, an exact McNemar test on the questions that flipped, gold-article
recall (after the last round and after round 1) the same paired way, tokens per question,
error counts, and how each side searched (the near-repeat share of its LM's queries; an
agent's steps and articles read, None for a side without a trajectory). Functions return
dataclasses; :mod:`frames_dspy.commands.compare` prints them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from frames_dspy.base.settings import setting
from frames_dspy.programs.conditions import AGENT_KNOBS, MULTIHOP_KNOBS
from frames_dspy.results.records import QuestionRecord, RecordError
from frames_dspy.results.run_folder import load_records
from frames_dspy.results.stats import mcnemar_exact, paired_bootstrap_ci
from frames_dspy.results.summary import ConditionSummary, ordered_conditions, summarize_records

logger = logging.getLogger(__name__)

__all__ = [
    "CompareError",
    "CompareConfig",
    "Run",
    "Flips",
    "SideErrors",
    "PairComparison",
    "Comparison",
    "load_run",
    "compare_conditions",
    "compare_runs",
    "comparison_dict",
    "format_interval",
    "short_hash",
    "SMALL_N",
]

#: Settings that differ between any two runs without changing what an answer means.
_IGNORED_SETTINGS = ("out", "threads", "mlflow", "mlflow_experiment", "mlflow_traces")

#: Command-line settings that only shape the programs run. When both runs recorded the spec of
#: each program they ran (``programs`` in config.json), the specs are compared instead: with
#: ``--program`` the command line's rounds/k/n_docs are defaults that were never used.
_SPEC_SETTINGS = ("conditions", "program", *MULTIHOP_KNOBS, *AGENT_KNOBS)

#: Below this many paired questions a percentile bootstrap interval is too narrow to trust.
SMALL_N = 30


class CompareError(ValueError):
    """Two run folders cannot be compared as asked; the message names them and the fix."""


#: The command lines that pair two runs: the compare command and report.html of two runs.
_PAIRING = ("compare", "report")


@dataclass
class CompareConfig:
    """What ``python -m frames_dspy.compare`` compares, and how."""

    run_a: str
    run_b: str
    #: Condition of run A (and of run B unless ``condition_b`` is set); None: every shared one.
    condition: str | None = setting(
        None,
        group="options",
        metavar="NAME",
        entries=_PAIRING,
        help="compare this condition only (of run A, and of run B unless --condition-b); "
        "default: every condition both runs have",
    )
    condition_b: str | None = setting(
        None,
        group="options",
        metavar="NAME",
        entries=_PAIRING,
        help="run B's condition to pair with --condition, e.g. program vs multistep-vanilla",
    )
    bootstrap: int = setting(
        10_000,
        kind="positive_int",
        group="options",
        metavar="N",
        entries=_PAIRING,
        help="bootstrap resamples (default %(default)s)",
    )
    seed: int = setting(
        0,
        kind="int",
        group="options",
        entries=("compare",),
        help="bootstrap seed (default %(default)s)",
    )
    allow_different_corpus: bool = setting(
        False,
        kind="flag",
        group="options",
        entries=_PAIRING,
        help="compare runs made on different corpora anyway (the output warns loudly)",
    )


@dataclass
class Run:
    """A run folder as read: its config and its records per condition and question id."""

    path: Path
    config: dict[str, Any]
    records: dict[str, dict[Any, QuestionRecord]]

    def conditions(self) -> list[str]:
        return _ordered(self.records)


@dataclass
class Flips:
    """Questions whose verdict changed one way between A and B."""

    count: int
    ids: list[Any]


@dataclass
class SideErrors:
    """Failures on one side, among the paired questions (both count as not correct)."""

    program: int
    judge: int
    program_ids: list[Any]
    judge_ids: list[Any]


@dataclass
class PairComparison:
    """Condition A of run A against condition B of run B, on the questions both answered.

    Differences are B - A. ``a_to_b`` holds the questions A got wrong and B got right,
    ``b_to_a`` those A got right and B got wrong; McNemar's test uses their counts.
    Intervals are ``[low, high]``, or None when nothing was paired.
    """

    condition_a: str
    condition_b: str
    n: int
    only_in_a: list[Any]
    only_in_b: list[Any]
    #: None (with the accuracy fields, the flips and McNemar's p) when a run is retrieval only:
    #: it answered nothing, so it has no accuracy to compare.
    correct_a: int | None
    correct_b: int | None
    accuracy_a: float | None
    accuracy_b: float | None
    accuracy_diff: float | None
    accuracy_ci95: list[float] | None
    interval_excludes_zero: bool
    mcnemar_p: float | None
    a_to_b: Flips
    b_to_a: Flips
    #: Questions in the recall pairing: those with a gold article in at least one run.
    recall_n: int
    #: Paired questions left out of the recall pairing: recall null in both (no gold article).
    recall_no_gold: int
    #: Paired questions whose recall is null in one run only; counted as 0 there.
    recall_null_a_only: int
    recall_null_b_only: int
    recall_final_a: float | None
    recall_final_b: float | None
    recall_final_diff: float | None
    recall_final_ci95: list[float] | None
    recall_round1_a: float | None
    recall_round1_b: float | None
    recall_round1_diff: float | None
    recall_round1_ci95: list[float] | None
    tokens_per_q_a: float | None
    tokens_per_q_b: float | None
    #: How each side searched (None where a side has no such figure): the near-repeat share
    #: of its LM's queries, and an agent's steps and articles read per question.
    near_repeat_a: float | None
    near_repeat_b: float | None
    steps_per_q_a: float | None
    steps_per_q_b: float | None
    articles_read_per_q_a: float | None
    articles_read_per_q_b: float | None
    errors: dict[str, SideErrors]
    verdict: str
    #: Program spec fields that differ: name -> [value in A, value in B]; None when a run
    #: did not record the spec of its condition.
    spec_differ: dict[str, list[Any]] | None = None


@dataclass
class Comparison:
    """Every condition pair compared between two runs, with what was checked about them."""

    run_a: str
    run_b: str
    bootstrap: int
    seed: int
    dataset_sha256_a: str | None
    dataset_sha256_b: str | None
    corpus_sha256_a: str | None
    corpus_sha256_b: str | None
    corpus_differs: bool
    #: Settings whose values differ: name -> [value in A, value in B].
    settings_differ: dict[str, list[Any]]
    warnings: list[str] = field(default_factory=list)
    pairs: list[PairComparison] = field(default_factory=list)


_ordered = ordered_conditions


def _sorted_ids(ids) -> list[Any]:
    return sorted(ids, key=lambda i: (isinstance(i, str), i))


def load_run(path: str | Path) -> Run:
    """Read a run folder's ``config.json`` and ``predictions.jsonl``.

    A question recorded twice under one condition keeps its last record (a warning is logged).

    Raises:
        CompareError: the folder, its config.json or its predictions.jsonl is missing or
            unreadable.
    """
    path = Path(path)
    made_by = "pass a run folder written by `python -m frames_dspy.evaluate --out FOLDER`"
    if not path.is_dir():
        raise CompareError(f"{path} is not a folder; {made_by}")
    config_path = path / "config.json"
    if not config_path.is_file():
        raise CompareError(f"{path} has no config.json, so it is not a run folder; {made_by}")
    predictions = path / "predictions.jsonl"
    if not predictions.is_file():
        raise CompareError(
            f"{path} has no predictions.jsonl: the run has not finished a question yet; "
            f"resume it with `python -m frames_dspy.evaluate --out {path}` and its settings"
        )
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise CompareError(f"{config_path} is not valid JSON ({err}); restore it") from None
    if not isinstance(config, dict):
        raise CompareError(f"{config_path} does not hold a JSON object; restore it")
    try:
        rows = load_records(path)
    except RecordError as err:
        raise CompareError(str(err)) from None

    records: dict[str, dict[Any, QuestionRecord]] = {}
    duplicates = 0
    for row in rows:
        by_id = records.setdefault(row.condition, {})
        duplicates += row.id in by_id
        by_id[row.id] = row
    if duplicates:
        logger.warning("%s: %d questions recorded twice; the last record counts", path, duplicates)
    return Run(path=path, config=config, records=records)


def _recall_at(record: QuestionRecord, which: str) -> float | None:
    """Recall after round 1 or the last round; None when the question has no gold article."""
    return record.round1_recall if which == "round1" else record.final_recall


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def _side_errors(records: list[QuestionRecord], ids: list[Any]) -> SideErrors:
    program = [i for i, r in zip(ids, records, strict=True) if r.error]
    judge = [i for i, r in zip(ids, records, strict=True) if r.correct is None]
    return SideErrors(len(program), len(judge), program, judge)


def format_interval(ci: list[float] | None) -> str:
    return "—" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def _verdict(diff: float | None, ci: list[float] | None, p: float) -> str:
    if diff is None or ci is None:
        return "no paired questions: nothing to compare"
    said = _interval_says(ci, "B is more accurate", "A is more accurate", "a difference")
    return f"B - A = {diff:+.3f} {format_interval(ci)}: {said} (McNemar p = {p:.3g})"


def _recall_verdict(diff: float | None, ci: list[float] | None) -> str:
    if diff is None or ci is None:
        return "no question with a gold article: no recall to compare"
    said = _interval_says(
        ci, "B finds more gold articles", "A finds more gold articles", "a difference in recall"
    )
    return f"final recall B - A = {diff:+.3f} {format_interval(ci)}: {said}"


def _interval_says(ci: list[float], b_higher: str, a_higher: str, what: str) -> str:
    if ci[0] > 0:
        return f"the interval excludes 0: {b_higher}"
    if ci[1] < 0:
        return f"the interval excludes 0: {a_higher}"
    return f"the interval includes 0: no evidence of {what}"


def compare_conditions(
    run_a: Run,
    run_b: Run,
    condition_a: str,
    condition_b: str,
    *,
    resamples: int = 10_000,
    seed: int = 0,
) -> PairComparison:
    """Pair ``condition_a`` of ``run_a`` with ``condition_b`` of ``run_b`` by question id.

    Raises:
        CompareError: a condition is missing from its run, or the two share no question.
    """
    for run, name, flag in (
        (run_a, condition_a, "--condition"),
        (run_b, condition_b, "--condition-b"),
    ):
        if name not in run.records:
            raise CompareError(
                f"condition {name!r} is not in run {run.path}; it has: "
                f"{', '.join(run.conditions()) or 'no predictions'}; choose one with {flag}"
            )
    side_a, side_b = run_a.records[condition_a], run_b.records[condition_b]
    shared = _sorted_ids(set(side_a) & set(side_b))
    if not shared:
        raise CompareError(
            f"runs {run_a.path} ({condition_a}, {_id_span(side_a)}) and {run_b.path} "
            f"({condition_b}, {_id_span(side_b)}) share no question; run both on the same "
            "questions (evaluate's --ids, --split, --limit)"
        )
    recs_a = [side_a[i] for i in shared]
    recs_b = [side_b[i] for i in shared]
    recall = _paired_recall(recs_a, recs_b, resamples=resamples, seed=seed)
    unmeasured = [side for side, run in (("A", run_a), ("B", run_b)) if _retrieval_only(run)]
    if unmeasured:
        accuracy = _no_accuracy(unmeasured, recall)
    else:
        accuracy = _paired_accuracy(shared, recs_a, recs_b, resamples=resamples, seed=seed)
    return PairComparison(
        condition_a=condition_a,
        condition_b=condition_b,
        n=len(shared),
        only_in_a=_sorted_ids(set(side_a) - set(side_b)),
        only_in_b=_sorted_ids(set(side_b) - set(side_a)),
        **accuracy,
        **recall,
        **_search_figures(summarize_records(recs_a), summarize_records(recs_b)),
        errors={"a": _side_errors(recs_a, shared), "b": _side_errors(recs_b, shared)},
    )


def _search_figures(row_a: ConditionSummary, row_b: ConditionSummary) -> dict[str, Any]:
    """Tokens and how each side searched, from each side's summary of the paired questions."""
    return {
        "tokens_per_q_a": row_a.tokens_per_question,
        "tokens_per_q_b": row_b.tokens_per_question,
        "near_repeat_a": row_a.near_repeat_rate,
        "near_repeat_b": row_b.near_repeat_rate,
        "steps_per_q_a": row_a.steps_per_question,
        "steps_per_q_b": row_b.steps_per_question,
        "articles_read_per_q_a": row_a.articles_read_per_question,
        "articles_read_per_q_b": row_b.articles_read_per_question,
    }


def _retrieval_only(run: Run) -> bool:
    """Whether the run answered nothing (``--retrieval-only``), so has no accuracy."""
    return bool((run.config.get("settings") or {}).get("retrieval_only"))


def _paired_accuracy(shared, recs_a, recs_b, *, resamples: int, seed: int) -> dict[str, Any]:
    """Accuracy of both sides on the paired questions, the flips, McNemar's p and the verdict."""
    right_a = np.array([r.is_correct for r in recs_a], dtype=float)
    right_b = np.array([r.is_correct for r in recs_b], dtype=float)
    gained = [i for i, x, y in zip(shared, right_a, right_b, strict=True) if not x and y]
    lost = [i for i, x, y in zip(shared, right_a, right_b, strict=True) if x and not y]
    p = mcnemar_exact(len(lost), len(gained))
    acc_a, acc_b = float(right_a.mean()), float(right_b.mean())
    acc_ci = paired_bootstrap_ci(right_a, right_b, resamples=resamples, seed=seed)
    return {
        "correct_a": int(right_a.sum()),
        "correct_b": int(right_b.sum()),
        "accuracy_a": acc_a,
        "accuracy_b": acc_b,
        "accuracy_diff": acc_b - acc_a,
        "accuracy_ci95": acc_ci,
        "interval_excludes_zero": acc_ci is not None and (acc_ci[0] > 0 or acc_ci[1] < 0),
        "mcnemar_p": p,
        "a_to_b": Flips(len(gained), gained),
        "b_to_a": Flips(len(lost), lost),
        "verdict": _verdict(acc_b - acc_a, acc_ci, p),
    }


def _no_accuracy(unmeasured: list[str], recall: dict[str, Any]) -> dict[str, Any]:
    """The accuracy fields of a pair with a retrieval-only side: empty, and a recall verdict."""
    which = " and ".join(unmeasured)
    runs = "run" if len(unmeasured) == 1 else "runs"
    return {
        "correct_a": None,
        "correct_b": None,
        "accuracy_a": None,
        "accuracy_b": None,
        "accuracy_diff": None,
        "accuracy_ci95": None,
        "interval_excludes_zero": False,
        "mcnemar_p": None,
        "a_to_b": Flips(0, []),
        "b_to_a": Flips(0, []),
        "verdict": f"accuracy not measured ({runs} {which} retrieval only); "
        + _recall_verdict(recall["recall_final_diff"], recall["recall_final_ci95"]),
    }


def _paired_recall(recs_a, recs_b, *, resamples: int, seed: int) -> dict[str, Any]:
    """Recall of the paired questions, both sides, their difference and its interval.

    A question without a gold article in either run says nothing about retrieval and is left
    out; null on one side only (e.g. another corpus) counts as 0.
    """
    recall_rows = []
    no_gold = null_a_only = null_b_only = 0
    for ra, rb in zip(recs_a, recs_b, strict=True):
        null_a, null_b = ra.recall is None, rb.recall is None
        if null_a and null_b:
            no_gold += 1
            continue
        null_a_only += null_a
        null_b_only += null_b
        recall_rows.append((ra, rb))
    recall: dict[str, Any] = {
        "recall_n": len(recall_rows),
        "recall_no_gold": no_gold,
        "recall_null_a_only": null_a_only,
        "recall_null_b_only": null_b_only,
    }
    for which in ("final", "round1"):
        xs = [_recall_at(x, which) or 0.0 for x, _ in recall_rows]
        ys = [_recall_at(y, which) or 0.0 for _, y in recall_rows]
        mean_a, mean_b = _mean(xs), _mean(ys)
        recall[f"recall_{which}_a"] = mean_a
        recall[f"recall_{which}_b"] = mean_b
        recall[f"recall_{which}_diff"] = (
            None if mean_a is None or mean_b is None else mean_b - mean_a
        )
        recall[f"recall_{which}_ci95"] = paired_bootstrap_ci(xs, ys, resamples=resamples, seed=seed)
    return recall


def _id_span(records: dict[Any, Any]) -> str:
    ids = _sorted_ids(records)
    if not ids:
        return "no questions"
    return f"{len(ids)} questions, ids {ids[0]}..{ids[-1]}"


def short_hash(sha: str | None) -> str:
    return "none" if sha is None else sha[:12]


def _differ(a: dict[str, Any], b: dict[str, Any], ignored: tuple[str, ...]) -> dict[str, list]:
    return {
        key: [a.get(key), b.get(key)]
        for key in sorted(set(a) | set(b))
        if key not in ignored and a.get(key) != b.get(key)
    }


def compare_runs(config: CompareConfig) -> Comparison:
    """Check that two run folders are comparable and compare their condition(s).

    Raises:
        CompareError: a folder is not a run folder; the runs used different datasets, or
            different corpora without ``allow_different_corpus``; a condition is missing;
            a condition pair shares no question.
    """
    if config.condition_b is not None and config.condition is None:
        raise CompareError(
            f"--condition-b {config.condition_b!r} needs --condition too (the condition of "
            f"run A, {config.run_a})"
        )
    run_a, run_b = load_run(config.run_a), load_run(config.run_b)
    warnings: list[str] = []

    data_a, data_b, corpus_a, corpus_b, corpus_differs = _check_same_data(
        run_a, run_b, config.allow_different_corpus, warnings
    )

    if config.condition is None:
        shared = _ordered(set(run_a.records) & set(run_b.records))
        if not shared:
            raise CompareError(
                f"runs {run_a.path} and {run_b.path} share no condition ({run_a.path} has: "
                f"{', '.join(run_a.conditions()) or 'none'}; {run_b.path} has: "
                f"{', '.join(run_b.conditions()) or 'none'}); compare two different ones "
                "with --condition NAME_IN_A --condition-b NAME_IN_B"
            )
        names = [(c, c) for c in shared]
    else:
        names = [(config.condition, config.condition_b or config.condition)]
    pairs = [
        compare_conditions(run_a, run_b, a, b, resamples=config.bootstrap, seed=config.seed)
        for a, b in names
    ]

    specs_a = run_a.config.get("programs")
    specs_b = run_b.config.get("programs")
    ignored = _IGNORED_SETTINGS + (_SPEC_SETTINGS if specs_a and specs_b else ())
    for pair in pairs:
        spec_a = (specs_a or {}).get(pair.condition_a)
        spec_b = (specs_b or {}).get(pair.condition_b)
        if spec_a is not None and spec_b is not None:
            pair.spec_differ = _differ(spec_a, spec_b, ())
    settings_differ = _differ(
        run_a.config.get("settings") or {}, run_b.config.get("settings") or {}, ignored
    )
    return Comparison(
        run_a=str(run_a.path),
        run_b=str(run_b.path),
        bootstrap=config.bootstrap,
        seed=config.seed,
        dataset_sha256_a=data_a,
        dataset_sha256_b=data_b,
        corpus_sha256_a=corpus_a,
        corpus_sha256_b=corpus_b,
        corpus_differs=corpus_differs,
        settings_differ=settings_differ,
        warnings=warnings,
        pairs=pairs,
    )


def comparison_dict(comparison: Comparison) -> dict[str, Any]:
    """The comparison as plain JSON-ready data (what ``--json`` prints)."""
    return asdict(comparison)


def _check_same_data(run_a: Run, run_b: Run, allow_different_corpus: bool, warnings: list[str]):
    """The runs' dataset and corpus hashes, refused if they differ (the corpus only if not
    allowed); a missing hash or an allowed corpus difference adds to ``warnings``."""
    data_a, data_b = run_a.config.get("dataset_sha256"), run_b.config.get("dataset_sha256")
    if data_a is not None and data_b is not None and data_a != data_b:
        raise CompareError(
            f"runs {run_a.path} and {run_b.path} were made on different datasets "
            f"(dataset_sha256 {short_hash(data_a)}… vs {short_hash(data_b)}…), so the same id "
            "may be another question; rerun one with the other's --dataset and --revision"
        )
    if data_a is None or data_b is None:
        missing = run_a.path if data_a is None else run_b.path
        warnings.append(
            f"{missing}/config.json has no dataset_sha256: cannot check that both runs "
            "asked the same questions"
        )

    corpus_a, corpus_b = run_a.config.get("corpus_sha256"), run_b.config.get("corpus_sha256")
    corpus_differs = corpus_a is not None and corpus_b is not None and corpus_a != corpus_b
    if corpus_differs:
        if not allow_different_corpus:
            raise CompareError(
                f"runs {run_a.path} and {run_b.path} used different corpora (corpus_sha256 "
                f"{short_hash(corpus_a)}… vs {short_hash(corpus_b)}…): recall and answers are not "
                "comparable across corpora; rerun one with the other's --corpus and "
                "--distractors, or pass --allow-different-corpus to compare anyway"
            )
        warnings.append(
            f"DIFFERENT CORPORA (corpus_sha256 {short_hash(corpus_a)}… vs "
            f"{short_hash(corpus_b)}…), compared only because of --allow-different-corpus: "
            "recall and answers are NOT comparable across corpora; a difference may come "
            "from the corpus, not the method"
        )
    return data_a, data_b, corpus_a, corpus_b, corpus_differs
