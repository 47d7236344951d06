"""Building the article corpus from live Wikipedia, for users with internet.

The articles of every FRAMES link are fetched through the MediaWiki action API, politely: one
request at a time, at most one every ``delay`` seconds, with a user agent, ``maxlag``, gzip, and
retries with exponential backoff that honour ``Retry-After`` (HTTP 429 and 5xx, a lagged or
rate-limited API, dropped connections). Titles are looked up 50 to a request (redirects,
normalisation and missing pages come back together); the whole plain text of an article comes
one to a request, as the TextExtracts API gives whole-article extracts only singly. Each link
is cached as one JSON file as soon as it is known, so an interrupted fetch resumes where it
stopped.

:func:`default_corpus` builds the corpus once into the user cache (``~/.cache/frames-dspy/
corpus``, moved by ``FRAMES_DSPY_CACHE``) when a command needs one and none is given;
``python -m frames_dspy.wikipedia fetch --out DIR`` (:func:`fetch_corpus`) builds one
into a folder of your choice. Either writes ``pages.jsonl.gz`` (what
:func:`frames_dspy.data.corpus.load_corpus` reads), the link -> article table
``frames_link_to_page.tsv`` beside it (redirected links resolve through it), and
``manifest.json`` (counts, the links no article was found for, when and from where).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from frames_dspy.base.files import atomic_write_json, atomic_write_text
from frames_dspy.base.locks import lock_folder
from frames_dspy.base.paths import cache_dir
from frames_dspy.base.redaction import redact
from frames_dspy.data.corpus import slug
from frames_dspy.data.download import DownloadError, reason_of, unreachable
from frames_dspy.data.links import normalize_link

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_DELAY",
    "TITLES_PER_REQUEST",
    "Fetched",
    "fetch_articles",
    "write_corpus",
    "build_corpus",
    "fetch_corpus",
    "default_corpus",
    "fetched_aliases",
    "corpus_manifest",
    "cached_files",
]

_USER_AGENT = "frames-dspy/0.1 (FRAMES benchmark reproduction; article text for BM25)"
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
#: API error codes that mean "ask again later" (replication lag, a rate limit).
_RETRY_CODES = frozenset({"maxlag", "ratelimited"})
#: Titles per lookup request: the action API's limit for clients without the bot right.
TITLES_PER_REQUEST = 50
#: Seconds between the starts of two requests: at most 5 a second, one at a time.
DEFAULT_DELAY = 0.2
_MAX_PAUSE = 300.0
_FIX = (
    "point --corpus at a local pages.jsonl(.gz), or set FRAMES_DATA_DIR to a folder holding "
    "frames_wiki/pages.jsonl.gz"
)


def _endpoint(link: str, api_url: str | None) -> str:
    return api_url or f"https://{link.split('/wiki/', 1)[0]}/w/api.php"


def _cache_name(link: str) -> str:
    return hashlib.sha1(link.encode("utf-8")).hexdigest()[:16] + ".json"


class Fetched(dict):
    """Normalised link -> cached file, and how many requests the fetch made (and retried)."""

    requests: int = 0
    retries: int = 0


class _Failed(Exception):
    """A request that failed for good; ``error`` is the last cause, ``attempts`` how many."""

    def __init__(self, error: BaseException, attempts: int):
        super().__init__(str(error))
        self.error, self.attempts = error, attempts


def _cannot_connect(error: BaseException) -> bool:
    reason = getattr(error, "reason", error)
    return isinstance(reason, OSError) and not isinstance(
        reason, TimeoutError | ConnectionResetError
    )


class _Client:
    """One API endpoint, asked one request at a time, spaced, retried with backoff.

    A connection that cannot be made at all (no DNS, refused) before anything succeeded is
    not retried: that machine is offline, and waiting a minute would not help it.
    """

    def __init__(
        self, endpoint: str, *, delay: float, max_retries: int, backoff: float, timeout: float
    ):
        self.endpoint, self.delay, self.timeout = endpoint, delay, timeout
        self.max_retries, self.backoff = max_retries, backoff
        self.requests = self.retries = 0
        self._last = float("-inf")
        self._answered = False

    def _get(self, params: dict[str, str]) -> tuple[dict, Any]:
        request = urllib.request.Request(
            self.endpoint + "?" + urllib.parse.urlencode(params),
            headers={"User-Agent": _USER_AGENT, "Accept-Encoding": "gzip"},
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            body = response.read()
            if response.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            return json.loads(body.decode("utf-8")), response.headers

    def query(self, **params: str) -> dict:
        """The JSON answer of ``action=query`` with ``params``; raises :class:`_Failed`."""
        params = {
            "action": "query",
            "format": "json",
            "formatversion": "2",
            "maxlag": "5",
            **params,
        }
        for attempt in range(self.max_retries + 1):
            wait = self.delay - (time.monotonic() - self._last)
            if wait > 0:
                time.sleep(wait)
            self._last = time.monotonic()
            self.requests += 1
            retry_after = None
            try:
                payload, headers = self._get(params)
                code = (payload.get("error") or {}).get("code")
                if code is None:
                    self._answered = True
                    return payload
                error: BaseException = RuntimeError(
                    f"the API answered {code}: {payload['error'].get('info', '')}"
                )
                retryable, retry_after = code in _RETRY_CODES, headers.get("Retry-After")
            except urllib.error.HTTPError as err:
                error, retryable = err, err.code in _RETRY_STATUS
                retry_after = err.headers.get("Retry-After") if err.headers else None
            except ValueError as err:  # not JSON: a captive portal, a proxy's error page
                error, retryable = RuntimeError(f"the answer was not JSON ({err})"), False
            except (urllib.error.URLError, OSError) as err:
                error, retryable = err, self._answered or not _cannot_connect(err)
            if not retryable or attempt == self.max_retries:
                raise _Failed(error, attempt + 1)
            pause = (
                min(float(retry_after), _MAX_PAUSE)
                if retry_after and retry_after.strip().isdigit()
                else self.backoff * 2**attempt
            )
            logger.warning("retrying %s in %.1fs after: %s", self.endpoint, pause, error)
            self.retries += 1
            time.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover


def _resolve(client: _Client, titles: Sequence[str]) -> dict[str, dict | None]:
    """Each title's page (``pageid``, ``title``, ``fullurl``) after normalisation and
    redirects, or None when Wikipedia has no such page."""
    payload = client.query(prop="info", inprop="url", redirects="1", titles="|".join(titles))
    query = payload.get("query", {})
    renamed: dict[str, str] = {}
    for key in ("normalized", "converted", "redirects"):
        for item in query.get(key, []):
            renamed.setdefault(item["from"], item["to"])
    pages = {page.get("title"): page for page in query.get("pages", [])}
    found: dict[str, dict | None] = {}
    for title in titles:
        current = title
        for _ in range(4):  # normalised, converted, then redirected: a short chain
            if current in pages or current not in renamed:
                break
            current = renamed[current]
        page = pages.get(current)
        ok = page is not None and "pageid" in page and not page.get("missing")
        found[title] = page if ok and not page.get("invalid") else None
    return found


def _record(link: str, title: str, page: dict | None, text: str) -> dict:
    return {
        "link": link,
        "title": page["title"] if page else title,
        "url": page.get("fullurl", "https://" + link) if page else "https://" + link,
        "page_id": str(page["pageid"]) if page else None,
        "text": text,
        "missing": page is None or not text,
    }


def fetch_articles(
    urls: Iterable[str],
    cache_dir: str | Path,
    *,
    api_url: str | None = None,
    delay: float = DEFAULT_DELAY,
    max_retries: int = 5,
    backoff: float = 2.0,
    timeout: float = 30.0,
    batch: int = TITLES_PER_REQUEST,
    progress: bool = False,
) -> Fetched:
    """Download plain article text through the MediaWiki API, one cached JSON file per link.

    Links already in ``cache_dir`` are not fetched again, so an interrupted download resumes.
    Pages that do not exist are cached as missing (``"missing": true``) and not asked for again.

    Args:
        urls: Wikipedia URLs in any form :func:`normalize_link` accepts.
        cache_dir: Folder for the cached files (created).
        api_url: The API endpoint (default: ``https://<host>/w/api.php`` of each link).
        delay: Seconds between the starts of two requests.
        max_retries: Attempts after the first for a retryable failure.
        backoff: Base of the exponential wait between retries, in seconds (a ``Retry-After``
            header wins).
        timeout: Seconds to wait for one response.
        batch: Titles per lookup request (at most :data:`TITLES_PER_REQUEST`).
        progress: Show a progress bar with an ETA on stderr.

    Returns:
        Normalised link -> cached file path, for every link that is now cached, with the
        number of requests made and retried.

    Raises:
        DownloadError: a request still fails after ``max_retries`` retries, or cannot connect
            at all; what was fetched stays cached.
    """
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    links, done, todo = _cached_and_todo(urls, cache, api_url)
    from tqdm.auto import tqdm

    bar = tqdm(
        total=len(links),
        initial=len(done),
        unit="article",
        desc="Wikipedia",
        disable=not progress,
        file=sys.stderr,
        dynamic_ncols=True,
    )

    def keep(link: str, record: dict) -> None:
        atomic_write_json(cache / _cache_name(link), record, indent=None)
        done[link] = cache / _cache_name(link)
        bar.update(1)

    ask = _asker(done, links, cache)
    step = max(1, min(batch, TITLES_PER_REQUEST))
    clients: list[_Client] = []

    try:
        for endpoint, group in todo.items():
            client = _Client(
                endpoint, delay=delay, max_retries=max_retries, backoff=backoff, timeout=timeout
            )
            clients.append(client)
            for start in range(0, len(group), step):
                _fetch_chunk(client, group[start : start + step], ask, keep)
    finally:
        bar.close()
    done.requests = sum(client.requests for client in clients)
    done.retries = sum(client.retries for client in clients)
    return done


def _asker(done: Fetched, links: list[str], cache: Path):
    """``ask(what, client, call, *args)``: a request that failed for good becomes the one
    line users see, saying what is cached and will not be fetched again."""

    def ask(what: str, client: _Client, call, *args):
        try:
            return call(client, *args)
        except _Failed as failed:
            tries = f" after {failed.attempts} attempts" if failed.attempts > 1 else ""
            kept = f"{len(done)} of {len(links)} links are cached in {cache} and will not be "
            raise DownloadError(
                what,
                client.endpoint,
                reason_of(failed.error) + tries,
                fix=_FIX,
                kept=kept + "fetched again" if done else "",
            ) from failed.error

    return ask


def _cached_and_todo(urls: Iterable[str], cache: Path, api_url: str | None):
    """The normalised links, those already cached, and the rest by API endpoint."""
    found: dict[str, None] = {}
    for url in urls:
        link = normalize_link(url)
        if link is None:
            logger.warning("skipping %r: not a Wikipedia article link", url)
        else:
            found[link] = None
    links = list(found)
    done = Fetched(
        (link, cache / _cache_name(link)) for link in links if (cache / _cache_name(link)).is_file()
    )
    todo: dict[str, list[str]] = {}
    for link in links:
        if link not in done:
            todo.setdefault(_endpoint(link, api_url), []).append(link)
    return links, done, todo


def _fetch_chunk(client: _Client, chunk: list[str], ask, keep) -> None:
    """One request's worth of links: their titles resolved, then each page's text fetched."""
    titles = {link: link.split("/wiki/", 1)[1].replace("_", " ") for link in chunk}
    what = f"the titles of {len(chunk)} Wikipedia articles ({titles[chunk[0]]!r}, ...)"
    pages = ask(what, client, _resolve, list(dict.fromkeys(titles.values())))
    by_page: dict[int, list[str]] = {}
    for link in chunk:
        page = pages[titles[link]]
        if page is None:
            keep(link, _record(link, titles[link], None, ""))
        else:
            by_page.setdefault(page["pageid"], []).append(link)
    for pageid, same in by_page.items():
        what = f"the Wikipedia article {titles[same[0]]!r}"
        page = ask(what, client, _extract, pageid)
        for link in same:
            keep(link, _record(link, titles[link], page, (page or {}).get("extract", "")))


def _extract(client: _Client, pageid: int) -> dict | None:
    payload = client.query(prop="extracts|info", inprop="url", explaintext="1", pageids=str(pageid))
    pages = payload.get("query", {}).get("pages", [])
    page = pages[0] if pages else None
    return page if page and "pageid" in page and not page.get("missing") else None


def cached_files(cache_dir: str | Path) -> list[Path]:
    """The article files in a fetch's cache, sorted; hidden names are atomic writes in flight
    (``.Title.x1y2.tmp.json``, which ``*.json`` also matches), never articles."""
    return sorted(p for p in Path(cache_dir).glob("*.json") if not p.name.startswith("."))


def write_corpus(
    cache_dir: str | Path, out_path: str | Path, *, links: Iterable[str] | None = None
) -> int:
    """Collect fetched articles from ``cache_dir`` into one ``.jsonl.gz`` corpus file.

    Also writes ``frames_link_to_page.tsv`` beside it: every link, its article's id and title
    (empty for a missing page), so a link that redirects resolves to the article it names, here
    by id and in a Wikipedia snapshot by title.

    Args:
        cache_dir: The folder :func:`fetch_articles` filled.
        out_path: The corpus file to write.
        links: Only these normalised links (default: everything in the cache).

    Returns:
        The number of articles written (missing pages and duplicates after redirects skipped).
    """
    cache = Path(cache_dir)
    paths = (
        cached_files(cache)
        if links is None
        else [cache / _cache_name(link) for link in sorted(links)]
    )
    records: dict[str, dict] = {}
    aliases = ["link_normalized\tpage_id\tpage_title"]
    for path in paths:
        record = json.loads(path.read_text(encoding="utf-8"))
        article_id = title = ""
        if not record.get("missing"):
            kept = records.setdefault(record["title"], record)
            article_id, title = kept.get("page_id") or slug(kept["title"]), kept["title"]
        aliases.append(f"{record['link']}\t{article_id}\t{title}")
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as handle:
        for title, record in records.items():
            row = {
                "page_id": record.get("page_id") or slug(title),
                "title": title,
                "url": record["url"],
                "text": record["text"],
            }
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(out)
    atomic_write_text(out.with_name("frames_link_to_page.tsv"), "\n".join(aliases) + "\n")
    return len(records)


def _links_digest(links: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(links)).encode("utf-8")).hexdigest()


def build_corpus(
    urls: Iterable[str], folder: str | Path, *, api_url: str | None = None, **fetch: Any
) -> dict[str, Any]:
    """Fetch the articles of ``urls`` into ``folder/cache`` and write ``folder/pages.jsonl.gz``.

    Returns the manifest, also written to ``folder/manifest.json``: how many links, articles
    and requests, which links found no article (``unresolved``), from where and when.
    Keyword arguments go to :func:`fetch_articles`.
    """
    folder = Path(folder)
    urls = list(urls)
    links = sorted({link for url in urls if (link := normalize_link(url))})
    started = time.monotonic()
    done = fetch_articles(urls, folder / "cache", api_url=api_url, **fetch)
    articles = write_corpus(folder / "cache", folder / "pages.jsonl.gz", links=done)
    unresolved = sorted(
        link for link, path in done.items() if json.loads(path.read_text("utf-8"))["missing"]
    )
    unresolved += sorted(url for url in urls if normalize_link(url) is None)
    manifest = {
        "links": len(links),
        "articles": articles,
        "unresolved_links": len(unresolved),
        "unresolved": unresolved,
        "links_sha256": _links_digest(links),
        "api": redact(api_url) if api_url else "https://<host>/w/api.php",
        "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - started, 1),
        "requests": done.requests,
        "retries": done.retries,
    }
    atomic_write_json(folder / "manifest.json", manifest)
    return manifest


def fetch_corpus(
    urls: Iterable[str],
    folder: str | Path,
    *,
    say: Callable[[str], None] | None = None,
    **fetch: Any,
) -> dict[str, Any]:
    """:func:`build_corpus` of the distinct ``urls``, ``folder`` held by this process alone
    (``python -m frames_dspy.wikipedia fetch``); ``say`` gets the line that says what is
    fetched. Keyword arguments go to :func:`build_corpus`.

    Raises:
        FolderInUse: another process fetches into ``folder``.
        DownloadError: the fetch failed (what was fetched stays cached).
    """
    say = say or (lambda line: logger.info("%s", line))
    urls = list(dict.fromkeys(urls))
    folder = Path(folder)
    with lock_folder(
        folder, what="corpus folder", fix="wait for it to finish, or use another --out"
    ):
        say(f"fetching {len(urls)} articles into {folder / 'cache'} (cached ones are skipped)")
        return build_corpus(urls, folder, **fetch)


def corpus_manifest(corpus_path: str | Path) -> dict[str, Any] | None:
    """The ``manifest.json`` beside a fetched corpus file, or None for any other corpus."""
    path = Path(corpus_path).with_name("manifest.json")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and "links_sha256" in manifest else None


def default_corpus_folder(api_url: str | None = None) -> Path:
    """Where the default corpus is built: ``<cache>/corpus`` (another API gets its own)."""
    if api_url is None:
        return cache_dir("corpus")
    return cache_dir("corpus", "api-" + hashlib.sha1(api_url.encode()).hexdigest()[:10])


def fetched_aliases(api_url: str | None = None) -> Path | None:
    """The link table of the articles a first run fetched into the user cache, if any.

    A Wikipedia snapshot holds each article under its current title only; this table says
    which title a redirected FRAMES link names, so a snapshot run without ``FRAMES_DATA_DIR``
    resolves those links too (tables written before it had titles resolve none).
    """
    path = default_corpus_folder(api_url) / "frames_link_to_page.tsv"
    return path if path.is_file() else None


def default_corpus(
    urls: Iterable[str],
    *,
    api_url: str | None = None,
    say=None,
    progress: bool = False,
    **fetch: Any,
) -> Path:
    """The corpus of ``urls`` in the user cache, fetched from Wikipedia the first time.

    Reused as it is when its manifest lists the same links; otherwise the links not yet
    cached are fetched (an interrupted fetch resumes) and the corpus is rewritten.

    Args:
        urls: Every gold link of the dataset (not only the questions a run selects: the
            other articles are what BM25 must search past).
        api_url: The MediaWiki API (default: Wikipedia's, per link host).
        say: Where the one-line notes go (where the corpus is, how to reuse it).
        progress: Show the fetch's progress bar.
    """
    say = say or (lambda line: logger.info("%s", line))
    urls = list(dict.fromkeys(urls))
    links = {link for url in urls if (link := normalize_link(url))}
    folder = default_corpus_folder(api_url)
    path = folder / "pages.jsonl.gz"
    if _is_built(path, links):
        return path
    # Two first runs at once: the second waits for the first's fetch, then reuses it.
    with lock_folder(folder, wait=True, what="the corpus folder"):
        if _is_built(path, links):
            return path
        return _fetch_default(
            urls, links, folder, api_url=api_url, say=say, progress=progress, **fetch
        )


def _is_built(path: Path, links: set[str]) -> bool:
    manifest = corpus_manifest(path)
    if path.is_file() and manifest and manifest["links_sha256"] == _links_digest(links):
        logger.info("using the fetched corpus %s", path)
        return True
    return False


def _fetch_default(
    urls: list[str], links: set[str], folder: Path, *, api_url, say, progress, **fetch: Any
) -> Path:
    """Fetch what the user cache lacks and write the corpus (the folder is held)."""
    path = folder / "pages.jsonl.gz"
    left_links = [link for link in links if not (folder / "cache" / _cache_name(link)).is_file()]
    cached, left = len(links) - len(left_links), len(left_links)
    # Offline, say so at once (a name lookup can hang far longer than any timeout we set).
    for endpoint in sorted({_endpoint(link, api_url) for link in left_links}):
        if why := unreachable(endpoint):
            what = f"the Wikipedia articles of {left} FRAMES links"
            kept = f"{cached} are cached in {folder / 'cache'}" if cached else ""
            raise DownloadError(what, endpoint, why, fix=_FIX, kept=kept)
    requests = -(-left // TITLES_PER_REQUEST) + left
    delay = fetch.get("delay", DEFAULT_DELAY)
    say(
        f"no corpus given: fetching the Wikipedia articles of {len(links)} links into {folder} "
        f"({cached} already there), once; about {requests} requests, at least "
        f"{requests * delay / 60:.0f} min at one request per {delay:g} s. Ctrl-C stops it; "
        "rerun to resume"
    )
    try:
        manifest = build_corpus(urls, folder, api_url=api_url, progress=progress, **fetch)
    except KeyboardInterrupt:
        say(f"fetch interrupted: the articles fetched so far are kept in {folder / 'cache'}")
        raise
    say(
        f"corpus: {manifest['articles']} articles in {path} ({manifest['unresolved_links']} of "
        f"{len(links)} links found no article, listed in {folder / 'manifest.json'}); later runs "
        f"reuse it, or pass --corpus {path}"
    )
    return path
