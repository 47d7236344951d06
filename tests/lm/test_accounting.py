"""frames_dspy.lm.accounting: the call budget and the per-question token meter, on DummyLM calls.

Both must count calls DSPy answers from its cache: the conftest points DSPY_CACHEDIR at a
temporary folder, and DummyLM (which normally skips the cache) is told to use it.
"""

from __future__ import annotations

import math
import threading

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from frames_dspy.lm.accounting import (
    CallBudget,
    QuestionMeter,
    TokenMeter,
    attached_callbacks,
    metered,
    own_meter,
)
from frames_dspy.programs import CHARS_PER_TOKEN


def dummy(n: int = 20, *, cache: bool = False) -> DummyLM:
    lm = DummyLM([{"answer": f"answer {i}"} for i in range(n)])
    lm._cache_responses = cache  # DummyLM bypasses DSPy's cache unless told otherwise
    return lm


def ask(lm: DummyLM, question: str) -> str:
    with dspy.context(lm=lm):
        return dspy.Predict("question -> answer")(question=question).answer


def tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def metered_tokens_of(entry: dict) -> tuple[int, int]:
    """What the meter should count for one history entry: the prompt sent, the reply got."""
    prompt = "".join(m["content"] for m in entry["messages"])
    reply = "".join(o if isinstance(o, str) else o["text"] for o in entry["outputs"])
    return tokens(prompt), tokens(reply)


# --- CallBudget -------------------------------------------------------------------------------


def test_the_budget_counts_calls_answered_from_the_cache():
    lm = dummy(1, cache=True)  # one scripted answer: a second real call would run out
    budget = CallBudget(limit=5)
    with attached_callbacks(lm, budget):
        first = ask(lm, "What is the capital of Scotland?")
        second = ask(lm, "What is the capital of Scotland?")
    assert first == second == "answer 0"
    assert budget.calls == 2
    assert budget.remaining == 3 and not budget.exhausted


def test_the_budget_counts_but_never_stops_calls():
    lm = dummy()
    budget = CallBudget(limit=2)
    with attached_callbacks(lm, budget):
        assert (budget.remaining, budget.exhausted) == (2, False)
        ask(lm, "q1")
        assert (budget.remaining, budget.exhausted) == (1, False)
        ask(lm, "q2")
        assert (budget.remaining, budget.exhausted) == (0, True)
        ask(lm, "q3")  # callers check `exhausted` at safe points; the call itself goes ahead
    assert budget.calls == 3 and budget.remaining == 0 and budget.exhausted
    assert len(lm.history) == 3


def test_a_budget_without_a_limit_is_never_exhausted():
    lm = dummy()
    budget = CallBudget()
    with attached_callbacks(lm, budget):
        for i in range(4):
            ask(lm, f"q{i}")
    assert budget.calls == 4
    assert budget.remaining is None and not budget.exhausted


@pytest.mark.parametrize("limit", [0, -5])
def test_a_budget_limit_below_one_is_refused(limit):
    with pytest.raises(ValueError, match=f"max_lm_calls={limit} must be at least 1"):
        CallBudget(limit)


def test_the_budget_counts_every_thread_and_every_lm_it_is_attached_to():
    program, judge = dummy(40), dummy(40)
    budget = CallBudget(limit=100)
    start = threading.Barrier(4)

    def work(t: int) -> None:
        start.wait()
        for i in range(5):
            ask(program if t % 2 else judge, f"thread {t} question {i}")

    with attached_callbacks(program, budget), attached_callbacks(judge, budget):
        workers = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert budget.calls == 20 == len(program.history) + len(judge.history)


# --- TokenMeter -------------------------------------------------------------------------------


def test_the_meter_counts_only_inside_a_question():
    lm = dummy()
    with attached_callbacks(lm, TokenMeter()):
        ask(lm, "before any question")
        with metered() as meter:
            ask(lm, "What is the capital of Scotland?")
            ask(lm, "Which river flows through Edinburgh?")
        ask(lm, "after the question")
    assert meter.calls == 2
    counted = [metered_tokens_of(entry) for entry in lm.history[1:3]]
    assert meter.prompt_tokens == sum(p for p, _ in counted) > 0
    assert meter.completion_tokens == sum(c for _, c in counted) > 0


def test_the_meter_counts_cached_calls_like_any_other():
    lm = dummy(1, cache=True)
    with attached_callbacks(lm, TokenMeter()):
        with metered() as first:
            ask(lm, "What is the capital of Scotland?")
        with metered() as again:
            ask(lm, "What is the capital of Scotland?")  # from the cache: no usage reported
    same = ("calls", "prompt_tokens", "completion_tokens")
    assert [getattr(again, f) for f in same] == [getattr(first, f) for f in same]
    assert first.calls == 1 and first.prompt_tokens > 0


def test_each_thread_meters_its_own_question():
    lm = dummy(40)
    start = threading.Barrier(3)
    meters: dict[str, QuestionMeter] = {}

    def question(name: str, calls: int) -> None:
        start.wait()
        with metered() as meter:
            for i in range(calls):
                ask(lm, f"{name} call {i}")
        meters[name] = meter

    def unmetered() -> None:
        start.wait()
        for i in range(4):
            ask(lm, f"optimizer call {i}")  # e.g. an optimizer's calls: no question is open

    with attached_callbacks(lm, TokenMeter()):
        workers = [
            threading.Thread(target=question, args=("one", 1)),
            threading.Thread(target=question, args=("two", 3)),
            threading.Thread(target=unmetered),
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert len(lm.history) == 8
    assert meters["one"].calls == 1 and meters["two"].calls == 3
    # "two" sent three prompts as long as the one "one" sent, and nothing else.
    assert meters["two"].prompt_tokens == 3 * meters["one"].prompt_tokens > 0


def test_metered_questions_nest_and_restore_the_outer_meter():
    lm = dummy()
    with attached_callbacks(lm, TokenMeter()), metered() as outer:
        ask(lm, "outer 1")
        with metered() as inner:
            ask(lm, "inner")
        ask(lm, "outer 2")
    assert (outer.calls, inner.calls) == (2, 1)


# --- own_meter: a program's own count of its calls --------------------------------------------


def test_own_meter_counts_as_the_question_meter_does_and_hides_nothing_from_it():
    lm = dummy()
    with attached_callbacks(lm, TokenMeter()), metered() as question:
        ask(lm, "before the agent")
        with own_meter() as own:
            ask(lm, "What is the capital of Scotland?")
            ask(lm, "Which river flows through Edinburgh?")
    assert own.calls == 2 and question.calls == 3  # the question still counts every call
    counted = [metered_tokens_of(entry) for entry in lm.history[1:3]]
    assert own.prompt_tokens == sum(p for p, _ in counted) > 0
    assert own.completion_tokens == sum(c for _, c in counted) > 0


def test_own_meter_needs_no_meter_attached_and_sees_only_its_thread():
    lm = dummy(40)  # no TokenMeter on the LM: an optimizer runs programs like this
    start = threading.Barrier(2)
    meters: dict[str, QuestionMeter] = {}

    def program(name: str, calls: int) -> None:
        start.wait()
        with own_meter() as meter:
            for i in range(calls):
                ask(lm, f"{name} call {i}")
        meters[name] = meter

    workers = [threading.Thread(target=program, args=(n, c)) for n, c in (("one", 1), ("two", 3))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert (meters["one"].calls, meters["two"].calls) == (1, 3)
    ask(lm, "after")  # the callback left with the block
    assert meters["two"].calls == 3


# --- attached_callbacks -----------------------------------------------------------------------


def test_callbacks_are_detached_after_the_block_even_on_error():
    lm = dummy()
    budget, meter = CallBudget(), TokenMeter()
    with pytest.raises(RuntimeError, match="boom"), attached_callbacks(lm, budget, meter):
        assert lm.callbacks == [budget, meter]
        ask(lm, "q")
        raise RuntimeError("boom")
    assert lm.callbacks == []
    ask(lm, "after the block")
    assert budget.calls == 1


def test_a_callback_already_attached_stays_attached():
    lm = dummy()
    kept, added = CallBudget(), CallBudget()
    lm.callbacks.append(kept)
    with attached_callbacks(lm, kept, added):
        assert lm.callbacks == [kept, added]  # not attached twice, so not counted twice
        ask(lm, "q")
    assert lm.callbacks == [kept]
    assert (kept.calls, added.calls) == (1, 1)
