"""One question loop for every entry point: run, judge, record, in parallel threads.

``python -m frames_dspy.evaluate`` runs conditions over questions with it, and
``python -m optimize.compile`` scores trials and the final program with it, so a question is
run, judged and recorded one way everywhere. What differs between them is passed as hooks:
where records go (a run folder), what to show (progress), when to stop starting questions (a
call budget), and whether to meter tokens per question.

A failure inside a program is recorded in that question's ``error`` (the question counts as
wrong); a set-up problem that would fail every question raises :class:`RunAborted`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import dspy

from frames_dspy.accounting import CallBudget, TokenMeter, attached_callbacks, metered_question
from frames_dspy.lm import LMSetupError
from frames_dspy.metrics import Autorater, gold_recall, query_repetition_rate

logger = logging.getLogger(__name__)

__all__ = ["RunAborted", "Runner", "run_question"]

Record = dict[str, Any]


class RunAborted(RuntimeError):
    """A set-up problem (no key, no server, no model) that would fail every question."""


def _is_setup_error(err: Exception) -> bool:
    return isinstance(err, LMSetupError) and not getattr(err, "per_call", False)


def run_question(
    label: str,
    program: dspy.Module,
    example: dspy.Example,
    *,
    lm: dspy.BaseLM,
    autorater: Autorater,
    store,
) -> Record:
    """Run one question through a program, judge the answer, and return its record.

    Raises:
        RunAborted: the LM cannot run at all (the message says why).
    """
    started = time.perf_counter()
    inputs = {name: example[name] for name in program.input_fields}
    error = None
    try:
        with dspy.context(lm=lm):
            pred = program(**inputs)
    except Exception as err:  # one bad question must not end a long run; it is recorded
        if _is_setup_error(err):
            raise RunAborted(str(err)) from err
        logger.warning("question %s failed under %s: %s", example.id, label, err)
        pred, error = (
            dspy.Prediction(
                answer="",
                context_ids=[],
                queries=[],
                lm_calls=0,
                prompt_tokens=0,
                completion_tokens=0,
            ),
            repr(err),
        )
    verdict = autorater.judge(example.question, example.answer, pred.answer)
    gold_ids = [a.id for a in store.resolve_many(example.gold_urls)] if store else []
    context_ids = pred.get("context_ids") or []
    return {
        "condition": label,
        "id": example.id,
        "question": example.question,
        "gold_answer": example.answer,
        "answer": pred.answer,
        "correct": verdict.correct,
        "judge_method": verdict.method,
        "judge_explanation": verdict.explanation,
        "error": error,
        "reasoning_types": list(example.reasoning_types),
        "n_gold": len(example.gold_urls),
        "gold_ids": gold_ids,
        "context_ids": context_ids,
        "recall": gold_recall(gold_ids, context_ids) if context_ids else ([] if gold_ids else None),
        "queries": pred.get("queries") or [],
        "query_stats": pred.get("query_stats"),
        "query_repetition_rate": query_repetition_rate(pred.get("query_stats")),
        "packing": pred.get("packing"),
        "lm_calls": pred.get("lm_calls", 0),
        "prompt_tokens": pred.get("prompt_tokens", 0),
        "completion_tokens": pred.get("completion_tokens", 0),
        "seconds": round(time.perf_counter() - started, 3),
    }


@dataclass
class Runner:
    """Runs programs over questions with the hooks of one entry point.

    Attributes:
        lm, autorater, store: The program LM, the metric, the article store (for recall).
        threads: Questions run at once.
        on_record: Called in the calling thread with each finished record, in the order the
            questions finish (append to a run folder, advance a progress bar).
        budget: Questions not yet started when it is exhausted are skipped.
        meter: Add ``metered_tokens`` (every program LM call, cached or not, at 4 characters
            per token) to each record.
    """

    lm: dspy.BaseLM
    autorater: Autorater
    store: Any = None
    threads: int = 1
    on_record: Sequence[Callable[[Record], None]] = field(default_factory=list)
    budget: CallBudget | None = None
    meter: bool = False

    def _one(self, label: str, program: dspy.Module, example: dspy.Example) -> Record | None:
        if self.budget is not None and self.budget.exhausted:
            return None
        if not self.meter:
            return run_question(
                label, program, example, lm=self.lm, autorater=self.autorater, store=self.store
            )
        with metered_question() as meter:
            record = run_question(
                label, program, example, lm=self.lm, autorater=self.autorater, store=self.store
            )
        record["metered_tokens"] = meter[0] + meter[1]
        return record

    def run(
        self, label: str, program: dspy.Module, examples: Sequence[dspy.Example]
    ) -> list[Record]:
        """Run ``program`` on ``examples``; records in the examples' order (skipped left out).

        Raises:
            RunAborted: a set-up problem; questions not yet started are cancelled, and the
                records already handed to ``on_record`` stay.
        """
        callbacks = [TokenMeter()] if self.meter else []
        results: dict[int, Record] = {}
        with (
            attached_callbacks(self.lm, *callbacks),
            ThreadPoolExecutor(max_workers=max(1, self.threads)) as pool,
        ):
            futures = {
                pool.submit(self._one, label, program, example): i
                for i, example in enumerate(examples)
            }
            try:
                for future in as_completed(futures):
                    record = future.result()
                    if record is None:
                        continue
                    results[futures[future]] = record
                    for hook in self.on_record:
                        hook(record)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        return [results[i] for i in sorted(results)]
