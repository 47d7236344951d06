"""optimize.pareto: the Pareto front of (accuracy, tokens per question), the pick, the files."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from optimize.pareto import (
    PickRule,
    complete_trials,
    pareto_front,
    pareto_markdown,
    parse_pick,
    pick_trial,
    trials_frame,
)


def test_pick_rules_choose_from_the_front():
    def trial(number, acc, tokens):
        made = optuna.trial.create_trial(values=[acc, tokens])
        made.number = number
        return made

    front = [trial(0, 0.50, 1000.0), trial(1, 0.60, 3000.0), trial(2, 0.59, 1500.0)]
    assert pick_trial(front, PickRule()).number == 1
    assert pick_trial(front, parse_pick("cheapest-within:0.02")).number == 2
    assert pick_trial(front, parse_pick("cheapest-within:0.2")).number == 0
    tie = [trial(3, 0.6, 2000.0), trial(4, 0.6, 1800.0)]
    assert pick_trial(tie, PickRule()).number == 4  # equal accuracy: fewer tokens
    with pytest.raises(ValueError, match="cheapest-within:TOL"):
        parse_pick("cheapest")


SPACE = {
    "rounds": IntDistribution(1, 5),
    "k": IntDistribution(1, 5),
    "n_docs": IntDistribution(1, 10),
    "prompt": CategoricalDistribution(["vanilla", "planning"]),
}


def study_of(*rows) -> optuna.Study:
    """A study with one complete trial per (accuracy, tokens) row, plus a failed trial."""
    study = optuna.create_study(directions=["maximize", "minimize"])
    for i, (acc, tokens) in enumerate(rows):
        study.add_trial(
            optuna.trial.create_trial(
                values=[acc, tokens],
                params={"rounds": 1 + i % 5, "k": 2, "n_docs": 3, "prompt": "planning"},
                distributions=SPACE,
                user_attrs={"lm_calls_per_q": 2.5, "n_questions": 20, "program_state": "{...}"},
            )
        )
    study.add_trial(optuna.trial.create_trial(state=TrialState.FAIL))
    return study


def test_the_front_is_cheapest_first_and_a_repeated_configuration_counts_once():
    study = study_of((0.50, 1000.0), (0.60, 3000.0), (0.59, 1500.0), (0.40, 2000.0), (0.50, 1000.0))
    assert [t.number for t in complete_trials(study)] == [0, 1, 2, 3, 4]
    front = pareto_front(study)
    # Trial 3 is beaten on both counts by trial 0; trial 4 repeats trial 0's values.
    assert [t.number for t in front] == [0, 2, 1]
    assert pick_trial(front, PickRule()).number == 1
    assert pick_trial(front, parse_pick("cheapest-within:0.01")).number == 2


def test_pick_needs_a_front():
    with pytest.raises(ValueError, match="no complete trial to pick from"):
        pick_trial([], PickRule())


@pytest.mark.parametrize(
    "text, rule",
    [
        ("best", PickRule()),
        (" best ", PickRule()),
        ("cheapest-within:0.02", PickRule("cheapest-within", 0.02)),
        ("cheapest-within:0", PickRule("cheapest-within", 0.0)),
        ("cheapest-within:1", PickRule("cheapest-within", 1.0)),
    ],
)
def test_parse_pick_reads_the_two_rules(text, rule):
    assert parse_pick(text) == rule
    assert parse_pick(str(rule)) == rule  # the label written to config.json reads back


@pytest.mark.parametrize(
    "text", ["cheapest-within:1.5", "cheapest-within:-0.1", "cheapest-within:a", "worst", ""]
)
def test_parse_pick_refuses_anything_else_with_the_fix(text):
    with pytest.raises(ValueError, match="use 'best' or 'cheapest-within:TOL'") as info:
        parse_pick(text)
    assert "in [0, 1]" in str(info.value)


def test_the_markdown_table_marks_the_chosen_trial():
    study = study_of((0.50, 1000.0), (0.60, 3000.0), (0.59, 1500.0))
    front = pareto_front(study)
    text = pareto_markdown(front, front[1], rule=parse_pick("cheapest-within:0.02"), n_trials=3)
    assert text.startswith("# Pareto front (3 of 3 complete trials)")
    assert "Pick rule: `cheapest-within:0.02`" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [row.split()[1] for row in rows] == ["0", "2", "1"]  # cheapest first
    assert [("◀ chosen" in row) for row in rows] == [False, True, False]
    # accuracy (the objective), recall, the no-LM parts and references (attributes these
    # hand-made trials lack: "—"), tokens
    assert rows[1].startswith(
        "| 2 ◀ chosen | planning | 3 | 2 | 3 | 0.590 | — | — | — | — | 1500 | 2.50 |"
    )
    assert "| n_docs | accuracy | recall |" in text  # no second accuracy column


def test_the_objective_has_a_column_of_its_own_only_when_no_other_column_shows_it():
    front = pareto_front(study_of((0.85, 1000.0)))
    front[0].user_attrs.update(accuracy=0.5, recall=0.8)
    for metric, header, cells in [
        ("recall", "| n_docs | accuracy | recall |", "| 3 | — | 0.850 | — |"),
        ("lift", "| n_docs | lift | accuracy | recall |", "| 3 | 0.850 | — | 0.800 | — |"),
        (
            "accuracy+recall",
            "| n_docs | accuracy+recall | accuracy |",
            "| 3 | 0.850 | 0.500 | 0.800 |",
        ),
    ]:
        text = pareto_markdown(front, None, rule=parse_pick("best"), n_trials=1, metric=metric)
        table = [line for line in text.splitlines() if line.startswith("|")]
        assert header in table[0] and cells in table[2]
        assert len({line.count("|") for line in table}) == 1  # header, rule and rows agree


def test_trials_csv_leaves_out_the_saved_program_state():
    frame = trials_frame(study_of((0.5, 1000.0)))
    assert "user_attrs_program_state" not in frame.columns
    assert {"user_attrs_lm_calls_per_q", "params_prompt", "values_0", "values_1"} <= set(
        frame.columns
    )
    assert list(frame["state"]) == ["COMPLETE", "FAIL"]


def test_a_retrieval_only_objective_shows_no_accuracy_even_where_a_trial_recorded_zero():
    study = study_of((0.03, 1000.0))
    front = pareto_front(study)
    front[0].user_attrs["accuracy"] = 0.0  # what a trial without an answer step records
    front[0].user_attrs["recall"] = 0.9
    accuracy_measured = pareto_markdown(front, front[0], rule=parse_pick("best"), n_trials=1)
    lift = pareto_markdown(front, front[0], rule=parse_pick("best"), n_trials=1, metric="lift")
    row = next(line for line in lift.splitlines() if line.startswith("| 0 "))
    assert row.split("|")[7].strip() == "—" and row.split("|")[8].strip() == "0.900"
    assert "| 0.030 | 0.900 |" in accuracy_measured  # the objective is the accuracy column


def test_a_front_with_an_agent_shows_its_limits_beside_the_multihop_shape():
    agent = optuna.trial.create_trial(
        values=[0.8, 4000.0],
        params={"kind": "agent", "max_steps": 6, "max_articles": 3, "max_agent_tokens": 8000,
                "n_docs": 5},
        distributions={
            "kind": CategoricalDistribution(["multihop", "agent"]),
            "max_steps": IntDistribution(1, 12),
            "max_articles": IntDistribution(1, 8),
            "max_agent_tokens": CategoricalDistribution([8000]),
            "n_docs": IntDistribution(1, 10),
        },
        user_attrs={"lm_calls_per_q": 7.0, "recall": 0.75},
    )  # fmt: skip
    multihop = optuna.trial.create_trial(
        values=[0.5, 1000.0],
        params={"kind": "multihop", "rounds": 2, "k": 3, "n_docs": 4, "prompt": "planning"},
        distributions={"kind": CategoricalDistribution(["multihop", "agent"]), **SPACE},
        user_attrs={"lm_calls_per_q": 3.0},
    )
    agent.number, multihop.number = 1, 0
    text = pareto_markdown([multihop, agent], agent, rule=parse_pick("best"), n_trials=2)
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert "| n_docs | agent steps / articles / tokens | accuracy |" in table[0]
    assert table[2].startswith("| 0 | planning | 2 | 3 | 4 | — | 0.500 |")
    assert table[3].startswith("| 1 ◀ chosen | agent | — | — | 5 | 6 / 3 / 8000 | 0.800 | 0.750 |")
    assert len({line.count("|") for line in table}) == 1
    assert "an agent's N: the articles it read" in text
