"""frames_dspy.run.runner: one question loop for every entry point, on threads.

Programs here are small fakes (their ``forward`` is scripted per question) or ``Naive`` on a
DummyLM; the judge is a DummyLM that says FALSE. Finish order is forced with events, not
sleeps, so the ordering checks do not depend on timing.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from types import SimpleNamespace

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from frames_dspy.data.corpus import Article, ArticleStore
from frames_dspy.judge import Autorater
from frames_dspy.lm import LMSetupError
from frames_dspy.lm.accounting import CallBudget, attached_callbacks
from frames_dspy.programs import CHARS_PER_TOKEN, Naive
from frames_dspy.run.runner import RunAborted, Runner, run_question

WAIT = 10  # seconds; only a safety net so a broken runner fails instead of hanging
# The program LM of the scripted programs, which never call it (it has no answer to give).
UNUSED = DummyLM([])


def examples(n: int) -> list[dspy.Example]:
    return [
        dspy.Example(
            id=i,
            question=f"Question number {i}?",
            answer=f"gold {i}",
            gold_urls=[],
            reasoning_types=["Numerical reasoning"],
        ).with_inputs("question")
        for i in range(n)
    ]


def judge() -> Autorater:
    return Autorater(
        DummyLM({"`[[ ## decision ## ]]`": {"explanation": "no", "decision": "FALSE"}})
    )


def report_usage(**usage: int) -> None:
    """Report token usage the way a dspy LM does after a call (to DSPy's usage tracker)."""
    if dspy.settings.usage_tracker is not None:
        dspy.settings.usage_tracker.add_usage("scripted", usage)


class Scripted(dspy.Module):
    """A program whose answer for each question comes from ``script(question_number)``."""

    input_fields = ("question",)

    def __init__(self, script: Callable[[int], str]):
        super().__init__()
        self.script = script
        self.started: list[int] = []
        self._lock = threading.Lock()

    def forward(self, question: str) -> dspy.Prediction:
        number = int(question.split()[-1].rstrip("?"))
        with self._lock:
            self.started.append(number)
        report_usage(prompt_tokens=10, completion_tokens=2)
        return dspy.Prediction(answer=self.script(number), context_ids=[], queries=[])


def test_records_come_back_in_input_order_whatever_the_finish_order():
    n = 4
    delivered = {i: threading.Event() for i in range(n)}
    hooked: list[tuple[int, int]] = []

    def script(i: int) -> str:
        # Question i finishes only after question i+1's record was handed out: the reverse
        # of the input order, with all questions running at once.
        if i + 1 < n:
            assert delivered[i + 1].wait(WAIT), f"question {i + 1} never finished"
        return f"gold {i}"

    def hook(record):
        hooked.append((record.id, threading.get_ident()))
        delivered[record.id].set()

    runner = Runner(UNUSED, judge(), threads=n, on_record=[hook])
    records = runner.run("scripted", Scripted(script), examples(n))

    assert [r.id for r in records] == [0, 1, 2, 3]
    assert [i for i, _ in hooked] == [3, 2, 1, 0]  # once each, as they finished
    assert {thread for _, thread in hooked} == {threading.get_ident()}  # in the caller's thread
    assert all(r.condition == "scripted" and r.correct for r in records)
    assert [r.judge_method for r in records] == ["exact"] * n


def test_every_hook_sees_every_record_once():
    seen_a, seen_b = [], []
    runner = Runner(
        UNUSED,
        judge(),
        threads=3,
        on_record=[lambda r: seen_a.append(r.id), lambda r: seen_b.append(r.id)],
    )
    records = runner.run("scripted", Scripted(lambda i: f"gold {i}"), examples(7))
    assert sorted(seen_a) == sorted(seen_b) == list(range(7))
    assert seen_a == seen_b  # both hooks in turn, record by record
    assert len(records) == 7


def test_an_exhausted_budget_skips_the_questions_not_yet_started():
    lm = DummyLM([{"answer": f"answer {i}"} for i in range(10)])
    budget = CallBudget(limit=2)
    hooked = []
    runner = Runner(
        lm,
        judge(),
        threads=1,
        on_record=[hooked.append],
        stop=lambda: "the budget ran out" if budget.exhausted else None,
    )
    with attached_callbacks(lm, budget):
        records = runner.run("naive", Naive(), examples(5))
    assert [r.id for r in records] == [0, 1]  # skipped questions leave no record
    assert runner.stopped == "the budget ran out"
    assert len(hooked) == 2
    assert len(lm.history) == 2 == budget.calls


def test_a_failing_program_is_recorded_as_an_empty_wrong_answer():
    def script(i: int) -> str:
        if i == 1:
            raise RuntimeError("index broken")
        return f"gold {i}"

    records = Runner(UNUSED, judge(), threads=2).run("scripted", Scripted(script), examples(3))
    failed = records[1]
    assert failed.error == "RuntimeError('index broken')"
    assert failed.error_kind == "RuntimeError"
    assert failed.answer == ""
    assert (failed.correct, failed.judge_method) == (False, "empty")
    # What was reported before the failure stays in the record.
    assert (failed.lm_calls, failed.prompt_tokens, failed.context_ids) == (0, 10, [])
    assert [r.error for r in (records[0], records[2])] == [None, None]
    assert records[0].correct and records[2].correct


def test_an_lm_setup_error_aborts_the_run_and_cancels_the_rest():
    def script(i: int) -> str:
        if i == 1:
            raise LMSetupError("no API key for openai/x; set OPENAI_API_KEY")
        if i > 1:
            time.sleep(0.2)  # the abort cancels the queued questions meanwhile
        return f"gold {i}"

    program = Scripted(script)
    hooked = []
    runner = Runner(UNUSED, judge(), threads=1, on_record=[hooked.append])
    with pytest.raises(RunAborted, match="set OPENAI_API_KEY") as info:
        runner.run("scripted", program, examples(20))
    assert isinstance(info.value.__cause__, LMSetupError)
    assert [r.id for r in hooked] == [0]  # records handed out before the abort stay
    # The question running when the error came may finish; the queued ones never start.
    assert len(program.started) <= 3


def test_run_question_raises_run_aborted_on_a_setup_error():
    def script(i: int) -> str:
        raise LMSetupError("the model file is missing")

    with pytest.raises(RunAborted, match="the model file is missing"):
        run_question(
            "scripted",
            Scripted(script),
            examples(1)[0],
            lm=UNUSED,
            autorater=judge(),
            store=None,
        )


def test_metering_adds_the_tokens_of_every_program_call():
    lm = DummyLM([{"answer": f"answer {i}"} for i in range(3)])
    records = Runner(lm, judge()).run("naive", Naive(), examples(3))
    for record, entry in zip(records, lm.history, strict=True):
        prompt = "".join(m["content"] for m in entry["messages"])
        reply = "".join(o if isinstance(o, str) else o["text"] for o in entry["outputs"])
        expected = math.ceil(len(prompt) / CHARS_PER_TOKEN) + math.ceil(
            len(reply) / CHARS_PER_TOKEN
        )
        assert record.metered_tokens == expected
        assert (record.lm_calls, record.cached_calls, record.retries) == (1, 0, 0)
    assert lm.callbacks == []  # the meter is attached for the run only


def test_a_record_holds_the_gold_articles_and_their_recall():
    store = ArticleStore(
        [
            Article("bell", "Alexander Graham Bell", "Bell was born in Edinburgh."),
            Article("leith", "Water of Leith", "The Water of Leith flows through Edinburgh."),
            Article("moon", "Moon", "The Moon orbits Earth."),
        ]
    )

    class TwoRounds(Scripted):
        def forward(self, question):
            pred = super().forward(question)
            pred.context_ids = [["moon"], ["moon", "bell"]]
            pred.queries = [[question], ["Bell birthplace"]]
            return pred

    example = dspy.Example(
        id=7,
        question="Question number 7?",
        answer="Water of Leith",
        gold_urls=[
            "https://en.wikipedia.org/wiki/Alexander_Graham_Bell",
            "https://en.wikipedia.org/wiki/Water_of_Leith",
        ],
        reasoning_types=["Multiple constraints"],
    )
    record = run_question(
        "two-rounds",
        TwoRounds(lambda i: "Water of Leith"),
        example,
        lm=UNUSED,
        autorater=judge(),
        store=store,
    )
    assert record.gold_ids == ["bell", "leith"] and record.n_gold == 2
    assert record.recall == [0.0, 0.5]
    assert record.queries == [["Question number 7?"], ["Bell birthplace"]]
    assert (record.correct, record.judge_method) == (True, "exact")
    assert record.reasoning_types == ["Multiple constraints"]
    # The scripted program reports tokens as an LM would but makes no call: the meter says so.
    assert (record.lm_calls, record.prompt_tokens, record.completion_tokens) == (0, 10, 2)


def test_tokens_reported_before_a_failure_are_kept_in_its_record():
    class FailsAfterACall(dspy.Module):
        input_fields = ("question",)

        def forward(self, question):
            report_usage(prompt_tokens=300, completion_tokens=20)
            raise RuntimeError("the second call failed")

    example = dspy.Example(id=1, question="Q?", answer="A", gold_urls=[], reasoning_types=[])
    record = run_question(
        "fails", FailsAfterACall(), example, lm=UNUSED, autorater=judge(), store=None
    )
    assert record.error_kind == "RuntimeError"
    assert (record.prompt_tokens, record.completion_tokens) == (300, 20)


def test_questions_that_finish_together_are_handed_out_in_question_order():
    # Five questions already finished when the runner looks: one wait returns them all, and
    # they are saved in question order, so two runs write their files alike.
    futures: dict[Future, int] = {}
    for i in (4, 0, 3, 1, 2):
        future: Future = Future()
        future.set_result(SimpleNamespace(id=i))
        futures[future] = i
    hooked: list[int] = []
    runner = Runner(UNUSED, judge(), on_record=[lambda record: hooked.append(record.id)])
    results: dict = {}
    runner._collect(futures, results, set(futures))
    assert hooked == [0, 1, 2, 3, 4] and sorted(results) == [0, 1, 2, 3, 4]
