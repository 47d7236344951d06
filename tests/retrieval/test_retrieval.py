"""Tests for frames_dspy.retrieval.bm25: both BM25 backends over a tiny in-code corpus.

The one ``real`` test builds bm25s over the offline FRAMES corpus and checks question-as-query
recall and agreement with rank-bm25.
"""

from __future__ import annotations

import copy
import json
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from frames_dspy.data.corpus import Article, ArticleStore
from frames_dspy.retrieval import bm25 as retrieval
from frames_dspy.retrieval.bm25 import BACKENDS, Hit, build_retriever, tokenize

DOCS = [
    ("Mount Etna", "Etna is an active volcano in Sicily; its eruptions send lava down the slopes."),
    ("Great Barrier Reef", "The largest coral reef system lies off Queensland in the Coral Sea."),
    ("Ada Lovelace", "Ada Lovelace wrote the first published algorithm for Babbage's engine."),
    ("Krakatoa", "The 1883 eruption of the Krakatoa volcano was heard thousands of miles away."),
    ("Basalt", "Basalt is a rock formed from rapidly cooled lava rich in magnesium and iron."),
    ("Tour de France", "The Tour de France is a cycling race held each July across France."),
    ("Honey bee", "Honey bees live in colonies and make honey from the nectar of flowers."),
    ("Printing press", "Gutenberg's printing press spread books across Europe in the 1450s."),
]


def make_store(docs=DOCS, prefix: str = "doc") -> ArticleStore:
    return ArticleStore(
        Article(f"{prefix}{i}", title, text) for i, (title, text) in enumerate(docs)
    )


@pytest.fixture
def store() -> ArticleStore:
    return make_store()


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


def ids(hits: list[Hit]) -> list[str]:
    return [hit.article_id for hit in hits]


def test_tokenize_stems_and_drops_stop_words():
    assert tokenize(["The dogs were running to the volcanoes", ""]) == [
        ["dog", "were", "run", "volcano"],
        [],
    ]
    with pytest.raises(TypeError):
        tokenize("a single string")


def test_known_best_article(store, backend, tmp_path):
    retriever = build_retriever(store, backend=backend, index_dir=tmp_path)
    assert retriever.backend == backend
    assert ids(retriever.search("Who wrote the first algorithm?", k=1)) == ["doc2"]
    hits = retriever.search("volcano eruption lava", k=3)
    assert set(ids(hits)) == {"doc0", "doc3", "doc4"}
    assert ids(hits)[0] == "doc0"  # the only article with all three terms
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].title == "Mount Etna"
    assert isinstance(hits[0].score, float)


def test_title_is_indexed(store, backend, tmp_path):
    # "Zanzibar" is only in the title.
    only_title = make_store([("Zanzibar", "An island off the coast of East Africa."), *DOCS])
    retriever = build_retriever(only_title, backend=backend, index_dir=tmp_path)
    assert ids(retriever.search("zanzibar", k=5)) == ["doc0"]


def test_only_matching_documents_are_returned(store, backend, tmp_path):
    retriever = build_retriever(store, backend=backend, index_dir=tmp_path)
    assert ids(retriever.search("honey", k=5)) == ["doc6"]
    assert retriever.search("the of and", k=5) == []  # stop words only
    assert retriever.search("xylophone", k=5) == []  # unknown term
    assert retriever.search("honey", k=0) == []
    with pytest.raises(ValueError, match="non-negative integer"):
        retriever.search("honey", k=-1)
    with pytest.raises(TypeError):
        retriever.search_many("honey", k=1)
    with pytest.raises(TypeError):
        retriever.search("honey", k=1, exclude="doc6")


def test_exclude_skips_ids_and_still_returns_k(store, backend, tmp_path):
    retriever = build_retriever(store, backend=backend, index_dir=tmp_path)
    query = "volcano eruption lava"
    full = ids(retriever.search(query, k=3))
    hits = retriever.search(query, k=2, exclude=[full[0], "not-an-id"])
    assert ids(hits) == full[1:3]
    # Excluding every match leaves nothing, without error.
    assert retriever.search(query, k=2, exclude=full) == []


def test_search_many_equals_repeated_search(store, backend, tmp_path):
    retriever = build_retriever(store, backend=backend, index_dir=tmp_path)
    queries = ["volcano lava", "the of", "coral reef", "printing books Europe", "bees"]
    exclude = {"doc3"}
    assert retriever.search_many(queries, 3, exclude=exclude) == [
        retriever.search(q, 3, exclude=exclude) for q in queries
    ]
    assert retriever.search_many([], 3) == []


def test_backends_agree_on_the_tiny_corpus(store, tmp_path):
    queries = ["volcano lava", "coral reef", "printing books Europe", "algorithm", "cycling"]
    tops = [
        [
            ids(hits)[:1]
            for hits in build_retriever(store, backend=b, index_dir=tmp_path).search_many(
                queries, 1
            )
        ]
        for b in BACKENDS
    ]
    assert tops[0] == tops[1]


def test_reload_gives_identical_results(store, backend, tmp_path, caplog, monkeypatch):
    queries = ["volcano eruption lava", "coral", "Ada Babbage engine", "France July"]
    fresh = build_retriever(store, backend=backend, index_dir=tmp_path)
    expected = fresh.search_many(queries, 4)
    manifest = json.loads((fresh.index_path / "manifest.json").read_text())
    assert manifest["key"]["fingerprint"] == store.fingerprint
    assert manifest["key"]["n_docs"] == len(store)
    assert not any(p.suffix == ".pkl" for p in fresh.index_path.iterdir())

    def no_build(self, texts):
        raise AssertionError("the saved index should have been loaded, not rebuilt")

    monkeypatch.setattr(type(fresh), "_build", no_build)
    with caplog.at_level(logging.INFO, logger="frames_dspy.retrieval.bm25"):
        loaded = build_retriever(store, backend=backend, index_dir=tmp_path)
    assert "loaded" in caplog.text
    assert loaded.index_path == fresh.index_path
    assert loaded.search_many(queries, 4) == expected


@pytest.mark.parametrize("damage", ["corrupt_manifest", "no_manifest", "missing_file", "truncated"])
def test_damaged_index_is_rebuilt_with_a_warning(store, backend, tmp_path, caplog, damage):
    fresh = build_retriever(store, backend=backend, index_dir=tmp_path)
    expected = fresh.search("volcano lava", 3)
    folder = fresh.index_path
    data_files = sorted(p for p in folder.iterdir() if p.suffix == ".npy")
    if damage == "corrupt_manifest":
        (folder / "manifest.json").write_text("{not json")
    elif damage == "no_manifest":
        (folder / "manifest.json").unlink()
    elif damage == "missing_file":
        data_files[0].unlink()
    else:
        data_files[0].write_bytes(data_files[0].read_bytes()[:-7])
    with caplog.at_level(logging.WARNING, logger="frames_dspy.retrieval.bm25"):
        rebuilt = build_retriever(store, backend=backend, index_dir=tmp_path)
    assert "rebuilding" in caplog.text
    assert rebuilt.search("volcano lava", 3) == expected
    # The rebuilt folder is whole again and loads silently.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="frames_dspy.retrieval.bm25"):
        build_retriever(store, backend=backend, index_dir=tmp_path)
    assert caplog.text == ""


def test_mismatched_manifest_is_rebuilt(store, tmp_path, caplog):
    fresh = build_retriever(store, index_dir=tmp_path)
    manifest_path = fresh.index_path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["key"]["fingerprint"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest))
    with caplog.at_level(logging.WARNING, logger="frames_dspy.retrieval.bm25"):
        build_retriever(store, index_dir=tmp_path)
    assert "different corpus" in caplog.text


def test_folder_depends_on_corpus_backend_and_parameters(store, tmp_path):
    base = build_retriever(store, index_dir=tmp_path).index_path
    changed_text = make_store([*DOCS[:-1], ("Printing press", "Movable type, 1440.")])
    assert changed_text.fingerprint != store.fingerprint
    assert build_retriever(changed_text, index_dir=tmp_path).index_path != base
    assert build_retriever(store, k1=1.2, index_dir=tmp_path).index_path != base
    assert build_retriever(store, b=0.5, index_dir=tmp_path).index_path != base
    assert build_retriever(store, backend="rank-bm25", index_dir=tmp_path).index_path != base
    assert build_retriever(store, index_dir=tmp_path).index_path == base
    assert base.parent == tmp_path
    assert len([p for p in tmp_path.iterdir() if not p.name.startswith(".")]) == 5


def test_parameters_change_scores(store, tmp_path):
    default = build_retriever(store, index_dir=tmp_path).search("volcano lava", 3)
    other = build_retriever(store, k1=0.9, b=0.2, index_dir=tmp_path).search("volcano lava", 3)
    assert [h.score for h in default] != [h.score for h in other]


def test_killed_build_leaves_no_index(store, backend, tmp_path, monkeypatch):
    cls = retrieval._CLASSES[backend]

    def crash(self, folder: Path) -> None:
        (folder / "partial.npy").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(cls, "_save", crash)
    with pytest.raises(KeyboardInterrupt):
        build_retriever(store, backend=backend, index_dir=tmp_path / "b")
    assert list((tmp_path / "b").iterdir()) == []


def test_a_concurrently_finished_index_is_kept(store, tmp_path):
    retriever = build_retriever(store, index_dir=tmp_path)
    manifest = retriever.index_path / "manifest.json"
    before = manifest.read_text()
    key = retrieval._index_key(store, type(retriever), retriever.k1, retriever.b)
    # A second writer of the same, already complete index leaves the first copy alone.
    retrieval._write_index(retriever, retriever.index_path, key)
    assert manifest.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [retriever.index_path.name]


def test_default_index_dir_is_the_cache(store, monkeypatch, tmp_path):
    monkeypatch.setenv("FRAMES_DSPY_CACHE", str(tmp_path))
    retriever = build_retriever(store)
    assert retriever.index_path.parent == tmp_path / "indexes"


def test_mmap_load(store, tmp_path):
    fresh = build_retriever(store, index_dir=tmp_path)
    mapped = build_retriever(store, index_dir=tmp_path, mmap=True)
    assert mapped.search_many(["volcano", "coral reef"], 3) == fresh.search_many(
        ["volcano", "coral reef"], 3
    )
    with pytest.raises(ValueError, match="mmap"):
        build_retriever(store, backend="rank-bm25", index_dir=tmp_path, mmap=True)


def test_deepcopy_shares_the_retriever(store, backend, tmp_path):
    retriever = build_retriever(store, backend=backend, index_dir=tmp_path)
    assert copy.deepcopy(retriever) is retriever
    assert copy.copy(retriever) is retriever
    holder = {"retriever": retriever, "other": [1]}
    assert copy.deepcopy(holder)["retriever"] is retriever


def test_threads_get_the_same_answers(store, backend, tmp_path):
    retriever = build_retriever(store, backend=backend, index_dir=tmp_path)
    queries = ["volcano lava", "coral reef", "printing books", "honey flowers", "cycling"] * 20
    serial = [retriever.search(q, 3) for q in queries]
    with ThreadPoolExecutor(max_workers=8) as pool:
        threaded = list(pool.map(lambda q: retriever.search(q, 3), queries))
    assert threaded == serial


def test_unknown_backend_names_value_and_choices(store, tmp_path):
    with pytest.raises(ValueError, match=r"'bm26'.*bm25s.*rank-bm25"):
        build_retriever(store, backend="bm26", index_dir=tmp_path)


def test_empty_store_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="empty"):
        build_retriever(ArticleStore([]), index_dir=tmp_path)


def test_missing_package_says_what_to_install(store, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "rank_bm25", None)  # makes `import rank_bm25` fail
    with pytest.raises(ImportError, match="pip install rank-bm25"):
        build_retriever(store, backend="rank-bm25", index_dir=tmp_path)


def test_repr_names_backend_and_size(store, tmp_path):
    retriever = build_retriever(store, index_dir=tmp_path)
    assert "bm25s" in repr(retriever) and "docs=8" in repr(retriever)
    assert len(retriever) == 8


@pytest.mark.real
def test_real_corpus_recall_and_backend_agreement(real_data, tmp_path):
    """bm25s over the real store: question-as-query recall and rank-bm25 overlap.

    Measured on the local copy (2,460 articles and 10k distractor summaries): recall@10 over the
    first 50 questions is 0.64 for bm25s (0.67 for rank-bm25), and the two backends share 96% of
    their top-10 over those 50 questions (98% over the first five). On its articles alone, as
    fetched data comes (no distractors): recall@10 0.55 (0.52), shared top-10 78% (76% over the
    first five). The backends part there because rank-bm25 floors the IDF of a word found in
    over half the documents, and in 2,460 whole articles many words are.
    """
    store = real_data.store
    if real_data.distractors:
        assert len(store) > 12_000
    else:
        assert len(store) == real_data.frames_articles > 2_000
    examples = real_data.examples[:50]
    questions = [ex.question for ex in examples]
    gold = [{a.id for a in store.resolve_many(ex.gold_urls)} for ex in examples]

    fast = build_retriever(store, backend="bm25s", index_dir=tmp_path)
    hits = fast.search_many(questions, 10)
    recall = sum(len(set(ids(h)) & g) / len(g) for h, g in zip(hits, gold, strict=True)) / 50
    assert recall > 0.5

    # rank-bm25 is slow (~5 queries/s), so compare on five questions only.
    reference = build_retriever(store, backend="rank-bm25", index_dir=tmp_path)
    slow = reference.search_many(questions[:5], 10)
    overlap = sum(len(set(ids(a)) & set(ids(b))) / 10 for a, b in zip(hits, slow, strict=False)) / 5
    assert overlap >= (0.8 if real_data.distractors else 0.7)
