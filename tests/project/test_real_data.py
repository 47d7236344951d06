"""Where the real-data tests find their data (tests/real_data.py), and what a test does when a
part is missing (tests/needs.py): checked offline, on the tiny fixtures.

The order is a user's run's: FRAMES_DATA_DIR, else the user's caches, else a fetch, else one
line saying why not. The hub and Wikipedia are stood in for: the hub client is pointed at a
dead local port with a cache of its own (a "reachable hub" is a stand-in that fills that cache
as ``hf_hub_download`` does), Wikipedia is the local MediaWiki API of tests/mediawiki_server.py.
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import pytest
from huggingface_hub import constants

from frames_dspy.base.paths import CACHE_DIR_ENV, DATA_DIR_ENV, HUB_DATASET
from frames_dspy.data import questions
from frames_dspy.data.questions import load_frames
from tests import real_data
from tests.mediawiki_server import serve_corpus
from tests.needs import CI_ENV, missing, under_ci
from tests.ports import dead_url
from tests.real_data import DataUnavailable, find_real_data

TINY = Path(__file__).parents[1] / "fixtures" / "tiny"
REVISION = "f" * 40  # the hub commit the stand-in "downloads"


@pytest.fixture
def fresh(monkeypatch, tmp_path) -> Path:
    """No data folder, no proxy, the hub client offline with an empty cache of its own."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", dead_url())
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    return tmp_path


def _hub_puts_questions_in_its_cache(calls: list[str]):
    """A reachable hub: the questions land in the hub client's cache, laid out as it does."""

    def download(repo: str, revision: str | None) -> Path:
        calls.append(repo)
        folder = Path(constants.HF_HUB_CACHE) / f"datasets--{repo.replace('/', '--')}"
        (folder / "refs").mkdir(parents=True, exist_ok=True)
        (folder / "refs" / "main").write_text(REVISION)
        path = folder / "snapshots" / REVISION / "test.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(TINY / "frames.tsv", path)
        return path

    return download


def _local_copy(root: Path) -> Path:
    """A FRAMES_DATA_DIR of the tiny fixtures, in the layout of a local copy."""
    (root / "frames").mkdir(parents=True)
    (root / "frames_wiki").mkdir()
    (root / "distractor_wiki_summaries").mkdir()
    shutil.copy(TINY / "frames.csv", root / "frames" / "frames_test_set.csv")
    with gzip.open(root / "frames_wiki" / "pages.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write((TINY / "pages.jsonl").read_text(encoding="utf-8"))
    shutil.copy(TINY / "frames_link_to_page.tsv", root / "frames_wiki")
    shutil.copy(TINY / "distractors.json", root / "distractor_wiki_summaries/summaries_en-us.json")
    return root


# --- the order: local copy, caches, fetch, none ---------------------------------------------------


def test_a_local_copy_comes_first_and_nothing_is_fetched(fresh, monkeypatch):
    root = _local_copy(fresh / "copy")
    monkeypatch.setenv(DATA_DIR_ENV, str(root))
    calls: list[str] = []
    monkeypatch.setattr(real_data, "_download_hub_file", _hub_puts_questions_in_its_cache(calls))
    data = find_real_data(user_cache=str(fresh / "user-cache"), wiki_api=dead_url())
    assert calls == [] and not (fresh / "user-cache").exists()
    assert data.local == root and data.manifest is None
    assert data.questions == root / "frames" / "frames_test_set.csv"
    assert data.corpus == root / "frames_wiki" / "pages.jsonl.gz"
    assert data.aliases == root / "frames_wiki" / "frames_link_to_page.tsv"
    assert data.distractors == root / "distractor_wiki_summaries" / "summaries_en-us.json"
    assert len(data.store) > data.frames_articles > 0  # the distractor summaries are in
    assert [ex.id for ex in data.examples] == [ex.id for ex in load_frames(TINY / "frames.csv")]
    assert data.cli_args()[-2:] == ["--distractors", str(data.distractors)]


def test_without_a_local_copy_a_first_run_fetches_into_the_users_cache_once(fresh, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(real_data, "_download_hub_file", _hub_puts_questions_in_its_cache(calls))
    throwaway = os.environ[CACHE_DIR_ENV]  # conftest's, for everything else the tests write
    user_cache = fresh / "user-cache"
    notes: list[str] = []
    with serve_corpus(TINY / "pages.jsonl", TINY / "frames_link_to_page.tsv") as wiki:
        first = find_real_data(user_cache=str(user_cache), wiki_api=wiki.url, say=notes.append)
        asked = len(wiki.requests)
    assert calls == [HUB_DATASET] and asked > 0
    assert os.environ[CACHE_DIR_ENV] == throwaway  # restored after the fetch
    assert first.corpus.is_relative_to(user_cache / "corpus") and first.corpus.is_file()
    assert first.questions.is_relative_to(fresh / "hf")
    assert first.local is None and first.distractors is None
    assert first.manifest["articles"] == first.frames_articles == len(first.store)
    assert any("fetching the Wikipedia articles" in note for note in notes)
    assert first.cli_args()[-2:] == ["--distractors", "none"]

    # The next run, offline: the hub client's cache and the user cache give the same data, and
    # nothing is asked of either server (the hub is a dead port, Wikipedia's server is gone).
    monkeypatch.setattr(real_data, "_download_hub_file", questions._download_hub_file)
    again = find_real_data(user_cache=str(user_cache), wiki_api=wiki.url)
    assert (again.questions, again.corpus) == (first.questions, first.corpus)
    assert [ex.id for ex in again.examples] == [ex.id for ex in first.examples]
    assert len(again.store) == len(first.store)


def test_with_nothing_cached_and_no_hub_it_says_what_is_missing_in_one_line(fresh):
    with pytest.raises(DataUnavailable) as info:
        find_real_data(user_cache=str(fresh / "user-cache"), wiki_api=dead_url())
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("needs the real FRAMES data: the FRAMES questions (hub dataset ")
    assert f"{DATA_DIR_ENV} (unset)" in message and "the connection was refused" in message
    assert f"set {DATA_DIR_ENV} to a local copy, or connect once to fetch it" in message


def test_with_the_questions_cached_and_no_wikipedia_it_names_the_articles(fresh, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(real_data, "_download_hub_file", _hub_puts_questions_in_its_cache(calls))
    dead = dead_url() + "/w/api.php"
    with pytest.raises(DataUnavailable) as info:
        find_real_data(user_cache=str(fresh / "user-cache"), wiki_api=dead)
    message = str(info.value)
    assert message.startswith("needs the real FRAMES data: the Wikipedia articles of ")
    assert dead in message and "connect once" in message


def test_a_data_dir_that_is_no_folder_is_an_error_not_a_skip(fresh, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(fresh / "no-such-folder"))
    with pytest.raises(ValueError, match="FRAMES_DATA_DIR=.*no-such-folder is not a folder"):
        find_real_data(user_cache=str(fresh / "user-cache"))


# --- a missing part: skipped, or failed under CI ------------------------------------------------


@pytest.mark.parametrize("value", [None, "", "false", "0"])
def test_a_missing_part_skips_outside_ci(value, monkeypatch):
    if value is None:
        monkeypatch.delenv(CI_ENV, raising=False)
    else:
        monkeypatch.setenv(CI_ENV, value)
    assert not under_ci()
    with pytest.raises(pytest.skip.Exception, match="^needs a browser: apt-get install x$"):
        missing("needs a browser:\n  apt-get install x")


@pytest.mark.parametrize("value", ["true", "True", "1", "yes"])
def test_a_missing_part_fails_under_ci(value, monkeypatch):
    monkeypatch.setenv(CI_ENV, value)
    with pytest.raises(pytest.fail.Exception, match=r"^needs a browser \[CI=true: CI must"):
        missing("needs a browser")
