"""The article store, its file formats and bad inputs, and the fetcher against a local server."""

from __future__ import annotations

import copy
import gzip
import json
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from frames_dspy.corpus import (
    Article,
    ArticleStore,
    CorpusError,
    default_aliases,
    fetch_articles,
    load_alias_table,
    load_articles,
    load_corpus,
    load_distractors,
    write_corpus,
)
from frames_dspy.paths import data_file

TINY = Path(__file__).parent / "fixtures" / "tiny"
PAGES = TINY / "pages.jsonl"
ALIASES = TINY / "frames_link_to_page.tsv"
DISTRACTORS = TINY / "distractors.json"

DAIKIN = "daikin_park_0578f6cc"


def _write_lines(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _record(**fields) -> str:
    return json.dumps(fields, ensure_ascii=False)


@pytest.fixture(scope="module")
def store() -> ArticleStore:
    return load_corpus(PAGES, aliases=ALIASES)


# --- load_articles ------------------------------------------------------------------------------


def test_load_articles_from_jsonl():
    articles = load_articles(PAGES)
    assert len(articles) == 6
    first = articles[0]
    assert first == Article(
        id=DAIKIN,
        title="Daikin Park",
        text=first.text,
        url="https://en.wikipedia.org/wiki/Daikin_Park",
        source="frames",
    )
    assert "Minute Maid Park" in first.text


def test_load_articles_from_jsonl_gz(tmp_path):
    packed = tmp_path / "pages.jsonl.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as handle:
        handle.write(PAGES.read_text(encoding="utf-8"))
    assert load_articles(packed) == load_articles(PAGES)


def test_ids_fall_back_to_id_then_a_title_slug(tmp_path):
    path = _write_lines(
        tmp_path / "p.jsonl",
        _record(id="custom-1", title="A", text="alpha"),
        "",
        _record(title="Daikin Park", text="beta"),
    )
    first, second = load_articles(path, source="extra")
    assert first.id == "custom-1"
    assert second.id.startswith("daikin_park_")
    assert second.url is None
    assert {first.source, second.source} == {"extra"}


def _corpus_error(path) -> str:
    with pytest.raises(CorpusError) as info:
        load_articles(path)
    return str(info.value)


def test_missing_corpus_file(tmp_path):
    path = tmp_path / "nope.jsonl.gz"
    message = _corpus_error(path)
    assert str(path) in message
    assert "does not exist" in message


@pytest.mark.parametrize("content", ["", "\n\n  \n"], ids=["empty", "blank-lines"])
def test_empty_corpus_file(tmp_path, content):
    path = tmp_path / "empty.jsonl"
    path.write_text(content, encoding="utf-8")
    message = _corpus_error(path)
    assert str(path) in message
    assert "no articles" in message


def test_line_that_is_not_json_names_its_line(tmp_path):
    path = _write_lines(
        tmp_path / "p.jsonl", _record(title="A", text="a"), _record(title="B", text="b"), "{oops"
    )
    message = _corpus_error(path)
    assert str(path) in message
    assert "line 3" in message


@pytest.mark.parametrize(
    "line", [_record(title="No text"), _record(text="no title"), "[1, 2]"], ids=str
)
def test_record_without_title_or_text(tmp_path, line):
    path = _write_lines(tmp_path / "p.jsonl", _record(title="A", text="a"), line)
    message = _corpus_error(path)
    assert str(path) in message
    assert "line 2" in message
    assert "'title' and 'text'" in message


def test_non_utf8_corpus(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"title": "Caf\xe9", "text": "x"}\n'.encode("latin-1"))
    message = _corpus_error(path)
    assert str(path) in message
    assert "not UTF-8" in message


def test_duplicate_article_ids(tmp_path):
    path = _write_lines(
        tmp_path / "p.jsonl",
        _record(page_id="p1", title="A", text="a"),
        _record(page_id="p1", title="B", text="b"),
    )
    message = _corpus_error(path)
    assert str(path) in message
    assert "'p1'" in message
    assert "line 2" in message


def test_file_that_is_not_gzip(tmp_path):
    path = tmp_path / "p.jsonl.gz"
    path.write_text(_record(title="A", text="a") + "\n", encoding="utf-8")
    message = _corpus_error(path)
    assert str(path) in message
    assert "could not be read" in message


# --- load_distractors and the alias table -------------------------------------------------------


def test_load_distractors_from_summary_objects():
    distractors = load_distractors(DISTRACTORS)
    # The entry with an empty extract is skipped.
    assert [a.title for a in distractors] == ["Daikin Park", "Moon"]
    assert all(a.source == "distractor" for a in distractors)
    assert all(a.id.startswith("distractor:") for a in distractors)
    assert distractors[1].text == "The Moon is the only natural satellite of Earth."


def test_load_distractors_from_plain_strings(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"Moon": "Earth's satellite.", "Empty": "  "}), encoding="utf-8")
    (moon,) = load_distractors(path)
    assert (moon.title, moon.text, moon.url) == ("Moon", "Earth's satellite.", None)


@pytest.mark.parametrize(
    ("content", "problem"),
    [("{not json", "not valid JSON"), ("[]", "non-empty JSON object"), ("{}", "non-empty")],
)
def test_bad_distractor_files(tmp_path, content, problem):
    path = tmp_path / "d.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CorpusError, match=problem):
        load_distractors(path)


def test_missing_distractor_file(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        load_distractors(tmp_path / "d.json")


def test_alias_table_skips_rows_without_a_page():
    table = load_alias_table(ALIASES)
    assert table["en.wikipedia.org/wiki/Minute_Maid_Park"] == DAIKIN
    assert "en.wikipedia.org/wiki/Pokémon" not in table
    assert len(table) == 3


def test_alias_table_bad_inputs(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        load_alias_table(tmp_path / "missing.tsv")
    bad = tmp_path / "bad.tsv"
    bad.write_text("link\tpage\nen.wikipedia.org/wiki/A\ta\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="link_normalized"):
        load_alias_table(bad)


def test_default_aliases_finds_the_table_beside_the_corpus(tmp_path):
    assert default_aliases(PAGES) == ALIASES
    assert default_aliases(tmp_path / "pages.jsonl.gz") is None


# --- ArticleStore -------------------------------------------------------------------------------


def test_resolve_by_url(store):
    article = store.resolve("https://en.wikipedia.org/wiki/Daikin_Park")
    assert article is not None
    assert article.id == DAIKIN


def test_resolve_by_messy_url_spellings(store):
    for link in (
        "https://en.m.wikipedia.org/wiki/Daikin_Park#History",
        "en.wikipedia.org/wiki/Daikin_Park",
        "https://en.wikipedia.org/wiki/2021_French_Open_%E2%80%93_Men%2527s_singles",
    ):
        assert store.resolve(link) is not None, link


def test_resolve_simple_wikipedia_link(store):
    article = store.resolve("https://simple.wikipedia.org/wiki/Video_assistant_referee")
    assert article is not None
    assert article.title == "Video assistant referee"


@pytest.mark.parametrize("title", ["Daikin Park", "daikin_park", "DAIKIN  PARK", "Daikin%20Park"])
def test_resolve_by_title_ignores_case_and_underscores(store, title):
    assert store.resolve(title).id == DAIKIN


def test_resolve_through_the_alias_table(store):
    article = store.resolve("https://en.wikipedia.org/wiki/Minute_Maid_Park")
    assert article is not None
    assert article.title == "Daikin Park"


def test_alias_without_the_table_is_a_miss():
    plain = ArticleStore(load_articles(PAGES))
    assert plain.resolve("https://en.wikipedia.org/wiki/Minute_Maid_Park") is None


def test_alias_to_an_unknown_article_is_ignored(store):
    assert store.resolve("https://en.wikipedia.org/wiki/Astros_Field") is None


@pytest.mark.parametrize(
    "link", ["https://en.wikipedia.org/wiki/Pokémon", "Chase Field", "https://example.org/x"]
)
def test_miss_returns_none(store, link):
    assert store.resolve(link) is None


def test_resolve_many_deduplicates_and_keeps_order(store):
    found = store.resolve_many(
        [
            "https://en.wikipedia.org/wiki/Rogers_Centre",
            "https://en.wikipedia.org/wiki/Minute_Maid_Park",
            "https://en.wikipedia.org/wiki/Chase_Field",
            "https://en.wikipedia.org/wiki/Daikin_Park",
            "rogers centre",
        ]
    )
    assert [a.title for a in found] == ["Rogers Centre", "Daikin Park"]


def test_store_container_protocol(store):
    assert len(store) == 6
    assert [a.id for a in store] == [a.id for a in load_articles(PAGES)]
    assert DAIKIN in store
    assert "nope" not in store
    assert store[DAIKIN].title == "Daikin Park"
    with pytest.raises(KeyError, match="nope"):
        store["nope"]


def test_duplicate_ids_in_a_store_raise():
    article = Article("same", "A", "a")
    with pytest.raises(CorpusError, match="'same'"):
        ArticleStore([article, Article("same", "B", "b")])


def test_fingerprint_follows_the_text():
    articles = load_articles(PAGES)
    base = ArticleStore(articles).fingerprint
    assert ArticleStore(load_articles(PAGES)).fingerprint == base
    edited = [*articles[:-1], Article(articles[-1].id, articles[-1].title, "different text")]
    assert ArticleStore(edited).fingerprint != base
    assert len(base) == 64


def test_deepcopy_shares_the_store(store):
    assert copy.deepcopy(store) is store
    holder = {"retriever": {"store": store}}
    assert copy.deepcopy(holder)["retriever"]["store"] is store


def test_frames_article_wins_a_title_clash_with_a_distractor():
    distractor = Article("distractor:x", "Pokémon", "short summary", None, "distractor")
    frames = Article("pokemon_1", "Pokémon", "the whole article", None, "frames")
    for order in ([distractor, frames], [frames, distractor]):
        assert ArticleStore(order).resolve("pokémon").id == "pokemon_1"


def test_load_corpus_skips_distractors_named_like_corpus_articles():
    store = load_corpus(PAGES, aliases=ALIASES, distractors=DISTRACTORS)
    distractors = [a for a in store if a.source == "distractor"]
    assert [a.title for a in distractors] == ["Moon"]
    assert len(store) == 7
    assert store.resolve("Daikin Park").source == "frames"
    assert store.resolve("moon").source == "distractor"


@pytest.mark.real
def test_real_corpus_resolves_a_renamed_stadium(data_dir):
    corpus = data_file("corpus")
    store = load_corpus(corpus, aliases=default_aliases(corpus))
    assert len(store) == 2460
    article = store.resolve("https://en.wikipedia.org/wiki/Minute_Maid_Park")
    assert article is not None
    assert article.title == "Daikin Park"
    assert store.resolve("https://en.wikipedia.org/wiki/ID;_Peace_B") is None


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
