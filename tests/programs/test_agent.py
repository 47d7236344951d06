"""Tests for frames_dspy.programs.agent and .trajectory: the agent condition with DummyLM.

The agent runs over the scripted retriever of ``test_programs.py`` (queries map to ranked
article ids) and the Bell -> Edinburgh -> Water of Leith articles there. A scripted reply
that cannot be parsed is listed twice: DSPy's ChatAdapter retries once through the
JSONAdapter.
"""

from __future__ import annotations

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from frames_dspy.judge.autorater import Autorater
from frames_dspy.lm.accounting import TOKEN_METER, attached_callbacks
from frames_dspy.lm.errors import LMCallError
from frames_dspy.programs import (
    MORE_CONDITIONS,
    AgentCounts,
    SearchAgent,
    build_program,
    load_program,
    save_program,
)
from frames_dspy.programs.agent import _tidy
from frames_dspy.programs.trajectory import AgentStep, recording_steps
from frames_dspy.results.metrics import NEAR_REPEAT
from frames_dspy.run.runner import run_question
from tests.programs.test_programs import QUESTION, ScriptedRetriever, make_store, user_message

TABLE = {
    "Bell birthplace": ["bell", "phone"],
    "Edinburgh river": ["leith", "edinburgh", "forth"],
    "volcano": ["etna"],
}


def act(tool: str, argument: str = "", thought: str = "next") -> dict:
    return {"thought": thought, "tool": tool, "argument": argument}


ANSWER = {"answer": "Water of Leith"}


@pytest.fixture
def store():
    return make_store()


def agent(store, **settings) -> SearchAgent:
    retriever = ScriptedRetriever(store, TABLE)
    return build_program({"kind": "agent", **settings}, retriever=retriever, context_tokens=600)


def run(program, lm):
    with dspy.context(lm=lm):
        return program(question=QUESTION)


def example() -> dspy.Example:
    return dspy.Example(
        id=3,
        question=QUESTION,
        answer="Water of Leith",
        gold_urls=["Alexander Graham Bell", "Edinburgh", "Water of Leith"],
        reasoning_types=["Multiple constraints"],
    ).with_inputs("question")


def answer_prompt(lm: DummyLM) -> str:
    return next(
        m["messages"][-1]["content"]
        for m in lm.history
        if "[[ ## context ## ]]" in m["messages"][-1]["content"]
    )


# --- the way it should go -----------------------------------------------------------------


def test_search_read_finish_answers_from_what_it_read(store):
    lm = DummyLM(
        [
            act("search", "Bell birthplace"),
            act("read", "Alexander Graham Bell"),
            act("search", "Edinburgh river"),
            act("read", "2"),  # by its number in the latest results: Edinburgh
            act("read", "[1] Water of Leith: The Water of Leith flows…"),  # a results line
            act("finish"),
            ANSWER,
        ]
    )
    program = agent(store)
    pred = run(program, lm)

    assert pred.answer == "Water of Leith" and pred.stop_reason == "finish"
    assert [s.action for s in pred.trajectory] == [
        "search",
        "read",
        "search",
        "read",
        "read",
        "finish",
    ]
    assert all(s.outcome == "ok" for s in pred.trajectory)
    # One round per step: the articles read after it, the search it sent.
    assert pred.context_ids[-1] == ["bell", "edinburgh", "leith"]
    assert pred.context_ids[:2] == [[], ["bell"]]
    assert pred.queries == [["Bell birthplace"], [], ["Edinburgh river"], [], [], []]
    # The answer step is the shared one, over the articles read, packed under the budget.
    assert pred.packing["articles"] == 3 and pred.packing["budget_tokens"] == 600
    context = answer_prompt(lm)
    assert "[1] Alexander Graham Bell" in context and "[3] Water of Leith" in context
    assert "Telephone" not in context  # shown by a search, never read
    # What it saw: the latest results with their openings, an older search by titles only.
    seen = user_message(lm, 5)
    assert "found: Alexander Graham Bell; Telephone" in seen
    assert "[2] Edinburgh: Edinburgh is the capital of Scotland" in seen
    assert "Bell was born in Edinburgh" in seen  # the opening of what it read
    counts = AgentCounts.of(pred.trajectory)
    assert (counts.steps, counts.searches, counts.reads, counts.malformed) == (6, 2, 3, 0)
    assert pred.query_stats == {"generated": 2, "repeated": 0}


def test_every_step_carries_its_metered_tokens(store):
    lm = DummyLM([act("search", "volcano"), act("finish")])
    program = agent(store)
    program.answer_step = False
    with attached_callbacks(lm, TOKEN_METER):
        record = run_question(
            "agent", program, example(), lm=lm, autorater=Autorater(None), store=store
        )
    assert all(step.tokens > 0 for step in record.trajectory)
    # The agent's own meter counts what the runner's meter counts, call for call.
    assert sum(step.tokens for step in record.trajectory) == record.metered_tokens


# --- the paper's loop, and limits ---------------------------------------------------------


def test_a_model_that_repeats_one_search_stops_at_the_step_limit(store):
    lm = DummyLM(
        {"`[[ ## tool ## ]]`": act("search", "Bell birthplace"), "`[[ ## answer ## ]]`": ANSWER}
    )
    pred = run(agent(store, max_steps=6), lm)
    assert pred.stop_reason == "steps" and len(pred.trajectory) == 6
    assert pred.query_stats == {"generated": 6, "repeated": 5}
    searches = [s.argument for s in pred.trajectory]
    assert NEAR_REPEAT.share(searches) == pytest.approx(5 / 6)
    assert pred.answer == "Water of Leith"  # it still answers, from nothing read


def test_reaching_the_article_limit_on_a_read_stops_it_there(store):
    lm = DummyLM(
        [
            act("search", "Edinburgh river"),
            act("read", "Water of Leith"),
            act("read", "Edinburgh"),
            ANSWER,  # no third choice: the limit ended it after the second read
        ]
    )
    pred = run(agent(store, max_articles=2), lm)
    assert pred.stop_reason == "articles"
    assert pred.trajectory[-1].action == "read" and pred.context_ids[-1] == ["leith", "edinburgh"]
    assert pred.packing["articles"] == 2


def test_reaching_the_token_limit_stops_it_after_that_step(store):
    lm = DummyLM([act("search", "volcano"), ANSWER])  # no second choice is asked for
    pred = run(agent(store, max_agent_tokens=1), lm)
    # The first step's call used more than 1 token: the agent answers from what it has.
    assert pred.stop_reason == "tokens" and len(pred.trajectory) == 1
    assert pred.packing is None and pred.answer == "Water of Leith"


def test_search_results_leave_out_what_was_read(store):
    lm = DummyLM(
        [
            act("search", "Edinburgh river"),
            act("read", "Water of Leith"),
            act("search", "Edinburgh river"),
        ]
        + [act("finish"), ANSWER]
    )
    pred = run(agent(store), lm)
    first, _, second, _ = pred.trajectory
    assert first.article_ids == ["leith", "edinburgh", "forth"]
    assert second.article_ids == ["edinburgh", "forth"]
    assert pred.query_stats == {"generated": 2, "repeated": 1}


# --- malformed calls are observations, counted ---------------------------------------------


def test_malformed_calls_are_observed_and_counted_never_a_crash(store):
    unreadable = {"thought": "hmm"}  # no tool, no argument: the adapter cannot parse it
    lm = DummyLM(
        [
            act("lookup", "Bell"),  # a tool that does not exist
            act("search", ""),  # no keywords
            unreadable,
            unreadable,  # ... and the JSONAdapter's retry of it
            act("read", "Alexander Graham Bel"),  # no such title
            act("search", "nothing matches this"),  # an empty search
            act("read", '{"title": "Alexander Graham Bell"}'),  # a JSON object as argument
            act("read", "Alexander Graham Bell"),  # already read
            act("finish"),
            ANSWER,
        ]
    )
    pred = run(agent(store), lm)
    outcomes = [s.outcome for s in pred.trajectory]
    assert outcomes == [
        "unknown_tool", "no_argument", "unreadable", "unknown_title", "no_results", "ok",
        "already_read", "ok",
    ]  # fmt: skip
    counts = AgentCounts.of(pred.trajectory)
    assert (counts.malformed, counts.unknown_titles, counts.empty_searches) == (3, 1, 1)
    assert (counts.rereads, counts.reads, counts.searches) == (1, 1, 1)
    assert pred.stop_reason == "finish" and pred.context_ids[-1] == ["bell"]
    # The model saw what was wrong with each call in its next prompt.
    last = user_message(lm, len(lm.history) - 2)
    assert "error: no such tool; use search, read or finish" in last
    assert "error: search needs keywords" in last
    assert "error: your reply could not be read" in last
    assert "no article is titled 'Alexander Graham Bel'" in last
    assert "no article matches these keywords" in last


def test_a_tool_written_as_a_call_is_understood():
    assert _tidy('search("Bell birthplace")', "") == _tidy("search", "Bell birthplace")
    assert _tidy("Read: Edinburgh", None).tool == "read"
    assert _tidy("Read: Edinburgh", None).argument == "Edinburgh"
    assert _tidy("`finish`", "").tool == "finish"
    assert _tidy("search", '{"query": "Bell  birthplace"}').argument == "Bell birthplace"
    assert _tidy("search", "x" * 1000).argument == "x" * 300
    # An argument that repeats the call, as the steps the model is shown write it.
    assert _tidy("search", "search: Sarah first lady").argument == "Sarah first lady"
    assert _tidy("read", 'Read("Harriet Lane")').argument == "Harriet Lane"
    assert _tidy("read", "Reading Gaol").argument == "Reading Gaol"  # a title, not a call
    assert _tidy("", "").tool == "" and _tidy("finish", "").argument == ""


# --- a failure half-way keeps what it did -------------------------------------------------


class FailsAfter(DummyLM):
    """Replies from a list, then fails as a server that outlived its retries."""

    def __call__(self, *args, **kwargs):
        if self._left == 0:
            raise LMCallError("the server failed (tried 4 times)", attempts=4)
        self._left -= 1
        return super().__call__(*args, **kwargs)


def test_a_question_that_fails_half_way_keeps_its_steps_and_recall(store):
    lm = FailsAfter([act("search", "Bell birthplace"), act("read", "Alexander Graham Bell")])
    lm._left = 2
    record = run_question(
        "agent", agent(store), example(), lm=lm, autorater=Autorater(None), store=store
    )
    assert record.error_kind == "LMCallError" and record.stop_reason == "error"
    assert [s.action for s in record.trajectory] == ["search", "read"]
    assert record.recall == [0.0, pytest.approx(1 / 3)]
    assert record.read_ids == ["bell"] and record.gold_share(record.searched_ids) == 1 / 3


def test_the_recorder_sees_an_agent_that_failed_before_its_first_step(store):
    lm = FailsAfter([])
    lm._left = 0
    with recording_steps() as trace, dspy.context(lm=lm), pytest.raises(LMCallError):
        agent(store)(question=QUESTION)
    assert trace.steps == [] and trace.stop_reason is None


# --- a program kind like the others --------------------------------------------------------


def test_the_agent_is_a_condition_and_a_spec(store):
    spec = MORE_CONDITIONS["agent"].configured(max_steps=4, n_docs=3, rounds=9)
    assert spec.to_dict() == {
        "kind": "agent", "n_docs": 3, "cot": False, "lead_chars": 120, "max_steps": 4,
        "max_articles": 8, "max_agent_tokens": 8000, "read_chars": 600,
    }  # fmt: skip
    assert spec.describe() == "agent s4 a8 t8000 n3"
    program = build_program(spec, retriever=ScriptedRetriever(store, TABLE), context_tokens=500)
    assert isinstance(program, SearchAgent) and program.spec == spec.replace(context_tokens=500)
    with pytest.raises(ValueError, match="needs a retriever"):
        build_program(spec, store=store)
    with pytest.raises(ValueError, match="max_articles=0"):
        SearchAgent(ScriptedRetriever(store, TABLE), max_articles=0, context_tokens=100)


def test_save_load_keeps_the_agents_prompts_and_shape(store, tmp_path):
    program = agent(store, max_steps=3)
    program.choose.signature = program.choose.signature.with_instructions("Tuned choose.")
    path = tmp_path / "program.json"
    save_program(program, str(path))
    loaded, spec, _ = load_program(
        str(path), retriever=ScriptedRetriever(store, TABLE), context_tokens=600
    )
    assert spec == program.spec and loaded.dump_state() == program.dump_state()
    lm = DummyLM([act("finish"), ANSWER])
    assert run(loaded, lm).stop_reason == "finish"
    assert "Tuned choose." in lm.history[0]["messages"][0]["content"]


def test_a_step_outcome_is_one_of_the_known_ones():
    with pytest.raises(ValueError, match="unknown step outcome 'fine'"):
        AgentStep("search", "x", "fine")
