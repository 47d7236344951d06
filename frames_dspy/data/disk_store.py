"""Articles kept on disk: millions of them, read one at a time, in bounded memory.

The in-memory :class:`~frames_dspy.data.corpus.ArticleStore` holds every text in a Python list,
which
is right for the FRAMES corpus (12,000 articles) and impossible for all of Wikipedia (about 20 GB
of text). :class:`DiskArticleStore` answers the same questions (``store[id]``, ``resolve(link)``,
``resolve_many``, ``fingerprint``, ``len``) from files written chunk by chunk while an index is
built (:mod:`frames_dspy.retrieval.disk_index`):

* ``chunks/NNNNN/`` holds one chunk's rows: ``texts``, ``titles`` and ``ids`` as string
  columns (one UTF-8 blob plus an int64 offsets array each, read through ``np.memmap``), and the
  64-bit hashes of each row's title key and id.
* ``lookup/`` holds those hashes for the whole snapshot, sorted, with the row of each: a gold
  link or an article id is found by binary search, never by a dict of millions of strings.

A row is ``chunk * chunk_size + position``, so finding a row's chunk is a division.
"""

from __future__ import annotations

import csv
import hashlib
import mmap
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from frames_dspy.data.corpus import Article, CorpusError, resolve_links
from frames_dspy.data.links import link_title, normalize_link, title_key

__all__ = [
    "DiskArticleStore",
    "StringColumn",
    "hash_keys",
    "load_alias_titles",
    "write_lookup",
    "write_strings",
]

SOURCE = "wikipedia"


def hash_keys(values: Iterable[str]) -> np.ndarray:
    """64-bit BLAKE2b hashes of strings (collisions are ~1e-7 likely among 6.4M titles)."""
    return np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(v.encode("utf-8"), digest_size=8).digest(), "little")
            for v in values
        ),
        dtype=np.uint64,
    )


def write_strings(folder: Path, name: str, values: Sequence[str]) -> None:
    """Write strings as ``{name}.bin`` (UTF-8, concatenated) and ``{name}.offsets.npy``."""
    encoded = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    with (folder / f"{name}.bin").open("wb") as handle:
        handle.writelines(encoded)
    np.save(folder / f"{name}.offsets.npy", offsets, allow_pickle=False)


class StringColumn:
    """A string column written by :func:`write_strings`, memory-mapped, read by position."""

    def __init__(self, folder: Path, name: str) -> None:
        # A plain ndarray view of the mapped offsets: np.memmap's own indexing is slow.
        offsets = np.load(folder / f"{name}.offsets.npy", mmap_mode="r", allow_pickle=False)
        self.offsets = offsets.view(np.ndarray)
        blob = folder / f"{name}.bin"
        size = blob.stat().st_size
        if int(self.offsets[-1]) != size:
            raise CorpusError(f"{blob} has {size} bytes, its offsets say {int(self.offsets[-1])}")
        self._blob = b""
        if size:  # mmap refuses an empty file; an empty column needs no bytes anyway
            with blob.open("rb") as handle:
                self._blob = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, position: int) -> str:
        start, end = int(self.offsets[position]), int(self.offsets[position + 1])
        return self._blob[start:end].decode("utf-8")


def write_lookup(folder: Path, name: str, hashes: np.ndarray) -> None:
    """Sorted hashes and the row each came from, for :class:`DiskArticleStore` look-ups."""
    order = np.argsort(hashes, kind="stable")
    np.save(folder / f"{name}.hash.npy", hashes[order], allow_pickle=False)
    np.save(folder / f"{name}.row.npy", order.astype(np.int64), allow_pickle=False)


class _Lookup:
    def __init__(self, folder: Path, name: str) -> None:
        load = np.load
        self.hashes = load(folder / f"{name}.hash.npy", mmap_mode="r").view(np.ndarray)
        self.rows = load(folder / f"{name}.row.npy", mmap_mode="r").view(np.ndarray)

    def rows_of(self, value: str) -> list[int]:
        (target,) = hash_keys([value])
        lo = int(np.searchsorted(self.hashes, target, side="left"))
        hi = int(np.searchsorted(self.hashes, target, side="right"))
        return sorted(int(r) for r in self.rows[lo:hi])


def load_alias_titles(path: str | Path | None) -> dict[str, str]:
    """Link -> the title its article was fetched under, from ``frames_link_to_page.tsv``.

    The FRAMES link table knows redirects (``John_Hancock_Center`` -> "875 North Michigan
    Avenue"); a snapshot holds only the article's current title, so the redirect's target is
    looked up when the link's own title is not there. Rows without a title are skipped.
    """
    if path is None:
        return {}
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"alias table {str(path)!r} does not exist")
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        if "link_normalized" not in (reader.fieldnames or ()):
            raise CorpusError(f"alias table {path} lacks column 'link_normalized'")
        table = {}
        for row in reader:
            link = normalize_link(row.get("link_normalized") or "")
            if link and row.get("page_title"):
                table[link] = row["page_title"]
    return table


class DiskArticleStore:
    """The articles of a snapshot index folder, with gold-link resolution.

    Args:
        folder: The index folder (see :mod:`frames_dspy.retrieval.disk_index`).
        chunk_size: Rows per chunk (the last chunk may hold fewer).
        n_chunks: How many chunks the folder holds.
        fingerprint: The build's digest over every id, title and text.
        aliases: Link -> the title it redirects to (:func:`load_alias_titles`).
        manifest: The build's record, without its file list.
    """

    def __init__(
        self,
        folder: Path,
        *,
        chunk_size: int,
        n_chunks: int,
        fingerprint: str,
        aliases: dict[str, str] | None = None,
        manifest: dict | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.chunk_size = chunk_size
        self._chunks = [self.folder / "chunks" / f"{i:05d}" for i in range(n_chunks)]
        self._columns: dict[tuple[int, str], StringColumn] = {}
        self._titles = _Lookup(self.folder / "lookup", "title")
        self._ids = _Lookup(self.folder / "lookup", "id")
        self._length = len(self._titles.rows)
        self._fingerprint = fingerprint
        self._aliases = dict(aliases or {})
        #: What the build recorded (snapshot, counts, engine, tokenizer, timings), for run configs.
        self.manifest = dict(manifest or {})

    # -- rows ---------------------------------------------------------------------------------

    def _column(self, chunk: int, name: str) -> StringColumn:
        key = (chunk, name)
        if key not in self._columns:
            # Opened once per chunk and column; a column is a few memory maps, read lazily.
            self._columns[key] = StringColumn(self._chunks[chunk], name)
        return self._columns[key]

    def _cell(self, row: int, name: str) -> str:
        if not 0 <= row < self._length:
            raise IndexError(f"row {row} is outside the store's {self._length} articles")
        chunk, position = divmod(row, self.chunk_size)
        return self._column(chunk, name)[position]

    def title_of(self, row: int) -> str:
        return self._cell(row, "titles")

    def id_of(self, row: int) -> str:
        return self._cell(row, "ids")

    def article_at(self, row: int) -> Article:
        title = self.title_of(row)
        url = "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")
        return Article(self.id_of(row), title, self._cell(row, "texts"), url, SOURCE)

    def row_of(self, article_id: str) -> int | None:
        for row in self._ids.rows_of(article_id):
            if self.id_of(row) == article_id:
                return row
        return None

    # -- the ArticleStore interface -----------------------------------------------------------

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[Article]:
        return (self.article_at(row) for row in range(self._length))

    def __contains__(self, article_id: object) -> bool:
        return isinstance(article_id, str) and self.row_of(article_id) is not None

    def __getitem__(self, article_id: str) -> Article:
        row = self.row_of(article_id)
        if row is None:
            raise KeyError(f"no article with id {article_id!r} in the store")
        return self.article_at(row)

    def __deepcopy__(self, memo: dict) -> DiskArticleStore:
        return self  # read-only and large: optimizers share it

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    def _by_title(self, title: str) -> Article | None:
        key = title_key(title)
        for row in self._titles.rows_of(key):
            if title_key(self.title_of(row)) == key:
                return self.article_at(row)
        return None

    def resolve(self, link: str) -> Article | None:
        """The article for a gold link or a bare title (or its known redirect target), or None."""
        normalized = normalize_link(link) if "wikipedia.org" in link else None
        found = self._by_title(link_title(normalized or link))
        if found is None and normalized in self._aliases:
            found = self._by_title(self._aliases[normalized])
        return found

    def resolve_many(self, links: Iterable[str]) -> list[Article]:
        """Resolved articles for several links, de-duplicated, in order; misses are skipped."""
        return resolve_links(self, links)
