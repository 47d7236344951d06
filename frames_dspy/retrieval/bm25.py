"""BM25 over whole articles, behind one interface with two backends.

* ``bm25s`` (the default): eager sparse scoring, fast, queries answered in batches.
* ``rank-bm25`` (``BM25Okapi``): the implementation of the paper's era, kept so results can be
  compared with it.

Both backends index ``title + "\\n" + text`` of every article in :class:`ArticleStore` order and
share one tokenizer (:func:`tokenize`), so any difference between them comes from the scoring
formula alone (bm25s uses the Lucene idf ``log(1 + (N - n + 0.5) / (n + 0.5))``; BM25Okapi uses
``log((N - n + 0.5) / (n + 0.5))`` floored at ``0.25 x`` the mean idf).

An index is saved to a folder under ``index_dir`` whose name hashes the corpus fingerprint, the
backend and its parameters, and is reloaded instead of rebuilt. The folder holds only ``.npy`` and
JSON files (no pickle) plus ``manifest.json``, written last; a folder whose manifest is missing,
unreadable or does not match is rebuilt with a warning. Folders are written under a temporary
name and renamed into place, so a killed build never leaves a half index behind.

Example:
    >>> store = load_corpus(paths.data_file("corpus"))            # doctest: +SKIP
    >>> retriever = build_retriever(store)                          # doctest: +SKIP
    >>> retriever.search("Who designed the Eiffel Tower?", k=4)    # doctest: +SKIP
    [Hit(article_id='eiffel_tower_…', title='Eiffel Tower', score=21.3), …]
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import numpy as np

from frames_dspy.base import paths
from frames_dspy.data.corpus import ArticleStore
from frames_dspy.data.disk_store import DiskArticleStore

logger = logging.getLogger(__name__)

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "Bm25sRetriever",
    "Hit",
    "RankBm25Retriever",
    "Retriever",
    "build_retriever",
    "check_search",
    "package_version",
    "tokenize",
]

DEFAULT_BACKEND = "bm25s"
BACKENDS = ("bm25s", "rank-bm25")

# Bump when the on-disk layout or the tokenizer changes, so old folders are never reused.
INDEX_FORMAT = 1
MANIFEST_NAME = "manifest.json"

# The one tokenizer: lower-case, scikit-learn's \w\w+ pattern, bm25s' English stop words
# (removed before stemming), then the Snowball English stemmer from PyStemmer.
TOKENIZER_SPEC: dict[str, Any] = {
    "name": "bm25s.tokenize",
    "lower": True,
    "token_pattern": r"(?u)\b\w\w+\b",
    "stopwords": "en",
    "stemmer": "english",
}

_INSTALL_HINT = {
    "bm25s": "pip install bm25s PyStemmer",
    "Stemmer": "pip install PyStemmer",
    "rank_bm25": "pip install rank-bm25",
}


def _require(module: str) -> Any:
    """Import an optional dependency or raise an ImportError saying what to install."""
    try:
        return __import__(module)
    except ImportError as err:
        raise ImportError(
            f"the retrieval backend needs the {module!r} package; run `{_INSTALL_HINT[module]}`"
        ) from err


# PyStemmer's Stemmer objects keep an internal cache and are not safe to share between
# threads, so every thread gets its own.
_local = threading.local()


def _stemmer() -> Any:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _require("Stemmer").Stemmer(TOKENIZER_SPEC["stemmer"])
        _local.stemmer = stemmer
    return stemmer


def _tokenize_raw(texts: list[str], *, return_ids: bool) -> Any:
    bm25s = _require("bm25s")
    return bm25s.tokenize(
        texts,
        lower=TOKENIZER_SPEC["lower"],
        token_pattern=TOKENIZER_SPEC["token_pattern"],
        stopwords=TOKENIZER_SPEC["stopwords"],
        stemmer=_stemmer(),
        return_ids=return_ids,
        show_progress=False,
    )


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Split texts into the stemmed tokens that both backends index and query with.

    Lower-cases, keeps runs of two or more word characters, drops bm25s' English stop words and
    stems with PyStemmer's English (Porter 2) stemmer, all through ``bm25s.tokenize``.

    Args:
        texts: The texts to tokenize (a bare string is rejected, to avoid tokenizing characters).

    Returns:
        One list of tokens per text, in order; a text with no tokens gives an empty list.
    """
    if isinstance(texts, str):
        raise TypeError("tokenize() takes a sequence of texts, not a single string")
    return _tokenize_raw(list(texts), return_ids=False)


def check_search(queries: Sequence[str], k: int, exclude: Iterable[str]) -> list[str]:
    """The queries as a list, after the argument checks every retriever's search shares."""
    if isinstance(queries, str):
        raise TypeError("search_many() takes a sequence of queries, not a single string")
    if isinstance(exclude, str):
        raise TypeError("exclude takes a collection of article ids, not a single string")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be a non-negative integer, got {k!r}")
    return list(queries)


def _document_text(title: str, text: str) -> str:
    return f"{title}\n{text}"


class Hit(NamedTuple):
    """One retrieved article."""

    article_id: str
    title: str
    score: float


class _IndexProblem(Exception):
    """A saved index folder that cannot be used; the message says why."""


class Retriever(ABC):
    """BM25 search over the articles of one :class:`ArticleStore`.

    Build one with :func:`build_retriever`. Instances are read-only after construction, safe to
    share between threads, and never copied: ``copy.deepcopy`` returns the same object, so DSPy
    optimizers that deep-copy programs share one index.

    Hits come sorted by decreasing score, ties broken by store order. Only documents that share
    at least one term with the query are returned, so a query gets fewer than ``k`` hits only
    when fewer than ``k`` (non-excluded) documents match it.
    """

    backend: ClassVar[str]

    def __init__(self, store: ArticleStore, *, k1: float, b: float, index_path: Path) -> None:
        self.store = store
        self.k1 = k1
        self.b = b
        self.index_path = index_path
        self._ids = [article.id for article in store.articles]
        self._titles = [article.title for article in store.articles]
        self._position = {article_id: i for i, article_id in enumerate(self._ids)}

    # -- the public interface -------------------------------------------------------------------

    def search(self, query: str, k: int, *, exclude: Iterable[str] = ()) -> list[Hit]:
        """The ``k`` best articles for one query.

        Args:
            query: Free text; tokenized with :func:`tokenize`.
            k: How many hits to return (at most).
            exclude: Article ids to skip (e.g. articles already in the context); the search
                fetches deeper so that ``k`` other articles are still returned when they match.

        Returns:
            Up to ``k`` hits, best first.
        """
        return self.search_many([query], k, exclude=exclude)[0]

    def search_many(
        self, queries: Sequence[str], k: int, *, exclude: Iterable[str] = ()
    ) -> list[list[Hit]]:
        """Answer a whole round of queries in one call (bm25s scores them as a batch).

        Args:
            queries: The query texts.
            k: How many hits to return per query (at most).
            exclude: Article ids to skip for every query.

        Returns:
            One list of hits per query, in query order; equal to calling :meth:`search` on each.
        """
        queries = check_search(queries, k, exclude)
        if not queries:
            return []
        if k == 0:
            return [[] for _ in queries]
        skip = {self._position[i] for i in set(exclude) if i in self._position}
        depth = min(len(self._ids), k + len(skip))
        tokens = tokenize(queries)
        results = []
        for indices, scores in self._top(tokens, depth):
            hits = []
            for index, score in zip(indices.tolist(), scores.tolist(), strict=True):
                if index in skip:
                    continue
                hits.append(Hit(self._ids[index], self._titles[index], float(score)))
                if len(hits) == k:
                    break
            results.append(hits)
        return results

    def __len__(self) -> int:
        return len(self._ids)

    def __deepcopy__(self, memo: dict) -> Retriever:
        # Optimizers deep-copy programs; the index is large and read-only, so share it.
        return self

    def __copy__(self) -> Retriever:
        return self

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(backend={self.backend!r}, docs={len(self)}, "
            f"k1={self.k1}, b={self.b}, index_path={str(self.index_path)!r})"
        )

    # -- what a backend provides ----------------------------------------------------------------

    @abstractmethod
    def _top(self, tokens: list[list[str]], depth: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each tokenized query, the ``depth`` best (indices, scores), best first."""

    @classmethod
    @abstractmethod
    def _index_params(cls, k1: float, b: float) -> dict[str, Any]:
        """Everything that changes the saved index (hashed into the folder name)."""

    @abstractmethod
    def _build(self, texts: list[str]) -> None:
        """Index the documents in memory."""

    @abstractmethod
    def _save(self, folder: Path) -> None:
        """Write the index files into an empty folder."""

    @abstractmethod
    def _load(self, folder: Path, *, mmap: bool) -> None:
        """Read the index files; raise on any inconsistency."""


def _sorted_top(scores: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``depth`` largest scores, sorted by score then index so ties are deterministic."""
    n = scores.shape[0]
    if depth <= 0:
        return np.empty(0, dtype=np.int64), scores[:0]
    # argpartition narrows to the top ``depth`` in linear time before the small sort.
    candidates = np.argpartition(-scores, depth - 1)[:depth] if depth < n else np.arange(n)
    order = np.lexsort((candidates, -scores[candidates]))
    chosen = candidates[order]
    return chosen, scores[chosen]


class Bm25sRetriever(Retriever):
    """The ``bm25s`` backend (Lucene BM25 variant, eager sparse scores, float32)."""

    backend = "bm25s"

    @classmethod
    def _index_params(cls, k1: float, b: float) -> dict[str, Any]:
        bm25s = _require("bm25s")
        return {"k1": k1, "b": b, "method": "lucene", "bm25s_version": bm25s.__version__}

    def _build(self, texts: list[str]) -> None:
        bm25s = _require("bm25s")
        # Token ids straight from the tokenizer skip a second pass that maps strings to ids.
        tokenized = _tokenize_raw(texts, return_ids=True)
        model = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        model.index(tokenized, show_progress=False)
        self._model = model

    def _save(self, folder: Path) -> None:
        self._model.save(str(folder), show_progress=False)

    def _load(self, folder: Path, *, mmap: bool) -> None:
        bm25s = _require("bm25s")
        model = bm25s.BM25.load(str(folder), mmap=mmap, show_progress=False)
        if model.scores.get("num_docs") != len(self._ids):
            raise _IndexProblem(
                f"index holds {model.scores.get('num_docs')} documents, store has {len(self._ids)}"
            )
        if (model.k1, model.b) != (self.k1, self.b):
            raise _IndexProblem(f"index has k1={model.k1}, b={model.b}")
        self._model = model

    def _top(self, tokens: list[list[str]], depth: int) -> list[tuple[np.ndarray, np.ndarray]]:
        vocab = self._model.vocab_dict
        ids = [[vocab[t] for t in query if t in vocab] for query in tokens]
        # A query with no indexed term matches nothing; bm25s is only asked about the others
        # (its placeholder empty token lies outside the score matrix and would raise).
        asked = [i for i, query in enumerate(ids) if query]
        empty = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32))
        results = [empty] * len(ids)
        if not asked:
            return results
        documents, scores = self._model.retrieve(
            [ids[i] for i in asked], k=depth, sorted=True, show_progress=False, n_threads=0
        )
        for i, row_docs, row_scores in zip(asked, documents, scores, strict=True):
            # bm25s orders ties arbitrarily; re-sort so both backends break ties by store order.
            order = np.lexsort((row_docs, -row_scores))
            row_docs, row_scores = row_docs[order], row_scores[order]
            # Lucene idf is always positive, so a zero score means no shared term.
            keep = row_scores > 0
            results[i] = (row_docs[keep], row_scores[keep])
        return results


class RankBm25Retriever(Retriever):
    """The ``rank-bm25`` backend (``BM25Okapi``, float64, one query at a time).

    Saved as the tokenised corpus (``vocab.json`` + ``token_ids.npy`` + ``offsets.npy``);
    loading skips tokenisation but re-runs ``BM25Okapi``'s own counting, which it offers no
    way to save without pickle. A small term -> documents table, derived from the same arrays,
    tells which documents share a term with the query: BM25Okapi gives a matching document a
    zero score when its term occurs in exactly half the corpus, so the score alone cannot.
    """

    backend = "rank-bm25"

    @classmethod
    def _index_params(cls, k1: float, b: float) -> dict[str, Any]:
        return {"k1": k1, "b": b, "epsilon": 0.25, "variant": "BM25Okapi"}

    def _build(self, texts: list[str]) -> None:
        corpus_tokens = tokenize(texts)
        vocab: dict[str, int] = {}
        flat: list[int] = []
        offsets = [0]
        for doc in corpus_tokens:
            flat.extend(vocab.setdefault(token, len(vocab)) for token in doc)
            offsets.append(len(flat))
        self._vocab = list(vocab)
        self._flat = np.asarray(flat, dtype=np.int32)
        self._offsets = np.asarray(offsets, dtype=np.int64)
        self._fit(corpus_tokens)

    def _save(self, folder: Path) -> None:
        (folder / "vocab.json").write_text(json.dumps(self._vocab, ensure_ascii=False), "utf-8")
        np.save(folder / "token_ids.npy", self._flat, allow_pickle=False)
        np.save(folder / "offsets.npy", self._offsets, allow_pickle=False)

    def _load(self, folder: Path, *, mmap: bool) -> None:
        vocab = json.loads((folder / "vocab.json").read_text("utf-8"))
        flat = np.load(folder / "token_ids.npy", allow_pickle=False)
        offsets = np.load(folder / "offsets.npy", allow_pickle=False)
        if not isinstance(vocab, list) or flat.dtype != np.int32 or offsets.dtype != np.int64:
            raise _IndexProblem("unexpected array types in the saved corpus")
        if offsets.shape != (len(self._ids) + 1,) or int(offsets[-1]) != flat.shape[0]:
            raise _IndexProblem("token offsets do not match the store")
        if flat.size and not 0 <= int(flat.min()) <= int(flat.max()) < len(vocab):
            raise _IndexProblem("token ids outside the vocabulary")
        self._vocab, self._flat, self._offsets = vocab, flat, offsets
        words = np.asarray(vocab, dtype=object)
        bounds = offsets.tolist()
        corpus_tokens = [
            words[flat[i:j]].tolist() for i, j in zip(bounds, bounds[1:], strict=False)
        ]
        self._fit(corpus_tokens)

    def _fit(self, corpus_tokens: list[list[str]]) -> None:
        rank_bm25 = _require("rank_bm25")
        self._model = rank_bm25.BM25Okapi(corpus_tokens, k1=self.k1, b=self.b, epsilon=0.25)
        # Postings (term id -> sorted unique document indices) as two flat arrays.
        n_docs = self._offsets.shape[0] - 1
        doc_of_token = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(self._offsets))
        pairs = np.unique(self._flat.astype(np.int64) * n_docs + doc_of_token)
        terms, self._posting_docs = np.divmod(pairs, n_docs)
        counts = np.bincount(terms, minlength=len(self._vocab))
        self._posting_ptr = np.concatenate(([0], np.cumsum(counts)))
        self._term_id = {term: i for i, term in enumerate(self._vocab)}

    def _top(self, tokens: list[list[str]], depth: int) -> list[tuple[np.ndarray, np.ndarray]]:
        results = []
        for query in tokens:
            # Unknown terms add nothing to any score; skipping them saves BM25Okapi a corpus pass.
            known = [t for t in query if t in self._term_id]
            if not known:
                results.append((np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)))
                continue
            scores = self._model.get_scores(known)
            ptr, docs = self._posting_ptr, self._posting_docs
            term_ids = [self._term_id[t] for t in known]
            matched = np.unique(np.concatenate([docs[ptr[t] : ptr[t + 1]] for t in term_ids]))
            chosen, chosen_scores = _sorted_top(scores[matched], min(depth, matched.size))
            results.append((matched[chosen], chosen_scores))
        return results


_CLASSES: dict[str, type[Retriever]] = {
    Bm25sRetriever.backend: Bm25sRetriever,
    RankBm25Retriever.backend: RankBm25Retriever,
}


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


def _index_key(store: ArticleStore, cls: type[Retriever], k1: float, b: float) -> dict[str, Any]:
    return {
        "format": INDEX_FORMAT,
        "backend": cls.backend,
        "params": cls._index_params(k1, b),
        # A new stemmer release could stem differently, so it names a different index.
        "tokenizer": {**TOKENIZER_SPEC, "pystemmer": package_version("PyStemmer")},
        "fingerprint": store.fingerprint,
        "n_docs": len(store),
    }


def _folder_name(key: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()
    return f"{key['backend']}-{digest[:20]}"


def _check_manifest(folder: Path, key: dict[str, Any]) -> None:
    """Raise :class:`_IndexProblem` unless ``folder`` holds a complete index for ``key``."""
    manifest_path = folder / MANIFEST_NAME
    if not manifest_path.is_file():
        raise _IndexProblem(f"{MANIFEST_NAME} is missing (an interrupted or foreign build)")
    try:
        manifest = json.loads(manifest_path.read_text("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _IndexProblem(f"{MANIFEST_NAME} is unreadable ({err})") from err
    if not isinstance(manifest, dict) or manifest.get("key") != key:
        raise _IndexProblem(f"{MANIFEST_NAME} describes a different corpus or parameters")
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise _IndexProblem(f"{MANIFEST_NAME} lists no files")
    for name, size in files.items():
        path = folder / name
        if not path.is_file():
            raise _IndexProblem(f"file {name!r} is missing")
        if path.stat().st_size != size:
            raise _IndexProblem(f"file {name!r} has {path.stat().st_size} bytes, expected {size}")


def _write_index(retriever: Retriever, folder: Path, key: dict[str, Any]) -> None:
    """Save into a temporary sibling folder, add the manifest last, then rename into place."""
    tmp = folder.with_name(f".{folder.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.mkdir(parents=True)
    try:
        retriever._save(tmp)
        files = {p.name: p.stat().st_size for p in sorted(tmp.iterdir()) if p.is_file()}
        manifest = {"key": key, "files": files, "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
        (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2), "utf-8")
        if folder.exists():
            try:
                _check_manifest(folder, key)
            except _IndexProblem:
                shutil.rmtree(folder)  # the unusable folder we were asked to replace
            else:
                # Another process finished the same index meanwhile; its copy is equivalent.
                logger.info("index %s was written concurrently; keeping that copy", folder)
                return
        try:
            os.replace(tmp, folder)
        except OSError:
            # Lost a race to a concurrent build of the same index: fine once that one is whole.
            if not (folder / MANIFEST_NAME).is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def build_retriever(
    store: ArticleStore,
    *,
    backend: str = DEFAULT_BACKEND,
    k1: float = 1.5,
    b: float = 0.75,
    index_dir: str | Path | None = None,
    mmap: bool = False,
) -> Retriever:
    """Load the saved BM25 index for ``store``, or build and save it.

    Args:
        store: The articles to index (title and text of each, in store order).
        backend: ``"bm25s"`` (default, fast) or ``"rank-bm25"`` (``BM25Okapi``, for comparison).
        k1: BM25 term-frequency saturation.
        b: BM25 document-length normalisation.
        index_dir: Folder holding saved indexes; defaults to ``paths.cache_dir("indexes")``.
            Each index lives in a sub-folder named by a hash of the corpus fingerprint, the
            backend and its parameters.
        mmap: Memory-map the saved score arrays instead of reading them (bm25s only); useful
            for corpora far larger than this one.

    Returns:
        A ready :class:`Retriever`.

    Raises:
        ValueError: Unknown backend, an empty store, or ``mmap`` with a backend that lacks it.
        ImportError: The backend's package is not installed (the message says what to install).
    """
    if isinstance(store, DiskArticleStore) or backend == "tantivy":
        raise ValueError(
            "a Wikipedia snapshot is searched with its own tantivy index: use "
            "frames_dspy.retrieval.disk_index.SnapshotRetriever(store); bm25s and rank-bm25 index "
            "the "
            "articles of an in-memory ArticleStore"
        )
    if backend not in _CLASSES:
        raise ValueError(f"unknown retrieval backend {backend!r}; choose one of {list(BACKENDS)}")
    if len(store) == 0:
        raise ValueError("cannot build a retriever over an empty article store")
    if mmap and backend != "bm25s":
        raise ValueError(f"mmap=True is only available with backend 'bm25s', not {backend!r}")
    cls = _CLASSES[backend]
    k1, b = float(k1), float(b)
    root = Path(index_dir) if index_dir is not None else paths.cache_dir("indexes")
    key = _index_key(store, cls, k1, b)
    folder = root / _folder_name(key)
    retriever = cls(store, k1=k1, b=b, index_path=folder)

    if folder.exists():
        started = time.perf_counter()
        try:
            _check_manifest(folder, key)
            retriever._load(folder, mmap=mmap)
        except (_IndexProblem, OSError, ValueError, KeyError, TypeError) as err:
            logger.warning("index folder %s is unusable (%s); rebuilding it", folder, err)
        else:
            logger.info(
                "loaded %s index of %d documents from %s in %.2fs",
                backend,
                len(store),
                folder,
                time.perf_counter() - started,
            )
            return retriever

    started = time.perf_counter()
    retriever._build([_document_text(a.title, a.text) for a in store.articles])
    logger.info(
        "built %s index of %d documents in %.2fs",
        backend,
        len(store),
        time.perf_counter() - started,
    )
    root.mkdir(parents=True, exist_ok=True)
    _write_index(retriever, folder, key)
    if mmap:
        # Serve from the memory-mapped files just written, as the caller asked.
        retriever._load(folder, mmap=True)
    return retriever
