"""optimize.space: the search space (both program kinds), a trial's spec and label, and the
settings that do not fit the kinds a study tries."""

from __future__ import annotations

import re

import optuna
import pytest
from opt_helpers import compile_refuses, config_of

from frames_dspy.programs import ProgramSpec
from optimize.space import SearchSpace, searches_by_lm, trial_label, trial_spec


@pytest.mark.parametrize(
    "space, message",
    [
        ({"rounds": (0, 3)}, "search range rounds=0..3 must satisfy 1 <= low <= high"),
        ({"k": (4, 2)}, "search range k=4..2"),
        ({"n_docs": (1, 0)}, "search range n_docs=1..0"),
        ({"prompts": ("planning", "magic")}, "unknown prompt(s) ['magic']"),
        ({"prompts": ()}, "unknown prompt(s) []"),
    ],
)
def test_a_bad_search_space_is_refused(space, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        SearchSpace(**space)


def test_the_search_space_lists_every_configuration():
    space = SearchSpace(rounds=(1, 2), k=(2, 3), n_docs=(5, 5), prompts=("planning",))
    configurations = list(space.configurations())
    assert len(configurations) == 2 * 2 * 1 * 1
    assert configurations[0] == {
        "rounds": 1,
        "k": 2,
        "n_docs": 5,
        "prompt": "planning",
        "question_query": True,
        "found_tokens": 1000,
        "lead_chars": 120,
    }
    assert space.as_dict() == {
        "rounds": [1, 2],
        "k": [2, 3],
        "n_docs": [5, 5],
        "prompts": ["planning"],
        "question_query": [True],
        "found_tokens": [1000],
        "lead_chars": [120],
    }
    assert len(list(SearchSpace().configurations())) == 5 * 5 * 10 * 2
    both = SearchSpace(question_query=(True, False), found_tokens=(100, 400), lead_chars=(60,))
    assert len(list(both.configurations())) == 5 * 5 * 10 * 2 * 2


@pytest.mark.parametrize(
    "choices, message",
    [
        ({"found_tokens": ()}, "found_tokens must not be empty"),
        ({"lead_chars": (0,)}, "lead_chars=[0] must be whole numbers >= 1"),
        ({"question_query": ()}, "question_query must not be empty"),
    ],
)
def test_bad_search_choices_are_refused(choices, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        SearchSpace(**choices)


def test_a_trial_can_choose_the_question_query_and_the_found_view():
    spec = trial_spec(
        {
            "rounds": 2,
            "k": 2,
            "n_docs": 3,
            "prompt": "vanilla",
            "question_query": False,
            "found_tokens": 200,
            "lead_chars": 60,
        },
        include_question=True,
    )
    assert (spec.include_question, spec.found_tokens, spec.lead_chars) == (False, 200, 60)
    config = config_of(
        ["--found-tokens", "100,400", "--lead-chars", "60", "--search-question-query"]
    )
    space = config.search_space()
    assert space.found_tokens == (100, 400) and space.lead_chars == (60,)
    assert space.question_query == (True, False)


def test_a_trials_parameters_become_a_multihop_spec():
    spec = trial_spec(
        {"rounds": 2, "k": 3, "n_docs": 4, "prompt": "planning"},
        include_question=False,
        cot=True,
        context_tokens=800,
    )
    assert spec == ProgramSpec(
        "multihop",
        rounds=2,
        k=3,
        n_docs=4,
        planning=True,
        include_question=False,
        cot=True,
        context_tokens=800,
    )
    assert trial_spec({"rounds": 1, "k": 1, "n_docs": 1, "prompt": "vanilla"}).planning is False


def test_a_trial_can_choose_the_titles_prompt_and_the_questions_own_budget():
    params = {"rounds": 2, "k": 3, "n_docs": 1, "prompt": "titles", "question_docs": 4}
    spec = trial_spec(params)
    assert (spec.titles, spec.planning, spec.question_docs) == (True, False, 4)
    assert spec.describe() == "multihop titles r2 k3 n1 q4"
    # Without the question as a query it has no budget of its own.
    assert trial_spec({**params, "question_query": False}).question_docs is None
    config = config_of(["--prompts", "titles", "--question-docs", "2,4"])
    space = config.search_space()
    assert space.prompts == ("titles",) and space.question_docs == (2, 4)
    assert space.as_dict()["question_docs"] == [2, 4]
    assert [c["question_docs"] for c in space.configurations()][:1] == [2]
    # Unsearched, the knob stays out of the study's record (older studies still resume).
    assert "question_docs" not in SearchSpace().as_dict()


def test_a_trials_phrase_budget_needs_the_questions_own():
    params = {"rounds": 1, "k": 1, "n_docs": 2, "prompt": "titles", "question_docs": 6}
    assert trial_spec({**params, "phrase_docs": 6}).describe() == "multihop titles r1 k1 n2 q6 p6"
    assert trial_spec({**params, "phrase_docs": 0}).phrase_docs is None
    assert trial_spec({**params, "lm_from_round": 2}).lm_from_round == 2
    assert trial_spec({**params, "lm_from_round": 1}).lm_from_round is None
    assert SearchSpace(lm_from_round=(1, 2)).as_dict()["lm_from_round"] == [1, 2]
    with pytest.raises(ValueError, match="must be >= 0"):
        SearchSpace(phrase_docs=(-1,))
    config = config_of(["--phrase-docs", "0,6", "--objective", "lift"])
    with pytest.raises(ValueError, match="--phrase-docs needs --question-docs"):
        config.validate()
    assert config.optimizer_settings(embedded=True).objective == "recall"


# --- the agent in the search space ------------------------------------------------------------


def test_an_agent_space_lists_its_configurations_and_records_itself():
    space = SearchSpace(kinds=("agent",), n_docs=(1, 2), max_steps=(3, 4), max_articles=(2, 2))
    configurations = list(space.configurations())
    assert len(configurations) == 2 * 1 * 1 * 2  # steps x articles x tokens x n_docs
    assert configurations[0] == {
        "kind": "agent",
        "max_steps": 3,
        "max_articles": 2,
        "max_agent_tokens": 8000,
        "n_docs": 1,
        "lead_chars": 120,
    }
    mixed = SearchSpace(kinds=("multihop", "agent"), rounds=(1, 1), k=(1, 1), n_docs=(1, 2))
    kinds = [c["kind"] for c in mixed.configurations()]
    assert kinds.count("multihop") == 2 * 2 and kinds.count("agent") == 9 * 7 * 2
    recorded = mixed.as_dict()
    assert recorded["kinds"] == ["multihop", "agent"] and recorded["max_steps"] == [4, 12]
    # A multihop-only space records as it always has: a study made before the agent resumes.
    assert "kinds" not in SearchSpace().as_dict() and "max_steps" not in SearchSpace().as_dict()


def suggested(space: SearchSpace, trials: int) -> list[dict]:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    return [space.suggest(study.ask()) for _ in range(trials)]


def test_a_trial_names_its_kind_only_when_the_agent_is_searched():
    assert all("kind" not in params for params in suggested(SearchSpace(), 3))
    agent = SearchSpace(kinds=("agent",), max_steps=(2, 3), max_agent_tokens=(100, 200))
    for params in suggested(agent, 5):
        assert set(params) == {
            "kind", "max_steps", "max_articles", "max_agent_tokens", "n_docs", "lead_chars",
        }  # fmt: skip
        assert params["kind"] == "agent" and 2 <= params["max_steps"] <= 3
        assert params["max_agent_tokens"] in (100, 200)
    mixed = suggested(SearchSpace(kinds=("multihop", "agent")), 20)
    assert {p["kind"] for p in mixed} == {"multihop", "agent"}
    assert all(("prompt" in p) == (p["kind"] == "multihop") for p in mixed)


def test_an_agent_trial_becomes_an_agent_spec_and_label():
    params = {
        "kind": "agent",
        "max_steps": 6,
        "max_articles": 3,
        "max_agent_tokens": 4000,
        "n_docs": 5,
        "lead_chars": 60,
    }
    spec = trial_spec(params, include_question=False, cot=True, context_tokens=800)
    assert spec == ProgramSpec(
        "agent",
        max_steps=6,
        max_articles=3,
        max_agent_tokens=4000,
        n_docs=5,
        lead_chars=60,
        cot=True,
        context_tokens=800,
    )
    assert trial_label(params) == "agent s6 a3 t4000 n5 l60"
    multihop = {"rounds": 2, "k": 3, "n_docs": 4, "prompt": "planning"}
    assert trial_label(multihop) == "planning r2 k3 n4"
    assert trial_label({**multihop, "kind": "multihop"}) == "planning r2 k3 n4"
    # What an optimizer has to tune besides the answer: the agent's step, a writer's queries.
    assert searches_by_lm(spec)
    assert searches_by_lm(trial_spec(multihop))
    assert not searches_by_lm(trial_spec({**multihop, "k": 1}))  # the question alone


@pytest.mark.parametrize(
    "space, message",
    [
        ({"kinds": ("robot",)}, "unknown program kind(s) ['robot']"),
        ({"kinds": ()}, "unknown program kind(s) []"),
        ({"max_steps": (0, 3)}, "search range max_steps=0..3"),
        ({"max_articles": (5, 2)}, "search range max_articles=5..2"),
        ({"max_agent_tokens": ()}, "max_agent_tokens must not be empty"),
        ({"max_agent_tokens": (0,)}, "max_agent_tokens=[0] must be whole numbers >= 1"),
    ],
)
def test_a_bad_agent_space_is_refused(space, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        SearchSpace(**space)


def test_the_agent_flags_become_the_study_space():
    argv = ["--kinds", "multihop,agent", "--max-steps", "3-8", "--max-articles", "4"]
    space = config_of(argv + ["--max-agent-tokens", "2000,8000", "--n-docs", "2-5"]).search_space()
    assert space.kinds == ("multihop", "agent")
    assert (space.max_steps, space.max_articles) == ((3, 8), (4, 4))
    assert space.max_agent_tokens == (2000, 8000) and space.n_docs == (2, 5)
    config_of(argv).validate()


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--kinds", "agent", "--rounds", "2-3"],
            "--rounds shapes multihop trials and --kinds agent tries none: add multihop to "
            "--kinds or drop --rounds",
        ),
        (["--kinds", "agent", "--prompts", "titles"], "--prompts shapes multihop trials"),
        (["--kinds", "agent", "--search-question-query"], "--search-question-query shapes"),
        (["--max-steps", "2-4"], "--max-steps shapes agent trials and --kinds multihop tries"),
        (["--max-agent-tokens", "500"], "add agent to --kinds or drop --max-agent-tokens"),
        (
            ["--kinds", "multihop,agent", "--optimizer", "gold-demos"],
            "--optimizer gold-demos writes demos for the multihop query writer and the agent "
            "has none: choose bootstrap-rs, mipro, gepa or simba, or drop agent from --kinds",
        ),
        (["--kinds", "agent", "--optimizer", "gold-bootstrap"], "the agent has none"),
        (["--kinds", "robot"], "unknown"),
    ],
)
def test_settings_that_do_not_fit_the_kinds_exit_2_with_the_fix(argv, message, capsys):
    assert message in compile_refuses(argv, capsys)
