"""The article store: whole Wikipedia articles, gold-link resolution and distractors.

Articles come from JSON-lines files (optionally gzipped) of ``{title, text, url?, page_id?}``
records, the format of ``frames_wiki/pages.jsonl.gz`` in the offline data. Distractors are
the lead summaries in ``distractor_wiki_summaries/summaries_en-us.json``. A gold link is
resolved by its normalised title, by the page URL, then by an alias table (redirects such as
``Minute_Maid_Park`` -> "Daikin Park").
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from frames_dspy.data.links import link_title, normalize_link, title_key

logger = logging.getLogger(__name__)

__all__ = [
    "Article",
    "ArticleStore",
    "CorpusError",
    "load_articles",
    "load_distractors",
    "load_alias_table",
    "load_corpus",
    "default_aliases",
    "resolve_links",
    "slug",
]


class CorpusError(ValueError):
    """A corpus or alias file that cannot be read; the message names the file and the fix."""


@dataclass(frozen=True, slots=True)
class Article:
    """One retrievable document: a whole Wikipedia article or a distractor summary."""

    id: str
    title: str
    text: str
    url: str | None = None
    source: str = "frames"


def slug(title: str) -> str:
    digest = hashlib.sha1(title.encode("utf-8")).hexdigest()[:8]
    return re.sub(r"\s+", "_", title.strip().lower()) + "_" + digest


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open("r", encoding="utf-8")


def load_articles(path: str | Path, *, source: str = "frames") -> list[Article]:
    """Read articles from a ``.jsonl`` or ``.jsonl.gz`` file.

    Raises:
        CorpusError: the file is missing or empty, a line is not JSON (the line number is
            given), a record lacks ``title`` or ``text``, the file is not UTF-8, or two records
            share an id.
    """
    path = Path(path)
    if not path.is_file():
        raise CorpusError(
            f"corpus file {str(path)!r} does not exist; pass --corpus PATH or set "
            "FRAMES_DATA_DIR to the folder holding frames_wiki/pages.jsonl.gz"
        )
    articles: list[Article] = []
    seen: set[str] = set()
    try:
        with _open_text(path) as handle:
            for lineno, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise CorpusError(
                        f"{path}: line {lineno} is not valid JSON ({err.msg})"
                    ) from err
                if not isinstance(record, dict) or "title" not in record or "text" not in record:
                    raise CorpusError(
                        f"{path}: line {lineno} must be an object with 'title' and 'text' fields"
                    )
                title = str(record["title"])
                article_id = str(record.get("page_id") or record.get("id") or slug(title))
                if article_id in seen:
                    raise CorpusError(f"{path}: line {lineno} repeats article id {article_id!r}")
                seen.add(article_id)
                articles.append(
                    Article(article_id, title, str(record["text"]), record.get("url"), source)
                )
    except UnicodeDecodeError as err:
        raise CorpusError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start})") from err
    except (OSError, EOFError) as err:
        raise CorpusError(f"{path} could not be read: {err}") from err
    if not articles:
        raise CorpusError(f"corpus file {str(path)!r} holds no articles")
    logger.info("loaded %d articles from %s", len(articles), path)
    return articles


def load_distractors(path: str | Path) -> list[Article]:
    """Read distractor summaries: JSON ``title -> {title, extract, ...}`` or ``title -> str``."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"distractor file {str(path)!r} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise CorpusError(f"{path} is not UTF-8 text") from err
    except json.JSONDecodeError as err:
        raise CorpusError(f"{path} is not valid JSON (line {err.lineno}: {err.msg})") from err
    if not isinstance(data, dict) or not data:
        raise CorpusError(f"{path} must be a non-empty JSON object of title -> summary")
    articles = []
    for key, value in data.items():
        if isinstance(value, Mapping):
            title, text = str(value.get("title") or key), str(value.get("extract") or "")
        else:
            title, text = str(key), str(value)
        if text.strip():
            articles.append(Article("distractor:" + slug(title), title, text, None, "distractor"))
    return articles


def load_alias_table(path: str | Path) -> dict[str, str]:
    """Read a link -> article-id table: a TSV with ``link_normalized`` and ``page_id`` columns.

    Rows with an empty ``page_id`` (links nobody could fetch) are skipped.
    """
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"alias table {str(path)!r} does not exist")
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        missing = {"link_normalized", "page_id"} - set(reader.fieldnames or ())
        if missing:
            raise CorpusError(f"alias table {path} lacks column(s) {sorted(missing)}")
        table = {}
        for row in reader:
            link = normalize_link(row["link_normalized"] or "")
            if link and row["page_id"]:
                table[link] = row["page_id"]
    return table


class ArticleStore:
    """Articles by id, with gold-link resolution.

    Args:
        articles: The documents, in a stable order (retrieval indexes follow it).
        aliases: Optional map from a normalised link (see :func:`normalize_link`) to an article
            id, used when the title does not match (redirects, renames).
    """

    def __init__(self, articles: Iterable[Article], *, aliases: Mapping[str, str] | None = None):
        self.articles: list[Article] = list(articles)
        self._by_id: dict[str, Article] = {}
        for article in self.articles:
            if article.id in self._by_id:
                raise CorpusError(f"duplicate article id {article.id!r}")
            self._by_id[article.id] = article
        self._by_title: dict[str, str] = {}
        self._by_url: dict[str, str] = {}
        # FRAMES articles win title clashes over distractor summaries.
        for article in sorted(self.articles, key=lambda a: a.source != "frames"):
            self._by_title.setdefault(title_key(article.title), article.id)
            if article.url and (link := normalize_link(article.url)):
                self._by_url.setdefault(link, article.id)
        self._aliases = {
            link: article_id
            for link, article_id in (aliases or {}).items()
            if article_id in self._by_id
        }
        self._fingerprint: str | None = None

    def __len__(self) -> int:
        return len(self.articles)

    def __iter__(self) -> Iterator[Article]:
        return iter(self.articles)

    def __contains__(self, article_id: object) -> bool:
        return article_id in self._by_id

    def __getitem__(self, article_id: str) -> Article:
        try:
            return self._by_id[article_id]
        except KeyError:
            raise KeyError(f"no article with id {article_id!r} in the store") from None

    def __deepcopy__(self, memo):
        # Optimizers deep-copy programs; the store is read-only and large, so share it.
        return self

    @property
    def fingerprint(self) -> str:
        """A sha256 over ids, titles and texts: names saved indexes and run configs."""
        if self._fingerprint is None:
            digest = hashlib.sha256()
            for article in self.articles:
                for part in (article.id, article.title, article.text):
                    digest.update(part.encode("utf-8"))
                    digest.update(b"\0")
            self._fingerprint = digest.hexdigest()
        return self._fingerprint

    def resolve(self, link: str) -> Article | None:
        """The article for a gold link (URL or canonical link) or a bare title, or None."""
        normalized = normalize_link(link) if "wikipedia.org" in link else None
        if normalized:
            for table in (self._by_url, self._aliases):
                if normalized in table:
                    return self._by_id[table[normalized]]
        article_id = self._by_title.get(title_key(link_title(link)))
        return self._by_id[article_id] if article_id else None

    def resolve_many(self, links: Iterable[str]) -> list[Article]:
        """Resolved articles for several links, de-duplicated, in order; misses are skipped."""
        return resolve_links(self, links)


def resolve_links(store, links: Iterable[str]) -> list[Article]:
    """What ``store.resolve`` finds for each link, each article once, in order (any store)."""
    result: dict[str, Article] = {}
    for link in links:
        article = store.resolve(link)
        if article is not None:
            result.setdefault(article.id, article)
    return list(result.values())


def default_aliases(corpus_path: str | Path) -> Path | None:
    """The alias table kept beside a corpus file (``frames_link_to_page.tsv``), if there is one."""
    candidate = Path(corpus_path).with_name("frames_link_to_page.tsv")
    return candidate if candidate.is_file() else None


def load_corpus(
    path: str | Path,
    *,
    aliases: str | Path | None = None,
    distractors: str | Path | None = None,
) -> ArticleStore:
    """Build an :class:`ArticleStore` from a corpus file plus optional aliases and distractors.

    Distractor summaries whose title already names a corpus article are skipped, so the
    whole article is the one retrieved.
    """
    articles = load_articles(path)
    if distractors is not None:
        titles = {title_key(a.title) for a in articles}
        extra = [a for a in load_distractors(distractors) if title_key(a.title) not in titles]
        articles.extend(extra)
    alias_table = load_alias_table(aliases) if aliases is not None else None
    return ArticleStore(articles, aliases=alias_table)
