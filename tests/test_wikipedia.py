"""The Wikipedia fetcher against a local MediaWiki-shaped server on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from frames_dspy.corpus import ArticleStore, load_articles
from frames_dspy.wikipedia import fetch_articles, write_corpus

# --- fetch_articles and write_corpus against a local MediaWiki-shaped server --------------------


class FakeWiki:
    """A tiny stand-in for ``/w/api.php``: pages by title, and queued error answers."""

    def __init__(self) -> None:
        self.pages: dict[str, dict] = {}
        self.errors: dict[str, list[tuple[int, dict[str, str]]]] = {}
        self.requested: list[str] = []
        self.lock = threading.Lock()
        self.api_url = ""

    def add(self, pageid: int, title: str, extract: str) -> None:
        url = "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")
        self.pages[title] = {"pageid": pageid, "title": title, "fullurl": url, "extract": extract}

    def fail(self, title: str, status: int, times: int, headers: dict[str, str] | None = None):
        self.errors[title] = [(status, headers or {})] * times

    def answer(self, title: str) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            self.requested.append(title)
            queued = self.errors.get(title)
            if queued:
                status, headers = queued.pop(0)
                return status, headers, b'{"error": "try later"}'
        page = self.pages.get(title, {"ns": 0, "title": title, "missing": True})
        body = json.dumps({"batchcomplete": True, "query": {"pages": [page]}}).encode()
        return 200, {"Content-Type": "application/json"}, body


@pytest.fixture
def wiki(monkeypatch) -> Iterator[FakeWiki]:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    fake = FakeWiki()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            query = parse_qs(urlsplit(self.path).query)
            status, headers, body = fake.answer(query.get("titles", [""])[0])
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # A short poll interval keeps shutdown() (and so each test) fast.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    )
    thread.start()
    fake.api_url = f"http://127.0.0.1:{server.server_address[1]}/w/api.php"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def pauses(monkeypatch) -> list[float]:
    """Record the fetcher's sleeps instead of sleeping."""
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


def _fetch(wiki: FakeWiki, urls, cache: Path, **kwargs):
    kwargs.setdefault("delay", 0)
    kwargs.setdefault("backoff", 0.01)
    return fetch_articles(urls, cache, api_url=wiki.api_url, **kwargs)


def _cached(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_fetch_caches_one_file_per_link(wiki, tmp_path):
    wiki.add(11, "Daikin Park", "Daikin Park is a ballpark in Houston.")
    wiki.add(12, "Rogers Centre", "Rogers Centre is a stadium in Toronto.")
    cache = tmp_path / "cache"
    done = _fetch(
        wiki,
        ["https://en.wikipedia.org/wiki/Daikin_Park", "en.m.wikipedia.org/wiki/Rogers_Centre#Roof"],
        cache,
    )
    assert list(done) == [
        "en.wikipedia.org/wiki/Daikin_Park",
        "en.wikipedia.org/wiki/Rogers_Centre",
    ]
    assert sorted(p.name for p in cache.iterdir()) == sorted(p.name for p in done.values())
    record = _cached(done["en.wikipedia.org/wiki/Daikin_Park"])
    assert record == {
        "link": "en.wikipedia.org/wiki/Daikin_Park",
        "title": "Daikin Park",
        "url": "https://en.wikipedia.org/wiki/Daikin_Park",
        "page_id": "11",
        "text": "Daikin Park is a ballpark in Houston.",
        "missing": False,
    }
    assert wiki.requested == ["Daikin Park", "Rogers Centre"]


def test_fetch_asks_for_the_decoded_title(wiki, tmp_path):
    title = "2021 French Open – Men's singles"
    wiki.add(21, title, "Djokovic won.")
    link = "https://en.wikipedia.org/wiki/2021_French_Open_%E2%80%93_Men%2527s_singles"
    done = _fetch(wiki, [link], tmp_path)
    assert wiki.requested == [title]
    assert _cached(next(iter(done.values())))["title"] == title


def test_second_call_resumes_without_requests(wiki, tmp_path):
    wiki.add(11, "Daikin Park", "text")
    urls = ["https://en.wikipedia.org/wiki/Daikin_Park", "https://en.wikipedia.org/wiki/Nowhere"]
    first = _fetch(wiki, urls, tmp_path)
    assert len(wiki.requested) == 2
    second = _fetch(wiki, urls, tmp_path)
    assert second == first
    assert len(wiki.requested) == 2


def test_repeated_link_is_fetched_once(wiki, tmp_path):
    wiki.add(11, "Daikin Park", "text")
    _fetch(
        wiki,
        [
            "https://en.wikipedia.org/wiki/Daikin_Park",
            "https://en.m.wikipedia.org/wiki/daikin_Park",
        ],
        tmp_path,
    )
    assert wiki.requested == ["Daikin Park"]


def test_non_wikipedia_urls_are_skipped_with_a_warning(wiki, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="frames_dspy.corpus"):
        done = _fetch(wiki, ["https://example.org/wiki/Foo"], tmp_path)
    assert done == {}
    assert wiki.requested == []
    assert "example.org" in caplog.text


def test_503_is_retried_then_succeeds(wiki, tmp_path, pauses):
    wiki.add(11, "Daikin Park", "text")
    wiki.fail("Daikin Park", 503, times=1)
    done = _fetch(wiki, ["https://en.wikipedia.org/wiki/Daikin_Park"], tmp_path)
    assert wiki.requested == ["Daikin Park", "Daikin Park"]
    assert _cached(done["en.wikipedia.org/wiki/Daikin_Park"])["page_id"] == "11"
    assert len(pauses) == 1


def test_503_retry_really_happens_without_mocked_sleep(wiki, tmp_path):
    # End to end with real sleeps; Retry-After: 0 keeps it fast.
    wiki.add(11, "Daikin Park", "text")
    wiki.fail("Daikin Park", 503, times=2, headers={"Retry-After": "0"})
    started = time.monotonic()
    _fetch(wiki, ["https://en.wikipedia.org/wiki/Daikin_Park"], tmp_path)
    assert len(wiki.requested) == 3
    assert time.monotonic() - started < 1


def test_retry_after_header_is_honoured(wiki, tmp_path, pauses):
    wiki.add(11, "Daikin Park", "text")
    wiki.errors["Daikin Park"] = [(429, {"Retry-After": "0"}), (503, {"Retry-After": "7"})]
    _fetch(wiki, ["https://en.wikipedia.org/wiki/Daikin_Park"], tmp_path, backoff=3.0)
    assert len(wiki.requested) == 3
    assert pauses == [0.0, 7.0]


def test_backoff_scales_with_the_backoff_argument(wiki, tmp_path, pauses):
    # No Retry-After: waits grow exponentially from `backoff` seconds, so a tiny backoff
    # keeps every retry short.
    wiki.add(11, "Daikin Park", "text")
    wiki.fail("Daikin Park", 503, times=3)
    _fetch(wiki, ["https://en.wikipedia.org/wiki/Daikin_Park"], tmp_path, backoff=0.01)
    assert len(pauses) == 3
    assert pauses[0] <= 0.01
    assert pauses == sorted(pauses)


def test_persistent_503_raises_and_keeps_the_cache(wiki, tmp_path, pauses):
    wiki.add(11, "Daikin Park", "text")
    wiki.add(12, "Rogers Centre", "text")
    wiki.fail("Rogers Centre", 503, times=10)
    urls = [
        "https://en.wikipedia.org/wiki/Daikin_Park",
        "https://en.wikipedia.org/wiki/Rogers_Centre",
    ]
    with pytest.raises(RuntimeError) as info:
        _fetch(wiki, urls, tmp_path, max_retries=2)
    message = str(info.value)
    assert "en.wikipedia.org/wiki/Rogers_Centre" in message
    assert "3 attempt(s)" in message
    assert "1 article(s) are cached" in message
    assert wiki.requested.count("Rogers Centre") == 3
    assert len(list(tmp_path.glob("*.json"))) == 1
    # Once the server recovers, only the failed link is asked for again.
    wiki.errors.clear()
    done = _fetch(wiki, urls, tmp_path)
    assert len(done) == 2
    assert wiki.requested.count("Daikin Park") == 1


def test_404_is_not_retried(wiki, tmp_path, pauses):
    wiki.fail("Daikin Park", 404, times=5)
    with pytest.raises(RuntimeError, match="1 attempt"):
        _fetch(wiki, ["https://en.wikipedia.org/wiki/Daikin_Park"], tmp_path)
    assert wiki.requested == ["Daikin Park"]
    assert pauses == []
    assert list(tmp_path.glob("*.json")) == []


def test_unreachable_server_is_retried_then_fails(tmp_path, pauses):
    # Bind and close a socket to get a port nobody listens on.
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RuntimeError, match="2 attempt"):
        fetch_articles(
            ["https://en.wikipedia.org/wiki/Daikin_Park"],
            tmp_path,
            api_url=f"http://127.0.0.1:{port}/w/api.php",
            delay=0,
            max_retries=1,
            timeout=2,
        )
    assert len(pauses) == 1


def test_missing_pages_are_cached_as_missing(wiki, tmp_path):
    done = _fetch(wiki, ["https://en.wikipedia.org/wiki/Nemanja_Marković"], tmp_path)
    record = _cached(done["en.wikipedia.org/wiki/Nemanja_Marković"])
    assert record["missing"] is True
    assert record["page_id"] is None
    assert record["title"] == "Nemanja Marković"


def test_page_with_an_empty_extract_counts_as_missing(wiki, tmp_path):
    wiki.add(5, "Stub", "")
    done = _fetch(wiki, ["https://en.wikipedia.org/wiki/Stub"], tmp_path)
    assert _cached(done["en.wikipedia.org/wiki/Stub"])["missing"] is True


def test_write_corpus_round_trips_through_load_articles(wiki, tmp_path):
    wiki.add(11, "Daikin Park", "Daikin Park is a ballpark in Houston.")
    wiki.add(12, "Rogers Centre", "Rogers Centre is a stadium in Toronto.")
    # Minute_Maid_Park "redirects": the server answers with the Daikin Park page.
    wiki.pages["Minute Maid Park"] = wiki.pages["Daikin Park"]
    cache = tmp_path / "cache"
    _fetch(
        wiki,
        [
            "https://en.wikipedia.org/wiki/Daikin_Park",
            "https://en.wikipedia.org/wiki/Minute_Maid_Park",
            "https://en.wikipedia.org/wiki/Rogers_Centre",
            "https://en.wikipedia.org/wiki/Nowhere_at_all",
        ],
        cache,
    )
    assert len(list(cache.glob("*.json"))) == 4
    out = tmp_path / "pages.jsonl.gz"
    assert write_corpus(cache, out) == 2
    articles = load_articles(out)
    assert sorted((a.id, a.title, a.url) for a in articles) == [
        ("11", "Daikin Park", "https://en.wikipedia.org/wiki/Daikin_Park"),
        ("12", "Rogers Centre", "https://en.wikipedia.org/wiki/Rogers_Centre"),
    ]
    assert not list(tmp_path.glob("*.tmp"))
    store = ArticleStore(articles)
    assert store.resolve("https://en.wikipedia.org/wiki/Rogers_Centre").id == "12"
