"""Where data lives: the environment variables in ``frames_dspy.paths``."""

from __future__ import annotations

from frames_dspy import paths


def test_judge_labels_file_is_none_when_unset(monkeypatch):
    monkeypatch.delenv(paths.JUDGE_LABELS_ENV, raising=False)
    assert paths.judge_labels_file() is None


def test_judge_labels_file_is_none_when_missing(monkeypatch, tmp_path):
    monkeypatch.setenv(paths.JUDGE_LABELS_ENV, str(tmp_path / "absent.jsonl"))
    assert paths.judge_labels_file() is None


def test_judge_labels_file_names_an_existing_file(monkeypatch, tmp_path):
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"question": "q", "gold": "g", "response": "g", "label": true}\n')
    monkeypatch.setenv(paths.JUDGE_LABELS_ENV, str(labels))
    assert paths.judge_labels_file() == labels
