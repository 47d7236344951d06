"""optimize.compile --lm-queries: with a recall objective, program.json keeps the pick's
LM-written queries only when dev shows they add recall beyond its no-LM parts alone."""

from __future__ import annotations

import json

from opt_helpers import (
    quiet_optuna,  # noqa: F401 (an autouse fixture)
    run_tiny,
)

from frames_dspy.programs import lm_queries_per_round, load_program
from optimize import final

# One round: the question's article, and the LM's one query's article (k = 2).
LM_PICK = dict(
    objective="recall",
    trials=1,
    rounds=(1, 1),
    k=(2, 2),
    n_docs=(1, 1),
    prompts=("vanilla",),
    question_docs=(1,),
)


def no_lm_parts_find_everything(program, records):
    """No-LM parts that find every gold article: the LM's share is at most 0 on dev."""
    return {r.id: 1.0 for r in records if r.gold_ids}


def test_an_lm_share_not_shown_on_dev_hands_over_the_no_lm_parts(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(final, "no_lm_recalls", no_lm_parts_find_everything)
    result, lines = run_tiny(tiny, tmp_path, **LM_PICK)
    weighed = result.chosen.lm_queries
    assert weighed["rule"] == "if-shown" and weighed["kept"] is False
    assert weighed["lm_share_n"] == 3 and weighed["lm_share_ci95"][0] <= 0
    said = [i for i, x in enumerate(lines) if "is not shown above 0: program.json is the pick" in x]
    verdict = [i for i, x in enumerate(lines) if x.startswith("the pick's LM writes 1 query")]
    assert len(said) == 1 and verdict and verdict[0] < said[0]  # what the pick is, then the rule
    examples, store, _, retriever = tiny
    shipped, spec, info = load_program(tmp_path / "program.json", retriever=retriever, store=store)
    assert lm_queries_per_round(spec) == 0 and spec.lm_from_round == spec.rounds + 1
    assert spec.describe().endswith(" no-lm")
    assert info["optimize"]["program"].startswith("the no-LM parts alone")
    _, lm_spec, _ = load_program(tmp_path / "program-lm.json", retriever=retriever, store=store)
    assert lm_queries_per_round(lm_spec) == 1
    assert {**lm_spec.to_dict(), "lm_from_round": None} == {**spec.to_dict(), "lm_from_round": None}
    # The dev figures still describe the pick as it was chosen: an LM writing one query.
    assert result.chosen.lm_queries_per_round == 1
    # The handed-over program makes no LM call: its test run spent no token.
    test = json.loads((tmp_path / "test_score.json").read_text())
    assert test["n"] == 2 and test["tokens_per_question"] == 0
    assert test["lm_calls_per_question"] == 0


def test_always_keeps_the_lm_queries_and_records_the_dev_share(tiny, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(final, "no_lm_recalls", no_lm_parts_find_everything)
    result, lines = run_tiny(tiny, tmp_path, lm_queries="always", **LM_PICK)
    assert "SELF-JUDGING" not in caplog.text  # a recall study judges no answer
    weighed = result.chosen.lm_queries
    assert weighed["rule"] == "always" and weighed["kept"] is True
    assert weighed["lm_share_n"] == 3  # measured all the same
    assert not any("shown above 0" in line for line in lines)
    assert not (tmp_path / "program-lm.json").exists()
    _, spec, _ = load_program(tmp_path / "program.json", retriever=tiny[3], store=tiny[1])
    assert lm_queries_per_round(spec) == 1


def test_the_rule_weighs_nothing_for_an_accuracy_study_or_a_program_without_lm(tiny, tmp_path):
    result, _ = run_tiny(tiny, tmp_path / "acc", **{**LM_PICK, "objective": "accuracy"})
    assert result.chosen.lm_queries is None
    result, _ = run_tiny(tiny, tmp_path / "nolm", **{**LM_PICK, "k": (1, 1)})
    assert result.chosen.lm_queries is None and result.chosen.lm_queries_per_round == 0


def test_a_kept_compile_is_weighed_on_its_own_dev_records(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(final, "no_lm_recalls", no_lm_parts_find_everything)
    # A paired dev check that finds the compiled program not lower: it is kept.
    monkeypatch.setattr(final, "paired_dev_check", lambda *_: {"ci95": [0.0, 0.0]})
    result, _ = run_tiny(tiny, tmp_path, optimizer="gold-demos", max_demos=1, **LM_PICK)
    info = result.chosen.compile
    assert info["compiled"].startswith("kept") and info["dev_records"] == "compiled-gold-demos"
    assert result.chosen.lm_queries["dev_records"] == "compiled-gold-demos"
