"""One progress bar over a whole run, with an ETA that knows multi-step questions are slow.

A naive question takes a few seconds and a multi-step one minutes, so a bar that counts
questions would promise an early finish during the naive condition. The bar counts estimated
tokens instead (the cost model of :mod:`frames_dspy.run.cost`): each finished question advances it
by its condition's per-question estimate, and tqdm's rate and ETA follow. The text beside it
shows questions done, the condition running, its accuracy (not in a retrieval-only run, which
measures none), final recall and failures so far, and the tokens (and dollars, when the price
is known) spent.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping

from frames_dspy.results.records import QuestionRecord
from frames_dspy.run.cost import SpendMeter

__all__ = ["RunProgress"]


class RunProgress:
    """Progress over every (condition, question) a run has left.

    Args:
        todo: Questions left per condition, in run order.
        weights: Estimated tokens of one question per condition (its share of the work).
        spend: The run's spend meter (tokens and dollars so far), shown beside the bar.
        enabled: False shows nothing (``--quiet``, tests).
        accuracy: False for a retrieval-only run: no accuracy is shown, as none is measured.
    """

    def __init__(
        self,
        todo: Mapping[str, int],
        weights: Mapping[str, float],
        *,
        spend: SpendMeter | None = None,
        enabled: bool = True,
        accuracy: bool = True,
    ):
        from tqdm.auto import tqdm

        self.todo = dict(todo)
        self.weights = {label: max(1.0, float(weights.get(label, 1.0))) for label in todo}
        self.spend = spend
        self.questions = sum(self.todo.values())
        self.finished = 0
        self.label = ""
        self.accuracy = accuracy
        # Per condition: questions done, correct, failed, questions with a recall, recall sum.
        self._counts: dict[str, list[float]] = {label: [0, 0, 0, 0, 0.0] for label in todo}
        self._lock = threading.Lock()
        total = sum(self.todo[label] * self.weights[label] for label in todo)
        self._bar = tqdm(
            total=round(total),
            disable=not enabled or self.questions == 0,
            unit="tok",
            unit_scale=True,
            dynamic_ncols=True,
            file=sys.stderr,
            bar_format="{l_bar}{bar}| {percentage:3.0f}% [{elapsed}<{remaining}] {postfix}",
        )

    def start(self, label: str) -> None:
        """The run moves on to ``label``."""
        self.label = label
        self._show()

    def __call__(self, record: QuestionRecord) -> None:
        """A runner hook: one question finished."""
        label = record.condition
        with self._lock:
            self.finished += 1
            counts = self._counts.setdefault(label, [0, 0, 0, 0, 0.0])
            counts[0] += 1
            counts[1] += record.is_correct
            counts[2] += record.failed
            final = record.final_recall
            if final is not None:
                counts[3] += 1
                counts[4] += final
            self._bar.update(round(self.weights.get(label, 1.0)))
            self._show()

    def _show(self) -> None:
        done, correct, failed, with_recall, recall = self._counts.get(self.label, [0, 0, 0, 0, 0])
        parts = [f"{self.finished}/{self.questions} q", self.label]
        if done and self.accuracy:
            parts.append(f"acc {correct / done:.2f}")
        if with_recall:
            parts.append(f"recall {recall / with_recall:.2f}")
        if failed:
            parts.append(f"FAILED {failed}")
        if self.spend is not None:
            parts.append(f"{self.spend.tokens:,} tok")
            if self.spend.dollars is not None:
                parts.append(f"${self.spend.dollars:,.2f}")
        self._bar.set_postfix_str("  ".join(p for p in parts if p), refresh=True)

    def close(self) -> None:
        self._bar.close()
