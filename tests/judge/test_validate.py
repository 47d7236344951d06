"""Tests for frames_dspy.judge.validate and ``python -m frames_dspy.judge validate``.

The statistics are checked against values worked out by hand; the command line runs the real
autorater (rules, then the embedded engine over a scripted fake llama) on a tiny labelled file.
The test marked ``real`` runs the command on the development labels with the embedded judge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from frames_dspy.base.paths import JUDGE_LABELS_ENV
from frames_dspy.commands.judge import main
from frames_dspy.judge import Judgement, LabelledItem
from frames_dspy.judge.labels import JUDGE_DEV, load_labels, select_split
from frames_dspy.judge.validate import ValidationReport, cohen_kappa, render, validate
from tests.lm_fakes import ScriptedLlama, judge_pieces

# --- Cohen's kappa and the report, by hand -----------------------------------------------------


def test_cohen_kappa_matches_a_hand_computation():
    # 10 items: labels 6 TRUE / 4 FALSE; verdicts agree on 4 TRUE and 3 FALSE, say TRUE
    # for 1 FALSE item and FALSE for 2 TRUE items. p_o = 7/10; verdicts say TRUE 5 times, so
    # p_e = 0.6 * 0.5 + 0.4 * 0.5 = 0.5 and kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4.
    labels = [True] * 6 + [False] * 4
    verdicts = [True] * 4 + [False] * 2 + [True] + [False] * 3
    assert cohen_kappa(labels, verdicts) == pytest.approx(0.4)
    assert cohen_kappa(labels, labels) == pytest.approx(1.0)
    # Always saying TRUE agrees on 6 of 10 and is no better than chance.
    assert cohen_kappa(labels, [True] * 10) == pytest.approx(0.0)
    assert cohen_kappa([True, True], [True, True]) is None  # chance agreement is total
    with pytest.raises(ValueError, match="equally long"):
        cohen_kappa([True], [])


class Scripted:
    """An autorater stand-in that gives set verdicts, one per response text."""

    def __init__(self, verdicts: dict[str, Judgement]):
        self.verdicts = verdicts

    def judge(self, question, gold, response):
        return self.verdicts[response]


def item(response, label, kind, case):
    return LabelledItem("q?", "gold", response, label, kind, id=case // 2, case=case)


ITEMS = [
    item("a", True, "exact", 1),
    item("b", True, "paraphrase", 2),
    item("c", True, "paraphrase", 3),
    item("d", False, "hedge", 4),
    item("e", False, "wrong_entity", 5),
    item("f", False, "wrong_entity", 6),
]
VERDICTS = {
    "a": Judgement(True, "exact", "same"),
    "b": Judgement(True, "judge", "alias", 0.9),
    "c": Judgement(None, "judge_error", "unparseable"),
    "d": Judgement(False, "hedge", "two answers"),
    "e": Judgement(True, "judge", "looks alike", 0.6),
    "f": Judgement(False, "judge", "another person", 0.2),
}


@pytest.mark.parametrize("threads", [1, 3])
def test_report_counts_by_hand(threads):
    report = validate(ITEMS, Scripted(VERDICTS), threads=threads)
    assert [r.item.case for r in report.results] == [1, 2, 3, 4, 5, 6]
    assert report.n == 6
    assert report.accuracy == pytest.approx(4 / 6)  # c (error counts FALSE) and e disagree
    # verdicts TRUE for a, b, e: p_e = 0.5 * 0.5 + 0.5 * 0.5 = 0.5; kappa = (4/6 - .5) / .5
    assert report.kappa == pytest.approx(1 / 3)
    assert report.confusion() == {"tp": 2, "fn": 1, "fp": 1, "tn": 2, "judge_errors": 1}
    assert report.rules["verdicts"] == 2 and report.rules["precision"] == 1.0
    assert report.rules["share"] == pytest.approx(2 / 6)
    assert report.lm["verdicts"] == 4 and report.lm["precision"] == pytest.approx(0.5)
    assert report.lm["with_p_true"] == 3
    assert report.per_method()["judge"] == {"verdicts": 3, "correct": 2, "precision": 2 / 3}
    assert report.per_method()["judge_error"]["precision"] == 0.0
    assert report.per_kind()["wrong_entity"] == {"n": 2, "agree": 1, "disagree": 1, "lm": 2}
    assert [r.item.case for r in report.disagreements()] == [3, 5]
    data = report.to_dict()
    json.dumps(data)
    assert data["n"] == 6 and data["accuracy"] == report.accuracy
    assert [d["case"] for d in data["disagreements"]] == [3, 5]
    text = render(report)
    assert "accuracy 0.667, Cohen's kappa 0.333" in text
    assert "- case 5 [wrong_entity] label False, verdict True by judge, P(TRUE) 0.60" in text
    assert "disagreements: 2" in text


def test_an_empty_report_has_no_kappa():
    assert ValidationReport().kappa is None and ValidationReport().accuracy == 0.0


# --- the command line ----------------------------------------------------------------------------

ROWS = [
    {"case": 1, "id": 1, "question": "Who won?", "gold": "Novak Djokovic",
     "response": "It was Novak Djokovic.", "label": True, "kind": "exact"},
    {"case": 2, "id": 1, "question": "Who won?", "gold": "Novak Djokovic",
     "response": "Either Djokovic or Nadal.", "label": False, "kind": "hedge"},
    {"case": 3, "id": 2, "question": "Which chain?", "gold": "Grand Union Bakery",
     "response": "GUB", "label": True, "kind": "paraphrase"},
    {"case": 4, "id": 3, "question": "Which key?", "gold": "C major",
     "response": "C major's relative minor, A minor.", "label": False, "kind": "wrong_entity"},
    {"case": 5, "id": 2, "question": "Which chain?", "gold": "Grand Union Bakery",
     "response": "Taco Barn", "label": False, "kind": "wrong_entity"},
]  # fmt: skip


@pytest.fixture
def labels(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    return path


@pytest.fixture
def true_judge(fake_llama_cpp, gguf):
    """The embedded engine over a fake that always writes TRUE with P(TRUE) 0.8."""

    def build(**kwargs):
        llama = ScriptedLlama(judge_pieces("TRUE"), {4: {"TRUE": 0.8, "FALSE": 0.2}})
        fake_llama_cpp.instances.append(llama)
        return llama

    fake_llama_cpp.Llama = build
    return f"local:{gguf}"


def test_validate_json_builds_the_judge_as_evaluate_does(labels, true_judge, capsys):
    argv = ["validate", "--labels", str(labels), "--judge-model", true_judge, "--json"]
    assert main([*argv, "--judge-protocol", "rules+lm"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 5 and out["accuracy"] == 0.8  # A minor is wrongly TRUE
    # labels TRUE 2/5, verdicts TRUE 3/5: p_e = .4 * .6 + .6 * .4 = .48, kappa = .32 / .52
    assert out["kappa"] == pytest.approx(0.32 / 0.52)
    assert out["rules"]["verdicts"] == 3 and out["rules"]["precision"] == 1.0
    assert out["per_method"]["different_name"]["verdicts"] == 1  # Taco Barn: no LM call
    assert out["lm"]["verdicts"] == 2 and out["lm"]["with_p_true"] == 2
    assert out["per_method"]["judge"]["verdicts"] == 2
    assert [d["case"] for d in out["disagreements"]] == [4]
    assert out["disagreements"][0]["p_true"] == pytest.approx(0.8)
    assert out["judge"].startswith("local/")


def test_validate_prints_tables(labels, true_judge, capsys):
    argv = ["validate", "--labels", str(labels), "--judge-model", true_judge]
    assert main([*argv, "--judge-protocol", "rules+lm"]) == 0
    out = capsys.readouterr().out
    assert "items 5: accuracy 0.800, Cohen's kappa 0.615" in out
    assert "| hedge" in out and "| judge" in out and "label FALSE" in out
    assert "- case 4 [wrong_entity] label False, verdict True by judge, P(TRUE) 0.80" in out


def test_validate_reads_the_labels_variable(labels, true_judge, monkeypatch, capsys):
    monkeypatch.setenv("FRAMES_JUDGE_LABELS", str(labels))
    assert main(["validate", "--judge-model", true_judge, "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 5


def test_validate_uses_the_projects_labels_and_says_so(true_judge, monkeypatch, capsys):
    monkeypatch.delenv(JUDGE_LABELS_ENV, raising=False)
    argv = ["validate", "--split", "dev", "--judge-model", true_judge, "--quiet"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["labels"] == f"{JUDGE_DEV} (dev half)"
    assert out["n"] == len(select_split(load_labels(JUDGE_DEV), "dev")) == 80
    assert main(argv) == 0
    assert f"labels: {JUDGE_DEV} (dev half)" in capsys.readouterr().out


def test_a_labels_variable_naming_no_file_is_an_error_not_a_fallback(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(JUDGE_LABELS_ENV, str(tmp_path / "absent.jsonl"))
    with pytest.raises(SystemExit) as info:
        main(["validate", "--judge-model", "local"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "absent.jsonl: no such file" in err
    assert f"(named by ${JUDGE_LABELS_ENV})" in err


def test_validate_scores_one_half_when_asked(labels, true_judge, capsys):
    items = load_labels(labels)
    for split in ("dev", "held-out"):
        argv = ["validate", "--labels", str(labels), "--split", split, "--json", "--quiet"]
        assert main([*argv, "--judge-model", true_judge]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["n"] == len(select_split(items, split)) and 0 < out["n"] < len(items)
        assert out["labels"].endswith(f"({split} half)")


def test_validate_puts_protocols_side_by_side(labels, true_judge, capsys):
    argv = ["validate", "--labels", str(labels), "--judge-model", true_judge, "--quiet"]
    assert main([*argv, "--judge-protocol", "rules+lm,lm"]) == 0
    out = capsys.readouterr().out
    assert "| protocol" in out and "| rules+lm " in out and "| lm " in out
    assert "(protocol lm)" in out and "(protocol rules+lm)" in out
    assert main([*argv, "--judge-protocol", "rules+lm,lm", "--json"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert set(both) == {"rules+lm", "lm"}
    # The paper's protocol asks the LM about every item; the always-TRUE fake gets 3 wrong.
    assert both["lm"]["lm"]["verdicts"] == 5 and both["lm"]["rules"]["verdicts"] == 0
    assert both["lm"]["accuracy"] == pytest.approx(0.4)
    assert both["rules+lm"]["accuracy"] == pytest.approx(0.8)


def test_validate_offers_only_the_judges_options(capsys):
    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    text = capsys.readouterr().out
    assert "--judge-model" in text and "--judge-protocol" in text and "--split" in text
    for option in ("--model ", "--api-base", "--temperature", "--max-tokens", "--mlflow"):
        assert option not in text


def test_an_unknown_protocol_exits_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["validate", "--judge-protocol", "rules+lm,ballot"])
    assert info.value.code == 2
    assert (
        "unknown protocol ballot; choose from rules+extract, rules+lm, lm"
        in capsys.readouterr().err
    )


GOOD = json.dumps(ROWS[0])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("", "holds no labelled items"),
        ("\n\n", "holds no labelled items"),
        (GOOD + "\n{not json\n", ":2: invalid JSON on line 2"),
        (GOOD + "\n[1, 2]\n", ":2: line 2 is a JSON list"),
        ('{"question": "q", "gold": "g", "label": true}\n', ":1: line 1 lacks ['response']"),
        (
            GOOD + '\n{"question": "q", "gold": "g", "response": "r", "label": "yes"}\n',
            ":2: line 2 has label 'yes'",
        ),
        (
            GOOD + '\n{"question": "q", "gold": "g", "response": "r", "label": 1}\n',
            ":2: line 2 has label 1",
        ),
    ],  # fmt: skip
    ids=["missing", "empty", "blank", "bad-json", "not-object", "no-field", "label-str", "label-1"],
)
def test_a_bad_label_file_is_one_line_and_exit_status_2(tmp_path, capsys, content, message):
    path = tmp_path / "bad.jsonl"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        main(["validate", "--labels", str(path), "--judge-model", "local"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and message in err
    assert err.startswith("python -m frames_dspy.judge: error: ")


def test_unknown_command_and_bad_option_exit_2(capsys):
    for argv in ([], ["check"], ["validate", "--threads", "0"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
    assert "--threads 0 must be at least 1" in capsys.readouterr().err


# --- the embedded judge on the development labels ------------------------------------------------


@pytest.mark.real
def test_the_embedded_judge_agrees_with_the_development_labels(
    judge_labels, real_model_path, tmp_path
):
    # A fresh DSPy cache, so no answer cached by an earlier run can stand in for the judge's.
    env = {**os.environ, "DSPY_CACHEDIR": str(tmp_path / "dspy-cache")}
    # Only the dev half: the held-out half is scored once, by hand, never by a test.
    command = [sys.executable, "-m", "frames_dspy.judge", "validate", "--labels",
               str(judge_labels), "--split", "dev", "--json", "--quiet"]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    summary = {k: out[k] for k in ("n", "accuracy", "kappa")} | {
        "rules": out["rules"],
        "lm": out["lm"],
    }
    assert out["n"] >= 50, summary
    assert out["rules"]["share"] >= 0.60 and out["rules"]["precision"] >= 0.97, summary
    assert out["lm"]["verdicts"] == 0 or out["lm"]["with_p_true"] > 0, summary
    assert out["accuracy"] >= 0.90 and out["kappa"] >= 0.80, summary
