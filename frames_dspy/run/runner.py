"""One question loop for every entry point: run, judge, record, in parallel threads.

``python -m frames_dspy.evaluate`` runs conditions over questions with it, and
``python -m optimize.compile`` scores trials and the final program with it, so a question is
run, judged, metered and recorded one way everywhere. What differs between entry points is
passed as hooks: where records go (a run folder), what to show (progress), and when to stop
starting questions (a call or cost budget).

Nothing is hidden. A program that fails is recorded with its error (the question counts as
wrong, and keeps the recall of what it retrieved before failing); a judge call that fails is
recorded as a judge error; every LM call is metered, cached or not, with its retries. Only a
set-up problem that would fail every question raises :class:`RunAborted`. On Ctrl-C the
questions in flight are finished and recorded before :class:`KeyboardInterrupt` goes on.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import dspy
from dspy.utils.usage_tracker import UsageTracker, track_usage

from frames_dspy.judge.autorater import Autorater, Judgement
from frames_dspy.lm import LMSetupError
from frames_dspy.lm.accounting import TOKEN_METER, attached_callbacks, metered
from frames_dspy.programs.modules import recording_rounds
from frames_dspy.programs.sources import lm_queries
from frames_dspy.programs.trajectory import AgentTrace, recording_steps
from frames_dspy.results.answer_in_context import answer_in_context
from frames_dspy.results.metrics import NEAR_REPEAT, gold_recall, query_repetition_rate
from frames_dspy.results.records import QuestionRecord

logger = logging.getLogger(__name__)

__all__ = ["RunAborted", "Runner", "run_question"]


class RunAborted(RuntimeError):
    """A set-up problem (no key, no server, no model) that would fail every question."""


def _judge(autorater: Autorater, example: dspy.Example, answer: str) -> Judgement:
    try:
        return autorater.judge(example.question, example.answer, answer)
    except LMSetupError as err:
        raise RunAborted(f"the judge cannot run: {err}") from err
    except Exception as err:  # a failed judge call is this verdict's error, shown as such
        logger.warning("judging question %s failed: %s", example.id, err)
        return Judgement(None, "judge_error", f"{type(err).__name__}: {err}"[:500])


def _answer_in_context(example: dspy.Example, context: str | None) -> bool | None:
    try:
        return answer_in_context(example.question, example.answer, context)
    except Exception as err:  # a diagnostic must never cost a question its record
        logger.warning("answer-in-context check failed on question %s: %s", example.id, err)
        return None


def _reported_tokens(tracker: UsageTracker) -> tuple[int, int]:
    """Prompt and completion tokens the LMs reported inside a :func:`track_usage` block."""
    prompt = completion = 0
    for usage in tracker.get_total_tokens().values():
        prompt += int(usage.get("prompt_tokens") or 0)
        completion += int(usage.get("completion_tokens") or 0)
    return prompt, completion


def _near_repeat_rate(program: dspy.Module, question: str, pred: dspy.Prediction) -> float | None:
    """The near-repeat share of the queries the program's LM chose (None for a program
    without a spec, or whose LM chose none)."""
    spec = getattr(program, "spec", None)
    if spec is None:
        return None
    chosen = lm_queries(spec, question, pred.get("queries") or [])
    dropped = (pred.get("query_stats") or {}).get("dropped_repeats", 0)
    return NEAR_REPEAT.share(chosen, dropped_repeats=dropped)


def run_question(
    label: str,
    program: dspy.Module,
    example: dspy.Example,
    *,
    lm: dspy.BaseLM,
    autorater: Autorater,
    store,
) -> QuestionRecord:
    """Run one question through a program, judge the answer, and return its record.

    LM use is metered for the LMs that carry :data:`~frames_dspy.lm.accounting.TOKEN_METER`
    (a :class:`Runner` attaches it); otherwise the metered fields stay 0.

    Raises:
        RunAborted: an LM cannot run at all (the message says why).
    """
    started = time.perf_counter()
    pred, error, error_kind, meter, rounds, usage = _run_program(label, program, example, lm)
    trajectory = pred.get("trajectory")
    prompt_tokens, completion_tokens = _reported_tokens(usage)
    with metered() as judge_meter:
        verdict = _judge(autorater, example, pred.answer)
    gold = store.resolve_many(example.gold_urls) if store else []
    gold_ids = [a.id for a in gold]
    context_ids = pred.get("context_ids") or []
    return QuestionRecord(
        condition=label,
        id=example.id,
        question=example.question,
        gold_answer=example.answer,
        answer=pred.answer,
        correct=verdict.correct,
        judge_method=verdict.method,
        judge_p_true=verdict.p_true,
        judge_explanation=verdict.explanation,
        error=error,
        error_kind=error_kind,
        reasoning_types=list(example.reasoning_types),
        n_gold=len(example.gold_urls),
        gold_ids=gold_ids,
        gold_titles=[a.title for a in gold],
        context_ids=context_ids,
        recall=gold_recall(gold_ids, context_ids) if context_ids else ([] if gold_ids else None),
        queries=pred.get("queries") or [],
        query_stats=pred.get("query_stats"),
        query_repetition_rate=query_repetition_rate(pred.get("query_stats")),
        near_repeat_rate=_near_repeat_rate(program, example.question, pred),
        trajectory=list(trajectory) if trajectory is not None else None,
        stop_reason=pred.get("stop_reason"),
        packing=pred.get("packing"),
        # Was the gold answer in the text the answer step saw? (None: no context, or a gold
        # that cannot be looked for literally.) The text itself is not kept.
        answer_in_context=_answer_in_context(example, rounds["answer_context"]),
        # What the LM reported (a call answered from the cache reports nothing) ...
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        # ... and what was metered: every try of every call, cached or not.
        lm_calls=meter.calls,
        cached_calls=meter.cache_hits,
        failed_calls=meter.failed_calls,
        retries=meter.retries + judge_meter.retries,
        metered_tokens=meter.tokens,
        judge_calls=judge_meter.calls,
        judge_cached_calls=judge_meter.cache_hits,
        judge_prompt_tokens=judge_meter.prompt_tokens,
        judge_completion_tokens=judge_meter.completion_tokens,
        seconds=round(time.perf_counter() - started, 3),
    )


def _run_program(label: str, program: dspy.Module, example: dspy.Example, lm: dspy.BaseLM):
    """The program on one question: its prediction (empty if it failed), the error, and
    what it used: the meter, the rounds it recorded and the usage the LM reported.

    The program LM's use is counted here once: metered (every call, cached or not) and as
    the LM reported it (DSPy's usage tracker; a cached call reports nothing), whether the
    program finished or failed half-way. So are the rounds and, for an agent, the steps it
    took before failing.
    """
    inputs = {name: example[name] for name in program.input_fields}
    error = error_kind = None
    with (
        metered() as meter,
        recording_rounds() as rounds,
        recording_steps() as steps,
        track_usage() as usage,
    ):
        try:
            with dspy.context(lm=lm):
                pred = program(**inputs)
        except LMSetupError as err:
            raise RunAborted(str(err)) from err
        except Exception as err:  # one bad question must not end a long run; it is recorded
            logger.warning("question %s failed under %s: %s", example.id, label, err)
            error, error_kind = repr(err), type(err).__name__
            # What it retrieved before failing still counts towards recall.
            pred = dspy.Prediction(
                answer="",
                context_ids=rounds["context_ids"],
                queries=rounds["queries"],
                **_failed_agent(steps),
            )
    return pred, error, error_kind, meter, rounds, usage


def _failed_agent(steps: AgentTrace) -> dict[str, Any]:
    """What an agent that failed half-way did (nothing for other programs)."""
    if steps.steps is None:
        return {}
    return {"trajectory": list(steps.steps), "stop_reason": "error"}


@dataclass
class Runner:
    """Runs programs over questions with the hooks of one entry point.

    Attributes:
        lm, autorater, store: The program LM, the metric, the article store (for recall).
        threads: Questions run at once.
        on_record: Called in the calling thread with each finished record, in the order the
            questions finish, those that finish together in question order (append to a run
            folder, advance a progress bar, add up costs).
        stop: Asked before each question starts; a reason (text) means no more questions
            start (a call or cost budget), and the run keeps what finished.

    After :meth:`run`, ``stopped`` holds the reason the run stopped early, if it did.
    """

    lm: dspy.BaseLM
    autorater: Autorater
    store: Any = None
    threads: int = 1
    on_record: Sequence[Callable[[QuestionRecord], None]] = field(default_factory=list)
    stop: Callable[[], str | None] | None = None
    stopped: str | None = field(default=None, init=False)

    def _one(
        self, label: str, program: dspy.Module, example: dspy.Example
    ) -> QuestionRecord | None:
        if self.stop is not None and (reason := self.stop()):
            self.stopped = self.stopped or reason
            return None
        return run_question(
            label, program, example, lm=self.lm, autorater=self.autorater, store=self.store
        )

    def _lms(self) -> list[dspy.BaseLM]:
        judge = self.autorater.judge_lm
        return [self.lm] + ([judge] if judge is not None and judge is not self.lm else [])

    def run(
        self, label: str, program: dspy.Module, examples: Sequence[dspy.Example]
    ) -> list[QuestionRecord]:
        """Run ``program`` on ``examples``; records in the examples' order (skipped left out).

        Raises:
            RunAborted: a set-up problem; questions not yet started are cancelled, and the
                records already handed to ``on_record`` stay.
            KeyboardInterrupt: after the questions in flight were finished and handed to
                ``on_record`` (a second Ctrl-C stops waiting for them).
        """
        results: dict[int, QuestionRecord] = {}
        pool = ThreadPoolExecutor(max_workers=max(1, self.threads))
        with contextlib.ExitStack() as attached:
            for lm in self._lms():
                attached.enter_context(attached_callbacks(lm, TOKEN_METER))
            # Not `with pool`: its exit would wait for every question in flight, even
            # after a second Ctrl-C.
            attached.callback(pool.shutdown, wait=False, cancel_futures=True)
            futures = {
                pool.submit(self._one, label, program, example): i
                for i, example in enumerate(examples)
            }
            try:
                self._collect(futures, results, set(futures))
            except KeyboardInterrupt:
                self._finish_in_flight(futures, results)
                raise
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        return [results[i] for i in sorted(results)]

    def _collect(
        self, futures: dict[Future, int], results: dict[int, QuestionRecord], pending: set[Future]
    ) -> None:
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            # Questions that finished together are saved in question order, not the set's.
            for future in sorted(done, key=futures.__getitem__):
                pending.discard(future)
                record = future.result()
                if record is None:
                    continue
                results[futures[future]] = record
                for hook in self.on_record:
                    hook(record)

    def _finish_in_flight(
        self, futures: dict[Future, int], results: dict[int, QuestionRecord]
    ) -> None:
        for future in futures:
            future.cancel()
        running = {f for f in futures if not f.cancelled() and not f.done()}
        finished = {f for f in futures if f.done() and not f.cancelled()}
        finished -= {f for f in finished if futures[f] in results}
        self.stopped = "interrupted"
        if running:
            logger.warning(
                "stopping: finishing the %d question(s) in flight so they are saved "
                "(Ctrl-C again to abandon them)",
                len(running),
            )
        try:
            self._collect(futures, results, running | finished)
        except KeyboardInterrupt:
            logger.warning("abandoned the questions in flight; every finished one is saved")
