"""optimize.optimizers: settings, short demos, and GEPA's feedback metric."""

from __future__ import annotations

import re

import dspy
import pytest
from opt_fake import FakeLM
from opt_helpers import record_optimizer

from frames_dspy.judge import Autorater
from frames_dspy.programs import ProgramSpec, build_program, load_program, save_program
from optimize.optimizers import (
    FeedbackMetric,
    ObjectiveMetric,
    OptimizerSettings,
    answer_predictor_names,
    compile_program,
    rough_calls,
    trim_demos,
)


def test_gepa_feedback_metric_has_gepas_signature(tiny):
    examples, store, knowledge, _ = tiny
    metric = FeedbackMetric(Autorater(FakeLM(knowledge)), store)
    pred = dspy.Prediction(answer="1843", context_ids=[[]])
    out = metric(examples[0], pred, None, "generate.predict", None)
    assert out.score == 1.0 and "Correct" in out.feedback and "they missed:" in out.feedback
    gold = [a.title for a in store.resolve_many(examples[0].gold_urls)]
    assert gold and all(title in out.feedback for title in gold)  # the missed articles, named
    wrong = metric(examples[0], dspy.Prediction(answer="no idea"), None, None, None)
    assert wrong.score == 0.0 and "1843" in wrong.feedback
    found = [a.id for a in store.resolve_many(examples[0].gold_urls)]
    right = metric(examples[0], dspy.Prediction(answer="x", context_ids=[found]), None, None, None)
    assert "they missed" not in right.feedback and f"found {len(found)} of" in right.feedback


def test_objective_metrics_score_recall_and_break_ties(tiny):
    examples, store, knowledge, _ = tiny
    autorater = Autorater(FakeLM(knowledge))
    example = examples[0]
    gold = [a.id for a in store.resolve_many(example.gold_urls)]
    half = dspy.Prediction(answer="no idea", context_ids=[gold[:1]])
    full = dspy.Prediction(answer="1843", context_ids=[gold])
    recall = ObjectiveMetric("recall", autorater, store)
    assert recall(example, half) == pytest.approx(1 / len(gold))
    assert recall(example, full) == 1.0 and recall(example, full, trace=True) is True
    both = ObjectiveMetric("accuracy+recall", autorater, store, n=9)
    assert both(example, half) == pytest.approx(1 / len(gold) / 10)  # less than 1 question
    assert both(example, full) == pytest.approx(1.1)
    with pytest.raises(ValueError, match="needs the article store"):
        ObjectiveMetric("recall", autorater)


def test_the_feedback_for_the_query_writer_names_the_gold_articles(tiny):
    examples, store, knowledge, _ = tiny
    metric = FeedbackMetric(Autorater(FakeLM(knowledge)), store)
    person, town = examples[0].gold_titles
    found_half = [[store.resolve(examples[0].gold_urls[0]).id]]
    pred = dspy.Prediction(answer="no idea", context_ids=found_half)
    out = metric(examples[0], pred, None, "generate", None)
    assert out.score == 0.0
    assert "found 1 of the 2 Wikipedia articles the question needs" in out.feedback
    assert f"(found: {person}); they missed: {town}." in out.feedback
    # The answer step's feedback is the verdict alone; its predictors are found by object.
    examples, store, _, retriever = tiny
    program = build_program(ProgramSpec("multihop", cot=True), retriever=retriever, store=store)
    names = answer_predictor_names(program)
    assert names == {"answer.predict"}  # the answer step's ChainOfThought, not the writer's
    metric = FeedbackMetric(Autorater(FakeLM(knowledge)), store, answer_names=names)
    answer = metric(examples[0], pred, None, "answer.predict", None)
    assert "articles the question needs" not in answer.feedback
    assert "Incorrect" in answer.feedback
    writer = metric(examples[0], pred, None, "generate", None)
    assert "articles the question needs" in writer.feedback


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"name": "magic"}, "unknown optimizer 'magic'; choose one of none, bootstrap-rs"),
        ({"max_demos": -1}, "max_demos=-1 must be >= 0"),
        ({"name": "bootstrap-rs", "max_demos": 0}, "bootstrap-rs only adds demos"),
        ({"demo_chars": 99}, "demo_chars=99 is too small"),
        ({"candidates": 0}, "candidates=0 must be at least 1"),
    ],
)
def test_bad_optimizer_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        OptimizerSettings(**settings)


@pytest.mark.parametrize(
    "name, instructions_only, demos",
    [
        ("none", False, 0),
        ("gepa", False, 0),  # GEPA evolves instructions only
        ("bootstrap-rs", True, 3),  # it only adds demos, so instructions_only does not apply
        ("mipro", False, 3),
        ("mipro", True, 0),
        ("simba", True, 0),
    ],
)
def test_how_many_demos_each_optimizer_may_add(name, instructions_only, demos):
    settings = OptimizerSettings(name=name, max_demos=3, instructions_only=instructions_only)
    assert settings.demos == demos


def test_trim_demos_cuts_long_strings_only():
    program = build_program({"kind": "bm25", "n_docs": 2}, retriever=object())
    long_context = "word " * 100
    program.answer.demos = [
        dspy.Example(context=long_context, question="short?", answer="yes"),
        {"context": "brief", "question": "q" * 150, "answer": 42},
    ]
    assert trim_demos(program, 120) == 2
    first, second = program.answer.demos
    assert isinstance(first, dspy.Example) and isinstance(second, dict)
    assert first.context == long_context[:120].rstrip() + " …"
    assert (first.question, first.answer) == ("short?", "yes")
    assert second == {"context": "brief", "question": "q" * 120 + " …", "answer": 42}
    assert trim_demos(program, 200) == 0  # cut fields are now short enough


def test_compile_program_without_an_optimizer_returns_the_program_and_checks_the_trainset(tiny):
    examples, store, knowledge, retriever = tiny
    program = build_program({"kind": "multihop", "rounds": 1, "k": 1}, retriever=retriever)
    autorater = Autorater(FakeLM(knowledge))
    lm = FakeLM(knowledge)
    same = compile_program(
        program, examples[:1], settings=OptimizerSettings(), autorater=autorater, lm=lm
    )
    assert same is program
    with pytest.raises(ValueError, match="--optimizer bootstrap-rs needs at least 2 train"):
        compile_program(
            program,
            examples[:1],
            settings=OptimizerSettings(name="bootstrap-rs"),
            autorater=autorater,
            lm=lm,
        )
    assert lm.history == []


def test_rough_calls_grow_with_what_the_optimizer_does():
    def calls(name, **settings):
        return rough_calls(OptimizerSettings(name=name, **settings), n_train=10, calls_per_q=3)

    assert calls("none") == 0
    assert calls("bootstrap-rs", candidates=8) > calls("bootstrap-rs", candidates=2)
    assert calls("mipro", instructions_only=True) < calls("mipro")
    assert calls("simba", candidates=4) > calls("simba", candidates=1)
    assert calls("gepa") > 0
    # A recall compile runs 2 of the 3 program calls and no judge: half of 3 + 1 per rollout.
    assert calls("bootstrap-rs", objective="recall") == calls("bootstrap-rs") / 2


@pytest.mark.parametrize("name", ["bootstrap-rs", "mipro", "gepa", "simba"])
def test_a_recall_compile_changes_only_the_query_writer_and_never_answers(tiny, name):
    examples, store, knowledge, retriever = tiny
    program = build_program(
        {"kind": "multihop", "rounds": 1, "k": 2, "include_question": False},
        retriever=retriever,
    )
    answer_before = program.answer.dump_state()
    judge_lm, lm = FakeLM(knowledge), FakeLM(knowledge)
    settings = OptimizerSettings(
        name=name, objective="recall", budget=2, candidates=2, max_demos=1, seed=1
    )
    compiled = compile_program(
        program,
        examples[:6],
        settings=settings,
        autorater=Autorater(judge_lm),
        lm=lm,
        store=store,
    )
    assert judge_lm.history == []  # recall needs no verdict
    asked = [m["content"] for call in lm.history for m in call["messages"]]
    assert not any("[[ ## context ## ]]" in text for text in asked)  # no answer call at all
    assert compiled is not program and compiled.answer_step and program.answer_step
    assert compiled.answer.dump_state() == answer_before  # the answer step is the original's
    assert [n for n, _ in compiled.named_predictors()] == ["answer", "generate"]
    answering = FakeLM(knowledge)
    with dspy.context(lm=answering):
        pred = compiled(question=examples[0].question)
    assert len(answering.history) == 2 and pred.answer  # the compiled program answers again


def test_without_its_answer_step_a_program_makes_no_answer_call(tiny):
    examples, _, knowledge, retriever = tiny
    program = build_program({"kind": "multihop", "rounds": 2, "k": 1}, retriever=retriever)
    program.answer_step = False
    lm = FakeLM(knowledge)
    with dspy.context(lm=lm):
        pred = program(question=examples[0].question)
    assert pred.answer == "" and pred.packing is None
    assert len(pred.context_ids) == 2 and lm.history == []  # the question was the only query


@pytest.mark.parametrize(
    "name, option, cls",
    [
        ("mipro", "prompt_model", "MIPROv2"),
        ("gepa", "reflection_lm", "GEPA"),
        ("simba", "prompt_model", "SIMBA"),
    ],
)
def test_the_optimizers_write_prompts_with_the_prompt_lm(tiny, monkeypatch, name, option, cls):
    # The 0.5B program model writes advice SIMBA cannot parse: a stronger model can write the
    # prompts (optimize.compile passes --judge-model) while the program keeps its own model.
    examples, store, knowledge, retriever = tiny
    built = record_optimizer(monkeypatch, cls)
    program = build_program({"kind": "multihop", "rounds": 1, "k": 1}, retriever=retriever)
    lm, writer = FakeLM(knowledge), FakeLM(knowledge)
    settings = OptimizerSettings(name=name, budget=2, candidates=2)
    for prompt_lm in (writer, None):
        compile_program(
            program,
            examples[:4],
            settings=settings,
            autorater=Autorater(lm),
            lm=lm,
            prompt_lm=prompt_lm,
            store=store,
        )
    assert built[0][option] is writer
    assert built[1][option] is lm  # without one, the program's own LM
    if "task_model" in built[0]:
        assert built[0]["task_model"] is lm


# --- the agent: one step prompt called several times a question ------------------------------


def agent_of(tiny, **limits):
    _, store, _, retriever = tiny
    spec = ProgramSpec("agent", n_docs=2, **limits)
    return build_program(spec, retriever=retriever, store=store, context_tokens=400)


@pytest.mark.parametrize("name", ["bootstrap-rs", "mipro", "gepa", "simba"])
def test_every_dspy_optimizer_compiles_the_agent_and_program_json_round_trips(name, tiny, tmp_path):
    examples, store, knowledge, retriever = tiny
    lm = FakeLM(knowledge)
    # Three steps are too few for the fake's agent to read both articles: nothing is
    # perfect, so the optimizers have something to improve (GEPA reflects, SIMBA tries);
    # bootstrapping keeps the runs that pass, so it gets the steps to pass.
    program = agent_of(tiny, max_steps=6 if name == "bootstrap-rs" else 3)
    settings = OptimizerSettings(
        name=name, max_demos=1, candidates=2, budget=12 if name == "gepa" else 1,
        objective="accuracy+recall",
    )  # fmt: skip
    compiled = compile_program(
        program, examples[:4], settings=settings, autorater=Autorater(lm), lm=lm, store=store
    )
    assert type(compiled) is type(program) and compiled.spec == program.spec
    assert {n for n, _ in compiled.named_predictors()} == {"choose", "answer"}
    if name == "bootstrap-rs":
        # Demos of the step prompt come from the trace: one step of a run, its view as input.
        with_demos = [
            c["program"] for c in compiled.candidate_programs if c["program"].choose.demos
        ]
        assert with_demos
        demo = dict(with_demos[0].choose.demos[0])
        assert {"question", "steps", "limits", "tool", "argument"} <= set(demo)
        assert demo["tool"] in ("search", "read", "finish") and demo["augmented"]
        compiled = with_demos[0]
    if name == "gepa":
        asked = [m["messages"][-1]["content"] for m in lm.history]
        assert any("The articles it read hold" in text for text in asked)  # the agent's feedback
    path = tmp_path / "program.json"
    save_program(compiled, path)
    loaded, spec, _ = load_program(path, retriever=retriever, store=store)
    assert spec == program.spec and loaded.dump_state() == compiled.dump_state()
    with dspy.context(lm=lm):
        a, b = compiled(question=examples[5].question), loaded(question=examples[5].question)
    assert (a.answer, a.context_ids, a.stop_reason) == (b.answer, b.context_ids, b.stop_reason)


@pytest.mark.parametrize("name", ["gold-demos", "gold-bootstrap"])
def test_the_gold_optimizers_refuse_the_agent(name, tiny):
    examples, store, knowledge, _ = tiny
    lm = FakeLM(knowledge)
    with pytest.raises(ValueError, match="the SearchAgent program has none"):
        compile_program(
            agent_of(tiny),
            examples[:4],
            settings=OptimizerSettings(name=name),
            autorater=Autorater(lm),
            lm=lm,
            store=store,
        )


def test_the_agents_feedback_names_the_gold_articles_it_read_and_missed(tiny):
    examples, store, knowledge, _ = tiny
    metric = FeedbackMetric(Autorater(FakeLM(knowledge)), store)
    person, town = examples[0].gold_titles
    read = [[store.resolve(examples[0].gold_urls[0]).id]]
    pred = dspy.Prediction(answer="no idea", context_ids=read, trajectory=[])
    out = metric(examples[0], pred, None, "choose", None)
    assert "The articles it read hold 1 of the 2 Wikipedia articles" in out.feedback
    assert f"(read: {person}); it never read: {town}." in out.feedback
