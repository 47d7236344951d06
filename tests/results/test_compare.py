"""Tests for frames_dspy.results.comparison and its command line on tiny hand-written runs."""

from __future__ import annotations

import json
import math

import pytest

from frames_dspy.commands.compare import main
from frames_dspy.results.comparison import CompareConfig, CompareError, compare_runs
from frames_dspy.results.comparison_text import format_text
from frames_dspy.results.stats import paired_bootstrap_ci

DATASET = "d" * 64
CORPUS = "c" * 64


def record(condition, qid, correct, **extra):
    base = {
        "condition": condition,
        "id": qid,
        "correct": correct,
        "judge_method": "exact" if correct else "judge",
        "error": None,
        "recall": [0.5, 1.0],
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "lm_calls": 1,
    }
    base.update(extra)
    return base


def write_run(
    folder,
    records,
    *,
    dataset=DATASET,
    corpus=CORPUS,
    model="local",
    config=True,
    settings=None,
    programs=None,
):
    folder.mkdir(parents=True, exist_ok=True)
    if config:
        payload = {
            "settings": {"model": model, "rounds": 5, "out": str(folder), **(settings or {})},
            "selected_ids": sorted({r["id"] for r in records or []}),
            "dataset_sha256": dataset,
            "corpus_sha256": corpus,
        }
        if programs is not None:
            payload["programs"] = programs
        (folder / "config.json").write_text(json.dumps(payload), encoding="utf-8")
    if records is not None:
        lines = "".join(json.dumps(r) + "\n" for r in records)
        (folder / "predictions.jsonl").write_text(lines, encoding="utf-8")
    return folder


def outcomes(condition, pattern):
    """Records from a string of verdicts: 1 right, 0 wrong, j judge error, e program error."""
    verdict = {"1": True, "0": False, "j": None, "e": False}
    return [
        record(condition, i, verdict[ch], error="RuntimeError('boom')" if ch == "e" else None)
        for i, ch in enumerate(pattern)
    ]


def compare(tmp_path, records_a, records_b, **options):
    a = write_run(tmp_path / "a", records_a)
    b = write_run(tmp_path / "b", records_b)
    return compare_runs(CompareConfig(run_a=str(a), run_b=str(b), **options))


# --- McNemar -------------------------------------------------------------------------------


def test_pair_uses_discordant_counts(tmp_path):
    # 6 questions flip A wrong -> B right, none the other way; 4 agree.
    result = compare(tmp_path, outcomes("naive", "0000001111"), outcomes("naive", "1111111111"))
    pair = result.pairs[0]
    assert pair.a_to_b.count == 6 and pair.a_to_b.ids == [0, 1, 2, 3, 4, 5]
    assert pair.b_to_a.count == 0 and pair.b_to_a.ids == []
    assert pair.mcnemar_p == pytest.approx(0.03125)


# --- bootstrap -----------------------------------------------------------------------------


def test_verdicts_for_a_gain_and_a_swap(tmp_path):
    gain = compare(
        tmp_path / "g", outcomes("naive", "0" * 30 + "1" * 10), outcomes("naive", "1" * 40)
    )
    pair = gain.pairs[0]
    assert pair.accuracy_diff == pytest.approx(0.75)
    assert pair.interval_excludes_zero
    assert pair.accuracy_ci95[0] <= pair.accuracy_diff <= pair.accuracy_ci95[1]
    assert "B - A = +0.750" in pair.verdict and "excludes 0: B is more accurate" in pair.verdict

    swap = compare(
        tmp_path / "s",
        outcomes("naive", "1" * 10 + "0" * 10 + "1" * 20),
        outcomes("naive", "0" * 10 + "1" * 10 + "1" * 20),
    )
    pair = swap.pairs[0]
    assert pair.accuracy_diff == 0 and not pair.interval_excludes_zero
    assert pair.mcnemar_p == 1.0
    assert "includes 0: no evidence of a difference" in pair.verdict


def test_a_loss_is_reported_as_a_better(tmp_path):
    result = compare(tmp_path, outcomes("naive", "1" * 40), outcomes("naive", "0" * 30 + "1" * 10))
    assert "A is more accurate" in result.pairs[0].verdict
    assert result.pairs[0].accuracy_ci95[1] < 0


def test_same_seed_same_interval_through_compare_runs(tmp_path):
    a, b = outcomes("naive", "0101100111" * 3), outcomes("naive", "1101101111" * 3)
    first = compare(tmp_path / "1", a, b, seed=7, bootstrap=500).pairs[0]
    again = compare(tmp_path / "2", a, b, seed=7, bootstrap=500).pairs[0]
    assert first.accuracy_ci95 == again.accuracy_ci95
    assert first.recall_final_ci95 == again.recall_final_ci95
    # The seed and the resample count reach the bootstrap.
    right_a = [float(ch) for ch in "0101100111" * 3]
    right_b = [float(ch) for ch in "1101101111" * 3]
    assert first.accuracy_ci95 == paired_bootstrap_ci(right_a, right_b, resamples=500, seed=7)


# --- recall pairing ------------------------------------------------------------------------


def test_recall_pairing_handles_nulls(tmp_path):
    a = [
        record("bm25-4", 0, True, recall=[0.5]),  # both have gold: paired
        record("bm25-4", 1, True, recall=None),  # no gold in either run: left out
        record("bm25-4", 2, True, recall=None),  # null in A only: 0 there
        record("bm25-4", 3, True, recall=[]),  # gold, nothing retrieved: 0
        record("bm25-4", 4, True, recall=[1.0]),  # null in B only: 0 there
    ]
    b = [
        record("bm25-4", 0, True, recall=[1.0]),
        record("bm25-4", 1, True, recall=None),
        record("bm25-4", 2, True, recall=[1.0]),
        record("bm25-4", 3, True, recall=[0.5]),
        record("bm25-4", 4, True, recall=None),
    ]
    pair = compare(tmp_path, a, b).pairs[0]
    assert pair.recall_n == 4
    assert pair.recall_no_gold == 1
    assert pair.recall_null_a_only == 1 and pair.recall_null_b_only == 1
    # A: 0.5, 0, 0, 1.0 ; B: 1.0, 1.0, 0.5, 0
    assert pair.recall_final_a == pytest.approx(1.5 / 4)
    assert pair.recall_final_b == pytest.approx(2.5 / 4)
    assert pair.recall_final_diff == pytest.approx(0.25)
    low, high = pair.recall_final_ci95
    assert low <= 0.25 <= high


def test_recall_after_round_one_and_after_the_last_round(tmp_path):
    a = [record("multistep-vanilla", i, True, recall=[0.0, 0.5, 0.5]) for i in range(4)]
    b = [record("multistep-vanilla", i, True, recall=[0.5, 1.0]) for i in range(4)]
    pair = compare(tmp_path, a, b).pairs[0]
    assert pair.recall_round1_a == 0.0 and pair.recall_round1_b == 0.5
    assert pair.recall_final_a == 0.5 and pair.recall_final_b == 1.0
    assert pair.recall_round1_ci95 == [0.5, 0.5]


def test_recall_without_any_gold_is_empty(tmp_path):
    a = [record("naive", i, True, recall=None) for i in range(3)]
    pair = compare(tmp_path, a, a).pairs[0]
    assert pair.recall_n == 0 and pair.recall_no_gold == 3
    assert pair.recall_final_a is None and pair.recall_final_ci95 is None
    assert "recall after last round (n=0) | — | — | — | — |" in format_text(
        compare(tmp_path / "again", a, a)
    )


# --- what counts ---------------------------------------------------------------------------


def test_judge_and_program_errors_count_as_wrong_and_are_shown(tmp_path):
    a = outcomes("oracle", "1j1e")
    b = outcomes("oracle", "1111")
    pair = compare(tmp_path, a, b).pairs[0]
    assert pair.correct_a == 2 and pair.accuracy_a == 0.5
    assert pair.errors["a"].judge == 1 and pair.errors["a"].judge_ids == [1]
    assert pair.errors["a"].program == 1 and pair.errors["a"].program_ids == [3]
    assert pair.errors["b"].judge == 0 and pair.errors["b"].program == 0
    assert pair.a_to_b.ids == [1, 3]


def test_tokens_per_question_are_metered_tokens(tmp_path):
    # As in every table: metered tokens, so a cached call (reported 0 tokens) still counts.
    a = [record("naive", i, True, metered_tokens=120) for i in range(2)]
    b = [
        record("naive", 0, True, prompt_tokens=0, completion_tokens=None, metered_tokens=300),
        record("naive", 1, True, prompt_tokens=500, completion_tokens=100, metered_tokens=600),
    ]
    pair = compare(tmp_path, a, b).pairs[0]
    assert pair.tokens_per_q_a == 120 and pair.tokens_per_q_b == 450


def agent_steps(searches: list[str], reads: int) -> list[dict]:
    steps = [{"action": "search", "argument": q, "article_ids": ["x"]} for q in searches]
    steps += [{"action": "read", "argument": "X", "article_ids": ["x"]}] * reads
    return [*steps, {"action": "finish"}]


def test_how_each_side_searched_is_shown_beside_its_tokens(tmp_path, capsys):
    planning = [
        record("multistep-planning", i, i == 0, near_repeat_rate=0.5, metered_tokens=900)
        for i in range(2)
    ]
    agent = [
        record("agent", 0, True, trajectory=agent_steps(["a b", "a b"], 1), near_repeat_rate=0.5,
               stop_reason="finish", metered_tokens=700),
        record("agent", 1, False, trajectory=agent_steps(["c d"], 3), near_repeat_rate=0.0,
               stop_reason="articles", metered_tokens=500),
    ]  # fmt: skip
    a, b = write_run(tmp_path / "a", planning), write_run(tmp_path / "b", agent)
    config = CompareConfig(str(a), str(b), condition="multistep-planning", condition_b="agent")
    pair = compare_runs(config).pairs[0]
    assert (pair.near_repeat_a, pair.near_repeat_b) == (0.5, 0.25)
    # Steps and reads are an agent's: none for the fixed-rounds side, never a zero.
    assert (pair.steps_per_q_a, pair.steps_per_q_b) == (None, 4.5)
    assert (pair.articles_read_per_q_a, pair.articles_read_per_q_b) == (None, 2.0)
    text = format_text(compare_runs(config))
    assert "| tokens / question | 900 | 600 | -300 (x0.67) | |" in text
    assert "| near-repeated queries (share) | 0.50 | 0.25 | -0.25 | |" in text
    assert "| agent steps / question | — | 4.5 | — | |" in text
    assert "| articles read / question | — | 2.0 | — | |" in text
    # Two runs without an agent or LM queries show no such rows.
    plain = compare(tmp_path / "n", outcomes("naive", "01"), outcomes("naive", "11"))
    assert "near-repeated" not in format_text(plain) and "agent steps" not in format_text(plain)


def test_unequal_question_sets_pair_only_shared_ids(tmp_path):
    a = outcomes("naive", "1100110")  # ids 0-6
    b = [record("naive", i, True) for i in range(3, 10)]  # ids 3-9
    pair = compare(tmp_path, a, b).pairs[0]
    assert pair.n == 4
    assert pair.only_in_a == [0, 1, 2] and pair.only_in_b == [7, 8, 9]
    assert pair.accuracy_a == 0.5 and pair.accuracy_b == 1.0
    text = format_text(compare(tmp_path / "t", a, b))
    assert "paired questions: 4; only in A: 3 (0, 1, 2); only in B: 3 (7, 8, 9)" in text


def test_ids_pair_even_when_one_run_wrote_them_as_strings(tmp_path):
    a = outcomes("naive", "01")
    b = [record("naive", "0", True), record("naive", "1", True)]
    assert compare(tmp_path, a, b).pairs[0].n == 2


def test_a_duplicate_record_keeps_the_last(tmp_path):
    a = [record("naive", 0, False), record("naive", 0, True)]
    pair = compare(tmp_path, a, [record("naive", 0, True)]).pairs[0]
    assert pair.n == 1 and pair.accuracy_a == 1.0


def test_every_shared_condition_is_compared_in_order(tmp_path):
    a = outcomes("oracle", "11") + outcomes("naive", "01") + outcomes("bm25-2", "11")
    b = outcomes("naive", "11") + outcomes("oracle", "10")
    result = compare(tmp_path, a, b)
    assert [(p.condition_a, p.condition_b) for p in result.pairs] == [
        ("naive", "naive"),
        ("oracle", "oracle"),
    ]


def test_one_condition_against_another_across_runs(tmp_path):
    a = outcomes("multistep-vanilla", "0011")
    b = outcomes("program", "1111")
    result = compare(tmp_path, a, b, condition="multistep-vanilla", condition_b="program")
    (pair,) = result.pairs
    assert (pair.condition_a, pair.condition_b) == ("multistep-vanilla", "program")
    assert pair.accuracy_diff == 0.5
    assert "## multistep-vanilla (A) vs program (B)" in format_text(result)


def test_two_conditions_of_one_run(tmp_path):
    run = write_run(tmp_path / "r", outcomes("bm25-4", "0101") + outcomes("oracle", "1111"))
    result = compare_runs(
        CompareConfig(run_a=str(run), run_b=str(run), condition="bm25-4", condition_b="oracle")
    )
    assert result.pairs[0].a_to_b.ids == [0, 2]
    assert result.settings_differ == {}


def test_settings_that_differ_are_reported(tmp_path):
    a = write_run(tmp_path / "a", outcomes("naive", "01"), model="local")
    b = write_run(tmp_path / "b", outcomes("naive", "11"), model="openai/gpt-4o-mini")
    result = compare_runs(CompareConfig(run_a=str(a), run_b=str(b)))
    # "out" always differs and is not a setting that changes answers.
    assert result.settings_differ == {"model": ["local", "openai/gpt-4o-mini"]}
    assert "model: 'local' -> 'openai/gpt-4o-mini'" in format_text(result)


def test_program_specs_replace_unused_command_line_shape(tmp_path):
    # With --program, evaluate records its default rounds/k/n_docs although the program's own
    # spec ran; the recorded specs are compared instead, per condition pair.
    spec = {"kind": "multihop", "rounds": 2, "k": 2, "n_docs": 3, "planning": True}
    a = write_run(
        tmp_path / "a",
        outcomes("multistep-planning", "01"),
        settings={"rounds": 2, "k": 2},
        programs={"multistep-planning": spec},
    )
    b = write_run(
        tmp_path / "b",
        outcomes("program", "11"),
        settings={"rounds": 5, "k": 5},
        programs={"program": {**spec, "planning": False}},
    )
    result = compare_runs(
        CompareConfig(
            run_a=str(a), run_b=str(b), condition="multistep-planning", condition_b="program"
        )
    )
    assert result.settings_differ == {}
    assert result.pairs[0].spec_differ == {"planning": [True, False]}
    assert "program specs that differ: planning: True -> False" in format_text(result)


def test_command_line_shape_compared_without_recorded_specs(tmp_path):
    a = write_run(tmp_path / "a", outcomes("naive", "01"))
    b = write_run(tmp_path / "b", outcomes("naive", "11"), settings={"rounds": 3})
    result = compare_runs(CompareConfig(run_a=str(a), run_b=str(b)))
    assert result.settings_differ == {"rounds": [5, 3]}
    assert result.pairs[0].spec_differ is None


# --- errors --------------------------------------------------------------------------------


def run_main(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_folder_without_config_is_an_error(tmp_path, capsys):
    a = write_run(tmp_path / "a", outcomes("naive", "1"), config=False)
    b = write_run(tmp_path / "b", outcomes("naive", "1"))
    status, out, err = run_main(capsys, a, b)
    assert status == 2 and out == ""
    assert f"{a} has no config.json" in err and "frames_dspy.evaluate --out" in err


def test_a_folder_without_predictions_is_an_error(tmp_path, capsys):
    a = write_run(tmp_path / "a", outcomes("naive", "1"))
    b = write_run(tmp_path / "b", None)
    status, out, err = run_main(capsys, a, b)
    assert status == 2 and out == ""
    assert f"{b} has no predictions.jsonl" in err and f"--out {b}" in err


def test_a_missing_folder_is_an_error(tmp_path, capsys):
    a = write_run(tmp_path / "a", outcomes("naive", "1"))
    status, _, err = run_main(capsys, a, tmp_path / "nope")
    assert status == 2 and "nope is not a folder" in err


def test_a_corrupt_predictions_line_is_an_error(tmp_path, capsys):
    a = write_run(tmp_path / "a", outcomes("naive", "11"))
    b = write_run(tmp_path / "b", outcomes("naive", "11"))
    (b / "predictions.jsonl").write_text('{"broken\n' + json.dumps(record("naive", 0, True)) + "\n")
    status, _, err = run_main(capsys, a, b)
    assert status == 2 and "line 1 is not valid JSON" in err and "repair or delete" in err


def test_no_shared_question_is_an_error(tmp_path, capsys):
    a = write_run(tmp_path / "a", outcomes("naive", "11"))
    b = write_run(tmp_path / "b", [record("naive", i, True) for i in (5, 6)])
    status, out, err = run_main(capsys, a, b)
    assert status == 2 and out == ""
    assert "share no question" in err and str(a) in err and str(b) in err
    assert "ids 0..1" in err and "ids 5..6" in err and "--ids" in err


def test_no_shared_condition_is_an_error(tmp_path, capsys):
    a = write_run(tmp_path / "a", outcomes("naive", "11"))
    b = write_run(tmp_path / "b", outcomes("oracle", "11"))
    status, _, err = run_main(capsys, a, b)
    assert status == 2 and "share no condition" in err
    assert "has: naive" in err and "has: oracle" in err and "--condition-b" in err


def test_a_condition_missing_from_a_run_is_an_error(tmp_path, capsys):
    a = write_run(tmp_path / "a", outcomes("naive", "11") + outcomes("oracle", "11"))
    b = write_run(tmp_path / "b", outcomes("naive", "11"))
    status, _, err = run_main(capsys, a, b, "--condition", "oracle")
    assert status == 2
    assert f"condition 'oracle' is not in run {b}; it has: naive" in err
    status, _, err = run_main(capsys, a, b, "--condition", "bm25-4", "--condition-b", "naive")
    assert status == 2 and f"'bm25-4' is not in run {a}; it has: naive, oracle" in err


def test_condition_b_without_condition_is_an_error(tmp_path, capsys):
    a = write_run(tmp_path / "a", outcomes("naive", "11"))
    status, _, err = run_main(capsys, a, a, "--condition-b", "naive")
    assert status == 2 and "--condition-b 'naive' needs --condition" in err


def test_different_datasets_are_an_error(tmp_path, capsys):
    a = write_run(tmp_path / "a", outcomes("naive", "11"))
    b = write_run(tmp_path / "b", outcomes("naive", "11"), dataset="e" * 64)
    status, out, err = run_main(capsys, a, b)
    assert status == 2 and out == ""
    assert "different datasets" in err and "--dataset" in err
    # The corpus override does not cover a dataset mismatch.
    assert run_main(capsys, a, b, "--allow-different-corpus")[0] == 2
    # The library raises; only main() turns it into a message and status 2.
    with pytest.raises(CompareError, match="different datasets"):
        compare_runs(CompareConfig(run_a=str(a), run_b=str(b)))


def test_different_corpora_are_an_error_unless_allowed(tmp_path, capsys):
    a = write_run(tmp_path / "a", outcomes("bm25-4", "01"))
    b = write_run(tmp_path / "b", outcomes("bm25-4", "11"), corpus="f" * 64)
    status, out, err = run_main(capsys, a, b)
    assert status == 2 and out == ""
    assert "different corpora" in err and "not comparable across corpora" in err
    assert "--allow-different-corpus" in err

    status, out, err = run_main(capsys, a, b, "--allow-different-corpus")
    assert status == 0
    assert out.count("WARNING: DIFFERENT CORPORA") == 2  # above and below the tables
    status, out, err = run_main(capsys, a, b, "--allow-different-corpus", "--json")
    assert status == 0 and "DIFFERENT CORPORA" in err
    payload = json.loads(out)
    assert payload["corpus_differs"] is True and payload["warnings"]


def test_a_naive_run_without_corpus_compares_with_one_that_has_one(tmp_path):
    a = write_run(tmp_path / "a", outcomes("naive", "01"), corpus=None)
    b = write_run(tmp_path / "b", outcomes("naive", "11"))
    result = compare_runs(CompareConfig(run_a=str(a), run_b=str(b)))
    assert not result.corpus_differs and result.warnings == []


def test_bootstrap_must_be_positive(tmp_path, capsys):
    a = write_run(tmp_path / "a", outcomes("naive", "11"))
    with pytest.raises(SystemExit) as exit_info:
        main([str(a), str(a), "--bootstrap", "0"])
    assert exit_info.value.code == 2
    assert "--bootstrap 0 must be at least 1" in capsys.readouterr().err


# --- output --------------------------------------------------------------------------------


def test_json_output_parses_with_the_documented_fields(tmp_path, capsys):
    a = write_run(tmp_path / "a", outcomes("multistep-vanilla", "0" * 6 + "1" * 4))
    b = write_run(tmp_path / "b", outcomes("program", "1" * 10))
    status, out, err = run_main(
        capsys, a, b, "--condition", "multistep-vanilla", "--condition-b", "program", "--json"
    )
    assert status == 0 and err == ""
    payload = json.loads(out)
    assert payload["bootstrap"] == 10000 and payload["seed"] == 0
    (pair,) = payload["pairs"]
    for key in (
        "n", "accuracy_a", "accuracy_b", "accuracy_diff", "accuracy_ci95", "mcnemar_p",
        "a_to_b", "b_to_a", "recall_final_a", "recall_final_b", "recall_final_diff",
        "recall_final_ci95", "recall_round1_a", "recall_round1_b", "recall_round1_diff",
        "recall_round1_ci95", "tokens_per_q_a", "tokens_per_q_b", "near_repeat_a",
        "near_repeat_b", "steps_per_q_a", "steps_per_q_b", "articles_read_per_q_a",
        "articles_read_per_q_b", "errors", "verdict",
    ):  # fmt: skip
        assert key in pair, key
    assert pair["n"] == 10 and pair["mcnemar_p"] == pytest.approx(0.03125)
    assert pair["a_to_b"] == {"count": 6, "ids": [0, 1, 2, 3, 4, 5]}
    assert pair["errors"]["a"]["judge"] == 0
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in pair.values())


def test_text_output_has_a_table_and_a_verdict(tmp_path, capsys):
    a = write_run(tmp_path / "a", outcomes("naive", "0" * 30 + "1" * 10))
    b = write_run(tmp_path / "b", outcomes("naive", "1" * 40))
    status, out, err = run_main(capsys, a, b, "--bootstrap", "2000")
    assert status == 0 and err == ""
    assert "## naive" in out
    assert "| accuracy | 0.250 (10/40) | 1.000 (40/40) | +0.750 |" in out
    assert "McNemar exact test: A wrong -> B right 30, A right -> B wrong 0" in out
    assert "the interval excludes 0: B is more accurate" in out
    assert "bootstrap: 2000 resamples" in out


def test_long_id_lists_are_cut_in_text_only(tmp_path):
    result = compare(tmp_path, outcomes("naive", "0" * 60), outcomes("naive", "1" * 60))
    assert "and 35 more (--json lists all)" in format_text(result)
    assert len(result.pairs[0].a_to_b.ids) == 60


def test_few_questions_get_a_note(tmp_path):
    text = format_text(compare(tmp_path, outcomes("naive", "01"), outcomes("naive", "11")))
    assert "only 2 paired questions" in text


def test_help_teaches(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for phrase in ("Pairing", "McNemar", "bootstrap", "examples:", "--condition-b"):
        assert phrase in out


# --- retrieval-only runs ---------------------------------------------------------------------


def test_retrieval_only_runs_compare_recall_not_an_accuracy_they_never_measured(tmp_path, capsys):
    # Retrieval-only records carry empty answers judged not correct; their 0.000 is no accuracy.
    empty = {"judge_method": "empty", "answer": ""}
    a = write_run(
        tmp_path / "a",
        [record("bm25-4", i, False, **{**empty, "recall": [0.5]}) for i in range(40)],
        settings={"retrieval_only": True},
    )
    b = write_run(
        tmp_path / "b",
        [record("bm25-4", i, False, **{**empty, "recall": [1.0]}) for i in range(40)],
        settings={"retrieval_only": True},
    )
    pair = compare_runs(CompareConfig(run_a=str(a), run_b=str(b))).pairs[0]
    assert pair.accuracy_a is None and pair.accuracy_b is None and pair.accuracy_ci95 is None
    assert pair.correct_a is None and pair.mcnemar_p is None and pair.a_to_b.count == 0
    assert pair.recall_final_diff == pytest.approx(0.5)
    assert pair.verdict.startswith("accuracy not measured (runs A and B retrieval only)")
    assert "B finds more gold articles" in pair.verdict
    assert main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "| accuracy | not measured | not measured |" in out
    assert "McNemar" not in out and "0.000 (0/40)" not in out


def test_one_retrieval_only_side_is_named_and_answers_are_not_paired_with_it(tmp_path):
    a = write_run(tmp_path / "a", outcomes("bm25-4", "1100110011"))
    b = write_run(
        tmp_path / "b",
        [record("bm25-4", i, False, judge_method="empty", answer="") for i in range(10)],
        settings={"retrieval_only": True},
    )
    pair = compare_runs(CompareConfig(run_a=str(a), run_b=str(b))).pairs[0]
    assert pair.accuracy_diff is None and pair.b_to_a.count == 0
    assert pair.verdict.startswith("accuracy not measured (run B retrieval only)")
    assert "no evidence of a difference in recall" in pair.verdict
