"""An on-disk BM25 index of a Wikipedia snapshot: built once, streamed, resumable.

The engine is tantivy (a Rust search library with on-disk segments and block-max WAND), chosen
by measurement against bm25s in memory and memory-mapped (``python -m benchmarks.wikipedia_scale``;
the table is in the docs). It is fed the project's own tokens (:func:`retrieval.tokenize`: the
same lower-casing, stop words and Snowball stems as the FRAMES corpus's bm25s index) through a
whitespace tokenizer, so only the scoring differs: tantivy's BM25 is Lucene's with k1 = 1.2,
b = 0.75 and document lengths rounded to one of 256 levels.

A build reads the snapshot in chunks of ``chunk_size`` articles. Each chunk's texts, titles and
ids go to ``chunks/NNNNN/`` (see :mod:`frames_dspy.data.disk_store`), then its tokens to tantivy,
and
a tantivy commit makes the chunk count: a build killed at any point resumes from the articles
tantivy holds, rewriting the chunk it was in. When the stream ends the title and id look-ups are
written, then ``manifest.json`` (the key, counts, timings, every file's size and SHA-256), last.
A folder whose manifest is missing resumes; one whose files do not match it is rebuilt.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from frames_dspy.base import paths
from frames_dspy.base.files import atomic_write_json
from frames_dspy.base.locks import LOCK_NAME, lock_folder
from frames_dspy.data.corpus import CorpusError
from frames_dspy.data.disk_store import (
    DiskArticleStore,
    hash_keys,
    load_alias_titles,
    write_lookup,
    write_strings,
)
from frames_dspy.data.download import DownloadError
from frames_dspy.data.links import title_key
from frames_dspy.data.snapshot import (
    STREAM_FIX,
    Position,
    Snapshot,
    count_rows,
    pin_snapshot,
    require_hub,
    stream_batches,
)
from frames_dspy.retrieval.bm25 import TOKENIZER_SPEC, Hit, check_search, package_version, tokenize

logger = logging.getLogger(__name__)

__all__ = ["ENGINE", "SnapshotRetriever", "index_folder", "open_snapshot"]

ENGINE = "tantivy"
INDEX_FORMAT = 1
CHUNK_SIZE = 25_000
MANIFEST = "manifest.json"
#: The hub revisions remembered per config (see :func:`frames_dspy.data.snapshot.pin_snapshot`),
#: beside the indexes.
PINS = "pinned-revisions.json"
# Tantivy's BM25 constants (not settable from Python); recorded with every index.
TANTIVY_BM25 = {"k1": 1.2, "b": 0.75, "idf": "lucene", "fieldnorm": "256 levels"}
WRITER_HEAP = 512 * 2**20
# Files hashed again on every load (small); the rest are checked by size (hashed when built).
_VERIFY_ON_LOAD = ("lookup/", "tantivy/meta.json")


def _tantivy() -> Any:
    try:
        import tantivy
    except ImportError as err:
        raise ImportError(
            "the Wikipedia corpus's index needs the 'tantivy' package; run `pip install tantivy`"
        ) from err
    return tantivy


def _key(snapshot: Snapshot, chunk_size: int) -> dict[str, Any]:
    return {
        "format": INDEX_FORMAT,
        "snapshot": snapshot.identity(),
        "engine": {"name": ENGINE, "version": package_version("tantivy"), **TANTIVY_BM25},
        "tokenizer": {**TOKENIZER_SPEC, "pystemmer": package_version("PyStemmer")},
        "chunk_size": chunk_size,
    }


def index_root(index_dir: str | Path | None = None) -> Path:
    """The folder of indexes: ``index_dir``, or the user cache's ``indexes/``."""
    return Path(index_dir) if index_dir is not None else paths.cache_dir("indexes")


def index_folder(snapshot: Snapshot, *, index_dir: str | Path | None = None, chunk_size=CHUNK_SIZE):
    """The index folder of ``snapshot`` (pinned: a hub snapshot at a commit), named by a hash of
    everything the index depends on."""
    key = _key(snapshot, chunk_size)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:20]
    return index_root(index_dir) / f"wikipedia-{digest}"


# -- the manifest ---------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _index_files(folder: Path) -> list[Path]:
    skip = {MANIFEST, LOCK_NAME, "build.json"}
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.name not in skip and not p.name.startswith(".tantivy-")
    )


def check_manifest(folder: Path, key: dict[str, Any], *, full: bool = False) -> dict[str, Any]:
    """The folder's manifest if it is complete and whole, else raise CorpusError saying why.

    Every listed file must exist with its size; the small ones (look-ups, tantivy's meta.json)
    are hashed again, and with ``full`` every file is.
    """
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise CorpusError(f"{path} is missing (an unfinished build)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CorpusError(f"{path} is unreadable ({err})") from err
    if not isinstance(manifest, dict) or manifest.get("identity") != key:
        raise CorpusError(f"{path} describes another snapshot, engine or tokenizer")
    for name, entry in manifest.get("files", {}).items():
        file = folder / name
        if not file.is_file() or file.stat().st_size != entry["bytes"]:
            raise CorpusError(f"{file} is missing or has another size than {MANIFEST} says")
        if (full or name.startswith(_VERIFY_ON_LOAD)) and _sha256(file) != entry["sha256"]:
            raise CorpusError(f"{file} does not match its SHA-256 in {MANIFEST}")
    return manifest


# -- the build ------------------------------------------------------------------------------


def _schema(tantivy: Any) -> Any:
    builder = tantivy.SchemaBuilder()
    builder.add_unsigned_field("row", stored=False, indexed=False, fast=True)
    builder.add_text_field("body", stored=False, tokenizer_name="whitespace", index_option="freq")
    return builder.build()


def _write_chunk(folder: Path, batch: dict[str, list]) -> None:
    """One chunk's columns, written beside and renamed into place (replacing a stale one)."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    ids = [str(v) for v in batch["id"]]
    titles = [str(v) for v in batch["title"]]
    texts = [str(v) for v in batch["text"]]
    write_strings(tmp, "ids", ids)
    write_strings(tmp, "titles", titles)
    write_strings(tmp, "texts", texts)
    np.save(tmp / "title_hash.npy", hash_keys(title_key(t) for t in titles), allow_pickle=False)
    np.save(tmp / "id_hash.npy", hash_keys(ids), allow_pickle=False)
    digest = hashlib.sha256()
    for parts in zip(ids, titles, texts, strict=True):
        for part in parts:
            digest.update(part.encode("utf-8"))
            digest.update(b"\0")
    (tmp / "digest.txt").write_text(digest.hexdigest(), "utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)


def _die_with_parent(parent: int) -> None:
    """Have the kernel end this worker when the building process dies (Linux's
    PR_SET_PDEATHSIG), so a killed build leaves no idle tokenizer behind.

    A worker still starting when the builder is killed sets the signal after its parent is
    gone, and would wait for work forever (it holds its own queue's write end, so it never
    sees the queue close): it is then an orphan of another parent, and ends here.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pool's own shutdown is all there is
        return
    if os.getppid() != parent:
        os._exit(0)


def _tokenized(texts: list[str]) -> list[str]:
    """One part of a chunk as space-joined tokens (run in a worker process)."""
    return [" ".join(tokens) for tokens in tokenize(texts)]


class _Tokenizers:
    """Tokenizes the next chunk in worker processes while the current one is indexed.

    Tokenizing is most of a build's time (tantivy indexes far faster than Python tokenizes), so
    it is split over ``workers`` processes; with one worker it runs in this process.
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool = None
        if workers > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # Spawned, not forked: tantivy's threads are running in this process.
            context = multiprocessing.get_context("spawn")
            self.pool = ProcessPoolExecutor(
                workers,
                mp_context=context,
                initializer=_die_with_parent,
                initargs=(os.getpid(),),
            )

    def submit(self, batch: dict[str, list]) -> Callable[[], list[str]]:
        texts = [f"{t}\n{x}" for t, x in zip(batch["title"], batch["text"], strict=True)]
        if self.pool is None:
            return lambda: _tokenized(texts)
        step = -(-len(texts) // self.workers)
        parts = [
            self.pool.submit(_tokenized, texts[i : i + step]) for i in range(0, len(texts), step)
        ]
        return lambda: [doc for part in parts for doc in part.result()]

    def close(self, *, wait: bool = True) -> None:
        """Stop the workers; without ``wait`` (Ctrl-C, an error) their tasks are abandoned and
        the workers end with this process (see :func:`_die_with_parent`)."""
        if self.pool is not None:
            self.pool.shutdown(wait=wait, cancel_futures=True)


def _index_chunk(tantivy: Any, writer: Any, bodies: list[str], first_row: int) -> None:
    for offset, body in enumerate(bodies):
        doc = tantivy.Document()
        doc.add_unsigned("row", first_row + offset)
        doc.add_text("body", body)
        writer.add_document(doc)
    writer.commit()


class _Progress:
    """Articles indexed, rate and ETA: a tqdm bar when asked, else a log line a minute."""

    def __init__(self, total: int | None, done: int, show: bool) -> None:
        self.total, self.done, self.started = total, done, time.monotonic()
        self.first = done
        self.last_log = self.started
        self.bar = None
        if show:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, unit=" articles", desc="indexing")

    def add(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif time.monotonic() - self.last_log > 60:
            self.last_log = time.monotonic()
            rate = (self.done - self.first) / max(self.last_log - self.started, 1e-9)
            eta = (
                f", about {(self.total - self.done) / rate / 60:.0f} min left"
                if (self.total and rate)
                else ""
            )
            logger.info("indexed %d articles (%.0f/s%s)", self.done, rate, eta)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _load_state(folder: Path, key: dict) -> dict:
    """``build.json``: the build's key, time so far, the source's article count and the stream
    positions of the last two chunks; a fresh one (and no stale files) if the key changed."""
    path = folder / "build.json"
    try:
        state = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        state = {}
    if not isinstance(state, dict) or state.get("key") != key:
        for stale in ("tantivy", "chunks", "lookup"):
            shutil.rmtree(folder / stale, ignore_errors=True)
        state = {"key": key, "seconds": 0.0, "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
        atomic_write_json(path, state)  # before any chunk, so they resume
    return state


def _start(state: dict, done: int, name: str, say: Callable[[str], None]) -> Position | None:
    """Where the stream resumes: the saved position of the last committed chunk, so only what
    is not indexed is read; without one (or one another ``datasets`` wrote), by re-reading."""
    if not done:
        return None
    saved = [Position.from_json(p) for p in state.get("positions", [])]
    found = next((p for p in saved if p is not None and p.rows == done), None)
    if found is not None and found.loadable:
        say(f"resuming the index of {name} at article {done:,} (from its saved stream position)")
        return found
    why = f"its position was saved by {found.format}" if found else "no position was saved"
    say(
        f"resuming the index of {name} at article {done:,} by reading the first {done:,} "
        f"articles again ({why})"
    )
    return Position(done)


def _build(
    snapshot: Snapshot, folder: Path, key: dict, *, chunk_size: int, workers: int, say, progress
) -> None:
    tantivy = _tantivy()
    state = _load_state(folder, key)
    (folder / "tantivy").mkdir(parents=True, exist_ok=True)
    (folder / "chunks").mkdir(exist_ok=True)
    index_path = str(folder / "tantivy")
    exists = tantivy.Index.exists(index_path)
    index = (
        tantivy.Index.open(index_path) if exists else tantivy.Index(_schema(tantivy), index_path)
    )
    done = index.searcher().num_docs
    start = _start(state, done, snapshot.name, say)
    if not isinstance(state.get("expected"), int):
        state["expected"] = count_rows(snapshot)  # once per build: the hub's are its footers
        atomic_write_json(folder / "build.json", state)
    bar = _Progress(state["expected"], done, progress)
    writer = index.writer(heap_size=WRITER_HEAP, num_threads=1)
    tokenizers = _Tokenizers(workers)
    started = time.monotonic()

    def commit(batch: dict, position: Position, bodies: Callable[[], list[str]], chunk: int):
        nonlocal started
        _write_chunk(folder / "chunks" / f"{chunk:05d}", batch)
        state["seconds"] += time.monotonic() - started
        started = time.monotonic()
        # Saved before tantivy commits, beside the last chunk's: whichever count tantivy holds
        # after a kill, build.json has the stream position that goes with it.
        state["positions"] = [*state.get("positions", [])[-1:], position.to_json()]
        atomic_write_json(folder / "build.json", state)
        _index_chunk(tantivy, writer, bodies(), chunk * chunk_size)
        bar.add(len(batch["id"]))

    try:
        chunk, pending = done // chunk_size, None
        for batch, position in stream_batches(snapshot, start=start, batch_size=chunk_size):
            ahead = (batch, position, tokenizers.submit(batch), chunk)  # tokenized meanwhile
            if pending is not None:
                commit(*pending)
            pending, chunk = ahead, chunk + 1
        if pending is not None:
            commit(*pending)
        writer.wait_merging_threads()
    except KeyboardInterrupt:
        say(f"stopped at article {bar.done:,}; the next run resumes the index from there")
        raise
    except DownloadError as err:
        kept = f"the {bar.done:,} articles indexed so far are kept; the next run reads on"
        raise DownloadError(err.what, err.source, err.reason, fix=STREAM_FIX, kept=kept) from err
    finally:
        tokenizers.close(wait=sys.exc_info()[0] is None)
        bar.close()
    state["seconds"] += time.monotonic() - started
    _finish(folder, key, state, chunk_size=chunk_size, rows=bar.done, snapshot=snapshot)


def _check_count(folder: Path, state: dict, rows: int, snapshot: Snapshot) -> None:
    """A build that read another number of articles than its source holds is no index: the
    stream skipped or repeated rows. Its build state goes, so the next run starts over."""
    if rows == 0:
        raise CorpusError(f"{snapshot.name} holds no articles")
    expected = state.get("expected")
    if expected is not None and rows != expected:
        (folder / "build.json").unlink(missing_ok=True)
        raise CorpusError(
            f"the build of {snapshot.name} read {rows:,} articles but its parquet files hold "
            f"{expected:,}: the stream skipped or repeated rows (datasets "
            f"{package_version('datasets')}), so no index was written; upgrade datasets and "
            "rerun to build it again from the start"
        )


def _finish(folder: Path, key: dict, state: dict, *, chunk_size: int, rows: int, snapshot) -> None:
    """Check the count, write the look-ups and the manifest (last) once every chunk is in."""
    _check_count(folder, state, rows, snapshot)
    chunks = sorted(p for p in (folder / "chunks").iterdir() if p.is_dir() and p.suffix != ".tmp")
    n_chunks = -(-rows // chunk_size)
    chunks = chunks[:n_chunks]
    lookup = folder / "lookup"
    lookup.mkdir(exist_ok=True)
    for name in ("title", "id"):
        hashes = np.concatenate([np.load(c / f"{name}_hash.npy") for c in chunks])
        write_lookup(lookup, name, hashes)
    fingerprint = hashlib.sha256(
        "".join((c / "digest.txt").read_text("utf-8") for c in chunks).encode("utf-8")
    ).hexdigest()
    files = {
        str(p.relative_to(folder)): {"bytes": p.stat().st_size, "sha256": _sha256(p)}
        for p in _index_files(folder)
    }
    manifest = {
        "identity": key,
        "snapshot": snapshot.name,
        "revision": snapshot.revision,
        "articles": rows,
        "chunks": n_chunks,
        "fingerprint": fingerprint,
        "build_seconds": round(state["seconds"], 1),
        "started": state.get("started"),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "bytes": sum(entry["bytes"] for entry in files.values()),
        "files": files,
    }
    tmp = folder / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1), "utf-8")
    os.replace(tmp, folder / MANIFEST)


def open_snapshot(
    snapshot: Snapshot,
    *,
    aliases: str | Path | None = None,
    index_dir: str | Path | None = None,
    chunk_size: int = CHUNK_SIZE,
    workers: int | None = None,
    say: Callable[[str], None] | None = None,
    progress: bool = False,
) -> DiskArticleStore:
    """The snapshot's store, its index built first if it is not complete yet.

    Args:
        snapshot: Which snapshot (:func:`frames_dspy.data.snapshot.parse_snapshot`).
        aliases: The FRAMES link table whose titles resolve redirects (optional).
        index_dir: The folder of indexes (default: the user cache's ``indexes/``).
        chunk_size: Articles per chunk: what a kill can cost, and the build's memory.
        workers: Tokenizing processes while building (default: one per CPU).
        say: Where notes go (resuming, waiting for another builder, rebuilding).
        progress: Show a progress bar with an ETA while building.

    A hub snapshot is pinned to a commit first (:func:`frames_dspy.data.snapshot.pin_snapshot`,
    remembered in ``pinned-revisions.json`` beside the indexes); a finished index of a
    commit is used without the network. The store's ``manifest["snapshot"]`` names the pinned
    snapshot (``wikipedia:<config>@<commit>``), for the run to record.

    Raises:
        CorpusError: the snapshot cannot be read, or the build read another number of articles
            than its files hold (the message names it and the fix);
        DownloadError: the hub cannot be reached, or kept failing (what was built is kept).
    """
    say = say or logger.info
    workers = workers or os.cpu_count() or 1
    snapshot = pin_snapshot(snapshot, pins=index_root(index_dir) / PINS, say=say)
    folder = index_folder(snapshot, index_dir=index_dir, chunk_size=chunk_size)
    key = _key(snapshot, chunk_size)
    # One builder per index folder: a second process waits, then loads what the first built.
    with lock_folder(folder, wait=True, what="index folder"):
        try:
            manifest = check_manifest(folder, key)
        except CorpusError as problem:
            unfinished = (folder / "build.json").is_file()
            require_hub(snapshot, kept=f"the unfinished index in {folder} is kept" * unfinished)
            if (folder / MANIFEST).exists():
                say(f"the index in {folder} is damaged ({problem}); rebuilding it")
                for name in (MANIFEST, "build.json"):
                    (folder / name).unlink(missing_ok=True)
            elif not unfinished:
                say(f"indexing {snapshot.name} into {folder} (once; a stopped build resumes)")
            _build(
                snapshot,
                folder,
                key,
                chunk_size=chunk_size,
                workers=workers,
                say=say,
                progress=progress,
            )
            manifest = check_manifest(folder, key)
    store = DiskArticleStore(
        folder,
        chunk_size=chunk_size,
        n_chunks=manifest["chunks"],
        fingerprint=manifest["fingerprint"],
        aliases=load_alias_titles(aliases),
        manifest={**{k: v for k, v in manifest.items() if k != "files"}, "snapshot": snapshot.name},
    )
    return store


class SnapshotRetriever:
    """BM25 search over a :class:`DiskArticleStore` with its tantivy index.

    The same interface as :class:`frames_dspy.retrieval.bm25.Retriever`: hits sorted by decreasing
    score, ties broken by row; only articles sharing a term with the query; never copied.
    """

    backend = ENGINE

    def __init__(self, store: DiskArticleStore) -> None:
        tantivy = _tantivy()
        self.store = store
        self.index_path = store.folder / "tantivy"
        self._tantivy = tantivy
        self._index = tantivy.Index.open(str(self.index_path))
        self._schema = self._index.schema
        self._searcher = self._index.searcher()
        self._lock = threading.Lock()
        self.k1, self.b = TANTIVY_BM25["k1"], TANTIVY_BM25["b"]

    def search(self, query: str, k: int, *, exclude: Iterable[str] = ()) -> list[Hit]:
        return self.search_many([query], k, exclude=exclude)[0]

    def search_many(
        self, queries: Sequence[str], k: int, *, exclude: Iterable[str] = ()
    ) -> list[list[Hit]]:
        queries = check_search(queries, k, exclude)
        if not queries or k == 0:
            return [[] for _ in queries]
        skip = {row for i in set(exclude) if (row := self.store.row_of(i)) is not None}
        return [self._search(tokens, k, skip) for tokens in tokenize(queries)]

    def _search(self, tokens: list[str], k: int, skip: set[int]) -> list[Hit]:
        if not tokens:
            return []
        tantivy = self._tantivy
        # A repeated query word counts once per repeat, as in bm25s: one clause, boosted.
        clauses = []
        for token, repeats in Counter(tokens).items():
            clause = tantivy.Query.term_query(self._schema, "body", token)
            if repeats > 1:
                clause = tantivy.Query.boost_query(clause, float(repeats))
            clauses.append((tantivy.Occur.Should, clause))
        query = tantivy.Query.boolean_query(clauses)
        want = k + len(skip)
        limit = want + 1
        with self._lock:
            # Ask deeper while the last hit ties the wanted depth, so ties break by row (as
            # bm25s's do), not by where tantivy's segments put them.
            while True:
                # count=False: counting every match would turn off tantivy's pruning.
                found = self._searcher.search(query, limit, count=False).hits
                if len(found) < limit or found[-1][0] < found[want - 1][0]:
                    break
                limit *= 2
            rows = self._searcher.fast_field_values("row", [address for _, address in found])
        ranked = sorted(zip((-score for score, _ in found), rows, strict=True))
        hits = [(row, -neg) for neg, row in ranked if row not in skip][:k]
        return [Hit(self.store.id_of(r), self.store.title_of(r), float(s)) for r, s in hits]

    def __len__(self) -> int:
        return len(self.store)

    def __deepcopy__(self, memo: dict) -> SnapshotRetriever:
        return self

    def __copy__(self) -> SnapshotRetriever:
        return self

    def __repr__(self) -> str:
        return (
            f"SnapshotRetriever(engine={ENGINE!r}, docs={len(self)}, path={str(self.index_path)!r})"
        )
