"""Loading labelled judge items, splitting them by question, and scoring the rules on them."""

from __future__ import annotations

import fnmatch
import json
import random
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from frames_dspy.base.paths import JUDGE_LABELS_ENV
from frames_dspy.judge.labels import (
    JUDGE_DEV,
    SPLIT_SEED,
    LabelledItem,
    labels_file,
    load_labels,
    score_rules,
    select_split,
    split_by_question,
)
from frames_dspy.judge.rules import RuleVerdict

ROWS = [
    {"case": 1, "id": 14, "question": "Which player?", "gold": "This was Lena Marsh.",
     "response": "Léna Marsh", "label": True, "kind": "exact"},
    {"case": 2, "id": 14, "question": "Which player?", "gold": "This was Lena Marsh.",
     "response": "It's either Léna Marsh or Ivo Brandt.", "label": False, "kind": "hedge"},
    {"case": 3, "id": 253, "question": "Which chain?", "gold": "Grand Union Bakery",
     "response": "GUB.", "label": True, "kind": "paraphrase"},
    {"case": 4, "id": 6, "question": "How many?", "gold": "9", "response": "nine",
     "label": True, "kind": "numeric_format"},
]  # fmt: skip


@pytest.fixture
def labels(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    return path


def test_load_labels(labels):
    items = load_labels(labels)
    assert [i.case for i in items] == [1, 2, 3, 4]
    assert items[0] == LabelledItem("Which player?", "This was Lena Marsh.", "Léna Marsh", True,
                                    "exact", 14, 1)  # fmt: skip


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "invalid JSON on line 1"),
        ('{"question": "q", "gold": "g", "label": true}', "lacks \\['response'\\]"),
        ('{"question": "q", "gold": "g", "response": "r", "label": "yes"}', "label 'yes'"),
    ],
)
def test_load_labels_names_the_bad_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        load_labels(path)


def test_split_by_question_keeps_a_question_in_one_half_and_is_seeded(labels):
    items = load_labels(labels)
    design, held_out = split_by_question(items, seed=0)
    assert len(design) + len(held_out) == len(items)
    assert not {i.id for i in design} & {i.id for i in held_out}
    assert split_by_question(items, seed=0) == (design, held_out)
    # the ids sort as numbers (6, 14, 253; not as text "14", "253", "6") before the shuffle
    ids = [6, 14, 253]
    random.Random(0).shuffle(ids)
    assert {i.id for i in design} == set(ids[: len(ids) // 2])


def test_select_split_picks_a_half_of_the_fixed_split(labels):
    items = load_labels(labels)
    dev, held_out = split_by_question(items)
    assert (dev, held_out) == split_by_question(items, seed=SPLIT_SEED)
    assert select_split(items, "dev") == dev and select_split(items, "held-out") == held_out
    assert select_split(items, "all") == items
    with pytest.raises(ValueError, match="unknown split 'test'; choose one of dev, held-out, all"):
        select_split(items, "test")


def test_score_rules_counts_coverage_precision_rules_and_kinds(labels):
    report = score_rules(load_labels(labels))
    assert (report.items, report.decided, report.correct) == (4, 3, 3)
    assert report.coverage == 0.75 and report.precision == 1.0
    assert report.per_rule["hedge"] == {"verdicts": 1, "correct": 1}
    assert report.per_kind["paraphrase"]["abstained"] == 1
    assert [i.case for i in report.abstained] == [3]


def test_score_rules_lists_wrong_verdicts(labels):
    def always_false(question, gold, response):
        return RuleVerdict(False, "refusal", "test")

    report = score_rules(load_labels(labels), always_false)
    assert report.precision == 0.25 and len(report.wrong) == 3


def _benchmark(*args: str) -> subprocess.CompletedProcess:
    repo = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "benchmarks.judge_rules", *args]
    return subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=60)


def test_benchmark_prints_tables_and_json(labels):
    text = _benchmark("--labels", str(labels), "--show", "all", "--split", "all")
    assert text.returncode == 0, text.stderr
    assert "held-out half" in text.stdout
    assert "case 3 [paraphrase, label True] abstain" in text.stdout
    dev = _benchmark("--labels", str(labels), "--show", "all")  # the dev half only, by default
    assert "dev half" in dev.stdout and "held-out half" not in dev.stdout
    report = json.loads(_benchmark("--labels", str(labels), "--json").stdout)
    assert report["all"]["decided"] == 3 and report["held_out"]["items"] == 3


def test_the_projects_labels_are_installed_with_the_package():
    items = load_labels(JUDGE_DEV)
    assert len(items) == 160 and sum(item.label for item in items) == 80
    assert len({item.id for item in items}) == 80
    assert (JUDGE_DEV.parent / "README.md").is_file()  # how they were made
    # Package data, so an installed (not editable) package has them too.
    repo = Path(__file__).resolve().parents[2]
    pyproject = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["frames_dspy.judge"]
    package = repo / "frames_dspy" / "judge"
    for path in (JUDGE_DEV, JUDGE_DEV.parent / "README.md"):
        name = path.relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name


def test_labels_file_is_the_one_given_else_the_variables_else_the_projects(
    labels, tmp_path, monkeypatch
):
    monkeypatch.delenv(JUDGE_LABELS_ENV, raising=False)
    assert labels_file() == JUDGE_DEV
    monkeypatch.setenv(JUDGE_LABELS_ENV, str(labels))
    assert labels_file() == labels
    assert labels_file(tmp_path / "mine.jsonl") == tmp_path / "mine.jsonl"


def test_benchmark_uses_the_projects_labels_by_default(monkeypatch):
    monkeypatch.delenv(JUDGE_LABELS_ENV, raising=False)
    report = json.loads(_benchmark("--json").stdout)
    assert report["all"]["items"] == 160


def test_benchmark_says_what_to_pass_without_labels(tmp_path):
    out = _benchmark("--labels", str(tmp_path / "absent.jsonl"))
    assert out.returncode != 0 and "--labels FILE" in out.stderr
