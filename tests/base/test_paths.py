"""frames_dspy.base.paths: FRAMES_DATA_DIR names the local data, FRAMES_DSPY_CACHE the cache,
FRAMES_JUDGE_LABELS a labelled judge file."""

from __future__ import annotations

from pathlib import Path

import pytest

from frames_dspy.base import paths
from frames_dspy.base.paths import HUB_DATASET, cache_dir, data_dir, data_file, default_dataset

LAYOUT = {
    "dataset": "frames/frames_test_set.csv",
    "corpus": "frames_wiki/pages.jsonl.gz",
    "aliases": "frames_wiki/frames_link_to_page.tsv",
    "distractors": "distractor_wiki_summaries/summaries_en-us.json",
}


@pytest.fixture
def no_data_dir(monkeypatch):
    monkeypatch.delenv("FRAMES_DATA_DIR", raising=False)


@pytest.fixture
def data_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "raw"
    root.mkdir()
    monkeypatch.setenv("FRAMES_DATA_DIR", str(root))
    return root


def test_without_frames_data_dir_there_is_no_local_data(no_data_dir):
    assert data_dir() is None
    assert all(data_file(kind) is None for kind in LAYOUT)
    assert default_dataset() == HUB_DATASET == "google/frames-benchmark"


def test_frames_data_dir_may_start_with_a_tilde(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("FRAMES_DATA_DIR", "~/frames-data")
    assert data_dir() == tmp_path / "frames-data"


def test_data_files_are_found_only_where_they_exist(data_root):
    assert all(data_file(kind) is None for kind in LAYOUT)  # an empty folder holds nothing
    for kind, relative in LAYOUT.items():
        path = data_root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
        assert data_file(kind) == path
    assert default_dataset() == str(data_root / LAYOUT["dataset"])


def test_without_the_local_csv_the_dataset_comes_from_the_hub(data_root):
    (data_root / "frames_wiki").mkdir()
    (data_root / LAYOUT["corpus"]).write_text("x")
    assert data_file("corpus") is not None
    assert default_dataset() == HUB_DATASET


def test_an_unknown_data_kind_names_the_known_ones(data_root):
    with pytest.raises(ValueError, match="unknown data kind 'index'") as info:
        data_file("index")
    assert str(sorted(LAYOUT)) in str(info.value)


def test_cache_dir_is_created_under_frames_dspy_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAMES_DSPY_CACHE", str(tmp_path / "cache"))
    path = cache_dir("bm25", "abc123")
    assert path == tmp_path / "cache" / "bm25" / "abc123"
    assert path.is_dir()
    assert cache_dir("bm25", "abc123") == path  # an existing folder is fine
    assert cache_dir() == tmp_path / "cache"


def test_cache_dir_defaults_to_the_users_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("FRAMES_DSPY_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir("bm25") == tmp_path / ".cache" / "frames-dspy" / "bm25"
    monkeypatch.setenv("FRAMES_DSPY_CACHE", "~/elsewhere")
    assert cache_dir().resolve() == (tmp_path / "elsewhere").resolve()


def test_judge_labels_file_is_none_when_unset(monkeypatch):
    monkeypatch.delenv(paths.JUDGE_LABELS_ENV, raising=False)
    assert paths.judge_labels_file() is None


def test_judge_labels_file_names_a_missing_file_so_the_command_can_say_so(monkeypatch, tmp_path):
    monkeypatch.setenv(paths.JUDGE_LABELS_ENV, str(tmp_path / "absent.jsonl"))
    assert paths.judge_labels_file() == tmp_path / "absent.jsonl"


def test_judge_labels_file_names_an_existing_file(monkeypatch, tmp_path):
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"question": "q", "gold": "g", "response": "g", "label": true}\n')
    monkeypatch.setenv(paths.JUDGE_LABELS_ENV, str(labels))
    assert paths.judge_labels_file() == labels
