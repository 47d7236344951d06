"""optimize.optimizers: settings, short demos, and GEPA's feedback metric."""

from __future__ import annotations

import dspy
from opt_fake import FakeLM

from frames_dspy.metrics import Autorater
from optimize.optimizers import FeedbackMetric


def test_gepa_feedback_metric_has_gepas_signature(tiny):
    examples, store, knowledge, _ = tiny
    metric = FeedbackMetric(Autorater(FakeLM(knowledge)), store)
    pred = dspy.Prediction(answer="1843", context_ids=[[]])
    out = metric(examples[0], pred, None, "generate.predict", None)
    assert out.score == 1.0 and "Correct" in out.feedback and "gold titles" in out.feedback
    wrong = metric(examples[0], dspy.Prediction(answer="no idea"), None, None, None)
    assert wrong.score == 0.0 and "1843" in wrong.feedback
