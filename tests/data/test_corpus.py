"""The article store, its file formats and bad inputs."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from frames_dspy.data.corpus import (
    Article,
    ArticleStore,
    CorpusError,
    default_aliases,
    load_alias_table,
    load_articles,
    load_corpus,
    load_distractors,
)

TINY = Path(__file__).parents[1] / "fixtures" / "tiny"
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


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        pytest.param(["{oops"], ["line 3"], id="not JSON"),
        pytest.param(
            [_record(title="No text")], ["line 3", "'title' and 'text'"], id="without text"
        ),
        pytest.param(
            [_record(text="no title")], ["line 3", "'title' and 'text'"], id="without title"
        ),
        pytest.param(["[1, 2]"], ["line 3", "'title' and 'text'"], id="not an object"),
        pytest.param(
            [_record(page_id="p1", title="C", text="c")], ["'p1'", "line 3"], id="duplicate id"
        ),
    ],
)
def test_a_bad_line_is_named_by_file_and_line(tmp_path, lines, says):
    good = _record(page_id="p1", title="A", text="a"), _record(title="B", text="b")
    path = _write_lines(tmp_path / "p.jsonl", *good, *lines)
    message = _corpus_error(path)
    assert str(path) in message
    assert [part for part in says if part not in message] == []


def test_non_utf8_corpus(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"title": "Caf\xe9", "text": "x"}\n'.encode("latin-1"))
    message = _corpus_error(path)
    assert str(path) in message
    assert "not UTF-8" in message


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
def test_real_corpus_resolves_a_renamed_stadium(real_data):
    store = load_corpus(real_data.corpus, aliases=default_aliases(real_data.corpus))
    assert len(store) == real_data.frames_articles
    article = store.resolve("https://en.wikipedia.org/wiki/Minute_Maid_Park")
    assert article is not None
    assert article.title == "Daikin Park"
    # A link the corpus has no article for resolves to nothing, not to a neighbour's.
    if real_data.manifest is None:  # the offline copy (its data README lists what it lacks)
        assert len(store) == 2460
        assert store.resolve("https://en.wikipedia.org/wiki/ID;_Peace_B") is None
    else:  # fetched: the links its manifest lists as found on no page
        unresolved = real_data.manifest["unresolved"]
        assert unresolved and all(store.resolve("https://" + link) is None for link in unresolved)
