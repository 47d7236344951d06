"""optimize.gold_demos and the gold-demos optimizer; the --teacher-model wiring."""

from __future__ import annotations

import json

import dspy
import pytest
from opt_fake import FakeLM
from opt_helpers import (  # noqa: F401 (autouse fixture)
    compile_config,
    quiet_optuna,
    record_optimizer,
    run_tiny,
)

from frames_dspy.commands.compile import build_parser
from frames_dspy.judge import Autorater
from frames_dspy.programs import build_program
from optimize.config import CompileConfig
from optimize.gold_demos import gold_query_demos, with_gold_demos
from optimize.optimizers import OptimizerSettings, QueriesFoundMore, compile_program


def multihop(retriever, **settings):
    spec = {"kind": "multihop", "rounds": 2, "k": 2, "n_docs": 1, "planning": False}
    return build_program({**spec, **settings}, retriever=retriever)


def test_gold_demos_name_the_gold_articles_the_question_alone_misses(tiny):
    examples, store, _, retriever = tiny
    program = multihop(retriever)
    demos = gold_query_demos(program, examples[:4], store)
    assert demos
    for demo in demos:
        example = next(e for e in examples if e.question == demo.question)
        # Each query is a gold title the question's own search did not bring this round.
        assert set(demo.queries) <= set(example.gold_titles)
        alone = {h.article_id for h in retriever.search(demo.question, 2)}
        for title in demo.queries:
            assert store.resolve(example.gold_urls[example.gold_titles.index(title)]).id not in (
                alone if demo.found == "(nothing yet)" else set()
            )
        assert demo.n_queries == 1 and len(demo.queries) <= 1  # k=2, the question is one
        assert set(demo.inputs().keys()) == {"question", "found", "past_queries", "n_queries"}
    # A round-1 demo shows the view round 1 shows: nothing yet.
    assert any(d.found == "(nothing yet)" and d.past_queries == [] for d in demos)


def test_gold_demos_without_the_question_name_every_missing_article_in_order(tiny):
    examples, store, _, retriever = tiny
    program = multihop(retriever, include_question=False, rounds=1)
    demos = gold_query_demos(program, examples[:3], store)
    assert [d.queries for d in demos] == [e.gold_titles for e in examples[:3]]
    assert [d.question for d in demos] == [e.question for e in examples[:3]]


def test_a_later_round_demo_shows_that_rounds_found_view(tiny):
    examples, store, _, retriever = tiny
    program = multihop(retriever, include_question=False, k=1)
    demos = gold_query_demos(program, examples[:1], store)
    person, town = examples[0].gold_titles
    assert [d.queries for d in demos] == [[person], [town]]
    assert demos[1].past_queries == [person]
    assert demos[1].found.startswith(f"[1] {person}: ")  # the view the program builds


def test_gold_demos_follow_the_questions_own_budget(tiny):
    # With question_docs the question brings more than n_docs: a gold article within its
    # first question_docs hits is not missing, so no demo asks for it.
    examples, store, _, retriever = tiny
    program = multihop(retriever, k=2, n_docs=1, question_docs=3)
    for demo in gold_query_demos(program, examples[:4], store):
        if demo.found == "(nothing yet)":
            brought = {h.title for h in retriever.search(demo.question, 3)}
            assert not set(demo.queries) & brought


def test_planning_demos_carry_a_plan(tiny):
    examples, store, _, retriever = tiny
    program = multihop(retriever, planning=True, include_question=False, rounds=1)
    demo = gold_query_demos(program, examples[:1], store)[0]
    assert demo.plan == f"Still missing: the articles on {'; '.join(examples[0].gold_titles)}."


def test_with_gold_demos_sets_the_query_writers_demos_only(tiny):
    examples, store, knowledge, retriever = tiny
    program = multihop(retriever)
    compiled = with_gold_demos(program, examples[:6], store, demos=3, seed=1)
    assert program.generate.demos == [] and compiled is not program
    assert compiled.answer.demos == []
    demos = compiled.generate.demos
    assert len(demos) == 3 and len({d.question for d in demos}) == 3  # 3 questions
    train = {e.question for e in examples[:6]}
    assert {d.question for d in demos} <= train
    assert with_gold_demos(program, examples[:6], store, demos=3, seed=1).generate.demos == demos
    lm = FakeLM(knowledge)
    with dspy.context(lm=lm):
        compiled(question=examples[8].question)
    shown = " ".join(m["content"] for call in lm.history for m in call["messages"])
    assert all(d.question in shown for d in demos)  # the demos reach the prompt


@pytest.mark.parametrize("name", ["gold-demos", "gold-bootstrap"])
def test_gold_demos_refuse_a_program_without_a_query_writer(tiny, name):
    examples, store, knowledge, retriever = tiny
    program = build_program({"kind": "bm25", "n_docs": 2}, retriever=retriever)
    with pytest.raises(ValueError, match=f"--optimizer {name} builds demos for the multi-step"):
        compile_program(
            program,
            examples[:4],
            settings=OptimizerSettings(name=name, objective="recall", max_demos=2),
            autorater=Autorater(FakeLM(knowledge)),
            lm=FakeLM(knowledge),
            store=store,
        )


def test_the_gold_demos_optimizer_makes_no_lm_call(tiny):
    examples, store, knowledge, retriever = tiny
    program = multihop(retriever)
    lm, judge_lm = FakeLM(knowledge), FakeLM(knowledge)
    compiled = compile_program(
        program,
        examples[:5],
        settings=OptimizerSettings(name="gold-demos", objective="recall", max_demos=2),
        autorater=Autorater(judge_lm),
        lm=lm,
        store=store,
    )
    assert lm.history == [] and judge_lm.history == []
    assert len(compiled.generate.demos) == 2 and compiled.answer_step
    with pytest.raises(ValueError, match="gold-demos only adds demos"):
        OptimizerSettings(name="gold-demos", max_demos=0)
    assert OptimizerSettings(name="gold-demos", max_demos=3, instructions_only=True).demos == 3


def test_a_gold_demos_compile_takes_its_demos_from_train_only(tiny, tmp_path):
    examples, *_ = tiny
    result, _ = run_tiny(
        tiny,
        tmp_path / "out",
        trials=1,
        train=4,
        rounds=(2, 2),
        k=(2, 2),
        n_docs=(1, 1),
        prompts=("vanilla",),
        objective="recall",
        optimizer="gold-demos",
        max_demos=3,
    )
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    train_ids = set(config["splits"]["train_ids"])
    train = {e.question for e in examples if e.id in train_ids}
    state = json.loads((tmp_path / "out" / "program.json").read_text())
    demos = state["generate"]["demos"]
    assert demos and {d["question"] for d in demos} <= train
    assert result.chosen.compile["optimizer"] == "gold-demos"


@pytest.mark.parametrize("name, cls", [("bootstrap-rs", "BootstrapFewShotWithRandomSearch")])
def test_the_teacher_bootstraps_demos(tiny, monkeypatch, name, cls):
    examples, store, knowledge, retriever = tiny
    built = record_optimizer(monkeypatch, cls)
    lm, teacher = FakeLM(knowledge), FakeLM(knowledge)
    for teacher_lm in (teacher, None):
        compile_program(
            multihop(retriever),
            examples[:4],
            settings=OptimizerSettings(name=name, candidates=2),
            autorater=Autorater(lm),
            lm=lm,
            teacher_lm=teacher_lm,
            store=store,
        )
    assert built[0]["teacher_settings"] == {"lm": teacher}
    assert "teacher_settings" not in built[1]


def test_mipro_takes_the_teacher_for_demos_and_prompts(tiny, monkeypatch):
    examples, store, knowledge, retriever = tiny
    built = record_optimizer(monkeypatch, "MIPROv2")
    lm, teacher = FakeLM(knowledge), FakeLM(knowledge)
    compile_program(
        multihop(retriever),
        examples[:4],
        settings=OptimizerSettings(name="mipro", budget=2),
        autorater=Autorater(lm),
        lm=lm,
        prompt_lm=teacher,
        teacher_lm=teacher,
        store=store,
    )
    assert built[0]["teacher_settings"] == {"lm": teacher}
    assert built[0]["prompt_model"] is teacher and built[0]["task_model"] is lm


def test_teacher_model_option_reaches_the_config_and_the_compile(tiny, tmp_path, monkeypatch):
    args = build_parser().parse_args(["--teacher-model", "local-1.5b", "--optimizer", "mipro"])
    assert args.teacher_model == "local-1.5b"
    assert CompileConfig().make_teacher() is None
    # In a run, the teacher writes the optimizer's prompts instead of the judge.
    import optimize.final

    seen = {}

    def fake_compile(program, trainset, **options):
        seen.update(options)
        return program

    monkeypatch.setattr(optimize.final, "compile_program", fake_compile)
    examples, store, knowledge, retriever = tiny
    teacher = FakeLM(knowledge)
    from optimize.compilation import run_compile

    run_compile(
        compile_config(tmp_path / "out", trials=1, optimizer="bootstrap-rs"),
        lm=FakeLM(knowledge),
        teacher_lm=teacher,
        examples=examples,
        store=store,
        retriever=retriever,
    )
    assert seen["teacher_lm"] is teacher and seen["prompt_lm"] is teacher


def test_a_recall_compile_answers_nothing_on_dev_or_test(tiny, tmp_path):
    examples, store, knowledge, retriever = tiny
    lm = FakeLM(knowledge)
    from optimize.compilation import run_compile

    result = run_compile(
        compile_config(
            tmp_path / "out",
            trials=1,
            objective="recall",
            optimizer="gold-demos",
            prompts=("vanilla",),
            rounds=(2, 2),
            k=(2, 2),
        ),
        lm=lm,
        examples=examples,
        store=store,
        retriever=retriever,
    )
    asked = [m["content"] for call in lm.history for m in call["messages"]]
    assert asked and not any("[[ ## context ## ]]" in text for text in asked)
    assert result.test.figures.recall_by_round and "--retrieval-only" in result.command
    paired = result.chosen.compile["dev_paired"]
    assert paired["n"] == 3 and len(paired["ci95"]) == 2


def test_the_keep_check_pairs_questions():
    from frames_dspy.results.records import QuestionRecord
    from optimize.final import paired_dev_check

    before = [QuestionRecord("t", i, recall=[0.0, 0.5], correct=False) for i in range(20)]
    after = [QuestionRecord("t", i, recall=[0.5, 1.0], correct=i < 10) for i in range(20)]
    up = paired_dev_check(before, after, "recall")
    assert up["n"] == 20 and up["diff"] == pytest.approx(0.5) and up["ci95"] == [0.5, 0.5]
    down = paired_dev_check(after, before, "accuracy")
    assert down["diff"] == pytest.approx(-0.5) and down["ci95"][1] < 0
    assert paired_dev_check(before, [QuestionRecord("t", 99)], "recall") is None


def test_demos_a_writer_could_read_off_its_inputs_come_first(tiny):
    from optimize.gold_demos import reachable

    def demo(question, found, queries):
        return dspy.Example(question=question, found=found, queries=queries)

    assert reachable(demo("Who directed The Dark Knight?", "(nothing yet)", ["The Dark Knight"]))
    assert reachable(
        demo("Who was Amiens' mayor?", "[1] Emmanuel Macron: born in Amiens", ["Amiens"])
    )
    # A title that needs outside knowledge, its qualifier aside, is not readable.
    who = demo(
        "Who played the Joker in The Dark Knight?", "(nothing yet)", ["Heath Ledger (actor)"]
    )
    assert not reachable(who)
    assert reachable(demo("Is Heath Ledger Australian?", "(nothing yet)", ["Heath Ledger (actor)"]))

    examples, store, _, retriever = tiny
    program = multihop(retriever, include_question=False, k=1)
    compiled = with_gold_demos(program, examples[:6], store, demos=6, seed=0)
    flags = [reachable(d) for d in compiled.generate.demos]
    assert flags == sorted(flags, reverse=True)  # every readable demo before any other


def test_queries_found_more_asks_for_a_gold_article_the_question_alone_misses(tiny):
    examples, store, _, retriever = tiny
    metric = QueriesFoundMore(retriever, store)
    example = examples[0]
    alone = [h.article_id for h in retriever.search(example.question, 2)]
    gold = [a.id for a in store.resolve_many(example.gold_urls)]
    missed = [g for g in gold if g not in alone]
    assert missed  # the town is named only in the person's article
    assert metric(example, dspy.Prediction(context_ids=[alone])) is False
    assert metric(example, dspy.Prediction(context_ids=[[alone[0]], [alone[0], missed[0]]]))
    assert metric(example, dspy.Prediction(context_ids=[])) is False


def test_gold_bootstrap_runs_a_taught_teacher_and_keeps_rounds_that_found_more(tiny):
    examples, store, knowledge, retriever = tiny
    lm, teacher = FakeLM(knowledge), FakeLM(knowledge)
    train = examples[:6]
    compiled = compile_program(
        multihop(retriever),
        train,
        settings=OptimizerSettings(name="gold-bootstrap", objective="recall", max_demos=2),
        autorater=Autorater(lm),
        lm=lm,
        teacher_lm=teacher,
        store=store,
    )
    assert lm.history == [] and teacher.history  # the teacher ran the train questions
    # The teacher's query writer held gold demos: their questions reach its prompt.
    gold_demos = with_gold_demos(multihop(retriever), train, store, demos=2).generate.demos
    first = teacher.history[0]["messages"]
    assert all(any(d.question in m["content"] for m in first) for d in gold_demos)
    demos = compiled.generate.demos
    assert 1 <= len(demos) <= 2 and compiled.answer_step
    # Each demo is a round the teacher wrote (its queries), from a run that found more.
    metric = QueriesFoundMore(retriever, store)
    by_question = {e.question: e for e in train}
    for demo in demos:
        example = by_question[demo["question"] if isinstance(demo, dict) else demo.question]
        run = multihop(retriever)
        with dspy.context(lm=teacher):
            taught = with_gold_demos(run, train, store, demos=2)
            assert metric(example, taught(question=example.question))
    with pytest.raises(ValueError, match="gold-bootstrap only adds demos"):
        OptimizerSettings(name="gold-bootstrap", max_demos=0)


def test_the_teacher_goes_on_until_its_demos_wrote_queries():
    import dspy
    from dspy.utils.dummies import DummyLM

    from optimize.gold_demos import TaughtBootstrap, drop_empty_rounds

    class Writer(dspy.Module):
        def __init__(self):
            super().__init__()
            self.generate = dspy.Predict("question -> queries: list[str]")

        def forward(self, question):
            return self.generate(question=question)

    trainset = [dspy.Example(question=f"q{i}").with_inputs("question") for i in range(4)]
    # The first passing run writes nothing: it must not become the demo.
    lm = DummyLM([{"queries": []}, {"queries": ["Mount Etna"]}, {"queries": ["Moon"]}])
    teacher = TaughtBootstrap(
        metric=lambda example, pred, trace=None: True,
        max_bootstrapped_demos=1,
        max_labeled_demos=0,
        max_rounds=1,
    )
    with dspy.context(lm=lm):
        compiled = teacher.compile(Writer(), trainset=trainset)
    assert teacher.report == {"tried": 2, "passed": 1, "dropped_empty": 1}
    assert compiled.teacher_report == {**teacher.report, "asked": 1}
    assert [d["queries"] for d in compiled.generate.demos] == [["Mount Etna"]]
    compiled.generate.demos.append(dspy.Example(question="q9", queries=[]))
    assert drop_empty_rounds(compiled) == 1
    assert [d["queries"] for d in compiled.generate.demos] == [["Mount Etna"]]


def test_gold_demos_start_where_the_lm_does_and_skip_what_phrases_bring(tiny):
    examples, store, _, retriever = tiny
    program = multihop(retriever, k=2, n_docs=1, question_docs=2, phrase_docs=2, lm_from_round=2)
    demos = gold_query_demos(program, examples[:6], store)
    # Round 1 sends no written query, so every demo is a round-2 one with round 1's view.
    assert demos and all(d.found != "(nothing yet)" for d in demos)
    for demo in demos:
        found_titles = {line.split(": ")[0].split("] ", 1)[1] for line in demo.found.splitlines()}
        assert not set(demo.queries) & found_titles
