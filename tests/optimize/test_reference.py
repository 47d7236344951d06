"""optimize.reference: an agent pick is tested beside multistep-planning, paired by question."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

import pandas as pd
import pytest
from opt_helpers import (
    quiet_optuna,  # noqa: F401 (an autouse fixture)
    run_tiny,
)

from frames_dspy.commands import evaluate
from frames_dspy.programs import ProgramSpec
from frames_dspy.results.records import read_records
from optimize.reference import reference_for, reference_line, reference_spec
from optimize.scores import PairedReference


def test_only_an_agent_pick_gets_the_reference_at_evaluates_settings():
    assert reference_for(ProgramSpec("agent")) == "multistep-planning"
    assert reference_for(ProgramSpec("multihop")) is None
    spec = reference_spec(context_tokens=500, include_question=False, cot=True)
    assert (spec.kind, spec.planning, spec.rounds, spec.k, spec.n_docs) == (
        "multihop", True, 5, 5, 10,
    )  # fmt: skip
    assert (spec.include_question, spec.cot, spec.context_tokens) == (False, True, 500)


PAIRED = PairedReference(
    reference="multistep-planning",
    label="multihop planning r5 k5 n10",
    n=40,
    accuracy_reference=0.3,
    accuracy_program=0.45,
    accuracy_diff=0.15,
    accuracy_ci95=[0.025, 0.275],
    mcnemar_p=0.035,
    recall_n=40,
    recall_reference=0.6,
    recall_program=0.55,
    recall_diff=-0.05,
    recall_ci95=[-0.15, 0.05],
    tokens_per_q_reference=6948.0,
    tokens_per_q_program=4320.4,
)


def test_the_paired_line_says_what_each_interval_shows():
    assert reference_line(PAIRED) == (
        "held out, the agent against multistep-planning (multihop planning r5 k5 n10), paired "
        "over 40 questions (agent minus reference, 95% interval): accuracy 0.450 against "
        "0.300, +0.150 [+0.025, +0.275] (McNemar p = 0.035: the agent answers more); final "
        "recall 0.550 against 0.600, -0.050 [-0.150, +0.050] (no difference shown); tokens/q "
        "4320 against 6948"
    )
    few = reference_line(replace(PAIRED, n=29))
    assert few.endswith("; with fewer than 30 questions the intervals are too narrow to trust")
    lower = replace(PAIRED, recall_diff=-0.2, recall_ci95=[-0.3, -0.1])
    assert "(the reference finds more)" in reference_line(lower)
    retrieval = replace(PAIRED, accuracy_diff=None, accuracy_ci95=None, mcnemar_p=None)
    assert "accuracy not measured (retrieval only); final recall" in reference_line(retrieval)


def test_an_agent_only_study_picks_an_agent_and_tests_it_beside_planning(tiny, tmp_path):
    result, lines = run_tiny(
        tiny, tmp_path, kinds=("agent",), max_steps=(3, 6), max_articles=(2, 4), n_docs=(1, 3)
    )
    chosen = result.chosen
    assert chosen.kind == "agent" and chosen.label.startswith("agent s")
    trials = pd.read_csv(tmp_path / "trials.csv")
    assert set(trials["params_kind"]) == {"agent"}
    assert {"params_max_steps", "params_max_articles", "params_max_agent_tokens"} <= set(trials)
    assert "params_rounds" not in trials and "agent" in (tmp_path / "pareto.md").read_text()
    saved = json.loads((tmp_path / "program.json").read_text())
    assert saved["frames_dspy_spec"]["kind"] == "agent"
    assert saved["frames_dspy_spec"]["max_steps"] == chosen.params["max_steps"]
    assert set(saved) >= {"choose", "answer"}  # the agent's step prompt travels with it
    assert any(line.startswith("the pick is the agent: ") for line in lines)

    # The test run holds both conditions on the same questions, and no no-LM row.
    records = read_records(tmp_path / "test_run" / "predictions.jsonl")
    by_condition = {r.condition for r in records}
    assert by_condition == {"program", "multistep-planning"}
    right = {c: {r.id: r.is_correct for r in records if r.condition == c} for c in by_condition}
    assert right["program"].keys() == right["multistep-planning"].keys()
    paired = json.loads((tmp_path / "test_score.json").read_text())["reference"]
    n = len(right["program"])
    expected = (sum(right["program"].values()) - sum(right["multistep-planning"].values())) / n
    assert paired["n"] == n == 2 and paired["accuracy_diff"] == pytest.approx(expected)
    assert paired["label"] == "multihop planning r5 k5 n10"
    assert paired["accuracy_program"] == result.test.figures.accuracy
    assert len(paired["accuracy_ci95"]) == 2 and 0 <= paired["mcnemar_p"] <= 1
    assert paired == result.test.reference.to_dict()  # the typed figures, as written
    assert reference_line(result.test.reference) in lines

    # The reproduce command re-runs both, and names the reference.
    argv = shlex.split(result.command)
    args = evaluate.build_parser().parse_args(argv[3:])
    assert list(args.conditions) == ["multistep-planning"] and not args.no_lm_parts
    assert args.program == str(tmp_path / "program.json")


def test_a_multihop_pick_is_tested_alone_as_before(tiny, tmp_path):
    result, lines = run_tiny(tiny, tmp_path, trials=1, rounds=(1, 1), k=(2, 2), n_docs=(2, 2))
    records = read_records(tmp_path / "test_run" / "predictions.jsonl")
    assert {r.condition for r in records} == {"program", "program-no-lm"}
    assert result.test.reference is None and "reference" not in result.test.to_dict()
    assert not any(line.startswith("held out, the agent") for line in lines)
    assert "--conditions" not in result.command and "--no-lm-parts" in result.command
