"""The per-condition summary: typed, read by attribute, and ``summary.json`` unchanged by it.

:class:`~frames_dspy.results.summary.ConditionSummary` is made by ``summarize`` alone and
written as ``summary.json`` by its ``to_dict``; the JSON files below were written by the code
before the type existed (a fake-server run of six conditions, and test records of five
conditions with an agent, duplicates and judge errors), so reading one back and writing it
again must give the same bytes.
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import fields
from pathlib import Path

import pytest

from frames_dspy.base.files import atomic_write_json
from frames_dspy.results.records import QuestionRecord
from frames_dspy.results.summary import (
    ConditionSummary,
    summarize,
    summarize_records,
    summary_from_json,
    summary_to_json,
)
from tests.results.test_records import _string_key_reads, imports_any, string_key_reads_of

REPO = Path(__file__).resolve().parents[2]
WRITTEN_BEFORE = sorted((REPO / "tests" / "fixtures" / "summaries").glob("*.json"))
FIELDS = [f.name for f in fields(ConditionSummary)]


@pytest.mark.parametrize("path", WRITTEN_BEFORE, ids=lambda p: p.stem)
def test_a_summary_json_written_before_reads_back_and_writes_the_same_bytes(path, tmp_path):
    summary = summary_from_json(json.loads(path.read_text(encoding="utf-8")))
    assert all(isinstance(row, ConditionSummary) for row in summary.values())
    atomic_write_json(tmp_path / "summary.json", summary_to_json(summary))
    assert (tmp_path / "summary.json").read_bytes() == path.read_bytes()


def test_the_files_written_before_hold_every_figure_and_an_agent():
    assert len(WRITTEN_BEFORE) == 2
    for path in WRITTEN_BEFORE:
        for name, row in json.loads(path.read_text(encoding="utf-8")).items():
            assert list(row) == FIELDS, f"{path.stem}: {name}"  # same keys, same order
    agent = summary_from_json(json.loads(WRITTEN_BEFORE[0].read_text()))["agent"]
    assert agent.agent_n == 2 and agent.stop_reasons == {"finish": 1, "steps": 1}
    assert agent.ci95 == pytest.approx((0.0945, 0.9055), abs=1e-4)


def record(condition, qid, correct, **fields_) -> QuestionRecord:
    return QuestionRecord(condition, qid, correct=correct, **{"judge_method": "exact", **fields_})


def test_a_summary_round_trips_through_its_json_row():
    rows = summarize(
        [
            record("naive", 1, True, cost_usd=0.5),
            record("naive", 2, None, judge_method="judge_error"),
            record("bm25-2", 1, False, recall=[0.5], gold_ids=["a"], error="E()", error_kind="E"),
        ]
    )
    for row in rows.values():
        text = json.dumps(row.to_dict())
        assert ConditionSummary.from_dict(json.loads(text)) == row
    assert rows["naive"].to_dict()["ci95"] == list(rows["naive"].ci95)  # a list, as JSON has it
    assert rows["naive"].cost_usd == 0.5 and rows["bm25-2"].program_errors_by_kind == {"E": 1}


def test_no_question_gives_nan_bounds_that_read_back():
    row = summarize_records([])
    back = ConditionSummary.from_dict(json.loads(json.dumps(row.to_dict())))
    assert row.n == back.n == 0 and row.accuracy is back.accuracy is None
    assert all(math.isnan(x) for x in back.ci95)


def test_a_row_missing_a_figure_or_with_an_unknown_one_names_it_and_the_fix():
    row = json.loads(WRITTEN_BEFORE[0].read_text())["naive"]
    del row["stop_reasons"]
    with pytest.raises(ValueError, match=r"without \['stop_reasons'\].*same --out"):
        ConditionSummary.from_dict(row)
    row = {**json.loads(WRITTEN_BEFORE[0].read_text())["naive"], "extra": 1}
    with pytest.raises(ValueError, match=r"unknown \['extra'\]"):
        ConditionSummary.from_dict(row)


def test_a_summary_row_has_no_string_keys():
    with pytest.raises(TypeError):
        summarize_records([record("naive", 1, True)])["accuracy"]  # type: ignore[index]


def test_every_figure_has_a_one_line_description():
    doc = ConditionSummary.__doc__ or ""
    described = {
        line.strip().split(":")[0]
        for line in doc.split("Attributes:")[1].splitlines()
        if line.startswith("        ") and not line.startswith("         ")
    }
    assert described == set(FIELDS)


# --- the guard: outside summary.py, summary figures are read as attributes ---------------------

#: Receivers that are not summary rows but share key names with them, and why they are dicts.
NOT_SUMMARIES = {
    "paired": "optimize.final's paired dev check (n, diff, ci95 of compiled minus uncompiled)",
}

#: Modules whose import means a module may hold summary rows.
_SUMMARY_MODULES = (
    "frames_dspy.results.summary",
    "frames_dspy.results.tables",
    "frames_dspy.results.run_folder",
    "frames_dspy.results.html_report",
    "frames_dspy.run.evaluation",
    "optimize.study",
    "optimize.final",
    "optimize.scores",
)


def test_summary_figures_are_read_as_attributes_outside_summary_py():
    offences = string_key_reads_of(
        FIELDS,
        importing=_SUMMARY_MODULES,
        receivers_not=NOT_SUMMARIES,
        owner=REPO / "frames_dspy" / "results" / "summary.py",
    )
    assert not offences, (
        "read summary figures as attributes (row.accuracy), or, if the receiver is not a "
        "summary row, add it to NOT_SUMMARIES with the reason:\n" + "\n".join(offences)
    )


def test_the_guard_catches_a_string_key_read_of_a_figure():
    tree = ast.parse(
        "from frames_dspy.results.summary import summarize\nx = s['tokens_per_question']\n"
    )
    assert imports_any(tree, _SUMMARY_MODULES)
    assert list(_string_key_reads(tree)) == [(2, "tokens_per_question", "s")]
