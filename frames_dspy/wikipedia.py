"""Building the article corpus from live Wikipedia, for users with internet.

``python -m frames_dspy.wikipedia fetch --out DIR`` downloads the plain text of every gold
article of FRAMES through the MediaWiki API (one cached JSON file per link, so an interrupted
download resumes) and writes ``DIR/pages.jsonl.gz``, the format
:func:`frames_dspy.corpus.load_corpus` reads.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import logging
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from frames_dspy.corpus import slug
from frames_dspy.data import DatasetError, load_frames
from frames_dspy.files import atomic_write_json
from frames_dspy.links import normalize_link
from frames_dspy.paths import default_dataset

logger = logging.getLogger(__name__)

__all__ = ["fetch_articles", "write_corpus", "main"]

_USER_AGENT = "frames-dspy/0.1 (FRAMES benchmark reproduction; article text for BM25)"
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


def _cache_name(link: str) -> str:
    return hashlib.sha1(link.encode("utf-8")).hexdigest()[:16] + ".json"


def _api_request(api_url: str, title: str, *, timeout: float) -> dict:
    params = {
        "action": "query",
        "format": "json",
        "formatversion": "2",
        "prop": "extracts|info",
        "inprop": "url",
        "explaintext": "1",
        "redirects": "1",
        "titles": title,
    }
    request = urllib.request.Request(
        api_url + "?" + urllib.parse.urlencode(params), headers={"User-Agent": _USER_AGENT}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read().decode("utf-8"))


def fetch_articles(
    urls: Iterable[str],
    cache_dir: str | Path,
    *,
    api_url: str | None = None,
    delay: float = 0.5,
    max_retries: int = 5,
    backoff: float = 2.0,
    timeout: float = 30.0,
) -> dict[str, Path]:
    """Download plain article text through the MediaWiki API, one cached JSON file per link.

    Links already in ``cache_dir`` are not fetched again, so an interrupted download resumes.
    Requests are spaced by ``delay`` seconds; 429 and 5xx answers and network errors are retried
    with exponential backoff (honouring ``Retry-After``). Pages that do not exist are cached as
    missing (``"missing": true``) so they are not asked for again.

    Args:
        urls: Wikipedia URLs in any form :func:`normalize_link` accepts.
        cache_dir: Folder for the cached files (created).
        api_url: Override the API endpoint (default: ``https://<host>/w/api.php`` of each link).
        delay: Seconds between requests (be polite to Wikipedia).
        max_retries: Attempts after the first for a retryable failure.
        backoff: Base of the exponential wait between retries, in seconds.
        timeout: Seconds to wait for one response.

    Returns:
        Normalised link -> cached file path, for every link that is now cached.

    Raises:
        RuntimeError: a link still fails after ``max_retries`` retries (already cached links
            are kept).
    """
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    done: dict[str, Path] = {}
    last_request = 0.0
    for url in urls:
        link = normalize_link(url)
        if link is None:
            logger.warning("skipping %r: not a Wikipedia article link", url)
            continue
        target = cache / _cache_name(link)
        if target.is_file():
            done[link] = target
            continue
        host, title = link.split("/wiki/", 1)
        endpoint = api_url or f"https://{host}/w/api.php"
        for attempt in range(max_retries + 1):
            wait = delay - (time.monotonic() - last_request)
            if wait > 0:
                time.sleep(wait)
            last_request = time.monotonic()
            try:
                payload = _api_request(endpoint, title.replace("_", " "), timeout=timeout)
                break
            except urllib.error.HTTPError as err:
                retryable = err.code in _RETRY_STATUS
                retry_after = err.headers.get("Retry-After") if err.headers else None
                error: Exception = err
            except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
                retryable, retry_after, error = True, None, err
            if not retryable or attempt == max_retries:
                raise RuntimeError(
                    f"fetching {link} from {endpoint} failed after {attempt + 1} attempt(s): "
                    f"{error}; "
                    f"{len(done)} article(s) are cached in {cache} and will not be fetched again"
                ) from error
            pause = (
                float(retry_after)
                if retry_after and retry_after.isdigit()
                else backoff * 2**attempt
            )
            logger.warning("retrying %s in %.1fs after: %s", link, pause, error)
            time.sleep(pause)
        pages = payload.get("query", {}).get("pages", [])
        page = pages[0] if pages else {}
        record = {
            "link": link,
            "title": page.get("title", title.replace("_", " ")),
            "url": page.get("fullurl", "https://" + link),
            "page_id": str(page["pageid"]) if "pageid" in page else None,
            "text": page.get("extract", ""),
            "missing": bool(page.get("missing")) or not page.get("extract"),
        }
        atomic_write_json(target, record, indent=None)
        done[link] = target
    return done


def write_corpus(cache_dir: str | Path, out_path: str | Path) -> int:
    """Collect fetched articles from ``cache_dir`` into one ``.jsonl.gz`` corpus file.

    Returns:
        The number of articles written (missing pages and duplicates after redirects skipped).
    """
    records: dict[str, dict] = {}
    for path in sorted(Path(cache_dir).glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        if not record.get("missing"):
            records.setdefault(record["title"], record)
    out = Path(out_path)
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
    return len(records)


def main(argv: list[str] | None = None) -> int:
    """``python -m frames_dspy.wikipedia fetch``: build a corpus file from live Wikipedia."""
    parser = argparse.ArgumentParser(
        prog="python -m frames_dspy.wikipedia",
        description="Build the article corpus for FRAMES from Wikipedia (needs internet). "
        "Downloads plain text of every gold article through the MediaWiki API, one cached file "
        "per article (an interrupted run resumes), then writes OUT/pages.jsonl.gz.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("fetch", help="download the gold articles and write pages.jsonl.gz")
    fetch.add_argument("--dataset", default=default_dataset(), help="hub id or local .tsv/.csv")
    fetch.add_argument("--out", required=True, help="folder for cache/ and pages.jsonl.gz")
    fetch.add_argument("--delay", type=float, default=0.5, help="seconds between requests")
    fetch.add_argument("--limit", type=int, default=None, help="only the first N questions")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        examples = load_frames(args.dataset)[: args.limit]
    except DatasetError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    urls = list(dict.fromkeys(url for ex in examples for url in ex.gold_urls))
    out = Path(args.out)
    print(f"fetching {len(urls)} articles into {out / 'cache'} (cached ones are skipped)")
    try:
        fetch_articles(urls, out / "cache", delay=args.delay)
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    count = write_corpus(out / "cache", out / "pages.jsonl.gz")
    print(
        f"wrote {count} articles to {out / 'pages.jsonl.gz'}; use --corpus {out / 'pages.jsonl.gz'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
