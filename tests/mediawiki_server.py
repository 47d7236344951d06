"""A MediaWiki-compatible action API on 127.0.0.1, for the Wikipedia fetcher's tests.

It answers ``GET /w/api.php?action=query`` as Wikipedia does in ``formatversion=2``:

* ``prop=info&titles=A|B|...`` (at most 50 titles, else the API's ``toomanyvalues`` error):
  ``normalized`` (underscores, a lower-case first letter), ``redirects`` (with
  ``redirects=1``), and one page per title: ``pageid``, ``title``, ``fullurl``, or
  ``missing``/``invalid``;
* ``prop=extracts|info&explaintext=1&pageids=N``: that page with its whole plain text.

Faults are queued: :meth:`MediaWiki.fail` makes the next N requests answer an HTTP status (429
or 500 with a ``Retry-After``), :meth:`MediaWiki.lag` an API ``maxlag`` error. Every request's
parameters and user agent are recorded; a client that sends ``Accept-Encoding: gzip`` gets a
gzipped answer. The server stops by itself after ``lifetime`` seconds.

Run it alone, serving a corpus file, with ``python tests/mediawiki_server.py --pages
PAGES.jsonl.gz [--aliases frames_link_to_page.tsv]`` (it prints its API URL); links the alias
table maps to another article's title become redirects.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

MAX_TITLES = 50


class MediaWiki:
    """Pages, redirects and queued faults behind a local ``/w/api.php``."""

    def __init__(self, *, lifetime: float = 120.0, latency: float = 0.0) -> None:
        self.pages: dict[str, dict] = {}
        self.redirects: dict[str, str] = {}
        self.faults: list[tuple[int, dict[str, str]]] = []
        self.requests: list[dict[str, str]] = []
        self.user_agents: set[str] = set()
        self.latency = latency
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._timer = threading.Timer(lifetime, self.stop)
        self._timer.daemon = True

    # --- content and faults -----------------------------------------------------------------

    def add(self, title: str, text: str, pageid: int | None = None) -> int:
        pageid = pageid or len(self.pages) + 1
        url = "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")
        self.pages[title] = {
            "pageid": pageid,
            "ns": 0,
            "title": title,
            "fullurl": url,
            "extract": text,
        }
        return pageid

    def redirect(self, source: str, target: str) -> None:
        self.redirects[source] = target

    def fail(self, status: int, times: int = 1, retry_after: str | None = None) -> None:
        """The next ``times`` requests answer HTTP ``status``."""
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        self.faults.extend([(status, headers)] * times)

    def lag(self, times: int = 1, retry_after: str = "0") -> None:
        """The next ``times`` requests answer the API's ``maxlag`` error (HTTP 200)."""
        self.faults.extend([(-1, {"Retry-After": retry_after})] * times)

    def of_kind(self, prop: str) -> list[dict[str, str]]:
        """The recorded requests for one ``prop`` (``info`` lookups or ``extracts|info``)."""
        return [r for r in self.requests if r.get("prop") == prop]

    # --- the server -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/w/api.php"

    def start(self) -> MediaWiki:
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> MediaWiki:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- answers ------------------------------------------------------------------------------

    @staticmethod
    def _normal(title: str) -> str:
        title = " ".join(title.replace("_", " ").split())
        return title[:1].upper() + title[1:]

    def _lookup(self, titles: list[str], follow: bool) -> dict:
        query: dict = {"normalized": [], "redirects": [], "pages": []}
        seen = set()
        for asked in titles:
            title = self._normal(asked)
            if title != asked:
                query["normalized"].append({"fromencoded": False, "from": asked, "to": title})
            if follow and title in self.redirects:
                query["redirects"].append({"from": title, "to": self.redirects[title]})
                title = self.redirects[title]
            if title in seen:
                continue
            seen.add(title)
            if any(c in title for c in "<>[]{}"):
                query["pages"].append({"title": asked, "invalid": True})
            elif title in self.pages:
                page = self.pages[title]
                query["pages"].append({k: v for k, v in page.items() if k != "extract"})
            else:
                query["pages"].append({"ns": 0, "title": title, "missing": True})
        return {"batchcomplete": True, "query": {k: v for k, v in query.items() if v}}

    def _extract(self, pageid: str) -> dict:
        for page in self.pages.values():
            if str(page["pageid"]) == pageid:
                return {"batchcomplete": True, "query": {"pages": [page]}}
        return {
            "batchcomplete": True,
            "query": {"pages": [{"pageid": int(pageid), "missing": True}]},
        }

    def answer(self, params: dict[str, str]) -> tuple[int, dict[str, str], dict]:
        with self._lock:
            self.requests.append(params)
            if self.faults:
                status, headers = self.faults.pop(0)
                if status == -1:
                    error = {"code": "maxlag", "info": "Waiting for a database server: 6 s lagged"}
                    return 200, headers, {"error": error}
                return status, headers, {"error": {"code": "http", "info": f"HTTP {status}"}}
        if params.get("action") != "query" or params.get("formatversion") != "2":
            return 200, {}, {"error": {"code": "badvalue", "info": "only action=query, v2"}}
        if "pageids" in params:
            return 200, {}, self._extract(params["pageids"])
        titles = params.get("titles", "").split("|")
        if len(titles) > MAX_TITLES:
            info = f'Too many values supplied for parameter "titles". The limit is {MAX_TITLES}.'
            return 200, {}, {"error": {"code": "toomanyvalues", "info": info}}
        return 200, {}, self._lookup(titles, params.get("redirects") == "1")

    def _handler(self):
        wiki = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                parts = urlsplit(self.path)
                if parts.path != "/w/api.php":
                    self.send_error(404)
                    return
                params = {k: v[0] for k, v in parse_qs(parts.query).items()}
                wiki.user_agents.add(self.headers.get("User-Agent", ""))
                if wiki.latency:
                    time.sleep(wiki.latency)
                status, headers, payload = wiki.answer(params)
                body = json.dumps(payload).encode("utf-8")
                if "gzip" in self.headers.get("Accept-Encoding", ""):
                    body = gzip.compress(body)
                    headers = {**headers, "Content-Encoding": "gzip"}
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        return Handler


def serve_corpus(pages: Path, aliases: Path | None = None, **kwargs) -> MediaWiki:
    """A server holding every article of a ``pages.jsonl(.gz)`` file (and its redirects)."""
    wiki = MediaWiki(**kwargs)
    opener = gzip.open if pages.suffix == ".gz" else open
    ids: dict[str, str] = {}
    with opener(pages, "rt", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            wiki.add(record["title"], record["text"])
            ids[str(record.get("page_id"))] = record["title"]
    if aliases is not None:
        with aliases.open(encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
                title = MediaWiki._normal(row["link_normalized"].split("/wiki/", 1)[1])
                target = ids.get(row["page_id"])
                if target and target != title and title not in wiki.pages:
                    wiki.redirect(title, target)
    return wiki


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=Path, required=True, help="pages.jsonl(.gz) to serve")
    parser.add_argument("--aliases", type=Path, default=None, help="link -> page_id TSV")
    parser.add_argument("--lifetime", type=float, default=3600.0, help="seconds before it stops")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added per answer")
    args = parser.parse_args()
    server = serve_corpus(args.pages, args.aliases, lifetime=args.lifetime, latency=args.latency)
    server.start()
    print(
        f"{server.url} ({len(server.pages)} pages, {len(server.redirects)} redirects)", flush=True
    )
    try:
        server._thread.join()
    except KeyboardInterrupt:
        server.stop()
    print(f"{len(server.requests)} requests", flush=True)
