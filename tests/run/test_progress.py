"""The run's progress line: what it shows for a run that answers and for a retrieval-only one."""

from __future__ import annotations

from frames_dspy.results.records import QuestionRecord
from frames_dspy.run.progress import RunProgress


def record(qid, correct, recall):
    return QuestionRecord(condition="bm25-4", id=qid, correct=correct, recall=recall)


def shown(progress: RunProgress) -> str:
    return str(progress._bar.postfix)


def test_a_run_that_answers_shows_accuracy_and_final_recall():
    progress = RunProgress({"bm25-4": 3}, {"bm25-4": 100.0})
    progress.start("bm25-4")
    for qid, correct, recall in ((1, True, [0.5, 1.0]), (2, False, [0.0]), (3, False, None)):
        progress(record(qid, correct, recall))
    progress.close()
    # Recall over the two questions with a gold article; accuracy over all three.
    assert "3/3 q" in shown(progress) and "acc 0.33" in shown(progress)
    assert "recall 0.50" in shown(progress)


def test_a_retrieval_only_run_shows_recall_and_no_accuracy():
    progress = RunProgress({"bm25-4": 2}, {"bm25-4": 100.0}, accuracy=False)
    progress.start("bm25-4")
    progress(record(1, False, [1.0]))
    progress(record(2, False, []))
    progress.close()
    assert "acc" not in shown(progress) and "recall 0.50" in shown(progress)
