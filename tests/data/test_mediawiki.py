"""The Wikipedia fetcher against a local MediaWiki-compatible server on 127.0.0.1.

The server (``tests/mediawiki_server.py``) answers title lookups and extracts as the action API
does; faults are queued on it. No request leaves the machine.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from frames_dspy.data.corpus import default_aliases, load_articles, load_corpus
from frames_dspy.data.disk_store import load_alias_titles
from frames_dspy.data.download import DownloadError
from frames_dspy.data.links import normalize_link
from frames_dspy.data.mediawiki import (
    _USER_AGENT,
    build_corpus,
    cached_files,
    corpus_manifest,
    default_corpus,
    default_corpus_folder,
    fetch_articles,
    write_corpus,
)
from tests.mediawiki_server import MediaWiki
from tests.ports import dead_url

REPO = Path(__file__).resolve().parents[2]
WIKI = "https://en.wikipedia.org/wiki/"


@pytest.fixture
def wiki(monkeypatch) -> Iterator[MediaWiki]:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with MediaWiki(lifetime=60) as server:
        yield server


@pytest.fixture
def pauses(monkeypatch) -> list[float]:
    """Record the fetcher's sleeps instead of sleeping."""
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


def dead_api() -> str:
    """An API URL on a port nobody listens on."""
    return dead_url() + "/w/api.php"


def _fetch(wiki: MediaWiki, urls, cache: Path, **kwargs):
    kwargs.setdefault("delay", 0)
    kwargs.setdefault("backoff", 0.01)
    return fetch_articles(urls, cache, api_url=wiki.url, **kwargs)


def _cached(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


# --- what is asked, and what is cached --------------------------------------------------------


def test_fetch_caches_one_file_per_link(wiki, tmp_path):
    wiki.add("Daikin Park", "Daikin Park is a ballpark in Houston.", pageid=11)
    wiki.add("Rogers Centre", "Rogers Centre is a stadium in Toronto.", pageid=12)
    cache = tmp_path / "cache"
    done = _fetch(wiki, [WIKI + "Daikin_Park", "en.m.wikipedia.org/wiki/Rogers_Centre#Roof"], cache)
    assert list(done) == [
        "en.wikipedia.org/wiki/Daikin_Park",
        "en.wikipedia.org/wiki/Rogers_Centre",
    ]
    assert sorted(p.name for p in cache.iterdir()) == sorted(p.name for p in done.values())
    assert _cached(done["en.wikipedia.org/wiki/Daikin_Park"]) == {
        "link": "en.wikipedia.org/wiki/Daikin_Park",
        "title": "Daikin Park",
        "url": "https://en.wikipedia.org/wiki/Daikin_Park",
        "page_id": "11",
        "text": "Daikin Park is a ballpark in Houston.",
        "missing": False,
    }
    # One lookup for both titles, then one extract per article, by page id.
    assert [r["titles"] for r in wiki.of_kind("info")] == ["Daikin Park|Rogers Centre"]
    assert [r["pageids"] for r in wiki.of_kind("extracts|info")] == ["11", "12"]
    assert len(wiki.requests) == done.requests == 3
    assert done.retries == 0


def test_requests_are_polite(wiki, tmp_path):
    wiki.add("Daikin Park", "text")
    _fetch(wiki, [WIKI + "Daikin_Park"], tmp_path)
    assert wiki.user_agents == {_USER_AGENT}
    assert "frames-dspy" in _USER_AGENT
    assert all(r["maxlag"] == "5" and r["formatversion"] == "2" for r in wiki.requests)
    assert wiki.of_kind("extracts|info")[0]["explaintext"] == "1"


def test_requests_are_spaced_by_the_delay(wiki, tmp_path):
    for n in range(3):
        wiki.add(f"Page {n}", "text")
    started = time.monotonic()
    _fetch(wiki, [f"{WIKI}Page_{n}" for n in range(3)], tmp_path, delay=0.15)
    # Four requests (a lookup, three extracts): three gaps of at least 0.15 s.
    assert len(wiki.requests) == 4
    assert time.monotonic() - started >= 0.45


def test_lookups_carry_at_most_fifty_titles(wiki, tmp_path):
    for n in range(120):
        wiki.add(f"Page {n}", f"text {n}")
    done = _fetch(wiki, [f"{WIKI}Page_{n}" for n in range(120)], tmp_path)
    assert len(done) == 120
    assert [len(r["titles"].split("|")) for r in wiki.of_kind("info")] == [50, 50, 20]
    assert len(wiki.of_kind("extracts|info")) == 120


def test_fetch_asks_for_the_decoded_title(wiki, tmp_path):
    title = "2021 French Open – Men's singles"
    wiki.add(title, "Djokovic won.")
    done = _fetch(wiki, [WIKI + "2021_French_Open_%E2%80%93_Men%2527s_singles"], tmp_path)
    assert wiki.of_kind("info")[0]["titles"] == title
    assert _cached(next(iter(done.values())))["title"] == title


def test_redirects_are_fetched_once_and_both_links_cached(wiki, tmp_path):
    wiki.add("Daikin Park", "Daikin Park is a ballpark in Houston.", pageid=11)
    wiki.redirect("Minute Maid Park", "Daikin Park")
    done = _fetch(wiki, [WIKI + "Minute_Maid_Park", WIKI + "Daikin_Park"], tmp_path)
    assert len(wiki.of_kind("extracts|info")) == 1
    records = [_cached(path) for path in done.values()]
    assert {r["link"]: r["page_id"] for r in records} == {
        "en.wikipedia.org/wiki/Minute_Maid_Park": "11",
        "en.wikipedia.org/wiki/Daikin_Park": "11",
    }
    assert {r["title"] for r in records} == {"Daikin Park"}


def test_missing_and_invalid_pages_are_cached_as_missing_without_an_extract(wiki, tmp_path):
    done = _fetch(wiki, [WIKI + "Nemanja_Marković", WIKI + "Bad<title>"], tmp_path)
    records = {link: _cached(path) for link, path in done.items()}
    assert all(r["missing"] and r["page_id"] is None for r in records.values())
    assert records["en.wikipedia.org/wiki/Nemanja_Marković"]["title"] == "Nemanja Marković"
    assert wiki.of_kind("extracts|info") == []


def test_page_with_an_empty_extract_counts_as_missing(wiki, tmp_path):
    wiki.add("Stub", "")
    done = _fetch(wiki, [WIKI + "Stub"], tmp_path)
    assert _cached(done["en.wikipedia.org/wiki/Stub"])["missing"] is True


def test_second_call_resumes_without_requests(wiki, tmp_path):
    wiki.add("Daikin Park", "text")
    urls = [WIKI + "Daikin_Park", WIKI + "Nowhere"]
    first = _fetch(wiki, urls, tmp_path)
    asked = len(wiki.requests)
    assert asked == 2
    assert _fetch(wiki, urls, tmp_path) == first
    assert len(wiki.requests) == asked


def test_repeated_link_is_fetched_once(wiki, tmp_path):
    wiki.add("Daikin Park", "text")
    _fetch(wiki, [WIKI + "Daikin_Park", "https://en.m.wikipedia.org/wiki/daikin_Park"], tmp_path)
    assert [r["titles"] for r in wiki.of_kind("info")] == ["Daikin Park"]


def test_non_wikipedia_urls_are_skipped_with_a_warning(wiki, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        done = _fetch(wiki, ["https://example.org/wiki/Foo"], tmp_path)
    assert done == {}
    assert wiki.requests == []
    assert "example.org" in caplog.text


# --- faults: retried with backoff, then recovered; or one clear error -------------------------


def test_429_then_500_are_retried_honouring_retry_after(wiki, tmp_path, pauses):
    wiki.add("Daikin Park", "text", pageid=11)
    wiki.fail(429, retry_after="7")
    wiki.fail(500, retry_after="0")
    done = _fetch(wiki, [WIKI + "Daikin_Park"], tmp_path, backoff=3.0)
    assert _cached(done["en.wikipedia.org/wiki/Daikin_Park"])["page_id"] == "11"
    assert pauses == [7.0, 0.0]
    assert len(wiki.requests) == done.requests == 4  # two failed lookups, the lookup, the extract
    assert done.retries == 2


def test_500_retry_really_happens_without_mocked_sleep(wiki, tmp_path):
    # End to end with real sleeps; Retry-After: 0 keeps it fast.
    wiki.add("Daikin Park", "text")
    wiki.add("Rogers Centre", "text")
    wiki.fail(500, times=1)
    done = _fetch(wiki, [WIKI + "Daikin_Park"], tmp_path, backoff=0.05)
    wiki.fail(503, times=2, retry_after="0")  # now in the middle of a second fetch
    started = time.monotonic()
    done = _fetch(wiki, [WIKI + "Daikin_Park", WIKI + "Rogers_Centre"], tmp_path)
    assert len(done) == 2
    assert time.monotonic() - started < 2


def test_backoff_grows_without_retry_after(wiki, tmp_path, pauses):
    wiki.add("Daikin Park", "text")
    wiki.fail(503, times=3)
    _fetch(wiki, [WIKI + "Daikin_Park"], tmp_path, backoff=0.5)
    assert pauses == [0.5, 1.0, 2.0]


def test_a_lagged_api_is_asked_again(wiki, tmp_path, pauses):
    wiki.add("Daikin Park", "text")
    wiki.lag(times=2, retry_after="5")
    done = _fetch(wiki, [WIKI + "Daikin_Park"], tmp_path)
    assert len(done) == 1
    assert pauses == [5.0, 5.0]


def test_persistent_503_raises_one_clear_error_and_keeps_the_cache(wiki, tmp_path, pauses):
    wiki.add("Daikin Park", "text", pageid=11)
    wiki.add("Rogers Centre", "text", pageid=12)
    urls = [WIKI + "Daikin_Park", WIKI + "Rogers_Centre"]
    # The lookup and Daikin Park's extract succeed, then Rogers Centre's extract keeps failing.
    original = wiki.answer

    def flaky(params):
        if params.get("pageids") == "12":
            wiki.fail(503)
        return original(params)

    wiki.answer = flaky
    with pytest.raises(DownloadError) as info:
        _fetch(wiki, urls, tmp_path, max_retries=2)
    message = str(info.value)
    assert "the Wikipedia article 'Rogers Centre'" in message
    assert "HTTP 503" in message and "after 3 attempts" in message
    assert "1 of 2 links are cached" in message
    assert "--corpus" in message and "FRAMES_DATA_DIR" in message
    assert "\n" not in message
    assert len(cached_files(tmp_path)) == 1
    # Once the server recovers, only the failed link is asked for again.
    wiki.answer = original
    wiki.requests.clear()
    assert len(_fetch(wiki, urls, tmp_path)) == 2
    assert [r["titles"] for r in wiki.of_kind("info")] == ["Rogers Centre"]


def test_404_is_not_retried(wiki, tmp_path, pauses):
    wiki.fail(404, times=5)
    with pytest.raises(DownloadError, match="HTTP 404"):
        _fetch(wiki, [WIKI + "Daikin_Park"], tmp_path)
    assert len(wiki.requests) == 1
    assert pauses == []
    assert cached_files(tmp_path) == []


def test_a_server_that_is_down_fails_at_once(tmp_path, pauses):
    with pytest.raises(DownloadError) as info:
        fetch_articles([WIKI + "Daikin_Park"], tmp_path, api_url=dead_api(), delay=0)
    message = str(info.value)
    assert "connection was refused" in message
    assert "Connect to the internet and rerun" in message
    assert pauses == []  # nothing answered yet: an offline machine is not made to wait


def test_a_server_that_goes_down_mid_fetch_is_retried(wiki, tmp_path, pauses):
    wiki.add("Daikin Park", "text")
    wiki.add("Rogers Centre", "text")
    original = wiki.answer

    def stop_after_lookup(params):
        answer = original(params)
        if "titles" in params:
            wiki.stop()
        return answer

    wiki.answer = stop_after_lookup
    with pytest.raises(DownloadError, match="after 3 attempts"):
        _fetch(wiki, [WIKI + "Daikin_Park", WIKI + "Rogers_Centre"], tmp_path, max_retries=2)
    assert len(pauses) == 2


# --- the corpus file, its alias table and manifest ---------------------------------------------


def test_write_corpus_round_trips_through_load_corpus(wiki, tmp_path):
    wiki.add("Daikin Park", "Daikin Park is a ballpark in Houston.", pageid=11)
    wiki.add("Rogers Centre", "Rogers Centre is a stadium in Toronto.", pageid=12)
    wiki.redirect("Minute Maid Park", "Daikin Park")
    cache = tmp_path / "cache"
    names = ["Daikin_Park", "Minute_Maid_Park", "Rogers_Centre", "Nowhere_at_all"]
    _fetch(wiki, [WIKI + name for name in names], cache)
    out = tmp_path / "pages.jsonl.gz"
    assert write_corpus(cache, out) == 2
    assert sorted((a.id, a.title, a.url) for a in load_articles(out)) == [
        ("11", "Daikin Park", "https://en.wikipedia.org/wiki/Daikin_Park"),
        ("12", "Rogers Centre", "https://en.wikipedia.org/wiki/Rogers_Centre"),
    ]
    assert not list(tmp_path.glob("*.tmp"))
    # The alias table beside it resolves the redirected link to its article.
    store = load_corpus(out, aliases=default_aliases(out))
    assert store.resolve(WIKI + "Minute_Maid_Park").id == "11"
    assert store.resolve(WIKI + "Rogers_Centre").id == "12"
    assert store.resolve(WIKI + "Nowhere_at_all") is None
    # It names each link's article title too, which a Wikipedia snapshot resolves links by.
    titles = load_alias_titles(default_aliases(out))
    assert titles[normalize_link(WIKI + "Minute_Maid_Park")] == "Daikin Park"
    assert normalize_link(WIKI + "Nowhere_at_all") not in titles


def test_build_corpus_writes_a_manifest_of_what_was_not_found(wiki, tmp_path):
    wiki.add("Daikin Park", "text", pageid=11)
    urls = [WIKI + "Daikin_Park", WIKI + "Nowhere", "https://example.org/x"]
    manifest = build_corpus(urls, tmp_path, api_url=wiki.url, delay=0)
    assert manifest["links"] == 2 and manifest["articles"] == 1
    assert manifest["unresolved_links"] == 2
    assert manifest["unresolved"] == ["en.wikipedia.org/wiki/Nowhere", "https://example.org/x"]
    assert manifest["requests"] == len(wiki.requests) == 2 and manifest["retries"] == 0
    assert corpus_manifest(tmp_path / "pages.jsonl.gz") == manifest
    assert corpus_manifest(REPO / "tests" / "fixtures" / "eval_corpus.jsonl") is None


def test_default_corpus_is_fetched_once_then_reused(wiki, tmp_path, monkeypatch):
    monkeypatch.setenv("FRAMES_DSPY_CACHE", str(tmp_path / "cache"))
    wiki.add("Daikin Park", "text", pageid=11)
    wiki.add("Rogers Centre", "text", pageid=12)
    said: list[str] = []
    urls = [WIKI + "Daikin_Park", WIKI + "Nowhere"]
    path = default_corpus(urls, api_url=wiki.url, say=said.append, delay=0)
    assert path == default_corpus_folder(wiki.url) / "pages.jsonl.gz"
    assert str(tmp_path / "cache" / "corpus") in str(path)
    assert len(said) == 2
    assert "fetching the Wikipedia articles of 2 links" in said[0]
    assert f"--corpus {path}" in said[1] and "1 of 2 links found no article" in said[1]
    asked = len(wiki.requests)
    # Reused as it is: no request, nothing said.
    assert default_corpus(urls, api_url=wiki.url, say=said.append, delay=0) == path
    assert len(wiki.requests) == asked and len(said) == 2
    # Another dataset's links: only the new one is fetched, the corpus is rewritten.
    default_corpus([*urls, WIKI + "Rogers_Centre"], api_url=wiki.url, say=said.append, delay=0)
    assert [r["titles"] for r in wiki.of_kind("info")][-1] == "Rogers Centre"
    assert len(load_articles(path)) == 2


def test_two_first_runs_at_once_fetch_the_corpus_once(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("FRAMES_DSPY_CACHE", str(tmp_path / "cache"))
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    urls = [WIKI + f"Page_{n}" for n in range(6)]
    paths: list[Path] = []
    with MediaWiki(lifetime=60, latency=0.05) as wiki:
        for n in range(6):
            wiki.add(f"Page {n}", f"text {n}", pageid=100 + n)

        def first_run() -> None:
            paths.append(default_corpus(urls, api_url=wiki.url, say=lambda _: None, delay=0))

        with caplog.at_level(logging.WARNING, logger="frames_dspy.base.locks"):
            runs = [threading.Thread(target=first_run) for _ in range(2)]
            for run in runs:
                run.start()
            for run in runs:
                run.join(60)
        extracts = [r["pageids"] for r in wiki.of_kind("extracts|info")]
    # The second waited for the first (saying so once) and reused its corpus: every
    # article was asked for once, and both runs got the same whole file.
    assert sorted(extracts) == [str(100 + n) for n in range(6)]
    assert len(paths) == 2 and paths[0] == paths[1]
    assert len(load_articles(paths[0])) == 6
    assert sum("waiting for the corpus folder" in r.getMessage() for r in caplog.records) == 1


def test_default_corpus_offline_is_one_error_before_any_note(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAMES_DSPY_CACHE", str(tmp_path / "cache"))
    said: list[str] = []
    started = time.monotonic()
    with pytest.raises(DownloadError) as info:
        default_corpus([WIKI + "Daikin_Park"], api_url=dead_api(), say=said.append)
    assert time.monotonic() - started < 5
    assert said == []
    assert str(info.value).startswith("could not download the Wikipedia articles of 1 FRAMES")


# --- an interrupted fetch resumes (a real process, killed) ------------------------------------


def test_a_killed_fetch_resumes_where_it_stopped(tmp_path):
    with MediaWiki(lifetime=60, latency=0.02) as wiki:
        for n in range(30):
            wiki.add(f"Page {n}", f"text {n}")
        dataset = tmp_path / "frames.csv"
        rows = [f'{n},"Question {n}?",A{n},{WIKI}Page_{n},Numerical reasoning' for n in range(30)]
        header = "id,Prompt,Answer,wikipedia_link_1,reasoning_types"
        dataset.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
        out = tmp_path / "out"
        command = [
            sys.executable,
            "-m",
            "frames_dspy.wikipedia",
            "fetch",
            "--dataset",
            str(dataset),
            "--out",
            str(out),
            "--api-url",
            wiki.url,
            "--delay",
            "0.05",
            "--quiet",
        ]
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        # Count articles, not the hidden temporary file of a write in flight.
        while len(cached_files(out / "cache")) < 10 and time.monotonic() < deadline:
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        kept = len(cached_files(out / "cache"))
        assert 10 <= kept < 30
        assert not (out / "pages.jsonl.gz").exists()
        wiki.requests.clear()
        finished = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
        assert finished.returncode == 0, finished.stderr
        # Only the links not cached were asked for again.
        assert len(wiki.of_kind("extracts|info")) == 30 - kept
        assert len(load_articles(out / "pages.jsonl.gz")) == 30
        assert "wrote 30 articles" in finished.stdout
