"""frames_dspy.programs.spec, .conditions and .io: a program's shape as data, and program.json.

``tests/programs/test_programs.py`` runs the modules and checks a save/load round trip gives the
same predictions; this file checks the data layer under them: defaults, validation, the
conditions' knobs, and what ``program.json`` keeps (the budget, legacy files, provenance).
No LM is called: programs are only built, saved and read back.
"""

from __future__ import annotations

import dataclasses
import json
import logging

import numpy as np
import pytest

from frames_dspy.programs import (
    CONDITIONS,
    PAPER_ACCURACY,
    Condition,
    ProgramSpec,
    build_program,
    check_program_file,
    load_program,
    read_program_file,
    save_program,
)
from frames_dspy.programs.spec import kind_settings, register_kind

# build_program only checks that the parts a kind needs are given; nothing is searched here.
PARTS = {"retriever": object(), "store": object()}

MULTIHOP_DEFAULTS = {
    "rounds": 5,
    "k": 5,
    "n_docs": 10,
    "planning": True,
    "titles": False,
    "include_question": True,
    "question_docs": None,
    "lm_from_round": None,
    "phrase_docs": None,
    "context_tokens": None,
    "found_tokens": 1000,
    "lead_chars": 120,
    "cot": False,
}


def settings_of(spec: ProgramSpec) -> dict:
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.name != "kind"}


# --- ProgramSpec ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("naive", {"cot": False}),
        ("bm25", {"n_docs": 4, "context_tokens": None, "cot": False}),
        ("oracle", {"context_tokens": None, "cot": False}),
        ("multihop", MULTIHOP_DEFAULTS),
    ],
)
def test_each_kind_fills_its_own_defaults_and_leaves_the_rest_unset(kind, expected):
    spec = ProgramSpec(kind)
    assert kind_settings(kind) == expected
    settings = settings_of(spec)
    assert {k: v for k, v in settings.items() if k in expected} == expected
    assert all(v is None for k, v in settings.items() if k not in expected)
    assert all(spec.takes(name) for name in expected)
    assert not any(spec.takes(name) for name in settings if name not in expected)


@pytest.mark.parametrize("name", list(CONDITIONS))
def test_every_condition_round_trips_through_a_json_dict(name):
    spec = CONDITIONS[name].spec
    if spec.takes("context_tokens"):
        spec = spec.replace(context_tokens=900)
    data = json.loads(json.dumps(spec.to_dict()))
    assert data["kind"] == spec.kind
    assert ProgramSpec.from_dict(data) == spec
    # Only the settings the kind takes are written, and None ones are left out.
    assert set(data) - {"kind"} <= set(kind_settings(spec.kind))
    assert None not in data.values()


def test_to_dict_leaves_an_unset_budget_out_and_from_dict_keeps_it_unset():
    data = ProgramSpec("bm25", n_docs=2).to_dict()
    assert data == {"kind": "bm25", "n_docs": 2, "cot": False}
    assert ProgramSpec.from_dict(data).context_tokens is None


def test_an_unknown_kind_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown program kind 'retro'") as info:
        ProgramSpec("retro")
    assert str(info.value).endswith("choose one of agent, bm25, multihop, naive, oracle, phrases")


@pytest.mark.parametrize("data", [{"rounds": 2}, ["multihop"], None])
def test_from_dict_needs_a_mapping_with_a_kind(data):
    with pytest.raises(ValueError, match="a program spec needs a 'kind'"):
        ProgramSpec.from_dict(data)


def test_a_setting_the_kind_does_not_take_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"unknown naive setting\(s\) \['n_docs'\]") as info:
        ProgramSpec("naive", n_docs=3)
    assert "choose from ['cot']" in str(info.value)
    with pytest.raises(ValueError, match=r"unknown oracle setting\(s\) \['rounds'\]") as info:
        ProgramSpec.from_dict({"kind": "oracle", "rounds": 2, "cot": True})
    assert "'context_tokens'" in str(info.value)


@pytest.mark.parametrize("name", ["rounds", "k", "n_docs", "context_tokens", "found_tokens"])
@pytest.mark.parametrize("value", [0, -3, True, False, 2.5, "x"])
def test_count_settings_must_be_whole_numbers_of_at_least_one(name, value):
    with pytest.raises(ValueError, match=f"{name}={value!r} must be a whole number of at least 1"):
        ProgramSpec("multihop", **{name: value})


def test_a_whole_float_from_a_json_file_becomes_an_int():
    # A hand-edited program.json or a pandas round trip can write 2.0; MultiHop runs
    # range(rounds), which a float breaks, and describe() would say "r2.0".
    spec = ProgramSpec.from_dict({"kind": "multihop", "rounds": 2.0, "k": 3, "n_docs": 4.0})
    assert (spec.rounds, spec.n_docs) == (2, 4)
    assert isinstance(spec.rounds, int) and isinstance(spec.n_docs, int)
    assert spec.describe() == "multihop planning r2 k3 n4"
    plain = ProgramSpec("multihop", rounds=2, k=3, n_docs=4)
    assert json.dumps(spec.to_dict()) == json.dumps(plain.to_dict())
    # Numbers from numpy or pandas (a trials table) count as well.
    from_numpy = ProgramSpec("bm25", n_docs=np.int64(3), context_tokens=np.float64(800.0))
    assert (from_numpy.n_docs, from_numpy.context_tokens) == (3, 800)
    assert json.dumps(from_numpy.to_dict())  # plain ints, so it can be saved
    with pytest.raises(ValueError, match="n_docs=nan must be a whole number"):
        ProgramSpec("bm25", n_docs=float("nan"))


def test_a_spec_is_frozen_and_replace_validates():
    spec = ProgramSpec("bm25", n_docs=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.n_docs = 5
    wider = spec.replace(n_docs=6, context_tokens=800)
    assert (wider.n_docs, wider.context_tokens) == (6, 800)
    assert (spec.n_docs, spec.context_tokens) == (2, None)
    with pytest.raises(ValueError, match="n_docs=0"):
        spec.replace(n_docs=0)
    with pytest.raises(ValueError, match=r"unknown bm25 setting\(s\) \['rounds'\]"):
        spec.replace(rounds=2)
    # Frozen specs are values: equal settings, equal (and hash-equal) specs.
    assert {spec: "a"}[ProgramSpec.from_dict(spec.to_dict())] == "a"


def test_describe_labels_each_kind():
    assert ProgramSpec("naive", cot=True).describe() == "naive"
    assert ProgramSpec("oracle").describe() == "oracle"
    assert ProgramSpec("bm25", n_docs=2).describe() == "bm25 n2"
    vanilla = ProgramSpec("multihop", planning=False, rounds=2, k=3, n_docs=4)
    assert vanilla.describe() == "multihop vanilla r2 k3 n4"
    assert vanilla.replace(planning=True).describe() == "multihop planning r2 k3 n4"


def test_a_kind_cannot_declare_a_setting_the_spec_lacks():
    with pytest.raises(ValueError, match=r"declares settings ProgramSpec lacks: \['depth'\]"):
        register_kind("probe", {"depth": 3, "cot": False})
    with pytest.raises(ValueError, match="unknown program kind 'probe'"):
        ProgramSpec("probe")


# --- conditions -------------------------------------------------------------------------------


def test_conditions_are_in_the_papers_order_with_its_figures():
    assert list(CONDITIONS) == [
        "naive",
        "bm25-2",
        "bm25-4",
        "oracle",
        "multistep-vanilla",
        "multistep-planning",
    ]
    # FRAMES (Krishna et al., 2024), Gemini-Pro-1.5 on all 824 questions.
    assert PAPER_ACCURACY == {
        "naive": 0.408,
        "bm25-4": 0.474,
        "oracle": 0.729,
        "multistep-planning": 0.66,
    }
    assert list(PAPER_ACCURACY) == [n for n in CONDITIONS if n in PAPER_ACCURACY]
    assert all(isinstance(c, Condition) and c.summary for c in CONDITIONS.values())
    # The conditions leave the budget to the run.
    assert all(c.spec.context_tokens is None for c in CONDITIONS.values())
    assert CONDITIONS["multistep-planning"].spec.planning is True
    assert CONDITIONS["multistep-vanilla"].spec.planning is False


def test_configured_changes_only_the_conditions_knobs():
    options = {"rounds": 2, "k": 3, "n_docs": 7, "include_question": False, "cot": True}
    bm25 = CONDITIONS["bm25-2"].configured(**options)
    assert bm25 == ProgramSpec("bm25", n_docs=2, cot=True)  # --n-docs does not make it bm25-7
    assert CONDITIONS["naive"].configured(**options) == ProgramSpec("naive", cot=True)
    assert CONDITIONS["oracle"].configured(**options) == ProgramSpec("oracle", cot=True)
    multi = CONDITIONS["multistep-vanilla"].configured(**options, planning=True)
    assert multi == ProgramSpec(
        "multihop", planning=False, rounds=2, k=3, n_docs=7, include_question=False, cot=True
    )
    # Options a run left unset (None) keep the condition's values.
    none = {name: None for name in options}
    planning = CONDITIONS["multistep-planning"]
    assert planning.configured(**none) == planning.spec
    assert CONDITIONS["bm25-2"].spec == ProgramSpec("bm25", n_docs=2)  # nothing was mutated


def test_configured_values_are_validated():
    with pytest.raises(ValueError, match="rounds=0"):
        CONDITIONS["multistep-planning"].configured(rounds=0)


# --- program.json -----------------------------------------------------------------------------


def saved(tmp_path, spec: ProgramSpec, name="program.json", **extra):
    path = tmp_path / name
    save_program(build_program(spec, **PARTS), path, extra=extra or None)
    return path


def test_program_json_holds_the_whole_spec_with_the_budget(tmp_path):
    spec = ProgramSpec("multihop", rounds=2, k=3, n_docs=4, planning=False, context_tokens=700)
    path = saved(tmp_path, spec, note="study 3")
    state = json.loads(path.read_text())
    assert state["frames_dspy_spec"] == spec.to_dict()
    assert state["frames_dspy_spec"]["context_tokens"] == 700
    assert state["frames_dspy_info"] == {"note": "study 3"}
    assert read_program_file(path)[0] == spec
    assert "frames_dspy_info" not in json.loads(saved(tmp_path, spec, "bare.json").read_text())


def test_load_program_runs_with_the_saved_budget(tmp_path, caplog):
    path = saved(tmp_path, ProgramSpec("bm25", n_docs=3, context_tokens=700))
    with caplog.at_level(logging.WARNING, logger="frames_dspy.programs.io"):
        program, spec, info = load_program(path, **PARTS)
        # Asking for the budget it already has is no override.
        load_program(path, context_tokens=700, **PARTS)
    # Not build_program's 2000-token default: the budget it was scored with.
    assert program.context_tokens == spec.context_tokens == 700
    assert program.n_docs == 3
    assert info == {}
    assert caplog.records == []


def test_an_explicit_budget_wins_over_the_saved_one_with_a_warning(tmp_path, caplog):
    path = saved(tmp_path, ProgramSpec("oracle", context_tokens=700))
    with caplog.at_level(logging.WARNING, logger="frames_dspy.programs.io"):
        program, spec, _ = load_program(path, context_tokens=1500, **PARTS)
    assert program.context_tokens == spec.context_tokens == 1500
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "700-token" in record.getMessage() and "1500" in record.getMessage()
    assert str(path) in record.getMessage()


def test_a_budget_override_is_ignored_by_a_kind_without_one(tmp_path, caplog):
    path = saved(tmp_path, ProgramSpec("naive", cot=True))
    with caplog.at_level(logging.WARNING, logger="frames_dspy.programs.io"):
        program, spec, _ = load_program(path, context_tokens=1500)
    assert spec == ProgramSpec("naive", cot=True)
    assert not hasattr(program, "context_tokens")
    assert caplog.records == []


def make_legacy(path):
    """Rewrite a program.json the old way: provenance inside the spec, budget in optimize."""
    state = json.loads(path.read_text())
    spec = state.pop("frames_dspy_spec")
    budget = spec.pop("context_tokens", None)
    spec["optimize"] = {"trial": 3, "study_name": "old-study", "context_tokens": budget or 650}
    spec["note"] = "written before the spec held the budget"
    state["frames_dspy_spec"] = spec
    path.write_text(json.dumps(state))
    return path


def test_a_legacy_file_loads_with_its_budget_and_its_provenance(tmp_path, caplog):
    spec = ProgramSpec("multihop", rounds=2, k=2, n_docs=3, context_tokens=650)
    path = make_legacy(saved(tmp_path, spec))
    assert "context_tokens" not in json.loads(path.read_text())["frames_dspy_spec"]

    program, loaded, info = load_program(path, **PARTS)
    assert loaded == spec
    assert program.context_tokens == 650
    assert info["optimize"]["trial"] == 3 and info["optimize"]["study_name"] == "old-study"
    assert info["note"] == "written before the spec held the budget"
    assert check_program_file(path) == spec

    # An explicit budget still wins over the legacy one.
    with caplog.at_level(logging.WARNING, logger="frames_dspy.programs.io"):
        program, _, _ = load_program(path, context_tokens=900, **PARTS)
    assert program.context_tokens == 900
    assert "650-token" in caplog.text


def test_a_legacy_naive_file_ignores_the_budget_it_cannot_take(tmp_path):
    path = make_legacy(saved(tmp_path, ProgramSpec("naive")))
    program, spec, info = load_program(path)
    assert spec == ProgramSpec("naive")
    assert info["optimize"]["context_tokens"] == 650


def test_check_program_file_needs_no_retriever_or_store(tmp_path):
    good = saved(tmp_path, ProgramSpec("bm25", n_docs=2, context_tokens=500), "good.json")
    assert check_program_file(good) == ProgramSpec("bm25", n_docs=2, context_tokens=500)

    # A bm25 program's predictors under a spec that claims a multi-step program.
    state = json.loads(good.read_text())
    state["frames_dspy_spec"] = {"kind": "multihop", "rounds": 2, "context_tokens": 500}
    other = tmp_path / "other.json"
    other.write_text(json.dumps(state))
    with pytest.raises(ValueError, match="different program shape") as info:
        check_program_file(other)
    assert "['answer']" in str(info.value) and "'generate'" in str(info.value)


def test_an_invalid_saved_spec_names_the_file(tmp_path):
    path = saved(tmp_path, ProgramSpec("bm25", n_docs=2, context_tokens=500))
    state = json.loads(path.read_text())
    state["frames_dspy_spec"]["n_docs"] = 0
    path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match="its program spec is not valid") as info:
        check_program_file(path)
    assert str(path) in str(info.value) and "n_docs=0" in str(info.value)
    path.write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="not a JSON object"):
        read_program_file(path)


def test_a_naive_file_relabelled_as_oracle_is_refused(tmp_path):
    from frames_dspy.programs import Naive, check_program_file, save_program

    path = tmp_path / "naive.json"
    save_program(Naive(), path)
    state = json.loads(path.read_text())
    state["frames_dspy_spec"] = {"kind": "oracle", "cot": False, "context_tokens": 500}
    path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match="'answer' step has 2 fields but a oracle program's has 3"):
        check_program_file(path)


def test_a_kinds_settings_are_its_constructors_keyword_arguments():
    from frames_dspy.programs.modules import PROGRAM_CLASSES, _constructor_settings

    class Probe:
        def __init__(self, retriever, *, depth: int = 3, cot: bool = False):
            pass

    assert _constructor_settings(Probe) == {"depth": 3, "cot": False}
    for kind, cls in PROGRAM_CLASSES.items():
        assert kind_settings(kind) == _constructor_settings(cls)

    class NoDefault:
        def __init__(self, *, depth: int):
            pass

    with pytest.raises(TypeError, match="'depth' needs a default"):
        _constructor_settings(NoDefault)


def test_a_program_built_without_a_budget_says_how_to_get_one():
    from frames_dspy.programs.modules import Oracle

    with pytest.raises(ValueError, match="context_tokens is not set.*build_program"):
        Oracle(store=object())
